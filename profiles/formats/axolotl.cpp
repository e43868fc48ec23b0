// Axolotl YAML (axolotl v0.18.0): a flat pydantic schema (AxolotlInputConfig) whose defaults are
// materialised before normalize_config() derives the dtype and the batch. The HF Trainer runs the
// step; Axolotl decides what it loads: bf16: auto picks bf16 where the GPU has it (resolved here
// against the target when the setup is built), the model is loaded in the training dtype, QLoRA
// always uses double-quantized NF4. The GPU count is the launcher's (WORLD_SIZE), except Ray's.
#include <fmt/format.h>

#include "profiles/formats/hf_family.h"

namespace memplan::profiles::detail {
namespace {
using namespace hf;

constexpr const char* kConfigSchema = "src/axolotl/utils/schemas/config.py @ v0.18.0";
constexpr const char* kTrainingSchema = "src/axolotl/utils/schemas/training.py @ v0.18.0";
constexpr const char* kResolveDtype = "src/axolotl/utils/config/__init__.py @ v0.18.0 resolve_dtype L156-196";

bool yes(const Node& n) { return flag(n, "axolotl reads true or false here"); }

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> k = {
      // read
      "base_model", "base_model_config", "model_type", "adapter", "lora_r", "lora_alpha", "lora_dropout",
      "lora_target_modules", "lora_target_linear", "lora_modules_to_save", "load_in_4bit", "load_in_8bit", "sequence_len",
      "sample_packing", "pad_to_sequence_len", "micro_batch_size", "gradient_accumulation_steps", "batch_size",
      "optimizer", "optim_args", "bf16", "fp16", "bfloat16", "float16", "float32", "gradient_checkpointing",
      "gradient_checkpointing_kwargs", "activation_offloading", "attn_implementation", "flash_attention", "sdp_attention",
      "xformers_attention", "eager_attention", "flex_attention", "sage_attention", "deepspeed", "fsdp", "fsdp_config",
      "fsdp_version", "plugins", "liger_rope", "liger_rms_norm", "liger_glu_activation", "liger_swiglu",
      "liger_layer_norm", "liger_cross_entropy", "liger_fused_linear_cross_entropy", "liger_rms_norm_gated",
      "cut_cross_entropy", "torch_compile", "use_ray", "ray_num_workers", "resources_per_worker", "tensor_parallel_size",
      "context_parallel_size", "sequence_parallel_degree", "dp_shard_size", "unfrozen_parameters", "rl", "peft_use_dora",
      "lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel", "dataloader_num_workers", "dataloader_pin_memory",
      "dataloader_prefetch_factor", "auto_find_batch_size", "tiled_mlp",
      // memory-neutral
      "tokenizer_type", "tokenizer_config", "trust_remote_code", "datasets", "test_datasets", "dataset_prepared_path",
      "val_set_size", "output_dir", "lora_model_dir", "eval_sample_packing", "wandb_project", "wandb_entity",
      "wandb_watch", "wandb_name", "wandb_log_model", "num_epochs", "max_steps", "lr_scheduler", "learning_rate",
      "tf32", "resume_from_checkpoint", "logging_steps", "warmup_ratio", "warmup_steps", "evals_per_epoch",
      "saves_per_epoch", "eval_steps", "save_steps", "weight_decay", "special_tokens", "tokens", "hub_model_id",
      "chat_template", "loss_watchdog_threshold", "loss_watchdog_patience", "eval_batch_size", "seed", "strict",
      "local_rank", "early_stopping_patience", "group_by_length", "train_on_inputs", "max_grad_norm", "adam_beta1",
      "adam_beta2", "adam_epsilon", "lr_scheduler_kwargs", "save_total_limit", "save_strategy", "eval_strategy",
      "eval_table_size", "eval_max_new_tokens", "debug", "deepcompile", "model_config", "peft_use_rslora",
      "lora_fan_in_fan_out", "shuffle_merged_datasets", "dataset_processes", "gptq", "merge_lora", "hub_strategy",
      "save_safetensors", "save_first_step", "special_tokens", "is_llama_derived_model", "is_mistral_derived_model",
      "bnb_config_kwargs", "pad_to_multiple_of", "dataset_exact_deduplication", "output_router_logits"};
  return k;
}

// ---- precision -----------------------------------------------------------------------------------------

struct Dtypes {
  bool bf16 = false;   // after resolve_dtype (auto taken as true: bf16 where the GPU has it)
  bool fp16 = false;
  bool bf16_auto = false;
  const Node* bf16_node = nullptr;
  Precision weights = Precision::fp32;  // cfg.torch_dtype
  std::string weights_text;
};

Dtypes read_dtypes(const Node& root, bool eight_bit) {
  Dtypes d;
  d.bf16_node = root.find("bf16");
  const Node* fp16 = root.find("fp16");
  const bool fp16_on = fp16 && yes(*fp16);
  bool auto_bf16 = true;  // the schema default bf16: "auto" (config.py L559-563)
  if (d.bf16_node) {
    const Node& n = *d.bf16_node;
    if (n.kind == Node::Kind::scalar && !n.quoted && lower(n.text) == "auto") {
      auto_bf16 = true;
    } else if (n.kind == Node::Kind::scalar && !n.quoted &&
               (lower(n.text) == "true" || lower(n.text) == "false" || lower(n.text) == "yes" || lower(n.text) == "no")) {
      auto_bf16 = false;
      d.bf16 = lower(n.text) == "true" || lower(n.text) == "yes";
    } else {
      throw InputError(n.where, fmt::format("bf16 must be auto, true or false (got '{}')", n.text),
                       "axolotl reads bf16: auto (bf16 where the GPU supports it), true or false");
    }
  }
  if (auto_bf16) {
    // resolve_dtype: fp16: true turns auto off; otherwise bf16 where the GPU has it (and fp16 where not).
    d.bf16 = !fp16_on;
    d.bf16_auto = !fp16_on;
  }
  d.fp16 = fp16_on && !d.bf16;
  if (fp16_on && d.bf16)
    throw InputError(fp16->where, "bf16 and fp16 are both true", "axolotl trains in one 16-bit type: keep bf16 or fp16");
  const Node* bfloat16 = root.find("bfloat16");
  const Node* float16 = root.find("float16");
  const bool pure_bf = bfloat16 && yes(*bfloat16), pure_fp = float16 && yes(*float16);
  // cfg.torch_dtype: the dtype the model is loaded in.
  if (d.bf16 || pure_bf) {
    d.weights = Precision::bf16;
    d.weights_text = d.bf16_auto ? "bf16: auto loads bfloat16 weights" : pure_bf ? "bfloat16: true" : "bf16: true loads bfloat16 weights";
  } else if (eight_bit || d.fp16 || pure_fp) {
    d.weights = Precision::fp16;
    d.weights_text = pure_fp ? "float16: true" : d.fp16 ? "fp16: true loads float16 weights" : "load_in_8bit loads float16 weights";
  } else {
    d.weights_text = "float32 weights (no bf16/fp16)";
  }
  return d;
}

// ---- the reader -----------------------------------------------------------------------------------------

void read_axolotl(const Node& root, ReadState& st) {
  check_keys(root, st, known_keys(), "Axolotl");
  TrainingSetup& s = st.s();
  s.runtime.framework = Framework::hf_trainer;
  note_default(st, memplan::path(Choice::framework), "an Axolotl config: the transformers Trainer runs the step (axolotl v0.18.0)");

  // Model: base_model_config (else base_model) names the architecture (normalize_config).
  const Node* model = root.find("base_model_config");
  if (!model) model = root.find("base_model");
  if (!model)
    throw InputError(Where::at_file(st.path), "an Axolotl config needs base_model",
                     fmt::format("axolotl requires base_model (src/axolotl/utils/schemas/model.py @ v0.18.0)"));
  use_model(st, *model);

  // Batch: at least two of the three (check_batch_size_fields, validation.py @ v0.18.0 L218-226).
  const Node* mbs = root.find("micro_batch_size");
  const Node* ga = root.find("gradient_accumulation_steps");
  const Node* bs = root.find("batch_size");
  if ((mbs ? 1 : 0) + (ga ? 1 : 0) + (bs ? 1 : 0) < 2)
    throw InputError(mbs ? mbs->where : ga ? ga->where : bs ? bs->where : Where::at_file(st.path),
                     "axolotl needs at least two of micro_batch_size, gradient_accumulation_steps and batch_size",
                     "axolotl refuses the config otherwise (src/axolotl/utils/schemas/validation.py @ v0.18.0 L218-226)");
  if (mbs) {
    s.batch.micro_batch = positive(*mbs, "micro_batch_size is the number of sequences per GPU per forward");
    note(st, memplan::path(Count::micro_batch), *mbs);
  } else {
    s.batch.micro_batch = 1;
    note_default(st, memplan::path(Count::micro_batch), fmt::format("axolotl default micro_batch_size=1 ({} L77-78)", kTrainingSchema));
  }
  if (ga) {
    s.batch.grad_accum = positive(*ga, "gradient_accumulation_steps counts micro-batches per optimizer step");
    note(st, memplan::path(Count::grad_accum), *ga);
  } else {
    s.batch.grad_accum = 1;
    note_default(st, memplan::path(Count::grad_accum), fmt::format("axolotl default gradient_accumulation_steps=1 ({} L71-72)", kTrainingSchema));
    if (bs)
      st.out.warnings.push_back({bs->where,
                                 "batch_size does not set the accumulation: axolotl keeps its default "
                                 "gradient_accumulation_steps=1 (normalize_config, src/axolotl/utils/config/__init__.py @ "
                                 "v0.18.0 L199-206)",
                                 "set gradient_accumulation_steps (batch_size is derived from it)"});
  }

  // Sequence: sequence_len (512 by default), padded to a multiple of 64 when pad_to_sequence_len,
  // which sample_packing turns on (hint_sample_packing_padding, validation.py @ v0.18.0 L228-242;
  // src/axolotl/core/builders/causal.py @ v0.18.0 L386-390).
  const Node* len = root.find("sequence_len");
  int64_t seq = 512;
  if (len) seq = positive(*len, "sequence_len is the number of tokens per row");
  const Node* packing = root.find("sample_packing");
  const Node* pad = root.find("pad_to_sequence_len");
  const bool packed = packing && yes(*packing);
  const bool padded = pad ? yes(*pad) : packed;
  const int64_t written = seq;
  if (padded) seq = 64 * ((seq + 63) / 64);
  s.batch.seq_len = seq;
  if (len) note(st, memplan::path(Count::seq_len), *len, seq != written
                                              ? fmt::format("sequence_len padded to a multiple of 64 ({})", seq)
                                              : std::string(packed ? "sequence_len (sample_packing fills every row)" : ""));
  else note_default(st, memplan::path(Count::seq_len), fmt::format("axolotl default sequence_len=512 ({} L665-666)", kConfigSchema));

  // Fine-tuning.
  const Node* adapter = root.find("adapter");
  const std::string mode = adapter ? lower(as_text(*adapter)) : "";
  const Node* q4 = root.find("load_in_4bit");
  const Node* q8 = root.find("load_in_8bit");
  const bool four = q4 && yes(*q4), eight = q8 && yes(*q8);
  if (mode.empty() && (four || eight))
    throw InputError((four ? q4 : q8)->where,
                     fmt::format("{}: true without an adapter: axolotl does not fine-tune a quantized model", four ? "load_in_4bit" : "load_in_8bit"),
                     "add adapter: qlora (4-bit) or adapter: lora (8-bit), or turn the quantization off for a full fine-tune "
                     "(src/axolotl/utils/schemas/peft.py @ v0.18.0 validate_adapter)");
  if (!mode.empty() && mode != "lora" && mode != "qlora") {
    if (mode == "llama-adapter")
      st.unmodelled(*adapter, "LLaMA-Adapter's prompt adapters are not modelled; the estimate is a full fine-tune");
    else
      throw InputError(adapter->where, fmt::format("unknown adapter '{}'", as_text(*adapter)),
                       "axolotl's built-in adapters are lora, qlora and llama-adapter (others come from plugins)");
  }
  const Dtypes d = read_dtypes(root, eight && mode == "lora");
  Finetune& f = s.finetune;
  bool upcast_base = false;  // lora + load_in_4bit: the base stays unquantized and is upcast to fp32
  if (mode == "lora" || mode == "qlora") {
    if (mode == "qlora" && eight)
      throw InputError(q8->where, "adapter: qlora with load_in_8bit", "axolotl refuses it (Can't load qlora in 8bit): use load_in_4bit");
    if (mode == "qlora" && !four)
      throw InputError(adapter->where, "adapter: qlora needs load_in_4bit: true",
                       "axolotl refuses qlora without it (Require cfg.load_in_4bit to be True for qlora, "
                       "src/axolotl/utils/schemas/peft.py @ v0.18.0 L202-223)");
    f.mode = mode == "qlora" ? FinetuneMode::qlora : FinetuneMode::lora;
    note(st, memplan::path(Choice::finetune), *adapter);
    if (f.mode == FinetuneMode::qlora) {
      // BitsAndBytesConfig(nf4, bnb_4bit_use_double_quant=True) (src/axolotl/loaders/model.py @ v0.18.0 L712-738).
      f.base_quant = BaseQuant::nf4;
      f.double_quant = true;
      note(st, kBaseQuantPath, *adapter, "adapter: qlora (NF4, src/axolotl/loaders/model.py @ v0.18.0 L712-738)");
      // bnb_config_kwargs update that dict (model.py @ v0.18.0 L734-735).
      const Node* kw = root.find("bnb_config_kwargs");
      const Node* dq = kw && kw->kind == Node::Kind::map ? kw->find("bnb_4bit_use_double_quant") : nullptr;
      if (dq) {
        f.double_quant = yes(*dq);
        note(st, path(Switch::double_quant), *dq, "bnb_config_kwargs.bnb_4bit_use_double_quant (updates axolotl's BitsAndBytesConfig, "
                                               "src/axolotl/loaders/model.py @ v0.18.0 L734-735)");
      } else {
        note_default(st, path(Switch::double_quant), "axolotl QLoRA: bnb_4bit_use_double_quant=True (src/axolotl/loaders/model.py @ v0.18.0 L712-721)");
      }
    } else if (eight) {
      f.base_quant = BaseQuant::int8;
      note(st, kBaseQuantPath, *q8);
    } else if (four) {
      upcast_base = true;
      st.out.warnings.push_back({q4->where,
                                 "adapter: lora with load_in_4bit loads the base unquantized, and prepare_model_for_kbit_training "
                                 "upcasts it to fp32 (src/axolotl/loaders/model.py @ v0.18.0 L1014-1024): the estimate counts "
                                 "an fp32 base",
                                 "use adapter: qlora for a 4-bit base"});
    }
    const Node* r = root.find("lora_r");
    const Node* alpha = root.find("lora_alpha");
    if (!r || !alpha)
      throw InputError(adapter->where, fmt::format("adapter: {} without {}", mode, !r ? "lora_r" : "lora_alpha"),
                       "axolotl has no default for lora_r and lora_alpha: PEFT fails without them (src/axolotl/loaders/"
                       "adapter.py @ v0.18.0 L187-201); set both, e.g. lora_r: 16 and lora_alpha: 32");
    f.lora_rank = positive(*r, "lora_r is the LoRA rank");
    note(st, memplan::path(Count::lora_rank), *r);
    f.lora_alpha = as_number(*alpha);
    note(st, memplan::path(Number::lora_alpha), *alpha);
    if (const Node* n = root.find("lora_dropout")) {
      f.lora_dropout = as_number(*n);
      note(st, memplan::path(Number::lora_dropout), *n);
    } else {
      f.lora_dropout = 0.0;
      note_default(st, memplan::path(Number::lora_dropout), "axolotl default lora_dropout=0.0 (src/axolotl/utils/schemas/peft.py @ v0.18.0)");
    }
    const Node* targets = root.find("lora_target_modules");
    const Node* linear = root.find("lora_target_linear");
    if (linear && yes(*linear)) {
      f.lora_targets = {"all-linear"};  // find_all_linear_names: every linear but the output head
      note(st, memplan::path(List::lora_targets), *linear, "lora_target_linear: true (every linear layer but lm_head)");
    } else if (targets) {
      f.lora_targets = lora_targets(*targets);
      note(st, memplan::path(List::lora_targets), *targets);
    } else {
      throw InputError(adapter->where, fmt::format("adapter: {} adapts nothing: neither lora_target_modules nor lora_target_linear", mode),
                       "axolotl passes an empty target list and PEFT refuses it; set lora_target_linear: true or list "
                       "lora_target_modules (q_proj, v_proj, ...)");
    }
    if (const Node* n = root.find("lora_modules_to_save")) read_modules_to_save(*n, st);
    if (const Node* n = root.find("peft_use_dora"); n && yes(*n))
      st.unmodelled(*n, "DoRA's magnitude vectors and extra activations are not counted; the estimate is plain LoRA");
    for (const char* k : {"lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel"})
      if (const Node* n = root.find(k); n && yes(*n))
        st.unmodelled(*n, "Axolotl's fused LoRA kernels save fewer tensors; the estimate counts PEFT's unfused adapters");
  }

  // Checkpointing and activation offloading (check_gradient_checkpointing_w_offload,
  // validation.py @ v0.18.0 L1425-1447).
  bool offload_acts = false;
  const Node* offload_node = nullptr;
  if (const Node* gc = root.find("gradient_checkpointing")) {
    const std::string v = lower(gc->text);
    if (gc->kind == Node::Kind::scalar && !gc->quoted && (v == "offload" || v == "offload_disk")) {
      s.checkpointing.mode = CheckpointMode::full;
      offload_acts = true;
      offload_node = gc;
    } else {
      s.checkpointing.mode = flag(*gc, "axolotl reads gradient_checkpointing: true, false, offload or offload_disk")
                                 ? CheckpointMode::full : CheckpointMode::none;
    }
    note(st, memplan::path(Choice::checkpointing), *gc);
  } else {
    note_default(st, memplan::path(Choice::checkpointing), fmt::format("axolotl default gradient_checkpointing=False ({} L600-601)", kConfigSchema));
  }
  if (const Node* ao = root.find("activation_offloading")) {
    const std::string v = lower(ao->text);
    if (ao->kind == Node::Kind::scalar && (v == "legacy" || v == "disk")) offload_acts = true, offload_node = ao;
    else if (ao->kind == Node::Kind::scalar && v == "hidden_states")
      st.unmodelled(*ao, "offloading only the hidden states is not modelled; the estimate keeps activations on the GPU");
    else if (flag(*ao, "axolotl reads activation_offloading: true, false, legacy, disk or hidden_states")) offload_acts = true, offload_node = ao;
  }
  if (offload_acts) {
    if (s.checkpointing.mode == CheckpointMode::none)
      throw InputError(offload_node->where, "activation_offloading requires gradient_checkpointing",
                       "axolotl refuses it (validation.py @ v0.18.0 L1444-1447): set gradient_checkpointing: true");
    s.runtime.activation_offload = true;
    note(st, path(Switch::activation_offload), *offload_node);
  }

  // Attention: attn_implementation (v0.12+) or the legacy switches (normalize_attn_implementation,
  // config.py @ v0.18.0 L1525-1575; src/axolotl/utils/schemas/enums.py @ v0.18.0 L117-125).
  const Node* attn = root.find("attn_implementation");
  const std::pair<const char*, const char*> legacy[] = {{"xformers_attention", "xformers"}, {"sage_attention", "sage"},
                                                        {"flex_attention", "flex_attention"}, {"flash_attention", "flash_attention_2"},
                                                        {"sdp_attention", "sdpa"}, {"eager_attention", "eager"}};
  const Node* legacy_on = nullptr;
  const char* legacy_impl = nullptr;
  for (const auto& [key, impl] : legacy)
    if (const Node* n = root.find(key); n && yes(*n) && !legacy_on) legacy_on = n, legacy_impl = impl;
  if (attn && legacy_on)
    throw InputError(legacy_on->where, fmt::format("attn_implementation cannot be combined with {}", legacy_on->path),
                     "axolotl refuses both (the legacy switches are deprecated): keep attn_implementation");
  if (attn) {
    read_attention(*attn, st);
  } else if (legacy_on) {
    Node n = *legacy_on;
    n.text = legacy_impl;
    read_attention(n, st);
    note(st, memplan::path(Choice::attention), *legacy_on, fmt::format("{}: true (attn_implementation {})", legacy_on->path, legacy_impl));
  }

  // Optimizer: adamw_torch_fused by default since v0.8.0 (training.py @ v0.18.0 L122-125).
  if (const Node* n = root.find("optimizer")) {
    read_optimizer(*n, st, true, root.find("optim_args"));
  } else {
    s.optimizer = OptimizerKind::adamw;
    s.runtime.optimizer_impl = OptimizerImpl::fused;
    note_default(st, memplan::path(Choice::optimizer), fmt::format("axolotl default optimizer=adamw_torch_fused ({} L122-123)", kTrainingSchema));
    note_default(st, memplan::path(Choice::optimizer_impl), fmt::format("axolotl default optimizer=adamw_torch_fused ({} L122-123)", kTrainingSchema));
  }

  // Plugins: Liger's kernels and Cut Cross Entropy (their keys are dropped unless the plugin is listed).
  bool liger_plugin = false, cce_plugin = false;
  if (const Node* plugins = root.find("plugins"))
    for (const std::string& p : as_text_list(*plugins)) {
      if (lower(p).find("liger") != std::string::npos) liger_plugin = true;
      if (lower(p).find("cut_cross_entropy") != std::string::npos) cce_plugin = true;
    }
  const char* liger_keys[] = {"liger_rope", "liger_rms_norm", "liger_glu_activation", "liger_swiglu", "liger_layer_norm",
                              "liger_cross_entropy", "liger_fused_linear_cross_entropy", "liger_rms_norm_gated"};
  if (!liger_plugin) {
    for (const char* k : liger_keys)
      if (const Node* n = root.find(k))
        st.out.warnings.push_back({n->where, fmt::format("{} is ignored: the Liger plugin is not listed in plugins:", k),
                                   "add axolotl.integrations.liger.LigerPlugin to plugins: (axolotl drops liger_* keys without it)"});
  } else {
    auto on = [&](const char* k) { const Node* n = root.find(k); return n && yes(*n); };
    const bool rope = on("liger_rope"), rms = on("liger_rms_norm"), glu = on("liger_glu_activation") || on("liger_swiglu");
    // memplan models Liger's RMSNorm, SwiGLU and RoPE kernels together (runtime.liger).
    if (rms && glu) {
      s.runtime.liger = true;
      note(st, path(Switch::liger), *root.find("liger_rms_norm"), "liger_rms_norm + liger_glu_activation (Liger plugin)");
      if (!rope) st.unmodelled(*root.find("liger_rms_norm"), "memplan models Liger's RMSNorm, SwiGLU and RoPE kernels together; "
                                                          "without liger_rope the estimate still counts Liger's RoPE");
    } else {
      for (const char* k : {"liger_rope", "liger_rms_norm", "liger_glu_activation", "liger_swiglu"})
        if (on(k))
          st.unmodelled(*root.find(k), "memplan models Liger's RMSNorm, SwiGLU and RoPE kernels together, not one alone; "
                                       "the estimate keeps the unfused ops");
    }
    if (on("liger_layer_norm")) st.unmodelled(*root.find("liger_layer_norm"), "Liger's LayerNorm kernel is not modelled; the estimate keeps torch's");
    if (on("liger_rms_norm_gated")) st.unmodelled(*root.find("liger_rms_norm_gated"), "Liger's gated RMSNorm kernel is not modelled");
    if (on("liger_cross_entropy"))
      st.unmodelled(*root.find("liger_cross_entropy"), "Liger's (unfused) cross-entropy is not modelled; the estimate upcasts the logits as torch does");
    if (const Node* n = root.find("liger_fused_linear_cross_entropy")) {
      s.runtime.loss = yes(*n) ? LossImpl::fused_linear : LossImpl::standard;
      note(st, memplan::path(Choice::loss), *n);
    } else {
      s.runtime.loss = LossImpl::standard;
      note_default(st, memplan::path(Choice::loss), "liger_fused_linear_cross_entropy not set: the Trainer computes the full logits");
    }
  }
  if (const Node* n = root.find("cut_cross_entropy"); n && !cce_plugin)
    st.out.warnings.push_back({n->where, "cut_cross_entropy is ignored: the Cut Cross Entropy plugin is not listed in plugins:",
                               "add axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin to plugins:"});
  if (cce_plugin) {
    const Node* n = root.find("cut_cross_entropy");
    const bool cce = n ? yes(*n) : true;  // CutCrossEntropyArgs.cut_cross_entropy = True
    if (cce) {
      s.runtime.loss = LossImpl::fused_linear;
      if (n) note(st, memplan::path(Choice::loss), *n, "cut_cross_entropy (no logits materialised)");
      else note_default(st, memplan::path(Choice::loss), "Cut Cross Entropy plugin: cut_cross_entropy=True (src/axolotl/integrations/cut_cross_entropy/args.py @ v0.18.0 L33)");
    }
  }

  // torch.compile: true, or auto (true on torch >= 2.5.1, config.py @ v0.18.0 L2040-2060).
  if (const Node* n = root.find("torch_compile")) {
    const bool on = (n->kind == Node::Kind::scalar && lower(n->text) == "auto") ? s.runtime.torch_at_least(2, 5)
                                                                                : flag(*n, "axolotl reads torch_compile: true, false or auto");
    s.runtime.compile = on;
    note(st, path(Switch::compile), *n);
  }
  if (const Node* n = root.find("auto_find_batch_size"); n && yes(*n))
    st.unmodelled(*n, "the Trainer halves the batch after an out-of-memory error; the estimate uses micro_batch_size as given");
  for (const char* k : {"context_parallel_size", "sequence_parallel_degree"})
    if (const Node* n = root.find(k); n && as_int(*n) > 1)
      st.unmodelled(*n, "context parallelism splits each sequence over GPUs; the estimate keeps whole sequences on each GPU");
  if (const Node* n = root.find("tiled_mlp"); n && yes(*n))
    st.unmodelled(*n, "tiled MLP computes the MLP in sequence tiles; the estimate keeps the whole MLP activations");
  if (const Node* n = root.find("unfrozen_parameters"))
    st.unmodelled(*n, "only the matching parameters train; the estimate trains every parameter");
  if (const Node* n = root.find("rl"))
    st.unmodelled(*n, "preference training runs chosen and rejected rows and may keep a reference model; the estimate is "
                      "plain supervised fine-tuning");
  for (const char* k : {"unsloth_cross_entropy_loss", "unsloth_lora_mlp", "unsloth_lora_qkv", "unsloth_lora_o",
                        "unsloth_rms_norm", "unsloth_rope"})
    if (const Node* n = root.find(k); n && yes(*n))
      throw InputError(n->where, fmt::format("{} was removed in axolotl 0.17", k),
                       "use lora_mlp_kernel, lora_qkv_kernel or lora_o_kernel (check_deprecated_unsloth_fields, "
                       "validation.py @ v0.18.0 L59-77)");
  if (const Node* n = root.find("dataloader_num_workers")) {
    s.data.num_workers = as_int(*n);
    note(st, memplan::path(Setting::num_workers), *n);
  }
  if (const Node* n = root.find("dataloader_pin_memory")) {
    s.data.pin_memory = yes(*n);
    note(st, memplan::path(Setting::pin_memory), *n);
  }
  if (const Node* n = root.find("dataloader_prefetch_factor")) {
    s.data.prefetch_factor = as_int(*n);
    note(st, memplan::path(Setting::prefetch_factor), *n);
  }

  // GPUs: Ray's workers x GPUs per worker (RayConfig, src/axolotl/utils/schemas/integrations.py @
  // v0.18.0 L157-178); otherwise the launcher's WORLD_SIZE.
  if (const Node* ray = root.find("use_ray"); ray && yes(*ray)) {
    int64_t workers = 1, per = 1;
    const Node* w = root.find("ray_num_workers");
    const Node* g = nullptr;
    if (w) workers = positive(*w, "ray_num_workers is the number of Ray workers");
    if (const Node* res = root.find("resources_per_worker"); res && res->kind == Node::Kind::map)
      if ((g = res->find("GPU"))) per = positive(*g, "resources_per_worker.GPU is the GPUs per Ray worker");
    s.parallel.num_gpus = count_product({{workers, w}, {per, g}}, kMaxGpus,
                                        "ray_num_workers x resources_per_worker.GPU (the GPU count)", ray->where);
    note(st, memplan::path(Count::num_gpus), w ? *w : *ray, fmt::format("use_ray: ray_num_workers {} x {} GPU per worker", workers, per));
  }
  if (const Node* n = root.find("tensor_parallel_size"); n && as_int(*n) > 1) {
    s.parallel.tensor_parallel = positive(*n, "tensor_parallel_size is the tensor-parallel degree");
    note(st, memplan::path(Count::tensor_parallel), *n);
  }
  if (const Node* n = root.find("dp_shard_size"); n && as_int(*n) > 1)
    st.unmodelled(*n, "an explicit FSDP shard mesh is not modelled; the estimate shards over every data-parallel GPU");

  // Engine: DeepSpeed (a path or a mapping) or FSDP (the fsdp: list, or fsdp_config alone: full_shard).
  const Node* ds = root.find("deepspeed");
  const Node* fsdp = root.find("fsdp");
  const Node* fsdp_cfg = root.find("fsdp_config");
  std::optional<DeepSpeedRead> dsr;
  if (ds) {
    DeepSpeedFill fill;
    fill.micro_batch = s.batch.micro_batch;
    fill.grad_accum = s.batch.grad_accum;
    fill.bf16 = d.bf16;
    fill.fp16 = d.fp16;
    fill.bf16_key = d.bf16_auto ? "bf16: auto" : "bf16";
    dsr = read_deepspeed(*ds, st, fill);
    if (!dsr->optimizer_block && !st.out.origin.fields.count(memplan::path(Choice::optimizer_impl)) &&
        !st.out.origin.defaults.count(memplan::path(Choice::optimizer_impl))) {
      s.runtime.optimizer_impl = OptimizerImpl::automatic;
      note_default(st, memplan::path(Choice::optimizer_impl), "the HF Trainer builds the optimizer when the DeepSpeed config has none");
    }
  }
  const bool use_fsdp = !ds && (fsdp || fsdp_cfg);
  if (ds && (fsdp || fsdp_cfg))
    throw InputError(ds->where, "deepspeed and fsdp are both set", "axolotl's Trainer runs one of them: keep deepspeed or fsdp");
  if (use_fsdp) {
    // fsdp: [full_shard, auto_wrap] goes to TrainingArguments; fsdp_config alone means fsdp=True
    // (src/axolotl/core/builders/base.py @ v0.18.0 L684-686).
    std::optional<FsdpWords> words = fsdp ? fsdp_words(*fsdp) : std::nullopt;
    FsdpWords w = words ? *words : FsdpWords{};
    s.parallel.fsdp = w.mode;
    if (fsdp) st.out.origin.set(memplan::path(Choice::fsdp), w.where);
    else note(st, memplan::path(Choice::fsdp), *fsdp_cfg, "fsdp_config without fsdp: (full_shard)");
    if (w.zero2_hybrid) st.unmodelled(*fsdp, "hybrid_shard_zero2 keeps gathered parameters until backward; estimated as hybrid_shard");
    if (w.offload) {
      s.parallel.offload = Offload::optimizer_and_params;
      note(st, memplan::path(Choice::offload), *fsdp, "fsdp: offload");
    }
    if (fsdp_cfg) {
      const Node cfg = fsdp_config(*fsdp_cfg, st);
      int version = 1;
      const Node* v = root.find("fsdp_version");
      if (!v) v = cfg.find("fsdp_version") ? cfg.find("fsdp_version") : cfg.find("version");
      if (v) {
        version = static_cast<int>(as_int(*v));
        if (version != 1 && version != 2) throw InputError(v->where, fmt::format("unknown FSDP version {}", version), "FSDP is version 1 or 2");
        note(st, memplan::path(Setting::fsdp_version), *v);
      }
      s.parallel.fsdp_version = version;
      // setup_fsdp_envs exports offload_params, activation_checkpointing and reshard_after_forward to
      // accelerate (src/axolotl/utils/trainer.py @ v0.18.0 L591-622).
      if (const Node* o = cfg.find("offload_params"); o && yes(*o)) {
        s.parallel.offload = Offload::optimizer_and_params;
        note(st, memplan::path(Choice::offload), *o, "fsdp_config.offload_params (FSDP CPUOffload)");
      }
      if (const Node* ac = cfg.find("activation_checkpointing"); ac && yes(*ac)) {
        s.checkpointing.mode = CheckpointMode::full;
        note(st, memplan::path(Choice::checkpointing), *ac);
      }
      if (const Node* r = cfg.find("reshard_after_forward"); r && version == 2) {
        s.parallel.fsdp = yes(*r) ? FsdpMode::full_shard : FsdpMode::shard_grad_op;
        note(st, memplan::path(Choice::fsdp), *r);
      }
      if (const Node* ss = cfg.find("sharding_strategy")) {
        bool hybrid = false;
        const auto m = fsdp_strategy(as_text(*ss), &hybrid);
        if (!m || *m != s.parallel.fsdp)
          st.out.warnings.push_back({ss->where,
                                     fmt::format("fsdp_config.sharding_strategy {} is not an Axolotl FSDPConfig field: axolotl "
                                                 "drops it and shards {}",
                                                 as_text(*ss), to_string(s.parallel.fsdp)),
                                     "name the strategy in fsdp: (e.g. [shard_grad_op, auto_wrap]) or with FSDP2's "
                                     "reshard_after_forward"});
      }
    }
  }

  // The precision regime: the loaded dtype, the autocast flag, and the engine.
  const bool full = f.mode == FinetuneMode::full;
  const bool flag16 = d.bf16 || d.fp16;
  const Precision weights = upcast_base ? Precision::fp32 : d.weights;
  const std::string flag_text = d.bf16_auto ? "bf16: auto" : d.bf16 ? "bf16: true" : "fp16: true";
  const Node* flag_node = d.bf16 ? d.bf16_node : root.find("fp16");
  auto set_precision = [&](Precision p, const std::string& why) {
    s.precision = p;
    if (flag_node) note(st, memplan::path(Choice::precision), *flag_node, why);
    else note_default(st, memplan::path(Choice::precision), fmt::format("{} ({} default bf16: auto, L559-563; {})", why, kConfigSchema, kResolveDtype));
  };
  if (dsr) {
    s.precision = *dsr->precision;
    Where w = dsr->precision_where;
    w.key = dsr->precision_text;
    st.out.origin.set(memplan::path(Choice::precision), w);
  } else if (use_fsdp && full && flag16) {
    set_precision(d.bf16 ? Precision::mixed_bf16 : Precision::mixed_fp16,
                  fmt::format("{} under FSDP: fp32 shards of the trainable weights, 16-bit compute (src/accelerate/accelerator.py "
                              "@ v1.14.0 L1985-2031)",
                              flag_text));
  } else if (weights != Precision::fp32) {
    set_precision(weights, fmt::format("{}: 16-bit weights, gradients and optimizer states", d.weights_text));
  } else if (flag16) {
    set_precision(d.bf16 ? Precision::amp_bf16 : Precision::amp_fp16,
                  fmt::format("{}: autocast over fp32 weights{}", flag_text, upcast_base ? " (the base upcast to fp32)" : ""));
  } else {
    s.precision = Precision::fp32;
    if (d.bf16_node) note(st, memplan::path(Choice::precision), *d.bf16_node);
    else note_default(st, memplan::path(Choice::precision), fmt::format("fp16: true absent and bf16 off ({})", kResolveDtype));
  }
  // bf16: auto is decided by the GPU (is_torch_bf16_gpu_available): the builder knows it.
  st.out.precision_follows_device = d.bf16_auto;
  if (!st.out.origin.fields.count(memplan::path(Count::num_gpus)) && (s.parallel.zero_stage > 0 || s.parallel.fsdp != FsdpMode::none))
    note_default(st, memplan::path(Count::num_gpus), "not in the file: axolotl runs on the launcher's WORLD_SIZE; pass --gpus");
}

}  // namespace

void read_axolotl_config(const Node& root, ReadState& st) { read_axolotl(root, st); }

}  // namespace memplan::profiles::detail
