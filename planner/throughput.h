// A step-time model good enough to rank configurations, not to promise a number: FLOPs at the
// GPU's peak with a utilisation that grows with the micro-batch, plus the exposed part of ZeRO
// communication and offload traffic at the profile's bandwidths. Everything it prints is
// labelled as modelled.
#pragma once

#include <string>

#include "estimator/estimate.h"
#include "estimator/setup.h"

namespace memplan::planner {

struct StepTime {
  double flops_per_step = 0;   // model FLOPs of one optimizer step on one GPU, recompute included
  double utilisation = 0;      // assumed fraction of peak FLOP/s
  double compute_s = 0;        // forward + backward (+ recompute) of all micro-steps
  double comm_s = 0;           // gradient reduction / parameter gathers not hidden by compute
  double offload_s = 0;        // host <-> device transfers and the CPU optimizer
  double optimizer_s = 0;      // the optimizer step on the GPU (memory-bound)
  double total_s = 0;
  double tokens_per_s = 0;     // whole job: global batch x sequence / total_s
};

// FLOPs per token of forward + backward (6 x active parameters, plus attention), before
// recomputation. LoRA skips the frozen weights' gradients (4 x instead of 6 x).
// `ps` is the rank's parameter summary (summarize_parameters), so tensor parallelism divides.
double train_flops_per_token(const TrainingSetup& s, const ParamSummary& ps);
// Extra forward FLOPs per token that the checkpointing mode recomputes.
double recompute_flops_per_token(const TrainingSetup& s, const ParamSummary& ps);

StepTime step_time(const TrainingSetup& s, const ParamSummary& ps);

}  // namespace memplan::planner
