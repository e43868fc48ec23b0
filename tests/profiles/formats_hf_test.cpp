// HF TrainingArguments / TRL / alignment-handbook configs (profiles/formats/hf_trainer.cpp): one fixture per
// documented example (tests/data/formats/hf-trl/, each citing the example it was written after), read into the
// setup the Trainer would run, field by field, with where each value came from; the tools' defaults; the warning
// for each key memplan cannot model; the bad inputs the tools refuse, with their exact messages.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include "estimator/estimate.h"
#include "estimator/sequence.h"
#include "tests/profiles/hf_family_util.h"

using namespace memplan;
using namespace memplan::profiles;
using namespace memplan::testing;

namespace {

const std::string kDir = kFormats + "hf-trl/";
const std::string kBad = kDir + "bad.yaml";  // inline texts read as if they sat beside the fixtures

std::vector<std::string> targets(std::initializer_list<const char*> t) { return {t.begin(), t.end()}; }

}  // namespace

TEST_CASE("alignment-handbook zephyr SFT QLoRA: QLoRA on a bf16 base, TRL 0.19's names (the issue's 72 GiB case)") {
  FormatsEnv env;
  const BuiltSetup b = built("hf-trl/01-zephyr-7b-sft-qlora.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.config_format == "hf-trainer");
  CHECK(b.warnings.empty());  // chat_template, dataset_mixture, hub_*, eval/save/log keys: known, memory-neutral
  CHECK(s.model.name == "mistral-7b");
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.grad_accum == 2);
  CHECK(s.batch.seq_len == 2048);
  CHECK(s.precision == Precision::bf16);  // torch_dtype bfloat16: frozen base and plain modules in bf16
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::automatic);
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.lora_rank == 16);
  CHECK(s.finetune.lora_alpha == 16);
  CHECK(s.finetune.lora_dropout == 0.05);
  CHECK(s.finetune.lora_targets == targets({"q", "k", "v", "o", "gate", "up", "down"}));
  CHECK(s.finetune.base_quant == BaseQuant::nf4);
  CHECK_FALSE(s.finetune.double_quant);  // TRL's use_bnb_nested_quant=False
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.attention == AttentionImpl::flash);
  CHECK(s.parallel.zero_stage == 0);
  CHECK(s.parallel.fsdp == FsdpMode::none);
  CHECK(s.parallel.num_gpus == 1);
  CHECK(s.runtime.framework == Framework::hf_trainer);
  CHECK(s.runtime.loss == LossImpl::standard);  // max_seq_length means TRL <= 0.19: the full logits
  CHECK(set_at(b.origin, "batch.seq_len") == "61:1 max_seq_length (TRL's name before 0.16; max_length since)");
  CHECK(set_at(b.origin, "finetune.mode") == "12:1 use_peft + load_in_4bit (QLoRA)");
  CHECK(set_at(b.origin, "precision") == "8:1 torch_dtype: 16-bit weights, gradients and optimizer states");
  CHECK(contains(default_of(b.origin, "finetune.double_quant"), "use_bnb_nested_quant=False"));
  CHECK(contains(default_of(b.origin, "runtime.framework"), "TRL 0.19"));
  // QLoRA of a 7B model at micro-batch 4 x 2048 with checkpointing: about 12 GiB, not a 72 GiB full fine-tune.
  const int64_t peak = estimate(s).peak_bytes();
  CHECK(peak > (8LL << 30));
  CHECK(peak < (16LL << 30));
}

TEST_CASE("TRL docs QLoRA command as a config: TRL 1.9's defaults fill the rest") {
  FormatsEnv env;
  const BuiltSetup b = built("hf-trl/02-trl-qlora-docs-defaults.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.model.name == "llama-2-7b");
  CHECK(s.batch.micro_batch == 1);
  CHECK(s.batch.grad_accum == 16);
  CHECK(s.batch.seq_len == 1024);             // SFTConfig max_length
  CHECK(s.precision == Precision::amp_bf16);  // dtype float32 + bf16 = not fp16
  CHECK(s.finetune.mode == FinetuneMode::qlora);
  CHECK(s.finetune.lora_rank == 32);
  CHECK(s.finetune.lora_alpha == 16);
  CHECK(s.finetune.lora_dropout == 0.05);
  CHECK(s.finetune.lora_targets.empty());     // PEFT's default for Llama: q_proj, v_proj
  CHECK_FALSE(s.finetune.double_quant);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.attention == AttentionImpl::sdpa);
  CHECK(s.runtime.loss == LossImpl::fused_linear);  // chunked_nll: no full logits
  CHECK(default_of(b.origin, "batch.seq_len") == "TRL SFTConfig max_length=1024 (trl/trainer/sft_config.py @ v1.9.0 L205-206)");
  CHECK(default_of(b.origin, "checkpointing") == "TRL gradient_checkpointing=True (trl/trainer/base_config.py @ v1.9.0 L61-62)");
  CHECK(contains(default_of(b.origin, "precision"), "bf16=None -> not fp16"));
  CHECK(contains(default_of(b.origin, "precision"), "trl/trainer/model_config.py @ v1.9.0 L89-90"));
  CHECK(contains(default_of(b.origin, "runtime.loss"), "chunked_nll"));
  CHECK(contains(default_of(b.origin, "finetune.lora_dropout"), "lora_dropout=0.05"));
}

