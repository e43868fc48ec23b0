// Axolotl YAML (profiles/formats/axolotl.cpp): axolotl's own examples (tests/data/formats/axolotl/, each citing
// its source at v0.18.0) read into the setup axolotl would run, field by field; its defaults (bf16: auto resolved
// against the target GPU, sequence_len 512, adamw_torch_fused, double-quantized NF4); the warnings for what memplan
// cannot model; the configs axolotl refuses, with their messages.
#include <doctest/doctest.h>

#include "estimator/estimate.h"
#include "tests/profiles/hf_family_util.h"

using namespace memplan;
using namespace memplan::profiles;
using namespace memplan::testing;

namespace {

const std::string kDir = kFormats + "axolotl/";
const std::string kBad = kDir + "bad.yaml";
const std::vector<std::string> kAllProjections = {"q", "k", "v", "o", "gate", "up", "down"};

}  // namespace

TEST_CASE("llama-3 qlora-1b: QLoRA with double-quantized NF4, bf16: auto, packed rows") {
  FormatsEnv env;
  const BuiltSetup b = built("axolotl/01-llama-3.2-1b-qlora.yml");
  const TrainingSetup& s = b.setup;
  CHECK(b.config_format == "axolotl");
  CHECK(b.warnings.empty());
  CHECK(s.model.name == "NousResearch/Llama-3.2-1B");
  CHECK(s.model.hidden_size == 2048);
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.batch.seq_len == 2048);  // packed to sequence_len (a multiple of 64 already)
  CHECK(s.precision == Precision::bf16);  // bf16: auto on an H100: the model loads in bf16
  CHECK(s.optimizer == OptimizerKind::adamw_8bit);
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.lora_rank == 32);
  CHECK(s.finetune.lora_alpha == 16);
  CHECK(s.finetune.lora_dropout == 0.05);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"gate", "down", "up", "q", "v", "k", "o"});
  CHECK(s.finetune.base_quant == BaseQuant::nf4);
  CHECK(s.finetune.double_quant);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.attention == AttentionImpl::flash);
  CHECK(s.parallel.num_gpus == 1);
  CHECK(s.runtime.framework == Framework::hf_trainer);
  CHECK(set_at(b.origin, "precision") == "50:1 bf16: auto -> bf16 (h100-80gb has bf16)");
  CHECK(set_at(b.origin, "batch.seq_len") == "20:1 sequence_len (sample_packing fills every row)");
  CHECK(contains(default_of(b.origin, "finetune.double_quant"), "bnb_4bit_use_double_quant=True"));
  // bf16: auto on a GPU without bf16 (Volta): fp16 (resolve_dtype).
  const BuiltSetup v = built("axolotl/01-llama-3.2-1b-qlora.yml", [](SetupInputs& in) { in.gpu = "v100-32gb"; });
  CHECK(v.setup.precision == Precision::fp16);
  CHECK(set_at(v.origin, "precision") == "50:1 bf16: auto -> fp16 (v100-32gb has no bf16)");
  // No target: bf16, said so.
  const BuiltSetup none = built("axolotl/01-llama-3.2-1b-qlora.yml", [](SetupInputs& in) { in.gpu.reset(); });
  CHECK(none.setup.precision == Precision::bf16);
  CHECK(set_at(none.origin, "precision") == "50:1 bf16: auto -> bf16 (no GPU model given: bf16 assumed)");
}

TEST_CASE("llama-3 fft-8b-liger-fsdp: FSDP full_shard with offload, Liger's plugin, mixed precision shards") {
  FormatsEnv env;
  const BuiltSetup b = built("axolotl/02-llama-3.1-8b-fft-liger-fsdp.yaml", [](SetupInputs& in) { in.count_flag(Count::num_gpus) = 8; });
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());  // fsdp_sharding_strategy FULL_SHARD agrees with fsdp: [full_shard, auto_wrap]
  CHECK(s.model.name == "NousResearch/Meta-Llama-3.1-8B");
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.batch.seq_len == 4096);
  CHECK(s.precision == Precision::mixed_bf16);  // FSDP + bf16: fp32 shards of what trains, bf16 compute
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK(s.finetune.mode == FinetuneMode::full);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.attention == AttentionImpl::flash);
  CHECK(s.parallel.fsdp == FsdpMode::full_shard);
  CHECK(s.parallel.offload == Offload::optimizer_and_params);
  CHECK(s.parallel.num_gpus == 8);
  CHECK(s.runtime.liger);
  CHECK(s.runtime.loss == LossImpl::fused_linear);
  CHECK(set_at(b.origin, "parallel.offload") == "66:3 fsdp_config.offload_params (FSDP CPUOffload)");
  CHECK(set_at(b.origin, "runtime.liger") == "10:1 liger_rms_norm + liger_glu_activation (Liger plugin)");
}

