// LitGPT fine-tuning configs (profiles/formats/litgpt.cpp): config_hub/finetune files of
// Lightning-AI/litgpt v0.5.13 (tests/data/formats/litgpt/), the scripts' setup() defaults, LitGPT's
// untied, padded-vocabulary models, the multi-device strategy, and broken files.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

const std::string kDir = std::string(MEMPLAN_TEST_DATA) + "/formats/litgpt/";

LoadedConfig load(const std::string& name) { return load_config(kDir + name); }

std::string where(const LoadedConfig& c, const char* field) {
  const Where w = c.origin.of(field);
  return w.line ? std::to_string(w.line) + ":" + std::to_string(w.col) + " " + w.key : "";
}

std::string error_of(const std::string& text) {
  try {
    load_config_text(text, "lit.yaml", "lit.yaml");
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

}  // namespace

TEST_CASE("litgpt: llama-3.2-1B/lora.yaml: LoRA on q and v, bf16-true, one device") {
  const LoadedConfig c = load("llama-3.2-1B_lora.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(c.kind == "litgpt");
  REQUIRE(c.has_model);
  CHECK(s.model.name == "Llama-3.2-1B");
  CHECK(s.model.hf_repo == "meta-llama/Llama-3.2-1B");
  CHECK(s.model.hidden_size == 2048);
  CHECK(s.model.num_layers == 16);
  CHECK(s.model.vocab_size == 128256);           // padded_vocab_size
  CHECK_FALSE(s.model.tie_word_embeddings);       // LitGPT keeps its own lm_head
  CHECK(s.runtime.framework == Framework::litgpt);
  CHECK(s.precision == Precision::bf16);
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::automatic);
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.batch.grad_accum == 8);  // (8 // 1) // 1
  CHECK(s.batch.seq_len == 512);
  CHECK(c.global_batch == std::optional<int64_t>(8));
  CHECK(s.checkpointing.mode == CheckpointMode::none);
  CHECK(s.parallel.num_gpus == 1);
  CHECK(s.finetune.mode == FinetuneMode::lora);
  CHECK(s.finetune.lora_rank == 32);
  CHECK(s.finetune.lora_alpha == 16);
  CHECK(s.finetune.lora_dropout == 0.05);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "v"});
  CHECK(s.finetune.base_quant == BaseQuant::none);
  CHECK(where(c, "model.hidden_size") == "4:1 checkpoint_dir");
  CHECK(where(c, "precision") == "10:1 precision");
  CHECK(where(c, "batch.micro_batch") == "70:3 train.micro_batch_size");
  CHECK(where(c, "batch.grad_accum") == "67:3 train.global_batch_size");
  CHECK(where(c, "parallel.num_gpus") == "16:1 devices");
  CHECK(c.origin.defaults.at("checkpointing").find("strategy \"auto\"") != std::string::npos);
  CHECK(c.warnings.empty());
  CHECK(c.deferred.empty());
  // The framework's own behaviour: logits kept, chunked loss without the fp32 upcast.
  SetupInputs in;
  in.config = kDir + "llama-3.2-1B_lora.yaml";
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.runtime.keep_logits);
  CHECK(b.setup.runtime.loss == LossImpl::chunked);
  CHECK(b.setup.runtime.loss_chunk_tokens == 128);
  CHECK_FALSE(b.setup.runtime.loss_upcast);
  CHECK(b.setup.precision == Precision::bf16);
}

TEST_CASE("litgpt: llama-3.1-8b/qlora.yaml: bnb.nf4, PagedAdamW, lm_head quantized too") {
  const LoadedConfig c = load("llama-3.1-8b_qlora.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "Llama-3.1-8B");  // Meta-Llama-3.1-8B is that config's hf_config name
  CHECK(s.model.vocab_size == 128256);
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.base_quant == BaseQuant::nf4);
  CHECK_FALSE(s.finetune.double_quant);  // bnb.nf4, not bnb.nf4-dq
  CHECK(s.finetune.lora_rank == 32);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "v"});
  CHECK(s.optimizer == OptimizerKind::paged_adamw);  // instantiate_bnb_optimizer
  CHECK(where(c, "optimizer") == "13:1 quantize");
  CHECK(s.precision == Precision::bf16);
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 4);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].message == "quantize: bnb.nf4 is not modelled yet: LitGPT quantizes lm_head too (BitsandbytesPrecision "
                                 "converts every nn.Linear); the estimate keeps lm_head in 16 bits (an over-estimate of about "
                                 "1.5 bytes x hidden x vocabulary)");
  CHECK(c.warnings[0].where.line == 13);
}

