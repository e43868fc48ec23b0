// memplan fit's library: the largest micro-batch is the boundary of the fitting set, and the
// search's options each fit and say what they change.
#include <doctest/doctest.h>

#include "planner/fit.h"
#include "profiles/profiles.h"

using namespace memplan;

TEST_CASE("largest_micro_batch is exactly the boundary") {
  TrainingSetup s;
  s.model = profiles::load_model("qwen2.5-0.5b", Where());
  const auto& cat = profiles::gpu_catalog();
  profiles::apply_gpu(s, *cat.find("rtx-4090"), cat);
  s.precision = Precision::amp_bf16;
  s.attention = AttentionImpl::flash;
  s.batch.seq_len = 1024;
  const int64_t b = planner::largest_micro_batch(s);
  REQUIRE(b >= 1);
  s.batch.micro_batch = b;
  CHECK(planner::fits(s));
  s.batch.micro_batch = b + 1;
  CHECK_FALSE(planner::fits(s));
}

TEST_CASE("the acceptance case does not fit and every option the search reports fits") {
  TrainingSetup s;
  s.model = profiles::load_model("llama-3.2-1b", Where());
  const auto& cat = profiles::gpu_catalog();
  profiles::apply_gpu(s, *cat.find("rtx-3060-12gb"), cat);
  s.precision = Precision::amp_bf16;
  s.batch.micro_batch = 4;
  s.batch.seq_len = 1024;
  const planner::FitReport r = planner::fit(s);
  CHECK_FALSE(r.verdict.fits);
  CHECK(r.largest_micro_batch == 0);
  REQUIRE(!r.options.empty());
  for (const auto& o : r.options) {  // each option re-estimates within the target
    CAPTURE(o.flags);
    CHECK_FALSE(o.changes.empty());
    CHECK(o.peak_bytes == estimate(o.setup).peak_bytes());
    CHECK(planner::fits(o.setup));
  }
  for (const auto& c : r.single) CHECK(c.peak_bytes < r.peak_bytes);
}

TEST_CASE("largest_micro_batch stops where validate() does: no estimate past the bounds (fuzz_planner)") {
  // A small model on a 1 PiB device with a long sequence: the doubling search would reach
  // micro-batches whose token counts overflow int64 (UBSan in layers.cpp before the fix).
  TrainingSetup s;
  s.model = profiles::load_model("gpt2", Where());
  const auto& cat = profiles::gpu_catalog();
  profiles::apply_gpu(s, *cat.find("h100-80gb"), cat);
  s.device.capacity_bytes = int64_t{1} << 50;
  s.batch.seq_len = 1024;
  const int64_t b = planner::largest_micro_batch(s, nullptr, int64_t{1} << 61);
  CHECK(b >= 1);
  CHECK(b <= 1'000'000);
  s.batch.micro_batch = b;
  CHECK(validate(s).empty());
}
