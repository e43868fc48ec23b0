// load_config on one fixture per dialect the memory guides write (tests/data/profiles/), asserting
// the setup fields each key lands in and where the file said it.
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>

#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

const std::string kData = std::string(MEMPLAN_TEST_DATA) + "/profiles/";

std::string line_col(const LoadedConfig& c, const char* field) {
  const Where w = c.origin.of(field);
  return std::to_string(w.line) + ":" + std::to_string(w.col);
}

}  // namespace

TEST_CASE("Ava dialect: model/training/data/deepspeed/memory/output sections") {
  const LoadedConfig c = load_config(kData + "ava.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(c.kind == "memplan");
  // learning_rate and prefetch settings read past; what memplan cannot use is said, each at its key.
  REQUIRE(c.warnings.size() == 4);  // silent_mode, pool_size_gb, dynamic_batching, buffer_size
  CHECK(c.warnings[0].render() == kData + "ava.yaml:30:5: warning: unknown key 'silent_mode': memplan does not read it; the estimate "
                                          "is made without it\nhint: keys read here: target_utilization, warning_threshold, "
                                          "critical_threshold, emergency_threshold");
  CHECK(c.warnings[2].message.rfind("unknown key 'dynamic_batching'", 0) == 0);
  REQUIRE(c.has_model);
  CHECK(s.model.name == "ava");
  CHECK(s.model.model_type == "llama");
  CHECK(s.model.hidden_size == 512);
  CHECK(s.model.num_layers == 14);
  CHECK(s.model.num_attention_heads == 8);
  CHECK(s.model.num_key_value_heads == 8);
  CHECK(s.model.head_dim == 64);
  CHECK(s.model.intermediate_size == 1536);  // Llama's rule: 256 * ceil(8 * 512 / 3 / 256)
  CHECK(s.model.vocab_size == 32000);
  CHECK(s.model.gated_mlp);
  CHECK(s.model.num_experts == 8);
  CHECK(s.model.experts_per_token == 2);
  CHECK(s.model.capacity_factor == 1.25);
  CHECK(s.attention == AttentionImpl::flash);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.batch.micro_batch == 12);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.batch.seq_len == 256);
  // mixed_precision: fp16 under use_deepspeed/zero_stage 1: DeepSpeed's fp16 mode.
  CHECK(s.precision == Precision::mixed_fp16);
  CHECK(s.optimizer == OptimizerKind::adamw_8bit);
  CHECK(s.parallel.zero_stage == 1);
  CHECK(s.parallel.offload == Offload::none);
  CHECK(s.parallel.num_gpus == 2);
  CHECK(s.thresholds.target == 0.88);
  CHECK(s.thresholds.emergency == 0.97);
  CHECK(s.data.num_workers == 8);
  CHECK(s.data.prefetch_factor == 2);
  CHECK(c.gpu == std::optional<std::string>("RTX 3090 Ti"));
  CHECK(s.device.name == "rtx-3090-ti");
  CHECK(s.device.capacity_bytes == 25'769'803'776);
  CHECK(line_col(c, "batch.micro_batch") == "13:3");
  CHECK(line_col(c, "model.num_experts") == "6:3");
  CHECK(line_col(c, "precision") == "15:3");
  CHECK(line_col(c, "parallel.zero_stage") == "22:5");
  CHECK(line_col(c, "checkpointing") == "44:3");  // output.gradient_checkpointing, read last
}

TEST_CASE("GSA dialect: flat micro_batch_size / max_seq_len, inline model with n_layers / d_ffn") {
  const LoadedConfig c = load_config(kData + "gsa_flat.yaml");
  const TrainingSetup& s = c.setup;
  REQUIRE(c.warnings.size() == 1);  // the dialect's own gsa: section, which memplan does not read
  CHECK(c.warnings[0].message.rfind("unknown key 'gsa'", 0) == 0);
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 32);
  CHECK(s.batch.seq_len == 1024);
  CHECK(c.global_batch == std::optional<int64_t>(256));
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.precision == Precision::bf16);
  CHECK(s.parallel.num_gpus == 4);
  CHECK(c.gpu_memory == std::optional<int64_t>(44LL << 30));
  CHECK(s.device.capacity_bytes == 44LL << 30);
  CHECK(s.device.family == "generic");
  CHECK(s.device.cuda_context_bytes == 536'870'912);
  CHECK(s.device.cublas_workspace_bytes == 8'519'680);
  CHECK(s.model.hidden_size == 1536);
  CHECK(s.model.num_layers == 8);
  CHECK(s.model.num_attention_heads == 12);
  CHECK(s.model.head_dim == 128);
  CHECK(s.model.intermediate_size == 6144);
  CHECK(s.model.vocab_size == 50304);
  CHECK(s.model.norm == NormKind::layer_norm);
  CHECK(s.model.norm_bias);
  CHECK(s.model.activation == Activation::gelu);
  CHECK_FALSE(s.model.gated_mlp);
  CHECK(s.model.tie_word_embeddings);
  CHECK(s.model.hidden_dropout == 0.0);
  CHECK(line_col(c, "model.num_layers") == "13:3");
}

