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
#include "cli/measure_report.h"
#include "profiles/files.h"

namespace memplan::cli {
namespace {

struct MeasureFlags {
  int steps = 2;
  int threads = 0;
  int64_t layers = 0;
  std::string out;
  bool force = false;
  bool quick = false;
};

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

// Progress lines on stderr with the elapsed time, so a long run shows what runs and what is left.
std::function<void(const std::string&)> progress(std::ostream& err, const char* who) {
  const auto t0 = std::chrono::steady_clock::now();
  return [&err, who, t0](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    err << fmt::format("[{} {:6.1f}s] {}\n", who, s, line) << std::flush;
  };
}

std::string device_of(const profiles::SetupInputs& in) { return in.device.value_or("cpu"); }

double rel(int64_t est, int64_t meas) {
  return meas > 0 ? (static_cast<double>(est) - static_cast<double>(meas)) / static_cast<double>(meas) : 0;
}

int run_measure(Io io, const profiles::SetupInputs& in, const MeasureFlags& f, const OutputFlags& o) {
  const profiles::BuiltSetup b = profiles::build_setup(in);
  print_warnings(io.err, b.warnings);
  calibrate::MeasureOptions mo;
  mo.device = device_of(in);
  mo.steps = f.steps;
  mo.threads = f.threads;
  mo.layers = f.layers;
  mo.progress = progress(io.err, "measure");
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

int run_calibrate(Io io, const profiles::SetupInputs& in, const MeasureFlags& f, const OutputFlags& o) {
  calibrate::CalibrateOptions co;
  co.device = device_of(in);
  const std::string out = f.out.empty() ? default_profile_path(co.device) : f.out;
  profiles::check_can_write(out, {f.force, Where::at_file(out), "the calibration profile"});  // before the probes run
  co.quick = f.quick;
  co.threads = f.threads;
  co.progress = progress(io.err, "calibrate");
  const calibrate::CalibrationRun run = calibrate::run_calibration(co);
  const bool any = std::any_of(run.probes.begin(), run.probes.end(), [](const auto& p) { return p.ok; });
  if (!any) throw InputError(Where::at_flag("--device"), "no probe ran on this device", "see the notes above (each probe says why)");
  profiles::save_calibration(run.fitted, run.stamp, out, f.force);
  nlohmann::json doc = {{"schema", "memplan.calibrate/v1"}, {"stamp", run.stamp}, {"probes", nlohmann::json::array()}};
  for (const auto& p : run.probes) {
    nlohmann::json j = {{"name", p.probe.name}, {"ok", p.ok}};
    if (p.ok) {
      j["measured_bytes"] = p.measured;
      j["measured_allocated_bytes"] = p.measured_allocated;
      j["measured_reserved_bytes"] = p.measured_reserved;
      j["measured_context_bytes"] = p.measured_context;
      j["estimated_bytes"] = p.estimated;
      j["calibrated_bytes"] = p.calibrated;
      j["error_before"] = rel(p.estimated, p.measured);
      j["error_after"] = rel(p.calibrated, p.measured);
    } else {
      j["note"] = p.note;
    }
    doc["probes"].push_back(j);
  }
  doc["corrections"] = {{"cuda_context_bytes", run.fitted.cuda_context_bytes},
                        {"workspace_bytes", run.fitted.workspace_bytes},
                        {"activation_scale", run.fitted.activation_scale},
                        {"model_state_scale", run.fitted.model_state_scale},
                        {"overhead_fraction", run.fitted.overhead_fraction},
                        {"overhead_bytes", run.fitted.overhead_bytes}};
  doc["profile"] = out;
  if (o.format() != Format::table) {
    emit(io.out, doc, o.format());
    return kExitOk;
  }
  io.out << fmt::format("memplan calibrate: {} ({}), LibTorch {}\n", run.stamp.at("device_name"), co.device, run.stamp.at("libtorch"));
  io.out << fmt::format("\n  {:<40} {:>12} {:>12} {:>8} {:>12} {:>8}\n", "probe", "measured", "estimated", "error", "calibrated", "error");
  for (const auto& p : run.probes) {
    if (!p.ok) {
      io.out << fmt::format("  {:<40} {}\n", p.probe.name, p.note);
      continue;
    }
    io.out << fmt::format("  {:<40} {:>12} {:>12} {:>+7.2f}% {:>12} {:>+7.2f}%\n", p.probe.name, gib(p.measured), gib(p.estimated),
                          100 * rel(p.estimated, p.measured), gib(p.calibrated), 100 * rel(p.calibrated, p.measured));
  }
  const Calibration& c = run.fitted;
  io.out << fmt::format("\n  fitted: activation x{:.4f}, model states x{:.4f}, constant {}, context {}\n", c.activation_scale,
                        c.model_state_scale, gib(c.overhead_bytes), gib(std::max<int64_t>(0, c.cuda_context_bytes)));
  io.out << fmt::format("  largest error: {:.2f}% uncalibrated, {:.2f}% calibrated\n", 100 * run.max_error_before, 100 * run.max_error_after);
  if (run.interrupted) io.out << fmt::format("  interrupted after {} probe(s): the profile holds what they measured\n", run.probes.size());
  io.out << fmt::format("  wrote {} (use it with --calibration {})\n", out, out);
  return kExitOk;
}

}  // namespace

Command register_measure(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("measure", "run real LibTorch training steps and compare measured peaks with the estimate");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto f = std::make_shared<MeasureFlags>();
  auto o = std::make_shared<OutputFlags>();
  add_setup_flags(*app, *in);
  app->add_option("--steps", f->steps, "training steps (>= 2; step 1 creates the optimizer state)")->type_name("N");
  app->add_option("--threads", f->threads, "CPU threads for LibTorch (default: LibTorch's)")->type_name("N");
  app->add_option("--layers", f->layers, "run at this depth instead of the model's")->type_name("N");
  add_output_flags(*app, *o);
  return {app, [io, in, f, o] { return run_measure(io, *in, *f, *o); }};
}

Command register_calibrate(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("calibrate", "fit corrections on a device from a probe series of real steps");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto f = std::make_shared<MeasureFlags>();
  auto o = std::make_shared<OutputFlags>();
  app->add_option("--device", in->device, "cpu or cuda:N")->type_name("DEVICE");
  app->add_option("--out", f->out, "write the calibration profile (YAML) here (default: <cache>/memplan/calibrations/DEVICE-TIME.yaml)")->type_name("FILE");
  app->add_flag("--force", f->force, "replace --out if it exists");
  app->add_flag("--quick", f->quick, "fewer probes");
  app->add_option("--threads", f->threads, "CPU threads for LibTorch")->type_name("N");
  add_output_flags(*app, *o);
  return {app, [io, in, f, o] { return run_calibrate(io, *in, *f, *o); }};
}

int run_companion(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  return run_app({{"measure", register_measure}, {"calibrate", register_calibrate}}, argc, argv, out, err);
}

}  // namespace memplan::cli
