// HF TrainingArguments / TRL / alignment-handbook configs, YAML (TrlParser.parse_args_and_config,
// HfArgumentParser.parse_yaml_file) or JSON (HfArgumentParser.parse_json_file): one flat namespace
// filled by several dataclasses at once (TrainingArguments or TRL's SFTConfig/DPOConfig,
// ModelConfig, ScriptArguments; run_clm.py's ModelArguments and DataTrainingArguments). Read the way
// the Trainer runs it, with TrainingArguments' defaults, and TRL's when the file carries TRL keys:
// those of the newest TRL release that still reads every key the file uses (max_seq_length was
// removed in 0.20, torch_dtype in 0.27). The GPU count is the launcher's, not the file's.
#include <utility>
#include <fmt/format.h>

#include "profiles/formats/hf_family.h"

namespace memplan::profiles::detail {
namespace {
using namespace hf;

// ---- which tool and release -------------------------------------------------------------------------

// The defaults of a TRL release that change memory.
struct TrlRelease {
  const char* name;
  bool gradient_checkpointing;  // SFTConfig/DPOConfig default (TrainingArguments' False before 0.22)
  const char* gc_source;
  bool dtype_float32;           // ModelConfig.dtype "float32" (0.27+); before: None, transformers' own default
  const char* dtype_source;
  bool chunked_nll;             // SFT loss_type default chunked_nll (1.7+)
  const char* loss_source;
  const char* bf16_source;      // bf16 None -> not fp16 (0.19+)
  const char* max_length_source;
};

const TrlRelease kTrl019 = {
    "TRL 0.19 (the last release reading max_seq_length)",
    false,
    "TRL 0.19 SFTConfig keeps TrainingArguments' gradient_checkpointing=False (trl/trainer/sft_config.py @ v0.19.1; "
    "True from v0.22.0)",
    false,
    "TRL 0.19 ModelConfig torch_dtype=None: transformers 4.x from_pretrained loads fp32 (trl/trainer/model_config.py @ v0.19.1)",
    false,
    "TRL 0.19 SFTTrainer computes the full logits (loss nll)",
    "TRL SFTConfig bf16=None -> not fp16 (trl/trainer/sft_config.py @ v0.19.1 L251-252)",
    "TRL SFTConfig max_length=1024 (trl/trainer/sft_config.py @ v0.19.1 L174-175)",
};
const TrlRelease kTrl026 = {
    "TRL 0.26 (the last release reading torch_dtype)",
    true,
    "TRL SFTConfig gradient_checkpointing=True (trl/trainer/sft_config.py @ v0.26.0 L118-119; since v0.22.0)",
    false,
    "TRL 0.26 ModelConfig dtype=None: transformers 4.x from_pretrained loads fp32 (trl/trainer/model_config.py @ v0.26.0 L92-93)",
    false,
    "TRL 0.26 SFTConfig loss_type='nll' (trl/trainer/sft_config.py @ v0.26.0 L262-263)",
    "TRL SFTConfig bf16=None -> not fp16 (trl/trainer/sft_config.py @ v0.26.0 L276-277)",
    "TRL SFTConfig max_length=1024 (trl/trainer/sft_config.py @ v0.26.0 L194-195)",
};
const TrlRelease kTrl19 = {
    "TRL 1.9",
    true,
    "TRL gradient_checkpointing=True (trl/trainer/base_config.py @ v1.9.0 L61-62)",
    true,
    "TRL ModelConfig dtype='float32' (trl/trainer/model_config.py @ v1.9.0 L89-90)",
    true,
    "TRL SFTConfig loss_type=None -> 'chunked_nll' unless use_liger_kernel (trl/trainer/sft_config.py @ v1.9.0 L283, "
    "L334-336): lm_head and cross-entropy in 256-token checkpointed chunks, the full logits never exist "
    "(trl/trainer/sft_trainer.py @ v1.9.0 L86-236)",
    "TRL bf16=None -> not fp16 (trl/trainer/base_config.py @ v1.9.0 L67-68, L105)",
    "TRL SFTConfig max_length=1024 (trl/trainer/sft_config.py @ v1.9.0 L205-206)",
};

bool has_any(const Node& root, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (root.find(k)) return true;
  return false;
}

// Keys only TRL's configs (SFTConfig, DPOConfig, ModelConfig, ScriptArguments, the trl CLI's
// launch keys) have. A YAML file naming model_name_or_path without run_clm.py's data keys is read
// as TRL's too: TrlParser reads YAML configs, the transformers examples read JSON.
bool is_trl(const Node& root, bool json) {
  if (!json && root.find("model_name_or_path") &&
      !has_any(root, {"block_size", "dataset_config_name", "train_file", "validation_file", "preprocessing_num_workers",
                      "max_train_samples"}))
    return true;
  return has_any(root, {"accelerate_config", "num_processes", "use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "lora_modules_to_save",
                        "load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "use_bnb_nested_quant", "max_seq_length",
                        "max_length", "packing", "padding_free", "dataset_text_field", "dataset_mixture", "dataset_mixer",
                        "completion_only_loss", "assistant_only_loss", "loss_type", "beta", "max_prompt_length",
                        "precompute_ref_log_probs", "model_init_kwargs", "activation_offloading", "chat_template_path",
                        "dataset_num_proc", "use_dora", "lora_task_type"});
}

// Keys of TRL's DPOConfig: chosen and rejected run in one forward, beside a reference model.
bool is_dpo(const Node& root) {
  if (has_any(root, {"beta", "max_prompt_length", "precompute_ref_log_probs", "ref_model_init_kwargs", "rpo_alpha",
                     "sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps", "f_divergence_type", "reference_free"}))
    return true;
  const Node* loss = root.find("loss_type");
  if (!loss) return false;
  if (loss->kind == Node::Kind::list) return true;
  const std::string l = lower(loss->text);
  return l != "nll" && l != "dft" && l != "chunked_nll";
}

// Every key these dataclasses take that memplan reads or knows to be memory-neutral: unknown keys
// one typo away from one of these get "did you mean".
const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> k = {
      // read
      "model_name_or_path", "per_device_train_batch_size", "gradient_accumulation_steps", "bf16", "fp16", "torch_dtype",
      "dtype", "gradient_checkpointing", "gradient_checkpointing_kwargs", "optim", "optim_args", "max_seq_length",
      "max_length", "block_size", "packing", "use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
      "lora_modules_to_save", "lora_target_parameters", "use_dora", "load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type",
      "use_bnb_nested_quant", "attn_implementation", "use_liger_kernel", "liger_kernel_config", "torch_compile",
      "torch_compile_backend", "torch_compile_mode", "deepspeed", "fsdp", "fsdp_config", "activation_offloading",
      "loss_type", "auto_find_batch_size", "dataloader_num_workers", "dataloader_pin_memory", "dataloader_prefetch_factor",
      "use_cpu", "num_processes", "accelerate_config", "model_init_kwargs", "precompute_ref_log_probs", "accelerator_config",
      "optim_target_modules",
      // memory-neutral
      "output_dir", "overwrite_output_dir", "do_train", "do_eval", "do_predict", "eval_strategy", "evaluation_strategy",
      "eval_steps", "per_device_eval_batch_size", "learning_rate", "weight_decay", "adam_beta1", "adam_beta2",
      "adam_epsilon", "max_grad_norm", "num_train_epochs", "max_steps", "lr_scheduler_type", "lr_scheduler_kwargs",
      "warmup_ratio", "warmup_steps", "log_level", "logging_dir", "logging_strategy", "logging_steps",
      "logging_first_step", "save_strategy", "save_steps", "save_total_limit", "save_only_model", "seed", "data_seed",
      "tf32", "bf16_full_eval", "fp16_full_eval", "report_to", "run_name", "push_to_hub", "hub_model_id", "hub_strategy",
      "hub_private_repo", "remove_unused_columns", "label_names", "load_best_model_at_end", "metric_for_best_model",
      "greater_is_better", "ddp_timeout", "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "torch_empty_cache_steps",
      "neftune_noise_alpha", "group_by_length", "include_num_input_tokens_seen", "model_revision", "trust_remote_code",
      "dataset_name", "dataset_config", "dataset_config_name", "dataset_train_split", "dataset_test_split",
      "dataset_mixture", "dataset_mixer", "dataset_splits", "dataset_text_field", "dataset_kwargs", "dataset_num_proc",
      "preprocessing_num_workers", "chat_template", "chat_template_path", "eos_token", "pad_token", "packing_strategy",
      "padding_free", "eval_packing", "completion_only_loss", "assistant_only_loss", "truncation_mode", "shuffle_dataset",
      "beta", "max_prompt_length", "max_completion_length", "ref_model_init_kwargs", "rpo_alpha", "sync_ref_model",
      "lora_task_type", "use_rslora", "bnb_4bit_quant_storage", "tokenizer_name", "cache_dir", "use_fast_tokenizer",
      "train_file", "validation_file", "validation_split_percentage", "streaming", "max_train_samples",
      "max_eval_samples", "overwrite_cache", "keep_linebreaks", "resume_from_checkpoint", "gradient_checkpointing_kwargs",
      "disable_dropout", "use_cache", "average_tokens_across_devices", "label_smoothing_factor", "disable_tqdm",
      "project", "hub_token", "local_rank", "ignore_data_skip", "dataloader_drop_last", "dataloader_persistent_workers",
      "eval_accumulation_steps", "prediction_loss_only", "save_safetensors", "router_aux_loss_coef"};
  return k;
}

void check_near_misses(const Node& root, ReadState& st) { check_keys(root, st, known_keys(), "TrainingArguments/TRL"); }

// ---- the reader ---------------------------------------------------------------------------------------

bool flag_of(const Node& n) { return flag(n, kHfArgsBoolHint); }

// The dtype the weights are loaded in: fp32, bf16 or fp16.
Precision load_dtype(const Node& n) {
  const std::string v = lower(as_text(n));
  if (v == "bfloat16" || v == "bf16") return Precision::bf16;
  if (v == "float16" || v == "fp16" || v == "half") return Precision::fp16;
  if (v == "float32" || v == "fp32" || v == "float") return Precision::fp32;
  // "auto": the checkpoint's own dtype; released LLM checkpoints are 16-bit.
  if (v == "auto") return Precision::bf16;
  throw InputError(n.where, fmt::format("unknown {} '{}'", n.path, as_text(n)),
                   "transformers loads weights as auto, bfloat16, float16 or float32");
}

struct HfRead {
  bool trl = false, dpo = false;
  const TrlRelease* release = nullptr;
  int64_t micro_batch = 8;
  int64_t grad_accum = 1;
  bool bf16 = false, fp16 = false;
  const Node* bf16_node = nullptr;
  const Node* fp16_node = nullptr;
  Precision weights = Precision::fp32;
  const Node* dtype_node = nullptr;
  bool peft = false;
};

void read_model(const Node& root, ReadState& st) {
  if (const Node* m = root.find("model_name_or_path")) use_model(st, *m);
}

void read_batch(const Node& root, ReadState& st, HfRead& r) {
  TrainingSetup& s = st.s();
  read_training_args_batch(root, st);
  r.micro_batch = s.batch.micro_batch;
  r.grad_accum = s.batch.grad_accum;
  // Sequence length: TRL's max_length (max_seq_length before 0.16, copied into max_length until
  // 0.19: it wins), run_clm.py's block_size.
  const Node* len = root.find("max_seq_length");
  if (!len) len = root.find("max_length");
  if (!len) len = root.find("block_size");
  if (len) {
    s.batch.seq_len = positive(*len, "the sequence length in tokens");
    note(st, memplan::path(Count::seq_len), *len,
         len->path == "max_seq_length" ? "max_seq_length (TRL's name before 0.16; max_length since)" : "");
  } else if (r.trl) {
    s.batch.seq_len = 1024;
    note_default(st, memplan::path(Count::seq_len), r.dpo ? "TRL DPOConfig max_length=1024 (trl/trainer/dpo_config.py @ v1.9.0 L188-189)"
                                            : r.release->max_length_source);
  }
  // DPO: the chosen and the rejected completion of each prompt are concatenated on the batch
  // dimension and run in one forward (trl/trainer/dpo_trainer.py @ v1.9.0 concatenated_forward).
  if (r.dpo) {
    s.batch.micro_batch = 2 * r.micro_batch;
    const Node* n = root.find("per_device_train_batch_size");
    const std::string text = "per_device_train_batch_size x 2 (DPO runs chosen and rejected in one forward)";
    if (n) note(st, memplan::path(Count::micro_batch), *n, text);
    else note_default(st, memplan::path(Count::micro_batch), "TrainingArguments default 8 x 2 (DPO runs chosen and rejected in one forward)");
  }
}

void read_precision_flags(const Node& root, HfRead& r) {
  if ((r.bf16_node = root.find("bf16"))) r.bf16 = flag_of(*r.bf16_node);
  if ((r.fp16_node = root.find("fp16"))) r.fp16 = flag_of(*r.fp16_node);
  // TRL (0.19+): bf16 left unset means `not fp16`.
  if (!r.bf16_node && r.trl) r.bf16 = !r.fp16;
  if (r.bf16 && r.fp16)
    throw InputError(r.fp16_node ? r.fp16_node->where : r.bf16_node->where, "bf16 and fp16 are both true",
                     "TrainingArguments refuses both (At most one of fp16 and bf16 can be True): keep one");
  r.dtype_node = root.find("torch_dtype");
  if (!r.dtype_node) r.dtype_node = root.find("dtype");
  if (!r.dtype_node)
    if (const Node* kw = root.find("model_init_kwargs"); kw && kw->kind == Node::Kind::map)
      r.dtype_node = kw->find("torch_dtype") ? kw->find("torch_dtype") : kw->find("dtype");
  if (r.dtype_node) r.weights = load_dtype(*r.dtype_node);
}

void read_peft(const Node& root, ReadState& st, HfRead& r) {
  Finetune& f = st.s().finetune;
  const Node* use_peft = root.find("use_peft");
  r.peft = use_peft && flag_of(*use_peft);
  const Node* q4 = root.find("load_in_4bit");
  const Node* q8 = root.find("load_in_8bit");
  const bool four = q4 && flag_of(*q4), eight = q8 && flag_of(*q8);
  if (four && eight)
    throw InputError(q8->where, "load_in_4bit and load_in_8bit are both true",
                     "TRL's ModelConfig refuses both (trl/trainer/model_config.py @ v1.9.0 L173-175): keep one");
  if ((four || eight) && !r.peft) {
    const Node& at = four ? *q4 : *q8;
    throw InputError(at.where,
                     fmt::format("{}: true without use_peft: TRL quantizes the model and the HF Trainer refuses to train a "
                                 "purely quantized model",
                                 at.path),
                     "add use_peft: true (with lora_r and lora_target_modules) to train QLoRA adapters on the quantized "
                     "model, or drop the quantization for a full fine-tune");
  }
  if (!r.peft) {
    for (const char* k : {"lora_r", "lora_alpha", "lora_target_modules", "lora_dropout", "lora_modules_to_save"})
      if (const Node* n = root.find(k))
        st.out.warnings.push_back({n->where, fmt::format("{} is set but use_peft is not: TRL trains the whole model without adapters", k),
                                   "add use_peft: true to train LoRA adapters (the estimate is a full fine-tune)"});
    return;
  }
  const char* model_config = "TRL ModelConfig default";
  f.mode = four ? FinetuneMode::qlora : FinetuneMode::lora;
  note(st, memplan::path(Choice::finetune), four ? *q4 : *use_peft, four ? "use_peft + load_in_4bit (QLoRA)" : "");
  f.base_quant = four ? BaseQuant::nf4 : eight ? BaseQuant::int8 : BaseQuant::none;
  // A ModelConfig field or its TRL default, noted either way (trl/trainer/model_config.py @ v1.9.0).
  auto field = [&](const char* key, const char* to, auto read, auto fallback, const char* lines) {
    if (const Node* n = root.find(key)) {
      const auto v = read(*n);
      note(st, to, *n);
      return v;
    }
    note_default(st, to, fmt::format("{} {}={} (trl/trainer/model_config.py @ v1.9.0 {})", model_config, key, fallback, lines));
    return decltype(read(std::declval<const Node&>()))(fallback);
  };
  const auto number = [](const Node& n) { return as_number(n); };
  f.lora_rank = field("lora_r", memplan::path(Count::lora_rank), [](const Node& n) { return positive(n, "lora_r is the LoRA rank"); }, 16, "L107-108");
  f.lora_alpha = field("lora_alpha", memplan::path(Number::lora_alpha), number, 32, "L111-112");
  f.lora_dropout = field("lora_dropout", memplan::path(Number::lora_dropout), number, 0.05, "L115-116");
  if (const Node* n = root.find("lora_target_modules")) {
    f.lora_targets = lora_targets(*n);
    note(st, memplan::path(List::lora_targets), *n);
  } else {
    f.lora_targets.clear();
    note_default(st, memplan::path(List::lora_targets),
                 "TRL lora_target_modules=None: PEFT's default for the architecture (q_proj, v_proj for Llama-like models; "
                 "peft src/peft/utils/constants.py @ v0.19.1)");
  }
  if (const Node* n = root.find("lora_modules_to_save")) read_modules_to_save(*n, st);
  if (f.mode == FinetuneMode::qlora) {
    if (const Node* n = root.find("bnb_4bit_quant_type")) {
      const std::string t = lower(as_text(*n));
      if (t != "nf4" && t != "fp4")
        throw InputError(n->where, fmt::format("unknown bnb_4bit_quant_type '{}'", as_text(*n)), "bitsandbytes takes nf4 or fp4");
      note(st, kBaseQuantPath, *n, t == "fp4" ? "bnb_4bit_quant_type: fp4 (stored like nf4: 4 bits + block scales)" : "");
    }
    if (const Node* n = root.find("use_bnb_nested_quant")) {
      f.double_quant = flag_of(*n);
      note(st, path(Switch::double_quant), *n);
    } else {
      f.double_quant = false;
      note_default(st, path(Switch::double_quant), "TRL ModelConfig use_bnb_nested_quant=False (trl/trainer/model_config.py @ v1.9.0 L164-165)");
    }
  }
  if (const Node* n = root.find("use_dora"); n && flag_of(*n))
    st.unmodelled(*n, "DoRA's magnitude vectors and extra activations are not counted; the estimate is plain LoRA");
  if (const Node* n = root.find("lora_target_parameters"))
    st.unmodelled(*n, "adapters on parameters (MoE experts) are not counted; the estimate adapts the target modules only");
}

void read_checkpointing(const Node& root, ReadState& st, const HfRead& r) {
  Checkpointing& c = st.s().checkpointing;
  if (const Node* n = root.find("gradient_checkpointing")) {
    c.mode = flag_of(*n) ? CheckpointMode::full : CheckpointMode::none;
    note(st, memplan::path(Choice::checkpointing), *n);
  } else if (r.trl) {
    c.mode = r.release->gradient_checkpointing ? CheckpointMode::full : CheckpointMode::none;
    note_default(st, memplan::path(Choice::checkpointing), r.release->gc_source);
  } else {
    c.mode = CheckpointMode::none;
    note_default(st, memplan::path(Choice::checkpointing), fmt::format("TrainingArguments default gradient_checkpointing=False ({})", kTrainingArgs));
  }
}

void read_runtime(const Node& root, ReadState& st, const HfRead& r) {
  TrainingSetup& s = st.s();
  if (const Node* n = root.find("optim")) {
    read_optimizer(*n, st, false, root.find("optim_args"));
  } else {
    note_default(st, memplan::path(Choice::optimizer),
                 fmt::format("TrainingArguments default optim: adamw_torch (adamw_torch_fused when torch >= 2.8) ({})", kTrainingArgs));
  }
  const Node* attn = root.find("attn_implementation");
  if (!attn)
    if (const Node* kw = root.find("model_init_kwargs"); kw && kw->kind == Node::Kind::map) attn = kw->find("attn_implementation");
  if (attn) read_attention(*attn, st);
  const Node* liger = root.find("use_liger_kernel");
  const bool liger_on = liger && flag_of(*liger);
  if (liger) {
    s.runtime.liger = liger_on;
    note(st, path(Switch::liger), *liger);
  }
  if (const Node* n = root.find("liger_kernel_config"); n && liger_on && n->kind == Node::Kind::map)
    if (const Node* flce = n->find("fused_linear_cross_entropy"); flce && !flag_of(*flce)) {
      s.runtime.loss = LossImpl::standard;
      note(st, memplan::path(Choice::loss), *flce);
    }
  // torch_compile, or either of its two settings (which turn it on: training_args.py).
  for (const char* k : {"torch_compile", "torch_compile_backend", "torch_compile_mode"})
    if (const Node* n = root.find(k)) {
      const bool on = std::string(k) == "torch_compile" ? flag_of(*n) : true;
      if (on || std::string(k) == "torch_compile") {
        s.runtime.compile = on;
        note(st, path(Switch::compile), *n);
      }
    }
  if (const Node* n = root.find("activation_offloading")) {
    s.runtime.activation_offload = flag_of(*n);
    note(st, path(Switch::activation_offload), *n);
  }
  // The SFT loss: TRL 1.7+ defaults to chunked_nll, whose lm_head + cross-entropy run in
  // checkpointed chunks (no full logits): memplan's fused-linear loss.
  const Node* loss = root.find("loss_type");
  if (loss && !r.dpo) {
    const std::string l = lower(as_text(*loss));
    if (l == "chunked_nll") {
      s.runtime.loss = LossImpl::fused_linear;
      note(st, memplan::path(Choice::loss), *loss, "loss_type: chunked_nll (lm_head and cross-entropy in chunks: no full logits)");
    } else if (l == "nll" || l == "dft") {
      s.runtime.loss = LossImpl::standard;
      note(st, memplan::path(Choice::loss), *loss);
    } else {
      throw InputError(loss->where, fmt::format("unknown loss_type '{}'", as_text(*loss)), "TRL's SFTConfig takes nll, dft or chunked_nll");
    }
  } else if (r.trl && !r.dpo && !liger_on) {
    s.runtime.loss = r.release->chunked_nll ? LossImpl::fused_linear : LossImpl::standard;
    note_default(st, memplan::path(Choice::loss), r.release->loss_source);
  }
  read_training_args_loader(root, st);
  if (const Node* n = root.find("use_cpu"); n && flag_of(*n))
    st.unmodelled(*n, "the Trainer runs on the CPU; the estimate is for a GPU", "pass --device cpu to estimate against host memory");
  if (const Node* n = root.find("accelerator_config"); n && n->kind == Node::Kind::map)
    if (const Node* split = n->find("split_batches"); split && flag_of(*split))
      st.unmodelled(*split, "the batch is split over the processes (each GPU gets per_device_train_batch_size / GPUs); "
                            "the estimate gives each GPU the whole batch");
  // A `trl <command> --config` file passes num_processes to accelerate launch (trl/cli/commands/training.py @ v1.9.0).
  if (const Node* n = root.find("num_processes")) {
    s.parallel.num_gpus = positive(*n, "num_processes is the number of GPUs accelerate launches");
    note(st, memplan::path(Count::num_gpus), *n);
  }
}

// The accelerate configs TRL ships for `trl <command> --accelerate_config NAME`
// (trl/accelerate_configs/*.yaml @ v1.9.0), their memory-relevant keys.
const char* trl_accelerate_config(const std::string& name) {
  if (name == "single_gpu") return "distributed_type: 'NO'\nmixed_precision: bf16\nnum_processes: 1\n";
  if (name == "multi_gpu") return "distributed_type: MULTI_GPU\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n";
  if (name == "zero1")
    return "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n"
           "deepspeed_config:\n  gradient_accumulation_steps: 1\n  zero_stage: 1\n";
  if (name == "zero2")
    return "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n"
           "deepspeed_config:\n  offload_optimizer_device: none\n  offload_param_device: none\n  zero_stage: 2\n";
  if (name == "zero3")
    return "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n"
           "deepspeed_config:\n  offload_optimizer_device: none\n  offload_param_device: none\n  zero_stage: 3\n";
  if (name == "fsdp1")
    return "distributed_type: FSDP\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n"
           "fsdp_config:\n  fsdp_activation_checkpointing: false\n  fsdp_offload_params: false\n"
           "  fsdp_reshard_after_forward: FULL_SHARD\n  fsdp_version: 1\n";
  if (name == "fsdp2")
    return "distributed_type: FSDP\nmixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n"
           "fsdp_config:\n  fsdp_activation_checkpointing: false\n  fsdp_offload_params: false\n"
           "  fsdp_reshard_after_forward: true\n  fsdp_version: 2\n";
  return nullptr;
}

// DeepSpeed, FSDP, or neither; then the precision regime, which depends on the engine.
void read_engine_and_precision(const Node& root, ReadState& st, HfRead& r) {
  TrainingSetup& s = st.s();
  const Node* ds = root.find("deepspeed");
  const Node* fsdp = root.find("fsdp");
  const Node* fsdp_cfg_node = root.find("fsdp_config");
  std::optional<FsdpWords> words = fsdp ? fsdp_words(*fsdp) : std::nullopt;
  if (ds && words)
    throw InputError(ds->where, "deepspeed and fsdp are both set", "the HF Trainer runs one of them: keep deepspeed or fsdp");
  std::optional<DeepSpeedRead> dsr;
  // `trl <command> --config` passes accelerate_config to accelerate launch: a TRL preset name or a
  // file (trl/cli/accelerate_config.py @ v1.9.0). Its engine runs the Trainer; TrainingArguments
  // keeps the mixed precision (it exports ACCELERATE_MIXED_PRECISION).
  bool launch_fsdp = false;
  if (const Node* ac = root.find("accelerate_config"); ac && !ds && !words) {
    const std::string name = as_text(*ac);
    Node launch;
    if (const char* text = trl_accelerate_config(name)) {
      launch = parse_yaml(text, fmt::format("{} (trl/accelerate_configs/{}.yaml @ v1.9.0)", st.path, name));
    } else {
      const std::string path = find_beside(*ac, name, st, "accelerate_config",
                                           "accelerate_config names one of TRL's accelerate configs (single_gpu, multi_gpu, "
                                           "zero1, zero2, zero3, fsdp1, fsdp2) or an accelerate config file");
      launch = parse_yaml(read_text_file(path), path);
    }
    // Positions inside a TRL preset point at the accelerate_config key.
    const std::string shown = st.path;
    DeepSpeedFill fill;
    fill.micro_batch = r.micro_batch;
    fill.grad_accum = r.grad_accum;
    fill.bf16 = r.bf16;
    fill.fp16 = r.fp16;
    fill.bf16_key = r.bf16_node ? "bf16" : r.trl ? "bf16 (TRL default true)" : "bf16 (default false)";
    const std::optional<int64_t> gpus = st.out.origin.fields.count(memplan::path(Count::num_gpus)) ? std::optional<int64_t>(s.parallel.num_gpus)
                                                                                        : std::nullopt;
    const Where gpus_where = st.out.origin.of(memplan::path(Count::num_gpus));
    const Launch l = apply_accelerate(launch, st, &fill);
    if (trl_accelerate_config(name))
      for (auto& [field, w] : st.out.origin.fields)
        if (w.file != shown && w.file.rfind(shown, 0) == 0) w = keyed(*ac, fmt::format("accelerate_config: {} ({})", name, w.key));
    if (gpus) {  // num_processes in this file overrides the accelerate config's
      s.parallel.num_gpus = *gpus;
      st.out.origin.set(memplan::path(Count::num_gpus), gpus_where);
    }
    if (l.ds) {
      dsr = l.ds;
      if (trl_accelerate_config(name)) {
        dsr->precision_where = ac->where;
        dsr->precision_text = fmt::format("accelerate_config: {} with {}", name, fill.bf16 || fill.fp16 ? fill.bf16 ? fill.bf16_key : "fp16" : "no bf16/fp16");
      }
    }
    launch_fsdp = l.fsdp;
  }
  if (ds) {
    DeepSpeedFill fill;
    fill.micro_batch = r.micro_batch;
    fill.grad_accum = r.grad_accum;
    fill.bf16 = r.bf16;
    fill.fp16 = r.fp16;
    fill.bf16_key = r.bf16_node ? "bf16" : r.trl ? "bf16 (TRL default true)" : "bf16 (default false)";
    fill.fp16_key = "fp16";
    dsr = read_deepspeed(*ds, st, fill);
  }
  if (dsr && !dsr->optimizer_block && !st.out.origin.fields.count(memplan::path(Choice::optimizer_impl))) {
    // The Trainer's own optimizer, wrapped by DeepSpeed (deepspeed_optim_sched: no optimizer block).
    s.runtime.optimizer_impl = OptimizerImpl::automatic;
    note_default(st, memplan::path(Choice::optimizer_impl),
                 "the HF Trainer builds its optimizer (torch AdamW, foreach on CUDA) when the DeepSpeed config has no "
                 "optimizer block (transformers integrations/deepspeed.py deepspeed_optim_sched)");
  }
  bool fsdp_ac = false;
  const Node* ac_node = nullptr;
  Node cfg;  // fsdp_config with the fsdp_ prefix stripped; ac_node points into it
  if (words) {
    s.parallel.fsdp = words->mode;
    st.out.origin.set(memplan::path(Choice::fsdp), words->where);
    if (words->zero2_hybrid)
      st.unmodelled(*fsdp, "hybrid_shard_zero2 keeps gathered parameters until backward within a node; estimated as hybrid_shard");
    if (words->offload) {
      s.parallel.offload = Offload::optimizer_and_params;
      note(st, memplan::path(Choice::offload), *fsdp, "fsdp: offload (FSDP CPUOffload: parameters, gradients and the step on the CPU)");
    }
    if (fsdp_cfg_node) {
      cfg = fsdp_config(*fsdp_cfg_node, st);
      int version = 1;
      if (const Node* v = cfg.find("version") ? cfg.find("version") : cfg.find("fsdp_version")) {
        version = static_cast<int>(as_int(*v));
        if (version != 1 && version != 2) throw InputError(v->where, fmt::format("unknown FSDP version {}", version), "FSDP is version 1 or 2");
        note(st, memplan::path(Setting::fsdp_version), *v);
      }
      s.parallel.fsdp_version = version;
      if (const Node* v = cfg.find("reshard_after_forward")) {
        bool hybrid = false;
        if (version == 2) {
          s.parallel.fsdp = flag_of(*v) ? FsdpMode::full_shard : FsdpMode::shard_grad_op;
        } else if (const auto m = fsdp_strategy(as_text(*v), &hybrid)) {
          s.parallel.fsdp = *m;
        } else {
          throw InputError(v->where, fmt::format("unknown reshard_after_forward '{}' for FSDP1", as_text(*v)),
                           "FSDP1 takes a strategy name here (full_shard, shard_grad_op, hybrid_shard, ...); FSDP2 takes true/false");
        }
        note(st, memplan::path(Choice::fsdp), *v);
      }
      if ((ac_node = cfg.find("activation_checkpointing"))) fsdp_ac = flag_of(*ac_node);
      if (const Node* v = cfg.find("cpu_offload"); v && flag_of(*v)) {
        s.parallel.offload = Offload::optimizer_and_params;
        note(st, memplan::path(Choice::offload), *v);
      }
      if (const Node* v = cfg.find("offload_params"); v && flag_of(*v) && s.parallel.offload == Offload::none)
        st.unmodelled(*v, "TrainingArguments does not read it (only the word offload in fsdp: offloads); the estimate keeps "
                          "the parameters on the GPU",
                      "write fsdp: \"full_shard offload\" to offload");
    }
  } else if (fsdp_cfg_node && !ds) {
    // fsdp_config without fsdp: TrainingArguments ignores it (_process_fsdp_args returns early).
    st.out.warnings.push_back({fsdp_cfg_node->where, "fsdp_config is set but fsdp is not: the HF Trainer runs without FSDP",
                               "add fsdp: \"full_shard auto_wrap\" to shard with FSDP"});
  }
  if (fsdp_ac) {
    const Node* gc = root.find("gradient_checkpointing");
    const bool gc_on = gc ? flag_of(*gc) : r.trl && r.release->gradient_checkpointing;
    if (gc_on)
      throw InputError(ac_node->where,
                       "fsdp_config.activation_checkpointing and gradient_checkpointing are both true",
                       gc ? "the HF Trainer refuses both (Trainer.create_accelerator_and_postprocess): set gradient_checkpointing: false"
                          : "the HF Trainer refuses both, and TRL turns gradient_checkpointing on by default: add "
                            "gradient_checkpointing: false");
    s.checkpointing.mode = CheckpointMode::full;
    note(st, memplan::path(Choice::checkpointing), *ac_node);
  }

  // The precision regime: the weights' dtype, the autocast flag, and the engine.
  const bool flag16 = r.bf16 || r.fp16;
  const Node* flag_node = r.bf16 ? r.bf16_node : r.fp16_node;
  const std::string flag_text = flag_node ? flag_node->path : std::string("bf16 (TRL: not fp16)");
  auto from_flag = [&](Precision p, const std::string& why) {
    s.precision = p;
    if (flag_node) note(st, memplan::path(Choice::precision), *flag_node, fmt::format("{} ({})", flag_node->path, why));
    else note_default(st, memplan::path(Choice::precision), fmt::format("{}; {}", r.release->bf16_source, why));
  };
  auto weights_text = [&]() {
    if (r.dtype_node) return std::string(r.dtype_node->path);
    if (r.trl) return std::string(r.release->dtype_source);
    return std::string("transformers 4.x from_pretrained loads fp32 without dtype");
  };
  if (dsr) {
    s.precision = *dsr->precision;
    Where w = dsr->precision_where;
    w.key = dsr->precision_text;
    st.out.origin.set(memplan::path(Choice::precision), w);
  } else if (r.weights != Precision::fp32) {
    // 16-bit weights: full fine-tuning under FSDP upcasts the trainable ones to fp32 shards and
    // gathers them in 16 bits (accelerate FSDP mixed precision); otherwise everything stays 16-bit.
    if ((words || launch_fsdp) && flag16 && st.s().finetune.mode == FinetuneMode::full) {
      from_flag(r.bf16 ? Precision::mixed_bf16 : Precision::mixed_fp16,
                "FSDP with mixed precision: fp32 shards, 16-bit compute (src/accelerate/utils/dataclasses.py @ v1.14.0 "
                "L2090-2124; src/accelerate/accelerator.py @ v1.14.0 L1985-2031 upcasts trainable parameters)");
    } else {
      s.precision = r.weights;
      note(st, memplan::path(Choice::precision), *r.dtype_node, fmt::format("{}: {}-bit weights, gradients and optimizer states", r.dtype_node->path, 16));
    }
  } else if (flag16) {
    if ((words || launch_fsdp) && st.s().finetune.mode == FinetuneMode::full)
      from_flag(r.bf16 ? Precision::mixed_bf16 : Precision::mixed_fp16,
                "FSDP with mixed precision: fp32 shards, 16-bit compute (src/accelerate/utils/dataclasses.py @ v1.14.0 "
                "L2090-2124)");
    else
      from_flag(r.bf16 ? Precision::amp_bf16 : Precision::amp_fp16, fmt::format("autocast over fp32 weights: {}", weights_text()));
  } else {
    s.precision = Precision::fp32;
    if (r.dtype_node) note(st, memplan::path(Choice::precision), *r.dtype_node);
    else if (r.fp16_node || r.bf16_node) note(st, memplan::path(Choice::precision), r.bf16_node ? *r.bf16_node : *r.fp16_node);
    else note_default(st, memplan::path(Choice::precision), fmt::format("TrainingArguments default bf16=False, fp16=False ({})", kTrainingArgs));
  }
  // No load dtype in the file (and none from TRL's ModelConfig): from_pretrained's default decides,
  // fp32 up to transformers 4.x, the checkpoint's dtype from 5.0 (build_setup, once the version
  // and the model are known). Not for FSDP's mixed policy (its shards are fp32 either way) or
  // 4/8-bit bases (their other weights follow bnb's compute dtype).
  const bool fsdp_mixed = s.precision == Precision::mixed_bf16 || s.precision == Precision::mixed_fp16;
  if (!dsr && !r.dtype_node && !(r.trl && r.release->dtype_float32) && !fsdp_mixed &&
      st.s().finetune.base_quant == BaseQuant::none && (s.precision == Precision::fp32 || is_autocast(s.precision)))
    st.out.load_dtype_default = flag_node ? flag_node->where : Where::at_file(st.path);
}

void read_hf_trainer(const Node& root, ReadState& st) {
  check_near_misses(root, st);
  HfRead r;
  r.trl = is_trl(root, lower(st.file.extension().string()) == ".json");
  r.dpo = r.trl && is_dpo(root);
  r.release = root.find("max_seq_length") ? &kTrl019 : (root.find("torch_dtype") && !root.find("dtype")) ? &kTrl026 : &kTrl19;
  st.s().runtime.framework = Framework::hf_trainer;
  note_default(st, memplan::path(Choice::framework),
               r.trl ? fmt::format("a TRL config: the transformers Trainer runs the step (defaults of {})", r.release->name)
                     : std::string("a TrainingArguments config: the transformers Trainer runs the step"));
  read_model(root, st);
  read_batch(root, st, r);
  read_precision_flags(root, r);
  read_peft(root, st, r);
  read_checkpointing(root, st, r);
  read_runtime(root, st, r);
  read_engine_and_precision(root, st, r);
  // DPOTrainer makes a reference model unless the policy is a PEFT model (the adapters are
  // disabled for the reference pass) or the reference log-probs are precomputed before training
  // (trl/trainer/dpo_trainer.py @ v1.9.0 L893-908; DPOConfig.precompute_ref_log_probs defaults to
  // False, trl/trainer/dpo_config.py @ v1.9.0 L216).
  if (r.dpo) {
    const Node* pre = root.find("precompute_ref_log_probs");
    const bool precomputed = pre && flag_of(*pre);
    st.s().runtime.reference_model = !r.peft && !precomputed;
    const std::string why = r.peft ? "use_peft: the reference pass disables the adapters, no second model (DPOTrainer @ v1.9.0 L893-898)"
                            : precomputed ? "precompute_ref_log_probs: the reference log-probs are computed before training, no "
                                            "reference model kept (DPOTrainer @ v1.9.0 L893-898)"
                                          : "DPOTrainer makes a reference model from the same path and model_init_kwargs "
                                            "(trl/trainer/dpo_trainer.py @ v1.9.0 L893-908)";
    if (pre) note(st, memplan::path(Switch::reference_model), *pre, why);
    else note_default(st, memplan::path(Switch::reference_model), why);
  }
  if (!st.out.origin.fields.count(memplan::path(Count::num_gpus)) && (st.s().parallel.zero_stage > 0 || st.s().parallel.fsdp != FsdpMode::none))
    note_default(st, memplan::path(Count::num_gpus),
                 "not in the file: the launcher decides (torchrun --nproc_per_node, accelerate num_processes); pass --gpus");
}

}  // namespace

void read_hf_trainer_config(const Node& root, ReadState& st) { read_hf_trainer(root, st); }

}  // namespace memplan::profiles::detail