TEST_CASE("Gearhead dialect: flat batch_size / max_seq_length / bf16: true, model and gpu at the top") {
  const LoadedConfig c = load_config(kData + "gearhead_flat.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "smollm2-135m");
  CHECK(s.device.name == "rx-6750-xt");
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 16);
  CHECK(s.batch.seq_len == 512);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.precision == Precision::amp_bf16);  // HF TrainingArguments bf16=True is autocast
  CHECK(line_col(c, "precision") == "8:1");
  CHECK(line_col(c, "model.hidden_size") == "2:1");  // a preset's fields point at its name
}

TEST_CASE("NeMo RL policy dialect: policy: section, bfloat16 + mixed_precision, checkpoint_every") {
  const LoadedConfig c = load_config(kData + "nemo_policy.yaml");
  const TrainingSetup& s = c.setup;
  REQUIRE(c.warnings.size() == 1);  // attention_heads: the model's own count stands
  CHECK(c.warnings[0].message.rfind("unknown key 'attention_heads'", 0) == 0);
  CHECK(s.model.name == "llama-2-13b");
  // DeepSpeed (zero_stage 1) is in charge, so bfloat16 mixed precision is DeepSpeed's regime.
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.checkpointing.mode == CheckpointMode::every);
  CHECK(s.checkpointing.every_k == 2);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.parallel.tensor_parallel == 4);
  CHECK(s.parallel.pipeline_parallel == 2);
  CHECK(s.parallel.num_gpus == 8);
  CHECK(s.parallel.offload == Offload::optimizer);
  CHECK(s.parallel.zero_stage == 1);
  CHECK(s.attention == AttentionImpl::flash);
  CHECK(s.data.pin_memory);
  CHECK(s.device.name == "a100-80gb");
  CHECK(line_col(c, "checkpointing") == "4:3");
}

TEST_CASE("DeepSpeed ds_config.json: stage, offload, bf16 mixed precision, micro-batch, auto values") {
  const LoadedConfig c = load_config(kData + "ds_config.json");
  const TrainingSetup& s = c.setup;
  CHECK(c.kind == "deepspeed");
  CHECK_FALSE(c.has_model);
  CHECK(s.parallel.zero_stage == 2);
  CHECK(s.parallel.offload == Offload::optimizer);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.grad_accum == 1);  // "auto": left to the default
  CHECK(c.global_batch == std::optional<int64_t>(64));
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.parallel.overlap_comm);
  CHECK(s.parallel.reduce_bucket_elems == 500'000'000);
  CHECK(s.parallel.allgather_bucket_elems == 200'000'000);
  CHECK(line_col(c, "parallel.zero_stage") == "16:5");
  CHECK(line_col(c, "parallel.offload") == "18:7");
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].render() ==
        kData +
            "ds_config.json:3:3: warning: 2 DeepSpeed value(s) are \"auto\" (gradient_accumulation_steps, "
            "optimizer.params.lr); memplan keeps its defaults for them\nhint: the Hugging Face integration resolves "
            "\"auto\" at run time; pass --micro-batch, --grad-accum or --precision to say what it will pick");
}

TEST_CASE("model.hf_config and deepspeed: paths resolve beside the YAML; inline keys override the config") {
  const LoadedConfig c = load_config(kData + "with_hf_config.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "tiny-llama");
  CHECK(s.model.num_layers == 4);           // overridden inline
  CHECK(s.model.num_key_value_heads == 2);  // GQA from the config survives
  CHECK(s.model.head_dim == 64);
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.seq_len == 128);
  CHECK(s.parallel.zero_stage == 2);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.base_quant == BaseQuant::nf4);
  CHECK(s.finetune.lora_rank == 16);
  CHECK(s.finetune.lora_alpha == 32.0);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q_proj", "v_proj", "o_proj"});
  CHECK(s.finetune.train_embeddings);
  // Fields from the config.json point into it; the override points at the YAML line.
  CHECK(c.origin.of("model.hidden_size").file == kData + "models/tiny-llama/config.json");
  CHECK(line_col(c, "model.hidden_size") == "4:3");
  CHECK(c.origin.of("model.num_layers").file == kData + "with_hf_config.yaml");
  CHECK(line_col(c, "model.num_layers") == "4:3");
}

