// Saved calibration measurements -> the probe series and its fit (probes.h).
#include "cli/probes.h"

#include <fmt/format.h>

#include <algorithm>

namespace memplan::cli {

// The probes a saved `calibrate --json` document holds, matched by name to this memplan's
// series (the setups come from the series; the file has only the measurements).
std::vector<calibrate::ProbeOutcome> saved_outcomes(const profiles::SavedCalibration& saved) {
  const std::vector<calibrate::Probe> series = calibrate::probe_series(saved.cuda, /*quick=*/false);
  std::vector<calibrate::ProbeOutcome> out;
  for (const auto& p : saved.probes) {
    const auto it = std::find_if(series.begin(), series.end(), [&](const auto& s) { return s.name == p.name; });
    if (it == series.end())
      throw InputError(p.where, fmt::format("unknown probe '{}'", profiles::clip(p.name)),
                       fmt::format("--from re-fits the probes of this memplan's {} series (memplan calibrate --json "
                                   "names them); measure again with this version",
                                   saved.cuda ? "CUDA" : "CPU"));
    if (std::any_of(out.begin(), out.end(), [&](const auto& o) { return o.probe.name == p.name; }))
      throw InputError(p.where, fmt::format("probe '{}' appears twice", profiles::clip(p.name)), "keep one measurement per probe");
    calibrate::ProbeOutcome o;
    o.probe = *it;
    o.ok = p.ok;
    o.measured = p.measured_bytes;
    o.measured_allocated = p.measured_allocated_bytes;
    o.measured_reserved = p.measured_reserved_bytes;
    o.measured_context = p.measured_context_bytes;
    out.push_back(o);
  }
  return out;
}

calibrate::FitReport fit_saved(const profiles::SavedCalibration& saved) {
  const auto get = [&](const char* k) {
    const auto it = saved.stamp.find(k);
    return it == saved.stamp.end() ? std::string() : it->second;
  };
  const auto [major, minor] = calibrate::parse_torch_version(get("libtorch"));
  const DeviceSpec device = profiles::device_for_name(get("device_name"));
  return calibrate::fit_calibration(calibrate::fit_probes(saved_outcomes(saved), saved.cuda, device, major, minor), saved.cuda);
}

}  // namespace memplan::cli
