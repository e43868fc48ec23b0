// Does a setup fit, and if not, what is the cheapest change that makes it fit. The changes are
// tried in the order of the usual OOM ladder (as memory guides write it): flash attention, mixed precision, checkpointing,
// smaller micro-batch with more accumulation (same effective batch), ZeRO stage, shorter
// sequence, offload. Every number comes from estimate(); nothing here has its own formula.
#pragma once

#include <string>
#include <vector>

#include "estimator/estimate.h"

namespace memplan::planner {

// One candidate change and what it does to the peak.
struct Change {
  std::string step;      // ladder step: "flash attention", "mixed precision", ...
  std::string flags;     // how to ask for it on the command line ("--attention flash")
  std::string cost;      // what it costs ("~+33% compute (recompute the forward)")
  TrainingSetup setup;   // the setup with the change applied
  int64_t peak_bytes = 0;
  bool fits = false;
};

struct FitReport {
  Verdict verdict;                 // of the setup as given
  int64_t peak_bytes = 0;
  int64_t largest_micro_batch = 0;   // largest micro-batch that fits with nothing else changed (0: none)
  int64_t largest_micro_batch_peak = 0;
  std::vector<Change> single;      // each ladder step alone, in ladder order
  std::vector<Change> cumulative;  // ladder steps stacked until it fits (empty if it already fits)
  std::vector<Change> other;       // outside the ladder: 8-bit optimizer, LoRA, QLoRA
};

// REQUIRES: validate(s) is empty and s.device.capacity_bytes > 0.
FitReport fit(const TrainingSetup& s, const Calibration* cal = nullptr);

// Largest micro-batch in [1, limit] whose peak stays within the target (0 if even 1 does not).
// Memory never falls as the micro-batch grows, so this is a binary search.
int64_t largest_micro_batch(const TrainingSetup& s, const Calibration* cal = nullptr, int64_t limit = 65536);

// True when the setup's peak is within the target utilisation of its device.
bool fits(const TrainingSetup& s, const Calibration* cal = nullptr);

}  // namespace memplan::planner
