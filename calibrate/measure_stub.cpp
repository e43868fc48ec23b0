// Built when LibTorch is absent: measure and calibrate explain why they cannot run.
#include "calibrate/measure.h"

#include "estimator/error.h"

namespace memplan::calibrate {

bool torch_available() { return false; }
std::string torch_version() { return ""; }
bool cuda_available() { return false; }
bool cpu_supports_bf16() { return false; }
TrainingSetup harness_setup(const TrainingSetup& s, const MeasureOptions&) { return s; }
MeasureResult measure(const TrainingSetup&, const MeasureOptions&) {
  throw InputError(Where::at_flag("--device"), "this memplan was built without LibTorch",
                   "install libtorch-dev (./dev.sh does) and rebuild");
}

}  // namespace memplan::calibrate
