// accelerate's config file (profiles/formats/accelerate.cpp): accelerate's own templates and the files TRL and
// alignment-handbook launch with (tests/data/formats/accelerate/), read into the launch they describe: engine,
// sharding, offload, mixed precision and GPU count, with the model from --model (or a memplan model: key); the
// defaults accelerate applies (ZeRO stage 2, FSDP FULL_SHARD, mixed precision 'no'); what accelerate refuses.
#include <doctest/doctest.h>

#include "tests/profiles/hf_family_util.h"

using namespace memplan;
using namespace memplan::profiles;
using namespace memplan::testing;

namespace {

const std::string kDir = kFormats + "accelerate/";
const std::string kBad = kDir + "bad.yaml";

// The launch with what the training script decides given as flags (the model, its batch and
// sequence).
BuiltSetup launch(const std::string& file) {
  return built("accelerate/" + file, [](SetupInputs& in) {
    in.model = "llama-3.2-1b";
    in.count_flag(Count::micro_batch) = 4;
    in.count_flag(Count::seq_len) = 1024;
  });
}

}  // namespace

TEST_CASE("accelerate's FSDP template: FULL_SHARD on 2 processes, bf16 mixed precision over fp32 shards") {
  const BuiltSetup b = launch("01-fsdp-template.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.config_format == "accelerate");
  CHECK(b.warnings.empty());
  CHECK(s.model.name == "llama-3.2-1b");
  CHECK(s.parallel.num_gpus == 2);
  CHECK(s.parallel.fsdp == FsdpMode::full_shard);
  CHECK(s.parallel.offload == Offload::none);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.checkpointing.mode == CheckpointMode::none);
  CHECK(s.parallel.zero_stage == 0);
  CHECK(set_at(b.origin, "parallel.fsdp") == "16:3 fsdp_config.fsdp_sharding_strategy");
  CHECK(set_at(b.origin, "parallel.num_gpus") == "7:1 num_processes");
  CHECK(contains(set_at(b.origin, "precision"), "5:1 mixed_precision under FSDP: fp32 shards, bf16 compute"));
}