TEST_CASE("run_clm.py JSON with fsdp \"full_shard auto_wrap\": FSDP with mixed precision on the launcher's GPUs") {
  FormatsEnv env;
  const BuiltSetup one = built("hf-trl/03-run-clm-fsdp.json");
  CHECK(one.setup.parallel.num_gpus == 1);
  CHECK(contains(default_of(one.origin, "parallel.num_gpus"), "pass --gpus"));
  const BuiltSetup b = built("hf-trl/03-run-clm-fsdp.json", [](SetupInputs& in) { in.count_flag(Count::num_gpus) = 8; });
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.model.name == "llama-3.1-8b");
  CHECK(s.batch.micro_batch == 2);
  CHECK(s.batch.grad_accum == 4);
  CHECK(s.batch.seq_len == 2048);  // block_size
  CHECK(s.precision == Precision::mixed_bf16);  // fp32 shards, bf16 compute (accelerate's FSDP policy)
  CHECK(s.parallel.fsdp == FsdpMode::full_shard);
  CHECK(s.parallel.zero_stage == 0);
  CHECK(s.parallel.num_gpus == 8);
  CHECK(s.checkpointing.mode == CheckpointMode::full);  // fsdp_config.fsdp_activation_checkpointing
  CHECK(s.attention == AttentionImpl::sdpa);
  CHECK(s.runtime.loss == LossImpl::standard);  // not TRL
  CHECK(set_at(b.origin, "parallel.fsdp") == "11:3 fsdp");
  CHECK(set_at(b.origin, "checkpointing") == "14:5 fsdp_config.fsdp_activation_checkpointing");
  CHECK(set_at(b.origin, "batch.seq_len") == "5:3 block_size");
}

TEST_CASE("alignment-handbook zephyr SFT full: pure bf16; with its ZeRO-3 accelerate config the launch changes") {
  FormatsEnv env;
  const BuiltSetup b = built("hf-trl/04-zephyr-7b-sft-full.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.model.name == "mistral-7b");
  CHECK(s.batch.micro_batch == 16);
  CHECK(s.batch.grad_accum == 1);
  CHECK(s.batch.seq_len == 2048);
  CHECK(s.precision == Precision::bf16);
  CHECK(s.finetune.mode == FinetuneMode::full);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.attention == AttentionImpl::flash);
  CHECK(s.parallel.zero_stage == 0);
}

TEST_CASE("alignment-handbook SmolLM2 DPO: chosen and rejected in one forward, beside a reference model") {
  FormatsEnv env;
  const BuiltSetup b = built("hf-trl/05-smollm2-dpo.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(s.model.name == "loubnabnl/smollm2-1.7B-sft");  // from the Hugging Face cache
  CHECK(s.model.hidden_size == 2048);
  CHECK(s.batch.micro_batch == 4);  // per_device_train_batch_size 2 x (chosen, rejected)
  CHECK(s.batch.grad_accum == 8);
  CHECK(s.batch.seq_len == 1024);
  CHECK(s.precision == Precision::bf16);
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.runtime.loss == LossImpl::standard);
  CHECK(set_at(b.origin, "batch.micro_batch") ==
        "49:1 per_device_train_batch_size x 2 (DPO runs chosen and rejected in one forward)");
  CHECK(b.warnings.empty());
  CHECK(s.runtime.reference_model);  // DPOTrainer makes one: no PEFT, no precomputed log-probs
  CHECK(contains(default_of(b.origin, "runtime.reference_model"), "dpo_trainer.py @ v1.9.0 L893-908"));
  // Its weights: a second copy, all step; with the log-probs precomputed or PEFT adapters, none.
  const BuiltSetup pre = built("hf-trl/05-smollm2-dpo.yaml", [](SetupInputs& in) { in.switch_flag(Switch::reference_model) = false; });
  const MemoryBreakdown with = estimate(s), without = estimate(pre.setup);
  for (size_t i = 1; i < with.phases.size(); ++i)  // backward and the step: the copy exactly
    CHECK(with.phases[i].bytes[static_cast<int>(Term::weights)] - without.phases[i].bytes[static_cast<int>(Term::weights)] ==
          without.phases[i].bytes[static_cast<int>(Term::weights)]);
  CHECK(with.peak_bytes() > without.peak_bytes());
  CHECK(sequence_not_modelled(s) == "a DPO reference model");  // its no-grad forward's events are not in the sequence
}