TEST_CASE("llama-3 qlora-fsdp-70b: QLoRA under FSDP, every linear adapted") {
  FormatsEnv env;
  const BuiltSetup b = built("axolotl/03-llama-3-70b-qlora-fsdp.yaml", [](SetupInputs& in) { in.count_flag(Count::num_gpus) = 2; });
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.model.name == "casperhansen/llama-3-70b-fp16");
  CHECK(s.model.num_layers == 80);
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.batch.seq_len == 512);
  CHECK(s.precision == Precision::bf16);  // the frozen base: nf4 with bf16 plain modules
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.lora_rank == 8);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"all-linear"});
  CHECK(s.finetune.double_quant);
  CHECK(s.parallel.fsdp == FsdpMode::full_shard);
  CHECK(s.parallel.offload == Offload::optimizer_and_params);
  CHECK(s.runtime.loss == LossImpl::standard);
}

TEST_CASE("llama-3 lora-1b-ray: DeepSpeed ZeRO-3 from deepspeed_configs/, four Ray workers") {
  FormatsEnv env;
  const BuiltSetup b = built("axolotl/04-llama-3.2-1b-lora-ray-zero3.yml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 2);
  CHECK(s.batch.seq_len == 2048);
  CHECK(s.precision == Precision::mixed_bf16);  // DeepSpeed "bf16": {"enabled": "auto"} <- bf16: auto
  CHECK(s.optimizer == OptimizerKind::adamw_8bit);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::automatic);
  CHECK(s.finetune.mode == FinetuneMode::lora);
  CHECK(s.finetune.lora_rank == 16);
  CHECK(s.finetune.lora_alpha == 32);
  CHECK(s.finetune.base_quant == BaseQuant::none);
  CHECK(s.parallel.zero_stage == 3);
  CHECK(s.parallel.num_gpus == 4);  // ray_num_workers 4 x resources_per_worker GPU 1
  CHECK(s.parallel.overlap_comm);
  CHECK(s.parallel.stage3_max_live_parameters == 0);  // DeepSpeed's alias max_live_parameters
  CHECK(s.parallel.reduce_bucket_elems == 2048 * 2048);
  CHECK(s.runtime.framework == Framework::deepspeed);
  CHECK(set_at(b.origin, "parallel.num_gpus") == "70:1 use_ray: ray_num_workers 4 x 1 GPU per worker");
  CHECK(contains(b.origin.of("parallel.zero_stage").file, "deepspeed_configs/zero3.json"));
}

TEST_CASE("llama-3 lora-1b-kernels: the fused LoRA kernels are warnings; lora_dropout's default is 0") {
  FormatsEnv env;
  const BuiltSetup b = built("axolotl/05-llama-3.2-1b-lora-kernels.yml");
  const TrainingSetup& s = b.setup;
  CHECK(s.finetune.mode == FinetuneMode::lora);
  CHECK(s.finetune.lora_dropout == 0.0);
  CHECK(contains(default_of(b.origin, "finetune.lora_dropout"), "lora_dropout=0.0"));
  REQUIRE(b.warnings.size() == 3);
  CHECK(b.warnings[0].render() ==
        kDir + "05-llama-3.2-1b-lora-kernels.yml:35:1: warning: lora_mlp_kernel: true is not modelled yet: Axolotl's fused "
               "LoRA kernels save fewer tensors; the estimate counts PEFT's unfused adapters\nhint: memplan estimates without "
               "it; --strict refuses such configs");
}

