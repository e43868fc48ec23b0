// memplan calibrate: run a probe series of small real training steps on a device, compare each
// with the uncalibrated estimate, and fit by least squares (Eigen) the corrections the analytic
// model cannot know (context, workspace, allocator overhead, per-term multipliers). The result
// is correction data (estimator/estimate.h Calibration); no formula changes.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "calibrate/measure.h"
#include "estimator/estimate.h"

namespace memplan::calibrate {

struct Probe {
  std::string name;
  TrainingSetup setup;
};

// The probe series for a device: a few widths, depths, micro-batches and sequence lengths,
// sized for the device (tiny on CPU).
std::vector<Probe> probe_series(bool cuda, bool quick);

struct ProbeOutcome {
  Probe probe;
  bool ok = false;           // false: out of memory or refused (a data point, not a failure)
  std::string note;
  int64_t measured = 0;      // CPU: counted peak; CUDA: peak reserved + memory outside the allocator
  // What the harness measured, apart (CUDA; on CPU allocated = measured, the others 0): the
  // caching allocator's peak allocated and peak reserved bytes, and the device memory outside
  // the allocator (cudaMemGetInfo's used minus reserved: context, cuBLAS handles, modules).
  int64_t measured_allocated = 0;
  int64_t measured_reserved = 0;
  int64_t measured_context = 0;
  int64_t dynamic = 0;       // estimate: activations + logits_and_loss + transient
  int64_t states = 0;        // estimate: weights + gradients + master + optimizer states
  int64_t fixed = 0;         // estimate: workspace + context + allocator overhead + comm
  int64_t estimated = 0;     // uncalibrated peak
  int64_t calibrated = 0;    // peak with the fitted corrections
};

struct CalibrationRun {
  std::vector<ProbeOutcome> probes;
  Calibration fitted;
  std::map<std::string, std::string> stamp;  // device, driver, libtorch, date, host, errors
  double max_error_before = 0;
  double max_error_after = 0;
  bool interrupted = false;  // Ctrl-C/SIGTERM: the probes gathered before it were fitted
};

// Least squares of measured ~ a*dynamic + b*states + c over the usable probes, regularised toward
// (1, 1, 0) so that few or collinear probes cannot produce wild multipliers.
Calibration fit_corrections(const std::vector<ProbeOutcome>& probes, bool cuda, int64_t context_bytes);

struct CalibrateOptions {
  std::string device = "cpu";
  bool quick = false;
  int threads = 0;
  std::function<void(const std::string&)> progress;
};
// Runs the probe series. SIGINT/SIGTERM stops it after the running probe and fits what was
// gathered (the caller still writes the profile atomically).
CalibrationRun run_calibration(const CalibrateOptions& opt);

}  // namespace memplan::calibrate