TEST_CASE("TRL DPO: no reference model with PEFT adapters or precomputed reference log-probs") {
  const std::string base = "model_name_or_path: gpt2\nbeta: 0.1\nper_device_train_batch_size: 2\n";
  CHECK(load_config_text(base, kBad, kBad).setup.runtime.reference_model);
  const LoadedConfig pre = load_config_text(base + "precompute_ref_log_probs: true\n", kBad, kBad);
  CHECK_FALSE(pre.setup.runtime.reference_model);
  CHECK(contains(pre.origin.of("runtime.reference_model").str(), "4:1"));
  CHECK_FALSE(load_config_text(base + "use_peft: true\nlora_r: 8\n", kBad, kBad).setup.runtime.reference_model);
  CHECK_FALSE(load_config_text("model_name_or_path: gpt2\nper_device_train_batch_size: 2\n", kBad, kBad).setup.runtime.reference_model);
}

TEST_CASE("TrainingArguments with a DeepSpeed file beside it: ZeRO-3 offload, \"auto\" filled as the HF Trainer does") {
  FormatsEnv env;
  const BuiltSetup b = built("hf-trl/06-training-args-zero3-offload.yaml", [](SetupInputs& in) { in.count_flag(Count::num_gpus) = 4; });
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());  // the "auto" values are the Trainer's to fill: no warning
  CHECK(s.model.name == "llama-3.2-1b");
  CHECK(s.batch.micro_batch == 4);
  CHECK(s.batch.grad_accum == 1);
  CHECK(s.batch.seq_len == 1024);
  CHECK(s.precision == Precision::mixed_fp16);
  CHECK(s.parallel.zero_stage == 3);
  CHECK(s.parallel.offload == Offload::optimizer_and_params);
  CHECK(s.parallel.overlap_comm);
  CHECK(s.parallel.reduce_bucket_elems == 2048 * 2048);                     // "auto" = hidden_size^2
  CHECK(s.parallel.stage3_prefetch_bucket_elems == (2048 * 2048 * 9) / 10);  // "auto" = int(0.9 hidden_size^2)
  CHECK(s.parallel.stage3_max_live_parameters == 1'000'000'000);
  CHECK(s.runtime.framework == Framework::deepspeed);
  CHECK(s.optimizer == OptimizerKind::adamw);                // the DeepSpeed config's optimizer block
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);   // DeepSpeed's FusedAdam
  CHECK(s.checkpointing.mode == CheckpointMode::none);       // TrainingArguments' default
  CHECK(s.runtime.loss == LossImpl::standard);
  CHECK(contains(default_of(b.origin, "parallel.reduce_bucket_elems"), "\"auto\" = hidden_size^2 = 4194304"));
  CHECK(contains(set_at(b.origin, "parallel.zero_stage"), "zero_optimization.stage"));
  CHECK(contains(b.origin.of("parallel.zero_stage").file, "ds/zero_stage3_offload_config.json"));
}

