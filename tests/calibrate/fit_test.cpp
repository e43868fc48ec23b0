// The calibration fit without LibTorch (calibrate/fit.h): predict() is what estimate() says under
// a calibration; a synthetic device's context and allocator overhead are recovered; the
// leave-one-out guard never lets a fit make the held-out device figure worse than no calibration;
// and the H200 probes of 1a12cc5, which the old multiplier fit made worse, are not made worse.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "calibrate/fit.h"
#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::calibrate;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The CUDA probe series as the fit sees it on an H200 under LibTorch 2.11, nothing measured yet.
std::vector<FitProbe> h200_probes() {
  std::vector<ProbeOutcome> outcomes;
  for (const auto& p : probe_series(/*cuda=*/true, /*quick=*/false)) {
    ProbeOutcome o;
    o.probe = p;
    o.ok = true;
    outcomes.push_back(o);
  }
  return fit_probes(outcomes, true, profiles::device_for_name("NVIDIA H200"), 2, 11);
}

// Probes whose measurements are what `truth` predicts, with the context as the harness reads it.
// As setups the allocation replay does not cover (LoRA, ZeRO, ...): their overhead is the
// percentage formula's, whose parameters a calibration fits.
std::vector<FitProbe> measured_as(const Calibration& truth) {
  std::vector<FitProbe> ps = h200_probes();
  for (auto& p : ps) {
    p.estimate.replayed = false;
    p.measured = predict(p.estimate, &truth);
    p.measured_context = truth.cuda_context_bytes;
  }
  return ps;
}

bool never_worse(const FitReport& r) {
  return r.mean_held_out <= r.mean_uncalibrated + 1e-9 && r.max_held_out <= r.max_uncalibrated + 1e-9;
}

}  // namespace

TEST_CASE("predict() is estimate() under the calibration, for every probe") {
  Calibration a;
  a.cuda_context_bytes = 700 * kMiB;
  a.overhead_fraction = 0.12;
  a.overhead_bytes = 300 * kMiB;
  Calibration b = a;
  b.workspace_bytes = 96 * kMiB;
  Calibration c;  // the constant alone, on the default fraction
  c.overhead_bytes = 64 * kMiB;
  const DeviceSpec h200 = profiles::device_for_name("NVIDIA H200");
  REQUIRE(h200.name == "h200");
  for (const auto& p : probe_series(true, false)) {
    TrainingSetup s = p.setup;
    s.device = h200;
    const TrainingSetup hs = harness_view(s, true, 2, 11);
    const EstimateSplit e = split_estimate(hs);
    CAPTURE(p.name);
    CHECK(predict(e, nullptr).device == estimate(hs).peak_bytes());
    for (const Calibration* cal : {&a, &b, &c}) CHECK(predict(e, cal).device == estimate(hs, cal).peak_bytes());
    // Allocated leaves the context and the allocator overhead out; reserved adds the overhead.
    const PhaseState& pk = estimate(hs, &a).peak();
    CHECK(predict(e, &a).reserved >= pk.total() - pk[Term::cuda_context]);
  }
}

