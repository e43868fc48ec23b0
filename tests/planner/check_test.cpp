// The CI gate's logic (planner/check.h): the comparison with a baseline, per-term deltas and their
// causes, blame, growth and strict mode. Expected numbers come from estimate() on the same setups,
// so the tests pin the gate's wording and logic rather than the estimator's current values. The
// command end to end (files, git, formats) is tests/cli/check_test.cpp.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <cstdlib>
#include <string>
#include <vector>

#include "estimator/fields.h"
#include "planner/check.h"
#include "profiles/profiles.h"

namespace memplan {
namespace {

const std::string kCheckData = std::string(MEMPLAN_TEST_DATA) + "/check";
std::string data(const std::string& name) { return kCheckData + "/" + name; }

TrainingSetup setup_of(const std::string& path) {
  profiles::SetupInputs in;
  in.config = path;
  return profiles::build_setup(in).setup;
}
int64_t peak(const TrainingSetup& s) { return estimate(s).peak_bytes(); }

// ---- planner: compare -----------------------------------------------------------------------------

TEST_CASE("compare: one changed field, its cost, the terms it moved and the growth") {
  const TrainingSetup base = setup_of(data("fits.yaml"));  // micro-batch 2
  const TrainingSetup now = setup_of(data("over.yaml"));   // micro-batch 64
  const planner::Comparison c = planner::compare(base, nullptr, now, nullptr);
  const int64_t p0 = peak(base), p1 = peak(now);
  CHECK(c.base_peak_bytes == p0);
  CHECK(c.peak_bytes == p1);
  CHECK(c.growth == doctest::Approx(static_cast<double>(p1 - p0) / static_cast<double>(p0)));
  REQUIRE(c.changes.size() == 1);
  const planner::FieldChange& m = c.changes[0];
  CHECK(m.field == "batch.micro_batch");
  CHECK(m.text() == "micro-batch 2 -> 64");
  CHECK(m.effect_known);
  CHECK(m.peak_effect_bytes == p1 - p0);  // reverting the only change gives the baseline back
  CHECK(m.over_effect_bytes == p1 - p0);  // same card, same target

  REQUIRE(!c.terms.empty());
  CHECK(c.terms[0].term == Term::activations);  // a 32x micro-batch: activations move most
  int64_t listed = 0;
  for (size_t i = 0; i < c.terms.size(); ++i) {
    const planner::TermDelta& d = c.terms[i];
    CHECK(std::llabs(d.delta_bytes()) >= planner::kTermDeltaFloorBytes);
    if (i > 0) CHECK(std::llabs(d.delta_bytes()) <= std::llabs(c.terms[i - 1].delta_bytes()));
    CHECK(d.causes == std::vector<size_t>{0});
    listed += d.delta_bytes();
  }
  // The terms below the floor are all that is missing from the peak's change.
  CHECK(std::llabs((p1 - p0) - listed) < memplan::kNumTerms * planner::kTermDeltaFloorBytes);
  // Weights do not depend on the micro-batch.
  for (const planner::TermDelta& d : c.terms) CHECK(d.term != Term::weights);
}

TEST_CASE("compare: an unchanged config has no changes, no term deltas and no growth") {
  const TrainingSetup s = setup_of(data("fits.yaml"));
  const planner::Comparison c = planner::compare(s, nullptr, s, nullptr);
  CHECK(c.changes.empty());
  CHECK(c.terms.empty());
  CHECK(c.growth == 0.0);
}

// A row of the registries changed alone: compare() names it by its path, or the gate could not
// say what moved the peak (the runtime's switches, choices and releases were once not compared).
namespace {
void check_named(const TrainingSetup& base, const TrainingSetup& now, const std::string& path) {
  CAPTURE(path);
  const planner::Comparison c = planner::compare(base, nullptr, now, nullptr);
  REQUIRE(c.changes.size() == 1);
  CHECK(c.changes[0].field == path);
  CHECK(c.changes[0].before != c.changes[0].after);
}
}  // namespace

TEST_CASE("compare: every count, choice, list, release and switch of the registry is a field it compares") {
  TrainingSetup plain = setup_of(data("fits.yaml"));
  plain.parallel.num_gpus = 4;
  for (const CountField& f : count_fields()) {
    TrainingSetup base = plain;
    if (f.id == Count::lora_rank) base.finetune.mode = FinetuneMode::lora;
    if (f.id == Count::zero_stage) base.parallel.zero_stage = 1;
    TrainingSetup now = base;
    f.set(now, f.get(base) == 2 ? 4 : 2);
    check_named(base, now, f.path);
  }
  for (const ChoiceField& f : choice_fields()) {
    TrainingSetup base = plain;
    if (f.id == Choice::offload) base.parallel.zero_stage = 3;
    if (f.id == Choice::adapter_dtype) base.finetune.mode = FinetuneMode::lora;  // compared with adapters
    TrainingSetup now = base;
    for (const std::string& v : f.samples())
      if (v != f.get(base) && f.id != Choice::finetune) {
        REQUIRE(f.set(now, v));
        break;
      }
    if (f.id == Choice::finetune) now.finetune.mode = FinetuneMode::lora;  // qlora would also quantize the base
    check_named(base, now, f.path);
  }
  for (const ListField& f : list_fields()) {  // the LoRA targets, with adapters
    TrainingSetup base = plain;
    base.finetune.mode = FinetuneMode::lora;
    TrainingSetup now = base;
    f.set(now, {"q", "k", "v", "o"});
    check_named(base, now, f.path);
    TrainingSetup full = plain, full_now = plain;  // without adapters they mean nothing
    f.set(full_now, {"q", "k", "v", "o"});
    CHECK(planner::compare(full, nullptr, full_now, nullptr).changes.empty());
  }
  for (const VersionField& f : version_fields()) {
    TrainingSetup now = plain;
    f.set(now, 5, 1);
    check_named(plain, now, f.path);
  }
  for (const SwitchField& f : switch_fields()) {
    TrainingSetup base = plain;
    base.runtime.fp8 = f.id == Switch::fp8_recompute_weight;  // in effect only with float8 linears
    if (f.id == Switch::fsdp_no_sync) {  // in effect only under FSDP with accumulation
      base.parallel.fsdp = FsdpMode::full_shard;
      base.batch.grad_accum = 2;
    }
    TrainingSetup now = base;
    f.set(now, !f.get(base));
    check_named(base, now, f.path);
  }
  // A switch's rule that set the loss: the loss is compared too, and carries the logits' bytes.
  TrainingSetup fused = plain;
  fused.runtime.liger = true;
  fused.runtime.loss = LossImpl::fused_linear;
  const planner::Comparison liger = planner::compare(plain, nullptr, fused, nullptr);
  REQUIRE(liger.changes.size() == 2);
  const auto loss = std::find_if(liger.changes.begin(), liger.changes.end(),
                                 [](const planner::FieldChange& c) { return c.field == "runtime.loss"; });
  REQUIRE(loss != liger.changes.end());
  CHECK(loss->text() == "loss standard -> fused-linear");
  CHECK(loss->peak_effect_bytes < 0);
  // The adapters' dtype means nothing under full fine-tuning.
  TrainingSetup model_dtype = plain;
  model_dtype.finetune.adapter_fp32 = false;
  CHECK(planner::compare(plain, nullptr, model_dtype, nullptr).changes.empty());
  // Nor what describes the adapters when one side has none: dropping LoRA is the method's change.
  TrainingSetup described = plain;
  described.finetune.mode = FinetuneMode::lora;
  described.finetune.adapter_fp32 = false;
  described.finetune.lora_targets = {"q", "v"};
  const planner::Comparison dropped = planner::compare(described, nullptr, plain, nullptr);
  REQUIRE(dropped.changes.size() == 1);
  CHECK(dropped.changes[0].field == path(Choice::finetune));
  // A switch that does nothing now is not a change (putting it back would change nothing).
  TrainingSetup now = plain;
  now.runtime.fsdp_no_sync = !plain.runtime.fsdp_no_sync;
  CHECK(planner::compare(plain, nullptr, now, nullptr).changes.empty());
  // The LoRA numbers, with adapters.
  TrainingSetup lora = plain;
  lora.finetune.mode = FinetuneMode::lora;
  TrainingSetup dropout = lora;
  dropout.finetune.lora_dropout = 0.1;
  check_named(lora, dropout, path(Number::lora_dropout));
}

TEST_CASE("gate: a runtime value a rule set is blamed only when the file states it") {
  // torch 1.13 in the file: its rule keeps the gradients allocated between steps
  // (zero_grad(set_to_none=False)); the release is the file's key, the switch the rule's.
  const TrainingSetup base = setup_of(data("fits.yaml"));
  TrainingSetup now = base;
  now.runtime.torch_major = 1;
  now.runtime.torch_minor = 13;
  now.runtime.zero_grad_set_to_none = false;
  const planner::GateOptions grow{false, 0.001};
  const std::string release = path(Version::torch), kept = path(Switch::zero_grad_set_to_none);
  const planner::GateResult ruled = planner::gate(now, nullptr, &base, nullptr, grow, 0, {"model", release});
  CHECK(ruled.over_growth);
  const auto& changes = ruled.baseline->changes;
  const auto keep = std::find_if(changes.begin(), changes.end(), [&](const planner::FieldChange& c) { return c.field == kept; });
  REQUIRE(keep != changes.end());
  CHECK(keep->peak_effect_bytes > 0);  // it is what costs the bytes...
  CHECK(ruled.blame != kept);          // ...but the file did not say it
  // Stated in the file (and the release not), it is blamed.
  const planner::GateResult stated = planner::gate(now, nullptr, &base, nullptr, grow, 0, {"model", kept});
  CHECK(stated.blame == kept);
}

TEST_CASE("compare: several changes, each measured alone, largest first") {
  const TrainingSetup base = setup_of(data("fits.yaml"));
  TrainingSetup now = base;
  now.batch.micro_batch = 8;
  now.batch.seq_len = 1024;
  now.precision = Precision::fp32;
  const planner::Comparison c = planner::compare(base, nullptr, now, nullptr);
  REQUIRE(c.changes.size() == 3);
  for (size_t i = 0; i < c.changes.size(); ++i) {
    const planner::FieldChange& ch = c.changes[i];
    TrainingSetup reverted = now;
    if (ch.field == "batch.micro_batch") reverted.batch.micro_batch = base.batch.micro_batch;
    else if (ch.field == "batch.seq_len") reverted.batch.seq_len = base.batch.seq_len;
    else if (ch.field == "precision") reverted.precision = base.precision;
    else FAIL("unexpected change " << ch.field);
    CAPTURE(ch.field);
    CHECK(ch.peak_effect_bytes == peak(now) - peak(reverted));
    if (i > 0) CHECK(ch.over_effect_bytes <= c.changes[i - 1].over_effect_bytes);
  }
  std::vector<std::string> texts;
  for (const auto& ch : c.changes) texts.push_back(ch.text());
  CHECK(std::find(texts.begin(), texts.end(), "sequence length 512 -> 1024") != texts.end());
  CHECK(std::find(texts.begin(), texts.end(), "precision amp-bf16 -> fp32") != texts.end());
  // Every listed term names at least one cause, and causes are valid indices.
  for (const planner::TermDelta& d : c.terms)
    for (size_t k : d.causes) CHECK(k < c.changes.size());
}

TEST_CASE("compare: a smaller card is a change that costs headroom, not peak") {
  TrainingSetup base = setup_of(data("tree/fits.yaml"));  // rtx-3090
  TrainingSetup now = setup_of(data("fits.yaml"));        // rtx-3060-12gb, otherwise the same
  const planner::Comparison c = planner::compare(base, nullptr, now, nullptr);
  REQUIRE(c.changes.size() == 1);
  CHECK(c.changes[0].text() == "GPU rtx-3090 -> rtx-3060-12gb");
  CHECK(c.changes[0].over_effect_bytes == (peak(now) - target_bytes(now)) - (peak(base) - target_bytes(base)));
  CHECK(c.changes[0].over_effect_bytes > 0);
}

// The card's memory and the allocator cap are two fields: each change is reverted alone (a cap
// lowers capacity_bytes, yet the card's memory is the same), and each is blamed at its own key.
TEST_CASE("compare: an allocator cap change is the cap's, not the GPU memory's; each reverted alone") {
  auto with = [](std::optional<std::string> memory, std::optional<std::string> cap) {
    profiles::SetupInputs in;
    in.config = data("capped/qwen05-b1-cap11gib.yaml");  // h200, allocator_cap: 11GiB
    in.size_flag(Size::gpu_memory) = memory;
    in.size_flag(Size::allocator_cap) = cap;
    return profiles::build_setup(in).setup;
  };
  const TrainingSetup base = with(std::nullopt, std::nullopt);
  const TrainingSetup lower_cap = with(std::nullopt, "9GiB");
  planner::Comparison c = planner::compare(base, nullptr, lower_cap, nullptr);
  REQUIRE(c.changes.size() == 1);
  CHECK(c.changes[0].field == path(Size::allocator_cap));
  CHECK(c.changes[0].text() == "allocator cap 11.00 GiB -> 9.00 GiB");
  CHECK(c.changes[0].over_effect_bytes == (estimate(lower_cap).verdict_bytes() - target_bytes(lower_cap)) -
                                              (estimate(base).verdict_bytes() - target_bytes(base)));
  CHECK(c.changes[0].over_effect_bytes > 0);
  // A fraction is compared as stated; no cap at all is "none".
  c = planner::compare(base, nullptr, with(std::nullopt, "0.1"), nullptr);
  REQUIRE(c.changes.size() == 1);
  CHECK(c.changes[0].text() == "allocator cap 11.00 GiB -> 0.1 of the card");
  // The card's memory changed under the same cap: the GPU memory's change, the cap kept.
  const TrainingSetup smaller = with("100GiB", std::nullopt);
  c = planner::compare(base, nullptr, smaller, nullptr);
  REQUIRE(c.changes.size() == 1);
  CHECK(c.changes[0].field == path(Size::gpu_memory));
  CHECK(c.changes[0].text() == fmt::format("GPU memory {:.2f} GiB -> 100.00 GiB", static_cast<double>(base.device.card_bytes()) / (1 << 30)));
  // Both: two changes, each measured with the other in place (reverting the card's memory keeps the
  // 9 GiB cap, so it moves nothing).
  const TrainingSetup both = with("100GiB", "9GiB");
  c = planner::compare(base, nullptr, both, nullptr);
  REQUIRE(c.changes.size() == 2);
  CHECK(c.changes[0].field == path(Size::allocator_cap));
  CHECK(c.changes[0].over_effect_bytes > 0);
  CHECK(c.changes[1].field == path(Size::gpu_memory));
  CHECK(c.changes[1].over_effect_bytes == 0);
  // No card named, only a cap: the cap's change, the card's memory unknown on both sides.
  auto uncarded = [](const std::string& cap) {
    profiles::SetupInputs in;
    in.model = "qwen2.5-0.5b";
    in.size_flag(Size::allocator_cap) = cap;
    return profiles::build_setup(in).setup;
  };
  c = planner::compare(uncarded("16GiB"), nullptr, uncarded("11GiB"), nullptr);
  REQUIRE(c.changes.size() == 1);
  CHECK(c.changes[0].text() == "allocator cap 16.00 GiB -> 11.00 GiB");
}

TEST_CASE("compare: another model is one change, not a list of sizes") {
  const TrainingSetup base = setup_of(data("fits.yaml"));
  TrainingSetup now = base;
  now.model = profiles::load_model("gpt2-medium", Where{});
  const planner::Comparison c = planner::compare(base, nullptr, now, nullptr);
  REQUIRE(c.changes.size() == 1);
  CHECK(c.changes[0].field == "model");
  CHECK(c.changes[0].text() == "model gpt2 -> gpt2-medium");
  CHECK(c.changes[0].peak_effect_bytes == peak(now) - peak(base));
}

// ---- planner: gate and blame ----------------------------------------------------------------------

TEST_CASE("gate: over budget, growth, strict, and what to blame") {
  const TrainingSetup fits = setup_of(data("fits.yaml"));
  const TrainingSetup over = setup_of(data("over.yaml"));
  const std::vector<std::string> in_file = {"model.hidden_size", "batch.micro_batch", "batch.seq_len", "precision"};
  planner::GateOptions o;

  SUBCASE("a config within its target passes") {
    const planner::GateResult g = planner::gate(fits, nullptr, nullptr, nullptr, o, 0, in_file);
    CHECK(g.verdict.fits);
    CHECK(g.verdict.status == "normal");
    CHECK(!g.failed());
    CHECK(g.blame.empty());
    CHECK(g.peak_bytes == peak(fits));
    CHECK(g.target_bytes == target_bytes(fits));
  }
  SUBCASE("over budget with a baseline: blame the change that cost the most") {
    const planner::GateResult g = planner::gate(over, nullptr, &fits, nullptr, o, 0, in_file);
    CHECK(g.over_budget);
    CHECK(!g.over_growth);  // no --max-growth
    CHECK(g.failed());
    CHECK(g.verdict.status == "out_of_memory");
    CHECK(g.blame == "batch.micro_batch");
    REQUIRE(g.blame_change);
    CHECK(*g.blame_change == 0);
  }
  SUBCASE("over budget without a baseline: blame the field behind the largest terms") {
    const planner::GateResult g = planner::gate(over, nullptr, nullptr, nullptr, o, 0, in_file);
    CHECK(g.over_budget);
    CHECK(!g.blame_change);
    CHECK(g.blame == "batch.micro_batch");  // activations and logits dominate at micro-batch 64
  }
  SUBCASE("growth beyond --max-growth fails a config that fits") {
    TrainingSetup bigger = fits;
    bigger.batch.micro_batch = 4;
    o.max_growth = 0.10;
    const planner::GateResult g = planner::gate(bigger, nullptr, &fits, nullptr, o, 0, in_file);
    CHECK(g.verdict.fits);
    CHECK(g.over_growth);
    CHECK(g.failed());
    CHECK(g.blame == "batch.micro_batch");
    o.max_growth = 10.0;  // 1000%
    CHECK(!planner::gate(bigger, nullptr, &fits, nullptr, o, 0, in_file).failed());
  }
  SUBCASE("--strict fails on warnings; without it they pass") {
    CHECK(!planner::gate(fits, nullptr, nullptr, nullptr, o, 1, in_file).failed());
    o.strict = true;
    const planner::GateResult g = planner::gate(fits, nullptr, nullptr, nullptr, o, 1, in_file);
    CHECK(g.warned);
    CHECK(g.failed());
    CHECK(g.blame.empty());  // the warnings point at their own lines
    CHECK(!planner::gate(fits, nullptr, nullptr, nullptr, o, 0, in_file).failed());
  }
}

TEST_CASE("largest_contributor: activation-like terms point at the batch, model states at the model") {
  std::array<int64_t, kNumTerms> t{};
  t[static_cast<int>(Term::activations)] = 10;
  t[static_cast<int>(Term::weights)] = 3;
  CHECK(planner::largest_contributor(t, {"batch.micro_batch", "model.hidden_size"}) == "batch.micro_batch");
  CHECK(planner::largest_contributor(t, {"batch.seq_len"}) == "batch.seq_len");  // the file sets no micro-batch
  CHECK(planner::largest_contributor(t, {}) == "batch.micro_batch");            // nothing set: the first candidate
  t[static_cast<int>(Term::optimizer_states)] = 20;
  CHECK(planner::largest_contributor(t, {"batch.micro_batch", "model.hidden_size"}) == "model");
  CHECK(planner::largest_contributor(t, {"precision", "batch.micro_batch"}) == "precision");
}

}  // namespace
}  // namespace memplan