TEST_CASE("trl sft --config with accelerate_config: zero2 and num_processes: TRL's ZeRO-2 preset on 4 GPUs") {
  FormatsEnv env;
  const BuiltSetup b = built("hf-trl/07-trl-cli-accelerate-zero2.yaml");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.model.name == "qwen2.5-0.5b");
  CHECK(s.batch.micro_batch == 8);  // TrainingArguments' default
  CHECK(s.batch.seq_len == 1024);
  CHECK(s.precision == Precision::mixed_bf16);  // DeepSpeed bf16 from TRL's bf16 default
  CHECK(s.parallel.zero_stage == 2);
  CHECK(s.parallel.num_gpus == 4);  // num_processes in the file beats the preset's 8
  CHECK_FALSE(s.parallel.overlap_comm);
  CHECK(s.runtime.framework == Framework::deepspeed);
  CHECK(s.runtime.optimizer_impl == OptimizerImpl::automatic);  // the Trainer's torch AdamW, wrapped
  CHECK(s.checkpointing.mode == CheckpointMode::full);
  CHECK(s.runtime.loss == LossImpl::fused_linear);
  CHECK(set_at(b.origin, "parallel.zero_stage") == "6:1 accelerate_config: zero2 (deepspeed_config.zero_stage)");
  CHECK(set_at(b.origin, "parallel.num_gpus") == "7:1 num_processes");
}

TEST_CASE("run_clm.py JSON with nothing but the model: TrainingArguments' own defaults") {
  FormatsEnv env;
  const BuiltSetup b = built("hf-trl/08-run-clm-defaults.json");
  const TrainingSetup& s = b.setup;
  CHECK(b.warnings.empty());
  CHECK(s.model.name == "gpt2");
  CHECK(s.batch.micro_batch == 8);
  CHECK(s.batch.grad_accum == 1);
  CHECK(s.precision == Precision::fp32);
  CHECK(s.checkpointing.mode == CheckpointMode::none);
  CHECK(s.optimizer == OptimizerKind::adamw);
  CHECK(s.runtime.loss == LossImpl::standard);
  CHECK(s.data.pin_memory);
  CHECK(default_of(b.origin, "batch.micro_batch") ==
        "TrainingArguments default per_device_train_batch_size=8 (transformers src/transformers/training_args.py @ fd798335)");
  // transformers 5 (memplan's default release) loads the checkpoint's own dtype; gpt2 states none.
  CHECK(contains(default_of(b.origin, "precision"), "from_pretrained's dtype=\"auto\" loads the checkpoint's dtype"));
  CHECK(contains(default_of(b.origin, "checkpointing"), "gradient_checkpointing=False"));
  const BuiltSetup v4 = built("hf-trl/08-run-clm-defaults.json", [](SetupInputs& in) { in.version_flag(Version::transformers) = "4.57"; });
  CHECK(v4.setup.precision == Precision::fp32);
  CHECK(contains(default_of(v4.origin, "precision"), "bf16=False, fp16=False"));
}

TEST_CASE("detection by content, and --format forcing") {
  FormatsEnv env;
  for (const char* f : {"01-zephyr-7b-sft-qlora.yaml", "02-trl-qlora-docs-defaults.yaml", "03-run-clm-fsdp.json",
                        "04-zephyr-7b-sft-full.yaml", "05-smollm2-dpo.yaml", "06-training-args-zero3-offload.yaml",
                        "07-trl-cli-accelerate-zero2.yaml", "08-run-clm-defaults.json"}) {
    CAPTURE(f);
    CHECK(load_config(kDir + f).kind == "hf-trainer");
  }
  // Nothing here says HF: memplan's own YAML by default, TRL's with --format trl.
  const std::string text = "bf16: true\nlearning_rate: 1.0e-5\n";
  CHECK(load_config_text(text, kBad, kBad).kind == "memplan");
  const LoadedConfig forced = load_config_text(text, kBad, kBad, "trl");
  CHECK(forced.kind == "hf-trainer");
  CHECK(forced.setup.precision == Precision::amp_bf16);
  // memplan's flat dialects keep their reader: a top-level model: is memplan's vocabulary.
  CHECK(load_config(std::string(MEMPLAN_TEST_DATA) + "/profiles/gearhead_flat.yaml").kind == "memplan");
}

