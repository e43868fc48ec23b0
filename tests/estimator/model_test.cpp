// Parameter counts against published totals.
#include <doctest/doctest.h>

#include "estimator/model.h"
#include "tests/estimator/specs.h"

using namespace memplan;

TEST_CASE("parameter counts match the published totals") {
  // GPT-2 with vocab 50257: 124,439,808 (HF gpt2 model card / num_parameters()).
  CHECK(count_model_parameters(testing::gpt2()) == 124'439'808);
  // Llama-2-7B: 6,738,415,616 (Touvron et al. 2023; HF num_parameters()).
  CHECK(count_model_parameters(testing::llama2_7b()) == 6'738'415'616);
  // Mixtral-8x7B: 46,702,792,704 (HF num_parameters()).
  CHECK(count_model_parameters(testing::mixtral()) == 46'702'792'704);
}

TEST_CASE("LoRA adds r*(in+out) per targeted linear and freezes the base") {
  TrainingSetup s;
  s.model = testing::llama2_7b();
  s.finetune.mode = FinetuneMode::lora;
  s.finetune.lora_rank = 16;
  const ParameterCounts c = count_parameters(s);
  // PEFT default targets q_proj and v_proj: 2 x 32 layers x 16 x (4096 + 4096).
  CHECK(c.adapter == 2 * 32 * 16 * (4096 + 4096));
  CHECK(c.trainable == c.adapter);
  CHECK(c.total == 6'738'415'616 + c.adapter);
}
