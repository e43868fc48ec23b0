// LightningCLI configs (profiles/formats/lightning.cpp): configs written after the documented
// examples of pytorch-lightning 2.6.5 (tests/data/formats/lightning/), the precision x strategy
// regimes, the model from --model or an id the module takes, memplan's own commented block, and
// broken files.
#include <doctest/doctest.h>

#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

const std::string kDir = std::string(MEMPLAN_TEST_DATA) + "/formats/lightning/";

LoadedConfig load(const std::string& name) { return load_config(kDir + name); }

std::string where(const LoadedConfig& c, const char* field) {
  const Where w = c.origin.of(field);
  return w.line ? std::to_string(w.line) + ":" + std::to_string(w.col) + " " + w.key : "";
}

std::string error_of(const std::string& text) {
  try {
    load_config_text(text, "cli.yaml", "cli.yaml");
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

const LoadedConfig::Deferred* deferred(const LoadedConfig& c, const char* field) {
  for (const auto& d : c.deferred)
    if (d.field == field) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("lightning: FSDPStrategy class_path: SHARD_GRAD_OP, CPU offload, a checkpointing policy") {
  const LoadedConfig c = load("fsdp_class_path.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(c.kind == "lightning");
  CHECK_FALSE(c.has_model);  // model: is the user's module
  REQUIRE(c.no_model.has_value());
  CHECK(c.no_model->message == "model: is the LightningModule mycode.mymodels.MyModel and names no architecture memplan can read");
  CHECK(c.no_model->where.line == 23);
  CHECK(s.runtime.framework == Framework::lightning);
  CHECK(s.parallel.num_gpus == 4);
  CHECK(s.precision == Precision::amp_bf16);  // bf16-mixed under FSDP: fp32 shards, autocast
  CHECK(s.parallel.fsdp == FsdpMode::shard_grad_op);
  CHECK(s.parallel.zero_stage == 0);
  CHECK(s.parallel.offload == Offload::optimizer_and_params);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.batch.micro_batch == 8);  // data.init_args.batch_size, a convention
  CHECK(where(c, "parallel.fsdp") == "18:7 trainer.strategy.init_args.sharding_strategy");
  CHECK(where(c, "checkpointing") == "20:7 trainer.strategy.init_args.activation_checkpointing_policy");
  REQUIRE(c.warnings.size() == 1);
  CHECK(c.warnings[0].message == "data.init_args.batch_size is read as the per-device micro-batch (LightningDataModule argument, "
                                 "a convention and not a Lightning key)");
  REQUIRE(deferred(c, "batch.seq_len"));
  // --model answers what the file cannot name.
  SetupInputs in;
  in.config = kDir + "fsdp_class_path.yaml";
  try {
    build_setup(in);
    FAIL("no model");
  } catch (const InputError& e) {
    CHECK(e.render().find("fsdp_class_path.yaml:23:1: error: model: is the LightningModule mycode.mymodels.MyModel") != std::string::npos);
    CHECK(e.hint() == "pass --model PRESET|HF_ID|config.json, or give the module a model_name_or_path argument");
  }
  in.model = "llama-3.2-1b";
  in.count_flag(Count::seq_len) = 1024;
  const BuiltSetup b = build_setup(in);
  CHECK(b.setup.model.name == "llama-3.2-1b");
  CHECK(b.warnings.size() == 1);
  CHECK(b.setup.runtime.zero_grad_after_forward);  // Lightning's loop
}

TEST_CASE("lightning: deepspeed_stage_3_offload with the legacy precision 16") {
  const LoadedConfig c = load("deepspeed_stage_3_offload.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.parallel.num_gpus == 4);
  CHECK(s.precision == Precision::mixed_fp16);  // 16 -> 16-mixed -> DeepSpeed fp16 with fp32 master weights
  CHECK(s.parallel.zero_stage == 3);
  CHECK(s.parallel.offload == Offload::optimizer_and_params);
  CHECK(s.parallel.reduce_bucket_elems == 200'000'000);  // DeepSpeedStrategy's defaults, not DeepSpeed's
  CHECK(s.parallel.allgather_bucket_elems == 200'000'000);
  CHECK(s.parallel.overlap_comm);
  CHECK(s.batch.grad_accum == 1);
  CHECK(where(c, "parallel.zero_stage") == "8:3 trainer.strategy");
  CHECK(where(c, "precision") == "9:3 trainer.precision");
  CHECK(c.origin.defaults.at("parallel.reduce_bucket_elems").find("deepspeed.py @ 2.6.5") != std::string::npos);
  CHECK(c.warnings.empty());
  CHECK(deferred(c, "batch.micro_batch"));
  CHECK(deferred(c, "batch.seq_len"));
  CHECK_FALSE(deferred(c, "parallel.num_gpus"));
}

TEST_CASE("lightning: devices as indices, num_nodes, legacy bf16, ddp") {
  const LoadedConfig c = load("legacy_values.yaml");
  const TrainingSetup& s = c.setup;
  CHECK(s.parallel.num_gpus == 16);  // "0,1" on 8 nodes
  CHECK(s.parallel.gpus_per_node == 2);
  CHECK(s.precision == Precision::amp_bf16);
  CHECK(s.parallel.zero_stage == 0);
  CHECK(s.parallel.fsdp == FsdpMode::none);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.batch.micro_batch == 4);
  CHECK(c.warnings.size() == 1);  // data.batch_size, a convention
}

TEST_CASE("lightning: a module that names its HF model; DeepSpeedStrategy arguments; devices auto") {
  const LoadedConfig c = load("hf_module_deepspeed.yaml");
  const TrainingSetup& s = c.setup;
  REQUIRE(c.has_model);
  CHECK(s.model.name == "llama-3.2-1b");  // meta-llama/Llama-3.2-1B is the preset's repository
  CHECK(where(c, "model.hidden_size") == "19:5 model.init_args.model_name_or_path");
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.parallel.zero_stage == 3);
  CHECK(s.parallel.offload == Offload::optimizer);
  CHECK(s.parallel.reduce_bucket_elems == 500'000'000);
  CHECK(s.parallel.allgather_bucket_elems == 200'000'000);
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.seq_len == 2048);
  CHECK(s.batch.grad_accum == 2);
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);
  CHECK(c.warnings.size() == 2);  // batch_size and max_seq_length are conventions
  const auto* gpus = deferred(c, "parallel.num_gpus");
  REQUIRE(gpus);
  CHECK(gpus->warning.message == "trainer.devices is \"auto\" (Lightning's default): every visible GPU, a count the file does not "
                                 "hold; estimating 1 per node");
  CHECK(gpus->warning.where.line == 7);
}

