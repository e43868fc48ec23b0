// The frameworks' runtime defaults (estimator/runtime.h): what each sets, that a field the user set
// is left alone, that conditional rows apply only where they hold, and that every default names
// its upstream source at a version.
#include <doctest/doctest.h>

#include <set>

#include "estimator/runtime.h"
#include "tests/estimator/specs.h"

using namespace memplan;

namespace {
TrainingSetup with(Framework f) {
  TrainingSetup s;
  s.model = testing::llama2_7b();
  s.runtime.framework = f;
  return s;
}
std::vector<FrameworkDefault> apply(TrainingSetup& s, std::set<std::string> set = {}) {
  return apply_framework_defaults(s, [&](const std::string& f) { return set.count(f) > 0; });
}
}  // namespace

TEST_CASE("hf-trainer: SDPA on torch >= 2.1, eager before; outputs die in compute_loss; fp32 upcast loss") {
  TrainingSetup s = with(Framework::hf_trainer);
  const auto d = apply(s);
  CHECK(s.attention == AttentionImpl::sdpa);
  CHECK_FALSE(s.runtime.keep_logits);
  CHECK(s.runtime.loss == LossImpl::standard);
  CHECK(s.runtime.loss_upcast);
  for (const auto& x : d) {
    CAPTURE(x.field);
    CHECK(x.source.find(" @ ") != std::string::npos);  // every default names its upstream version
  }
  TrainingSetup old = with(Framework::hf_trainer);
  old.runtime.torch_major = 1;
  old.runtime.torch_minor = 13;
  apply(old);
  CHECK(old.attention == AttentionImpl::eager);
}

TEST_CASE("custom loops and LitGPT keep the logits; LitGPT's chunked loss has no upcast") {
  TrainingSetup c = with(Framework::custom);
  apply(c);
  CHECK(c.runtime.keep_logits);
  TrainingSetup l = with(Framework::litgpt);
  apply(l);
  CHECK(l.runtime.keep_logits);
  CHECK(l.runtime.loss == LossImpl::chunked);
  CHECK(l.runtime.loss_chunk_tokens == 128);
  CHECK_FALSE(l.runtime.loss_upcast);
}

TEST_CASE("torchtune: 8-chunk cross-entropy; FSDP only with several ranks and no DeepSpeed") {
  TrainingSetup t = with(Framework::torchtune);
  apply(t);
  CHECK(t.runtime.loss == LossImpl::chunked);
  CHECK(t.runtime.loss_chunks == 8);
  CHECK(t.parallel.fsdp == FsdpMode::none);  // one GPU
  TrainingSetup t8 = with(Framework::torchtune);
  t8.parallel.num_gpus = 8;
  apply(t8);
  CHECK(t8.parallel.fsdp == FsdpMode::full_shard);
  TrainingSetup z = with(Framework::torchtune);
  z.parallel.num_gpus = 8;
  z.parallel.zero_stage = 2;
  apply(z);
  CHECK(z.parallel.fsdp == FsdpMode::none);
}

TEST_CASE("lightning zeroes gradients after the next forward; torchtitan and megatron fuse the optimizer") {
  TrainingSetup l = with(Framework::lightning);
  apply(l);
  CHECK(l.runtime.zero_grad_after_forward);
  TrainingSetup t = with(Framework::torchtitan);
  apply(t);
  CHECK(t.runtime.optimizer_impl == OptimizerImpl::fused);
  TrainingSetup m = with(Framework::megatron);
  apply(m);
  CHECK(m.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK(m.attention == AttentionImpl::flash);
  CHECK_FALSE(framework_buffers_note(m).empty());
}

TEST_CASE("a field the user set is never overridden") {
  TrainingSetup s = with(Framework::litgpt);
  s.runtime.keep_logits = false;
  s.attention = AttentionImpl::eager;
  const auto d = apply(s, {"runtime.keep_logits", "attention"});
  CHECK_FALSE(s.runtime.keep_logits);
  CHECK(s.attention == AttentionImpl::eager);
  for (const auto& x : d) CHECK((x.field != "runtime.keep_logits" && x.field != "attention"));
}

TEST_CASE("names: frameworks, losses, FSDP modes and checkpointing lists") {
  CHECK(parse_framework("torchtune") == Framework::torchtune);
  CHECK(parse_framework("HF_Trainer") == Framework::hf_trainer);
  CHECK_FALSE(parse_framework("keras").has_value());
  Runtime r;
  CHECK(parse_loss("chunked:16", &r));
  CHECK(to_string(r, r.loss) == "chunked:16");
  CHECK(parse_loss("chunked:128t", &r));
  CHECK(to_string(r, r.loss) == "chunked:128t");
  CHECK(parse_loss("fused-linear", &r));
  CHECK(r.loss == LossImpl::fused_linear);
  CHECK_FALSE(parse_loss("chunked:0", &r));
  CHECK_FALSE(parse_loss("chunked:x", &r));
  CHECK(parse_fsdp("shard_grad_op") == FsdpMode::shard_grad_op);
  const auto layers = parse_checkpointing("layers:8,0,4,4");
  REQUIRE(layers.has_value());
  CHECK(layers->layers == std::vector<int64_t>{0, 4, 8});
  CHECK(to_string(*layers) == "layers:0,4,8");
  CHECK(layers->layer_checkpointed(4));
  CHECK_FALSE(layers->layer_checkpointed(5));
  CHECK_FALSE(parse_checkpointing("layers:").has_value());
  CHECK_FALSE(parse_checkpointing("layers:1,,2").has_value());
  CHECK(parse_checkpointing("selective-op")->mode == CheckpointMode::selective_op);
  CHECK(parse_version("2.6") == std::make_pair(2, 6));
  CHECK(parse_version("4.52.4") == std::make_pair(4, 52));
  CHECK_FALSE(parse_version("latest").has_value());
  CHECK_FALSE(parse_version("2").has_value());
  CHECK_FALSE(parse_version("2.6.1.1").has_value());
}
