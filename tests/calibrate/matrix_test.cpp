// The CPU accuracy matrix (DESIGN.md "Accuracy bars"): every case's uncalibrated estimate is
// within 1% of the peak measured by real LibTorch steps on this CPU, on whichever LibTorch this
// build links (Debian 12's 1.13 in build/, Debian 13's 2.6 in build-trixie/ through
// scripts/trixie-root). Prints the table, with the LibTorch each row ran on.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "calibrate/measure.h"
#include "estimator/estimate.h"
#include "tests/calibrate/matrix_cases.h"

using namespace memplan;

namespace {
constexpr double kBar = 0.01;  // DESIGN.md: within 1% of the measured peak, uncalibrated
}

TEST_CASE("CPU matrix: estimate within 1% of measured peak") {
  const bool verbose = std::getenv("MEMPLAN_MATRIX_VERBOSE") != nullptr;
  const char* only = std::getenv("MEMPLAN_MATRIX_ONLY");
  const std::string version = calibrate::torch_version();
  const int major = std::stoi(version);
  const bool bf16_ok = calibrate::cpu_supports_bf16();
  std::printf("\nLibTorch %s, CPU%s\n", version.c_str(), bf16_ok ? "" : " without avx512_bf16 (bf16 cases skipped)");
  std::printf("%-40s %-6s %12s %12s %8s  %s\n", "case", "torch", "estimate", "measured", "error", "peak phase (est/meas)");
  int ran = 0, ran_v2 = 0, v2_cases = 0, skipped_bf16 = 0;
  double worst = 0;
  for (const auto& c : testing::cpu_matrix()) {
    if (only && c.name.find(only) == std::string::npos) continue;
    if (c.min_torch_major > 1) ++v2_cases;
    if (major < c.min_torch_major) {
      std::printf("%-40s %-6s skipped: needs LibTorch %d.x\n", c.name.c_str(), version.c_str(), c.min_torch_major);
      continue;
    }
    const bool bf16 = c.setup.precision == Precision::bf16 || c.setup.precision == Precision::amp_bf16;
    if (bf16 && !bf16_ok) {
      std::printf("%-40s %-6s skipped: no avx512_bf16 on this CPU\n", c.name.c_str(), version.c_str());
      ++skipped_bf16;
      continue;
    }
    calibrate::MeasureOptions opt;
    opt.device = "cpu";
    opt.threads = 2;
    const calibrate::MeasureResult r = calibrate::measure(c.setup, opt);
    const MemoryBreakdown e = estimate(calibrate::harness_setup(c.setup, opt));
    const double err = (static_cast<double>(e.peak_bytes()) - static_cast<double>(r.peak_bytes)) / static_cast<double>(r.peak_bytes);
    std::printf("%-40s %-6s %12lld %12lld %+7.2f%%  %s/%s\n", c.name.c_str(), r.libtorch.c_str(),
                static_cast<long long>(e.peak_bytes()), static_cast<long long>(r.peak_bytes), 100 * err,
                phase_name(e.peak_phase()), phase_name(r.peak_phase));
    if (verbose) {
      for (int p = 0; p < kNumPhases; ++p)
        std::printf("    %-15s est %12lld  meas %12lld  (%+.2f%%)  at %s\n", phase_name(static_cast<Phase>(p)),
                    static_cast<long long>(e.phases[p].total()), static_cast<long long>(r.phase_peaks[p]),
                    100.0 * (e.phases[p].total() - r.phase_peaks[p]) / r.phase_peaks[p], e.phases[p].at.c_str());
      std::printf("    weights meas %lld, states meas %lld, forward_end meas %lld\n", static_cast<long long>(r.weights_bytes),
                  static_cast<long long>(r.states_bytes), static_cast<long long>(r.forward_end_bytes));
    }
    ++ran;
    if (c.min_torch_major > 1) ++ran_v2;
    worst = std::max(worst, std::fabs(err));
    CAPTURE(c.name);
    CHECK(r.libtorch == version);
    CHECK(std::fabs(err) <= kBar);
  }
  std::printf("%d cases ran on LibTorch %s, largest error %.2f%%\n", ran, version.c_str(), 100 * worst);
  CHECK(ran > 0);
  // On 2.x every 2.x case runs (unless filtered or skipped for bf16): a version check that
  // silently turned them off would show here.
  if (major >= 2 && !only && skipped_bf16 == 0) CHECK(ran_v2 == v2_cases);
}
