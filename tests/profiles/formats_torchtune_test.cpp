// torchtune recipe configs (profiles/formats/torchtune.cpp): the shipped configs of pytorch/torchtune
// v0.6.1 (tests/data/formats/torchtune/, each citing its example) read field by field, the recipes'
// and builders' defaults, the warning for each setting memplan cannot model, and broken files.
#include <doctest/doctest.h>

#include <algorithm>

#include <fmt/format.h>

#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

const std::string kDir = std::string(MEMPLAN_TEST_DATA) + "/formats/torchtune/";

LoadedConfig load(const std::string& name) { return load_config(kDir + name); }

std::string where(const LoadedConfig& c, const char* field) {
  const Where w = c.origin.of(field);
  return w.line ? std::to_string(w.line) + ":" + std::to_string(w.col) + " " + w.key : "";
}

// The messages of the warnings a build without flags reports (the file's, then its deferred ones).
std::vector<std::string> warnings_of(const LoadedConfig& c) {
  std::vector<std::string> out;
  for (const Warning& w : c.warnings) out.push_back(w.message);
  for (const auto& d : c.deferred) out.push_back(d.warning.message);
  return out;
}

std::string error_of(const std::string& text) {
  try {
    load_config_text(text, "tt.yaml", "tt.yaml");
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

}  // namespace

TEST_CASE("torchtune: llama3_2/1B_lora_single_device (v0.6.1)") {
  const LoadedConfig c = load("llama3_2_1B_lora_single_device.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(c.kind == "torchtune");
  REQUIRE(c.has_model);
  CHECK(s.model.name == "llama-3.2-1b");  // lora_llama3_2_1b builds Llama-3.2-1B (the preset)
  CHECK(s.model.hf_repo == "meta-llama/Llama-3.2-1B-Instruct");
  CHECK(s.model.hidden_size == 2048);
  CHECK(s.model.num_layers == 16);
  CHECK(s.model.num_key_value_heads == 8);
  CHECK(s.model.tie_word_embeddings);
  CHECK(s.precision == Precision::bf16);  // dtype: bf16 is pure bf16 in torchtune
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK(s.runtime.framework == Framework::torchtune);
  CHECK(s.runtime.loss == LossImpl::chunked);
  CHECK(s.runtime.loss_chunks == 8);
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.grad_accum == 8);
  CHECK(s.checkpointing.mode == CheckpointMode::none);
  CHECK_FALSE(s.runtime.activation_offload);
  CHECK_FALSE(s.runtime.compile);
  CHECK(s.parallel.num_gpus == 1);
  CHECK(s.parallel.fsdp == FsdpMode::none);
  CHECK(s.finetune.mode == FinetuneMode::lora);
  CHECK(s.finetune.lora_rank == 64);
  CHECK(s.finetune.lora_alpha == 128);
  CHECK(s.finetune.lora_dropout == 0.0);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "v", "o", "gate", "up", "down"});
  CHECK(s.finetune.base_quant == BaseQuant::none);
  CHECK(where(c, "model.hidden_size") == "24:3 model._component_");
  CHECK(where(c, "precision") == "86:1 dtype");
  CHECK(where(c, "batch.micro_batch") == "55:1 batch_size");
  CHECK(where(c, "finetune.lora_rank") == "27:3 model.lora_rank");
  CHECK(c.origin.defaults.at("parallel.num_gpus").find("single-device") != std::string::npos);
  // tokenizer.max_seq_len: null: the length is the data's; the warning waits for --seq-len.
  CHECK(c.warnings.empty());
  REQUIRE(c.deferred.size() == 1);
  CHECK(c.deferred[0].field == "batch.seq_len");
  CHECK(c.deferred[0].warning.message ==
        "tokenizer.max_seq_len is null: torchtune pads each batch to its longest sample, so the sequence length depends "
        "on the data; estimating 512 tokens");
  CHECK(c.deferred[0].warning.where.line == 32);
}

TEST_CASE("torchtune: llama3_1/8B_full_single_device: paged 8-bit AdamW in backward, checkpointing") {
  const LoadedConfig c = load("llama3_1_8B_full_single_device.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama-3.1-8b");
  CHECK(s.model.vocab_size == 128256);
  CHECK_FALSE(s.model.tie_word_embeddings);
  CHECK(s.precision == Precision::bf16);
  CHECK(s.optimizer == OptimizerKind::paged_adamw_8bit);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::automatic);
  CHECK(s.runtime.optimizer_in_backward);  // optimizer_in_bwd: True is modelled
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 1);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.finetune.mode == FinetuneMode::full);
  CHECK(where(c, "runtime.optimizer_in_backward") == "68:1 optimizer_in_bwd");
  CHECK(where(c, "checkpointing") == "76:1 enable_activation_checkpointing");
  CHECK(c.warnings.empty());
}

