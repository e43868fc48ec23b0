// memplan's versioned documents (DESIGN.md: memplan.estimate/v1, memplan.fit/v1, memplan.plan/v1,
// memplan.plan-table/v1) and the one-line descriptions the tables print, built from the library's
// results. `memplan COMMAND --json|--yaml` prints them; Python's memplan.estimate(), fit() and
// plan() return them as Python objects (python/_memplan.cpp), with no text in between.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "api/flags.h"
#include "api/plan_file.h"
#include "estimator/breakdown.h"
#include "estimator/estimate.h"
#include "planner/fit.h"
#include "planner/plan.h"
#include "planner/request.h"
#include "profiles/profiles.h"

namespace memplan::api {

// The estimate document (schema memplan.estimate/v1).
nlohmann::json estimate_json(const profiles::BuiltSetup& b, const MemoryBreakdown& e);
nlohmann::json setup_json(const TrainingSetup& s);
nlohmann::json verdict_json(const Verdict& v, const TrainingSetup& s);
// An estimate's verdict as its document shows it: verdict_json of judge(), what the verdict held
// against the target (needed_bytes) and whether the allocator overhead in it is guessed.
nlohmann::json estimate_verdict_json(const MemoryBreakdown& e, const TrainingSetup& s);
// The host document: terms of one GPU rank (per_gpu, with `terms`/`total_bytes` kept at the top for
// v1 readers) and per node (ranks, total, capacity and verdict; null when the node's RAM is unknown).
nlohmann::json host_json(const MemoryBreakdown& e, const TrainingSetup& s);
nlohmann::json runtime_json(const TrainingSetup& s);
// Where each setup value came from: "cfg.yaml:7:3 (training.micro_batch_size)", "--flag",
// "<framework> default: <upstream source>", or "memplan default".
nlohmann::json sources_json(const profiles::BuiltSetup& b);

// The fit document (memplan.fit/v1): the estimate document of the setup as given, and fit's report.
nlohmann::json fit_json(const profiles::BuiltSetup& b, const MemoryBreakdown& e, const planner::FitReport& r);

// One configuration of a plan (its best, a tier's best, a runner-up).
nlohmann::json candidate_json(const planner::Candidate& c);
// memplan.plan/v1: the request, what was searched, the plan (or why none) and the config written.
nlohmann::json plan_json(const planner::ResolvedPlan& rp, const planner::PlanResult& r, const EmittedConfig& e, const PlanFlags& f,
                         const profiles::SetupInputs& in);
// memplan.plan-table/v1: one plan per memory size (--table).
nlohmann::json plan_table_json(const planner::ResolvedPlan& rp, const std::vector<planner::TableRow>& rows);

// A one-line description of the setup ("amp-bf16, adamw, micro-batch 4 x 1024 tokens, ...").
std::string describe(const TrainingSetup& s);
// The runtime line: framework, torch version, loss, optimizer kernel and the knobs that are on,
// and which values the framework decided.
std::string describe_runtime(const profiles::BuiltSetup& b);
// "host memory: 1.13 TiB per GPU (1.13 TiB pinned), 1.13 TiB per node (1 rank); node RAM unknown (...)".
std::string host_line(const MemoryBreakdown& e, const TrainingSetup& s);

}  // namespace memplan::api