TEST_CASE("alst llama3-8b: 500_000 tokens, Cut Cross Entropy, legacy activation offloading, ZeRO-3 offload") {
  FormatsEnv env;
  const BuiltSetup b = built("axolotl/06-llama-3.1-8b-alst-deepspeed.yaml", [](SetupInputs& in) { in.count_flag(Count::num_gpus) = 8; });
  const TrainingSetup& s = b.setup;
  CHECK(s.model.name == "llama-3.1-8b");
  CHECK(s.batch.seq_len == 500032);  // 500_000 (YAML 1.1 digit separators) padded to a multiple of 64
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.optimizer == OptimizerKind::adamw_8bit);  // adamw_torch_8bit (torchao)
  CHECK(s.runtime.loss == LossImpl::fused_linear);  // Cut Cross Entropy
  CHECK(s.runtime.activation_offload);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.parallel.zero_stage == 3);
  CHECK(s.parallel.offload == Offload::optimizer_and_params);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.runtime.framework == Framework::deepspeed);
  CHECK(set_at(b.origin, "batch.seq_len") == "20:1 sequence_len padded to a multiple of 64 (500032)");
  REQUIRE(b.warnings.size() == 2);
  CHECK(b.warnings[1].message == "tiled_mlp: true is not modelled yet: tiled MLP computes the MLP in sequence tiles; the "
                                 "estimate keeps the whole MLP activations");
  CHECK(b.warnings[0].message == "context_parallel_size: 8 is not modelled yet: context parallelism splits each sequence "
                                 "over GPUs; the estimate keeps whole sequences on each GPU");
}

TEST_CASE("a config with axolotl's defaults: sequence_len 512, bf16: auto, adamw_torch_fused, no checkpointing") {
  FormatsEnv env;
  const BuiltSetup b = built("axolotl/07-defaults.yml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.batch.seq_len == 512);
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.batch.grad_accum == 8);
  CHECK(s.precision == Precision::bf16);
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK(s.checkpointing.mode == CheckpointMode::none);
  CHECK(s.finetune.mode == FinetuneMode::full);
  CHECK(default_of(b.origin, "batch.seq_len") == "axolotl default sequence_len=512 (src/axolotl/utils/schemas/config.py @ v0.18.0 L665-666)");
  CHECK(contains(default_of(b.origin, "optimizer"), "adamw_torch_fused"));
  CHECK(contains(default_of(b.origin, "precision"), "bf16: auto -> bf16 (h100-80gb has bf16)"));
}

TEST_CASE("detection by content") {
  FormatsEnv env;
  for (const char* f : {"01-llama-3.2-1b-qlora.yml", "02-llama-3.1-8b-fft-liger-fsdp.yaml", "03-llama-3-70b-qlora-fsdp.yaml",
                        "04-llama-3.2-1b-lora-ray-zero3.yml", "05-llama-3.2-1b-lora-kernels.yml",
                        "06-llama-3.1-8b-alst-deepspeed.yaml", "07-defaults.yml"}) {
    CAPTURE(f);
    CHECK(load_config(kDir + f).kind == "axolotl");
  }
  CHECK(load_config_text("base_model: gpt2\nlearning_rate: 2e-5\n", kBad, kBad).kind == "memplan");
  CHECK(load_config_text("base_model: gpt2\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\n", kBad, kBad, "axolotl").kind ==
        "axolotl");
}

