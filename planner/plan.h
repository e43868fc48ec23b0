// memplan plan: the configuration with the highest modelled throughput whose peak stays inside
// the tier's budget (and whose host memory fits the node), or the simplest within the model's
// resolution of it (less offload, less sharding, fewer extra packages: plan.cpp), searched exhaustively over micro-batch
// x checkpointing x attention x precision x optimizer x sharding/offload (space.h), with the
// runners-up and why each lost. One search serves every tier and every --emit format: a format
// that cannot express the best changes which candidate is written (said in the result), never the
// search. Memory comes from estimate() (activation timelines cached per key, composition per
// candidate); speed from throughput.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "estimator/estimate.h"
#include "planner/emit.h"
#include "planner/space.h"
#include "planner/throughput.h"

namespace memplan::planner {

// Budget tiers (the progressive tuning of memory guides: safe, balanced, aggressive).
double tier_fraction(const std::string& tier);  // 0.85 / 0.90 / 0.95; 0 when unknown
const std::vector<std::string>& tier_names();   // safe, balanced, aggressive

struct PlanRequest {
  TrainingSetup base;        // model, device, GPU count, sequence, fine-tuning, runtime, host memory
  int64_t global_batch = 0;  // sequences per optimizer step over all GPUs
  double budget = 0.90;      // fraction of device memory the peak may use (and of host RAM per node)
  Constraints constraints;   // what the user fixed or allowed
  std::optional<SearchSpace> space;  // the space to search; plan_space(base, constraints) when unset
  std::optional<EmitFormat> format;  // --emit: the pick is the best this format can express
  bool exact_batch_only = false;     // only micro-batch x accumulation x ranks == global_batch (fit)
  int64_t max_micro_batch = 1024;
  bool explain = true;               // runners-up and tiers (fit, which ranks every group, skips them)
  // Every group's exact best (group_bests, fitting): fit and report, which list them. Otherwise
  // a group is replayed only where its bounds say it could change the pick, the tiers, a note or
  // a runner-up (the picks are the same either way; tests/planner/plan_test.cpp).
  bool resolve_all = false;
  const Calibration* calibration = nullptr;
};

struct Candidate {
  TrainingSetup setup;
  int64_t peak_bytes = 0;
  StepTime time;
  int64_t global_batch = 0;        // micro-batch x accumulation x data-parallel ranks
  int64_t host_per_node_bytes = 0; // host terms of one rank x ranks per node
  bool host_fits = true;           // within the budget of the node's RAM (true when it is unknown)
  bool fits = false;               // peak within the budget and host_fits
};

// A configuration that differs from the winner in one dimension, and why it lost.
struct RunnerUp {
  std::string dimension;  // "micro-batch", "checkpointing", "ZeRO/offload", ...
  std::string value;      // "8", "none", "ZeRO-3", ...
  Candidate candidate;
  std::string why;        // "does not fit: 41.2 GiB > 36.0 GiB budget" / "-18% throughput: ..."
};

// The best plan at one tier's budget, from the same search.
struct TierPlan {
  std::string tier;       // safe | balanced | aggressive
  double fraction = 0;
  int64_t budget_bytes = 0;
  bool found = false;
  Candidate best;
};

struct PlanResult {
  bool found = false;
  Candidate best;               // what is printed and written (the best the --emit format can express)
  std::optional<Candidate> unrestricted;  // the overall best, when the format could not express it
  std::string format_note;      // why the format changed the pick (empty when it did not)
  std::vector<std::string> regime_notes;  // "amp-bf16 runs as mixed-bf16 under DeepSpeed ..."
  std::vector<RunnerUp> runners_up;
  std::vector<TierPlan> tiers;  // safe, balanced, aggressive
  std::vector<Candidate> group_bests;  // the best fitting candidate of every group resolved (all with resolve_all), fastest first
  std::vector<LeftOut> left_out;       // options the card, framework or constraints ruled out
  int64_t budget_bytes = 0;
  int64_t host_budget_bytes = 0;  // budget x host RAM per node (0: unknown)
  int64_t host_short = 0;         // candidates that fit the GPU but not the node's RAM
  std::string batch_note;         // when the global batch cannot be met exactly
  // Search statistics.
  int64_t candidates = 0;       // grid points classified
  int64_t fitting = 0;          // candidates that fit, in the groups resolved
  int64_t undecided = 0;        // candidates of the groups not resolved whose bounds are within the budget (they may fit)
  int64_t timelines = 0;        // activation timelines simulated
  int64_t compositions = 0;     // memory compositions evaluated
  double seconds = 0;
  // When nothing fits.
  std::string why_not;
  std::string smallest_gpu;           // the smallest preset card where a plan exists (same count)
  int64_t smallest_gpu_count = 0;     // the fewest GPUs of the requested card where one exists
};

// What `memplan plan` was asked, as given (flags, or the config file), before validation.
struct PlanAsk {
  std::optional<int64_t> global_batch;         // --global-batch
  std::optional<int64_t> config_global_batch;  // the config file's global batch (global_batch_size, train_batch_size)
  std::optional<int64_t> given_batch;          // micro-batch x accumulation x ranks when the config or flags set the micro-batch
  std::string tier = "balanced";               // --tier
  std::optional<double> budget;                // --budget (overrides the tier)
  std::string optimizers, precisions;          // --optimizers / --precisions comma lists
  bool optimizer_fixed = false, precision_fixed = false;  // --optimizer / --precision given
  bool attention_fixed = false, checkpointing_fixed = false;
  bool zero_fixed = false, offload_fixed = false, fsdp_fixed = false;  // --zero / --offload / --fsdp given
  std::string liger_fixed_by;  // "--no-liger", "--liger", "--loss chunked": Liger as given, not searched
  bool no_deepspeed = false;                   // --no-deepspeed
  bool no_offload = false;
  int64_t max_micro_batch = 1024;
  std::string emit;                            // --emit format name ("" when none)
};

// Where the request's global batch came from ("--global-batch", "the config's global batch",
// "micro-batch x accumulation x GPUs").
std::string global_batch_source(const PlanAsk& ask);

// The search request for a built setup, or InputError at the flag that makes it impossible: no
// target capacity, no global batch, fewer sequences than data-parallel ranks, an unknown tier,
// budget, optimizer, precision or emit format, contradictory constraints (--zero 3
// --no-deepspeed), or constraints that leave nothing the card runs.
PlanRequest make_request(const TrainingSetup& s, const PlanAsk& ask, const Calibration* calibration);

// REQUIRES: validate(req.base) is empty, req.base.device.capacity_bytes > 0,
// req.global_batch >= data-parallel ranks. `gpus` (optional) lists other cards to try when
// nothing fits: (name, DeviceSpec).
PlanResult plan(const PlanRequest& req, const std::vector<std::pair<std::string, DeviceSpec>>& gpus = {});

// The threads plan() searches the groups on: MEMPLAN_THREADS when set to a count (1: the caller's
// thread alone, at most kMaxSearchThreads), else the machine's cores. The answers are the same
// whatever the count. InputError when MEMPLAN_THREADS is set to anything else.
inline constexpr long kMaxSearchThreads = 256;
size_t search_threads();

// The per-memory-size table (--table 8GiB,12GiB,... or GPU presets): one plan per device.
struct TableRow {
  std::string label;  // "8 GiB", "rtx-3060-12gb"
  DeviceSpec device;
  PlanResult result;
};
std::vector<TableRow> plan_table(const PlanRequest& req, const std::vector<std::pair<std::string, DeviceSpec>>& devices);
// The table as markdown: GPU memory | micro-batch | accumulation | other optimizations | peak.
std::string table_markdown(const std::vector<TableRow>& rows, const TrainingSetup& base);
// The optimisations of a plan relative to the plain setup ("mixed precision (bf16)", "gradient
// checkpointing (full)", "flash attention", "8-bit AdamW", "ZeRO-2 + offload optimizer"), in the
// guides' words.
std::vector<std::string> optimisations(const TrainingSetup& plan, const TrainingSetup& base);

}  // namespace memplan::planner
