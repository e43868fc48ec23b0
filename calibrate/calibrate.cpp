// Probe series and least-squares fit for memplan calibrate (see calibrate.h).
#include "calibrate/calibrate.h"

#include <Eigen/Dense>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <ctime>

#include "estimator/error.h"
#include "estimator/model.h"

namespace memplan::calibrate {
namespace {

ModelSpec probe_model(const std::string& style, int64_t h, int64_t layers, int64_t vocab) {
  const bool gpt2 = style == "gpt2";
  ModelSpec m = *family_defaults(gpt2 ? "gpt2" : "llama");
  m.name = fmt::format("probe-{}-h{}-l{}", style, h, layers);
  m.hidden_size = h;
  m.num_layers = layers;
  m.num_attention_heads = h / 64;
  m.num_key_value_heads = gpt2 ? m.num_attention_heads : std::max<int64_t>(1, m.num_attention_heads / 4);
  m.head_dim = 64;
  m.intermediate_size = gpt2 ? 4 * h : h * 8 / 3 / 64 * 64;
  m.vocab_size = vocab;
  m.max_position_embeddings = 4096;
  return m;
}

double rel(int64_t est, int64_t meas) {
  return meas > 0 ? std::fabs(static_cast<double>(est - meas)) / static_cast<double>(meas) : 0;
}

}  // namespace

std::vector<Probe> probe_series(bool cuda, bool quick) {
  std::vector<Probe> out;
  auto add = [&](const char* style, int64_t h, int64_t layers, int64_t vocab, int64_t b, int64_t s, Precision p,
                 const char* ckpt) {
    TrainingSetup t;
    t.model = probe_model(style, h, layers, vocab);
    t.batch.micro_batch = b;
    t.batch.seq_len = s;
    t.precision = p;
    t.checkpointing = *parse_checkpointing(ckpt);
    t.device.kind = cuda ? DeviceKind::cuda : DeviceKind::cpu;
    out.push_back({fmt::format("{} h{} L{} b{} s{} {} {}", style, h, layers, b, s, to_string(p), ckpt), t});
  };
  if (!cuda) {
    add("llama", 128, 2, 2048, 2, 128, Precision::fp32, "none");
    add("llama", 256, 2, 4096, 1, 512, Precision::fp32, "none");
    add("gpt2", 128, 4, 2048, 4, 256, Precision::fp32, "full");
    add("llama", 256, 4, 1024, 2, 256, Precision::fp32, "every:2");
    if (!quick) {
      add("gpt2", 256, 2, 4096, 2, 512, Precision::fp32, "none");
      add("llama", 128, 3, 8192, 8, 64, Precision::fp32, "none");
    }
    return out;
  }
  const Precision half = Precision::amp_bf16;
  add("llama", 1024, 4, 32000, 4, 1024, half, "none");
  add("llama", 2048, 4, 32000, 2, 2048, half, "none");
  add("gpt2", 1024, 8, 50257, 8, 512, half, "none");
  add("llama", 2048, 8, 32000, 4, 4096, half, "full");
  if (!quick) {
    add("llama", 4096, 2, 32000, 1, 4096, Precision::bf16, "none");
    add("gpt2", 1536, 6, 50257, 16, 1024, Precision::fp32, "full");
    add("llama", 1024, 12, 32000, 32, 256, half, "every:2");
  }
  return out;
}

Calibration fit_corrections(const std::vector<ProbeOutcome>& probes, bool cuda, int64_t context_bytes) {
  Calibration c;
  std::vector<const ProbeOutcome*> ok;
  for (const auto& p : probes)
    if (p.ok) ok.push_back(&p);
  c.cuda_context_bytes = cuda ? context_bytes : 0;
  c.workspace_bytes = -1;
  c.overhead_fraction = 0;
  if (ok.empty()) return c;
  // Unknowns x = (a, b, k): measured - context ~ a*dynamic + b*states + k, in GiB units for
  // conditioning, with a ridge pulling toward (1, 1, fixed-without-context).
  const double G = 1024.0 * 1024.0 * 1024.0;
  const int n = static_cast<int>(ok.size());
  Eigen::MatrixXd A(n, 3);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    A(i, 0) = static_cast<double>(ok[i]->dynamic) / G;
    A(i, 1) = static_cast<double>(ok[i]->states) / G;
    A(i, 2) = 1.0;
    y(i) = static_cast<double>(ok[i]->measured - (cuda ? context_bytes : 0)) / G;
  }
  Eigen::Vector3d prior(1.0, 1.0, 0.0);
  if (cuda) {
    double fixed = 0;
    for (const auto* p : ok) fixed += static_cast<double>(p->fixed - context_bytes) / G;
    prior(2) = fixed / n;
  }
  const double lambda = 1e-3 * (A.transpose() * A).trace() / 3.0 + 1e-12;
  const Eigen::Matrix3d M = A.transpose() * A + lambda * Eigen::Matrix3d::Identity();
  const Eigen::Vector3d rhs = A.transpose() * y + lambda * prior;
  const Eigen::Vector3d x = M.ldlt().solve(rhs);
  c.activation_scale = x(0);
  c.model_state_scale = x(1);
  c.overhead_bytes = static_cast<int64_t>(std::llround(x(2) * G));
  // On CUDA the constant replaces workspace and the default fragmentation model.
  if (cuda) c.workspace_bytes = 0;
  return c;
}

namespace {

// Ctrl-C during calibrate: finish the running probe, fit what was gathered, write it (a second
// Ctrl-C kills as usual).
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
  int64_t context = 0;
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
        context = std::max(context, r.context_bytes);
        // The bar (DESIGN.md): peak reserved plus what lives outside the allocator.
        o.measured = cuda ? r.peak_reserved + r.context_bytes : r.peak_bytes;
        o.measured_allocated = r.peak_bytes;
        o.measured_reserved = r.peak_reserved;
        o.measured_context = r.context_bytes;
        const MemoryBreakdown e = estimate(harness_setup(probes[i].setup, mo));
        const PhaseState& pk = e.peak();
        o.dynamic = sum_of(pk.bytes, kDynamicTerms);
        o.states = sum_of(pk.bytes, kModelStateTerms);
        o.estimated = pk.total();
        o.fixed = o.estimated - o.dynamic - o.states;  // workspace, context, allocator, buffers
      }
    } catch (const InputError& e) {
      o.note = "refused: " + e.message();
    }
    run.probes.push_back(o);
  }
  run.fitted = fit_corrections(run.probes, cuda, context);
  run.fitted.device = device_name;
  for (auto& o : run.probes) {
    if (!o.ok) continue;
    o.calibrated = estimate(harness_setup(o.probe.setup, mo), &run.fitted).peak_bytes();
    run.max_error_before = std::max(run.max_error_before, rel(o.estimated, o.measured));
    run.max_error_after = std::max(run.max_error_after, rel(o.calibrated, o.measured));
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
               {"interrupted", run.interrupted ? "true" : "false"},
               {"max_error_before", fmt::format("{:.4f}", run.max_error_before)},
               {"max_error_after", fmt::format("{:.4f}", run.max_error_after)}};
  return run;
}

}  // namespace memplan::calibrate