TEST_CASE("lightning: precisions, strategies and defaults") {
  auto read = [](const std::string& trainer) { return load_config_text("trainer:\n" + trainer, "cli.yaml", "cli.yaml"); };
  CHECK(read("  devices: 1\n").setup.precision == Precision::fp32);  // Trainer(precision=None): 32-true
  CHECK(read("  devices: 1\n").origin.defaults.count("precision") == 1);
  CHECK(read("  devices: 1\n  precision: bf16-true\n").setup.precision == Precision::bf16);
  CHECK(read("  devices: 1\n  precision: 16-true\n").setup.precision == Precision::fp16);
  CHECK(read("  devices: 2\n  precision: bf16-true\n  strategy: deepspeed\n").setup.precision == Precision::mixed_bf16);
  CHECK(read("  devices: 2\n  strategy: deepspeed\n").setup.parallel.zero_stage == 2);  // DeepSpeedStrategy(stage=2)
  CHECK(read("  devices: 2\n  strategy: deepspeed_stage_2_offload\n").setup.parallel.offload == Offload::optimizer);
  CHECK(read("  devices: 2\n  strategy: fsdp\n").setup.parallel.fsdp == FsdpMode::full_shard);
  const LoadedConfig te = read("  devices: [0, 1, 2]\n  precision: transformer-engine\n");
  CHECK(te.setup.precision == Precision::bf16);
  CHECK(te.setup.runtime.fp8);
  CHECK(te.setup.parallel.num_gpus == 3);
  CHECK(read("  devices: \"2\"\n").setup.parallel.num_gpus == 2);
  CHECK(read("  devices: 8\n  num_nodes: 2\n  strategy:\n    class_path: FSDPStrategy\n    init_args:\n      sharding_strategy: "
             "hybrid_shard\n")
            .setup.parallel.fsdp == FsdpMode::hybrid_shard);
  // Keys that change memory and that memplan cannot model are warned.
  const LoadedConfig w = read("  devices: 2\n  plugins:\n    - class_path: lightning.pytorch.plugins.BitsandbytesPrecision\n"
                              "  strategy:\n    class_path: DeepSpeedStrategy\n    init_args:\n      config: ds_config.json\n");
  REQUIRE(w.warnings.size() == 2);
  CHECK(w.warnings[0].message.rfind("trainer.plugins: [...] is not modelled yet: Trainer plugins", 0) == 0);
  CHECK(w.warnings[1].message.rfind("trainer.strategy.init_args.config: ds_config.json is not modelled yet: the DeepSpeed config given "
                                    "to DeepSpeedStrategy is not read here", 0) == 0);
  // A config written before the subcommand nests under fit:.
  const LoadedConfig fit = load_config_text("fit:\n  trainer:\n    devices: 2\n    precision: bf16-mixed\n", "f.yaml", "f.yaml", "lightning");
  CHECK(fit.setup.parallel.num_gpus == 2);
  CHECK(fit.setup.precision == Precision::amp_bf16);
  // memplan's model: spelling is read too.
  CHECK(load_config_text("trainer:\n  devices: 1\nmodel:\n  preset: gpt2\n", "m.yaml", "m.yaml").setup.model.name == "gpt2");
}

