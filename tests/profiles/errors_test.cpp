// A table of broken files, each with the exact message memplan prints for it (InputError::render):
// position, wording and hint are the product here, so they are pinned character for character.
#include <doctest/doctest.h>

#include "estimator/estimate.h"
#include "estimator/model.h"
#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

const std::string kBad = std::string(MEMPLAN_TEST_DATA) + "/profiles/bad/";

// What build_setup says about a config file; "" when it is accepted.
std::string render_error(const std::string& file) {
  SetupInputs in;
  in.config = kBad + file;
  try {
    build_setup(in);
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

}  // namespace

TEST_CASE("broken files: exact messages with file:line:col and hint") {
  const struct {
    const char* file;
    std::string message;  // after the "<path>" prefix
  } table[] = {
      {"malformed.yaml", ":3:30: error: end of sequence flow not found\nhint: see examples/ for memplan config files; YAML indents with spaces, and quotes text holding ': ' or '#'"},
      {"malformed.json", ":3:3: error: expected ',' or '}' (got a string)\nhint: is a ',' missing at the end of line 2?"},
      {"unknown_preset.yaml",
       ":2:3: error: unknown model 'llama-7b'\nhint: did you mean 'llama-2-7b'? (memplan models lists the presets)"},
      {"wrong_type.yaml", ":4:3: error: training.micro_batch_size must be a positive integer (got 'four')\nhint: write a whole number, e.g. 4 (no quotes)"},
      {"zero_micro_batch.yaml", ":4:3: error: batch.micro_batch: must be at least 1 (got 0)\nhint: a size or count: a whole number of 1 or more"},
      {"heads_not_dividing.yaml",
       ":4:3: error: model.num_attention_heads: 16 heads do not divide hidden size 1000\n"
       "hint: set head_dim explicitly if the model uses a head dimension other than hidden/heads"},
      {"kv_heads.yaml",
       ":5:3: error: model.num_key_value_heads: 5 key/value heads do not divide 32 attention heads\n"
       "hint: grouped-query attention needs num_attention_heads to be a multiple of num_key_value_heads"},
      {"topk.yaml",
       ":6:3: error: model.num_experts_per_token: top-6 routing needs at least 6 experts (the model has 4)\n"
       "hint: num_experts_per_token must not exceed num_experts"},
      {"zero4.yaml", ":4:5: error: parallel.zero_stage: ZeRO stage must be 0, 1, 2 or 3 (got 4)\nhint: DeepSpeed ZeRO has stages 0 to 3"},
      {"absurd.yaml",
       ":2:3: error: model.hidden_size: is absurdly large (100000000); the limit is 1000000\nhint: check the units"},
      {"inline_missing_heads.yaml",
       ":1:1: error: the inline model has no num_attention_heads\nhint: an inline model needs hidden_size, num_layers "
       "and num_attention_heads; or name one with model.preset (memplan models lists the presets) or model.hf_config"},
      {"unknown_precision.yaml",
       ":3:3: error: unknown precision 'fp8'\nhint: expected one of: fp32, amp-fp16, amp-bf16, bf16, fp16, mixed-fp16, "
       "mixed-bf16, bfloat16, float16, float32"},
      {"unknown_gpu.yaml",
       ":3:3: error: unknown GPU 'rtx-3090ti'\nhint: did you mean 'rtx-3090-ti'? (memplan gpus lists the presets)"},
      {"empty.yaml",
       ": error: expected a mapping of settings (model:, training:, ...)\nhint: see examples/ for the config files memplan reads"},
      {"unknown_kind.json",
       ": error: cannot tell what this JSON file configures\nhint: memplan reads DeepSpeed ds_config.json "
       "(zero_optimization, train_micro_batch_size_per_gpu), Hugging Face config.json (model_type) and HF "
       "TrainingArguments JSON; --format names one of: memplan, deepspeed, hf-config, hf-trainer, axolotl, llamafactory, torchtune, "
       "torchtitan, litgpt, lightning, accelerate, nemo"},
      {"threshold_range.yaml", ":4:5: error: training.memory.target_utilization must be a fraction in (0, 1] (got '1.5')\nhint: write a decimal such as 0.9"},
      {"threshold_order.yaml",
       ":3:3: error: memory.target_utilization: thresholds must satisfy 0 < target <= warning <= critical <= emergency "
       "<= 1\nhint: the defaults are 0.90, 0.92, 0.95, 0.97"},
      {"bf16_and_fp16.yaml", ":3:1: error: bf16 and fp16 are both true\nhint: set one of them"},
      {"hf_missing.json",
       ": error: missing 'hidden_size'\nhint: memplan reads model.hidden_size from 'hidden_size' in llama configs"},
      {"hf_wrong_type.json", ":3:3: error: hidden_size must be an integer (got string '4096')\nhint: write a whole number, e.g. 4 (no quotes)"},
      {"deepseek.json",
       ": error: deepseek_v2 without 'kv_lora_rank'\nhint: DeepSeek-V2/V3 configs describe multi-head latent attention "
       "with kv_lora_rank, q_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim"},
      {"hf_unknown_type.json",
       ":2:3: error: model_type 'xlnet' is not supported\nhint: supported model types: gpt2, gpt_neox, gpt_bigcode, llama, "
       "mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2, gemma3, gemma3_text, phi, phi3, stablelm, "
       "starcoder2, falcon, mpt, olmo2, olmo3, cohere, internlm2, granitemoe, deepseek, deepseek_v2, deepseek_v3, kimi_k2, "
       "gpt_oss, llama4, llama4_text, bert, roberta"},
      {"hf_mamba.json",
       ":2:3: error: model_type 'mamba' has state-space (Mamba) layers: memplan does not model their selective scan's saved "
       "tensors\nhint: memplan estimates attention + MLP/MoE transformer layers"},
      {"hf_nonfinite_then_error.json",  // Infinity/NaN read, the error still points into the original text
       ":3:18: error: expected a value (got ',')\nhint: a value is missing here"},
      {"hf_kv_heads.json",
       ":6:3: error: model.num_key_value_heads: 5 key/value heads do not divide 32 attention heads\n"
       "hint: grouped-query attention needs num_attention_heads to be a multiple of num_key_value_heads"},
  };
  for (const auto& row : table) {
    CAPTURE(row.file);
    CHECK(render_error(row.file) == kBad + row.file + row.message);
  }
}

TEST_CASE("a missing config file is an error naming it") {
  CHECK(render_error("no-such-file.yaml") == kBad + "no-such-file.yaml: error: cannot open the file (No such file or directory)\nhint: check the path");
}

TEST_CASE("near-miss keys warn with did-you-mean; other unknown keys are ignored") {
  SetupInputs in;
  in.config = kBad + "near_miss.yaml";
  const BuiltSetup b = build_setup(in);
  REQUIRE(b.warnings.size() == 2);
  CHECK(b.warnings[0].render() ==
        kBad + "near_miss.yaml:3:3: warning: unknown key 'num_head'\nhint: did you mean 'num_heads'?");
  CHECK(b.warnings[1].render() == kBad +
                                      "near_miss.yaml:5:3: warning: unknown key 'gradient_acumulation_steps'\n"
                                      "hint: did you mean 'gradient_accumulation_steps'?");
  CHECK(b.setup.batch.grad_accum == 1);  // a misspelt key is not read
}

TEST_CASE("a 1T-parameter inline model at a 1M-token sequence loads and estimates without overflow") {
  SetupInputs in;
  in.config = std::string(MEMPLAN_TEST_DATA) + "/profiles/huge.yaml";
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.batch.seq_len == 1'048'576);
  CHECK(b.setup.model.head_dim == 128);
  // 128 x (q 25600x25600 + k,v 2 x 25600x1024 + o 25600x25600 + 3 x 25600x102400 + 2 norms)
  // + embeddings and head 2 x 256000 x 25600 + final norm.
  const int64_t layer = 2 * 25600LL * 25600 + 2 * 25600LL * 1024 + 3 * 25600LL * 102400 + 2 * 25600;
  const int64_t params = 128 * layer + 2 * 256000LL * 25600 + 25600;
  CHECK(params > 1'000'000'000'000);
  CHECK(count_model_parameters(b.setup.model) == params);
  const MemoryBreakdown mb = estimate(b.setup);
  CHECK(mb.peak_bytes() > 16 * params / 8);  // bf16: at least weights + grads + two bf16 Adam moments
}