TEST_CASE("torchtune: llama3/8B_qlora_single_device: NF4 base, output projection in bf16") {
  const LoadedConfig c = load("llama3_8B_qlora_single_device.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama-3-8b");
  CHECK(s.model.max_position_embeddings == 8192);
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.base_quant == BaseQuant::nf4);
  CHECK(s.finetune.double_quant);  // torchao NF4 quantizes its block scales
  CHECK(s.finetune.lora_rank == 8);
  CHECK(s.finetune.lora_alpha == 16);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "v", "o", "gate", "up", "down"});
  CHECK_FALSE(s.finetune.train_head);
  CHECK(s.precision == Precision::bf16);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 8);
  CHECK(where(c, "finetune.mode") == "24:3 model._component_");
  CHECK(c.warnings.empty());  // apply_lora_to_output: False, low_cpu_ram: ignored
  // The estimate keeps lm_head out of the NF4 base, as torchtune's builders do.
  SetupInputs in;
  in.config = kDir + "llama3_8B_qlora_single_device.yaml";
  in.count_flag(Count::seq_len) = 512;
  const BuiltSetup b = build_setup(in);
  CHECK(b.warnings.empty());  // --seq-len answers the deferred warning
  CHECK(b.setup.precision == Precision::bf16);
  CHECK(b.setup.checkpointing.mode == CheckpointMode::full);
}

TEST_CASE("torchtune: llama3_3/70B_full_multinode: packed data, compile, FSDP over --gpus") {
  const LoadedConfig c = load("llama3_3_70B_full_multinode.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama-3.3-70b");
  CHECK(s.model.num_layers == 80);
  CHECK(s.batch.seq_len == 1024);  // packed: every row exactly max_seq_len
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.runtime.compile);
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK_FALSE(s.runtime.optimizer_in_backward);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.parallel.offload == Offload::none);
  CHECK(c.warnings.empty());
  REQUIRE(c.deferred.size() == 1);
  CHECK(c.deferred[0].field == "parallel.num_gpus");
  CHECK(c.deferred[0].warning.message.find("tune run --nproc_per_node") != std::string::npos);
  // tune run --nnodes 2 --nproc_per_node 8: FSDP2 full sharding (the framework's default).
  SetupInputs in;
  in.config = kDir + "llama3_3_70B_full_multinode.yaml";
  in.count_flag(Count::num_gpus) = 16;
  in.gpu = "h100-80gb";
  const BuiltSetup b = build_setup(in);
  CHECK(b.warnings.empty());
  CHECK(b.setup.parallel.num_gpus == 16);
  CHECK(b.setup.parallel.fsdp == FsdpMode::full_shard);
  CHECK(b.setup.parallel.zero_stage == 0);
  CHECK(b.origin.defaults.at("parallel.fsdp").find("torchtune/training/_distributed.py @ v0.6.1") != std::string::npos);
  // Without --gpus the deferred warning is reported, and --strict refuses it.
  in.count_flag(Count::num_gpus).reset();
  CHECK(build_setup(in).warnings.size() == 1);
  in.strict = true;
  CHECK_THROWS_AS(build_setup(in), InputError);
}

TEST_CASE("torchtune: the recipe's and the LoRA builder's defaults") {
  const LoadedConfig c = load("lora_defaults.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.finetune.mode == FinetuneMode::lora);
  CHECK(s.finetune.lora_rank == 8);      // lora_llama3_2_1b(lora_rank=8)
  CHECK(s.finetune.lora_alpha == 16);    // lora_alpha=16, not PEFT's 8
  CHECK(s.finetune.lora_dropout == 0.0);
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "v"});
  CHECK(s.checkpointing.mode == CheckpointMode::none);  // cfg.get("enable_activation_checkpointing", False)
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::automatic);
  CHECK(s.batch.seq_len == 2048);
  CHECK(c.origin.defaults.at("finetune.lora_alpha").find("lora_llama3_2_1b()") != std::string::npos);
  CHECK(c.origin.defaults.at("checkpointing").find("enable_activation_checkpointing") != std::string::npos);
  CHECK(warnings_of(c).empty());
  // A stated default counts as stated: build_setup keeps bf16 and no checkpointing for this LoRA run.
  SetupInputs in;
  in.config = kDir + "lora_defaults.yaml";
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.precision == Precision::bf16);
  CHECK(b.setup.checkpointing.mode == CheckpointMode::none);
  CHECK(b.setup.runtime.loss == LossImpl::chunked);
  CHECK(b.setup.attention == AttentionImpl::sdpa);
}