TEST_CASE("litgpt: llama-3.1-8b/full.yaml: finetune_full on 4 devices: FSDP and every Block checkpointed") {
  const LoadedConfig c = load("llama-3.1-8b_full.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "Llama-3.1-8B");
  CHECK(s.finetune.mode == FinetuneMode::full);
  CHECK(s.parallel.num_gpus == 4);
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.grad_accum == 4);  // (64 // 4) // 4
  CHECK(s.batch.seq_len == 512);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(c.origin.defaults.at("checkpointing").find("litgpt/finetune/full.py @ v0.5.13") != std::string::npos);
  CHECK(c.warnings.empty());
  SetupInputs in;
  in.config = kDir + "llama-3.1-8b_full.yaml";
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.parallel.fsdp == FsdpMode::full_shard);
}

TEST_CASE("litgpt: phi-2/lora.yaml: every layer of the block, LoRA on lm_head warned") {
  const LoadedConfig c = load("phi-2_lora.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "phi-2");
  CHECK(s.model.hidden_size == 2560);
  CHECK(s.model.num_layers == 32);
  CHECK(s.model.vocab_size == 51200);
  CHECK(s.model.rotary_fraction == 0.4);
  CHECK_FALSE(s.model.gated_mlp);
  // GptNeoxMLP has fc (up) and proj (down), no gate.
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "k", "v", "o", "up", "down"});
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.grad_accum == 2);
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].message == "lora_head: true is not modelled yet: LoRA on lm_head is not a memplan LoRA target: the "
                                 "estimate keeps lm_head frozen without its adapter (r x (hidden + padded vocabulary) "
                                 "parameters and their states)");
}

TEST_CASE("litgpt: LoRA on 4 devices: FSDP2 with every Block checkpointed") {
  const LoadedConfig c = load("llama-3.2-1B_lora_4devices.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.parallel.num_gpus == 4);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(c.origin.defaults.at("checkpointing").find("parallelize_fn(activation_checkpointing=True)") != std::string::npos);
  CHECK(s.batch.grad_accum == 2);  // (16 // 4) // 2
  CHECK(s.batch.seq_len == 1024);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "k", "v", "o", "gate", "up", "down"});
  CHECK(s.finetune.lora_rank == 16);
  CHECK(c.warnings.empty());
}

TEST_CASE("litgpt: a file with only checkpoint_dir takes finetune_full's setup() defaults") {
  const LoadedConfig c = load("defaults.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.finetune.mode == FinetuneMode::full);
  CHECK(s.precision == Precision::amp_bf16);  // precision null -> bf16-mixed
  CHECK(c.origin.defaults.at("precision").find("get_default_supported_precision") != std::string::npos);
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.batch.grad_accum == 16);  // global 16 // 1 device // micro 1
  CHECK(s.parallel.num_gpus == 1);
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(c.warnings.empty());
  REQUIRE(c.deferred.size() == 1);
  CHECK(c.deferred[0].field == "batch.seq_len");
  CHECK(c.deferred[0].warning.message ==
        "train.max_seq_length is null: LitGPT trains at the longest sample of the dataset (capped by the model's block_size, "
        "131072), so the sequence length depends on the data; estimating 512 tokens");
  // LoRA keys alone mean finetune_lora with its defaults: q and v, r 8, alpha 16, dropout 0.05.
  const LoadedConfig l = load_config_text("checkpoint_dir: checkpoints/Qwen/Qwen2.5-7B-Instruct\nlora_r: 4\n", "l.yaml", "l.yaml");
  CHECK(l.kind == "litgpt");
  CHECK(l.setup.model.name == "Qwen2.5-7B-Instruct");
  CHECK(l.setup.model.vocab_size == 152064);
  CHECK(l.setup.finetune.mode == FinetuneMode::lora);
  CHECK(l.setup.finetune.lora_rank == 4);
  CHECK(l.setup.finetune.lora_alpha == 16);
  CHECK(l.setup.finetune.lora_dropout == 0.05);
  CHECK(l.setup.finetune.lora_targets == std::vector<std::string>{"q", "v"});
  // bnb.nf4-dq double-quantizes; bnb.int8-training is LoRA over an 8-bit base.
  const LoadedConfig dq = load_config_text(
      "checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nprecision: bf16-true\nquantize: bnb.nf4-dq\n", "q.yaml", "q.yaml");
  CHECK(dq.setup.finetune.mode == FinetuneMode::qlora);
  CHECK(dq.setup.finetune.double_quant);
  const LoadedConfig i8 = load_config_text(
      "checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nprecision: 16-true\nquantize: bnb.int8-training\n", "q.yaml", "q.yaml");
  CHECK(i8.setup.finetune.mode == FinetuneMode::lora);
  CHECK(i8.setup.finetune.base_quant == BaseQuant::int8);
  CHECK(i8.setup.precision == Precision::fp16);
}