TEST_CASE("Axolotl's other spellings") {
  FormatsEnv env;
  const std::string head = "base_model: gpt2\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\n";
  auto read = [&](const std::string& body) { return load_config_text(head + body, kBad, kBad); };
  CHECK(read("gradient_checkpointing: offload\n").setup.runtime.activation_offload);
  CHECK(read("gradient_checkpointing: offload\n").setup.checkpointing.mode == CheckpointMode::full);
  CHECK(read("flash_attention: true\n").setup.attention == AttentionImpl::flash);
  CHECK(read("sdp_attention: true\n").setup.attention == AttentionImpl::sdpa);
  CHECK(read("bf16: false\nfp16: true\n").setup.precision == Precision::fp16);
  CHECK(read("bf16: false\n").setup.precision == Precision::fp32);
  CHECK(read("bf16: true\ndeepspeed:\n  zero_optimization:\n    stage: 2\n").setup.precision == Precision::mixed_bf16);
  CHECK(read("adapter: lora\nload_in_8bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n").setup.finetune.base_quant ==
        BaseQuant::int8);
  CHECK(read("sequence_len: 1000\npad_to_sequence_len: true\n").setup.batch.seq_len == 1024);
  CHECK(read("sequence_len: 1000\n").setup.batch.seq_len == 1000);
  CHECK(read("fsdp_config:\n  fsdp_version: 2\n  reshard_after_forward: false\n").setup.parallel.fsdp == FsdpMode::shard_grad_op);
  // lora + load_in_4bit does not quantize: the base is upcast to fp32, said in a warning.
  const LoadedConfig up = read("adapter: lora\nload_in_4bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n");
  CHECK(up.setup.finetune.base_quant == BaseQuant::none);
  CHECK(up.setup.precision == Precision::amp_bf16);
  REQUIRE(up.warnings.size() == 1);
  CHECK(contains(up.warnings[0].message, "prepare_model_for_kbit_training upcasts it to fp32"));
}

TEST_CASE("keys memplan cannot model, and keys axolotl drops, are warnings") {
  FormatsEnv env;
  const std::string head = "base_model: gpt2\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\n";
  const std::pair<const char*, const char*> cases[] = {
      {"liger_rope: true\n",
       ":4:1: warning: liger_rope is ignored: the Liger plugin is not listed in plugins:\nhint: add "
       "axolotl.integrations.liger.LigerPlugin to plugins: (axolotl drops liger_* keys without it)"},
      {"plugins: [axolotl.integrations.liger.LigerPlugin]\nliger_rope: true\n",
       ":5:1: warning: liger_rope: true is not modelled yet: memplan models Liger's RMSNorm, SwiGLU and RoPE kernels together, "
       "not one alone; the estimate keeps the unfused ops\nhint: memplan estimates without it; --strict refuses such configs"},
      {"cut_cross_entropy: true\n",
       ":4:1: warning: cut_cross_entropy is ignored: the Cut Cross Entropy plugin is not listed in plugins:\nhint: add "
       "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin to plugins:"},
      {"rl: dpo\n",
       ":4:1: warning: rl: dpo is not modelled yet: preference training runs chosen and rejected rows and may keep a reference "
       "model; the estimate is plain supervised fine-tuning\nhint: memplan estimates without it; --strict refuses such configs"},
      {"unfrozen_parameters: ['^lm_head.weight$']\n",
       ":4:1: warning: unfrozen_parameters: [...] is not modelled yet: only the matching parameters train; the estimate trains "
       "every parameter\nhint: memplan estimates without it; --strict refuses such configs"},
      {"gradient_checkpointing: true\nactivation_offloading: hidden_states\n",
       ":5:1: warning: activation_offloading: hidden_states is not modelled yet: offloading only the hidden states is not "
       "modelled; the estimate keeps activations on the GPU\nhint: memplan estimates without it; --strict refuses such configs"},
      {"optimizer: muon\n",
       ":4:1: warning: optimizer: muon is not modelled yet: Muon keeps one momentum state for 2-D weights and AdamW's for the "
       "rest; the estimate counts AdamW for all\nhint: memplan estimates without it; --strict refuses such configs"},
      {"batch_size: 32\n",
       ":3:1: warning: batch_size does not set the accumulation: axolotl keeps its default gradient_accumulation_steps=1 "
       "(normalize_config, src/axolotl/utils/config/__init__.py @ v0.18.0 L199-206)\nhint: set gradient_accumulation_steps "
       "(batch_size is derived from it)"},
      {"fsdp: [full_shard]\nfsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n",
       ":6:3: warning: fsdp_config.sharding_strategy SHARD_GRAD_OP is not an Axolotl FSDPConfig field: axolotl drops it and "
       "shards full\nhint: name the strategy in fsdp: (e.g. [shard_grad_op, auto_wrap]) or with FSDP2's reshard_after_forward"},
      {"sequnce_len: 1024\n", ":4:1: warning: unknown key 'sequnce_len'\nhint: did you mean 'sequence_len'?"},
      // Not a typo of a key axolotl has, but its name says memory: warned, never dropped.
      {"deepspeed_config: zero3.json\n",
       ":4:1: warning: unknown key 'deepspeed_config': memplan does not read it, and its name says it may change memory\n"
       "hint: check its spelling against Axolotl's documentation; the estimate is made without it"},
  };
  for (const auto& [body, expected] : cases) {
    const auto& body_shown = body;  // clang 14 cannot capture a structured binding
    CAPTURE(body_shown);
    std::string text = head + body;
    if (std::string(body) == "batch_size: 32\n") text = "base_model: gpt2\nmicro_batch_size: 2\nbatch_size: 32\n";
    const std::vector<std::string> w = warnings_of(text, kBad);
    REQUIRE(w.size() == 1);
    CHECK(w[0] == kBad + expected);
  }
}

