// Runs the probe series for memplan calibrate (see calibrate.h); the fit is fit.cpp.
#include "calibrate/calibrate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <ctime>

#include "estimator/error.h"

namespace memplan::calibrate {

namespace {

// Ctrl-C during calibrate: finish the running probe and keep what was gathered (a second Ctrl-C
// kills as usual).
std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int sig) {
  g_interrupted.store(true);
  std::signal(sig, SIG_DFL);
}

struct InterruptScope {
  void (*old_int)(int);
  void (*old_term)(int);
  InterruptScope() {
    g_interrupted.store(false);
    old_int = std::signal(SIGINT, on_interrupt);
    old_term = std::signal(SIGTERM, on_interrupt);
  }
  ~InterruptScope() {
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
  }
};

}  // namespace

CalibrationRun run_calibration(const CalibrateOptions& opt) {
  CalibrationRun run;
  InterruptScope interrupt_scope;
  const bool cuda = is_cuda(opt.device);
  MeasureOptions mo;
  mo.device = opt.device;
  mo.threads = opt.threads;
  auto say = [&](const std::string& s) { if (opt.progress) opt.progress(s); };
  std::string device_name, driver;
  const auto probes = probe_series(cuda, opt.quick);
  for (size_t i = 0; i < probes.size(); ++i) {
    if (g_interrupted.load()) {
      run.interrupted = true;
      say(fmt::format("interrupted: fitting the {} probe(s) gathered so far", i));
      break;
    }
    ProbeOutcome o;
    o.probe = probes[i];
    say(fmt::format("probe {}/{}: {}", i + 1, probes.size(), probes[i].name));
    try {
      const MeasureResult r = measure(probes[i].setup, mo);
      device_name = r.device_name;
      driver = r.driver;
      if (!r.oom.empty()) {
        o.note = "out of memory (kept as a data point: this size does not fit)";
      } else {
        o.ok = true;
        // The device figure (DESIGN.md): peak reserved plus what lives outside the allocator.
        o.measured = cuda ? r.peak_reserved + r.context_bytes : r.peak_bytes;
        o.measured_allocated = r.peak_bytes;
        o.measured_reserved = r.peak_reserved;
        o.measured_context = r.context_bytes;
      }
    } catch (const InputError& e) {
      o.note = "refused: " + e.message();
    }
    run.probes.push_back(o);
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  run.stamp = {{"device_name", device_name},
               {"device", opt.device},
               {"driver", driver.empty() ? "n/a (cpu)" : driver},
               {"libtorch", torch_version()},
               {"date", date},
               {"host", host},
               {"memplan", MEMPLAN_VERSION},
               {"probes", fmt::format("{} of {}", run.probes.size(), probes.size())},
               {"interrupted", run.interrupted ? "true" : "false"}};
  return run;
}

}  // namespace memplan::calibrate