TEST_CASE("litgpt: detection, devices left to the launcher, broken files") {
  const LoadedConfig a = load_config_text("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\ndevices: auto\n", "a.yaml", "a.yaml");
  CHECK(a.kind == "litgpt");
  REQUIRE(a.deferred.size() == 2);
  CHECK(a.deferred[0].field == "parallel.num_gpus");
  CHECK(a.setup.checkpointing.mode == CheckpointMode::full);  // several devices assumed: every Block checkpointed
  CHECK(error_of("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nquantize: bnb.nf4\n") ==
        "lit.yaml:2:1: error: quantize: bnb.nf4 with precision bf16-mixed (LitGPT's default when precision is null) fails in "
        "LitGPT: \"Quantization and mixed precision is not supported.\" (litgpt/finetune/lora.py @ v0.5.13 setup)\nhint: set "
        "precision: bf16-true (or 16-true, 32-true) with quantize");
  CHECK(error_of("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nprecision: bf16-true\nquantize: bnb.nf4\ndevices: 2\n") ==
        "lit.yaml:3:1: error: quantize on several devices fails in LitGPT: \"Quantization is currently not supported for "
        "multi-GPU training\"\nhint: set devices: 1 and num_nodes: 1 with quantize");
  CHECK(error_of("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1b\n") ==
        "lit.yaml:1:1: error: checkpoint_dir 'checkpoints/meta-llama/Llama-3.2-1b' names no LitGPT config memplan knows "
        "('Llama-3.2-1b')\nhint: did you mean 'Llama-3.2-1B' or 'Llama-3.2-3B' or 'Llama-3.1-8B'? (LitGPT config "
        "names, litgpt/config.py @ v0.5.13; or pass --model)");
  CHECK(error_of("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nprecision: maybe\n") ==
        "lit.yaml:2:1: error: unknown precision 'maybe'\nhint: expected one of: bf16-true, bf16-mixed, 16-true, 16-mixed, 32-true");
  CHECK(error_of("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nlora_r: many\n") ==
        "lit.yaml:2:1: error: lora_r must be a positive integer (got 'many')\nhint: write a whole number, e.g. 4 (no quotes)");
  CHECK(error_of("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\ntrain:\n  global_batch_size: 4\n  micro_batch_size: 8\n")
            .find("lit.yaml:3:3: error: train.global_batch_size 4 over 1 device(s) leaves less than one micro-batch of 8") == 0);
  const LoadedConfig typo = load_config_text("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\nlora_alhpa: 8\n", "t.yaml", "t.yaml");
  REQUIRE(typo.warnings.size() == 1);
  CHECK(typo.warnings[0].render() == "t.yaml:2:1: warning: unknown key 'lora_alhpa'\nhint: did you mean 'lora_alpha'?");
}

TEST_CASE("litgpt and nemo: --format forces the reader") {
  // A LitGPT file under trainer:-less YAML is detected; --format litgpt reads one that is not.
  const LoadedConfig c = load_config_text("checkpoint_dir: checkpoints/meta-llama/Llama-3.2-1B\n", "a.yaml", "a.yaml", "litgpt");
  CHECK(c.kind == "litgpt");
  CHECK(c.setup.model.name == "Llama-3.2-1B");
  const LoadedConfig n = load_config_text("trainer:\n  devices: 2\nmodel:\n  num_layers: 2\n  hidden_size: 64\n  num_attention_heads: 4\n",
                                          "n.yaml", "n.yaml", "megatron");
  CHECK(n.kind == "nemo");
  CHECK(n.setup.parallel.num_gpus == 2);
  CHECK(n.setup.model.hidden_size == 64);
}

