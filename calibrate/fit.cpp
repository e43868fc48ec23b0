// The probe series and the calibration fit (see fit.h). Torch-free: `calibrate --from FILE` and the
// tests run it without LibTorch. The fit is a handful of medians and one two-parameter least
// squares with bounds, solved in closed form (no multipliers, so no conditioning to worry about).
#include "calibrate/fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "estimator/model.h"
#include "profiles/profiles.h"

namespace memplan::calibrate {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kTiB = int64_t{1} << 40;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// The largest overhead fraction the fit may give (the profile reader takes [0, 1)).
constexpr double kMaxFraction = 0.9;
// Outside-the-allocator bytes of the probes more than this apart (and 50% of their median) are
// not one context: another process on the GPU, or a driver that grew its pools.
constexpr int64_t kContextSpread = 512 * kMiB;

ModelSpec probe_model(const std::string& style, int64_t h, int64_t layers, int64_t vocab) {
  const bool gpt2 = style == "gpt2";
  const char* type = gpt2 ? "gpt2" : "llama";
  const std::optional<ModelSpec> base = profiles::family_defaults(type);
  if (!base)
    throw InputError(Where{}, fmt::format("the probes' architecture '{}' is not in memplan's families.yaml", type),
                     "reinstall memplan's data files (profiles/families.yaml)");
  ModelSpec m = *base;
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

double signed_error(int64_t est, int64_t meas) {
  return meas > 0 ? (static_cast<double>(est) - static_cast<double>(meas)) / static_cast<double>(meas) : 0;
}

int64_t median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Which corrections a candidate fits.
struct Candidate {
  const char* name;
  bool workspace;
  bool overhead;
  size_t min_probes;  // to fit on n - 1 and still have more points than unknowns
};
constexpr Candidate kCandidates[] = {
    {"context", false, false, 2},
    {"context + allocator overhead", false, true, 4},
    {"context + workspace + allocator overhead", true, true, 5},
};

// The phase whose device figure is the estimate's peak (ties: the first, as estimate() picks).
int peak_phase(const EstimateSplit& e) {
  int best = 0;
  int64_t top = -1;
  for (int p = 0; p < kNumPhases; ++p) {
    const auto& ph = e.phases[p];
    if (const int64_t v = ph.allocated + ph.overhead; v > top) {
      top = v;
      best = p;
    }
  }
  return best;
}

// y ~ f*x + k with f in [0, kMaxFraction], k >= 0, least squares (x, y in GiB). The optimum of a
// convex quadratic over a box is the free optimum or lies on an edge; each edge is a 1-D clamp.
std::pair<double, double> bounded_line_fit(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  auto sse = [&](double f, double k) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += (y[i] - f * x[i] - k) * (y[i] - f * x[i] - k);
    return s;
  };
  std::vector<std::pair<double, double>> tries;
  const double det = n * sxx - sx * sx;
  if (std::fabs(det) > 1e-12 * std::max(1.0, n * sxx)) tries.push_back({(n * sxy - sx * sy) / det, (sy * sxx - sx * sxy) / det});
  auto k_for = [&](double f) { return std::max(0.0, (sy - f * sx) / n); };
  auto f_for = [&](double k) { return sxx > 0 ? std::clamp((sxy - k * sx) / sxx, 0.0, kMaxFraction) : 0.0; };
  tries.push_back({0.0, k_for(0.0)});
  tries.push_back({kMaxFraction, k_for(kMaxFraction)});
  tries.push_back({f_for(0.0), 0.0});
  std::pair<double, double> best{0.0, 0.0};
  double best_sse = sse(0, 0);
  for (const auto& [f, k] : tries) {
    if (!(f >= 0 && f <= kMaxFraction && k >= 0)) continue;
    if (const double s = sse(f, k); s < best_sse) {
      best_sse = s;
      best = {f, k};
    }
  }
  return best;
}

// The corrections of `c` fitted on `probes`.
Calibration fit_one(const std::vector<const FitProbe*>& probes, const Candidate& c) {
  Calibration cal;
  std::vector<int64_t> contexts;
  for (const auto* p : probes)
    if (p->measured_context > 0) contexts.push_back(p->measured_context);
  if (!contexts.empty()) cal.cuda_context_bytes = std::min(median(contexts), kTiB);
  if (c.workspace) {
    // What the allocator handed out that the estimate (without its workspace) did not account for.
    std::vector<int64_t> missing;
    for (const auto* p : probes) {
      if (p->measured.allocated <= 0) continue;
      const auto& ph = p->estimate.phases[peak_phase(p->estimate)];
      int64_t top = 0;
      for (const auto& q : p->estimate.phases) top = std::max(top, q.allocated);
      missing.push_back(p->measured.allocated - (top - ph.workspace));
    }
    if (!missing.empty()) cal.workspace_bytes = std::clamp<int64_t>(median(missing), 0, kTiB);
  }
  if (c.overhead) {
    // Reserved minus allocated beyond the estimate's own rounding, against the dynamic bytes.
    std::vector<double> x, y;
    for (const auto* p : probes) {
      const auto& ph = p->estimate.phases[peak_phase(p->estimate)];
      const int64_t context = p->measured_context > 0 ? p->measured_context
                              : cal.cuda_context_bytes >= 0 ? cal.cuda_context_bytes
                                                            : p->estimate.context;
      const int64_t reserved = p->measured.reserved > 0 ? p->measured.reserved : p->measured.device - context;
      const int64_t allocated = p->measured.allocated > 0 ? p->measured.allocated
                                : ph.allocated - ph.workspace + (cal.workspace_bytes >= 0 ? cal.workspace_bytes : ph.workspace);
      x.push_back(static_cast<double>(ph.dynamic) / kGiB);
      y.push_back(static_cast<double>(reserved - allocated - ph.rounding) / kGiB);
    }
    const auto [f, k] = bounded_line_fit(x, y);
    cal.overhead_fraction = f;
    cal.overhead_bytes = std::min<int64_t>(std::llround(k * kGiB), kTiB);
  }
  return cal;
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
  // Names are the keys of saved measurements (calibrate --from): change a probe, change its name.
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

TrainingSetup harness_view(const TrainingSetup& s, bool cuda, int torch_major, int torch_minor) {
  // Keep in step with measure.cpp harness_setup (tests/calibrate compares the two).
  TrainingSetup h = s;
  h.runtime.torch_major = torch_major;
  h.runtime.torch_minor = torch_minor;
  if (h.runtime.optimizer_impl != OptimizerImpl::foreach) h.runtime.optimizer_impl = OptimizerImpl::for_loop;
  if (h.runtime.loss == LossImpl::standard) h.runtime.loss_upcast = true;
  if (cuda) {
    h.device.kind = DeviceKind::cuda;
  } else {
    h.device.kind = DeviceKind::cpu;
    h.runtime.allocator_rounding = false;
  }
  return h;
}

std::array<int, 2> parse_torch_version(const std::string& v) {
  char* end = nullptr;
  const long major = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '.') return {0, 0};
  const char* rest = end + 1;
  const long minor = std::strtol(rest, &end, 10);
  if (end == rest || major < 0 || major > 99 || minor < 0 || minor > 999) return {0, 0};
  return {static_cast<int>(major), static_cast<int>(minor)};
}

EstimateSplit split_estimate(const TrainingSetup& s) {
  EstimateSplit out;
  const MemoryBreakdown e = estimate(s);
  Calibration bare;  // no fraction, no constant: the overhead term is its rounding alone
  bare.overhead_fraction = 0;
  const MemoryBreakdown r = estimate(s, &bare);
  Calibration formula;  // a constant of one byte: the formula with its default fraction, plus 1
  formula.overhead_bytes = 1;
  const MemoryBreakdown f = estimate(s, &formula);
  out.replayed = e.allocator_replayed;
  out.cuda = s.device.kind == DeviceKind::cuda;
  out.overhead_term = out.cuda && s.runtime.allocator_rounding;
  for (int p = 0; p < kNumPhases; ++p) {
    const PhaseState& ph = e.at(static_cast<Phase>(p));
    auto& o = out.phases[p];
    o.overhead = ph[Term::allocator_overhead];
    o.allocated = ph.total() - ph[Term::cuda_context] - o.overhead;
    o.workspace = ph[Term::workspace];
    o.dynamic = sum_of(ph.bytes, kDynamicTerms);
    o.rounding = r.at(static_cast<Phase>(p))[Term::allocator_overhead];
    o.formula = f.at(static_cast<Phase>(p))[Term::allocator_overhead] - 1;
    out.context = ph[Term::cuda_context];
  }
  return out;
}

Figures predict(const EstimateSplit& e, const Calibration* cal) {
  Figures f;
  const bool on = cal && e.cuda;
  const int64_t context = on && cal->cuda_context_bytes >= 0 ? cal->cuda_context_bytes : e.context;
  for (const auto& ph : e.phases) {
    const int64_t allocated = ph.allocated - ph.workspace + (on && cal->workspace_bytes >= 0 ? cal->workspace_bytes : ph.workspace);
    int64_t overhead = ph.overhead;
    // As estimate.cpp: a calibration that sets an allocator parameter takes the percentage formula
    // (rounding + fraction x dynamic, truncated, + constant, never below 0); one that does not keeps
    // the estimate's own overhead (the allocation replay's, where it ran).
    if (on && e.overhead_term && (cal->overhead_fraction >= 0 || cal->overhead_bytes != 0)) {
      const int64_t share = cal->overhead_fraction >= 0
                                ? ph.rounding + static_cast<int64_t>(cal->overhead_fraction * static_cast<double>(ph.dynamic))
                                : ph.formula;
      overhead = std::max<int64_t>(0, share + cal->overhead_bytes);
    }
    f.allocated = std::max(f.allocated, allocated);
    f.reserved = std::max(f.reserved, allocated + overhead);
    f.device = std::max(f.device, allocated + overhead + context);
  }
  return f;
}

FitReport fit_calibration(const std::vector<FitProbe>& probes, bool cuda) {
  FitReport rep;
  std::vector<const FitProbe*> ok;
  for (const auto& p : probes)
    if (p.measured.device > 0) ok.push_back(&p);
  const size_t n = ok.size();
  auto summarise = [&](const std::function<double(const ProbeReport&)>& err, double& mean, double& max) {
    mean = max = 0;
    for (const auto& r : rep.probes) {
      mean += std::fabs(err(r)) / static_cast<double>(rep.probes.size());
      max = std::max(max, std::fabs(err(r)));
    }
  };
  for (const auto* p : ok) {
    ProbeReport r;
    r.name = p->name;
    r.measured = p->measured;
    r.uncalibrated = predict(p->estimate, nullptr);
    r.error_uncalibrated = signed_error(r.uncalibrated.device, p->measured.device);
    rep.probes.push_back(r);
  }
  summarise([](const ProbeReport& r) { return r.error_uncalibrated; }, rep.mean_uncalibrated, rep.max_uncalibrated);
  auto finish = [&](const Calibration& cal) {
    rep.fitted = cal;
    for (size_t i = 0; i < n; ++i) {
      rep.probes[i].calibrated = predict(ok[i]->estimate, &cal);
      rep.probes[i].error_calibrated = signed_error(rep.probes[i].calibrated.device, ok[i]->measured.device);
    }
    summarise([](const ProbeReport& r) { return r.error_calibrated; }, rep.mean_calibrated, rep.max_calibrated);
  };

  if (!cuda) {
    // The counted CPU peak has no context and no caching allocator: nothing to correct.
    rep.model = "none";
    rep.accepted = n > 0;
    rep.verdict = n > 0 ? "CPU: no context, workspace or caching allocator to fit; the profile holds no corrections"
                        : "no probe ran";
    for (auto& r : rep.probes) {
      r.held_out = r.uncalibrated.device;
      r.error_held_out = r.error_uncalibrated;
    }
    rep.mean_held_out = rep.mean_uncalibrated;
    rep.max_held_out = rep.max_uncalibrated;
    finish(Calibration{});
    return rep;
  }

  std::vector<int64_t> contexts;
  for (const auto* p : ok)
    if (p->measured_context > 0) contexts.push_back(p->measured_context);
  if (!contexts.empty()) {
    const auto [lo, hi] = std::minmax_element(contexts.begin(), contexts.end());
    const int64_t mid = median(contexts);
    if (*hi - *lo > std::max(kContextSpread, mid / 2))
      rep.warnings.push_back(fmt::format(
          "the memory outside the allocator differs across probes ({:.0f} to {:.0f} MiB; the profile takes the median, "
          "{:.0f} MiB): was another process using this GPU?",
          *lo / double(kMiB), *hi / double(kMiB), mid / double(kMiB)));
  } else {
    rep.warnings.push_back("no probe recorded the memory outside the allocator: the context stays the GPU family's default");
  }

  // Leave-one-out per candidate: fit on the others, predict the held-out device figure.
  struct Scored {
    const Candidate* c;
    std::vector<int64_t> held;
    double mean = 0, max = 0;
  };
  std::vector<Scored> scored;
  // Where the allocation replay gave the estimate's overhead, the allocator model leaves no
  // parameter open (DESIGN.md: fit only what the model cannot know): no overhead candidate.
  const bool replayed = std::all_of(ok.begin(), ok.end(), [](const FitProbe* p) { return p->estimate.replayed; });
  for (const Candidate& c : kCandidates) {
    if (n < c.min_probes) continue;
    if (c.overhead && replayed) continue;
    Scored s{&c, {}, 0, 0};
    for (size_t i = 0; i < n; ++i) {
      std::vector<const FitProbe*> rest;
      for (size_t j = 0; j < n; ++j)
        if (j != i) rest.push_back(ok[j]);
      const Calibration cal = fit_one(rest, c);
      s.held.push_back(predict(ok[i]->estimate, &cal).device);
      const double e = std::fabs(signed_error(s.held.back(), ok[i]->measured.device));
      s.mean += e / static_cast<double>(n);
      s.max = std::max(s.max, e);
    }
    scored.push_back(s);
  }
  if (scored.empty()) {
    rep.model = "none";
    rep.verdict = fmt::format("{} probe(s) ran; a fit needs at least 2 to be checked on a held-out probe", n);
    finish(Calibration{});
    return rep;
  }
  for (const auto& s : scored)
    rep.candidates.push_back(fmt::format("{}: held out {:.2f}% mean, {:.2f}% largest", s.c->name, 100 * s.mean, 100 * s.max));
  // Tolerance: a byte's worth of rounding, not a real difference.
  auto passes = [&](const Scored& s) { return s.mean <= rep.mean_uncalibrated + 1e-9 && s.max <= rep.max_uncalibrated + 1e-9; };
  const Scored* best = nullptr;
  for (const auto& s : scored)
    if (passes(s) && (!best || s.mean < best->mean - 1e-9)) best = &s;
  const Scored& shown = best ? *best : *std::min_element(scored.begin(), scored.end(),
                                                          [](const Scored& a, const Scored& b) { return a.mean < b.mean; });
  // Without a context reading the first candidate corrects nothing.
  rep.model = contexts.empty() && !shown.c->overhead ? "none" : shown.c->name;
  rep.mean_held_out = shown.mean;
  rep.max_held_out = shown.max;
  for (size_t i = 0; i < n; ++i) {
    rep.probes[i].held_out = shown.held[i];
    rep.probes[i].error_held_out = signed_error(shown.held[i], ok[i]->measured.device);
  }
  rep.accepted = best != nullptr;
  rep.verdict = fmt::format("held-out device-figure error {:.2f}% mean, {:.2f}% largest ({}); uncalibrated {:.2f}% mean, "
                            "{:.2f}% largest",
                            100 * shown.mean, 100 * shown.max, rep.model, 100 * rep.mean_uncalibrated, 100 * rep.max_uncalibrated);
  if (!best) {
    finish(Calibration{});
    return rep;
  }
  if (rep.model == "none")
    rep.verdict += "; no correction does better held out: the profile holds none";
  finish(fit_one(ok, *best->c));
  return rep;
}

std::vector<FitProbe> fit_probes(const std::vector<ProbeOutcome>& outcomes, bool cuda, const DeviceSpec& device,
                                 int torch_major, int torch_minor) {
  std::vector<FitProbe> out;
  for (const auto& o : outcomes) {
    if (!o.ok) continue;
    TrainingSetup s = o.probe.setup;
    if (cuda) {
      s.device = device;
      s.device.kind = DeviceKind::cuda;
    }
    FitProbe p;
    p.name = o.probe.name;
    p.measured = {o.measured_allocated, o.measured_reserved, o.measured};
    p.measured_context = o.measured_context;
    p.estimate = split_estimate(harness_view(s, cuda, torch_major, torch_minor));
    out.push_back(p);
  }
  return out;
}

}  // namespace memplan::calibrate
