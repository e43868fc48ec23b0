// NeMo / Megatron configs (profiles/formats/nemo.cpp): the megatron_*_config.yaml examples of
// NVIDIA/NeMo v1.23.0 and v2.4.0 (tests/data/formats/nemo/), the inline Megatron architecture, the
// precision regime of trainer.precision x megatron_amp_O2 x the optimizer, recomputation, and
// broken files. Also the NeMo RL memory guide's policy: dialect of memplan's own YAML.
#include <doctest/doctest.h>

#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

const std::string kDir = std::string(MEMPLAN_TEST_DATA) + "/formats/nemo/";

LoadedConfig load(const std::string& name) { return load_config(kDir + name); }

std::string where(const LoadedConfig& c, const char* field) {
  const Where w = c.origin.of(field);
  return w.line ? std::to_string(w.line) + ":" + std::to_string(w.col) + " " + w.key : "";
}

std::string error_of(const std::string& text) {
  try {
    load_config_text(text, "nemo.yaml", "nemo.yaml");
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

// A minimal Megatron GPT file with `extra` under model:.
std::string gpt(const std::string& extra, const std::string& precision = "bf16") {
  return "trainer:\n  devices: 1\n  precision: " + precision +
         "\nmodel:\n  micro_batch_size: 1\n  global_batch_size: 1\n  encoder_seq_length: 1024\n  num_layers: 12\n"
         "  hidden_size: 768\n  num_attention_heads: 12\n  tokenizer:\n    type: GPT2BPETokenizer\n" +
         extra;
}

}  // namespace

TEST_CASE("nemo: megatron_gpt_config.yaml @ v2.4.0: GPT-2 small, O2 bf16, legacy-spec attention") {
  const LoadedConfig c = load("megatron_gpt_config_v2.4.0.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(c.kind == "nemo");
  REQUIRE(c.has_model);
  const ModelSpec& m = s.model;
  CHECK(m.hidden_size == 768);
  CHECK(m.num_layers == 12);
  CHECK(m.num_attention_heads == 12);
  CHECK(m.num_key_value_heads == 12);  // num_query_groups null: multi-head
  CHECK(m.head_dim == 64);             // kv_channels null: hidden / heads
  CHECK(m.intermediate_size == 3072);
  CHECK(m.vocab_size == 50304);        // GPT-2 BPE 50257 padded to a multiple of 128
  CHECK(m.max_position_embeddings == 512);  // ${.encoder_seq_length}
  CHECK(m.tie_word_embeddings);
  CHECK(m.norm == NormKind::layer_norm);
  CHECK(m.activation == Activation::gelu);
  CHECK_FALSE(m.gated_mlp);
  CHECK(m.positions == PositionKind::learned);
  CHECK(m.qkv_bias);
  CHECK(m.mlp_bias);
  CHECK(m.hidden_dropout == 0.1);
  CHECK(m.attention_dropout == 0.1);
  CHECK(s.runtime.framework == Framework::megatron);
  CHECK(s.precision == Precision::mixed_bf16);  // bf16 + megatron_amp_O2, not the distributed optimizer
  CHECK(s.optimizer == OptimizerKind::adamw);   // fused_adam (adam_w_mode)
  CHECK(s.parallel.zero_stage == 0);
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.grad_accum == 2);  // 8 / (4 x 1 data-parallel rank)
  CHECK(c.global_batch == std::optional<int64_t>(8));
  CHECK(s.batch.seq_len == 512);
  CHECK(s.checkpointing.mode == CheckpointMode::none);
  CHECK(s.attention == AttentionImpl::eager);  // transformer_engine False, use_flash_attention False
  CHECK(s.parallel.num_gpus == 1);
  CHECK(s.parallel.ddp_bucket_view);
  CHECK(where(c, "precision") == "13:3 trainer.precision");
  CHECK(where(c, "batch.grad_accum") == "84:3 model.global_batch_size");
  CHECK(where(c, "model.hidden_size") == "95:3 model.hidden_size");
  CHECK(where(c, "model.vocab_size") == "137:3 model.tokenizer");
  CHECK(c.warnings.empty());
  CHECK(c.deferred.empty());
}

TEST_CASE("nemo: megatron_gpt_config.yaml @ v1.23.0: precision 16 without O2 is autocast") {
  const LoadedConfig c = load("megatron_gpt_config_v1.23.0.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.precision == Precision::amp_fp16);
  CHECK(s.model.hidden_size == 768);
  CHECK(s.model.vocab_size == 50304);
  CHECK(s.batch.grad_accum == 2);
  CHECK(s.attention == AttentionImpl::eager);
  CHECK(c.warnings.empty());
}

TEST_CASE("nemo: megatron_llama_config.yaml @ v2.4.0: Llama-2-7B's architecture, TE attention, fp32") {
  const LoadedConfig c = load("megatron_llama_config_v2.4.0.yaml");
  const TrainingSetup& s = c.setup;
  const ModelSpec& m = s.model;
  CHECK(m.hidden_size == 4096);
  CHECK(m.num_layers == 32);
  CHECK(m.intermediate_size == 11008);
  CHECK(m.norm == NormKind::rms_norm);
  CHECK(m.activation == Activation::silu);
  CHECK(m.gated_mlp);
  CHECK(m.positions == PositionKind::rotary);
  CHECK_FALSE(m.qkv_bias);
  CHECK_FALSE(m.tie_word_embeddings);
  CHECK(m.vocab_size == 32000);
  CHECK(s.precision == Precision::fp32);
  CHECK(s.attention == AttentionImpl::flash);
  CHECK(s.batch.seq_len == 4096);
  // Same parameter count as Llama-2-7B (6,738,415,616) with the assumed 32000-token vocabulary.
  SetupInputs in;
  in.config = kDir + "megatron_llama_config_v2.4.0.yaml";
  const BuiltSetup b = build_setup(in);
  CHECK(summarize_parameters(b.setup).counts.total == 6'738'415'616);
  // The vocabulary is the SentencePiece file's: not in the config, warned.
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].message ==
        "model.tokenizer: {...} is not modelled yet: the vocabulary is the tokenizer's and not in a NeMo config (a "
        "SentencePiece or HF tokenizer file): estimating 32000 tokens (Llama's)");
  CHECK(c.warnings[0].hint == "pass --model for the exact architecture, or give model.tokenizer.vocab_size");
}

TEST_CASE("nemo: TP x PP over 16 GPUs, the distributed optimizer, block recomputation") {
  const LoadedConfig c = load("megatron_llama_tp_pp.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.parallel.num_gpus == 16);
  CHECK(s.parallel.gpus_per_node == 8);
  CHECK(s.parallel.tensor_parallel == 2);
  CHECK(s.parallel.pipeline_parallel == 2);
  CHECK(s.parallel.zero_stage == 1);  // distributed_fused_adam shards master weights and states
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK(s.batch.grad_accum == 8);  // 32 / (1 x 16 / (2 x 2))
  CHECK(s.batch.seq_len == 4096);
  CHECK(s.model.max_position_embeddings == 4096);
  CHECK(s.model.vocab_size == 32000);  // 32000 is a multiple of 128 x TP 2
  // block: the first 4 layers of each pipeline stage recomputed.
  CHECK(s.checkpointing.mode == CheckpointMode::layers);
  CHECK(s.checkpointing.layers == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(where(c, "checkpointing") == "41:3 model.activations_checkpoint_num_layers");
  CHECK(where(c, "parallel.zero_stage") == "43:5 model.optim.name");
  std::vector<std::string> messages;
  for (const Warning& w : c.warnings) messages.push_back(w.message);
  // sequence_parallel: True is read (the residual stream sharded over the TP ranks), not warned.
  CHECK(s.parallel.sequence_parallel);
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].rfind("model.tokenizer: {...} is not modelled yet", 0) == 0);
  CHECK(messages[1].rfind("model.activations_checkpoint_method: block is not modelled yet: block recomputation applies to "
                          "the first layers of every pipeline stage", 0) == 0);
}

TEST_CASE("nemo: recomputation granularities and methods") {
  const LoadedConfig sel = load_config_text(gpt("  activations_checkpoint_granularity: selective\n"), "n.yaml", "n.yaml");
  CHECK(sel.setup.checkpointing.mode == CheckpointMode::selective);
  CHECK(sel.warnings.empty());
  const LoadedConfig uni = load_config_text(
      gpt("  activations_checkpoint_granularity: full\n  activations_checkpoint_method: uniform\n"
          "  activations_checkpoint_num_layers: 1\n"),
      "n.yaml", "n.yaml");
  CHECK(uni.setup.checkpointing.mode == CheckpointMode::full);
  CHECK(uni.warnings.empty());
  const LoadedConfig chunks = load_config_text(
      gpt("  activations_checkpoint_granularity: full\n  activations_checkpoint_method: uniform\n"
          "  activations_checkpoint_num_layers: 4\n"),
      "n.yaml", "n.yaml");
  CHECK(chunks.setup.checkpointing.mode == CheckpointMode::full);
  REQUIRE(chunks.warnings.size() == 1);
  CHECK(chunks.warnings[0].message ==
        "model.activations_checkpoint_num_layers: 4 is not modelled yet: uniform recomputation in chunks of 4 layers saves "
        "one input per chunk and recomputes 4 layers at a time; estimated as every layer checkpointed alone");
  const LoadedConfig all = load_config_text(
      gpt("  activations_checkpoint_granularity: full\n  activations_checkpoint_method: block\n"
          "  activations_checkpoint_num_layers: 12\n"),
      "n.yaml", "n.yaml");
  CHECK(all.setup.checkpointing.mode == CheckpointMode::full);
  // The legacy flash-attn switch, the distributed optimizer without O2, fp8 and CPU offloading.
  const LoadedConfig k = load_config_text(
      gpt("  use_flash_attention: True\n  fp8: True\n  cpu_offloading: True\n  optim:\n    name: distributed_fused_adam\n"),
      "n.yaml", "n.yaml");
  CHECK(k.setup.attention == AttentionImpl::flash);
  CHECK(k.setup.precision == Precision::amp_bf16);
  CHECK(k.setup.parallel.zero_stage == 1);
  CHECK(k.setup.runtime.fp8);
  CHECK(k.setup.runtime.activation_offload);
  REQUIRE(k.warnings.size() == 1);
  CHECK(k.warnings[0].message.rfind("model.cpu_offloading: True is not modelled yet: Transformer Engine offloads", 0) == 0);
}

TEST_CASE("nemo: a fine-tuning config restores its model from a .nemo file: --model") {
  const std::string text =
      "trainer:\n  devices: 2\n  precision: bf16\nmodel:\n  restore_from_path: /models/llama.nemo\n  micro_batch_size: 1\n"
      "  global_batch_size: 8\n  peft:\n    peft_scheme: lora\n    lora_tuning:\n      adapter_dim: 32\n      alpha: 32\n"
      "      target_modules: [attention_qkv, mlp_fc1]\n  data:\n    train_ds:\n      max_seq_length: 2048\n";
  const LoadedConfig c = load_config_text(text, "ft.yaml", "ft.yaml");
  CHECK(c.kind == "nemo");
  CHECK_FALSE(c.has_model);
  REQUIRE(c.no_model.has_value());
  CHECK(c.no_model->message == "this NeMo fine-tuning config restores its model from a .nemo file (model.restore_from_path)");
  CHECK(c.no_model->where.line == 5);
  CHECK(c.setup.finetune.mode == FinetuneMode::lora);
  CHECK(c.setup.finetune.lora_rank == 32);
  CHECK(c.setup.finetune.lora_alpha == 32);
  CHECK(c.setup.finetune.lora_targets == std::vector<std::string>{"q", "k", "v", "gate", "up"});
  CHECK(c.setup.batch.seq_len == 2048);
  CHECK(c.setup.batch.grad_accum == 4);
  SetupInputs in;
  in.config = "ft.yaml";
  try {
    build_setup(in, c);
    FAIL("a NeMo fine-tuning config without --model must not build");
  } catch (const InputError& e) {
    CHECK(e.render() == "ft.yaml:5:3: error: this NeMo fine-tuning config restores its model from a .nemo file "
                        "(model.restore_from_path)\nhint: pass --model PRESET|HF_ID|config.json for the architecture");
  }
  in.model = "llama-3.2-1b";
  CHECK(build_setup(in, c).setup.model.name == "llama-3.2-1b");
}

TEST_CASE("nemo: broken files") {
  CHECK(error_of(gpt("  activations_checkpoint_granularity: full\n")) ==
        "nemo.yaml:13:3: error: activations_checkpoint_granularity: full needs activations_checkpoint_method (Megatron: "
        "\"recompute_method must be block or uniform\")\nhint: set activations_checkpoint_method: uniform (or block) and "
        "activations_checkpoint_num_layers");
  CHECK(error_of(gpt("  megatron_amp_O2: True\n", "16")) ==
        "nemo.yaml:13:3: error: megatron_amp_O2 with trainer.precision 16 fails in NeMo (\"fp16 training is not yet supported "
        "with O2\")\nhint: use trainer.precision: bf16 with megatron_amp_O2, or turn O2 off");
  CHECK(error_of(gpt("", "maybe")) ==
        "nemo.yaml:3:3: error: unknown trainer.precision 'maybe'\nhint: expected one of: 32, 16, bf16, 16-mixed, bf16-mixed");
  CHECK(error_of(gpt("  megatron_amp_O2: perhaps\n")) == "nemo.yaml:13:3: error: model.megatron_amp_O2 must be true or false (got 'perhaps')\nhint: write true or false");
  // tensor_model_parallel_size 0 divided by zero in the vocabulary padding (fuzz_load_config,
  // SIGFPE before): a count is refused at its line as it is read (issue 24), before anything
  // multiplies or divides by it.
  CHECK(error_of(gpt("  tensor_model_parallel_size: 0\n")) ==
        "nemo.yaml:13:3: error: model.tensor_model_parallel_size must be a positive integer (got '0')\nhint: write a whole "
        "number, e.g. 4 (no quotes)");
  CHECK(error_of(gpt("  make_vocab_size_divisible_by: 9000000\n")).find("must be a positive integer up to 1000000") !=
        std::string::npos);
  CHECK(error_of(gpt("  make_vocab_size_divisible_by: 9000000000\n")) ==
        "nemo.yaml:13:3: error: model.make_vocab_size_divisible_by is too large (9000000000): a count here is at most "
        "1000000000\nhint: check the value and its units: GPUs, nodes, batch sizes, lengths and layers are whole numbers far "
        "below this");
  CHECK(error_of(gpt("  activation: swish\n")) ==
        "nemo.yaml:13:3: error: unknown activation 'swish'\nhint: expected one of: gelu, geglu, swiglu, reglu, squared-relu, "
        "fast-geglu, fast-swiglu, fast-reglu");
  CHECK(error_of("trainer:\n  devices: 4\nmodel:\n  micro_batch_size: 3\n  global_batch_size: 8\n  num_layers: 2\n"
                 "  hidden_size: 64\n  num_attention_heads: 4\n")
            .find("nemo.yaml:5:3: error: model.global_batch_size 8 is not a multiple of micro_batch_size 3 x 4 data-parallel") == 0);
  CHECK(error_of("trainer:\n  devices: 1\n  accumulate_grad_batches: 4\nmodel:\n  micro_batch_size: 1\n")
            .find("nemo.yaml:3:3: error: trainer.accumulate_grad_batches must stay 1") == 0);
}

TEST_CASE("NeMo RL guide dialect (memplan YAML policy:): checkpoint_layers and offload_activations") {
  const std::string dir = std::string(MEMPLAN_TEST_DATA) + "/profiles/";
  const LoadedConfig c = load_config(dir + "nemo_policy_layers.yaml");
  CHECK(c.kind == "memplan");
  CHECK(c.warnings.empty());
  CHECK(c.setup.checkpointing.mode == CheckpointMode::layers);
  CHECK(c.setup.checkpointing.layers == std::vector<int64_t>{0, 4, 8, 12});
  CHECK(c.setup.runtime.activation_offload);
  CHECK(c.setup.batch.micro_batch == 2);
  CHECK(c.setup.batch.seq_len == 2048);
  CHECK(where(c, "checkpointing") == "4:3 policy.checkpoint_layers");
  CHECK(where(c, "runtime.activation_offload") == "5:3 policy.offload_activations");
  // The guide's own example: offload_activations was silently dropped before.
  const LoadedConfig guide = load_config(dir + "nemo_policy.yaml");
  CHECK(guide.setup.runtime.activation_offload);
  // A layer list takes precedence over checkpoint_every; a string list reads too.
  const LoadedConfig both = load_config_text("model: llama-3.2-1b\npolicy:\n  checkpoint_every: 2\n  checkpoint_layers: \"3, 1\"\n",
                                             "p.yaml", "p.yaml");
  CHECK(both.setup.checkpointing.mode == CheckpointMode::layers);
  CHECK(both.setup.checkpointing.layers == std::vector<int64_t>{1, 3});
  try {
    load_config_text("model: llama-3.2-1b\npolicy:\n  checkpoint_layers: [first]\n", "p.yaml", "p.yaml");
    FAIL("a non-integer layer must be refused");
  } catch (const InputError& e) {
    CHECK(e.render() == "p.yaml:3:23: error: policy.checkpoint_layers must be an integer (got 'first')\nhint: write a whole number, e.g. 4 (no quotes)");
  }
}

TEST_CASE("nemo: fp16_lm_cross_entropy keeps the logits in 16 bits; fp32 residuals and userbuffers are warned") {
  const LoadedConfig c = load_config_text(gpt("  fp16_lm_cross_entropy: True\n  fp32_residual_connection: True\n  ub_tp_comm_overlap: True\n"),
                                          "n.yaml", "n.yaml");
  CHECK_FALSE(c.setup.runtime.loss_upcast);
  CHECK(where(c, "runtime.loss_upcast") == "13:3 model.fp16_lm_cross_entropy");
  REQUIRE(c.warnings.size() == 2);
  CHECK(c.warnings[0].message.rfind("model.fp32_residual_connection: True is not modelled yet", 0) == 0);
  CHECK(c.warnings[1].message.rfind("model.ub_tp_comm_overlap: True is not modelled yet", 0) == 0);
}

// trainer.devices: -1 is estimated with the fewest GPUs per node the model-parallel and
// expert-parallel degrees allow (1 without them), not refused by validate().
TEST_CASE("nemo: devices -1 with tensor and expert parallelism estimates the fewest GPUs the grid allows") {
  std::string y = gpt("  tensor_model_parallel_size: 2\n  expert_model_parallel_size: 4\n");
  y.replace(y.find("devices: 1"), 10, "devices: -1");
  y.replace(y.find("global_batch_size: 1"), 20, "global_batch_size: 2");  // 2 data-parallel ranks
  const LoadedConfig c = load_config_text(y, "nemo.yaml", "nemo.yaml");
  CHECK(c.setup.parallel.num_gpus == 4);  // lcm(2, 4)
  REQUIRE(c.deferred.size() == 1);
  CHECK(c.deferred[0].warning.message.find("estimating 4 per node") != std::string::npos);
  SetupInputs in;
  in.config = "nemo.yaml";
  in.gpu = "h100-80gb";
  CHECK(build_setup(in, c).setup.parallel.num_gpus == 4);
  std::string plain = gpt("");
  plain.replace(plain.find("devices: 1"), 10, "devices: -1");
  CHECK(load_config_text(plain, "nemo.yaml", "nemo.yaml").deferred.at(0).warning.message.find("estimating 1 per node") != std::string::npos);
}
