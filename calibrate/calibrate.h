// memplan calibrate: run the probe series (fit.h) of small real training steps on a device and keep
// what each measured: allocated, reserved and the memory outside the allocator. Fitting the
// corrections from them is fit.h's fit_calibration, torch-free, so saved measurements can be
// re-fitted anywhere (calibrate --from).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "calibrate/fit.h"
#include "calibrate/measure.h"

namespace memplan::calibrate {

struct CalibrationRun {
  std::vector<ProbeOutcome> probes;
  std::map<std::string, std::string> stamp;  // device_name, device, driver, libtorch, date, host, probes
  bool interrupted = false;  // Ctrl-C/SIGTERM: the probes gathered before it are kept
};

struct CalibrateOptions {
  std::string device = "cpu";
  bool quick = false;
  int threads = 0;
  std::function<void(const std::string&)> progress;
};
// Runs the probe series. SIGINT/SIGTERM stops it after the running probe and keeps what was
// gathered (the caller fits it, and writes the profile atomically if the fit holds).
CalibrationRun run_calibration(const CalibrateOptions& opt);

}  // namespace memplan::calibrate
