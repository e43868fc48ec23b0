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

// Corrections measured by `memplan calibrate` on one device (calibrate/ writes them,
// profiles/ reads them). They adjust term values; they never change a formula.
struct Calibration {
  std::string device;             // device name it was measured on
  std::string file;               // profile path (for the "calibrated with" note)
  int64_t cuda_context_bytes = -1;     // replaces the family default when >= 0
  int64_t workspace_bytes = -1;        // replaces the cuBLAS default when >= 0
  double activation_scale = 1.0;       // multiplier on activations + logits_and_loss + transient
  double model_state_scale = 1.0;     // multiplier on weights + gradients + states
  double overhead_fraction = -1;      // allocator overhead as a fraction of dynamic bytes (>= 0)
  int64_t overhead_bytes = 0;         // constant allocator overhead
};

// Estimates the steady-state step (optimizer states resident; see estimate.cpp for the
// timeline). REQUIRES: validate(s) is empty.
MemoryBreakdown estimate(const TrainingSetup& s);
MemoryBreakdown estimate(const TrainingSetup& s, const Calibration* cal);

// Bytes of the model states alone (weights, gradients, master weights, optimizer states) per
// GPU, the quantity of ZeRO's Figure 1.
int64_t model_state_bytes(const TrainingSetup& s);

}  // namespace memplan
