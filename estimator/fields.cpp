// The switch registry's rows (fields.h). The path of each row is the spelling of its member, so
// the path and the member it reads cannot disagree.
#include "estimator/fields.h"

#include "estimator/error.h"

#include <cctype>
#include <string>
#include <utility>

namespace memplan {

namespace {

// One row: the path is the member's own spelling (runtime.liger reads and writes s.runtime.liger).
#define MEMPLAN_SWITCH(id, member, flag, help, aliases, default_source, shown, in_effect)                              \
  SwitchField {                                                                                                        \
    Switch::id, #member, flag, help, aliases, [](const TrainingSetup& s) { return s.member; },                       \
        [](TrainingSetup& s, bool v) { s.member = v; }, default_source, shown, in_effect                              \
  }

using Aliases = std::array<const char*, 3>;
constexpr Aliases kNone = {nullptr, nullptr, nullptr};

std::array<SwitchField, kSwitchCount> make_rows() {
  return {{
      MEMPLAN_SWITCH(loss_upcast, runtime.loss_upcast, "--loss-upcast",
                     "the loss upcasts the logits to fp32 first (HF's ForCausalLMLoss; off: cross-entropy in their dtype)",
                     (Aliases{"logits_upcast", nullptr, nullptr}),
                     "transformers >= 4.46 ForCausalLMLoss: logits.float() (src/transformers/loss/loss_utils.py @ v4.46.0)",
                     nullptr, nullptr),
      MEMPLAN_SWITCH(keep_logits, runtime.keep_logits, "--keep-logits",
                     "the loop keeps the logits until the next forward (custom loops, LitGPT)", kNone,
                     "the HF Trainer's compute_loss drops the model's outputs before backward", "keeps logits", nullptr),
      MEMPLAN_SWITCH(keep_cache, runtime.keep_cache, "--keep-cache",
                     "the loop keeps the returned KV cache too (use_cache=True)", kNone,
                     "training loops run with use_cache=False or drop the outputs", "keeps KV cache", nullptr),
      MEMPLAN_SWITCH(zero_grad_set_to_none, runtime.zero_grad_set_to_none, "--zero-grad-set-to-none",
                     "zero_grad(set_to_none=True) frees the gradients between steps (off: they stay allocated; the "
                     "default follows --torch-version)",
                     (Aliases{"set_to_none", nullptr, nullptr}),
                     "torch >= 2.0 Optimizer.zero_grad(set_to_none=True) (torch/optim/optimizer.py @ v2.0.0); False before",
                     nullptr, nullptr),
      MEMPLAN_SWITCH(zero_grad_after_forward, runtime.zero_grad_after_forward, "--zero-grad-after-forward",
                     "the last step's gradients live through the next forward (Lightning's order)", kNone,
                     "zero_grad before the forward (the HF Trainer, torchtune)", "zero_grad after forward", nullptr),
      MEMPLAN_SWITCH(liger, runtime.liger, "--liger", "Liger kernels: fused RMSNorm, SwiGLU, RoPE (and fused-linear loss)",
                     kNone, "off unless the config turns it on (use_liger_kernel, liger_kernel)", "Liger kernels", nullptr),
      MEMPLAN_SWITCH(optimizer_in_backward, runtime.optimizer_in_backward, "--optimizer-in-backward",
                     "step each parameter in backward and free its gradient (torchtune optimizer_in_bwd)",
                     (Aliases{"optimizer_in_bwd", nullptr, nullptr}), "torchtune's optimizer_in_bwd defaults to False",
                     "optimizer in backward", nullptr),
      MEMPLAN_SWITCH(activation_offload, runtime.activation_offload, "--activation-offload",
                     "saved activations go to pinned host memory", (Aliases{"offload_activations", nullptr, nullptr}),
                     "torchtune's enable_activation_offloading defaults to False", "activation offload", nullptr),
      MEMPLAN_SWITCH(compile, runtime.compile, "--compile", "torch.compile per block (default partitioner; approximated)",
                     kNone, "eager unless the config compiles", "torch.compile", nullptr),
      MEMPLAN_SWITCH(compile_loss, runtime.compile_loss, "--compile-loss",
                     "the loss compiled too: 16-bit logits and a logsumexp saved, not fp32 log-probabilities (default: "
                     "with --compile under torchtune, torchtitan and the HF Trainer)",
                     kNone, "the framework's rule (estimator/runtime.cpp); off without compile", "compiled loss", nullptr),
      MEMPLAN_SWITCH(fsdp_no_sync, runtime.fsdp_no_sync, "--fsdp-no-sync",
                     "FSDP1 no_sync() on accumulating micro-steps: whole unsharded gradients kept (default: LitGPT)",
                     (Aliases{"no_sync", nullptr, nullptr}), "the framework's rule (estimator/runtime.cpp); off outside LitGPT",
                     "FSDP no_sync under accumulation",
                     [](const TrainingSetup& s) { return s.parallel.fsdp != FsdpMode::none && s.batch.grad_accum > 1; }),
      MEMPLAN_SWITCH(fp8, runtime.fp8, "--fp8", "float8 linears (torchao Float8Linear / Transformer Engine)", kNone,
                     "off unless the config asks for float8 training", "fp8 linears", nullptr),
      MEMPLAN_SWITCH(fp8_recompute_weight, runtime.fp8_recompute_weight, "--fp8-recompute-weight",
                     "float8: the weight cast again in backward, not saved (force_recompute_fp8_weight_in_bwd)",
                     (Aliases{"force_recompute_fp8_weight_in_bwd", nullptr, nullptr}),
                     "torchao Float8LinearConfig.force_recompute_fp8_weight_in_bwd defaults to False",
                     "fp8 weight recomputed in backward", [](const TrainingSetup& s) { return s.runtime.fp8; }),
      MEMPLAN_SWITCH(expandable_segments, runtime.expandable_segments, "--expandable-segments",
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (less fragmentation)", kNone,
                     "PyTorch's caching allocator: expandable_segments False by default (c10/cuda/CUDAAllocatorConfig.h)",
                     "expandable segments", nullptr),
      MEMPLAN_SWITCH(double_quant, finetune.double_quant, "--double-quant",
                     "QLoRA: quantize the NF4 block scales too (default on)",
                     (Aliases{"bnb_4bit_use_double_quant", "use_double_quant", nullptr}),
                     "the QLoRA recipe: qlora.py's --double_quant defaults to True (artidoro/qlora)",
                     nullptr, nullptr),
      MEMPLAN_SWITCH(sequence_parallel, parallel.sequence_parallel, "--sequence-parallel",
                     "with tensor parallelism: the norms' and residuals' activations sharded over the sequence (Megatron "
                     "--sequence-parallel; torchtitan's default)",
                     kNone, "Megatron's --sequence-parallel defaults to off", nullptr, nullptr),
      MEMPLAN_SWITCH(reference_model, runtime.reference_model, "--reference-model",
                     "a frozen reference model beside the policy (TRL's DPO without PEFT or precomputed log-probs): its "
                     "weights the whole step, its no-grad forward after the policy's",
                     (Aliases{"ref_model", nullptr, nullptr}),
                     "no reference model unless a preference trainer's config makes one (TRL DPOConfig: "
                     "trl/trainer/dpo_trainer.py @ v1.9.0 L893-908)",
                     "reference model", nullptr),
  }};
}

#undef MEMPLAN_SWITCH

}  // namespace

namespace {

// One count row: the path is the member's own spelling (batch.micro_batch reads s.batch.micro_batch).
#define MEMPLAN_COUNT(id, member, flag, help, group, section, keys, read, words, default_source, shown)                \
  CountField {                                                                                                         \
    Count::id, #member, flag, help, group, section, keys, CountRead::read, words,                                      \
        [](const TrainingSetup& s) -> int64_t { return s.member; },                                                   \
        [](TrainingSetup& s, int64_t v) { s.member = static_cast<decltype(s.member)>(v); },                          \
        default_source, shown                                                                                          \
  }

using Keys = std::array<const char*, 5>;

std::array<CountField, kCountCount> make_count_rows() {
  return {{
      MEMPLAN_COUNT(num_gpus, parallel.num_gpus, "--gpus", "number of GPUs (data-parallel world size)", nullptr, "hardware",
                    (Keys{"num_gpus", "gpus", nullptr, nullptr, nullptr}), whole, "GPUs",
                    "one GPU unless the config or --gpus says more", nullptr),
      MEMPLAN_COUNT(micro_batch, batch.micro_batch, "--micro-batch", "sequences per GPU per forward", nullptr, "training",
                    (Keys{"micro_batch_size", "batch_size", "per_device_train_batch_size", "train_micro_batch_size_per_gpu",
                          nullptr}),
                    whole, "micro-batch", "memplan: one sequence per forward unless the config or --micro-batch says", nullptr),
      MEMPLAN_COUNT(seq_len, batch.seq_len, "--seq-len", "tokens per sequence", nullptr, "data",
                    (Keys{"seq_len", "max_seq_len", "max_seq_length", "max_length", "seq_length"}), whole, "sequence length",
                    "memplan: 512 tokens, or the model's position table when that is shorter", nullptr),
      MEMPLAN_COUNT(grad_accum, batch.grad_accum, "--grad-accum", "micro-batches per optimizer step", nullptr, "training",
                    (Keys{"gradient_accumulation_steps", "grad_accum", nullptr, nullptr, nullptr}), whole, "accumulation",
                    "HF TrainingArguments.gradient_accumulation_steps defaults to 1 (src/transformers/training_args.py)",
                    nullptr),
      MEMPLAN_COUNT(tensor_parallel, parallel.tensor_parallel, "--tensor-parallel", "tensor-parallel degree", nullptr, "training",
                    (Keys{"tensor_parallel", "tensor_parallel_size", nullptr, nullptr, nullptr}), whole, "tensor parallel",
                    "Megatron's --tensor-model-parallel-size defaults to 1 (megatron/training/arguments.py)", nullptr),
      MEMPLAN_COUNT(pipeline_parallel, parallel.pipeline_parallel, "--pipeline-parallel", "pipeline stages", nullptr, "training",
                    (Keys{"pipeline_parallel", "pipeline_parallel_size", nullptr, nullptr, nullptr}), whole, "pipeline stages",
                    "Megatron's --pipeline-model-parallel-size defaults to 1 (megatron/training/arguments.py)", nullptr),
      MEMPLAN_COUNT(expert_parallel, parallel.expert_parallel, "--expert-parallel",
                    "expert-parallel degree: each rank holds 1/N of a MoE model's routed experts", nullptr, "training",
                    (Keys{"expert_parallel", "expert_parallel_size", nullptr, nullptr, nullptr}), whole, "expert parallel",
                    "Megatron's --expert-model-parallel-size defaults to 1 (megatron/training/arguments.py)", nullptr),
      // Its flag stands before --offload (api/flags.cpp); the deepspeed: section reads it too
      // (zero_stage, stage), and a writer states it where its format holds DeepSpeed's settings.
      MEMPLAN_COUNT(zero_stage, parallel.zero_stage, "--zero", "DeepSpeed ZeRO stage 0-3", nullptr, "training",
                    (Keys{"zero_stage", nullptr, nullptr, nullptr, nullptr}), stage, "ZeRO stage",
                    "no ZeRO (stage 0) unless the config's DeepSpeed section or --zero says", nullptr),
      MEMPLAN_COUNT(gpus_per_node, parallel.gpus_per_node, "--gpus-per-node",
                    "GPUs per node (hybrid sharding, host memory per node; default 8)", "Runtime", "hardware",
                    (Keys{"gpus_per_node", nullptr, nullptr, nullptr, nullptr}), whole, "GPUs per node",
                    "memplan: 8 GPUs per node (an HGX/DGX node; torchrun --nproc-per-node is the user's)", nullptr),
      MEMPLAN_COUNT(lora_rank, finetune.lora_rank, "--lora-rank", "LoRA rank r (default 8)", nullptr, "finetune",
                    (Keys{"r", "rank", "lora_rank", "lora_r", nullptr}), at_least_one, "LoRA rank",
                    "PEFT LoraConfig.r defaults to 8 (src/peft/tuners/lora/config.py)",
                    [](const TrainingSetup& s) { return s.finetune.mode != FinetuneMode::full; }),
      MEMPLAN_COUNT(freeze_layers, finetune.freeze_layers, "--freeze-layers", "full fine-tuning with the first N layers frozen",
                    nullptr, "finetune", (Keys{"freeze_layers", nullptr, nullptr, nullptr, nullptr}), integer, "frozen layers",
                    "full fine-tuning trains every layer", [](const TrainingSetup& s) { return s.finetune.freeze_layers > 0; }),
  }};
}

#undef MEMPLAN_COUNT

}  // namespace


namespace {

// One choice row: the path is the member's spelling; `parse` and `to_string` are the setup's own.
#define MEMPLAN_CHOICE(id, member, flag, type_name, help, what, section, key, read, parse, names, instances, default_source) \
  ChoiceField {                                                                                                        \
    Choice::id, #member, flag, type_name, help, what, section, key, ChoiceRead::read, names, instances, nullptr,         \
        [](const TrainingSetup& s) { return std::string(to_string(s.member)); },                                      \
        [](TrainingSetup& s, const std::string& v) {                                                                   \
          const auto p = parse(v);                                                                                     \
          if (p) s.member = *p;                                                                                        \
          return p.has_value();                                                                                        \
        },                                                                                                             \
        default_source, nullptr                                                                                        \
  }

bool with_adapters(const TrainingSetup& s) { return s.finetune.mode != FinetuneMode::full; }

std::string lower(std::string v) {
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

using Instances = std::array<const char*, 2>;
constexpr Instances kNoInstances = {nullptr, nullptr};

std::array<ChoiceField, kChoiceCount> make_choice_rows() {
  return {{
      MEMPLAN_CHOICE(precision, precision, "--precision", "P", "fp32|amp-fp16|amp-bf16|bf16|fp16|mixed-fp16|mixed-bf16",
                     "precision", "training", "precision", handlers, parse_precision, precision_names, kNoInstances,
                     "fp32 (PyTorch's default dtype) unless the config or --precision says; fine-tuning without one gets its "
                     "recipe: bf16, or amp-bf16 over a quantized base (profiles/build.cpp)"),
      MEMPLAN_CHOICE(optimizer, optimizer, "--optimizer", "O",
                     "adamw|adam|sgd|sgd-momentum|adafactor|adafactor-momentum|adamw-8bit|lion|paged-adamw|paged-adamw-8bit",
                     "optimizer", "training", "optimizer", handlers, parse_optimizer, optimizer_names, kNoInstances,
                     "AdamW: HF TrainingArguments.optim defaults to adamw_torch (src/transformers/training_args.py)"),
      MEMPLAN_CHOICE(checkpointing, checkpointing, "--checkpointing", "MODE",
                     "none|full|selective|selective-op|every:K|layers:I,J,...", "checkpointing", "training", "gradient_checkpointing",
                     handlers, parse_checkpointing, checkpointing_names, (Instances{"every:2", "every:4"}),
                     "none: HF TrainingArguments.gradient_checkpointing defaults to False; QLoRA's recipe turns it on "
                     "(PEFT prepare_model_for_kbit_training)"),
      MEMPLAN_CHOICE(attention, attention, "--attention", "IMPL", "eager|sdpa|flash", "attention", "training", "attention",
                     handlers, parse_attention, attention_names, kNoInstances,
                     "the framework's rule (estimator/runtime.cpp): SDPA with torch >= 2.1.1 for HF models, eager before"),
      MEMPLAN_CHOICE(offload, parallel.offload, "--offload", "WHAT",
                     "none|optimizer|optimizer+params|params (params: DeepSpeed ZeRO-3 offload_param alone)", "offload",
                     "training", "offload", handlers, parse_offload, offload_names, kNoInstances,
                     "nothing offloaded unless the config's DeepSpeed or FSDP section (or --offload) says"),
      // The method decides the base's quantization too: QLoRA loads it in NF4 (a LoRA on an 8-bit
      // base is a config's load_in_8bit, not a name).
      ChoiceField{Choice::finetune, "finetune.mode", "--finetune", "MODE", "full|lora|qlora", "fine-tuning method", "finetune",
                  "method", ChoiceRead::handlers, finetune_names, kNoInstances, nullptr, [](const TrainingSetup& s) { return std::string(to_string(s.finetune.mode)); },
                  [](TrainingSetup& s, const std::string& v) {
                    const auto p = parse_finetune(v);
                    if (!p) return false;
                    s.finetune.mode = *p;
                    s.finetune.base_quant = *p == FinetuneMode::qlora ? BaseQuant::nf4 : BaseQuant::none;
                    return true;
                  },
                  "full fine-tuning unless the config names adapters (a peft:/lora: section, an adapter key) or --finetune says",
                  nullptr},
      // The adapters' dtype: fp32 (PEFT upcasts them) or the model's own (torchtune, LitGPT). A
      // file's value is read in any case (FP32, BF16).
      ChoiceField{Choice::adapter_dtype, "finetune.adapter_dtype", "--adapter-dtype", "DTYPE",
                  "fp32|model: LoRA adapters in fp32 (PEFT) or the model's dtype (torchtune, LitGPT: their default)",
                  "adapter dtype", "finetune", "adapter_dtype", ChoiceRead::key, adapter_dtype_names, kNoInstances,
                  "expected fp32 (PEFT's upcast adapters) or model (the model's dtype: torchtune, LitGPT)",
                  [](const TrainingSetup& s) { return std::string(s.finetune.adapter_fp32 ? "fp32" : "model"); },
                  [](TrainingSetup& s, const std::string& v) {
                    const auto p = parse_adapter_fp32(lower(v));
                    if (p) s.finetune.adapter_fp32 = *p;
                    return p.has_value();
                  },
                  "fp32: PEFT's autocast_adapter_dtype=True upcasts 16-bit adapters (src/peft/tuners/tuners_utils.py "
                  "_cast_adapter_dtype, PEFT 0.21); torchtune and LitGPT keep the model's dtype (their framework defaults, "
                  "estimator/runtime.cpp)",
                  with_adapters},
      MEMPLAN_CHOICE(framework, runtime.framework, "--framework", "NAME",
                     "hf-trainer (default)|custom|lightning|torchtune|torchtitan|litgpt|deepspeed|megatron: the stack that runs "
                     "the step; sets the runtime defaults below",
                     "framework", "runtime", "framework", key, parse_framework, framework_names, kNoInstances,
                     "the HF Trainer unless the config's format or --framework says otherwise"),
      MEMPLAN_CHOICE(optimizer_impl, runtime.optimizer_impl, "--optimizer-impl", "IMPL",
                     "auto|for-loop|foreach|fused: the optimizer kernel", "optimizer implementation", "runtime", "optimizer_impl",
                     key, parse_optimizer_impl, optimizer_impl_names, kNoInstances,
                     "auto: DeepSpeed's FusedAdam under its mixed precision, else PyTorch's default for the device: foreach "
                     "on CUDA with torch >= 2.0, for-loop otherwise (torch/optim/optimizer.py _default_to_fused_or_foreach)"),
      MEMPLAN_CHOICE(fsdp, parallel.fsdp, "--fsdp", "MODE", "none|full|shard-grad-op|hybrid|no-shard: PyTorch FSDP sharding",
                     "FSDP sharding", "runtime", "fsdp", key, parse_fsdp, fsdp_names, kNoInstances, "no FSDP unless the config wraps the model in it"),
      // The loss: its chunking rides with the name (chunked:8, chunked:4096t).
      ChoiceField{Choice::loss, "runtime.loss", "--loss", "IMPL",
                  "standard|chunked[:N]|chunked:Nt|fused-linear|vocab-parallel: how the loss is computed", "loss", "runtime", "loss",
                  ChoiceRead::key, loss_names, (Instances{"chunked:8", "chunked:4096t"}),
                  "expected one of: standard, chunked (8 chunks), chunked:N (N >= 1 chunks), chunked:Nt (chunks of N tokens), "
                  "fused-linear, vocab-parallel",
                  [](const TrainingSetup& s) { return to_string(s.runtime, s.runtime.loss); },
                  [](TrainingSetup& s, const std::string& v) { return parse_loss(v, &s.runtime); },
                  "standard: the full logits and cross-entropy, unless the framework's rule (estimator/runtime.cpp), Liger "
                  "(fused-linear) or the config says",
                  nullptr},
  }};
}

#undef MEMPLAN_CHOICE

// One number row: the path is the member's own spelling (finetune.lora_alpha reads s.finetune.lora_alpha).
#define MEMPLAN_NUMBER(id, member, flag, type_name, help, section, keys, read, default_source, shown)                 \
  NumberField {                                                                                                        \
    Number::id, #member, flag, type_name, help, section, keys, NumberRead::read,                                       \
        [](const TrainingSetup& s) { return s.member; }, [](TrainingSetup& s, double v) { s.member = v; },             \
        default_source, shown                                                                                          \
  }

std::array<NumberField, kNumberCount> make_number_rows() {
  using Keys = std::array<const char*, 2>;
  // The thresholds' defaults: estimator/setup.h Thresholds (a fit is judged at 90% of the card).
  constexpr const char* kThresholds = "memplan's thresholds (estimator/setup.h Thresholds) unless the config's memory: says";
  return {{
      MEMPLAN_NUMBER(lora_alpha, finetune.lora_alpha, "--lora-alpha", "A", "LoRA alpha", "finetune",
                     (Keys{"lora_alpha", "alpha"}), number, "PEFT LoraConfig.lora_alpha defaults to 8 (src/peft/tuners/lora/config.py)",
                     with_adapters),
      MEMPLAN_NUMBER(lora_dropout, finetune.lora_dropout, "--lora-dropout", "P", "LoRA dropout on the adapters' input (default 0)",
                     "finetune", (Keys{"lora_dropout", "dropout"}), number,
                     "PEFT LoraConfig.lora_dropout defaults to 0.0 (src/peft/tuners/lora/config.py)", with_adapters),
      MEMPLAN_NUMBER(target, thresholds.target, nullptr, nullptr, "the share of the card a fit may use (the verdict's target)", "memory",
                     (Keys{"target_utilization", nullptr}), fraction, kThresholds, nullptr),
      MEMPLAN_NUMBER(warning, thresholds.warning, nullptr, nullptr, "the share of the card where the memory band turns warning", "memory",
                     (Keys{"warning_threshold", nullptr}), fraction, kThresholds, nullptr),
      MEMPLAN_NUMBER(critical, thresholds.critical, nullptr, nullptr, "the share of the card where the band turns critical",
                     "memory", (Keys{"critical_threshold", nullptr}), fraction, kThresholds, nullptr),
      MEMPLAN_NUMBER(emergency, thresholds.emergency, nullptr, nullptr, "the share of the card where the band turns emergency",
                     "memory", (Keys{"emergency_threshold", nullptr}), fraction, kThresholds, nullptr),
  }};
}

#undef MEMPLAN_NUMBER

std::array<ListField, kListCount> make_list_rows() {
  return {{
      ListField{List::lora_targets, "finetune.lora_targets", "--lora-targets", "LIST", "q,k,v,o,gate,up,down or all-linear",
                "LoRA targets", "finetune", {"target_modules", "lora_target_modules"},
                [](const TrainingSetup& s) { return s.finetune.lora_targets; },
                [](TrainingSetup& s, std::vector<std::string> v) { s.finetune.lora_targets = std::move(v); },
                "empty: PEFT's default for the model (q and v projections: LoraConfig.target_modules=None and "
                "TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, src/peft/utils/constants.py), unless the config or "
                "--lora-targets says",
                with_adapters},
  }};
}

std::array<SizeField, kSizeCount> make_size_rows() {
  return {{
      {Size::gpu_memory, "hardware.gpu_memory", "--gpu-memory", "SIZE", "device memory, e.g. 12GiB (overrides the preset's)",
       "gpu_memory", false, "the card's memory", "the GPU preset's memory (profiles/gpus.yaml), unless the config or --gpu-memory says"},
      {Size::allocator_cap, "hardware.allocator_cap", "--allocator-cap", "SIZE|FRACTION",
       "torch.cuda.set_per_process_memory_fraction: the most the caching allocator may hold, a size (11GiB) or a fraction of "
       "the card (0.5); verdicts hold the step to it",
       "allocator_cap", true, "the most the caching allocator may hold",
       "no cap: PyTorch's caching allocator may take the whole card unless set_per_process_memory_fraction is called"},
      {Size::host_memory, "parallel.host_memory_bytes", "--host-memory", "SIZE",
       "host RAM of one node, e.g. 512GiB (default: this machine's RAM with --device cpu, else unknown): offload plans are "
       "checked against it",
       "host_memory", false, "the RAM of one node",
       "unknown (offload plans then say how much they need), or this machine's RAM with --device cpu"},
  }};
}

std::array<TargetField, kTargetCount> make_target_rows() {
  return {{
      {Target::gpu, "hardware.gpu", "--gpu", "PRESET", "GPU preset (memplan gpus)", "gpu",
       "none: a verdict needs the card (--gpu PRESET or --gpu-memory SIZE); the overheads are a generic CUDA card's"},
      {Target::device, "device", "--device", "cpu|cuda", "cuda (default) or cpu: whose memory behaviour to model", "device",
       "cuda: PyTorch's CUDA caching allocator"},
      {Target::calibration, "calibration", "--calibration", "FILE", "calibration profile from memplan calibrate", nullptr,
       "none: the analytic model as derived, no measured corrections"},
  }};
}

// A setting that is a whole number or a yes/no member of TrainingSetup (`member`: its expression
// from the setup, "parallel.overlap_comm"), or a place (no member).
#define MEMPLAN_WHOLE(id, path, member, section, keys, lo, hi, hint, default_source)                                 \
  SettingField {                                                                                                       \
    Setting::id, path, SettingKind::whole, section, keys, [](TrainingSetup& s) -> int64_t& { return s.member; },       \
        nullptr, [](const TrainingSetup& s) -> int64_t { return s.member; }, lo, hi, hint, default_source              \
  }
#define MEMPLAN_YES_NO(id, path, member, section, keys, default_source)                                              \
  SettingField {                                                                                                       \
    Setting::id, path, SettingKind::yes_no, section, keys, nullptr, [](TrainingSetup& s) -> bool& { return s.member; }, \
        [](const TrainingSetup& s) -> int64_t { return s.member ? 1 : 0; }, 0, 1, nullptr, default_source             \
  }

std::array<SettingField, kSettingCount> make_setting_rows() {
  using Keys = std::array<const char*, 2>;
  constexpr const char* kZero = kZeroSection;
  constexpr const char* kZeroConfig = "DeepSpeed's default (DeepSpeedZeroConfig, deepspeed/runtime/zero/config.py @ v0.16.4)";
  constexpr const char* kBucketHint = "DeepSpeed bucket sizes count elements: 0 or more, e.g. 5e8";
  constexpr int64_t kTiB = int64_t{1} << 40;
  const Keys none{nullptr, nullptr};
  return {{
      MEMPLAN_WHOLE(reduce_bucket_elems, "parallel.reduce_bucket_elems", parallel.reduce_bucket_elems, kZero,
                    (Keys{"reduce_bucket_size", nullptr}), 0, 1'000'000'000'000, kBucketHint, kZeroConfig),
      MEMPLAN_WHOLE(allgather_bucket_elems, "parallel.allgather_bucket_elems", parallel.allgather_bucket_elems, kZero,
                    (Keys{"allgather_bucket_size", nullptr}), 0, 1'000'000'000'000, kBucketHint, kZeroConfig),
      // DeepSpeed accepts the short names as aliases (deepspeed/runtime/zero/config.py @ v0.16.4
      // L208-259, alias="stage3_..."); Axolotl's bundled configs use them.
      MEMPLAN_WHOLE(stage3_prefetch_bucket_elems, "parallel.stage3_prefetch_bucket_elems", parallel.stage3_prefetch_bucket_elems,
                    kZero, (Keys{"stage3_prefetch_bucket_size", "prefetch_bucket_size"}), 0, 1'000'000'000'000, kBucketHint,
                    kZeroConfig),
      MEMPLAN_WHOLE(stage3_max_live_parameters, "parallel.stage3_max_live_parameters", parallel.stage3_max_live_parameters,
                    kZero, (Keys{"stage3_max_live_parameters", "max_live_parameters"}), 0, 10'000'000'000'000, kBucketHint,
                    kZeroConfig),
      MEMPLAN_YES_NO(overlap_comm, "parallel.overlap_comm", parallel.overlap_comm, kZero, (Keys{"overlap_comm", nullptr}),
                     "off without DeepSpeed; a DeepSpeed config's default is on at stage 3 only (deepspeed/runtime/zero/"
                     "config.py @ v0.16.4 L134, L351-353), which its readers apply"),
      MEMPLAN_YES_NO(contiguous_gradients, "parallel.contiguous_gradients", parallel.contiguous_gradients, kZero,
                     (Keys{"contiguous_gradients", nullptr}), kZeroConfig),
      // Read by the offload_optimizer/offload_param sections' own handler (profiles/config.cpp).
      MEMPLAN_YES_NO(offload_pin_memory, "parallel.offload_pin_memory", parallel.offload_pin_memory, nullptr, none,
                     "DeepSpeed's default pin_memory false (DeepSpeedZeroOffloadOptimizerConfig, deepspeed/runtime/zero/"
                     "offload_config.py @ v0.16.4)"),
      // Read by the bf16:/fp16: sections' handler: bf16_master_weights_and_grads (fp16_...),
      // bf16_optimizer_states.
      MEMPLAN_YES_NO(half_master, "parallel.half_master", parallel.half_master, nullptr, none,
                     "DeepSpeed's default: fp32 master weights and gradients (bf16_master_weights_and_grads false, "
                     "deepspeed/runtime/precision_config.py @ v0.18.3)"),
      MEMPLAN_YES_NO(half_optimizer_states, "parallel.half_optimizer_states", parallel.half_optimizer_states, nullptr, none,
                     "DeepSpeed's default: fp32 optimizer states (bf16_optimizer_states false, deepspeed/runtime/"
                     "precision_config.py @ v0.18.3)"),
      // torch DDP's keyword; the Lightning and NeMo readers read it in their own places (a DDPStrategy's
      // init_args, NeMo's ddp:), a memplan YAML in training: (or at its top level).
      MEMPLAN_YES_NO(ddp_bucket_view, "parallel.ddp_bucket_view", parallel.ddp_bucket_view, "training",
                     (Keys{"gradient_as_bucket_view", nullptr}),
                     "torch DistributedDataParallel's default gradient_as_bucket_view=False (torch/nn/parallel/"
                     "distributed.py)"),
      // torch.distributed.optim.ZeroRedundancyOptimizer over DDP: ZeRO-1 as torch implements it
      // (optimizer states sharded per rank by parameter, gradients and DDP buckets whole), apart
      // from DeepSpeed's engine (zero_stage). The Lightning reader sets it from an optimizer
      // class_path; a memplan YAML in training:.
      MEMPLAN_YES_NO(zero_redundancy_optimizer, "parallel.zero_redundancy_optimizer", parallel.zero_redundancy_optimizer, "training",
                     (Keys{"zero_redundancy_optimizer", nullptr}),
                     "off: each DDP rank steps every parameter (torch.optim's optimizers)"),
      // One process wrapped in DDP all the same (its Reducer's buckets): the Lightning reader sets it
      // for an explicit ddp strategy; a memplan YAML in training:.
      MEMPLAN_YES_NO(ddp, "parallel.ddp", parallel.ddp, "training", (Keys{"ddp", nullptr}),
                     "DistributedDataParallel over several data-parallel ranks only: one process trains the bare model"),
      // accelerate's fsdp_config.fsdp_version, the HF Trainer's fsdp_config.version, Axolotl's
      // fsdp_version; a memplan YAML in training:.
      MEMPLAN_WHOLE(fsdp_version, "parallel.fsdp_version", parallel.fsdp_version, "training", (Keys{"fsdp_version", nullptr}), 0, 2,
                    "FSDP's version: 1 (FullyShardedDataParallel) or 2 (fully_shard); 0 for the framework's",
                    "the framework's: FSDP2 (fully_shard) under torchtune and torchtitan, FSDP1 (FullyShardedDataParallel, "
                    "accelerate's launch default fsdp_version 1) otherwise"),
      MEMPLAN_WHOLE(num_workers, "data.num_workers", data.num_workers, "data", (Keys{"num_workers", nullptr}), 0, 10'000,
                    "DataLoader workers: 0 or more",
                    "torch DataLoader's default num_workers=0: batches are loaded in the main process "
                    "(torch/utils/data/dataloader.py)"),
      MEMPLAN_WHOLE(prefetch_factor, "data.prefetch_factor", data.prefetch_factor, "data", (Keys{"prefetch_factor", nullptr}), 0,
                    10'000, "batches each DataLoader worker loads ahead: 0 or more (default 2)",
                    "torch DataLoader's default prefetch_factor=2 with workers (torch/utils/data/dataloader.py)"),
      MEMPLAN_YES_NO(pin_memory, "data.pin_memory", data.pin_memory, "data", (Keys{"pin_memory", nullptr}),
                     "torch DataLoader's default pin_memory=False (torch/utils/data/dataloader.py); the HF Trainer's "
                     "readers note its dataloader_pin_memory=True"),
      // The file's global batch (training.global_batch_size, DeepSpeed's train_batch_size, NeMo's and
      // torchtitan's), which the loaded config keeps: the rules resolve the accumulation from it.
      SettingField{Setting::global_batch, "batch.global_batch", SettingKind::place, nullptr, none, nullptr, nullptr, nullptr, 0,
                   0, nullptr, "micro-batch x accumulation x data-parallel ranks, unless the file states one"},
      // checkpointing: every:K (and NeMo's checkpoint_every) give K with the mode.
      MEMPLAN_WHOLE(every_k, "checkpointing.every_k", checkpointing.every_k, nullptr, none, 1, 1'000'000,
                    "checkpoint one layer in K: K is at least 1", "1: used only with checkpointing every:K"),
      // modules_to_save naming the head or the embeddings (PEFT).
      MEMPLAN_YES_NO(train_head, "finetune.train_head", finetune.train_head, nullptr, none,
                     "frozen under adapters unless modules_to_save names lm_head, score or classifier (PEFT)"),
      MEMPLAN_YES_NO(train_embeddings, "finetune.train_embeddings", finetune.train_embeddings, nullptr, none,
                     "frozen under adapters unless modules_to_save names embed_tokens, wte or embed_in (PEFT)"),
      // The card's overheads outside the tensors: from the GPU catalog's family or a calibration.
      MEMPLAN_WHOLE(cuda_context_bytes, "hardware.cuda_context_bytes", device.cuda_context_bytes, nullptr, none, 0, kTiB,
                    "the CUDA context's bytes: a few hundred MiB (memplan calibrate measures it)",
                    "the GPU family's in profiles/gpus.yaml (a generic CUDA card's without a preset), or a calibration's"),
      MEMPLAN_WHOLE(cublas_workspace_bytes, "hardware.cublas_workspace_bytes", device.cublas_workspace_bytes, nullptr, none, 0,
                    kTiB, "cuBLAS's workspace per handle: a few MiB",
                    "the GPU family's in profiles/gpus.yaml (a generic CUDA card's without a preset)"),
      // The memory: section, where the thresholds' order is one problem (the thresholds themselves
      // are numbers: thresholds.target, ...).
      SettingField{Setting::thresholds, "memory.target_utilization", SettingKind::place, nullptr, none, nullptr, nullptr, nullptr,
                   0, 0, nullptr, "the memory guides' bands 0.90, 0.92, 0.95, 0.97 (estimator/setup.h Thresholds)"},
  }};
}

#undef MEMPLAN_WHOLE
#undef MEMPLAN_YES_NO

// One version row: major and minor are Runtime members.
#define MEMPLAN_VERSION_ROW(id, major, minor, flag, help, library, keys, max_major, examples, hint, default_source)      \
  VersionField {                                                                                                       \
    Version::id, "runtime." #id "_version", flag, help, library, keys, max_major, examples, hint,                      \
        [](const TrainingSetup& s) { return std::make_pair(s.runtime.major, s.runtime.minor); },                      \
        [](TrainingSetup& s, int a, int b) {                                                                           \
          s.runtime.major = a;                                                                                         \
          s.runtime.minor = b;                                                                                         \
        },                                                                                                             \
        default_source                                                                                                 \
  }

std::array<VersionField, kVersionCount> make_version_rows() {
  using Keys = std::array<const char*, 2>;
  return {{
      MEMPLAN_VERSION_ROW(torch, torch_major, torch_minor, "--torch-version", "PyTorch release the job runs (default: the one python3 on PATH has installed, else 2.11)", "torch",
                          (Keys{"torch_version", "torch"}), 9, "2.11 or 1.13",
                          "the PyTorch release the job runs: python -c 'import torch; print(torch.__version__)'",
                          "memplan's default release, torch 2.11 (estimator/setup.h Runtime)"),
      MEMPLAN_VERSION_ROW(transformers, transformers_major, transformers_minor, "--transformers-version",
                          "transformers release the job runs (default: the one python3 on PATH has installed, else 5.17): its modelling code decides what is saved",
                          "transformers", (Keys{"transformers_version", "transformers"}), 0, "4.52 or 5.17",
                          "the transformers release the job runs: python -c 'import transformers; print(transformers.__version__)'",
                          "memplan's default release, transformers 5.17 (estimator/setup.h Runtime)"),
  }};
}

#undef MEMPLAN_VERSION_ROW

}  // namespace



// ---- the tables' accessors, one way for the three ---------------------------------------------

namespace {

// The rows `make` builds, checked once: row i has id i (the enumerators index the table).
template <class Row, size_t N>
std::array<Row, N> checked(std::array<Row, N> rows, const char* registry) {
  for (size_t i = 0; i < N; ++i)
    MEMPLAN_CHECK(static_cast<size_t>(rows[i].id) == i, std::string(registry) + " registry: row " + rows[i].path + " out of order");
  return rows;
}

template <class Row, size_t N, class Id>
const Row& row(const std::array<Row, N>& rows, Id id, const char* registry) {
  const size_t i = static_cast<size_t>(id);
  MEMPLAN_CHECK(i < N, std::string(registry) + " registry: no such row");
  return rows[i];
}

// A setup path's first part ("runtime" of "runtime.liger") and its last ("liger").
std::string head(const char* path) {
  const std::string p = path;
  return p.substr(0, p.find('.'));
}
std::string tail(const char* path) {
  const std::string p = path;
  return p.substr(p.rfind('.') + 1);
}

}  // namespace

const std::array<SwitchField, kSwitchCount>& switch_fields() {
  static const auto rows = checked(make_rows(), "switch");
  return rows;
}
const SwitchField& field(Switch id) { return row(switch_fields(), id, "switch"); }
std::string SwitchField::section() const { return head(path); }
std::string SwitchField::key() const { return tail(path); }

const std::array<CountField, kCountCount>& count_fields() {
  static const auto rows = checked(make_count_rows(), "count");
  return rows;
}
const CountField& field(Count id) { return row(count_fields(), id, "count"); }
std::string CountField::json_section() const { return head(path); }
std::string CountField::json_key() const { return tail(path); }

const CountField* count_at(const std::string& p) {
  for (const CountField& f : count_fields())
    if (p == f.path) return &f;
  return nullptr;
}

const std::array<ChoiceField, kChoiceCount>& choice_fields() {
  static const auto rows = checked(make_choice_rows(), "choice");
  return rows;
}
const ChoiceField& field(Choice id) { return row(choice_fields(), id, "choice"); }
std::vector<std::string> ChoiceField::samples() const {
  std::vector<std::string> v;
  for (const std::string& n : names())
    if (n.find(':') == std::string::npos) v.push_back(n);  // every:K, layers:I,J,... are forms
  for (const char* i : instances)
    if (i) v.emplace_back(i);
  return v;
}
std::string ChoiceField::refusal_hint() const {
  if (hint) return hint;
  std::string h = "expected one of: ";
  const std::vector<std::string> v = names();
  for (size_t i = 0; i < v.size(); ++i) h += (i ? ", " : "") + v[i];
  return h;
}
bool ChoiceField::runtime() const { return std::string(section) == "runtime"; }
std::string ChoiceField::json_section() const {
  return std::string(path).find('.') == std::string::npos ? "" : head(path);
}
std::string ChoiceField::json_key() const { return tail(path); }

const std::array<NumberField, kNumberCount>& number_fields() {
  static const auto rows = checked(make_number_rows(), "number");
  return rows;
}
const NumberField& field(Number id) { return row(number_fields(), id, "number"); }
std::string NumberField::json_section() const { return head(path); }
std::string NumberField::json_key() const { return tail(path); }

const std::array<ListField, kListCount>& list_fields() {
  static const auto rows = checked(make_list_rows(), "list");
  return rows;
}
const ListField& field(List id) { return row(list_fields(), id, "list"); }
std::string ListField::json_section() const { return head(path); }
std::string ListField::json_key() const { return tail(path); }

const std::array<SizeField, kSizeCount>& size_fields() {
  static const auto rows = checked(make_size_rows(), "size");
  return rows;
}
const SizeField& field(Size id) { return row(size_fields(), id, "size"); }

const std::array<TargetField, kTargetCount>& target_fields() {
  static const auto rows = checked(make_target_rows(), "target");
  return rows;
}
const TargetField& field(Target id) { return row(target_fields(), id, "target"); }

const std::array<SettingField, kSettingCount>& setting_fields() {
  static const auto rows = checked(make_setting_rows(), "setting");
  return rows;
}
const SettingField& field(Setting id) { return row(setting_fields(), id, "setting"); }
const char* key(Setting id) {
  const SettingField& f = field(id);
  MEMPLAN_CHECK(f.keys[0] != nullptr, std::string("setting registry: ") + f.path + " has no key (read by handlers)");
  return f.keys[0];
}

const std::array<VersionField, kVersionCount>& version_fields() {
  static const auto rows = checked(make_version_rows(), "version");
  return rows;
}
const VersionField& field(Version id) { return row(version_fields(), id, "version"); }
std::string VersionField::json_key() const { return tail(path); }
std::string VersionField::text(const TrainingSetup& s) const {
  const auto [major, minor] = get(s);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string SwitchField::negation() const { return std::string("--no-") + (flag + 2); }

}  // namespace memplan
