// Saved calibration measurements (a `memplan calibrate --json` document) matched to this memplan's
// probe series, for `calibrate --from` (memplan-measure) and `report --probes` (memplan): torch-free.
#pragma once

#include <vector>

#include "calibrate/fit.h"
#include "profiles/profiles.h"

namespace memplan::cli {

// The probes a saved document holds, each with its setup from the series (the file has only the
// measurements). InputError at the probe for a name the series lacks or one given twice.
std::vector<calibrate::ProbeOutcome> saved_outcomes(const profiles::SavedCalibration& saved);

// The fit `calibrate --from` makes of them, on the device and LibTorch the stamp names.
calibrate::FitReport fit_saved(const profiles::SavedCalibration& saved);

}  // namespace memplan::cli
