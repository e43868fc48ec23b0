// torchtitan TOML job configs (profiles/formats/torchtitan.cpp): the shipped train_configs of
// pytorch/torchtitan v0.2.2 and the pre-v0.1.0 layout (tests/data/formats/torchtitan/), the
// JobConfig defaults a file leaves out, the GPU count from the parallel degrees, and broken files.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

const std::string kDir = std::string(MEMPLAN_TEST_DATA) + "/formats/torchtitan/";

LoadedConfig load(const std::string& name) { return load_config(kDir + name); }

std::string where(const LoadedConfig& c, const char* field) {
  const Where w = c.origin.of(field);
  return w.line ? std::to_string(w.line) + ":" + std::to_string(w.col) + " " + w.key : "";
}

std::string error_of(const std::string& text) {
  try {
    load_config_text(text, "job.toml", "job.toml");
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

}  // namespace

TEST_CASE("torchtitan: llama3_8b.toml (v0.2.2): per-op selective checkpointing, FSDP over the launcher's GPUs") {
  const LoadedConfig c = load("llama3_8b.toml");
  const TrainingSetup& s = c.setup;
  CHECK(c.kind == "torchtitan");
  REQUIRE(c.has_model);
  CHECK(s.model.name == "llama3/8B");
  CHECK(s.model.hf_repo == "meta-llama/Llama-3.1-8B");
  CHECK(s.model.hidden_size == 4096);
  CHECK(s.model.num_layers == 32);
  CHECK(s.model.num_key_value_heads == 8);
  CHECK(s.model.intermediate_size == 14336);
  CHECK(s.model.vocab_size == 128256);
  CHECK_FALSE(s.model.tie_word_embeddings);
  CHECK(s.runtime.framework == Framework::torchtitan);
  // training.dtype float32 + mixed_precision_param bfloat16 under FSDP: fp32 shards, bf16 compute.
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.batch.seq_len == 8192);
  CHECK(s.batch.grad_accum == 1);  // global_batch_size -1
  CHECK(s.checkpointing.mode == CheckpointMode::selective_op);
  CHECK(s.parallel.tensor_parallel == 1);
  CHECK(s.parallel.zero_stage == 0);
  CHECK_FALSE(s.runtime.compile);
  CHECK_FALSE(s.runtime.fp8);  // [quantize.linear.float8] is inert without model.converters
  CHECK(where(c, "model.hidden_size") == "21:1 model.flavor");
  CHECK(where(c, "batch.micro_batch") == "34:1 training.local_batch_size");
  CHECK(where(c, "checkpointing") == "61:1 activation_checkpoint.selective_ac_option");
  CHECK(c.origin.defaults.at("precision").find("job_config.py @ v0.2.2") != std::string::npos);
  CHECK(c.warnings.empty());
  REQUIRE(c.deferred.size() == 1);
  CHECK(c.deferred[0].field == "parallel.num_gpus");
  CHECK(c.deferred[0].warning.where.line == 42);  // data_parallel_shard_degree = -1
  // NGPU=64: FSDP over 64 ranks, the framework's default for several ranks.
  SetupInputs in;
  in.config = kDir + "llama3_8b.toml";
  in.count_flag(Count::num_gpus) = 64;
  in.gpu = "a100-80gb";
  const BuiltSetup b = build_setup(in);
  CHECK(b.warnings.empty());
  CHECK(b.setup.parallel.fsdp == FsdpMode::full_shard);
  CHECK(b.setup.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK(b.setup.runtime.loss == LossImpl::standard);
}

TEST_CASE("torchtitan: llama3_70b.toml: full checkpointing and 8-way tensor parallelism") {
  const LoadedConfig c = load("llama3_70b.toml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama3/70B");
  CHECK(s.model.num_layers == 80);
  CHECK(s.parallel.tensor_parallel == 8);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.batch.micro_batch == 8);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(where(c, "parallel.tensor_parallel") == "43:1 parallelism.tensor_parallel_degree");
  CHECK(c.warnings.empty());
  CHECK(c.deferred.size() == 1);
  SetupInputs in;
  in.config = kDir + "llama3_70b.toml";
  in.count_flag(Count::num_gpus) = 64;
  in.gpu = "a100-80gb";
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.parallel.data_parallel() == 8);
  CHECK(b.setup.parallel.fsdp == FsdpMode::full_shard);
}