TEST_CASE("a bare HF config.json is a config with only a model") {
  const LoadedConfig c = load_config(kData + "models/tiny-classifier.json");
  CHECK(c.kind == "hf-config");
  CHECK(c.has_model);
  CHECK(c.setup.model.name == "tiny-classifier");
  CHECK(c.setup.model.hf_repo == "memplan-tests/tiny-classifier");
  CHECK(c.setup.model.intermediate_size == 688);
}

TEST_CASE("without DeepSpeed, bf16: true is HF Trainer autocast; with it, DeepSpeed's mixed precision") {
  const LoadedConfig flat = load_config(kData + "gearhead_flat.yaml");  // bf16: true, no deepspeed
  CHECK(flat.setup.precision == Precision::amp_bf16);
}

TEST_CASE("runtime: torch version, logits upcast, held logits; torch 1.x keeps zeroed gradients") {
  const LoadedConfig c = load_config(kData + "runtime.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.runtime.torch_major == 1);
  CHECK(s.runtime.torch_minor == 10);
  CHECK_FALSE(s.runtime.loss_upcast);
  CHECK(s.runtime.keep_logits);
  CHECK_FALSE(s.runtime.zero_grad_set_to_none);  // torch 1.x's zero_grad() default
  // An explicit zero_grad_set_to_none wins over the version's default, in either order.
  CHECK(load_config(kData + "runtime_set_to_none.yaml").setup.runtime.zero_grad_set_to_none);
  try {
    load_config(kData + "bad/torch_version.yaml");
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(e.render() == kData + "bad/torch_version.yaml:3:3: error: runtime.torch_version must look like 2.11 or 1.13 (got 'latest')\n"
                    "hint: the PyTorch release the job runs: python -c 'import torch; print(torch.__version__)'");
  }
}

TEST_CASE("DeepSpeed keys inside zero_optimization and bf16 that change memory: read, or warned when not modelled") {
  const std::string path = "/nonexistent/ds_config.json";
  const std::string text = R"({
  "train_micro_batch_size_per_gpu": 2,
  "bf16": {"enabled": true, "bf16_master_weights_and_grads": true, "bf16_optimizer_states": false},
  "zero_optimization": {
    "stage": 2,
    "contiguous_gradients": false,
    "sub_group_size": 1e9,
    "mics_shard_size": -1,
    "zero_hpz_partition_size": 1,
    "zero_quantized_gradients": true,
    "round_robin_gradients": true
  }
})";
  const LoadedConfig c = load_config_text(text, path, path);
  CHECK_FALSE(c.setup.parallel.contiguous_gradients);
  CHECK(c.setup.parallel.zero_stage == 2);
  // The low-precision master state is read (DeepSpeed PR #7700); the one key set to something
  // memplan does not model is warned; at DeepSpeed's defaults or off, nothing.
  CHECK(c.setup.parallel.half_master);
  CHECK_FALSE(c.setup.parallel.half_optimizer_states);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].render().rfind(path + ":10:5: warning: DeepSpeed's zero_optimization.zero_quantized_gradients", 0) == 0);
  // bf16 optimizer states without bf16 master weights: DeepSpeed refuses it, so does memplan.
  try {
    load_config_text(R"({"bf16": {"enabled": true, "bf16_optimizer_states": true}, "zero_optimization": {"stage": 1}})", path, path);
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(e.render().rfind(path + ":1:28: error: bf16.bf16_optimizer_states needs bf16.bf16_master_weights_and_grads", 0) == 0);
  }
  const LoadedConfig small = load_config_text(R"({"zero_optimization": {"stage": 3, "sub_group_size": 1e8}})", path, path);
  REQUIRE(small.warnings.size() == 1);
  CHECK(small.warnings[0].message.find("sub_group_size") != std::string::npos);
}

TEST_CASE("memplan YAML: a key no table reads is said at its line; a near miss says what it meant; loop settings pass") {
  const std::string path = (std::filesystem::temp_directory_path() / "memplan-unknown-keys.yaml").string();
  std::ofstream(path) << "model: gpt2\ntraining:\n  micro_batch_size: 1\n  bogus_key: 1\n  learning_rate: 2.0e-5\n  seq_len: 128\n"
                         "runtime:\n  torch_versoin: \"2.6\"\nwhatever: 3\n";
  const LoadedConfig c = load_config(path);
  REQUIRE(c.warnings.size() == 3);
  CHECK(c.warnings[0].render().rfind(path + ":4:3: warning: unknown key 'bogus_key': memplan does not read it; the estimate is made "
                                            "without it\nhint: keys read here: ",
                                     0) == 0);
  CHECK(c.warnings[1].render() == path + ":8:3: warning: unknown key 'torch_versoin'\nhint: did you mean 'torch_version'?");
  CHECK(c.warnings[2].message.rfind("unknown key 'whatever'", 0) == 0);
  CHECK(c.setup.batch.seq_len == 128);  // read on past them
  std::filesystem::remove(path);
}