TEST_CASE("lightning: memplan's commented setup block") {
  const std::string text =
      "# --- memplan setup (memplan reads it) ---\n"
      "# model:\n#   preset: llama-3.2-1b\n#   attention: sdpa\n"
      "# hardware:\n#   gpu: a100-80gb\n#   num_gpus: 4\n"
      "# training:\n#   micro_batch_size: 8\n#   seq_len: 2048\n#   gradient_checkpointing: true\n#   optimizer: adamw-8bit\n"
      "# runtime:\n#   framework: lightning\n#   compile: true\n"
      "# --- end memplan setup ---\n"
      "trainer:\n  devices: 2\n  precision: bf16-mixed\n  strategy: ddp\ndata:\n  batch_size: 8\n";
  const LoadedConfig c = load_config_text(text, "plan.yaml", "plan.yaml");
  CHECK(c.kind == "lightning");
  REQUIRE(c.has_model);
  CHECK(c.setup.model.name == "llama-3.2-1b");
  CHECK(c.setup.device.name == "a100-80gb");
  CHECK(c.setup.batch.seq_len == 2048);
  CHECK(c.setup.checkpointing.mode == CheckpointMode::full);
  CHECK(c.setup.optimizer == OptimizerKind::adamw_8bit);
  CHECK(c.setup.runtime.compile);
  CHECK(c.setup.parallel.num_gpus == 2);  // trainer: wins over the block's 4
  CHECK(c.setup.precision == Precision::amp_bf16);
  CHECK(where(c, "batch.seq_len") == "10:5 training.seq_len");  // the block's own lines
  CHECK(c.warnings.empty());  // data.batch_size agrees with the block
  CHECK(c.deferred.empty());
  // A broken block is an error at its line.
  CHECK(error_of("# --- memplan setup ---\n# training:\n#   micro_batch_size: lots\n# --- end memplan setup ---\ntrainer:\n  devices: 1\n") ==
        "cli.yaml:3:5: error: training.micro_batch_size must be a positive integer (got 'lots')\nhint: write a whole number, e.g. 4 (no quotes)");
}

TEST_CASE("lightning: broken files") {
  CHECK(error_of("trainer:\n  strategy: deepspeed_stage_4\n") ==
        "cli.yaml:2:3: error: unknown strategy 'deepspeed_stage_4'\nhint: DeepSpeed strategies: deepspeed, deepspeed_stage_1, "
        "deepspeed_stage_2, deepspeed_stage_2_offload, deepspeed_stage_3, deepspeed_stage_3_offload, "
        "deepspeed_stage_3_offload_nvme");
  CHECK(error_of("trainer:\n  strategy: fsdp_offload\n") ==
        "cli.yaml:2:3: error: unknown strategy 'fsdp_offload'\nhint: did you mean 'fsdp'?");
  CHECK(error_of("trainer:\n  precision: 64\n") ==
        "cli.yaml:2:3: error: 64-bit training is not modelled (memplan has no fp64 regime)\nhint: use 32-true, bf16-mixed or 16-mixed");
  CHECK(error_of("trainer:\n  precision: maybe\n") ==
        "cli.yaml:2:3: error: unknown precision 'maybe'\nhint: expected one of: 32-true, 16-mixed, bf16-mixed, 16-true, bf16-true, "
        "transformer-engine, transformer-engine-float16 (or the legacy 16, bf16, 32)");
  CHECK(error_of("trainer:\n  devices: many\n") == "cli.yaml:2:3: error: trainer.devices must be an integer (got 'many')\nhint: write a whole number, e.g. 4 (no quotes)");
  CHECK(error_of("trainer:\n  accumulate_grad_batches: two\n") ==
        "cli.yaml:2:3: error: trainer.accumulate_grad_batches must be a positive integer (got 'two')\nhint: write a whole number, e.g. 4 (no quotes)");
  CHECK(error_of("trainer:\n  strategy:\n    class_path: FSDPStrategy\n    init_args:\n      sharding_strategy: HALF_SHARD\n")
            .find("cli.yaml:5:7: error: unknown sharding_strategy 'HALF_SHARD'") == 0);
  // The model id the module takes resolves like --model (no Hub id here: tests stay offline).
  CHECK(error_of("trainer:\n  devices: 1\nmodel:\n  init_args:\n    model_name_or_path: lama-3.2-1b\n") ==
        "cli.yaml:5:5: error: unknown model 'lama-3.2-1b'\nhint: did you mean 'llama-3.2-1b'? (memplan models lists the presets)");
  const LoadedConfig typo = load_config_text("trainer:\n  devics: 2\n", "t.yaml", "t.yaml");
  REQUIRE(typo.warnings.size() == 1);
  CHECK(typo.warnings[0].render() == "t.yaml:2:3: warning: unknown key 'devics'\nhint: did you mean 'devices'?");
}