TEST_CASE("a synthetic device's context and allocator overhead are recovered") {
  Calibration truth;
  truth.cuda_context_bytes = 731 * kMiB;
  truth.overhead_fraction = 0.08;
  truth.overhead_bytes = 300 * kMiB;
  const FitReport r = fit_calibration(measured_as(truth), true);
  CAPTURE(r.verdict);
  REQUIRE(r.accepted);
  CHECK(r.model == "context + allocator overhead");
  CHECK(r.fitted.cuda_context_bytes == truth.cuda_context_bytes);
  CHECK(r.fitted.overhead_fraction == doctest::Approx(0.08).epsilon(1e-6));
  CHECK(std::llabs(r.fitted.overhead_bytes - truth.overhead_bytes) <= 16);  // truncation of fraction x bytes
  CHECK(r.fitted.workspace_bytes == -1);                                   // the estimate's workspace held
  CHECK(r.fitted.activation_scale == 1.0);
  CHECK(r.fitted.model_state_scale == 1.0);
  CHECK(r.max_held_out < 1e-6);
  CHECK(r.max_calibrated < 1e-6);
  CHECK(r.max_uncalibrated > 0.01);
  CHECK(r.warnings.empty());
  REQUIRE(r.probes.size() == 7);
  for (const auto& p : r.probes) CHECK(std::llabs(p.calibrated.reserved - p.measured.reserved) <= 16);

  SUBCASE("a workspace the estimate misses is found when the data show it") {
    Calibration more = truth;
    more.workspace_bytes = 512 * kMiB;  // two 32 MiB cuBLAS workspaces by default on Hopper
    const FitReport w = fit_calibration(measured_as(more), true);
    REQUIRE(w.accepted);
    CHECK(w.model == "context + workspace + allocator overhead");
    CHECK(w.fitted.workspace_bytes == more.workspace_bytes);
    CHECK(w.fitted.overhead_fraction == doctest::Approx(0.08).epsilon(1e-6));
    CHECK(w.max_held_out < 1e-6);
  }
  SUBCASE("without a reserved split the device figure alone still gives the overhead") {
    std::vector<FitProbe> ps = measured_as(truth);
    for (auto& p : ps) p.measured.allocated = p.measured.reserved = 0;
    const FitReport d = fit_calibration(ps, true);
    REQUIRE(d.accepted);
    CHECK(d.fitted.overhead_fraction == doctest::Approx(0.08).epsilon(1e-4));
    CHECK(d.max_held_out < 1e-4);
  }
  SUBCASE("contexts far apart are warned about") {
    std::vector<FitProbe> ps = measured_as(truth);
    ps[3].measured_context += 3 * 1024 * kMiB;
    ps[3].measured.device += 3 * 1024 * kMiB;
    const FitReport x = fit_calibration(ps, true);
    REQUIRE(x.warnings.size() == 1);
    CHECK(x.warnings[0].find("differs across probes") != std::string::npos);
    CHECK(x.fitted.cuda_context_bytes == truth.cuda_context_bytes);  // the median
  }
}

TEST_CASE("where the allocation replay gave the overhead, only the context is fitted (the allocator model leaves nothing open)") {
  std::vector<FitProbe> ps = h200_probes();
  for (const auto& p : ps) REQUIRE(p.estimate.replayed);  // dense single-GPU AdamW probes: covered
  Calibration truth;
  truth.cuda_context_bytes = 787 * kMiB;
  for (auto& p : ps) {
    p.measured = predict(p.estimate, &truth);
    p.measured_context = truth.cuda_context_bytes;
    p.measured.reserved += 64 * kMiB;  // an allocator the model gets slightly wrong: not fitted away
    p.measured.device += 64 * kMiB;
  }
  const FitReport r = fit_calibration(ps, true);
  CAPTURE(r.verdict);
  REQUIRE(r.accepted);
  CHECK(r.model == "context");
  CHECK(r.candidates.size() == 1);
  CHECK(r.fitted.cuda_context_bytes == truth.cuda_context_bytes);
  CHECK(r.fitted.overhead_fraction < 0);
  CHECK(r.fitted.overhead_bytes == 0);
  // predict() follows estimate(): a context-only profile keeps the replayed overhead.
  TrainingSetup s = probe_series(true, false).front().setup;
  s.device = profiles::device_for_name("NVIDIA H200");
  const TrainingSetup hs = harness_view(s, true, 2, 11);
  CHECK(predict(split_estimate(hs), &r.fitted).device == estimate(hs, &r.fitted).peak_bytes());
  CHECK(estimate(hs, &r.fitted).allocator_replayed);
}