TEST_CASE("torchtitan: llama4_17bx16e.toml: the MoE flavor, experts routed per token") {
  const LoadedConfig c = load("llama4_17bx16e.toml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama4/17bx16e");
  CHECK(s.model.num_layers == 48);
  CHECK(s.model.hidden_size == 5120);
  CHECK(s.model.num_experts == 16);
  CHECK(s.model.experts_per_token == 1);
  CHECK(s.model.num_shared_experts == 1);
  CHECK(s.model.moe_intermediate_size == 8192);
  CHECK(s.model.moe_layer_frequency == 1);
  CHECK(s.model.vocab_size == 202048);
  CHECK(s.model.moe_impl == MoeImpl::loop);  // grouped GEMMs over the routed tokens
  CHECK(s.parallel.tensor_parallel == 8);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  // expert_tensor_parallel_degree = 8 = tensor_parallel_degree: memplan shards the experts the same way.
  CHECK(c.warnings.empty());
}

TEST_CASE("torchtitan: the pre-v0.1.0 layout (training.batch_size, [experimental] degrees)") {
  const LoadedConfig c = load("llama3_8b_pre_v0.1.toml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama3/8B");
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.batch.seq_len == 8192);
  CHECK(s.checkpointing.mode == CheckpointMode::selective_op);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK_FALSE(s.runtime.compile);
  CHECK(where(c, "batch.micro_batch") == "32:1 training.batch_size");
  CHECK(c.warnings.empty());
}

TEST_CASE("torchtitan: a file that only names the model takes JobConfig's defaults") {
  const LoadedConfig c = load("defaults.toml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "llama3/8B");
  CHECK(s.batch.micro_batch == 8);   // local_batch_size = 8
  CHECK(s.batch.seq_len == 2048);    // seq_len = 2048
  CHECK(s.batch.grad_accum == 1);
  // No [activation_checkpoint]: still selective, every second layer (option "2").
  CHECK(s.checkpointing.mode == CheckpointMode::every);
  CHECK(s.checkpointing.every_k == 2);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(c.origin.defaults.at("checkpointing").find("selective_ac_option = \"2\"") != std::string::npos);
  CHECK(c.origin.defaults.at("batch.micro_batch").find("local_batch_size = 8") != std::string::npos);
  CHECK(c.warnings.empty());
  // No [model] at all: llama3 debugmodel.
  const LoadedConfig d = load_config_text("[training]\nseq_len = 512\n", "d.toml", "d.toml");
  CHECK(d.setup.model.name == "llama3/debugmodel");
  CHECK(d.setup.model.hidden_size == 256);
  CHECK(d.setup.model.num_layers == 6);
  CHECK(d.setup.model.intermediate_size == 768);
  CHECK(d.setup.model.vocab_size == 2048);
}

TEST_CASE("torchtitan: every degree given: HSDP, TP, accumulation from the global batch, float8, compile") {
  const LoadedConfig c = load("llama3_8b_hsdp_float8.toml");
  const TrainingSetup& s = c.setup;
  CHECK(s.parallel.num_gpus == 16);  // 2 x 4 x 2
  CHECK(s.parallel.tensor_parallel == 2);
  CHECK(s.parallel.fsdp == FsdpMode::hybrid_shard);
  CHECK(s.parallel.gpus_per_node == 4);  // the shard group
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 4);  // 64 / (2 x 2 x 4)
  CHECK(c.global_batch == std::optional<int64_t>(64));
  CHECK(s.batch.seq_len == 4096);
  CHECK(s.runtime.fp8);
  CHECK(s.runtime.compile);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::foreach);
  CHECK(s.checkpointing.mode == CheckpointMode::selective_op);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(where(c, "runtime.fp8") == "8:1 model.converters");
  CHECK(where(c, "batch.grad_accum") == "17:1 training.global_batch_size");
  CHECK(c.warnings.empty());
  CHECK(c.deferred.empty());  // the file fixes the GPU count
}

