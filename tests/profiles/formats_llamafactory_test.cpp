// LLaMA-Factory YAML (profiles/formats/llamafactory.cpp): LLaMA-Factory's own examples at v0.9.5
// (tests/data/formats/llamafactory/SOURCES.txt) read into the setup llamafactory-cli would train:
// LoRA on every linear layer by default, cutoff_len, gradient checkpointing on unless disabled, the
// base in its checkpoint's dtype with fp32 adapters, QLoRA from quantization_bit, DeepSpeed from
// its config. Before this reader such files were taken for HF TrainingArguments: a LoRA run was
// estimated as a full fine-tune, lora_rank got "did you mean 'local_rank'?", cutoff_len was dropped
// and checkpointing was off.
#include <doctest/doctest.h>

#include "estimator/estimate.h"
#include "tests/profiles/hf_family_util.h"

using namespace memplan;
using namespace memplan::profiles;
using namespace memplan::testing;

namespace {

// The examples name Qwen/Qwen3-4B-Instruct-2507 (not in the offline cache): memplan's qwen3-4b
// preset is the same architecture.
BuiltSetup example(const std::string& file) {
  return built("llamafactory/" + file, [](SetupInputs& in) {
    in.model = "qwen3-4b";
    in.gpu = "rtx-4090";
  });
}

const std::string kHead = "model_name_or_path: Qwen/Qwen3-4B\nstage: sft\ndo_train: true\n";

}  // namespace

TEST_CASE("llamafactory qwen3_lora_sft.yaml: LoRA on every linear layer, checkpointed, bf16 base with fp32 adapters") {
  FormatsEnv env;
  const BuiltSetup b = example("qwen3_lora_sft.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.config_format == "llamafactory");
  CHECK(b.warnings.empty());
  CHECK(s.runtime.framework == Framework::hf_trainer);
  CHECK(s.finetune.mode == FinetuneMode::lora);
  CHECK(s.finetune.lora_rank == 8);
  CHECK(s.finetune.lora_alpha == 16.0);  // lora_rank * 2 when lora_alpha is not given
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"all-linear"});
  CHECK(s.finetune.adapter_fp32);
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.batch.grad_accum == 8);
  CHECK(s.batch.seq_len == 2048);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(contains(default_of(b.origin, "checkpointing"), "disable_gradient_checkpointing"));
  CHECK(s.precision == Precision::bf16);  // qwen3-4b's config.json: torch_dtype bfloat16
  CHECK(contains(b.origin.text_of("precision"), "the checkpoint's bfloat16"));
  CHECK(s.data.num_workers == 4);
  CHECK(set_at(b.origin, "finetune.lora_rank") == "9:1 lora_rank");
  // What it needs: the frozen bf16 base (8 GB) and the adapters, not a 77 GiB full fine-tune.
  const MemoryBreakdown m = estimate(s);
  CHECK(m.peak().total() < int64_t{16} << 30);
  CHECK(count_parameters(s).trainable < 20'000'000);
}