TEST_CASE("configs axolotl refuses: file:line:col, axolotl's rule and a hint") {
  FormatsEnv env;
  const std::string head = "base_model: gpt2\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\n";
  const std::pair<std::string, std::string> cases[] = {
      {head + "bf16: maybe\n",
       ":4:1: error: bf16 must be auto, true or false (got 'maybe')\nhint: axolotl reads bf16: auto (bf16 where the GPU "
       "supports it), true or false"},
      {head + "adapter: lora\nlora_target_linear: true\n",
       ":4:1: error: adapter: lora without lora_r\nhint: axolotl has no default for lora_r and lora_alpha: PEFT fails without "
       "them (src/axolotl/loaders/adapter.py @ v0.18.0 L187-201); set both, e.g. lora_r: 16 and lora_alpha: 32"},
      {head + "adapter: qlora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n",
       ":4:1: error: adapter: qlora needs load_in_4bit: true\nhint: axolotl refuses qlora without it (Require "
       "cfg.load_in_4bit to be True for qlora, src/axolotl/utils/schemas/peft.py @ v0.18.0 L202-223)"},
      {head + "load_in_4bit: true\n",
       ":4:1: error: load_in_4bit: true without an adapter: axolotl does not fine-tune a quantized model\nhint: add adapter: "
       "qlora (4-bit) or adapter: lora (8-bit), or turn the quantization off for a full fine-tune "
       "(src/axolotl/utils/schemas/peft.py @ v0.18.0 validate_adapter)"},
      {head + "adapter: lora\nlora_r: 8\nlora_alpha: 16\n",
       ":4:1: error: adapter: lora adapts nothing: neither lora_target_modules nor lora_target_linear\nhint: axolotl passes an "
       "empty target list and PEFT refuses it; set lora_target_linear: true or list lora_target_modules (q_proj, v_proj, ...)"},
      {"base_model: gpt2\nmicro_batch_size: 2\n",
       ":2:1: error: axolotl needs at least two of micro_batch_size, gradient_accumulation_steps and batch_size\nhint: axolotl "
       "refuses the config otherwise (src/axolotl/utils/schemas/validation.py @ v0.18.0 L218-226)"},
      {head + "adapter: prefix\n",
       ":4:1: error: unknown adapter 'prefix'\nhint: axolotl's built-in adapters are lora, qlora and llama-adapter (others "
       "come from plugins)"},
      {head + "attn_implementation: sdpa\nflash_attention: true\n",
       ":5:1: error: attn_implementation cannot be combined with flash_attention\nhint: axolotl refuses both (the legacy "
       "switches are deprecated): keep attn_implementation"},
      {head + "activation_offloading: true\n",
       ":4:1: error: activation_offloading requires gradient_checkpointing\nhint: axolotl refuses it (validation.py @ v0.18.0 "
       "L1444-1447): set gradient_checkpointing: true"},
      {head + "deepspeed: deepspeed_configs/zero9.json\n",
       ":4:1: error: deepspeed: 'deepspeed_configs/zero9.json' does not exist\nhint: deepspeed names a DeepSpeed config JSON "
       "(the HF Trainer opens it relative to the working directory); memplan looks for it beside this file (" + kDir +
           "deepspeed_configs/zero9.json) and in the working directory"},
      {head + "unsloth_lora_mlp: true\n",
       ":4:1: error: unsloth_lora_mlp was removed in axolotl 0.17\nhint: use lora_mlp_kernel, lora_qkv_kernel or lora_o_kernel "
       "(check_deprecated_unsloth_fields, validation.py @ v0.18.0 L59-77)"},
  };
  for (const auto& [text, expected] : cases) {
    const auto& text_shown = text;  // clang 14 cannot capture a structured binding
    CAPTURE(text_shown);
    CHECK(load_error(text, kBad) == kBad + expected);
  }
}

