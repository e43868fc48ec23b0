// memplan fit's library: the largest micro-batch is the boundary of the fitting set, and the
// search's options each fit and say what they change.
#include <doctest/doctest.h>

#include "planner/fit.h"
#include "profiles/profiles.h"
#include "tests/profiles/h200_runs.h"

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

// The allocator cap (--allocator-cap, set_per_process_memory_fraction) against the H200's capped
// runs (tests/data/gpu/traces/*-cap11GiB-*, torch 2.11, seq 1024, amp-bf16, AdamW foreach): the
// verdict comes from replaying the step's allocations through the caching-allocator model within
// the cap, not from the reserved memory the allocator would cache with room.
namespace {
TrainingSetup capped_h200(const char* model, bool ckpt, int64_t batch, const char* cap) {
  profiles::SetupInputs si = testing::h200_inputs(model, batch, 1024, "amp-bf16", ckpt ? "full" : "none");
  si.size_flag(Size::allocator_cap) = cap;
  return profiles::build_setup(si).setup;
}
}  // namespace

TEST_CASE("fit under an allocator cap: the largest micro-batch that runs is the H200's") {
  // Qwen2.5-0.5B with full checkpointing, 11 GiB: micro-batch 1 ran (reserved 11.68 GB, squeezed:
  // uncapped it reserves 11.7 GB), 2 ran out after 4 retries. The acceptance case is micro-batch 4.
  const TrainingSetup q = capped_h200("qwen2.5-0.5b", true, 4, "11GiB");
  CHECK(q.device.allocator_cap_bytes == int64_t{11} << 30);
  CHECK(q.device.capacity_bytes == (int64_t{11} << 30) + q.device.cuda_context_bytes);
  const planner::FitReport r = planner::fit(q);
  CHECK_FALSE(r.verdict.fits);
  CHECK_FALSE(r.verdict.runs);
  CHECK(r.largest_micro_batch == 1);
  CHECK(r.largest_micro_batch_runs == 1);
  // Micro-batch 1: the allocator would cache more than the target's share with room, yet the
  // replay within that share runs, so it fits; the card figure stays the uncapped one.
  const TrainingSetup q1 = capped_h200("qwen2.5-0.5b", true, 1, "11GiB");
  const MemoryBreakdown e1 = estimate(q1);
  const Verdict v1 = judge(e1, q1);
  CHECK(v1.fits);
  CHECK(v1.runs);
  CHECK(e1.verdict_bytes() == target_bytes(q1));
  CHECK(e1.peak_bytes() > target_bytes(q1));
  // GPT-2 without checkpointing: 6 ran, 7 ran out; 6 is over the 90% target's share (its boundary
  // is 11.45 GB of the 11.81), so the largest that fits is smaller than the largest that runs.
  const planner::FitReport g = planner::fit(capped_h200("gpt2", false, 8, "11GiB"));
  CHECK(g.largest_micro_batch_runs == 6);
  CHECK(g.largest_micro_batch >= 1);
  CHECK(g.largest_micro_batch < 6);
  // A fraction is of the card's cudaMemGetInfo total, as torch takes it.
  const TrainingSetup f = capped_h200("gpt2", false, 1, "0.25");
  const auto& cat = profiles::gpu_catalog();
  CHECK(f.device.allocator_cap_bytes == static_cast<int64_t>(0.25 * static_cast<double>(cat.find("h200")->memory_bytes)));
}

// Issue 26: fit for an Axolotl QLoRA on a small card offered only halving the context where Liger's
// kernels at the same micro-batch fit. Liger is searched where the Trainer applies it to the model
// type (monkey_patch.py @ v0.5.10), and left out, with why, elsewhere.
TEST_CASE("fit offers Liger's kernels where they apply, and says why not elsewhere") {
  profiles::SetupInputs in;
  in.config = std::string(MEMPLAN_TEST_DATA) + "/formats/axolotl/01-llama-3.2-1b-qlora.yml";
  in.model = "llama-3.2-1b";
  in.size_flag(Size::gpu_memory) = "6GiB";
  const profiles::BuiltSetup b = profiles::build_setup(in);
  REQUIRE_FALSE(b.setup.runtime.liger);
  const planner::FitReport r = planner::fit(b.setup);
  REQUIRE_FALSE(r.verdict.fits);
  bool single = false, option = false;
  for (const auto& c : r.single)
    if (c.flags == "--liger") {
      single = true;
      CHECK(c.fits);
      CHECK(c.setup.runtime.loss == LossImpl::fused_linear);  // use_liger_kernel's fused linear cross-entropy
      CHECK(estimate(c.setup).verdict_bytes() == c.peak_bytes);
    }
  for (const auto& o : r.options) {
    CAPTURE(o.flags);
    CHECK(o.peak_bytes <= target_bytes(o.setup));
    if (o.flags == "--liger") option = true;
    // No option only adds Liger to another option that is as fast.
    if (o.setup.runtime.liger && o.changes.size() > 1)
      for (const auto& p : r.options) CHECK_FALSE(p.flags + " --liger" == o.flags);
  }
  CHECK(single);
  CHECK(option);
  // A model Liger has no kernels for, and a framework that does not apply them.
  TrainingSetup g = b.setup;
  g.model = profiles::load_model("gpt2", Where());
  std::string why;
  CHECK_FALSE(planner::liger_applies(g, &why));
  CHECK(why == "Liger has no kernels for model_type 'gpt2' (MODEL_TYPE_TO_APPLY_LIGER_FN, src/liger_kernel/transformers/monkey_patch.py @ v0.5.10)");
  TrainingSetup t = b.setup;
  t.runtime.framework = Framework::torchtune;
  CHECK_FALSE(planner::liger_applies(t, &why));
  CHECK(why.find("not by torchtune") != std::string::npos);
  bool left_out = false;
  for (const auto& l : planner::fit_space(g).left_out) left_out = left_out || l.option == "Liger kernels";
  CHECK(left_out);
  // --no-liger: the user cannot use them; fit offers them nowhere and says why.
  planner::FitAsk no_liger;
  no_liger.liger_off = "--no-liger keeps them off";
  const planner::FitReport n = planner::fit(b.setup, nullptr, no_liger);
  for (const auto& c : n.single) CHECK_FALSE(c.setup.runtime.liger);
  for (const auto* list : {&n.options, &n.training_changes})
    for (const auto& o : *list) {
      CAPTURE(o.flags);
      CHECK_FALSE(o.setup.runtime.liger);
    }
  if (n.fewest) CHECK_FALSE(n.fewest->setup.runtime.liger);
  bool said = false;
  for (const auto& l : n.left_out) said = said || (l.option == "Liger kernels" && l.why == "--no-liger keeps them off");
  CHECK(said);
}