TEST_CASE("alignment-handbook's zero3.yaml: DeepSpeed ZeRO-3 on 8 GPUs, the config accelerate generates") {
  const BuiltSetup b = launch("02-alignment-handbook-zero3.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.parallel.num_gpus == 8);
  CHECK(s.parallel.zero_stage == 3);
  CHECK(s.parallel.offload == Offload::none);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(s.runtime.framework == Framework::deepspeed);
  CHECK(s.parallel.overlap_comm);  // DeepSpeed's default at stage 3
  CHECK(s.parallel.reduce_bucket_elems == 500'000'000);
  CHECK(s.parallel.stage3_prefetch_bucket_elems == 50'000'000);
  CHECK(s.parallel.gpus_per_node == 8);
  CHECK(set_at(b.origin, "parallel.zero_stage") == "10:3 deepspeed_config.zero_stage");
  CHECK(contains(default_of(b.origin, "parallel.overlap_comm"), "overlap_comm = (stage == 3)"));
}

TEST_CASE("accelerate's DeepSpeed template: the config file it names decides (ZeRO-1, fp16, AdamW)") {
  const BuiltSetup b = launch("03-deepspeed-config-file.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.parallel.num_gpus == 2);
  CHECK(s.parallel.zero_stage == 1);
  CHECK(s.precision == Precision::mixed_fp16);
  CHECK(s.batch.grad_accum == 1);
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.parallel.allgather_bucket_elems == 200'000'000);
  CHECK(s.parallel.reduce_bucket_elems == 2048 * 2048);  // "auto" = hidden_size^2, filled once --model is known
  CHECK(s.parallel.overlap_comm);
  CHECK(s.runtime.framework == Framework::deepspeed);
  CHECK(contains(b.origin.of("parallel.zero_stage").file, "deepspeed_config_templates/zero_stage1_config.json"));
}

// DeepSpeed's optimizer block with params.torch_adam builds torch.optim.AdamW, not FusedAdam
// (deepspeed/runtime/engine.py _configure_basic_optimizer); and what the script decides is said
// when no flag gives it (memplan estimated 1 x 512 silently before).
TEST_CASE("accelerate's DeepSpeed template: torch_adam is torch's AdamW; the script's batch and sequence are warnings") {
  const BuiltSetup b = launch("03-deepspeed-config-file.yaml");
  CHECK(b.setup.runtime.optimizer_impl == OptimizerImpl::foreach);
  CHECK(set_at(b.origin, "runtime.optimizer_impl") == "15:13 optimizer.params.torch_adam");
  const BuiltSetup bare = built("accelerate/03-deepspeed-config-file.yaml", [](SetupInputs& in) { in.model = "llama-3.2-1b"; });
  REQUIRE(bare.warnings.size() == 2);
  CHECK(contains(bare.warnings[0].render(), "warning: the micro-batch is the training script's, not in this accelerate config: estimated at 1\nhint: pass --micro-batch N"));
  CHECK(contains(bare.warnings[1].render(), "warning: the sequence length is the training script's, not in this accelerate config: estimated at 512\nhint: pass --seq-len N"));
}

TEST_CASE("TRL's fsdp2.yaml: FSDP2 resharding after forward on 8 GPUs") {
  const BuiltSetup b = launch("04-trl-fsdp2.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.parallel.num_gpus == 8);
  CHECK(s.parallel.fsdp == FsdpMode::full_shard);
  CHECK(s.precision == Precision::mixed_bf16);
  CHECK(set_at(b.origin, "parallel.fsdp") == "14:3 fsdp_config.fsdp_reshard_after_forward");
}

TEST_CASE("accelerate's multi-node template: 8 processes over 2 machines, no mixed precision") {
  const BuiltSetup b = launch("05-multi-node.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(s.parallel.num_gpus == 8);
  CHECK(s.parallel.gpus_per_node == 4);
  CHECK(s.precision == Precision::fp32);
  CHECK(s.parallel.fsdp == FsdpMode::none);
  CHECK(s.parallel.zero_stage == 0);
  CHECK(contains(default_of(b.origin, "precision"), "mixed_precision='no'"));
}

TEST_CASE("accelerate's single-accelerator template: one process, bf16 autocast") {
  const BuiltSetup b = launch("06-single-accelerator.yaml");
  CHECK(b.setup.parallel.num_gpus == 1);
  CHECK(b.setup.precision == Precision::amp_bf16);
}

TEST_CASE("DeepSpeed without zero_stage runs accelerate's default stage 2; dynamo turns torch.compile on") {
  const BuiltSetup b = launch("07-deepspeed-default-stage.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.parallel.zero_stage == 2);
  CHECK(s.parallel.offload == Offload::optimizer);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.precision == Precision::mixed_fp16);
  CHECK(s.runtime.compile);
  CHECK(s.parallel.num_gpus == 4);
  CHECK_FALSE(s.parallel.overlap_comm);
  CHECK(default_of(b.origin, "parallel.zero_stage") ==
        "accelerate DeepSpeedPlugin default zero_stage=2 (src/accelerate/utils/dataclasses.py @ v1.14.0 L1235-1236)");
}

TEST_CASE("FSDP1 with the strategy as its number (2 = SHARD_GRAD_OP), offload and activation checkpointing") {
  const BuiltSetup b = launch("08-fsdp1-numeric-strategy.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(s.parallel.fsdp == FsdpMode::shard_grad_op);
  CHECK(s.parallel.offload == Offload::optimizer_and_params);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.precision == Precision::fp32);
  CHECK(s.parallel.num_gpus == 8);
}

TEST_CASE("an accelerate file names no model: --model, or a memplan model: key, supplies it") {
  const std::string e = error_of([] { built("accelerate/01-fsdp-template.yaml"); });
  CHECK(e == kDir + "01-fsdp-template.yaml: error: no model given: this accelerate config does not name the model it trains\n"
                    "hint: pass --model PRESET|HF_ID|config.json (memplan models lists the presets), or add a memplan "
                    "`model: NAME` key to the file");
  const LoadedConfig c = load_config_text("distributed_type: MULTI_GPU\nnum_processes: 2\nmodel: gpt2\n", kBad, kBad);
  CHECK(c.kind == "accelerate");
  CHECK(c.has_model);
  CHECK(c.setup.model.name == "gpt2");
}

TEST_CASE("detection by content; YAML's unquoted NO and no") {
  for (const char* f : {"01-fsdp-template.yaml", "02-alignment-handbook-zero3.yaml", "03-deepspeed-config-file.yaml",
                        "04-trl-fsdp2.yaml", "05-multi-node.yaml", "06-single-accelerator.yaml", "07-deepspeed-default-stage.yaml",
                        "08-fsdp1-numeric-strategy.yaml"}) {
    CAPTURE(f);
    CHECK(load_config(kDir + f).kind == "accelerate");
  }
  const LoadedConfig c = load_config_text("distributed_type: NO\nmixed_precision: no\nnum_processes: 1\n", kBad, kBad);
  CHECK(c.kind == "accelerate");
  CHECK(c.setup.parallel.num_gpus == 1);
  CHECK(c.setup.precision == Precision::fp32);
}

TEST_CASE("keys memplan cannot model are warnings") {
  const std::pair<const char*, const char*> cases[] = {
      {"distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_auto_wrap_policy: NO_WRAP\n",
       ":4:3: warning: fsdp_config.fsdp_auto_wrap_policy: NO_WRAP is not modelled yet: without wrapping the whole model is "
       "one FSDP unit, gathered at once; the estimate gathers one layer at a time\nhint: memplan estimates without it; "
       "--strict refuses such configs"},
      {"distributed_type: XLA\nnum_processes: 8\n",
       ":1:1: warning: distributed_type: XLA is not modelled yet: it does not run on CUDA GPUs (CPU, TPU or another "
       "accelerator); the estimate is for a CUDA GPU\nhint: memplan estimates without it; --strict refuses such configs"},
      {"distributed_type: MULTI_GPU\nnum_processes: 8\nparallelism_config:\n  parallelism_config_cp_size: 2\n",
       ":4:3: warning: parallelism_config.parallelism_config_cp_size: 2 is not modelled yet: context/sequence parallelism "
       "splits each sequence over GPUs; the estimate keeps whole sequences\nhint: memplan estimates without it; --strict "
       "refuses such configs"},
      {"distributed_type: MULTI_GPU\nnum_processes: 2\nuse_cpu: true\n",
       ":3:1: warning: use_cpu: true is not modelled yet: the script runs on the CPU; the estimate is for a GPU\nhint: pass "
       "--device cpu to estimate against host memory"},
      {"distributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_procesess: 2\n",
       ":3:1: warning: unknown key 'num_procesess'\nhint: did you mean 'num_processes'?"},
      // A typo inside fsdp_config keeps its "did you mean" (the option is not read otherwise).
      {"distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_ofload_params: true\n",
       ":4:3: warning: unknown key 'fsdp_config.fsdp_ofload_params'\nhint: did you mean 'fsdp_offload_params'?"},
      {"distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  activation_checkpointng: true\n",
       ":4:3: warning: unknown key 'fsdp_config.activation_checkpointng'\nhint: did you mean 'activation_checkpointing'?"},
  };
  for (const auto& [text, expected] : cases) {
    const auto& text_shown = text;  // clang 14 cannot capture a structured binding
    CAPTURE(text_shown);
    const std::vector<std::string> w = warnings_of(text, kBad);
    REQUIRE(w.size() == 1);
    CHECK(w[0] == kBad + expected);
  }
}

TEST_CASE("what accelerate refuses: file:line:col and a hint") {
  const std::pair<std::string, std::string> cases[] = {
      {"distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: "
       "deepspeed_config_templates/zero_stage1_config.json\n  zero_stage: 3\n",
       ":5:3: error: deepspeed_config.zero_stage beside deepspeed_config_file\nhint: accelerate refuses it: the DeepSpeed "
       "config file decides it (When using `deepspeed_config_file`, the following accelerate config variables will be "
       "ignored); move it into that file"},
      {"distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: "
       "deepspeed_config_templates/zero_stage1_config.json\n",
       ":2:1: error: mixed_precision beside deepspeed_config_file\nhint: accelerate refuses it: enable bf16 or fp16 in the "
       "DeepSpeed config file (or write \"auto\" there and pass --mixed_precision to accelerate launch)"},
      {"distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: missing.json\n",
       ":4:3: error: deepspeed_config_file: 'missing.json' does not exist\nhint: deepspeed_config_file names a DeepSpeed "
       "config JSON; memplan looks for it beside this file (" + kDir + "missing.json) and in the working directory"},
      {"distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_sharding_strategy: 7\n",
       ":4:3: error: unknown FSDP sharding strategy '7'\nhint: accelerate takes FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, "
       "HYBRID_SHARD, HYBRID_SHARD_ZERO2 or their numbers 1-5 (src/accelerate/utils/constants.py @ v1.14.0 "
       "FSDP_SHARDING_STRATEGY)"},
      {"distributed_type: MULTI_GPU\nmixed_precision: bf8\nnum_processes: 2\n",
       ":2:1: error: unknown mixed_precision 'bf8'\nhint: accelerate takes no, fp16, bf16 or fp8"},
      {"distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  offload_optimizer_device: disk\n",
       ":4:3: error: unknown offload device 'disk'\nhint: accelerate takes none, cpu or nvme"},
      {"distributed_type: MULTI_GPU\nnum_processes: 0\n",
       ":2:1: error: num_processes must be a positive integer (got '0')\nhint: num_processes is the number of processes "
       "(GPUs) over all machines"},
  };
  for (const auto& [text, expected] : cases) {
    const auto& text_shown = text;  // clang 14 cannot capture a structured binding
    CAPTURE(text_shown);
    CHECK(load_error(text, kBad) == kBad + expected);
  }
  CHECK(load_error("mixed_precision: bf16\nnum_processes: 2\n", kBad).empty());  // not an accelerate file: memplan's
  CHECK(error_of([] { load_config_text("mixed_precision: bf16\nnum_processes: 2\n", kBad, kBad, "accelerate"); }) ==
        kBad + ": error: an accelerate config needs distributed_type\nhint: accelerate refuses the file without it (A "
               "`distributed_type` must be specified in the config file, src/accelerate/commands/config/config_args.py @ "
               "v1.14.0)");
}