TEST_CASE("torchtune: memory options, and a warning for each one memplan cannot model") {
  const LoadedConfig c = load("llama3_1_8B_lora_memory_options.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama-3.1-8b");
  CHECK(s.finetune.lora_targets == std::vector<std::string>{"q", "k", "v", "o", "gate", "up", "down"});
  CHECK(s.finetune.lora_rank == 16);
  CHECK(s.finetune.lora_alpha == 32);
  CHECK(s.finetune.lora_dropout == 0.05);
  CHECK(s.runtime.loss == LossImpl::fused_linear);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::for_loop);
  CHECK(s.runtime.activation_offload);
  CHECK(s.runtime.compile);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.parallel.fsdp == FsdpMode::shard_grad_op);  // fsdp_reshard_after_forward: False
  CHECK(s.parallel.offload == Offload::optimizer_and_params);  // fsdp_cpu_offload
  CHECK(s.batch.seq_len == 4096);
  CHECK(where(c, "parallel.fsdp") == "34:1 fsdp_reshard_after_forward");
  CHECK(where(c, "parallel.offload") == "33:1 fsdp_cpu_offload");
  REQUIRE(c.warnings.size() == 2);
  CHECK(c.warnings[0].message ==
        "model.apply_lora_to_output: True is not modelled yet: LoRA on the output projection is not a memplan LoRA target: "
        "the estimate keeps lm_head frozen without its adapter (r x (hidden + vocab) parameters and their states)");
  CHECK(c.warnings[0].hint == "memplan estimates without it; --strict refuses such configs");
  CHECK(c.warnings[0].where.line == 10);
  CHECK(c.warnings[1].message ==
        "model.use_dora: True is not modelled yet: DoRA (DoRALinear: a magnitude vector and the weight norm per adapted "
        "layer) is estimated as plain LoRA");
  CHECK(c.deferred.size() == 1);  // the GPU count of a distributed recipe
}

TEST_CASE("torchtune: selective layer checkpointing, tensor parallelism, torchao 8-bit AdamW") {
  const LoadedConfig c = load("llama3_2_3B_full_distributed_selective.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama-3.2-3b");
  CHECK(s.precision == Precision::fp32);
  CHECK(s.optimizer == OptimizerKind::adamw_8bit);
  CHECK(s.runtime.loss == LossImpl::standard);
  CHECK(s.parallel.tensor_parallel == 2);
  // ac_option 3 over 28 layers: the layers whose 1-based count is a multiple of 3.
  CHECK(s.checkpointing.mode == CheckpointMode::layers);
  CHECK(s.checkpointing.layers == std::vector<int64_t>{2, 5, 8, 11, 14, 17, 20, 23, 26});
  CHECK(where(c, "checkpointing") == "20:1 ac_mode");
  CHECK(c.warnings.empty());
  CHECK(c.deferred.size() == 1);
}

