// The config a plan writes (--emit FORMAT, --out FILE): memplan's emitter, or the user's --config
// with only the plan's changes where it is in that format and re-estimates to the plan's peak
// (planner/keep.h); written atomically. Shared by `memplan plan` and Python's memplan.plan().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/flags.h"
#include "planner/emit.h"
#include "planner/keep.h"
#include "planner/plan.h"
#include "planner/request.h"
#include "profiles/profiles.h"

namespace memplan::api {

// --config's own file with the plan's changes, and the flags its re-check needs beside the
// header's.
struct KeptConfig {
  planner::KeptFile file;
  std::vector<std::string> recheck_extra;
};

// The config --emit asked for.
struct EmittedConfig {
  planner::EmitContext context;
  std::string text;                // the file's text (printed on stdout when there is no --out)
  std::string written;             // --out, once written
  std::optional<KeptConfig> kept;  // --config's own file with the plan's changes
  std::string not_kept;            // why it could not be kept
};

// The command line's own contradictions, before anything is read (--out without --emit, --emit
// with a document on stdout, --table with --emit, an --out that may not be replaced).
// `document_output`: --json/--yaml (the document is printed where an --emit config would go).
void check_plan_flags(const profiles::SetupInputs& in, const PlanFlags& f, bool document_output);

// The config of plan `r` in `rp`'s format, written to f.out when given. Empty when no --emit.
EmittedConfig emit_plan_config(const profiles::SetupInputs& in, const PlanFlags& f, const planner::ResolvedPlan& rp,
                               const planner::PlanResult& r);

// The command that re-checks the emitted file written at (or named) `file`.
std::string recheck_command(const EmittedConfig& e, const planner::ResolvedPlan& rp, const std::string& file);

}  // namespace memplan::api