TEST_CASE("noisy, collinear or few probes never make the held-out device figure worse") {
  std::mt19937_64 rng(20261126);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Calibration truth;
    truth.cuda_context_bytes = static_cast<int64_t>((400 + 600 * u(rng)) * kMiB);
    truth.overhead_fraction = 0.2 * u(rng);
    truth.overhead_bytes = static_cast<int64_t>(800 * u(rng) * kMiB);
    std::vector<FitProbe> ps = measured_as(truth);
    if (trial % 3 == 1) ps.resize(2 + trial % 5);  // few probes
    if (trial % 3 == 2)                             // collinear: one probe, repeated
      for (auto& p : ps) p = ps[0];
    const double scale = 0.2 * u(rng);  // up to 20% noise on reserved and context
    for (auto& p : ps) {
      p.measured.reserved += static_cast<int64_t>(scale * noise(rng) * static_cast<double>(p.measured.reserved - p.measured.allocated + 256 * kMiB));
      p.measured.reserved = std::max(p.measured.reserved, p.measured.allocated);
      p.measured_context = std::max<int64_t>(kMiB, p.measured_context + static_cast<int64_t>(scale * noise(rng) * 1024 * kMiB));
      p.measured.device = p.measured.reserved + p.measured_context;
    }
    const FitReport r = fit_calibration(ps, true);
    CAPTURE(trial);
    CAPTURE(r.verdict);
    if (r.accepted) {
      ++accepted;
      CHECK(never_worse(r));
      CHECK(r.fitted.activation_scale == 1.0);
      CHECK(r.fitted.model_state_scale == 1.0);
      CHECK(r.fitted.overhead_fraction < 1.0);
      CHECK(r.fitted.overhead_bytes >= 0);
    } else {
      ++refused;
      CHECK(r.fitted.cuda_context_bytes == -1);  // refused: no corrections
    }
  }
  CHECK(accepted > 50);  // both outcomes happen, so the guard is exercised either way
  CHECK(refused > 0);
}

TEST_CASE("a set where any fit is worse than none is refused") {
  // The uncalibrated estimate is exact on every figure, but the harness read the context 1 GiB
  // high (and reserved 1 GiB low, so the device figure adds up): a context taken from the probes
  // over-predicts every device figure by about 1 GiB.
  std::vector<FitProbe> ps = h200_probes();
  for (auto& p : ps) {
    p.measured = predict(p.estimate, nullptr);
    p.measured_context = p.estimate.context + 1024 * kMiB;
    p.measured.reserved = p.measured.device - p.measured_context;
    p.measured.allocated = std::min(p.measured.allocated, p.measured.reserved);
  }
  const FitReport r = fit_calibration(ps, true);
  CAPTURE(r.verdict);
  CHECK_FALSE(r.accepted);
  CHECK(r.mean_uncalibrated < 1e-9);
  CHECK(r.mean_held_out > 0.01);
  CHECK(r.fitted.cuda_context_bytes == -1);
  CHECK(r.verdict.find("uncalibrated 0.00% mean") != std::string::npos);

  CHECK_FALSE(fit_calibration({ps[0]}, true).accepted);  // one probe: nothing to hold out
}

TEST_CASE("on CPU there is nothing to fit") {
  std::vector<ProbeOutcome> outcomes;
  for (const auto& p : probe_series(false, false)) {
    ProbeOutcome o;
    o.probe = p;
    o.ok = true;
    o.measured = o.measured_allocated = estimate(harness_view(p.setup, false, 2, 6)).peak_bytes() + 1000;
    outcomes.push_back(o);
  }
  const FitReport r = fit_calibration(fit_probes(outcomes, false, DeviceSpec{}, 2, 6), false);
  CHECK(r.accepted);
  CHECK(r.model == "none");
  CHECK(r.fitted.cuda_context_bytes == -1);
  CHECK(r.fitted.overhead_fraction == -1);
  CHECK(r.max_calibrated == doctest::Approx(r.max_uncalibrated));
}

