// Advice that holds (issue 14): fit and plan recommend only what the card runs, check offload
// against the node's RAM, search combinations instead of stacking a ladder, and plan is one search
// whatever --emit is, honouring --zero and --no-deepspeed.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "estimator/capability.h"
#include "estimator/error.h"
#include "planner/fit.h"
#include "planner/plan.h"
#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::planner;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TrainingSetup on(const char* model, const char* gpu, int64_t seq) {
  TrainingSetup s;
  s.model = profiles::load_model(model, Where());
  const auto& cat = profiles::gpu_catalog();
  const profiles::GpuProfile* g = cat.find(gpu);
  REQUIRE(g != nullptr);
  profiles::apply_gpu(s, *g, cat);
  s.batch.seq_len = seq;
  return s;
}

// What the setup uses that its card cannot run ("" when it runs everything it uses). SDPA is
// not in the list: it runs everywhere (its math path where the fused kernels do not).
std::string cannot_run(const TrainingSetup& s) {
  for (Feature f : {Feature::bf16, Feature::flash_attention, Feature::bitsandbytes, Feature::deepspeed, Feature::deepspeed_offload,
                    Feature::multi_gpu}) {
    std::string why;
    if (setup_uses(s, f) && device_support(s.device, f, &why) != Support::yes) return why.empty() ? to_string(f) : why;
  }
  return "";
}

bool mentions(const std::vector<LeftOut>& l, const std::string& option) {
  return std::any_of(l.begin(), l.end(), [&](const LeftOut& x) { return x.option.find(option) != std::string::npos; });
}

// One card per family the issue names.
const char* const kFamilies[] = {"a100-80gb", "h100-80gb", "t4", "v100-16gb", "mi250x", "rx-6750-xt", "m2-16gb"};

}  // namespace

TEST_CASE("capabilities come from gpus.yaml: bf16, flash attention, bitsandbytes and DeepSpeed per family") {
  auto caps = [](const char* gpu) { return on("gpt2", gpu, 128).device; };
  CHECK(device_support(caps("t4"), Feature::bf16) == Support::no);
  CHECK(device_support(caps("v100-16gb"), Feature::bf16) == Support::no);
  CHECK(device_support(caps("rx-6750-xt"), Feature::flash_attention) == Support::no);
  CHECK(device_support(caps("t4"), Feature::flash_attention) == Support::no);
  CHECK(device_support(caps("a100-80gb"), Feature::flash_attention) == Support::yes);
  CHECK(device_support(caps("h100-80gb"), Feature::flash_attention) == Support::yes);
  CHECK(device_support(caps("m2-16gb"), Feature::bitsandbytes) == Support::no);
  CHECK(device_support(caps("m2-16gb"), Feature::deepspeed) == Support::no);
  CHECK(device_support(caps("m2-16gb"), Feature::deepspeed_offload) == Support::no);
  CHECK(device_support(caps("a100-80gb"), Feature::bitsandbytes) == Support::yes);
  std::string why;
  CHECK(device_support(caps("rx-6750-xt"), Feature::flash_attention, &why) == Support::no);
  CHECK(why.find("rx-6750-xt") != std::string::npos);
  CHECK(why.find("RDNA2") != std::string::npos);
}

TEST_CASE("a setup that asks for what its card cannot run is warned about, at the field that asks") {
  profiles::SetupInputs in;
  in.model = "gpt2";
  in.gpu = "t4";
  in.choice_flag(Choice::precision) = "bf16";
  in.choice_flag(Choice::attention) = "flash";
  const profiles::BuiltSetup b = profiles::build_setup(in);
  bool bf16 = false, flash = false;
  for (const Warning& w : b.warnings) {
    bf16 = bf16 || (w.message.rfind("bf16:", 0) == 0 && w.where.flag == "--precision");
    flash = flash || (w.message.rfind("flash attention:", 0) == 0 && w.where.flag == "--attention");
  }
  CHECK(bf16);
  CHECK(flash);
  in.strict = true;
  CHECK_THROWS_AS(profiles::build_setup(in), InputError);
}

TEST_CASE("plan recommends, on every GPU family, only what the card runs") {
  for (const char* gpu : kFamilies) {
    const std::string card = gpu;
    CAPTURE(card);
    PlanRequest req;
    req.base = on("qwen2.5-0.5b", gpu, 2048);
    req.global_batch = 32;
    const PlanResult r = plan(req);
    REQUIRE(r.found);
    CHECK(cannot_run(r.best.setup) == "");
    for (const Candidate& c : r.group_bests) {
      CAPTURE(to_string(c.setup.precision));
      CHECK(cannot_run(c.setup) == "");
    }
    for (const TierPlan& t : r.tiers)
      if (t.found) CHECK(cannot_run(t.best.setup) == "");
    const DeviceSpec& d = req.base.device;
    if (!d.bf16) CHECK(mentions(r.left_out, "bf16"));
    if (device_support(d, Feature::flash_attention) != Support::yes) CHECK(mentions(r.left_out, "flash attention"));
    if (device_support(d, Feature::deepspeed) != Support::yes) CHECK(mentions(r.left_out, "DeepSpeed"));
  }
}