TEST_CASE("TRL keys and values in their other spellings") {
  FormatsEnv env;
  auto read = [](const std::string& text) { return load_config_text(text, kBad, kBad); };
  SUBCASE("max_length, dtype, all-linear, a fused optimizer, Liger, compile, activation offloading") {
    const LoadedConfig c = read(
        "model_name_or_path: gpt2\nmax_length: 512\ndtype: bfloat16\nuse_peft: true\nlora_target_modules: all-linear\n"
        "optim: adamw_torch_fused\nuse_liger_kernel: true\ntorch_compile_mode: max-autotune\nactivation_offloading: true\n");
    const TrainingSetup& s = c.setup;
    CHECK(s.batch.seq_len == 512);
    CHECK(s.precision == Precision::bf16);
    CHECK(s.finetune.mode == FinetuneMode::lora);
    CHECK(s.finetune.lora_targets == targets({"all-linear"}));
    CHECK(s.runtime.optimizer_impl == OptimizerImpl::fused);
    CHECK(s.runtime.liger);
    CHECK(s.runtime.compile);
    CHECK(s.runtime.activation_offload);
    CHECK_FALSE(c.origin.given("runtime.loss"));  // Liger's fused-linear loss is build_setup's default for --liger
  }
  SUBCASE("every OptimizerNames value that changes memory") {
    const std::pair<const char*, OptimizerKind> cases[] = {
        {"adamw_torch", OptimizerKind::adamw},       {"adamw_torch_fused", OptimizerKind::adamw},
        {"adamw_bnb_8bit", OptimizerKind::adamw_8bit}, {"adamw_8bit", OptimizerKind::adamw_8bit},
        {"adamw_torch_8bit", OptimizerKind::adamw_8bit}, {"paged_adamw_8bit", OptimizerKind::paged_adamw_8bit},
        {"paged_adamw_32bit", OptimizerKind::paged_adamw}, {"adafactor", OptimizerKind::adafactor},
        {"lion_32bit", OptimizerKind::lion},         {"sgd", OptimizerKind::sgd},
        {"rmsprop", OptimizerKind::sgd_momentum},    {"adagrad", OptimizerKind::sgd_momentum}};
    for (const auto& [name, kind] : cases) {
      const auto& name_shown = name;  // clang 14 cannot capture a structured binding
      CAPTURE(name_shown);
      const LoadedConfig c = read(fmt::format("model_name_or_path: gpt2\noptim: {}\n", name));
      CHECK(c.setup.optimizer == kind);
      CHECK(c.warnings.empty());
    }
    CHECK(read("model_name_or_path: gpt2\noptim: sgd\noptim_args: momentum=0.9\n").setup.optimizer == OptimizerKind::sgd_momentum);
    CHECK(read("model_name_or_path: gpt2\noptim: adamw_hf\n").setup.runtime.optimizer_impl == OptimizerImpl::for_loop);
  }
  SUBCASE("fsdp words and fsdp_config (TrainingArguments._process_fsdp_args)") {
    const LoadedConfig grad_op = read("model_name_or_path: gpt2\nbf16: true\nfsdp: shard_grad_op offload\n");
    CHECK(grad_op.setup.parallel.fsdp == FsdpMode::shard_grad_op);
    CHECK(grad_op.setup.parallel.offload == Offload::optimizer_and_params);
    CHECK(read("model_name_or_path: gpt2\nfsdp: hybrid_shard auto_wrap\n").setup.parallel.fsdp == FsdpMode::hybrid_shard);
    CHECK(read("model_name_or_path: gpt2\nfsdp: true\n").setup.parallel.fsdp == FsdpMode::full_shard);
    CHECK(read("model_name_or_path: gpt2\nfsdp: [full_shard, auto_wrap]\nfsdp_config:\n  version: 2\n  reshard_after_forward: false\n")
              .setup.parallel.fsdp == FsdpMode::shard_grad_op);
    // LoRA on a bf16 base under FSDP: only the adapters are upcast, the base stays bf16.
    CHECK(read("model_name_or_path: gpt2\ndtype: bfloat16\nbf16: true\nuse_peft: true\nfsdp: full_shard\n").setup.precision ==
          Precision::bf16);
  }
  SUBCASE("GPU count from the trl CLI's num_processes; a TRL accelerate preset by name") {
    const LoadedConfig c = read("model_name_or_path: gpt2\naccelerate_config: fsdp2\n");
    CHECK(c.setup.parallel.fsdp == FsdpMode::full_shard);
    CHECK(c.setup.parallel.num_gpus == 8);
    CHECK(c.setup.precision == Precision::mixed_bf16);
  }
}

