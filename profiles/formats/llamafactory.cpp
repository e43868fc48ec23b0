// LLaMA-Factory YAML (llamafactory-cli train FILE, LLaMA-Factory v0.9.5): one flat namespace that
// HfArgumentParser fills into ModelArguments, DataArguments, Seq2SeqTrainingArguments,
// FinetuningArguments and GeneratingArguments (src/llamafactory/hparams/*.py). The HF Trainer runs
// the step; LLaMA-Factory decides what it loads: the checkpoint's own dtype (from_pretrained with
// torch_dtype="auto", model/loader.py L155), then the trainable parameters upcast to fp32 unless
// pure_bf16 or ZeRO-3 (model/adapter.py init_adapter L313-325), LoRA on every linear layer by
// default, gradient checkpointing on unless disabled (model/model_utils/checkpointing.py
// prepare_model_for_training L164-178). The GPU count is the launcher's (FORCE_TORCHRUN, torchrun).
#include <fmt/format.h>

#include "profiles/formats/hf_family.h"

namespace memplan::profiles::detail {
namespace {
using namespace hf;

constexpr const char* kVersion = "LLaMA-Factory v0.9.5 (7af90952)";
constexpr const char* kFinetuningArgs = "src/llamafactory/hparams/finetuning_args.py @ v0.9.5";
constexpr const char* kModelArgs = "src/llamafactory/hparams/model_args.py @ v0.9.5";
constexpr const char* kDataArgs = "src/llamafactory/hparams/data_args.py @ v0.9.5";
constexpr const char* kAdapter = "src/llamafactory/model/adapter.py @ v0.9.5 init_adapter L313-325";

bool yes(const Node& n) { return flag(n, kHfArgsBoolHint); }

// The keys of the five dataclasses that memplan reads or knows to be memory-neutral; a key one
// typo away from one of them gets "did you mean".
const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> k = {
      // read: ModelArguments
      "model_name_or_path", "quantization_bit", "quantization_method", "quantization_type", "double_quantization",
      "flash_attn", "enable_liger_kernel", "use_unsloth", "use_unsloth_gc", "disable_gradient_checkpointing",
      "use_reentrant_gc", "upcast_layernorm", "upcast_lmhead_output", "rope_scaling", "shift_attn", "mixture_of_depths",
      "train_from_scratch", "moe_aux_loss_coef", "use_kt",
      // read: FinetuningArguments
      "stage", "finetuning_type", "lora_rank", "lora_alpha", "lora_dropout", "lora_target", "additional_target",
      "use_dora", "use_rslora", "pissa_init", "freeze_trainable_layers", "freeze_trainable_modules",
      "freeze_extra_modules", "pure_bf16", "use_badam", "use_galore", "use_apollo", "use_llama_pro", "ref_model",
      "reward_model", "freeze_vision_tower", "use_mca",
      // read: DataArguments
      "cutoff_len", "packing", "neat_packing", "dataloader_num_workers",
      // read: TrainingArguments
      "per_device_train_batch_size", "gradient_accumulation_steps", "bf16", "fp16", "optim", "optim_args", "deepspeed",
      "fsdp", "fsdp_config", "torch_compile", "dataloader_pin_memory", "dataloader_prefetch_factor", "auto_find_batch_size",
      // memory-neutral
      "trust_remote_code", "do_train", "do_eval", "do_predict", "dataset", "eval_dataset", "dataset_dir", "template",
      "max_samples", "overwrite_cache", "preprocessing_num_workers", "output_dir", "logging_steps", "save_steps",
      "plot_loss", "overwrite_output_dir", "save_only_model", "report_to", "learning_rate", "num_train_epochs",
      "lr_scheduler_type", "warmup_ratio", "warmup_steps", "ddp_timeout", "resume_from_checkpoint", "val_size",
      "per_device_eval_batch_size", "eval_strategy", "eval_steps", "max_steps", "save_strategy", "save_total_limit",
      "weight_decay", "max_grad_norm", "seed", "logging_dir", "run_name", "adapter_name_or_path", "cache_dir",
      "model_revision", "hf_hub_token", "export_dir", "infer_backend", "print_param_status", "predict_with_generate",
      "include_num_input_tokens_seen", "train_on_prompt", "mask_history", "mix_strategy", "streaming", "buffer_size",
      "tokenized_path", "enable_thinking", "media_dir", "image_max_pixels", "image_min_pixels", "video_max_pixels",
      "video_fps", "video_maxlen", "pref_beta", "pref_ftx", "pref_loss", "dpo_label_smoothing", "kto_chosen_weight",
      "kto_rejected_weight", "simpo_gamma", "create_new_adapter", "lora_parameters", "pissa_iter", "pissa_convert",
      "ray_run_name", "ray_storage_path", "ray_num_workers", "resources_per_worker", "placement_strategy",
      "use_swanlab", "swanlab_project", "generation_max_length", "max_new_tokens", "top_p", "temperature",
      "ddp_find_unused_parameters", "gradient_checkpointing", "loraplus_lr_ratio", "default_system", "tool_format",
      "tokenizer_name_or_path", "use_fast_tokenizer", "split_special_tokens", "new_special_tokens", "adam_beta1",
      "adam_beta2", "adam_epsilon", "save_safetensors", "tf32", "local_rank"};
  return k;
}

void read_llamafactory(const Node& root, ReadState& st) {
  check_keys(root, st, known_keys(), "LLaMA-Factory");
  TrainingSetup& s = st.s();
  Finetune& f = s.finetune;
  s.runtime.framework = Framework::hf_trainer;
  note_default(st, memplan::path(Choice::framework), fmt::format("a LLaMA-Factory config: the transformers Trainer runs the step ({})", kVersion));

  const Node* model = root.find("model_name_or_path");
  if (!model)
    throw InputError(Where::at_file(st.path), "a LLaMA-Factory config needs model_name_or_path",
                     fmt::format("LLaMA-Factory loads the model it names ({} L27-31)", kModelArgs));
  use_model(st, *model);

  // Stage: pre-training and SFT train one model on plain rows; the others add a reference or
  // reward model, or generate.
  std::string stage = "sft";
  if (const Node* n = root.find("stage")) {
    stage = lower(as_text(*n));
    if (stage != "pt" && stage != "sft" && stage != "rm" && stage != "ppo" && stage != "dpo" && stage != "kto")
      throw InputError(n->where, fmt::format("unknown stage '{}'", as_text(*n)),
                       fmt::format("LLaMA-Factory's stages are pt, sft, rm, ppo, dpo and kto ({} L460-463)", kFinetuningArgs));
    if (stage == "rm" || stage == "ppo" || stage == "dpo" || stage == "kto")
      st.unmodelled(*n, stage == "rm" ? "a reward model trains on chosen and rejected rows (twice the rows per step)"
                                      : stage == "ppo" ? "PPO keeps a reward and a value model and generates rollouts"
                                                       : "preference training runs chosen and rejected rows and may keep a reference model",
                    "the estimate is plain supervised fine-tuning of one model");
  }

  read_training_args_batch(root, st);
  read_training_args_loader(root, st);
  // Sequence: cutoff_len (2048 by default); rows are padded to the longest in the batch, or packed
  // to cutoff_len: the estimate takes cutoff_len either way.
  if (const Node* n = root.find("cutoff_len")) {
    s.batch.seq_len = positive(*n, "cutoff_len is the longest row in tokens");
    note(st, memplan::path(Count::seq_len), *n);
  } else {
    s.batch.seq_len = 2048;
    note_default(st, memplan::path(Count::seq_len), fmt::format("LLaMA-Factory default cutoff_len=2048 ({} L46-49)", kDataArgs));
  }

  // Fine-tuning: lora (the default), freeze, full; oft is not modelled.
  std::string type = "lora";
  const Node* type_node = root.find("finetuning_type");
  if (type_node) {
    type = lower(as_text(*type_node));
    if (type != "lora" && type != "freeze" && type != "full" && type != "oft")
      throw InputError(type_node->where, fmt::format("unknown finetuning_type '{}'", as_text(*type_node)),
                       fmt::format("LLaMA-Factory's finetuning types are lora, oft, freeze and full ({} L464-467)", kFinetuningArgs));
  }
  auto note_type = [&](const std::string& field) {
    if (type_node) note(st, field, *type_node);
    else note_default(st, field, fmt::format("LLaMA-Factory default finetuning_type=lora ({} L464-467)", kFinetuningArgs));
  };
  const Node* qbit = root.find("quantization_bit");
  const int64_t bits = qbit ? as_int(*qbit) : 0;
  if (type == "oft") {
    st.unmodelled(*type_node, "orthogonal fine-tuning adapters are not modelled", "the estimate trains LoRA adapters of lora_rank instead");
    type = "lora";
  }
  if (type == "lora") {
    f.mode = bits > 0 ? FinetuneMode::qlora : FinetuneMode::lora;
    note_type(memplan::path(Choice::finetune));
    if (const Node* n = root.find("lora_rank")) {
      f.lora_rank = positive(*n, "lora_rank is the LoRA rank r");
      note(st, memplan::path(Count::lora_rank), *n);
    } else {
      f.lora_rank = 8;
      note_default(st, memplan::path(Count::lora_rank), fmt::format("LLaMA-Factory default lora_rank=8 ({} L77-80)", kFinetuningArgs));
    }
    if (const Node* n = root.find("lora_alpha")) {
      f.lora_alpha = as_number(*n);
      note(st, memplan::path(Number::lora_alpha), *n);
    } else {
      f.lora_alpha = 2.0 * static_cast<double>(f.lora_rank);
      note_default(st, memplan::path(Number::lora_alpha), fmt::format("LLaMA-Factory default lora_alpha = lora_rank * 2 ({} L568)", kFinetuningArgs));
    }
    if (const Node* n = root.find("lora_dropout")) {
      f.lora_dropout = as_number(*n);
      note(st, memplan::path(Number::lora_dropout), *n);
    }
    // lora_target: "all" (the default) is every linear layer but the output head
    // (model/model_utils/misc.py find_all_linear_modules); else module names.
    const Node* tn = root.find("lora_target");
    const std::vector<std::string> targets = tn ? as_text_list(*tn) : std::vector<std::string>{"all"};
    if (targets.size() == 1 && lower(targets[0]) == "all") f.lora_targets = {"all-linear"};
    else f.lora_targets = lora_targets(*tn);
    if (tn) note(st, memplan::path(List::lora_targets), *tn);
    else note_default(st, memplan::path(List::lora_targets), fmt::format("LLaMA-Factory default lora_target=all: every linear layer but the head ({} L81-84)", kFinetuningArgs));
    if (const Node* n = root.find("additional_target")) read_modules_to_save(*n, st);  // modules_to_save
    for (const char* k : {"use_dora", "pissa_init"})
      if (const Node* n = root.find(k); n && yes(*n))
        st.unmodelled(*n, std::string(k) == "use_dora" ? "DoRA adds a magnitude vector and a weight-norm pass per adapted layer"
                                                       : "PiSSA initialises the adapters from an SVD of the weights (a one-off temporary)");
  } else if (type == "freeze") {
    // The last freeze_trainable_layers layers train (a negative count: the first ones), the
    // embeddings and the head stay frozen (FinetuningArguments L23-45, adapter.py _setup_freeze_tuning).
    int64_t trainable = 2;
    const Node* n = root.find("freeze_trainable_layers");
    if (n) trainable = as_int(*n);
    const int64_t layers = s.model.num_layers;
    f.mode = FinetuneMode::full;
    note_type(memplan::path(Choice::finetune));
    if (trainable < 0) {
      st.unmodelled(*n, "a negative count trains the first layers; memplan freezes layers from the bottom",
                    "the estimate trains the same number of layers at the top");
      trainable = -trainable;
    }
    f.freeze_layers = layers > 0 ? std::max<int64_t>(0, layers - std::min(trainable, layers)) : 0;
    if (n) note(st, memplan::path(Count::freeze_layers), *n, fmt::format("freeze_trainable_layers {}: the top {} of {} layers train", as_text(*n), trainable, layers));
    else note_default(st, memplan::path(Count::freeze_layers), fmt::format("LLaMA-Factory default freeze_trainable_layers=2: the top 2 of {} layers train ({} L23-32)", layers, kFinetuningArgs));
    if (f.freeze_layers > 0)
      st.out.warnings.push_back({type_node->where,
                                 "finetuning_type freeze leaves the output head frozen; memplan's partial freeze trains it",
                                 "the estimate counts the head's gradient and optimizer states too (an over-estimate)"});
  } else {
    f.mode = FinetuneMode::full;
    note_type(memplan::path(Choice::finetune));
  }
  if (bits > 0 && f.mode == FinetuneMode::full)
    throw InputError(qbit->where, "quantization_bit needs finetuning_type lora",
                     fmt::format("LLaMA-Factory trains quantized models only with LoRA or OFT ({} L306-308)", kAdapter));

  // Quantization: bitsandbytes 4-bit (nf4 or fp4, double-quantized by default) or 8-bit.
  if (bits > 0) {
    std::string method = "bnb";
    if (const Node* m = root.find("quantization_method")) {
      method = lower(as_text(*m));
      if (method == "bitsandbytes") method = "bnb";
      if (method != "bnb")
        st.unmodelled(*m, fmt::format("{} quantization is not modelled", method), "the estimate uses bitsandbytes' storage at the same bit width");
    }
    if (bits == 4) {
      f.base_quant = BaseQuant::nf4;
      if (const Node* t = root.find("quantization_type"); t && lower(as_text(*t)) == "fp4")
        note(st, kBaseQuantPath, *t, "quantization_type fp4 (stored like nf4: 4 bits and a block scale)");
      else note(st, kBaseQuantPath, *qbit);
      f.double_quant = true;
      if (const Node* d = root.find("double_quantization")) {
        f.double_quant = yes(*d);
        note(st, path(Switch::double_quant), *d);
      } else {
        note_default(st, path(Switch::double_quant), fmt::format("LLaMA-Factory default double_quantization=True ({} L291-294)", kModelArgs));
      }
    } else if (bits == 8) {
      f.mode = FinetuneMode::lora;
      f.base_quant = BaseQuant::int8;
      note(st, kBaseQuantPath, *qbit);
    } else {
      throw InputError(qbit->where, fmt::format("quantization_bit {} is not a bitsandbytes width", bits),
                       "bitsandbytes quantizes to 4 or 8 bits (2 and 3 are HQQ's, which memplan does not model)");
    }
  }

  // Gradient checkpointing: on unless disable_gradient_checkpointing; reentrant by default
  // (use_reentrant_gc=True); unsloth's variant offloads the checkpoints to the host.
  if (const Node* n = root.find("disable_gradient_checkpointing"); n && yes(*n)) {
    s.checkpointing.mode = CheckpointMode::none;
    note(st, memplan::path(Choice::checkpointing), *n);
  } else {
    s.checkpointing.mode = CheckpointMode::full;
    if (n) note(st, memplan::path(Choice::checkpointing), *n);
    else note_default(st, memplan::path(Choice::checkpointing), fmt::format("LLaMA-Factory checkpoints every layer unless disable_gradient_checkpointing ({} L145-148; "
                                                       "model_utils/checkpointing.py prepare_model_for_training)", kModelArgs));
  }
  if (const Node* n = root.find("use_unsloth_gc"); n && yes(*n) && s.checkpointing.mode != CheckpointMode::none)
    st.unmodelled(*n, "unsloth's checkpointing keeps each layer's input in host memory", "the estimate keeps the checkpoints on the GPU (an over-estimate)");
  for (const char* k : {"use_unsloth", "use_badam", "use_galore", "use_apollo", "use_llama_pro", "mixture_of_depths", "shift_attn", "use_kt", "use_mca"})
    if (const Node* n = root.find(k); n && (n->kind != Node::Kind::scalar || (lower(n->text) != "false" && lower(n->text) != "null")))
      st.unmodelled(*n, fmt::format("{} changes what is trained or how, and is not modelled", k));

  // Attention: flash_attn auto (transformers picks: sdpa), disabled (eager), sdpa, fa2, fa3
  // (model/model_utils/attention.py configure_attn_implementation).
  if (const Node* n = root.find("flash_attn")) {
    const std::string v = lower(as_text(*n));
    if (v == "disabled") s.attention = AttentionImpl::eager;
    else if (v == "sdpa" || v == "auto") s.attention = AttentionImpl::sdpa;
    else if (v == "fa2" || v == "fa3") s.attention = AttentionImpl::flash;
    else throw InputError(n->where, fmt::format("unknown flash_attn '{}'", as_text(*n)), "LLaMA-Factory takes auto, disabled, sdpa, fa2 or fa3");
    note(st, memplan::path(Choice::attention), *n);
  }
  // Liger: enable_liger_kernel patches the model; for pt and sft without the logits (the fused
  // linear cross-entropy; model/model_utils/liger_kernel.py, require_logits=stage not in pt/sft).
  if (const Node* n = root.find("enable_liger_kernel")) {
    s.runtime.liger = yes(*n);
    note(st, path(Switch::liger), *n);
    if (s.runtime.liger && stage != "pt" && stage != "sft") {
      s.runtime.loss = LossImpl::standard;
      note(st, memplan::path(Choice::loss), *n, fmt::format("enable_liger_kernel with stage {}: the logits are kept (no fused loss)", stage));
    }
  }
  if (const Node* n = root.find("optim")) read_optimizer(*n, st, false, root.find("optim_args"));
  else note_default(st, memplan::path(Choice::optimizer), fmt::format("TrainingArguments default optim: adamw_torch (adamw_torch_fused when torch >= 2.8) ({})", kTrainingArgs));
  if (const Node* n = root.find("torch_compile")) {
    s.runtime.compile = yes(*n);
    note(st, path(Switch::compile), *n);
  }
  for (const char* k : {"fsdp", "fsdp_config"})
    if (const Node* n = root.find(k))
      st.unmodelled(*n, "LLaMA-Factory runs FSDP through an accelerate config (accelerate launch --config_file)",
                    "estimate with that accelerate config, or pass --fsdp");

  // Precision: bf16/fp16 turn the Trainer's autocast on; pure_bf16 trains 16-bit weights.
  const Node* bf16_node = root.find("bf16");
  const Node* fp16_node = root.find("fp16");
  const bool bf16 = bf16_node && yes(*bf16_node);
  const bool fp16 = fp16_node && yes(*fp16_node);
  const Node* pure = root.find("pure_bf16");
  const bool pure_bf16 = pure && yes(*pure);

  // DeepSpeed: a path (relative to the working directory, LLaMA-Factory's repository root in its
  // examples) or a mapping; the Trainer fills its "auto" values.
  std::optional<DeepSpeedRead> dsr;
  if (const Node* ds = root.find("deepspeed")) {
    DeepSpeedFill fill;
    fill.micro_batch = s.batch.micro_batch;
    fill.grad_accum = s.batch.grad_accum;
    fill.bf16 = bf16 || pure_bf16;
    fill.fp16 = fp16;
    dsr = read_deepspeed(*ds, st, fill);
    if (!dsr->optimizer_block && !st.out.origin.fields.count(memplan::path(Choice::optimizer_impl))) {
      s.runtime.optimizer_impl = OptimizerImpl::automatic;
      note_default(st, memplan::path(Choice::optimizer_impl), "the HF Trainer builds the optimizer when the DeepSpeed config has none");
    }
  }
  const bool zero3 = s.parallel.zero_stage == 3;
  auto set = [&](Precision p, const Node* at, const std::string& why) {
    s.precision = p;
    if (at) note(st, memplan::path(Choice::precision), *at, why);
    else note_default(st, memplan::path(Choice::precision), why);
  };
  if (pure_bf16) {
    if (zero3) throw InputError(pure->where, "pure_bf16 is incompatible with DeepSpeed ZeRO-3", "LLaMA-Factory refuses it (hparams/parser.py @ v0.9.5 L384-385)");
    set(Precision::bf16, pure, "pure_bf16: bf16 weights, gradients and optimizer states, no fp32 upcast");
    f.adapter_fp32 = false;
    note(st, memplan::path(Choice::adapter_dtype), *pure, "pure_bf16: the adapters in bf16 too (no fp32 upcast)");
  } else if (dsr && dsr->precision) {
    s.precision = *dsr->precision;
    Where w = dsr->precision_where;
    w.key = dsr->precision_text;
    st.out.origin.set(memplan::path(Choice::precision), w);
  } else if (f.mode != FinetuneMode::full) {
    // The frozen base stays in the checkpoint's dtype (from_pretrained torch_dtype="auto",
    // model/loader.py L155), the adapters are upcast to fp32; a 16-bit checkpoint trains as that
    // precision, an fp32 one under the Trainer's autocast. Decided once the model is known.
    const Precision if_fp32 = bf16 ? Precision::amp_bf16 : fp16 ? Precision::amp_fp16 : Precision::fp32;
    s.precision = if_fp32;
    LoadedConfig::CheckpointPrecision cp;
    cp.if_fp32 = if_fp32;
    cp.where = (bf16 ? bf16_node : fp16 ? fp16_node : model)->where;
    cp.text = fmt::format("LLaMA-Factory loads the base in its checkpoint's dtype (model/loader.py @ v0.9.5 L155) and upcasts the "
                          "adapters to fp32 ({})",
                          kAdapter);
    st.out.checkpoint_precision = cp;
  } else if (bf16 || fp16) {
    set(bf16 ? Precision::amp_bf16 : Precision::amp_fp16, bf16 ? bf16_node : fp16_node,
        fmt::format("{}: the trainable weights upcast to fp32 ({}), 16-bit autocast", bf16 ? "bf16" : "fp16", kAdapter));
  } else {
    set(Precision::fp32, model, fmt::format("no bf16/fp16: the trainable weights upcast to fp32 ({})", kAdapter));
  }
  if (!st.out.origin.fields.count(memplan::path(Count::num_gpus)) && (s.parallel.zero_stage > 0 || s.parallel.fsdp != FsdpMode::none))
    note_default(st, memplan::path(Count::num_gpus), "not in the file: the launcher decides (FORCE_TORCHRUN=1, NPROC_PER_NODE); pass --gpus");
}

}  // namespace

void read_llamafactory_config(const Node& root, ReadState& st) { read_llamafactory(root, st); }

}  // namespace memplan::profiles::detail