TEST_CASE("fit offers, on every GPU family, only what the card runs, and says what it left out") {
  for (const char* gpu : kFamilies) {
    const std::string card = gpu;
    CAPTURE(card);
    TrainingSetup s = on("llama-3.2-1b", gpu, 2048);
    s.precision = Precision::fp32;
    s.attention = AttentionImpl::eager;
    s.batch.micro_batch = 8;
    const FitReport r = fit(s);
    REQUIRE_FALSE(r.verdict.fits);
    for (const Change& c : r.single) {
      CAPTURE(c.flags);
      CHECK(cannot_run(c.setup) == "");
    }
    for (const auto* list : {&r.options, &r.training_changes})
      for (const FitOption& o : *list) {
        CAPTURE(o.flags);
        CHECK(cannot_run(o.setup) == "");
      }
    const DeviceSpec& d = s.device;
    if (device_support(d, Feature::bitsandbytes) != Support::yes) CHECK(mentions(r.left_out, "8-bit"));
    if (device_support(d, Feature::flash_attention) != Support::yes) CHECK(mentions(r.left_out, "flash attention"));
    if (!d.bf16) CHECK(mentions(r.left_out, "bf16"));
  }
}

TEST_CASE("fit from fp32 offers bf16 where the card has it, fp16 where it does not") {
  for (const char* gpu : {"rtx-3060-12gb", "t4"}) {
    const std::string card = gpu;
    CAPTURE(card);
    TrainingSetup s = on("llama-3.2-1b", gpu, 1024);
    s.precision = Precision::fp32;
    s.batch.micro_batch = 4;
    const FitReport r = fit(s);
    REQUIRE_FALSE(r.verdict.fits);
    auto bf16 = [](Precision p) { return p == Precision::amp_bf16 || p == Precision::bf16 || p == Precision::mixed_bf16; };
    auto fp16 = [](Precision p) { return p == Precision::amp_fp16 || p == Precision::fp16 || p == Precision::mixed_fp16; };
    bool offered = false, wrong = false;
    for (const Change& c : r.single) {
      offered = offered || (s.device.bf16 ? bf16(c.setup.precision) : fp16(c.setup.precision));
      wrong = wrong || (!s.device.bf16 && bf16(c.setup.precision));
    }
    for (const FitOption& o : r.options) {
      offered = offered || (s.device.bf16 ? bf16(o.setup.precision) : fp16(o.setup.precision));
      wrong = wrong || (!s.device.bf16 && bf16(o.setup.precision));
    }
    CHECK(offered);
    CHECK_FALSE(wrong);
  }
}