TEST_CASE("keys memplan cannot model are warnings naming the key and why; --strict refuses them") {
  FormatsEnv env;
  const std::pair<const char*, const char*> cases[] = {
      {"optim: galore_adamw\n",
       "bad.yaml:2:1: warning: optim: galore_adamw is not modelled yet: GaLore keeps low-rank projected states; the estimate "
       "counts AdamW's full states\nhint: memplan estimates without it; --strict refuses such configs"},
      {"optim: lomo\n",
       "bad.yaml:2:1: warning: optim: lomo is not modelled yet: LOMO fuses the update into backward and keeps no gradients or "
       "states; the estimate counts AdamW (an over-estimate)\nhint: memplan estimates without it; --strict refuses such configs"},
      {"use_peft: true\nuse_dora: true\n",
       "bad.yaml:3:1: warning: use_dora: true is not modelled yet: DoRA's magnitude vectors and extra activations are not "
       "counted; the estimate is plain LoRA\nhint: memplan estimates without it; --strict refuses such configs"},
      {"auto_find_batch_size: true\n",
       "bad.yaml:2:1: warning: auto_find_batch_size: true is not modelled yet: the Trainer halves the batch after an "
       "out-of-memory error; the estimate uses per_device_train_batch_size as given\nhint: memplan estimates without it; "
       "--strict refuses such configs"},
      {"attn_implementation: flex_attention\n",
       "bad.yaml:2:1: warning: attn_implementation: flex_attention is not modelled yet: the estimate counts SDPA's saved "
       "tensors for it\nhint: memplan estimates without it; --strict refuses such configs"},
      {"fsdp: full_shard\nfsdp_config:\n  offload_params: true\n",
       "bad.yaml:4:3: warning: fsdp_config.offload_params: true is not modelled yet: TrainingArguments does not read it (only "
       "the word offload in fsdp: offloads); the estimate keeps the parameters on the GPU\nhint: write fsdp: \"full_shard "
       "offload\" to offload"},
      {"fsdp: hybrid_shard_zero2\n",
       "bad.yaml:2:1: warning: fsdp: hybrid_shard_zero2 is not modelled yet: hybrid_shard_zero2 keeps gathered parameters "
       "until backward within a node; estimated as hybrid_shard\nhint: memplan estimates without it; --strict refuses such "
       "configs"},
      {"lora_r: 16\n",
       "bad.yaml:2:1: warning: lora_r is set but use_peft is not: TRL trains the whole model without adapters\nhint: add "
       "use_peft: true to train LoRA adapters (the estimate is a full fine-tune)"},
      {"fsdp_config:\n  version: 2\n",
       "bad.yaml:2:1: warning: fsdp_config is set but fsdp is not: the HF Trainer runs without FSDP\nhint: add fsdp: "
       "\"full_shard auto_wrap\" to shard with FSDP"},
      {"per_device_train_batchsize: 4\n",
       "bad.yaml:2:1: warning: unknown key 'per_device_train_batchsize'\nhint: did you mean 'per_device_train_batch_size'?"},
      {"deepspeed_config: ds.json\n",
       "bad.yaml:2:1: warning: unknown key 'deepspeed_config': memplan does not read it, and its name says it may change "
       "memory\nhint: check its spelling against TrainingArguments/TRL's documentation; the estimate is made without it"},
      {"train_batch_size: 64\n",
       "bad.yaml:2:1: warning: unknown key 'train_batch_size': memplan does not read it, and its name says it may change "
       "memory\nhint: check its spelling against TrainingArguments/TRL's documentation; the estimate is made without it"},
      // An inline ds_config: accelerate's key names are not DeepSpeed's, and DeepSpeed keys memplan
      // does not model are said.
      {"deepspeed:\n  zero_optimization:\n    stage: 2\n  zero_stage: 3\n",
       "bad.yaml:5:3: warning: 'zero_stage' is not a DeepSpeed config key, and its name says it may change memory\nhint: "
       "DeepSpeed ignores it; ZeRO settings go under zero_optimization (stage, offload_optimizer, offload_param)"},
      {"deepspeed:\n  zero_optimization:\n    stage: 2\n  activation_checkpointing:\n    cpu_checkpointing: true\n",
       "bad.yaml:5:3: warning: DeepSpeed's 'activation_checkpointing' changes memory and memplan does not model it\nhint: "
       "the estimate is made as if it were absent"},
      {"fsdp: \"full_shard auto_wrap\"\nfsdp_config:\n  fsdp_activation_checkpointng: true\n",
       "bad.yaml:4:3: warning: unknown key 'fsdp_config.fsdp_activation_checkpointng'\nhint: did you mean "
       "'fsdp_activation_checkpointing'?"},
  };
  for (const auto& [body, expected] : cases) {
    const auto& body_shown = body;  // clang 14 cannot capture a structured binding
    CAPTURE(body_shown);
    const std::vector<std::string> w = warnings_of(std::string("model_name_or_path: gpt2\n") + body, kBad);
    REQUIRE(w.size() == 1);
    CHECK(w[0] == kDir + expected);
  }
  const std::string strict = error_of([] {
    const LoadedConfig c = load_config_text("model_name_or_path: gpt2\noptim: grokadamw\n", kBad, kBad);
    SetupInputs in;
    in.strict = true;
    build_setup(in, c);
  });
  CHECK(strict == kBad + ":2:1: error: optim: grokadamw is not modelled yet: GrokAdamW keeps three states (m, v, a gradient "
                         "EMA); the estimate counts AdamW's two (--strict)\nhint: memplan estimates without it; --strict "
                         "refuses such configs");
}