// Issue 26: a pre-training config (config_hub/pretrain/tinyllama.yaml @ v0.5.13) names the model
// with model_name and was not detected (check skipped it); with --format litgpt model_name was not
// read, checkpointing was assumed and the accumulation ignored --gpus (128 where LitGPT runs 16
// on 8 GPUs).
TEST_CASE("litgpt: pretrain/tinyllama.yaml: model_name, no activation checkpointing, the accumulation over --gpus") {
  const LoadedConfig c = load("pretrain-tinyllama.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(c.kind == "litgpt");
  REQUIRE(c.has_model);
  CHECK(s.model.name == "tiny-llama-1.1b");
  CHECK(s.model.num_layers == 22);
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.seq_len == 2048);
  CHECK(s.batch.grad_accum == 128);  // 512 // 1 device // 4 until the device count is known
  CHECK(s.checkpointing.mode == CheckpointMode::none);
  CHECK(c.origin.defaults.at("checkpointing").find("pretrain.py") != std::string::npos);
  REQUIRE(c.deferred.size() == 1);  // devices: auto
  CHECK(c.deferred[0].field == "parallel.num_gpus");
  SetupInputs in;
  in.config = kDir + "pretrain-tinyllama.yaml";
  in.count_flag(Count::num_gpus) = 8;
  const BuiltSetup b = build_setup(in, c);
  CHECK(b.setup.batch.grad_accum == 16);
  CHECK(b.setup.checkpointing.mode == CheckpointMode::none);
  CHECK(b.setup.parallel.fsdp == FsdpMode::full_shard);  // HYBRID_SHARD on one node
  CHECK(b.origin.defaults.at("batch.grad_accum").find("512 // 8 device(s) // micro-batch 4") != std::string::npos);
  CHECK(b.warnings.empty());  // --gpus answers devices: auto
  in.count_flag(Count::num_gpus) = 256;  // 512 // 256 // 4 = 0
  try {
    build_setup(in, c);
    CHECK(false);
  } catch (const InputError& e) {
    CHECK(e.render().find("error: --gpus: train.global_batch_size 512 over 256 device(s) leaves less than one micro-batch of 4") == 0);
  }
  CHECK(error_of("model_name: tiny-lama-1.1b\ntrain:\n  micro_batch_size: 2\n") ==
        "lit.yaml:1:1: error: model_name 'tiny-lama-1.1b' is no LitGPT config memplan knows\nhint: did you mean 'tiny-llama-1.1b'? "
        "(LitGPT config names, litgpt/config.py @ v0.5.13; or pass --model)");
}

// Issue 26: a fine-tuning config's checkpointing followed the file's device count, not --gpus
// (finetune/lora.py and full.py @ v0.5.13 checkpoint every Block over several devices, none on one).
TEST_CASE("litgpt: fine-tuning checkpointing follows the device count --gpus gives") {
  struct Fixture {
    const char* file;
    int64_t file_devices;
  };
  for (const Fixture& f : {Fixture{"llama-3.2-1B_lora.yaml", 1}, Fixture{"llama-3.2-1B_lora_4devices.yaml", 4}}) {
    const std::string file = f.file;
    const int64_t file_devices = f.file_devices;
    CAPTURE(file);
    const LoadedConfig c = load(file);
    REQUIRE(c.checkpointing_by_devices.has_value());
    CHECK(c.setup.checkpointing.mode == (file_devices > 1 ? CheckpointMode::full : CheckpointMode::none));
    for (const int64_t gpus : {int64_t{1}, int64_t{4}}) {
      CAPTURE(gpus);
      SetupInputs in;
      in.config = kDir + file;
      in.count_flag(Count::num_gpus) = gpus;
      const BuiltSetup b = build_setup(in, c);
      CHECK(b.setup.checkpointing.mode == (gpus > 1 ? CheckpointMode::full : CheckpointMode::none));
      CHECK(b.origin.defaults.at("checkpointing").find(fmt::format("({} GPU{} from --gpus)", gpus, gpus > 1 ? "s" : "")) != std::string::npos);
      in.choice_flag(Choice::checkpointing) = "every:2";  // a flag still wins
      CHECK(to_string(build_setup(in, c).setup.checkpointing) == "every:2");
    }
  }
  CHECK_FALSE(load("pretrain-tinyllama.yaml").checkpointing_by_devices.has_value());  // pretrain.py never checkpoints
}