TEST_CASE("fit's options are the smallest change sets: no sequence cut while the context fits, lighter offload first") {
  // The TRL SFT case: a 1B model in bf16 autocast on a 12 GB card.
  TrainingSetup s = on("llama-3.2-1b", "rtx-3060-12gb", 2048);
  s.precision = Precision::amp_bf16;
  s.batch.micro_batch = 4;
  s.batch.grad_accum = 4;
  const FitReport r = fit(s);
  REQUIRE_FALSE(r.verdict.fits);
  REQUIRE_FALSE(r.options.empty());
  bool eight_bit = false;
  for (const FitOption& o : r.options) {
    CAPTURE(o.flags);
    CHECK(o.peak_bytes <= target_bytes(o.setup));
    CHECK(o.setup.batch.seq_len == s.batch.seq_len);  // the context is kept
    CHECK(o.setup.batch.micro_batch * o.setup.batch.grad_accum == 16);  // and the effective batch
    CHECK(o.setup.finetune.mode == FinetuneMode::full);
    eight_bit = eight_bit || o.setup.optimizer == OptimizerKind::adamw_8bit;
    // Parameter offload only where optimizer offload alone does not fit.
    if (o.setup.parallel.offload == Offload::optimizer_and_params) {
      TrainingSetup lighter = o.setup;
      lighter.parallel.offload = Offload::optimizer;
      CHECK_FALSE(fits(lighter));
    }
  }
  // Options are ranked by modelled speed and none is a superset of a faster one.
  for (size_t i = 1; i < r.options.size(); ++i) CHECK(r.options[i].time.tokens_per_s <= r.options[i - 1].time.tokens_per_s * 1.0001);
  for (size_t i = 0; i < r.options.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const auto& a = r.options[j].changes;
      const auto& b = r.options[i].changes;
      const bool includes = std::all_of(a.begin(), a.end(), [&](const Change& x) {
        return std::any_of(b.begin(), b.end(), [&](const Change& y) { return y.step == x.step && y.flags == x.flags; });
      });
      CHECK_FALSE((includes && a.size() < b.size()));
    }
  // No option is a faster one with only a heavier sharding or offload.
  for (size_t i = 0; i < r.options.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      auto rest = [](const FitOption& o) {
        std::vector<std::string> k;
        for (const Change& c : o.changes)
          if (c.step != "sharding") k.push_back(c.step + "=" + c.flags);
        std::sort(k.begin(), k.end());
        return k;
      };
      if (rest(r.options[i]) == rest(r.options[j])) CHECK(r.options[i].flags == r.options[j].flags);
    }
  // Beside the fastest, the fewest changes that fit, when the fastest need more.
  if (r.fewest) {
    CHECK(r.fewest->peak_bytes <= target_bytes(r.fewest->setup));
    for (const FitOption& o : r.options) CHECK(r.fewest->changes.size() < o.changes.size());
  }
  // bitsandbytes' GPU optimizers never come with offload (that steps on the CPU).
  for (const FitOption& o : r.options) {
    const bool bnb = o.setup.optimizer == OptimizerKind::adamw_8bit || o.setup.optimizer == OptimizerKind::paged_adamw_8bit;
    CHECK_FALSE((bnb && o.setup.parallel.offload != Offload::none));
  }
  // 8-bit optimizers and LoRA are searched in combinations.
  bool lora = false;
  for (const FitOption& o : r.training_changes) lora = lora || o.setup.finetune.mode != FinetuneMode::full;
  CHECK((eight_bit || r.options.size() >= 1));
  CHECK(lora);
}

TEST_CASE("plan is one search whatever --emit is") {
  PlanRequest req;
  req.base = on("llama-3.2-1b", "a100-40gb", 2048);
  req.base.parallel.num_gpus = 2;
  req.global_batch = 64;
  const PlanResult plain = plan(req);
  REQUIRE(plain.found);
  for (EmitFormat f : {EmitFormat::memplan, EmitFormat::train_config, EmitFormat::deepspeed, EmitFormat::hf, EmitFormat::lightning}) {  // torchtune/litgpt plan with their own framework
    CAPTURE(emit_format_name(f));
    PlanRequest q = req;
    q.format = f;
    const PlanResult r = plan(q);
    CHECK(r.candidates == plain.candidates);
    CHECK(r.fitting == plain.fitting);
    CHECK(r.group_bests.size() == plain.group_bests.size());
    REQUIRE(r.found);
    CHECK(can_express(f, r.best.setup));
    // When the format could express the overall best, it is the plain plan's best.
    if (!r.unrestricted) CHECK(r.best.time.tokens_per_s == doctest::Approx(plain.best.time.tokens_per_s));
    else CHECK_FALSE(r.format_note.empty());
  }
}

TEST_CASE("plan honours --zero 0, --zero 1 and --no-deepspeed, and refuses contradictions") {
  PlanRequest req;
  req.base = on("llama-3-8b", "a100-80gb", 2048);
  req.base.parallel.num_gpus = 8;
  req.global_batch = 64;
  for (int z : {0, 1}) {
    CAPTURE(z);
    PlanRequest q = req;
    q.constraints.zero = z;
    const PlanResult r = plan(q);
    REQUIRE(r.found);
    for (const Candidate& c : r.group_bests) {
      CHECK(c.setup.parallel.zero_stage == z);
      if (z == 0 && c.setup.parallel.fsdp == FsdpMode::none) CHECK(c.setup.parallel.offload == Offload::none);  // DDP
      if (z == 1) CHECK(c.setup.parallel.fsdp == FsdpMode::none);
    }
  }
  PlanRequest q = req;
  q.constraints.no_deepspeed = true;
  const PlanResult r = plan(q);
  REQUIRE(r.found);
  for (const Candidate& c : r.group_bests) CHECK(c.setup.parallel.zero_stage == 0);
  bool fsdp = false;
  for (const Candidate& c : r.group_bests) fsdp = fsdp || c.setup.parallel.fsdp != FsdpMode::none;
  CHECK(fsdp);  // FSDP stays on offer for a DDP/FSDP user
  q.constraints.zero = 3;
  CHECK_THROWS_AS(plan_space(q.base, q.constraints), InputError);
}