TEST_CASE("bad input: file:line:col, the tool's rule and a hint") {
  FormatsEnv env;
  const std::string m = "model_name_or_path: gpt2\n";
  const std::pair<std::string, std::string> cases[] = {
      {m + "bf16: maybe\n",
       ":2:1: error: bf16 must be true or false (got 'maybe')\nhint: write true or false (HfArgumentParser passes JSON and YAML "
       "values as they are: a string is not a flag)"},
      {m + "deepspeed: missing_ds.json\n",
       ":2:1: error: deepspeed: 'missing_ds.json' does not exist\nhint: deepspeed names a DeepSpeed config JSON (the HF Trainer "
       "opens it relative to the working directory); memplan looks for it beside this file (" + kDir +
           "missing_ds.json) and in the working directory"},
      {m + "load_in_4bit: true\nlora_r: 16\n",
       ":2:1: error: load_in_4bit: true without use_peft: TRL quantizes the model and the HF Trainer refuses to train a purely "
       "quantized model\nhint: add use_peft: true (with lora_r and lora_target_modules) to train QLoRA adapters on the "
       "quantized model, or drop the quantization for a full fine-tune"},
      {m + "use_peft: true\nload_in_4bit: true\nload_in_8bit: true\n",
       ":4:1: error: load_in_4bit and load_in_8bit are both true\nhint: TRL's ModelConfig refuses both "
       "(trl/trainer/model_config.py @ v1.9.0 L173-175): keep one"},
      {m + "bf16: true\nfp16: true\n",
       ":3:1: error: bf16 and fp16 are both true\nhint: TrainingArguments refuses both (At most one of fp16 and bf16 can be "
       "True): keep one"},
      {m + "per_device_train_batch_size: 8\ndeepspeed:\n  train_micro_batch_size_per_gpu: 4\n  zero_optimization:\n    stage: 2\n",
       ":4:3: error: deepspeed.train_micro_batch_size_per_gpu is 4 in the DeepSpeed config but per_device_train_batch_size is "
       "8\nhint: the HF Trainer refuses DeepSpeed values that differ from TrainingArguments (transformers "
       "src/transformers/integrations/deepspeed.py @ v4.46+ HfTrainerDeepSpeedConfig.trainer_config_process (fill_match: "
       "\"auto\" takes the TrainingArguments value)); write \"auto\" or the same value"},
      {m + "fsdp: full_shard shard_grad_op\n",
       ":2:1: error: fsdp: full_shard is not compatible with shard_grad_op\nhint: name one sharding strategy (transformers "
       "src/transformers/training_args.py @ fd798335 _process_fsdp_args)"},
      {m + "fsdp: offload\n",
       ":2:1: error: fsdp: offload needs a sharding strategy beside it\nhint: write \"full_shard offload\" or \"shard_grad_op "
       "offload\" (TrainingArguments refuses offload alone)"},
      {m + "fsdp: full_shard sharded\n",
       ":2:1: error: unknown fsdp option 'sharded'\nhint: TrainingArguments.fsdp takes full_shard, shard_grad_op, no_shard, "
       "hybrid_shard, hybrid_shard_zero2, offload and auto_wrap (e.g. \"full_shard auto_wrap\")"},
      {m + "optim: adamw_torch_fusd\n", ":2:1: error: unknown optimizer 'adamw_torch_fusd'\nhint: did you mean adamw_torch_fused, adamw_torch?"},
      {m + "use_peft: true\nfsdp: full_shard\nfsdp_config:\n  activation_checkpointing: true\n",
       ":5:3: error: fsdp_config.activation_checkpointing and gradient_checkpointing are both true\nhint: the HF Trainer "
       "refuses both, and TRL turns gradient_checkpointing on by default: add gradient_checkpointing: false"},
      {m + "attn_implementation: flash\n",
       ":2:1: error: unknown attn_implementation 'flash'\nhint: transformers accepts eager, sdpa, flash_attention_2, "
       "flash_attention_3, flex_attention or a hub kernel (kernels-community/flash-attn)"},
      {m + "per_device_train_batch_size: 0\n",
       ":2:1: error: per_device_train_batch_size must be a positive integer (got '0')\nhint: per_device_train_batch_size is "
       "the number of sequences per GPU per forward"},
  };
  for (const auto& [text, expected] : cases) {
    const auto& text_shown = text;  // clang 14 cannot capture a structured binding
    CAPTURE(text_shown);
    CHECK(load_error(text, kBad) == kBad + expected);
  }
  // JSON: HfArgumentParser.parse_json_file converts nothing, so a quoted "true" is not a flag.
  const std::string json = kDir + "bad.json";
  CHECK(load_error("{\"model_name_or_path\": \"gpt2\",\n \"bf16\": \"true\"}", json) ==
        json + ":2:2: error: bf16 must be true or false (got 'true', a quoted string)\nhint: write true or false "
               "(HfArgumentParser passes JSON and YAML values as they are: a string is not a flag)");
  // A model the file names but memplan cannot resolve waits for --model.
  const std::string offline = "model_name_or_path: some-org/unknown-model\nper_device_train_batch_size: 2\n";
  CHECK(contains(build_error(offline, kBad), "'some-org/unknown-model' is not in the Hugging Face cache"));
  CHECK(build_error(offline, kBad, "gpt2").empty());
}

