// The calibration fit, without LibTorch: the probe series, what each probe measured, what the
// estimate says about it (allocated, reserved, device figure), and the fit of the few corrections
// the analytic model cannot know on a device (context, workspace, the caching allocator's
// overhead), checked by leave-one-out. The harness that measures the probes is measure.h; the
// series runner is calibrate.h. Both `memplan calibrate` and `calibrate --from FILE` end here.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "estimator/estimate.h"

namespace memplan::calibrate {

struct Probe {
  std::string name;  // stable: saved measurements are matched to the series by it
  TrainingSetup setup;
};

// The probe series for a device: a few widths, depths, micro-batches and sequence lengths,
// sized for the device (tiny on CPU); on CUDA it covers checkpointing (full, every:2) and long
// sequences, where reserved memory departs from allocated. quick: the first few only.
std::vector<Probe> probe_series(bool cuda, bool quick);

// What one probe measured. On CUDA: the caching allocator's peak allocated and reserved bytes and
// the device memory outside it (cudaMemGetInfo's used minus reserved: context, cuBLAS handles,
// modules); `measured` is the device figure, reserved + outside. On CPU `measured` and
// `measured_allocated` are the counted peak, the others 0. 0 means "not recorded".
struct ProbeOutcome {
  Probe probe;
  bool ok = false;  // false: out of memory or refused (a data point, not a failure)
  std::string note;
  int64_t measured = 0;
  int64_t measured_allocated = 0;
  int64_t measured_reserved = 0;
  int64_t measured_context = 0;
};

// The setup LibTorch `major.minor` runs for `s` in the harness (the same changes as
// measure.h harness_setup, which needs LibTorch: the torch version it models, the optimizer
// loop, HF's loss upcast, the device kind), so saved measurements can be re-fitted anywhere.
TrainingSetup harness_view(const TrainingSetup& s, bool cuda, int torch_major, int torch_minor);

// "2.11.0+cu130" -> {2, 11}; {0, 0} when it does not start with two numbers.
std::array<int, 2> parse_torch_version(const std::string& v);

// Peak allocated, reserved and device figure (reserved + memory outside the allocator).
struct Figures {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t device = 0;
};

// The uncalibrated estimate of one setup, split so that any correction the fit makes can be
// applied without the estimator: per phase the allocated bytes (every term but the context and
// the allocator overhead), the workspace inside them, the dynamic bytes the overhead fraction
// applies to, and the overhead's rounding part.
struct EstimateSplit {
  struct PhaseSplit {
    int64_t allocated = 0, workspace = 0, dynamic = 0, rounding = 0, overhead = 0;
    int64_t formula = 0;  // the percentage formula's overhead with its default fraction
  };
  std::array<PhaseSplit, kNumPhases> phases{};
  int64_t context = 0;  // the estimate's cuda_context term
  bool cuda = false;
  bool overhead_term = false;  // the allocator_overhead term exists (CUDA with allocator rounding)
  // The overhead came from the allocation replay (the allocator model): then the model leaves no
  // allocator parameter open, and a calibration that sets one puts the formula back.
  bool replayed = false;
};
EstimateSplit split_estimate(const TrainingSetup& s);

// What estimate(s, cal) gives for the setup `e` was split from (exactly, for corrections without
// multipliers; cal == nullptr: uncalibrated).
Figures predict(const EstimateSplit& e, const Calibration* cal);

// One probe as the fit sees it.
struct FitProbe {
  std::string name;
  Figures measured;        // allocated/reserved 0: not recorded (then the fit uses the estimate's
  int64_t measured_context = 0;  // allocated and the device figure minus the context)
  EstimateSplit estimate;
};

struct ProbeReport {
  std::string name;
  Figures measured, uncalibrated, calibrated;
  int64_t held_out = 0;  // device figure predicted by a fit on the other probes
  double error_uncalibrated = 0, error_calibrated = 0, error_held_out = 0;  // signed, device figure
};

struct FitReport {
  Calibration fitted;   // what the profile holds (identity when nothing is fitted)
  std::string model;    // which corrections: "context", "context + allocator overhead", ...
  bool accepted = false;  // false: held-out error worse than uncalibrated; write nothing
  std::string verdict;  // one line: why accepted or refused
  std::vector<std::string> warnings;
  std::vector<std::string> candidates;  // each candidate's leave-one-out error, one line each
  std::vector<ProbeReport> probes;
  double mean_uncalibrated = 0, max_uncalibrated = 0;  // |error| of the device figure
  double mean_held_out = 0, max_held_out = 0;
  double mean_calibrated = 0, max_calibrated = 0;
};

// Fits on CUDA, from the probes that ran: the context as the median of what the harness measured
// (never regressed; a warning when the probes disagree), the workspace as the median allocated
// bytes the estimate misses, the allocator overhead (reserved - allocated) as a fraction of the
// dynamic bytes plus a constant, both >= 0. Weights, gradients and optimizer states are never
// scaled and no activation multiplier is fitted. Each candidate (context; + overhead; + workspace)
// is checked by leave-one-out, and the best one whose held-out device-figure error is no worse
// than the uncalibrated estimate's (mean and largest) is kept; none: refused. On CPU there is
// nothing to fit (no context, no caching allocator): the identity, reported.
FitReport fit_calibration(const std::vector<FitProbe>& probes, bool cuda);

// The fit's view of the probes that ran: each one's harness setup on `device` (the GPU preset the
// measurements came from, or a generic one) for LibTorch `torch_major.torch_minor`, split.
std::vector<FitProbe> fit_probes(const std::vector<ProbeOutcome>& outcomes, bool cuda, const DeviceSpec& device,
                                 int torch_major, int torch_minor);

}  // namespace memplan::calibrate