TEST_CASE("QLoRA's nested quantization: on by axolotl's BitsAndBytesConfig, off through bnb_config_kwargs") {
  const std::string base = "base_model: gpt2\nadapter: qlora\nload_in_4bit: true\nlora_r: 8\nlora_alpha: 16\n"
                           "lora_target_linear: true\nmicro_batch_size: 1\ngradient_accumulation_steps: 1\n";
  const LoadedConfig on = load_config_text(base, kBad, kBad);
  CHECK(on.setup.finetune.double_quant);
  CHECK(contains(on.origin.defaults.at("finetune.double_quant"), "bnb_4bit_use_double_quant=True"));
  const LoadedConfig off = load_config_text(base + "bnb_config_kwargs:\n  bnb_4bit_use_double_quant: false\n", kBad, kBad);
  CHECK_FALSE(off.setup.finetune.double_quant);
  CHECK(set_at(off.origin, "finetune.double_quant") ==
        "10:3 bnb_config_kwargs.bnb_4bit_use_double_quant (updates axolotl's BitsAndBytesConfig, src/axolotl/loaders/model.py @ "
        "v0.18.0 L734-735)");
  CHECK(off.warnings.empty());
}

// axolotl's deepspeed_configs/zero3_bf16_cpuoffload_params.json (at b371df79, source.txt beside
// it) offloads the parameters and nothing else: DeepSpeed keeps the fp32 master weights, the Adam
// states and the gradient partitions on the GPU (deepspeed/runtime/zero/stage3.py @ 007cca6a:
// the fp32 partitions live on `self.device`, the GPU unless offload_optimizer). memplan read
// offload_param as both offloads: a few GiB, "fits", where the step needs the optimizer on the card.
TEST_CASE("deepspeed_configs/zero3_bf16_cpuoffload_params.json: the parameters alone go to the host") {
  FormatsEnv env;
  auto with_model = [](SetupInputs& in) {
    in.model = "llama-3.2-1b";
    in.count_flag(Count::micro_batch) = 1;
    in.count_flag(Count::seq_len) = 2048;
  };
  const BuiltSetup params = built("axolotl/deepspeed_configs/zero3_bf16_cpuoffload_params.json", with_model);
  const BuiltSetup all = built("axolotl/deepspeed_configs/zero3_bf16_cpuoffload_all.json", with_model);
  CHECK(params.setup.parallel.offload == Offload::params);
  CHECK(all.setup.parallel.offload == Offload::optimizer_and_params);
  CHECK(params.setup.parallel.zero_stage == 3);
  CHECK(params.setup.parallel.offload_pin_memory);
  CHECK(set_at(params.origin, "parallel.offload") == "7:7 zero_optimization.offload_param.device");
  const MemoryBreakdown p = estimate(params.setup), a = estimate(all.setup);
  const int64_t trainable = count_parameters(params.setup).trainable;
  // On the GPU with parameter offload only: fp32 master weights and both Adam moments (one GPU:
  // the whole partition), none of the 16-bit parameters.
  const PhaseState& step = p.phases[static_cast<size_t>(Phase::optimizer_step)];
  CHECK(step[Term::master_weights] == trainable * 4);
  CHECK(step[Term::optimizer_states] == trainable * 8);
  CHECK(step[Term::weights] == 0);
  CHECK(a.phases[static_cast<size_t>(Phase::optimizer_step)][Term::optimizer_states] == 0);
  CHECK(p.peak().total() > a.peak().total() + trainable * 12);
  // On the host: the parameter shards only (the optimizer's buffers stay off it).
  REQUIRE(p.host.size() == 1);
  CHECK(p.host[0].name == "offloaded_parameters");
  CHECK(a.host.size() == 4);
}