TEST_CASE("torchtune: the builder table maps every family to its architecture") {
  const struct {
    const char* component;
    const char* model;
    int64_t layers, hidden, vocab;
    bool tied;
    const char* tokenizer;  // the module's, as the emitted recipe names it
    const char* checkpointer;
  } rows[] = {
      {"torchtune.models.code_llama2.code_llama2_7b", "code_llama2_7b", 32, 4096, 32016, false, "llama2.llama2_tokenizer", "LLAMA2"},
      {"torchtune.models.gemma.lora_gemma_2b", "gemma_2b", 18, 2048, 256000, true, "gemma.gemma_tokenizer", "GEMMA"},
      {"torchtune.models.gemma2.gemma2_27b", "gemma2_27b", 46, 4608, 256000, true, "gemma.gemma_tokenizer", "GEMMA2"},
      {"torchtune.models.llama2.qlora_llama2_13b", "llama-2-13b", 40, 5120, 32000, false, "llama2.llama2_tokenizer", "LLAMA2"},
      {"torchtune.models.mistral.mistral_7b", "mistral-7b", 32, 4096, 32000, false, "mistral.mistral_tokenizer", "MISTRAL"},
      {"torchtune.models.phi3.lora_phi3_mini", "phi-3-mini", 32, 3072, 32064, false, "phi3.phi3_mini_tokenizer", "PHI3_MINI"},
      {"torchtune.models.phi4.phi4_14b", "phi-4", 40, 5120, 100352, false, "phi4.phi4_tokenizer", "PHI4"},
      {"torchtune.models.qwen2_5.qwen2_5_14b_instruct", "qwen2_5_14b_instruct", 48, 5120, 152064, false, "qwen2_5.qwen2_5_tokenizer", "QWEN2"},
      {"torchtune.models.qwen2_5.lora_qwen2_5_3b", "qwen2_5_3b", 36, 2048, 151936, true, "qwen2_5.qwen2_5_tokenizer", "QWEN2"},
      {"torchtune.models.qwen3.qwen3_8b_base", "qwen3-8b", 36, 4096, 151936, false, "qwen3.qwen3_tokenizer", "QWEN3"},
      {"torchtune.models.llama3_1.llama3_1_405b", "llama-3.1-405b", 126, 16384, 128256, false, "llama3.llama3_tokenizer", "LLAMA3"},
      {"torchtune.models.llama3_2.llama3_2_1b", "llama-3.2-1b", 16, 2048, 128256, true, "llama3.llama3_tokenizer", "LLAMA3_2"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.component);
    const std::string lora = std::string(r.component).find(".lora_") != std::string::npos ||
                                     std::string(r.component).find(".qlora_") != std::string::npos
                                 ? "  lora_attn_modules: [q_proj, v_proj]\n"
                                 : "";
    const LoadedConfig c =
        load_config_text(fmt::format("model:\n  _component_: {}\n{}batch_size: 1\ndtype: bf16\n", r.component, lora), "tt.yaml", "tt.yaml");
    CHECK(c.kind == "torchtune");
    CHECK(c.setup.model.name == r.model);
    CHECK(c.setup.model.num_layers == r.layers);
    CHECK(c.setup.model.hidden_size == r.hidden);
    CHECK(c.setup.model.vocab_size == r.vocab);
    CHECK(c.setup.model.tie_word_embeddings == r.tied);
    // What a plan for this model writes: the module's tokenizer and checkpointer model_type.
    const auto tool = tool_model(c.setup.model, "torchtune");
    REQUIRE(tool.has_value());
    CHECK(tool->tokenizer == std::string("torchtune.models.") + r.tokenizer);
    CHECK(tool->checkpointer_type == std::string(r.checkpointer));
  }
  // gemma2: soft-capping and sliding windows come with the architecture.
  const LoadedConfig g = load_config_text("model:\n  _component_: torchtune.models.gemma2.gemma2_9b\n", "tt.yaml", "tt.yaml");
  CHECK(g.setup.model.attn_softcap == 50.0);
  CHECK(g.setup.model.sliding_window == 4096);
  // The reward builders have a one-logit head.
  const LoadedConfig r = load_config_text("model:\n  _component_: torchtune.models.mistral.mistral_reward_7b\n", "tt.yaml", "tt.yaml");
  CHECK(r.setup.model.head == HeadKind::sequence_classification);
  CHECK(r.setup.model.num_labels == 1);
}

TEST_CASE("torchtune: detection by content and --format") {
  // A model._component_ under torchtune.* decides it, whatever else the file holds.
  const std::string text = "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\nbatch_size: 2\ndtype: bf16\n";
  CHECK(load_config_text(text, "a.yaml", "a.yaml").kind == "torchtune");
  CHECK(load_config_text(text, "a.yaml", "a.yaml", "torchtune").kind == "torchtune");
  // Forced onto a file without a builder: no model, and build_setup says so.
  const LoadedConfig none = load_config_text("batch_size: 2\ndtype: bf16\n", "b.yaml", "b.yaml", "torchtune");
  CHECK(none.kind == "torchtune");
  CHECK_FALSE(none.has_model);
  REQUIRE(none.no_model.has_value());
  CHECK(none.no_model->message == "this torchtune config has no model: _component_");
}

