// Estimator entry points: validation of impossible sizes.
#include <doctest/doctest.h>

#include "estimator/estimate.h"
#include "tests/estimator/specs.h"

using namespace memplan;

TEST_CASE("sizes whose bytes would overflow 64-bit arithmetic are refused with the reason") {
  TrainingSetup s;
  s.model = testing::gpt2();
  s.batch.micro_batch = 1'000'000;
  s.batch.seq_len = 100'000'000;  // each within its own limit; b * a * s^2 is not
  const auto p = validate(s);
  REQUIRE(!p.empty());
  CHECK(p[0].field == "batch.seq_len");
  CHECK(p[0].message.rfind("is too large to estimate: the attention scores alone would be about", 0) == 0);
  // 1T parameters at a 1M-token sequence is large but countable: no problem reported.
  TrainingSetup big;
  big.model = testing::llama2_7b();
  big.model.hidden_size = 25600;
  big.model.num_layers = 128;
  big.model.num_attention_heads = 200;
  big.model.num_key_value_heads = 8;
  big.model.head_dim = 128;
  big.model.intermediate_size = 102400;
  big.model.vocab_size = 256000;
  big.batch.seq_len = 1'048'576;
  big.checkpointing.mode = CheckpointMode::full;
  CHECK(validate(big).empty());
  CHECK(estimate(big).peak_bytes() > (int64_t{1} << 40));
}

// The fuzzer's finding (CI, fuzz_estimator, seed 1): intermediate_size was checked only through
// expert_width() when it was not positive, so a negative dense width on a model with experts
// passed; BERT's layer runs the dense MLP whatever num_experts says, and LoRA's B matrix on it
// overflowed (r * -2e17).
TEST_CASE("a negative dense MLP width and experts on a BERT-style encoder are refused") {
  TrainingSetup s;
  s.model = testing::mixtral();
  s.model.moe_intermediate_size = 512;
  s.model.intermediate_size = -196969314390019899;
  auto p = validate(s);
  REQUIRE(!p.empty());
  CHECK(p[0].field == "model.intermediate_size");
  CHECK(p[0].message == "must not be negative (got -196969314390019899)");
  s.model.intermediate_size = 0;  // every layer MoE: 0 is allowed
  CHECK(validate(s).empty());

  TrainingSetup b;
  b.model = testing::bert_base();
  b.model.num_experts = 8;
  b.model.experts_per_token = 2;
  p = validate(b);
  REQUIRE(p.size() == 1);
  CHECK(p[0].field == "model.num_experts");
  CHECK(p[0].message == "a BERT-style encoder has no mixture-of-experts block (got 8 experts)");
}