TEST_CASE("probe names are stable: saved measurements are matched by them") {
  // calibrate --from finds a saved probe by name; renaming one orphans every file saved before.
  std::vector<std::string> names;
  for (const auto& p : probe_series(true, false)) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{
                     "llama h1024 L4 b4 s1024 amp-bf16 none", "llama h2048 L4 b2 s2048 amp-bf16 none",
                     "gpt2 h1024 L8 b8 s512 amp-bf16 none", "llama h2048 L8 b4 s4096 amp-bf16 full",
                     "llama h4096 L2 b1 s4096 bf16 none", "gpt2 h1536 L6 b16 s1024 fp32 full",
                     "llama h1024 L12 b32 s256 amp-bf16 every:2"});
  CHECK(parse_torch_version("2.11.0+cu130") == std::array<int, 2>{2, 11});
  CHECK(parse_torch_version("1.13") == std::array<int, 2>{1, 13});
  CHECK(parse_torch_version("") == std::array<int, 2>{0, 0});
}

TEST_CASE("the H200 probes of 1a12cc5: the old fit made them worse, this one does not") {
  // tests/data/calibrate/h200-1a12cc5.json holds the 'measured' device figures of
  // shared/gpu/h200-memplan-calibrate-measure.log. There memplan 1a12cc5 estimated
  // 5.47 13.70 9.36 33.44 23.88 13.48 9.78 GiB (largest error 23.99%) and its fit (activations
  // x1.5870, model states x0.6638, constant -2.16 GiB, context 978.8 MiB) gave 7.99 18.24 13.13
  // 45.37 33.63 18.73 13.50 GiB: largest error 33.30%, every probe but one worse.
  const profiles::SavedCalibration saved = profiles::load_saved_calibration(std::string(MEMPLAN_TEST_DATA) + "/calibrate/h200-1a12cc5.json");
  REQUIRE(saved.probes.size() == 7);
  const std::vector<double> old_calibrated = {7.99, 18.24, 13.13, 45.37, 33.63, 18.73, 13.50};
  double old_max = 0;
  for (size_t i = 0; i < 7; ++i)
    old_max = std::max(old_max, std::fabs(old_calibrated[i] * kGiB - static_cast<double>(saved.probes[i].measured_bytes)) /
                                    static_cast<double>(saved.probes[i].measured_bytes));
  CHECK(old_max == doctest::Approx(0.333).epsilon(0.01));

  const auto series = probe_series(true, false);
  std::vector<ProbeOutcome> outcomes;
  for (const auto& s : saved.probes) {
    const auto it = std::find_if(series.begin(), series.end(), [&](const Probe& p) { return p.name == s.name; });
    REQUIRE(it != series.end());
    ProbeOutcome o;
    o.probe = *it;
    o.ok = s.ok;
    o.measured = s.measured_bytes;
    outcomes.push_back(o);
  }
  const FitReport r = fit_calibration(fit_probes(outcomes, true, profiles::device_for_name("NVIDIA H200"), 2, 11), true);
  CAPTURE(r.verdict);
  REQUIRE(r.probes.size() == 7);
  CHECK((!r.accepted || never_worse(r)));  // a profile written is no worse held out than none
  if (r.accepted) {
    CHECK(r.max_calibrated <= r.max_uncalibrated + 1e-9);
    CHECK(r.max_calibrated < old_max);
  }
  MESSAGE(r.verdict);
  for (const auto& c : r.candidates) MESSAGE(c);
  for (const auto& p : r.probes)
    MESSAGE(p.name << ": measured " << p.measured.device / kGiB << " estimated " << p.uncalibrated.device / kGiB << " calibrated "
                   << p.calibrated.device / kGiB << " held out " << p.held_out / kGiB);
  MESSAGE("fraction " << r.fitted.overhead_fraction << " bytes " << r.fitted.overhead_bytes / kGiB << " context "
                      << r.fitted.cuda_context_bytes);
}
