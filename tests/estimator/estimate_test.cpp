#include <doctest/doctest.h>

#include "estimator/estimate.h"
#include "tests/estimator/specs.h"

using namespace memplan;

TEST_CASE("smoke") {
  TrainingSetup s;
  s.model = testing::gpt2();
  s.batch.micro_batch = 4;
  s.batch.seq_len = 1024;
  s.device.kind = DeviceKind::cpu;
  auto b = estimate(s);
  CHECK(b.peak_bytes() > 0);
  MESSAGE("peak " << b.peak_bytes() / 1e9 << " GB at " << phase_name(b.peak_phase()) << " " << b.peak().at);
  for (auto& ph : b.phases) {
    std::string line = std::string(phase_name(ph.phase)) + ": ";
    for (int i = 0; i < kNumTerms; ++i) line += std::string(term_name(term_at(i))) + "=" + std::to_string(ph.bytes[i] / 1000000) + " ";
    MESSAGE(line);
  }
}