TEST_CASE("torchtitan: replication only is DDP, which autocasts; layer checkpointing every 4th") {
  const LoadedConfig c = load("qwen3_ddp.toml");
  const TrainingSetup& s = c.setup;
  CHECK(s.model.name == "qwen3/0.6B");
  CHECK(s.model.num_layers == 28);
  CHECK(s.model.tie_word_embeddings);
  CHECK(s.parallel.num_gpus == 8);
  CHECK(s.parallel.fsdp == FsdpMode::none);
  CHECK(s.precision == Precision::amp_bf16);
  CHECK(s.checkpointing.mode == CheckpointMode::every);
  CHECK(s.checkpointing.every_k == 4);
  CHECK(c.origin.defaults.count("parallel.fsdp") == 1);
  CHECK(c.warnings.empty());
  CHECK(c.deferred.empty());
  SetupInputs in;
  in.config = kDir + "qwen3_ddp.toml";
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.parallel.fsdp == FsdpMode::none);  // the file's "no FSDP" beats the framework's default
}

TEST_CASE("torchtitan: what memplan cannot model is warned about") {
  const LoadedConfig c = load_config_text(
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"quantize.linear.mx\"]\n"
      "[parallelism]\ndata_parallel_shard_degree = 4\ncontext_parallel_degree = 2\n"
      "[activation_checkpoint]\nmode = \"memory_budget\"\n",
      "w.toml", "w.toml");
  REQUIRE(c.warnings.size() == 3);
  CHECK(c.warnings[0].message == "parallelism.context_parallel_degree: 2 is not modelled yet: context parallelism is not "
                                 "modelled: the estimate holds the activations of the whole sequence on each rank (an "
                                 "over-estimate)");
  CHECK(c.warnings[1].message == "activation_checkpoint.mode: memory_budget is not modelled yet: the compiler's memory-budget "
                                 "checkpointing is not modelled: estimated without checkpointing (an over-estimate)");
  CHECK(c.warnings[2].message == "model.converters: [...] is not modelled yet: MX (microscaling) training is estimated as "
                                 "float8 linears");
  CHECK(c.setup.parallel.num_gpus == 8);
  CHECK(c.setup.runtime.fp8);
}

TEST_CASE("torchtitan: detection and broken files") {
  // Any .toml is torchtitan's; --format forces it for another extension.
  CHECK(load_config_text("[model]\nname = \"llama3\"\nflavor = \"8B\"\n", "job.conf", "job.conf", "torchtitan").kind == "torchtitan");
  CHECK(error_of("[model]\nname = \"llama3\"\nflavor = 8B\"\n") ==
        "job.toml:3:12: error: a quote right after the bare text '8B'\nhint: a string needs a quote on both sides: \"8B\"");
  CHECK(error_of("[model]\nname = \"llama3\"\nflavor = 8B\n") ==
        "job.toml:3:11: error: Error while parsing decimal integer: expected digit, saw 'B'\nhint: see https://toml.io for "
        "the syntax");
  CHECK(error_of("[model]\nname = \"llama3\"\nflavor = \"7B\"\n") ==
        "job.toml:3:1: error: unknown torchtitan model 'llama3/7B'\nhint: did you mean 'llama3/70B' or 'llama3/8B' or 'llama3/405B'? (torchtitan v0.2.2 defines "
        "the flavors in torchtitan/models/<name>/__init__.py)");
  CHECK(error_of("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[activation_checkpoint]\nmode = \"selective\"\n"
                 "selective_ac_option = \"every\"\n") ==
        "job.toml:6:1: error: selective_ac_option must be a positive integer or \"op\" (got 'every')\nhint: e.g. "
        "selective_ac_option = \"2\" (every second layer) or \"op\"");
  CHECK(error_of("[training]\nlocal_batch_size = \"eight\"\n") ==
        "job.toml:2:1: error: training.local_batch_size must be a positive integer (got string 'eight')\nhint: write a whole number, e.g. 4 (no quotes)");
  CHECK(error_of("[training]\ndtype = \"float16\"\n") == "job.toml:2:1: error: unknown training.dtype 'float16'\nhint: "
                                                         "expected one of: float32, bfloat16");
  CHECK(error_of("[optimizer]\nname = \"Lion\"\n").find("job.toml:2:1: error: unknown optimizer.name 'Lion'") == 0);
  CHECK(error_of("[training]\nlocal_batch_size = 3\nglobal_batch_size = 16\n[parallelism]\ndata_parallel_shard_degree = 2\n")
            .find("job.toml:3:1: error: training.global_batch_size 16 is not a multiple of local_batch_size 3 x 2") == 0);
  // A typo gets its "did you mean".
  const LoadedConfig typo = load_config_text("[training]\nlocal_batch_sise = 4\n", "t.toml", "t.toml");
  REQUIRE(typo.warnings.size() == 1);
  CHECK(typo.warnings[0].render() == "t.toml:2:1: warning: unknown key 'local_batch_sise'\nhint: did you mean 'local_batch_size'?");
}

