// The setup's and plan's flags, declared once: `memplan estimate|fit|plan|...` registers them on
// its subcommand, Python's keyword arguments are them (python/_memplan.cpp), and a plan's re-check
// line is read with them. The setup knobs in the registry (estimator/fields.h) are iterated; the
// others are listed here.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "estimator/error.h"
#include "planner/fit.h"
#include "planner/plan.h"
#include "profiles/profiles.h"

namespace memplan::api {

// Registers the flags of DESIGN.md's common set on a command.
void add_setup_flags(CLI::App& app, profiles::SetupInputs& in);

// What `memplan plan` takes beside the setup.
struct PlanFlags {
  planner::PlanAsk ask;
  std::string out;
  bool force = false;
  std::string table;   // --table 8GiB,12GiB or GPU presets
  bool fresh = false;  // --fresh: memplan's own file for --emit even when --config is in that format
};
void add_plan_flags(CLI::App& app, PlanFlags& f);

// What fit keeps as the flags say: Liger's kernels stay out under --no-liger (the user cannot use
// them) or --loss (Liger's fused loss would replace it), as plan does not search them.
planner::FitAsk fit_ask(const profiles::SetupInputs& in);

// After CLI11 refused a value it could not convert (--micro-batch abc): the error naming the flag
// ("--micro-batch: cannot read 'abc' as its value"), found by running each given option's
// conversion again (CLI11 2.1 names the option only inside its English message, which memplan does
// not parse). nullopt when no option of `app` fails again. `command` names the command in the hint.
std::optional<InputError> unconvertible_value(CLI::App& app, const std::string& command);

}  // namespace memplan::api