TEST_CASE("lightning: a GPU listed twice in devices is refused, as Lightning refuses it") {
  CHECK(error_of("trainer:\n  devices: [0, 0, 0, 0]\n") ==
        "cli.yaml:2:16: error: trainer.devices lists GPU 0 twice\n"
        "hint: Lightning refuses repeated device ids (\"Device ID's (GPU) must be unique.\"): list each GPU once");
  CHECK(error_of("trainer:\n  devices: \"1,2,1\"\n") ==
        "cli.yaml:2:3: error: trainer.devices lists GPU 1 twice\n"
        "hint: Lightning refuses repeated device ids (\"Device ID's (GPU) must be unique.\"): list each GPU once");
  CHECK(load_config_text("trainer:\n  devices: [0, 1, 2, 3]\n", "cli.yaml", "cli.yaml").setup.parallel.num_gpus == 4);
}

TEST_CASE("lightning: torch's ZeroRedundancyOptimizer and ModelParallelStrategy") {
  // ZeroRedundancyOptimizer(params, optimizer_class=AdamW, ...): DDP with the states sharded.
  const LoadedConfig z = load_config_text(
      "trainer:\n  devices: 4\n  strategy: ddp\noptimizer:\n  class_path: torch.distributed.optim.ZeroRedundancyOptimizer\n"
      "  init_args:\n    optimizer_class: torch.optim.SGD\n    lr: 0.1\n    momentum: 0.9\n",
      "cli.yaml", "cli.yaml");
  CHECK(z.setup.parallel.zero_redundancy_optimizer);
  CHECK(z.setup.parallel.zero_stage == 0);
  CHECK(z.setup.optimizer == OptimizerKind::sgd_momentum);  // the wrapped class, with the same arguments
  CHECK(where(z, "parallel.zero_redundancy_optimizer") == "5:3 optimizer.class_path");
  CHECK(error_of("trainer:\n  devices: 2\noptimizer:\n  class_path: torch.distributed.optim.ZeroRedundancyOptimizer\n") ==
        "cli.yaml:4:3: error: ZeroRedundancyOptimizer without init_args.optimizer_class\n"
        "hint: e.g. init_args: {optimizer_class: torch.optim.AdamW, lr: 1e-4}");
  // ModelParallelStrategy: FSDP2 over the data-parallel size, TP over the tensor-parallel size
  // ("auto": the devices per node).
  auto mp = [](const std::string& args) {
    return load_config_text("trainer:\n  devices: 4\n  strategy:\n    class_path: lightning.pytorch.strategies.ModelParallelStrategy\n" + args,
                            "cli.yaml", "cli.yaml");
  };
  const LoadedConfig two = mp("    init_args:\n      tensor_parallel_size: 2\n");
  CHECK(two.setup.parallel.fsdp == FsdpMode::full_shard);
  CHECK(two.setup.parallel.fsdp_version == 2);
  CHECK(two.setup.parallel.tensor_parallel == 2);
  CHECK(two.setup.parallel.data_parallel() == 2);
  CHECK(where(two, "parallel.tensor_parallel") == "6:7 trainer.strategy.init_args.tensor_parallel_size");
  REQUIRE(two.warnings.size() == 1);  // it runs the module's own configure_model: said so
  CHECK(two.warnings[0].message.find("estimated as FSDP2 (fully_shard)") != std::string::npos);
  CHECK(mp("").setup.parallel.tensor_parallel == 4);  // "auto": every device of the node
  // An explicit ddp strategy wraps one device in DDP too; "auto" on one device does not.
  CHECK(load_config_text("trainer:\n  devices: 1\n  strategy: ddp\n", "cli.yaml", "cli.yaml").setup.parallel.ddp);
  CHECK_FALSE(load_config_text("trainer:\n  devices: 1\n", "cli.yaml", "cli.yaml").setup.parallel.ddp);
  CHECK(error_of("trainer:\n  devices: 4\n  strategy:\n    class_path: ModelParallelStrategy\n    init_args:\n"
                 "      tensor_parallel_size: 0\n")
            .find("cli.yaml:6:7: error:") == 0);
}