TEST_CASE("llamafactory qwen3_lora_sft_otfq.yaml: quantization_bit 4 is QLoRA, double-quantized NF4") {
  FormatsEnv env;
  const BuiltSetup b = example("qwen3_lora_sft_otfq.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.base_quant == BaseQuant::nf4);
  CHECK(s.finetune.double_quant);
  CHECK(set_at(b.origin, "finetune.base_quant") == "3:1 quantization_bit");
  CHECK(s.precision == Precision::bf16);
}

TEST_CASE("llamafactory qwen3_full_sft.yaml and qwen3_lora_sft_ds3.yaml: DeepSpeed ZeRO-3 from examples/deepspeed") {
  FormatsEnv env;
  const BuiltSetup full = example("qwen3_full_sft.yaml");
  CHECK(full.setup.finetune.mode == FinetuneMode::full);
  CHECK(full.setup.parallel.zero_stage == 3);
  CHECK(full.setup.runtime.framework == Framework::deepspeed);
  CHECK(full.setup.precision == Precision::mixed_bf16);  // bf16 "auto" filled from bf16: true
  CHECK(full.setup.batch.grad_accum == 2);
  CHECK(contains(full.origin.of("parallel.zero_stage").file, "examples/deepspeed/ds_z3_config.json"));
  const BuiltSetup lora = example("qwen3_lora_sft_ds3.yaml");
  CHECK(lora.setup.finetune.mode == FinetuneMode::lora);
  CHECK(lora.setup.parallel.zero_stage == 3);
}

TEST_CASE("llamafactory keys: checkpointing off, pure_bf16, freeze, flash_attn, liger, and what it refuses") {
  FormatsEnv env;
  const std::string path = kFormats + "llamafactory/inline.yaml";
  auto setup = [&](const std::string& text) {
    const LoadedConfig c = load_config_text(text, path, path);
    SetupInputs in;
    in.config = path;
    in.model = "qwen3-4b";
    return build_setup(in, c);
  };
  BuiltSetup b = setup(kHead + "finetuning_type: lora\ndisable_gradient_checkpointing: true\npure_bf16: true\nflash_attn: fa2\n"
                               "enable_liger_kernel: true\nlora_target: q_proj,v_proj\nlora_alpha: 32\ncutoff_len: 4096\n");
  CHECK(b.config_format == "llamafactory");
  CHECK(b.setup.checkpointing.mode == CheckpointMode::none);
  CHECK(b.setup.precision == Precision::bf16);
  CHECK_FALSE(b.setup.finetune.adapter_fp32);  // pure_bf16 keeps the adapters in bf16
  CHECK(b.origin.of(Choice::adapter_dtype).line == 6);  // and says so at its key (memplan check blames it there)
  CHECK(b.setup.attention == AttentionImpl::flash);
  CHECK(b.setup.runtime.liger);
  CHECK(b.setup.finetune.lora_targets == std::vector<std::string>{"q", "v"});
  CHECK(b.setup.finetune.lora_alpha == 32.0);
  CHECK(b.setup.batch.seq_len == 4096);
  // Full fine-tuning: fp32 trainable weights under the Trainer's bf16 autocast.
  b = setup(kHead + "finetuning_type: full\nbf16: true\n");
  CHECK(b.setup.finetune.mode == FinetuneMode::full);
  CHECK(b.setup.precision == Precision::amp_bf16);
  // Freeze: the top freeze_trainable_layers (2 by default) of qwen3-4b's 36 layers train.
  b = setup(kHead + "finetuning_type: freeze\nbf16: true\n");
  CHECK(b.setup.finetune.freeze_layers == 34);
  REQUIRE(b.warnings.size() == 1);
  CHECK(contains(b.warnings[0].message, "leaves the output head frozen"));
  // A typo of a LLaMA-Factory key is said as one (not "did you mean 'local_rank'").
  const auto w = warnings_of(kHead + "finetuning_type: lora\nlora_rnak: 16\n", path);
  REQUIRE_FALSE(w.empty());
  CHECK(contains(w[0], "did you mean 'lora_rank'?"));
  CHECK(build_error(kHead + "quantization_bit: 3\n", path, "qwen3-4b") ==
        path + ":4:1: error: quantization_bit 3 is not a bitsandbytes width\nhint: bitsandbytes quantizes to 4 or 8 bits (2 "
               "and 3 are HQQ's, which memplan does not model)");
  CHECK(contains(build_error(kHead + "finetuning_type: full\nquantization_bit: 4\n", path, "qwen3-4b"),
                 "error: quantization_bit needs finetuning_type lora"));
  CHECK(contains(build_error("model_name_or_path: x\nstage: grpo\n", path, "qwen3-4b"), "error: unknown stage 'grpo'"));
  // DPO is a warning: one model, plain rows.
  b = setup("model_name_or_path: Qwen/Qwen3-4B\nstage: dpo\nlora_rank: 8\n");
  REQUIRE(b.warnings.size() == 1);
  CHECK(contains(b.warnings[0].message, "stage: dpo is not modelled yet"));
}
