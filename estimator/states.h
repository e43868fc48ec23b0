// Internal to the estimator: what its parts (states.cpp, timeline.cpp, replay.cpp, estimate.cpp)
// share. Nothing outside estimator/ includes this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/breakdown.h"
#include "estimator/estimate.h"
#include "estimator/setup.h"

namespace memplan {
// Gradients alive before backward starts (accumulation, zero_grad(set_to_none=False), Megatron's
// permanent buffer; none with the optimizer stepped in backward).
bool gradients_resident(const TrainingSetup& s);
// DDP's gradient_as_bucket_view on several ranks: the gradients are views of its buckets.
bool ddp_gradient_views(const TrainingSetup& s);
// torch's DistributedDataParallel wraps the model (several ranks, or parallel.ddp on one).
bool ddp_wraps(const TrainingSetup& s);
}  // namespace memplan

namespace memplan::est {

constexpr int64_t kMiB = int64_t{1} << 20;

// The DeepSpeed engine runs the step: a ZeRO stage was asked for, or the framework is DeepSpeed.
bool deepspeed_engine(const TrainingSetup& s);
// The KV cache an HF model returns with use_cache=True (DynamicCache).
int64_t kv_cache_bytes(const TrainingSetup& s);
// The model one rank holds under tensor, expert and pipeline parallelism.
ModelSpec rank_model(const TrainingSetup& s);

struct OptimizerCost {
  int64_t states = 0;     // bytes of optimizer states (whole trainable set)
  int64_t transient = 0;  // temporaries during step()
  int64_t per_param_transient = 0;  // the largest one-parameter step's temporaries (optimizer in backward)
  std::string states_formula;
  std::string transient_formula;
  bool paged = false;     // states live in host memory (paged optimizers)
};

// Bytes per element of the gradients and optimizer states (the adapters' own dtype when they are
// all that trains, else the regime's).
int64_t trained_bytes(const TrainingSetup& s, const ParamSummary& ps, int64_t regime_bytes);
// The optimizer's states and step() temporaries; formulas when `text`.
OptimizerCost optimizer_cost(const TrainingSetup& s, const ParamSummary& ps, bool text);

struct States {
  int64_t weights = 0, buffers = 0, grads_full = 0, grads_static = 0, master = 0, opt = 0, opt_transient = 0;
  int64_t comm_fwd = 0, comm_step = 0, step_extra = 0;
  int64_t comm_bwd_extra = 0;  // FSDP: a block's unsharded gradient before its reduce-scatter
  int64_t grads_no_sync = 0;   // FSDP1 no_sync: the unsharded gradients kept between accumulating micro-steps
  int64_t trainable = 0, large_tensors = 0;
  bool grads_partitioned = false;
  OptimizerCost oc;
  // Where the ranks differ (torch's ZeroRedundancyOptimizer: each keeps the states of its share of
  // the parameters): `opt` and `opt_transient` are the worst rank's, `rank_states` and
  // `rank_transient` every rank's; empty where every rank holds the same.
  int64_t worst_rank = -1;
  std::vector<int64_t> rank_states, rank_transient, rank_elements;
  std::vector<HostTerm> host;
  std::string grads_formula, weights_formula, master_formula, comm_formula;
};

// The model states of rank setup `rs` (rank_model applied) of setup `s`; formulas when `text`.
States model_states(const TrainingSetup& s, const TrainingSetup& rs, const ParamSummary& ps, bool text);

// Bytes for a formula's text: "1.50 GiB", "12.0 MiB", "3.0 KiB", "12 B".
std::string human(int64_t bytes);

// A calibration's corrections within the bounds its reader keeps: InputError otherwise.
void check_calibration(const Calibration& c);
// The longest allocation sequence compose() replays (a dense 48-layer model makes ~27,000 events
// in a few milliseconds; a model with a hundred experts per layer makes millions).
inline constexpr size_t kMaxReplayEvents = 250'000;
// The allocator overhead from replaying the step's allocation sequence (replay.cpp).
bool replay_allocator(const TrainingSetup& s, const Calibration* cal, MemoryBreakdown& b, bool with_text, std::string& why_not);
// Whether replay_allocator may replace the formula's overhead (it still declines a setup whose
// sequence is longer than its budget); false: the formula's overhead is the answer.
bool replay_may_apply(const TrainingSetup& s, const Calibration* cal);
// The memory the allocator can get on the card (`room`: the capacity less the context, within an
// allocator cap) and its share of the target (`target`, 0 when the card's size is unknown).
struct AllocatorRoom {
  int64_t room = 0;
  int64_t target = 0;
};
AllocatorRoom allocator_room(const TrainingSetup& s, int64_t context);

}  // namespace memplan::est
