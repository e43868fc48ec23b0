// memplan measure and memplan calibrate, as the companion memplan-measure runs them: real LibTorch
// steps against the estimate, and the probe series that fits a calibration profile. Progress goes
// to stderr, results to stdout. Only the companion links this file (and LibTorch).
#include <fmt/format.h>
#if __has_include(<fmt/ranges.h>)
#include <fmt/ranges.h>  // fmt::join in fmt 10+
#endif

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <ostream>

#include "calibrate/calibrate.h"
#include "calibrate/measure.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/measure_flags.h"
#include "cli/measure_report.h"
#include "cli/probes.h"
#include "profiles/files.h"

namespace memplan::cli {
namespace {


// Where calibrate writes without --out: <cache>/calibrations/<device>-<UTC time>.yaml.
std::string default_profile_path(const std::string& device) {
  const std::string dir = profiles::cache_dir() + "/calibrations";
  std::filesystem::create_directories(dir);
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  std::string name = device;
  std::replace(name.begin(), name.end(), ':', '-');
  return fmt::format("{}/{}-{}.yaml", dir, name, stamp);
}

// Progress lines on stderr with the elapsed time, so a long run shows what runs and what is left
// ("[calibrate   12.3s] probe 3/9: ..."). Plain lines, no colour and no carriage returns, so a log
// or a pipe reads the same as a terminal; none with --quiet.
std::function<void(const std::string&)> progress(std::ostream& err, const char* who, bool quiet) {
  if (quiet) return {};
  const auto t0 = std::chrono::steady_clock::now();
  return [&err, who, t0](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    err << fmt::format("[{} {:6.1f}s] {}\n", who, s, line) << std::flush;
  };
}

std::string device_of(const profiles::SetupInputs& in) { return in.device.value_or("cpu"); }

int run_measure(Io io, const profiles::SetupInputs& in, const MeasureFlags& f, const OutputFlags& o) {
  const profiles::BuiltSetup b = profiles::build_setup(in);
  print_warnings(io.err, b.warnings);
  calibrate::MeasureOptions mo;
  mo.device = device_of(in);
  mo.steps = f.steps;
  mo.threads = f.threads;
  mo.layers = f.layers;
  mo.progress = progress(io.err, "measure", f.quiet);
  const calibrate::MeasureResult r = calibrate::measure(b.setup, mo);
  // Estimate the setup the harness ran (same device kind, LibTorch version, optimizer loop),
  // at full depth when the run was extrapolated.
  calibrate::MeasureOptions full = mo;
  if (r.extrapolated) full.layers = 0;
  const TrainingSetup hs = calibrate::harness_setup(b.setup, full);
  const MemoryBreakdown e = estimate(hs, calibration_of(b));
  const bool cuda = calibrate::is_cuda(mo.device);
  const nlohmann::json doc = measure_document(hs, r, e, cuda);
  if (o.format() != Format::table) {
    emit(io.out, doc, o.format());
    return kExitOk;
  }
  print_measure(io.out, hs, r, doc);
  return kExitOk;
}

std::string percent(double e) { return fmt::format("{:+.2f}%", 100 * e); }

// Fits the measured probes, prints them against the estimate, and writes the profile only when
// the fit holds on held-out probes (else exit 1 and nothing written).
int fit_and_write(Io io, const std::vector<calibrate::ProbeOutcome>& outcomes, std::map<std::string, std::string> stamp,
                  bool cuda, bool interrupted, const std::string& out, const MeasureFlags& f, const OutputFlags& o) {
  const std::string device_name = stamp["device_name"];
  const auto [major, minor] = calibrate::parse_torch_version(stamp["libtorch"]);
  const DeviceSpec device = profiles::device_for_name(device_name);
  const calibrate::FitReport rep =
      calibrate::fit_calibration(calibrate::fit_probes(outcomes, cuda, device, major, minor), cuda);
  Calibration fitted = rep.fitted;
  fitted.device = device_name;
  stamp["fit"] = rep.model;
  stamp["held_out_error"] = fmt::format("{:.4f} mean, {:.4f} largest", rep.mean_held_out, rep.max_held_out);
  stamp["uncalibrated_error"] = fmt::format("{:.4f} mean, {:.4f} largest", rep.mean_uncalibrated, rep.max_uncalibrated);

  auto figures = [](const calibrate::Figures& x) {
    return nlohmann::json{{"allocated_bytes", x.allocated}, {"reserved_bytes", x.reserved}, {"device_bytes", x.device}};
  };
  nlohmann::json doc = {{"schema", "memplan.calibrate/v1"}, {"stamp", stamp}, {"cuda", cuda}, {"probes", nlohmann::json::array()}};
  size_t next = 0;  // rep.probes follows the probes that ran, in order
  for (const auto& p : outcomes) {
    nlohmann::json j = {{"name", p.probe.name}, {"ok", p.ok}};
    if (p.ok) {
      const calibrate::ProbeReport& r = rep.probes.at(next++);
      j["measured_bytes"] = p.measured;
      j["measured_allocated_bytes"] = p.measured_allocated;
      j["measured_reserved_bytes"] = p.measured_reserved;
      j["measured_context_bytes"] = p.measured_context;
      j["estimated"] = figures(r.uncalibrated);
      j["calibrated"] = figures(r.calibrated);
      j["held_out_bytes"] = r.held_out;
      j["error_before"] = r.error_uncalibrated;
      j["error_after"] = r.error_calibrated;
      j["error_held_out"] = r.error_held_out;
    } else {
      j["note"] = p.note;
    }
    doc["probes"].push_back(j);
  }
  doc["fit"] = {{"model", rep.model},
                {"accepted", rep.accepted},
                {"verdict", rep.verdict},
                {"warnings", rep.warnings},
                {"candidates", rep.candidates},
                {"mean_error_before", rep.mean_uncalibrated},
                {"max_error_before", rep.max_uncalibrated},
                {"mean_error_held_out", rep.mean_held_out},
                {"max_error_held_out", rep.max_held_out}};
  doc["corrections"] = {{"cuda_context_bytes", fitted.cuda_context_bytes},
                        {"workspace_bytes", fitted.workspace_bytes},
                        {"activation_scale", fitted.activation_scale},
                        {"model_state_scale", fitted.model_state_scale},
                        {"overhead_fraction", fitted.overhead_fraction},
                        {"overhead_bytes", fitted.overhead_bytes}};
  doc["profile"] = rep.accepted ? nlohmann::json(out) : nlohmann::json(nullptr);
  if (rep.accepted) profiles::save_calibration(fitted, stamp, out, f.force);

  for (const auto& w : rep.warnings) io.err << "warning: " << w << "\n";
  if (o.format() != Format::table) {
    emit(io.out, doc, o.format());
  } else {
    io.out << fmt::format("memplan calibrate: {} ({}), LibTorch {}\n", device_name, stamp["device"], stamp["libtorch"]);
    io.out << fmt::format("\n  {:<44} {:>11} {:>11} {:>11} {:>8}\n", "probe", "allocated", "reserved", "device", "error");
    next = 0;
    for (const auto& p : outcomes) {
      io.out << "  " << p.probe.name << "\n";
      if (!p.ok) {
        io.out << "    " << p.note << "\n";
        continue;
      }
      const calibrate::ProbeReport& r = rep.probes.at(next++);
      auto row = [&](const char* what, const calibrate::Figures& x, const std::string& err) {
        io.out << fmt::format("    {:<42} {:>11} {:>11} {:>11} {:>8}\n", what, x.allocated ? gib(x.allocated) : "-",
                              x.reserved ? gib(x.reserved) : "-", gib(x.device), err);
      };
      row("measured", r.measured, "");
      row("estimated", r.uncalibrated, percent(r.error_uncalibrated));
      if (rep.accepted) row("calibrated", r.calibrated, percent(r.error_calibrated));
      io.out << fmt::format("    {:<42} {:>11} {:>11} {:>11} {:>8}\n", "held out (fitted without it)", "", "", gib(r.held_out),
                            percent(r.error_held_out));
    }
    const Calibration& c = fitted;
    io.out << fmt::format("\n  fit: {}", rep.model);
    if (c.cuda_context_bytes >= 0) io.out << fmt::format("; context {} (measured)", gib(c.cuda_context_bytes));
    if (c.workspace_bytes >= 0) io.out << fmt::format("; workspace {}", gib(c.workspace_bytes));
    if (c.overhead_fraction >= 0)
      io.out << fmt::format("; allocator overhead {:.2f}% of activations, loss and transients + {}", 100 * c.overhead_fraction,
                            gib(c.overhead_bytes));
    io.out << "\n  " << rep.verdict << "\n";
    for (const auto& c : rep.candidates) io.out << "    " << c << "\n";
    if (interrupted) io.out << fmt::format("  interrupted after {} probe(s): the fit holds what they measured\n", outcomes.size());
    if (rep.accepted) io.out << fmt::format("  wrote {} (use it with --calibration {})\n", out, out);
  }
  if (rep.accepted) return kExitOk;
  io.err << "error: calibration not written: " << (rep.probes.empty() ? "no probe ran" : rep.verdict)
         << (rep.probes.size() >= 2 ? " (held out, the fit is worse than no calibration)" : "") << "\n"
         << "hint: estimate without --calibration on this device; re-run calibrate on an idle GPU, and keep the "
            "measurements (--json > FILE) to re-fit them later with --from FILE\n";
  return kExitDoesNotFit;
}

int run_calibrate(Io io, const profiles::SetupInputs& in, const MeasureFlags& f, const OutputFlags& o) {
  const std::string device = f.from.empty() ? device_of(in) : "";
  const std::string out = !f.out.empty() ? f.out : default_profile_path(f.from.empty() ? device : "refit");
  auto inputs = profiles::input_files(in);
  if (!f.from.empty()) inputs.emplace_back(f.from, "--from");
  profiles::check_can_write(out, {f.force, Where::at_file(out), "the calibration profile", inputs});  // before the probes run
  if (!f.from.empty()) {
    const profiles::SavedCalibration saved = profiles::load_saved_calibration(f.from);
    std::map<std::string, std::string> stamp = saved.stamp;
    stamp["refit_from"] = f.from;
    return fit_and_write(io, saved_outcomes(saved), stamp, saved.cuda, false, out, f, o);
  }
  calibrate::CalibrateOptions co;
  co.device = device;
  co.quick = f.quick;
  co.threads = f.threads;
  co.progress = progress(io.err, "calibrate", f.quiet);
  const calibrate::CalibrationRun run = calibrate::run_calibration(co);
  const bool any = std::any_of(run.probes.begin(), run.probes.end(), [](const auto& p) { return p.ok; });
  if (!any) throw InputError(Where::at_flag("--device"), "no probe ran on this device", "see the notes above (each probe says why)");
  return fit_and_write(io, run.probes, run.stamp, calibrate::is_cuda(co.device), run.interrupted, out, f, o);
}

}  // namespace

Command register_measure(CLI::App& root, Io io) {
  const MeasureCommand m = add_measure_command(root);
  return {m.app, [io, m] { return run_measure(io, *m.in, *m.flags, *m.output); }};
}

Command register_calibrate(CLI::App& root, Io io) {
  const MeasureCommand m = add_calibrate_command(root);
  return {m.app, [io, m] { return run_calibrate(io, *m.in, *m.flags, *m.output); }};
}

int run_companion(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  return run_app({{"measure", register_measure, kMeasureExamples}, {"calibrate", register_calibrate, kCalibrateExamples}}, argc, argv, out,
                 err);
}

}  // namespace memplan::cli