TEST_CASE("host memory limits offload plans, per node") {
  // The case: a 70B full fine-tune on one T4 only fits through offload, needing far more
  // host RAM than a workstation has.
  PlanRequest req;
  req.base = on("llama-3-70b", "t4", 1024);
  req.global_batch = 8;
  const PlanResult unknown = plan(req);
  REQUIRE(unknown.found);
  CHECK(unknown.best.setup.parallel.offload != Offload::none);
  CHECK(unknown.best.host_per_node_bytes > 512 * kGiB);
  req.base.parallel.host_memory_bytes = 256 * kGiB;
  const PlanResult known = plan(req);
  CHECK_FALSE(known.found);
  CHECK(known.host_short > 0);
  CHECK(known.why_not.find("host RAM") != std::string::npos);
  // Per node: 8 ranks on a node need 8 x one rank's host terms.
  TrainingSetup s = on("llama-3-8b", "a100-40gb", 1024);
  s.parallel.num_gpus = 8;
  s.parallel.zero_stage = 2;
  s.parallel.offload = Offload::optimizer;
  const MemoryBreakdown e = estimate(s);
  s.parallel.host_memory_bytes = 64 * kGiB;
  const HostVerdict v = judge_host(e, s);
  CHECK(v.ranks_per_node == 8);
  CHECK(v.per_node_bytes == 8 * v.per_gpu_bytes);
  CHECK(v.per_gpu_bytes == e.host_bytes());
  CHECK(v.known);
  CHECK(v.fits == (v.per_node_bytes <= static_cast<int64_t>(s.thresholds.target * static_cast<double>(64 * kGiB))));
}

TEST_CASE("fit never offers an offload the node's RAM cannot hold") {
  TrainingSetup s = on("llama-3-8b", "rtx-4090", 1024);
  s.precision = Precision::amp_bf16;
  s.batch.micro_batch = 1;
  const FitReport unknown = fit(s);
  REQUIRE_FALSE(unknown.verdict.fits);
  bool offload = false;
  for (const FitOption& o : unknown.options) offload = offload || o.setup.parallel.offload != Offload::none;
  REQUIRE(offload);  // with the node's RAM unknown, offload is on offer (and says how much it needs)
  s.parallel.host_memory_bytes = 32 * kGiB;
  const FitReport known = fit(s);
  for (const auto* list : {&known.options, &known.training_changes})
    for (const FitOption& o : *list) {
      CAPTURE(o.flags);
      CHECK(o.host_per_node_bytes <= static_cast<int64_t>(s.thresholds.target * static_cast<double>(32 * kGiB)));
    }
  CHECK(mentions(known.left_out, "offload"));
}

TEST_CASE("fit offers the lighter sharding or offload, not the same changes with a heavier one") {
  // examples/quickstart.yaml with micro-batch 4 x 8: ZeRO-2 optimizer offload fits, so ZeRO-3's
  // offloads with the same other changes are not offered beside it.
  TrainingSetup s = on("qwen2.5-0.5b", "rtx-3060-12gb", 1024);
  s.precision = Precision::amp_bf16;
  s.attention = AttentionImpl::sdpa;
  s.checkpointing = *parse_checkpointing("full");
  s.batch.micro_batch = 4;
  s.batch.grad_accum = 8;
  const FitReport r = fit(s);
  REQUIRE_FALSE(r.verdict.fits);
  REQUIRE(r.options.size() >= 2);
  auto rest = [](const FitOption& o) {
    std::vector<std::string> k;
    for (const Change& c : o.changes)
      if (c.step != "sharding") k.push_back(c.step + "=" + c.flags);
    std::sort(k.begin(), k.end());
    return k;
  };
  for (size_t i = 0; i < r.options.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      CAPTURE(r.options[i].flags);
      CHECK(rest(r.options[i]) != rest(r.options[j]));
    }
}

TEST_CASE("on every GPU in the catalog, plan's pick and fit's options run on the card") {
  const auto& cat = profiles::gpu_catalog();
  for (const profiles::GpuProfile* g : cat.all()) {
    const std::string card = g->name;
    CAPTURE(card);
    PlanRequest req;
    req.base = on("qwen2.5-0.5b", g->name.c_str(), 1024);
    req.global_batch = 16;
    const PlanResult r = plan(req);
    if (r.found) CHECK(cannot_run(r.best.setup) == "");
    for (const Candidate& c : r.group_bests) CHECK(cannot_run(c.setup) == "");
    TrainingSetup s = on("llama-3.2-1b", g->name.c_str(), 2048);
    s.precision = Precision::fp32;
    s.attention = AttentionImpl::eager;
    s.batch.micro_batch = 16;
    const FitReport f = fit(s);
    for (const auto* list : {&f.options, &f.training_changes})
      for (const FitOption& o : *list) {
        CAPTURE(o.flags);
        CHECK(cannot_run(o.setup) == "");
      }
    if (f.fewest) CHECK(cannot_run(f.fewest->setup) == "");
  }
}