TEST_CASE("torchtune: broken files") {
  CHECK(error_of("model:\n  _component_: torchtune.models.qwen2_5.lora_qwen2_5_7b\n  lora_attn_modules: [q_proj]\n") ==
        "tt.yaml:2:3: error: unknown torchtune model builder 'torchtune.models.qwen2_5.lora_qwen2_5_7b'\n"
        "hint: did you mean 'torchtune.models.qwen2_5.lora_qwen2_5_7b_base' or "
        "'torchtune.models.qwen2_5.lora_qwen2_5_7b_instruct'? (torchtune's builders are listed in "
        "torchtune/models/*/_model_builders.py @ v0.6.1)");
  // A custom model in a file whose other components are torchtune's (detected as torchtune).
  CHECK(error_of("model:\n  _component_: mypackage.MyModel\ntokenizer:\n  _component_: "
                 "torchtune.models.llama3.llama3_tokenizer\n") ==
        "tt.yaml:2:3: error: model._component_ 'mypackage.MyModel' is not a torchtune model builder\n"
        "hint: torchtune builds models with torchtune.models.<family>.<builder>, e.g. "
        "torchtune.models.llama3_2.lora_llama3_2_1b (torchtune's builders are listed in torchtune/models/*/_model_builders.py "
        "@ v0.6.1)");
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\ndtype: maybe\n") ==
        "tt.yaml:3:1: error: unknown dtype 'maybe'\nhint: expected one of: bf16, fp32");
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\ndtype: fp16\n").find(
            "tt.yaml:3:1: error: dtype: fp16 is refused by torchtune's recipes") == 0);
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\nbatch_size: two\n") ==
        "tt.yaml:3:1: error: batch_size must be a positive integer (got 'two')\nhint: write a whole number, e.g. 4 (no quotes)");
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\ncompile: maybe\n") ==
        "tt.yaml:3:1: error: compile must be true or false (got 'maybe')\nhint: write true or false");
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n") ==
        "tt.yaml:1:1: error: model.lora_attn_modules is missing: torchtune.models.llama3_2.lora_llama3_2_1b requires it\n"
        "hint: list the attention projections to adapt, e.g. lora_attn_modules: ['q_proj', 'v_proj']");
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n  lora_rank: 8\n") ==
        "tt.yaml:3:3: error: torchtune.models.llama3_2.llama3_2_1b takes no LoRA arguments: torchtune would raise a "
        "TypeError\nhint: for LoRA name the lora_ builder: torchtune.models.llama3_2.lora_llama3_2_1b");
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n  lora_attn_modules: [q, v]\n") ==
        "tt.yaml:3:23: error: unknown LoRA attention module 'q'\nhint: expected some of: q_proj, k_proj, v_proj, "
        "output_proj (LORA_ATTN_MODULES, torchtune/modules/peft/_utils.py @ v0.6.1)");
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\ndataset:\n  packed: True\n")
            .find("tt.yaml:4:3: error: dataset.packed needs tokenizer.max_seq_len") == 0);
  CHECK(error_of("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\nenable_activation_offloading: True\n")
            .find("tt.yaml:3:1: error: enable_activation_offloading needs enable_activation_checkpointing: true") == 0);
  CHECK(error_of("model:\n  _component_: torchtune.models.gemma.lora_gemma_2b\n  lora_attn_modules: [q_proj]\n"
                 "  apply_lora_to_output: True\n")
            .find("tt.yaml:4:3: error: gemma_2b ties its output projection") == 0);
  // A key one typo away from a known one keeps its "did you mean".
  const LoadedConfig typo = load_config_text(
      "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\nenable_activation_checkpointin: True\n", "tt.yaml", "tt.yaml");
  REQUIRE(typo.warnings.size() == 1);
  CHECK(typo.warnings[0].render() ==
        "tt.yaml:3:1: warning: unknown key 'enable_activation_checkpointin'\nhint: did you mean "
        "'enable_activation_checkpointing'?");
}

TEST_CASE("torchtune: keys a recipe does not read, and a CPU device") {
  // The LoRA recipes have no optimizer_in_bwd: torchtune ignores it there, and so does memplan.
  const LoadedConfig lora = load_config_text("model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n"
                                             "  lora_attn_modules: [q_proj]\noptimizer_in_bwd: True\ndtype: bf16\n",
                                             "tt.yaml", "tt.yaml");
  CHECK_FALSE(lora.setup.runtime.optimizer_in_backward);
  const LoadedConfig cpu = load_config_text("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\ndevice: cpu\n", "tt.yaml", "tt.yaml");
  REQUIRE(cpu.warnings.size() == 1);
  CHECK(cpu.warnings[0].message == "device: cpu is not modelled yet: training on cpu is not modelled: the estimate is for the GPU "
                                   "given with --gpu (--device cpu estimates host memory)");
}