TEST_CASE("torchtitan: 16-bit gradient reduction is warned") {
  const LoadedConfig c = load_config_text("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nmixed_precision_reduce = \"bfloat16\"\n",
                                          "r.toml", "r.toml");
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].message == "training.mixed_precision_reduce: bfloat16 is not modelled yet: gradients reduce-scattered in 16 "
                                 "bits are estimated as fp32 gradient shards (an over-estimate)");
}

TEST_CASE("torchtitan: the compiled loss follows [compile] components; float8 weights recomputed in backward") {
  const std::string model = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n";
  // components without "loss": only the model compiles.
  const LoadedConfig m = load_config_text(model + "[compile]\nenable = true\ncomponents = [\"model\"]\n", "job.toml", "job.toml");
  CHECK(m.setup.runtime.compile);
  CHECK_FALSE(m.setup.runtime.compile_loss);
  CHECK(where(m, "runtime.compile_loss") == "6:1 compile.components");
  // Both listed, but compile off: nothing compiles.
  const LoadedConfig off = load_config_text(model + "[compile]\nenable = false\ncomponents = [\"model\", \"loss\"]\n", "job.toml", "job.toml");
  CHECK_FALSE(off.setup.runtime.compile_loss);
  const LoadedConfig both = load_config_text(model + "[compile]\ncomponents = [\"model\", \"loss\"]\nenable = true\n", "job.toml", "job.toml");
  CHECK(both.setup.runtime.compile_loss);
  // The older [training] compile left the loss eager (train.py @ 9dec370a).
  const LoadedConfig old = load_config_text(model + "[training]\ncompile = true\n", "job.toml", "job.toml");
  CHECK(old.setup.runtime.compile);
  CHECK_FALSE(old.setup.runtime.compile_loss);
  CHECK(where(old, "runtime.compile_loss") == "5:1 training.compile");
  // [quantize.linear.float8] force_recompute_fp8_weight_in_bwd.
  const LoadedConfig f8 = load_config_text("[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"quantize.linear.float8\"]\n"
                                           "[quantize.linear.float8]\nforce_recompute_fp8_weight_in_bwd = true\n",
                                           "job.toml", "job.toml");
  CHECK(f8.setup.runtime.fp8);
  CHECK(f8.setup.runtime.fp8_recompute_weight);
  CHECK(error_of(model + "[compile]\nenable = true\ncomponents = [\"model\", \"optimizer\"]\n") ==
        "job.toml:6:24: error: unknown compile component 'optimizer'\n"
        "hint: expected some of: model, loss (torchtitan/config/job_config.py Compile.components)");
}

// A launcher-decided GPU count (data_parallel_shard_degree = -1) is estimated with the fewest GPUs
// the grid allows: the expert-parallel groups fit in it (validate() refuses EP that does not divide
// the GPUs, and used to refuse these files).
TEST_CASE("torchtitan: shard -1 with expert parallelism estimates the smallest world EP fits in") {
  std::ifstream f(kDir + "llama4_17bx16e.toml");
  std::stringstream text;
  text << f.rdbuf();
  std::string toml = text.str();
  auto replace = [&toml](const std::string& from, const std::string& to) {
    const size_t at = toml.find(from);
    REQUIRE(at != std::string::npos);
    toml.replace(at, from.size(), to);
  };
  replace("\nexpert_parallel_degree = 1\n", "\nexpert_parallel_degree = 16\n");  // with tensor_parallel_degree = 8
  const LoadedConfig c = load_config_text(toml, "ep.toml", "ep.toml");
  CHECK(c.setup.parallel.expert_parallel == 16);
  CHECK(c.setup.parallel.num_gpus == 16);  // lcm(8, 16)
  REQUIRE(c.deferred.size() == 1);
  CHECK(c.deferred[0].warning.message.find("estimating 16 GPU(s)") != std::string::npos);
  CHECK(c.deferred[0].warning.hint == "pass --gpus N (a multiple of 16)");
  SetupInputs in;
  in.config = "ep.toml";
  in.gpu = "h100-80gb";
  const BuiltSetup b = build_setup(in, c);  // not refused
  CHECK(b.setup.parallel.num_gpus == 16);
}
