// memplan plan: the configuration with the highest modelled throughput whose peak stays inside
// the tier's budget, searched exhaustively over micro-batch x checkpointing x attention x
// precision x optimizer x ZeRO stage x offload, with the runners-up and why each lost.
// Memory comes from estimate() (activation timelines cached per key, composition per
// candidate); speed from throughput.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "estimator/estimate.h"
#include "planner/throughput.h"

namespace memplan::planner {

// Budget tiers (the progressive tuning of memory guides: safe, balanced, aggressive).
double tier_fraction(const std::string& tier);  // 0.85 / 0.90 / 0.95; 0 when unknown

// Which training stack the plan is for; it decides the precision regimes on offer and which
// checkpointing modes the stack can express.
enum class Stack {
  any,        // PyTorch (autocast / pure bf16, DDP) without ZeRO, DeepSpeed with ZeRO
  deepspeed,  // DeepSpeed: mixed-bf16/fp16 or fp32 at every ZeRO stage
  hf,         // HF Trainer: as any, checkpointing only none or full
  lightning,  // Lightning: as any, checkpointing none or full
  torchtune,  // torchtune recipes: pure bf16 or fp32, SDPA, checkpointing none or full, FSDP (CPU
              // offload with several GPUs), no ZeRO
  litgpt,     // LitGPT scripts: *-true or *-mixed precisions, SDPA, checkpointing fixed by the GPU
              // count (none on one, full on several), no ZeRO or offload
};

struct PlanRequest {
  TrainingSetup base;        // model, device, GPU count, sequence, fine-tuning, runtime
  int64_t global_batch = 0;  // sequences per optimizer step over all GPUs
  double budget = 0.90;      // fraction of device memory the peak may use
  Stack stack = Stack::any;
  std::vector<OptimizerKind> optimizers;      // allowed; empty: the base's optimizer
  std::vector<Precision> precisions;          // allowed; empty: what the stack and GPU support
  std::vector<AttentionImpl> attentions;      // allowed; empty: what the device supports
  std::vector<Checkpointing> checkpointings;  // allowed; empty: none, selective, every:2, every:4, full
  bool allow_offload = true;
  int64_t max_micro_batch = 1024;
  const Calibration* calibration = nullptr;
};

struct Candidate {
  TrainingSetup setup;
  int64_t peak_bytes = 0;
  StepTime time;
  int64_t global_batch = 0;  // micro-batch x accumulation x data-parallel ranks
  bool fits = false;
};

// A configuration that differs from the winner in one dimension, and why it lost.
struct RunnerUp {
  std::string dimension;  // "micro-batch", "checkpointing", "ZeRO stage", ...
  std::string value;      // "8", "none", "3", ...
  Candidate candidate;
  std::string why;        // "does not fit: 41.2 GiB > 36.0 GiB budget" / "-18% throughput: ..."
};

struct PlanResult {
  bool found = false;
  Candidate best;
  std::vector<RunnerUp> runners_up;
  int64_t budget_bytes = 0;
  std::string batch_note;       // when the global batch cannot be met exactly
  // Search statistics.
  int64_t candidates = 0;       // grid points classified
  int64_t fitting = 0;
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
  std::optional<int64_t> config_global_batch;  // the config file's global batch
  std::string tier = "balanced";               // --tier
  std::optional<double> budget;                // --budget (overrides the tier)
  std::string optimizers, precisions;          // --optimizers / --precisions comma lists
  bool optimizer_fixed = false, precision_fixed = false;  // --optimizer / --precision given
  bool attention_fixed = false, checkpointing_fixed = false;
  bool no_offload = false;
  int64_t max_micro_batch = 1024;
  std::string emit;                            // --emit format name ("" when none)
};

// The search request for a built setup, or InputError at the flag that makes it impossible: no
// target capacity, no global batch, fewer sequences than data-parallel ranks, an unknown tier,
// budget, optimizer, precision or emit format.
PlanRequest make_request(const TrainingSetup& s, const PlanAsk& ask, const Calibration* calibration);

// REQUIRES: validate(req.base) is empty, req.base.device.capacity_bytes > 0,
// req.global_batch >= data-parallel ranks. `gpus` (optional) lists other cards to try when
// nothing fits: (name, DeviceSpec).
PlanResult plan(const PlanRequest& req, const std::vector<std::pair<std::string, DeviceSpec>>& gpus = {});

}  // namespace memplan::planner
