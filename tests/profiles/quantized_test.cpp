// Pre-quantized checkpoints: quantization_config decides the stored bits of the base weights that
// adapters train on; a full fine-tune of one is refused, as transformers' Trainer refuses it.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "estimator/error.h"
#include "estimator/model.h"
#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

std::string fixture(const std::string& name) { return std::string(MEMPLAN_TEST_DATA) + "/hf/" + name + "/config.json"; }

BuiltSetup build(const std::string& model, const char* finetune, const char* precision = "bf16") {
  SetupInputs in;
  in.model = model;
  if (finetune) in.choice_flag(Choice::finetune) = finetune;
  in.choice_flag(Choice::precision) = precision;
  in.count_flag(Count::micro_batch) = 1;
  in.count_flag(Count::seq_len) = 256;
  in.gpu = "a100-80gb";
  return build_setup(in);
}

std::string error_of(const std::string& model, const char* finetune) {
  try {
    build(model, finetune);
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

}  // namespace

TEST_CASE("quantization_config: stored bits per weight, scales and zero points included") {
  auto bits = [](const char* name) { return load_model(fixture(name), Where{}).quantized.bits; };
  CHECK(bits("llama-2-7b-gptq") == doctest::Approx(4.0 + (16.0 + 4.0) / 128));  // 4-bit, fp16 scale + 4-bit zero per 128
  CHECK(bits("llama-2-7b-awq") == doctest::Approx(4.0 + (16.0 + 4.0) / 128));
  CHECK(bits("llama-3-8b-bnb-4bit") == doctest::Approx(4.0 + 8.0 / 64 + 32.0 / (64 * 256)));  // NF4 + double quant
  CHECK(bits("llama-3.1-8b-instruct-w4a16") == doctest::Approx(4.0 + 16.0 / 128));  // symmetric: no zero point
  CHECK(bits("deepseek-v3") == doctest::Approx(8.0 + 32.0 / (128 * 128)));  // fp8 e4m3, fp32 scale per 128x128 block
  CHECK(load_model(fixture("llama-2-7b-gptq"), Where{}).quantized.method == "gptq");
  // GPT-OSS's MXFP4 experts are counted as training loads them: dequantized, with a warning.
  std::vector<Warning> w;
  const ModelSpec oss = load_model(fixture("gpt-oss-20b"), Where{}, &w);
  CHECK_FALSE(oss.quantized.any());
  REQUIRE(w.size() == 1);
  CHECK(std::string(w[0].message).find("MXFP4 experts are counted dequantized") != std::string::npos);
}

TEST_CASE("a full fine-tune of a pre-quantized checkpoint is refused with the way out") {
  const std::string e = error_of(fixture("llama-2-7b-gptq"), nullptr);
  CHECK(e.find("error: finetune.mode: 'llama-2-7b-gptq' is a pre-quantized checkpoint (gptq, 4.16 bits per weight): its weights "
                "cannot train") !=
        std::string::npos);
  CHECK(e.find("hint: train adapters on it: --finetune lora (or qlora)") != std::string::npos);
  CHECK(error_of(fixture("llama-2-7b-gptq"), "lora").empty());
}

TEST_CASE("LoRA on a pre-quantized checkpoint stores the base linears at the checkpoint's bits") {
  const BuiltSetup q = build(fixture("llama-2-7b-gptq"), "lora");
  const BuiltSetup plain = build("llama-2-7b", "lora");
  const ParameterCounts c = count_parameters(q.setup);
  // Every decoder linear is quantized; embeddings, norms and lm_head stay 16-bit.
  const int64_t linears = int64_t{32} * (4 * 4096 * 4096 + 3 * 4096 * 11008);
  CHECK(c.quantized == linears);
  const int64_t wq = estimate(q.setup).at(Phase::forward)[Term::weights];
  const int64_t wp = estimate(plain.setup).at(Phase::forward)[Term::weights];
  const double saved = static_cast<double>(linears) * (2.0 - (4.0 + 20.0 / 128) / 8.0);
  CHECK(static_cast<double>(wp - wq) == doctest::Approx(saved).epsilon(1e-6));
  // The weights formula names the checkpoint's quantization.
  CHECK(estimate(q.setup).text[static_cast<int>(Term::weights)].formula.find("(the checkpoint's gptq)") != std::string::npos);
}

TEST_CASE("LoRA on a bitsandbytes NF4 checkpoint estimates what QLoRA on the 16-bit checkpoint does") {
  // Both take QLoRA's recipe when precision and checkpointing are not given (amp-bf16, full).
  SetupInputs in;
  in.count_flag(Count::micro_batch) = 1;
  in.count_flag(Count::seq_len) = 256;
  in.gpu = "a100-80gb";
  in.model = fixture("llama-3-8b-bnb-4bit");
  in.choice_flag(Choice::finetune) = "lora";
  const BuiltSetup pre = build_setup(in);
  in.model = "llama-3-8b";
  in.choice_flag(Choice::finetune) = "qlora";
  const BuiltSetup qlora = build_setup(in);
  CHECK(pre.setup.precision == Precision::amp_bf16);
  CHECK(pre.setup.checkpointing.mode == CheckpointMode::full);
  const MemoryBreakdown a = estimate(pre.setup), b = estimate(qlora.setup);
  for (int p = 0; p < kNumPhases; ++p) CHECK(a.phases[p].total() == b.phases[p].total());
}

TEST_CASE("FSDP shards a pre-quantized checkpoint's weights at its bits too") {
  auto weights = [](const std::string& model) {
    SetupInputs in;
    in.model = model;
    in.choice_flag(Choice::finetune) = "lora";
    in.choice_flag(Choice::precision) = "bf16";
    in.count_flag(Count::micro_batch) = 1;
    in.count_flag(Count::seq_len) = 256;
    in.gpu = "a100-80gb";
    in.count_flag(Count::num_gpus) = 1;
    in.choice_flag(Choice::fsdp) = "full";
    return estimate(build_setup(in).setup).at(Phase::forward)[Term::weights];
  };
  const int64_t linears = int64_t{32} * (4 * 4096 * 4096 + 3 * 4096 * 11008);
  const double saved = static_cast<double>(linears) * (2.0 - (4.0 + 20.0 / 128) / 8.0);
  CHECK(static_cast<double>(weights("llama-2-7b") - weights(fixture("llama-2-7b-gptq"))) == doctest::Approx(saved).epsilon(1e-3));
}

TEST_CASE("quantization_config and head counts out of what transformers takes are errors at their key, not figures") {
  // A 1e12-bit or 1e-9-weight group once overflowed the weights term to a negative size that
  // passed `memplan check`; num_key_value_heads 0 was read as full multi-head attention.
  const std::string base = "{\"model_type\": \"llama\", \"hidden_size\": 256, \"intermediate_size\": 688, \"num_hidden_layers\": 2, "
                           "\"num_attention_heads\": 4, \"vocab_size\": 2048";
  const std::string path = std::filesystem::temp_directory_path() / "memplan-quant-bounds.json";
  auto error = [&](const std::string& tail) {
    std::ofstream(path) << base << tail << "}";
    try {
      load_model(path, Where{});
    } catch (const InputError& e) {
      return e.render();
    }
    return std::string();
  };
  const std::string gptq = ", \"quantization_config\": {\"quant_method\": \"gptq\", ";
  CHECK(error(gptq + "\"bits\": 1e12, \"group_size\": 128}").find("quantization_config bits 1e12 is not a bit width") != std::string::npos);
  CHECK(error(gptq + "\"bits\": 4, \"group_size\": 1e-9}").find("group_size 1e-9 is not a group size") != std::string::npos);
  CHECK(error(gptq + "\"bits\": 4.5, \"group_size\": 128}").find("is not a bit width") != std::string::npos);
  CHECK(error(gptq + "\"bits\": 4, \"group_size\": -1}").empty());  // one group per row: GPTQ's -1
  CHECK(error(", \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [0.001, 128]}")
            .find("weight_block_size 0.001 is not a block side") != std::string::npos);
  const std::string kv0 = error(", \"num_key_value_heads\": 0");
  CHECK(kv0.find("num_key_value_heads") != std::string::npos);
  CHECK(kv0.find("error:") != std::string::npos);
  CHECK(error(", \"num_key_value_heads\": null").empty());  // null: every head its own K/V, as LlamaConfig sets it
  std::ofstream(path) << base << "}";
  CHECK(load_model(path, Where{}).num_key_value_heads == 4);
  std::filesystem::remove(path);
}
