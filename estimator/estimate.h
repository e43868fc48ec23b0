// The estimator's entry points: validate a setup, estimate its per-GPU memory, apply a
// calibration. Everything here is pure and fast (a few microseconds for a dense model): the
// planner calls it for every candidate.
#pragma once

#include <string>
#include <vector>

#include "estimator/breakdown.h"
#include "estimator/setup.h"

namespace memplan {

// A setup that cannot be estimated: `field` is the setup path ("model.num_attention_heads",
// "batch.micro_batch") so that profiles/ can point at the file line or flag it came from.
struct Problem {
  std::string field;
  std::string message;
  std::string hint;
};
std::vector<Problem> validate(const TrainingSetup& s);
// validate()'s words for a ZeRO stage outside 0-3, also what the readers say for a stage beyond
// an int (which never reaches the setup): nullopt for 0 to 3.
std::optional<Problem> zero_stage_problem(int64_t stage);

// Corrections measured by `memplan calibrate` on one device (calibrate/ writes them,
// profiles/ reads them). They adjust term values; they never change a formula.
struct Calibration {
  std::string device;             // device name it was measured on
  std::string file;               // profile path (for the "calibrated with" note)
  int64_t cuda_context_bytes = -1;     // replaces the family default when >= 0
  int64_t workspace_bytes = -1;        // replaces the cuBLAS default when >= 0
  // Multipliers in [kMinScale, kMaxScale]: memplan calibrate fits none (it writes 1); older
  // profiles had them. A correction beyond a factor of 4 says the model is wrong, not the card:
  // the bounds are memplan's own, kept by the reader (profiles/calibration.cpp) and the estimator.
  static constexpr double kMinScale = 0.25;
  static constexpr double kMaxScale = 4.0;
  double activation_scale = 1.0;       // multiplier on activations + logits_and_loss + transient
  double model_state_scale = 1.0;     // multiplier on weights + gradients + states
  double overhead_fraction = -1;      // allocator overhead as a fraction of dynamic bytes, [0, 1)
  int64_t overhead_bytes = 0;         // constant allocator overhead, 0 to 1 TiB
};

// Estimates the steady-state step (optimizer states resident; see estimate.cpp for the
// timeline). REQUIRES: validate(s) is empty.
MemoryBreakdown estimate(const TrainingSetup& s);
MemoryBreakdown estimate(const TrainingSetup& s, const Calibration* cal);

// The expensive half of estimate(): the dynamic bytes (activations, logits and loss,
// temporaries, autocast weight copies, gradients produced during backward) at the forward and
// backward peaks, from the segment simulation. It depends on the model, micro-batch, sequence,
// precision, checkpointing, attention, device kind, fine-tuning mode, pipeline depth and
// whether gradients persist during backward; not on the optimizer, ZeRO stage or offload. The
// planner computes it once per such key and composes many setups with it.
struct Timeline {
  PhaseState forward;        // dynamic terms only
  // With a reference model (runtime.reference_model): the moment of its no-grad forward, which
  // runs when the policy's forward has ended (dynamic terms only; empty otherwise).
  PhaseState reference_forward;
  PhaseState backward;       // dynamic terms only, layers and embedding
  PhaseState backward_head;  // dynamic terms only, the head's backward (loss spike)
  int64_t in_flight = 1;
  int64_t offloaded_bytes = 0;  // saved activations in pinned host memory (activation offload)
  std::vector<SavedTensor> saved_per_layer;  // empty unless asked for (with_rows)
};
// with_rows: also list each layer kind's saved tensors (saved_per_layer) for the breakdown's
// table; the searches (fit, plan), which read only the peaks, leave it off: naming ~1,100 rows of
// a MoE layer's experts cost more than simulating it.
Timeline activation_timeline(const TrainingSetup& s, bool with_rows = true);
// Micro-batches whose activations the first pipeline stage holds at once (1F1B: up to the
// pipeline depth, at most the accumulation steps); 1 without pipeline parallelism. Part of the
// timeline's key.
int64_t micro_batches_in_flight(const TrainingSetup& s);
// True when gradients stay as they appear during backward (micro-step 1, no ZeRO-2/3
// partitioning); part of the timeline's key.
bool gradients_persist(const TrainingSetup& s);
// The FSDP version that runs: parallel.fsdp_version, else the framework's (2 under torchtune and
// torchtitan, which apply fully_shard; 1 otherwise).
int64_t fsdp_version_of(const TrainingSetup& s);
// True when ZeRO-2/3 keep only the rank's gradient partition (several ranks, or offload).
bool gradients_partitioned(const TrainingSetup& s);
// The parameter list reduced to what the model-state terms need (one rank's view). Depends on
// the model, fine-tuning mode and tensor/pipeline/expert parallel degrees only.
struct ParamSummary {
  int64_t plain = 0;            // elements stored at the precision's bytes (not quantized, not LoRA)
  int64_t factored = 0;         // sum(rows + cols) of trainable matrices (Adafactor)
  int64_t big8 = 0, small8 = 0; // trainable elements in tensors >= / < 4096 elements (8-bit Adam)
  int64_t layer_params = 0;     // one layer's linear parameters (ZeRO-3 gathering)
  std::vector<std::pair<int64_t, int64_t>> sizes;  // (elements, count) per tensor (rounding)
  std::vector<std::pair<int64_t, int64_t>> trainable_sizes;  // (elements, count) per trainable tensor
  ParameterCounts counts;       // trainable, quantized, adapter (all LoRA trains), largest_trainable
};
ParamSummary summarize_parameters(const TrainingSetup& s);
// The optimizer stepped in backward (runtime.optimizer_in_backward): the step's temporaries per
// byte of the gradient it steps, which the timeline charges after each op that makes one; 0
// otherwise. The timeline depends on the optimizer (kind, implementation, state dtype) only
// through this, so it is part of the timeline's key.
double step_temps_per_grad_byte(const TrainingSetup& s, const ParamSummary& ps);

// estimate() on a timeline computed for a setup with the same activation key.
MemoryBreakdown estimate(const TrainingSetup& s, const Timeline& t, const Calibration* cal);
// Only the peak (no formula text): what the planner ranks by. `summary` (optional) avoids
// rebuilding the parameter list for every candidate.
int64_t estimate_peak(const TrainingSetup& s, const Timeline& t, const Calibration* cal,
                      const ParamSummary* summary = nullptr);
// What the verdict holds against the card (MemoryBreakdown::verdict_bytes: the peak, or less where
// the allocation replay runs the step in the target's share with its cache squeezed), for the
// planner's searches.
int64_t estimate_verdict_bytes(const TrainingSetup& s, const Timeline& t, const Calibration* cal,
                               const ParamSummary* summary = nullptr);
// `replay` false: the allocator term from the formula even where the allocation replay applies
// (what verdict_bound() starts from).
MemoryBreakdown compose(const TrainingSetup& s, const Timeline& t, const Calibration* cal, bool with_text,
                        const ParamSummary* summary, bool replay = true);

// What compose(s, t, cal, false, summary).verdict_bytes() is at least, known without the allocation
// replay (most of an estimate's work): the replay only adds the caching allocator's overhead to
// the tensors, or holds the verdict at the target's share where the tensors fit that share and the
// step runs there with its cache squeezed, so the verdict is at least the tensors' peak plus the
// context. The planner's searches replay only the candidates this bound does not already put over
// their budget. `exact`: the setup is not replayed, and `lower` is the verdict itself.
struct VerdictBound {
  int64_t lower = 0;
  bool exact = false;
  int64_t host_bytes = 0;  // MemoryBreakdown::host_bytes(), which the replay does not change
  int runs = -1;           // judge()'s `runs` where known without the replay (0: tensors and context outgrow the card)
};
VerdictBound verdict_bound(const TrainingSetup& s, const Timeline& t, const Calibration* cal, const ParamSummary* summary = nullptr);
// judge(compose(s, t, cal, false, nullptr), s).runs, made with replays capped at the target's share
// and at the card only (predict_runs), without the uncapped replay the verdict's peak needs: what
// the search for the largest micro-batch that runs at all asks.
bool step_runs(const TrainingSetup& s, const Timeline& t, const Calibration* cal);

// The optimizer step's peak in step 1, when states are created parameter by parameter (for
// display next to a measured step 1; the steady state is what estimate() reports).
int64_t first_step_optimizer_peak(const TrainingSetup& s, const MemoryBreakdown& steady);

// Bytes of the model states alone (weights, gradients, master weights, optimizer states) per
// GPU, the quantity of ZeRO's Figure 1.
int64_t model_state_bytes(const TrainingSetup& s);

}  // namespace memplan