TEST_CASE("a DeepSpeed dict inside TrainingArguments carries contiguous_gradients and its unmodelled-key warnings") {
  FormatsEnv env;
  const LoadedConfig c = load_config_text(
      "model_name_or_path: gpt2\nper_device_train_batch_size: 2\ndeepspeed:\n  zero_optimization:\n    stage: 2\n"
      "    contiguous_gradients: false\n    zero_quantized_gradients: true\n",
      kBad, kBad);
  CHECK(c.setup.parallel.zero_stage == 2);
  CHECK_FALSE(c.setup.parallel.contiguous_gradients);
  bool warned = false;
  for (const auto& w : c.warnings) warned = warned || w.message.find("zero_optimization.zero_quantized_gradients") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("no load dtype in the file: fp32 weights under autocast with transformers 4.x, the checkpoint's bf16 with 5.x") {
  FormatsEnv env;
  const BuiltSetup v4 = built("hf-trl/09-run-clm-bf16-qwen.json", [](SetupInputs& in) { in.version_flag(Version::transformers) = "4.57"; });
  CHECK(v4.setup.model.checkpoint_dtype == "bfloat16");
  CHECK(v4.setup.precision == Precision::amp_bf16);
  CHECK(contains(set_at(v4.origin, "precision"), "transformers 4.x from_pretrained loads fp32 without dtype"));
  const BuiltSetup v5 = built("hf-trl/09-run-clm-bf16-qwen.json", [](SetupInputs& in) { in.version_flag(Version::transformers) = "5.0"; });
  CHECK(v5.setup.precision == Precision::bf16);
  CHECK(contains(set_at(v5.origin, "precision"), "from_pretrained's dtype=\"auto\" loads the checkpoint's bfloat16"));
  CHECK(contains(set_at(v5.origin, "precision"), "torch_dtype: float32 in the file (or --precision amp-bf16)"));
  // 16-bit weights, gradients and AdamW states: less memory than fp32 weights under autocast.
  CHECK(estimate(v5.setup).peak_bytes() < estimate(v4.setup).peak_bytes());
  // --precision decides instead.
  const BuiltSetup asked = built("hf-trl/09-run-clm-bf16-qwen.json", [](SetupInputs& in) {
    in.version_flag(Version::transformers) = "5.0";
    in.choice_flag(Choice::precision) = "amp-bf16";
  });
  CHECK(asked.setup.precision == Precision::amp_bf16);
  // A checkpoint config without a dtype (GPT-2's) stays fp32, and says so.
  const BuiltSetup gpt2 = built("hf-trl/08-run-clm-defaults.json", [](SetupInputs& in) { in.version_flag(Version::transformers) = "5.0"; });
  CHECK(gpt2.setup.model.checkpoint_dtype.empty());
  CHECK(gpt2.setup.precision == Precision::fp32);
  CHECK(contains(default_of(gpt2.origin, "precision"), "not stated in the model's config.json: fp32 assumed"));
}
