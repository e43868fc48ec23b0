// NeMo 1.x / Megatron-style configs (examples/nlp/language_modeling/conf/megatron_*_config.yaml,
// read by megatron_gpt_pretraining.py), as NVIDIA/NeMo v2.4.0 reads them: trainer: is Lightning's,
// model: holds Megatron's batch, parallelism, recomputation and the architecture (which becomes an
// inline model; the vocabulary is the tokenizer's, padded to make_vocab_size_divisible_by x TP).
// Defaults are the code's cfg.get(...) defaults (nemo/collections/nlp/models/language_modeling/
// megatron_base_model.py and megatron_gpt_model.py @ v2.4.0), not the example files' values.
#include <fmt/format.h>

#include <numeric>

#include "estimator/model.h"
#include "profiles/formats.h"

namespace memplan::profiles::detail {
namespace {

struct Nemo {
  explicit Nemo(ReadState& state) : st(state) {}
  ReadState& st;
  // trainer:
  int64_t devices = 1, nodes = 1;
  const Node* devices_node = nullptr;
  const Node* nodes_node = nullptr;
  bool devices_auto = false;
  const Node* precision = nullptr;
  // model: batch and parallelism
  int64_t micro = 1, global = 0, tp = 1, pp = 1;
  const Node* micro_node = nullptr;
  const Node* global_node = nullptr;
  const Node* tp_node = nullptr;
  const Node* seq_node = nullptr;
  bool o2 = false;
  const Node* o2_node = nullptr;
  const Node* optim = nullptr;
  std::string optim_name = "fused_adam";
  const Node* granularity = nullptr;
  const Node* method = nullptr;
  const Node* ckpt_layers = nullptr;
  const Node* sequence_parallel = nullptr;
  bool te = false, mcore = false, flash = false;
  const Node* te_node = nullptr;
  const Node* flash_node = nullptr;
  // model: architecture (Megatron's TransformerConfig names)
  const Node *layers = nullptr, *hidden = nullptr, *ffn = nullptr, *heads = nullptr, *groups = nullptr, *kv_channels = nullptr;
  const Node *activation = nullptr, *normalization = nullptr, *positions = nullptr, *rotary = nullptr, *tie = nullptr,
             *bias = nullptr, *max_pos = nullptr, *divisible = nullptr, *hidden_dropout = nullptr, *attention_dropout = nullptr,
             *openai_gelu = nullptr, *experts = nullptr, *topk = nullptr, *tokenizer = nullptr;
  const Node* restore = nullptr;
  const Node* peft = nullptr;

  TrainingSetup& s() { return st.s(); }
};
using Table = KeyTable<Nemo>;

template <const Node* Nemo::*slot>
void keep(const Node& n, Nemo& t) {
  t.*slot = &n;
}

// An OmegaConf interpolation ("${.encoder_seq_length}"): a value the file states elsewhere.
bool interpolation(const Node& n) { return n.kind == Node::Kind::scalar && n.text.rfind("${", 0) == 0; }

const Table& trainer_keys() {
  static const Table k = {
      {{"devices"}, [](const Node& n, Nemo& t) {
         t.devices_node = &n;
         if (n.kind == Node::Kind::scalar && (lower(n.text) == "auto" || n.text == "-1")) {
           t.devices_auto = true;
           return;
         }
         t.devices = as_count(n);
         if (t.devices < 1) type_error(n, "a positive integer, -1 or \"auto\"");
       }},
      {{"num_nodes"}, [](const Node& n, Nemo& t) {
         t.nodes = as_count(n);
         if (t.nodes < 1) type_error(n, "a positive integer");
         t.nodes_node = &n;
       }},
      {{"precision"}, keep<&Nemo::precision>},
      {{"accumulate_grad_batches"}, [](const Node& n, Nemo& t) {
         if (as_int(n) != 1)
           throw InputError(n.where, "trainer.accumulate_grad_batches must stay 1 in NeMo's Megatron models (\"grad acc is "
                                     "automatic\": it comes from model.global_batch_size)",
                            "set model.global_batch_size to micro_batch_size x data-parallel ranks x accumulation");
       }},
      {{"accelerator", "logger", "enable_checkpointing", "use_distributed_sampler", "max_epochs", "max_steps", "log_every_n_steps",
        "val_check_interval", "limit_val_batches", "limit_test_batches", "gradient_clip_val", "benchmark",
        "enable_model_summary", "num_sanity_val_steps", "callbacks", "strategy", "plugins", "max_time"},
       [](const Node&, Nemo&) {}},
  };
  return k;
}

const Table& optim_keys() {
  static const Table k = {
      {{"name"}, [](const Node& n, Nemo& t) {
         t.optim_name = lower(as_text(n));
         t.optim = &n;
       }},
      {{"lr", "weight_decay", "betas", "sched", "bucket_cap_mb", "overlap_grad_sync", "overlap_param_sync", "contiguous_grad_buffer",
        "contiguous_param_buffer", "grad_sync_dtype", "eps"},
       [](const Node&, Nemo&) {}},
  };
  return k;
}

const Table& peft_keys() {
  static const Table k = {
      {{"peft_scheme"}, [](const Node& n, Nemo& t) {
         const std::string v = lower(as_text(n));
         if (v == "lora") {
           t.s().finetune.mode = FinetuneMode::lora;
           t.st.note(memplan::path(Choice::finetune), n);
         } else if (v != "none" && !v.empty()) {
           t.st.unmodelled(n, fmt::format("the {} PEFT scheme is not modelled: estimated as a full fine-tune", v));
         }
       }},
      {{"lora_tuning"}, [](const Node& n, Nemo& t) {
         if (n.kind != Node::Kind::map) not_a_map(n);
         Finetune& f = t.s().finetune;
         if (const Node* r = n.find("adapter_dim")) t.st.set(memplan::path(Count::lora_rank), f.lora_rank, as_count(*r), *r);
         if (const Node* a = n.find("alpha"); a && !interpolation(*a)) t.st.set(memplan::path(Number::lora_alpha), f.lora_alpha, as_number(*a), *a);
         if (const Node* d = n.find("adapter_dropout")) t.st.set(memplan::path(Number::lora_dropout), f.lora_dropout, as_number(*d), *d);
         if (const Node* m = n.find("target_modules")) {
           // attention_qkv, attention_dense, mlp_fc1, mlp_fc2 (megatron_gpt_finetuning_config.yaml @ v2.4.0).
           std::vector<std::string> targets;
           for (const std::string& name : as_text_list(*m)) {
             if (name == "attention_qkv" || name == "attention") targets.insert(targets.end(), {"q", "k", "v"});
             if (name == "attention_dense" || name == "attention") targets.push_back("o");
             if (name == "mlp_fc1" || name == "mlp") targets.insert(targets.end(), {"gate", "up"});
             if (name == "mlp_fc2" || name == "mlp") targets.push_back("down");
             if (name == "all") targets = {"q", "k", "v", "o", "gate", "up", "down"};
           }
           t.st.set(memplan::path(List::lora_targets), f.lora_targets, targets, *m);
         }
       }},
      {{"restore_from_path", "adapter_tuning", "ptuning", "ia3_tuning"}, [](const Node&, Nemo&) {}},
  };
  return k;
}

const Table& model_keys() {
  static const Table k = {
      {{"micro_batch_size"}, [](const Node& n, Nemo& t) {
         t.micro = as_count(n);
         if (t.micro < 1) type_error(n, "a positive integer");
         t.micro_node = &n;
       }},
      {{"global_batch_size"}, [](const Node& n, Nemo& t) {
         t.global = as_count(n);
         t.global_node = &n;
       }},
      {{"encoder_seq_length", "seq_length"}, [](const Node& n, Nemo& t) {
         t.seq_node = &n;
         t.st.set(memplan::path(Count::seq_len), t.s().batch.seq_len, as_count(n), n);
       }},
      {{"tensor_model_parallel_size"}, [](const Node& n, Nemo& t) {
         t.tp = as_count(n);
         t.tp_node = &n;
         t.st.set(memplan::path(Count::tensor_parallel), t.s().parallel.tensor_parallel, t.tp, n);
       }},
      {{"pipeline_model_parallel_size"}, [](const Node& n, Nemo& t) {
         t.pp = as_count(n);
         t.st.set(memplan::path(Count::pipeline_parallel), t.s().parallel.pipeline_parallel, t.pp, n);
       }},
      {{"expert_model_parallel_size"}, [](const Node& n, Nemo& t) {
         t.st.set(memplan::path(Count::expert_parallel), t.s().parallel.expert_parallel, as_count(n), n);
       }},
      {{"virtual_pipeline_model_parallel_size"}, [](const Node& n, Nemo& t) {
         if (as_int(n) > 1)
           t.st.unmodelled(n, "interleaved pipeline stages keep more micro-batches of activations in flight; memplan holds one");
       }},
      {{"context_parallel_size"}, [](const Node& n, Nemo& t) {
         if (as_int(n) > 1)
           t.st.unmodelled(n, "context parallelism is not modelled: the estimate holds the activations of the whole sequence "
                              "on each rank (an over-estimate)");
       }},
      {{"sequence_parallel"}, [](const Node& n, Nemo& t) {
         if (as_bool(n)) t.sequence_parallel = &n;
       }},
      {{"megatron_amp_O2"}, [](const Node& n, Nemo& t) {
         t.o2 = as_bool(n);
         t.o2_node = &n;
       }},
      {{"optim"}, [](const Node& n, Nemo& t) { read_section(n, {&optim_keys()}, t, &t.st.out.warnings); }},
      {{"activations_checkpoint_granularity"}, keep<&Nemo::granularity>},
      {{"activations_checkpoint_method"}, keep<&Nemo::method>},
      {{"activations_checkpoint_num_layers"}, keep<&Nemo::ckpt_layers>},
      {{"num_micro_batches_with_partial_activation_checkpoints", "activations_checkpoint_layers_per_pipeline"},
       [](const Node& n, Nemo& t) {
         t.st.unmodelled(n, "partial recomputation across pipeline micro-batches is not modelled: every micro-batch is "
                            "estimated with the same checkpointing");
       }},
      {{"transformer_engine"}, [](const Node& n, Nemo& t) {
         t.te = as_bool(n);
         t.te_node = &n;
       }},
      {{"mcore_gpt"}, [](const Node& n, Nemo& t) { t.mcore = as_bool(n); }},
      {{"use_flash_attention"}, [](const Node& n, Nemo& t) {
         t.flash = as_bool(n);
         t.flash_node = &n;
       }},
      {{"fp8"}, [](const Node& n, Nemo& t) { t.st.set(Switch::fp8, as_bool(n), n); }},
      {{"fsdp"}, [](const Node& n, Nemo& t) {
         if (as_bool(n)) t.st.set(memplan::path(Choice::fsdp), t.s().parallel.fsdp, FsdpMode::full_shard, n);
       }},
      {{"fsdp_sharding_strategy"}, [](const Node& n, Nemo& t) {
         if (t.s().parallel.fsdp == FsdpMode::none) return;
         const std::string v = lower(as_text(n));
         const FsdpMode m = v == "grad" ? FsdpMode::shard_grad_op : v == "hybrid" ? FsdpMode::hybrid_shard : FsdpMode::full_shard;
         t.st.set(memplan::path(Choice::fsdp), t.s().parallel.fsdp, m, n);
       }},
      {{"cpu_offloading"}, [](const Node& n, Nemo& t) {
         if (!as_bool(n)) return;
         t.st.set(Switch::activation_offload, true, n);
         t.st.unmodelled(n, "Transformer Engine offloads the activations of num_layers - 1 layers (and, with "
                            "cpu_offloading_weights, their weights) to the host; the estimate offloads every layer's activations "
                            "and keeps the weights");
       }},
      {{"fp16_lm_cross_entropy"}, [](const Node& n, Nemo& t) {
         // The unreduced cross-entropy in 16 bits: no fp32 copy of the logits.
         if (as_bool(n)) t.st.set(Switch::loss_upcast, false, n);
       }},
      {{"fp32_residual_connection"}, [](const Node& n, Nemo& t) {
         if (as_bool(n))
           t.st.unmodelled(n, "fp32 residual connections are not modelled: the residual stream is estimated in the compute dtype");
       }},
      {{"ub_tp_comm_overlap"}, [](const Node& n, Nemo& t) {
         if (as_bool(n))
           t.st.unmodelled(n, "Transformer Engine's userbuffers for TP communication overlap are not counted");
       }},
      {{"gradient_as_bucket_view"}, [](const Node& n, Nemo& t) {
         t.st.set(memplan::path(Setting::ddp_bucket_view), t.s().parallel.ddp_bucket_view, as_bool(n), n);
       }},
      {{"num_layers"}, keep<&Nemo::layers>},
      {{"hidden_size"}, keep<&Nemo::hidden>},
      {{"ffn_hidden_size"}, keep<&Nemo::ffn>},
      {{"num_attention_heads"}, keep<&Nemo::heads>},
      {{"num_query_groups"}, keep<&Nemo::groups>},
      {{"kv_channels"}, keep<&Nemo::kv_channels>},
      {{"activation"}, keep<&Nemo::activation>},
      {{"normalization"}, keep<&Nemo::normalization>},
      {{"position_embedding_type"}, keep<&Nemo::positions>},
      {{"rotary_percentage"}, keep<&Nemo::rotary>},
      {{"share_embeddings_and_output_weights"}, keep<&Nemo::tie>},
      {{"bias"}, keep<&Nemo::bias>},
      {{"max_position_embeddings"}, keep<&Nemo::max_pos>},
      {{"make_vocab_size_divisible_by"}, keep<&Nemo::divisible>},
      {{"hidden_dropout"}, keep<&Nemo::hidden_dropout>},
      {{"attention_dropout"}, keep<&Nemo::attention_dropout>},
      {{"openai_gelu"}, keep<&Nemo::openai_gelu>},
      {{"num_moe_experts"}, keep<&Nemo::experts>},
      {{"moe_router_topk"}, keep<&Nemo::topk>},
      {{"tokenizer"}, keep<&Nemo::tokenizer>},
      {{"restore_from_path"}, keep<&Nemo::restore>},
      {{"peft"}, [](const Node& n, Nemo& t) {
         t.peft = &n;
         read_section(n, {&peft_keys()}, t, &t.st.out.warnings);
       }},
      {{"transformer_block_type"}, [](const Node& n, Nemo& t) {
         if (lower(as_text(n)) != "pre_ln")
           t.st.unmodelled(n, "post-LN / normformer blocks are estimated as pre-LN blocks (the norms' saved inputs differ)");
       }},
      {{"data"}, [](const Node& n, Nemo& t) {
         // Fine-tuning configs give the length per dataset (data.train_ds.max_seq_length).
         if (n.kind != Node::Kind::map || t.seq_node) return;
         if (const Node* train = n.find("train_ds"); train && train->kind == Node::Kind::map)
           if (const Node* m = train->find("max_seq_length"); m && !interpolation(*m)) {
             t.seq_node = m;
             t.st.set(memplan::path(Count::seq_len), t.s().batch.seq_len, as_count(*m), *m);
           }
       }},
      {{"ffn_dropout", "init_method_std", "use_scaled_init_method", "apply_query_key_layer_scaling", "layernorm_epsilon",
        "do_layer_norm_weight_decay", "pre_process", "post_process", "persist_layer_norm", "headscale",
        "normalize_attention_scores", "attention_type", "overlap_p2p_comm", "batch_p2p_comm", "seq_len_interpolation_factor",
        "scale_positional_embedding", "drop_layers", "reset_lr", "reset_lr_steps", "native_amp_init_scale",
        "native_amp_growth_interval", "hysteresis",
        "grad_allreduce_chunk_size_mb", "grad_div_ar_fusion", "gradient_accumulation_fusion", "bias_activation_fusion",
        "bias_dropout_add_fusion", "masked_softmax_fusion", "get_attention_mask_from_fusion", "apply_rope_fusion", "seed",
        "resume_from_checkpoint", "use_cpu_initialization", "onnx_safe", "apex_transformer_log_level", "sync_batch_comm",
        "nccl_communicator_config_path", "validation_param_sync_overlap", "fsdp_grad_reduce_dtype", "fsdp_sharded_checkpoint",
        "restore_from_ckpt", "skip_train", "rampup_batch_size", "nsys_profile", "gc_interval",
        "ub_tp_comm_overlap_cfg", "use_emha", "sharp", "enable_megatron_timers", "megatron_timer_kwargs",
        "cpu_offloading_num_layers", "cpu_offloading_activations", "cpu_offloading_weights", "fp8_e4m3", "fp8_hybrid",
        "fp8_margin", "fp8_interval", "fp8_amax_history_len", "fp8_amax_compute_algo", "reduce_amax", "layernorm_zero_centered_gamma",
        "rotary_base", "mcore_customization_config", "dist_ckpt_format", "dist_ckpt_load_on_device", "dist_ckpt_parallel_save",
        "dist_ckpt_parallel_save_within_dp", "dist_ckpt_parallel_load", "dist_ckpt_torch_dist_multiproc",
        "dist_ckpt_assume_constant_structure", "dist_ckpt_parallel_dist_opt", "dist_ckpt_load_strictness",
        "moe_grouped_gemm", "moe_aux_loss_coeff", "moe_router_load_balancing_type", "moe_token_dispatcher_type", "name"},
       [](const Node&, Nemo&) {}},
  };
  return k;
}

const Table& root_keys() {
  static const Table k = {
      {{"trainer"}, [](const Node& n, Nemo& t) { read_section(n, {&trainer_keys()}, t, &t.st.out.warnings); }},
      {{"model"}, [](const Node& n, Nemo& t) { read_section(n, {&model_keys()}, t, &t.st.out.warnings); }},
      {{"name", "defaults", "exp_manager", "s3_checkpointing", "hydra", "inference"}, [](const Node&, Nemo&) {}},
  };
  return k;
}

int64_t count_of(const Node* n, int64_t otherwise) {
  if (!n || interpolation(*n)) return otherwise;
  const int64_t v = as_count(*n);
  if (v < 1) type_error(*n, "a positive integer");
  return v;
}

// The vocabulary is the tokenizer's: GPT-2 BPE's 50257 is known; a SentencePiece or HF tokenizer
// file is not read, so Llama's 32000 is assumed with a warning.
int64_t vocabulary(Nemo& t) {
  const Node* tk = t.tokenizer;
  if (tk && tk->kind == Node::Kind::map) {
    const Node* type = tk->find("type");
    if (const Node* v = tk->find("vocab_size")) return as_count(*v);
    if (type && type->kind == Node::Kind::scalar) {
      const std::string ty = lower(type->text);
      if (ty == "gpt2bpetokenizer" || ty == "gpt2") return 50257;
    }
  }
  t.st.unmodelled(tk ? *tk : *t.hidden,
                  "the vocabulary is the tokenizer's and not in a NeMo config (a SentencePiece or HF tokenizer file): "
                  "estimating 32000 tokens (Llama's)",
                  "pass --model for the exact architecture, or give model.tokenizer.vocab_size");
  return 32000;
}

void read_architecture(Nemo& t) {
  if (!t.hidden || !t.layers || !t.heads) {
    const char* why = t.restore ? "this NeMo fine-tuning config restores its model from a .nemo file (model.restore_from_path)"
                                : "this NeMo config has no model.num_layers / hidden_size / num_attention_heads";
    t.st.out.no_model = Warning{t.restore ? t.restore->where : Where::at_file(t.st.path), why,
                                "pass --model PRESET|HF_ID|config.json for the architecture"};
    return;
  }
  ModelSpec m = family_defaults_or_throw("llama", Where{});
  m.name = t.st.file.stem().string();
  m.model_type = "llama";
  m.hidden_size = count_of(t.hidden, 0);
  m.num_layers = count_of(t.layers, 0);
  m.num_attention_heads = count_of(t.heads, 0);
  m.num_key_value_heads = count_of(t.groups, m.num_attention_heads);  // null: multi-head attention
  m.head_dim = count_of(t.kv_channels, m.hidden_size / std::max<int64_t>(1, m.num_attention_heads));
  m.intermediate_size = count_of(t.ffn, 4 * m.hidden_size);
  // Megatron's fused linear_qkv, and linear_fc1 giving gate|up for the gated activations.
  m.fused_qkv = true;
  const std::string act = t.activation ? lower(as_text(*t.activation)) : "gelu";
  const bool openai = t.openai_gelu && as_bool(*t.openai_gelu);
  if (act == "gelu" || act == "fast-gelu") {
    m.activation = openai ? Activation::gelu_tanh : Activation::gelu;
    m.gated_mlp = false;
  } else if (act == "geglu" || act == "fast-geglu") {
    m.activation = openai ? Activation::gelu_tanh : Activation::gelu;
    m.gated_mlp = true;
  } else if (act == "swiglu" || act == "fast-swiglu") {
    m.activation = Activation::silu;
    m.gated_mlp = true;
  } else if (act == "reglu" || act == "fast-reglu") {
    m.activation = Activation::relu;
    m.gated_mlp = true;
  } else if (act == "squared-relu") {
    m.activation = Activation::relu;
    m.gated_mlp = false;
    t.st.unmodelled(*t.activation, "squared ReLU saves one more tensor than ReLU: estimated as ReLU");
  } else {
    throw InputError(t.activation->where, fmt::format("unknown activation '{}'", as_text(*t.activation)),
                     "expected one of: gelu, geglu, swiglu, reglu, squared-relu, fast-geglu, fast-swiglu, fast-reglu");
  }
  m.fused_gate_up = m.gated_mlp;
  const std::string norm = t.normalization ? lower(as_text(*t.normalization)) : "layernorm";
  if (norm == "rmsnorm") {
    m.norm = NormKind::rms_norm;
    m.norm_bias = false;
  } else if (norm == "layernorm" || norm == "layernorm1p" || norm == "low_precision_layernorm") {
    m.norm = NormKind::layer_norm;
    m.norm_bias = true;
  } else {
    throw InputError(t.normalization->where, fmt::format("unknown normalization '{}'", as_text(*t.normalization)),
                     "expected one of: layernorm, layernorm1p, rmsnorm");
  }
  const std::string pos = t.positions ? lower(as_text(*t.positions)) : "learned_absolute";
  if (pos == "learned_absolute") m.positions = PositionKind::learned;
  else if (pos == "rope") m.positions = PositionKind::rotary;
  else if (pos == "alibi") m.positions = PositionKind::alibi;
  else if (pos == "none") m.positions = PositionKind::none;
  else {
    m.positions = PositionKind::rotary;
    t.st.unmodelled(*t.positions, fmt::format("{} positions are estimated as rotary embeddings", pos));
  }
  if (t.rotary) t.st.set(memplan::path(&ModelSpec::rotary_fraction), m.rotary_fraction, as_number(*t.rotary), *t.rotary);
  const bool bias = t.bias ? as_bool(*t.bias) : true;  // bias: True (megatron_gpt_model.py cfg.get('bias', True))
  m.qkv_bias = m.o_bias = m.mlp_bias = bias;
  m.tie_word_embeddings = t.tie ? as_bool(*t.tie) : true;
  m.max_position_embeddings = count_of(t.max_pos, t.s().batch.seq_len);
  m.hidden_dropout = t.hidden_dropout ? as_number(*t.hidden_dropout) : 0.1;
  m.attention_dropout = t.attention_dropout ? as_number(*t.attention_dropout) : 0.1;
  if (t.experts) {
    m.num_experts = count_of(t.experts, 0);
    m.experts_per_token = count_of(t.topk, 2);
    m.moe_intermediate_size = m.intermediate_size;
  }
  // _vocab_size_with_padding (megatron_base_model.py @ v2.4.0): up to a multiple of
  // make_vocab_size_divisible_by x tensor_model_parallel_size.
  // A tensor-parallel size out of range is reported by validate() at its line; the padding here
  // must not divide by it first (fuzz_load_config: tensor_model_parallel_size 0 divided by zero).
  const int64_t divisible = count_of(t.divisible, 128);
  if (divisible > 1'000'000)
    type_error(*t.divisible, "a positive integer up to 1000000", "Megatron pads the vocabulary to a multiple of it, usually 128");
  const int64_t multiple = divisible * std::clamp<int64_t>(t.tp, 1, 1'000'000);
  const int64_t v = vocabulary(t);
  m.vocab_size = checked_add(v, multiple - 1, "the padded vocabulary") / multiple * multiple;
  TrainingSetup& s = t.s();
  s.model = m;
  t.st.out.has_model = true;
  auto at = [&](auto member, const Node* n) {
    if (n) t.st.note(memplan::path(member), *n);
  };
  at(&ModelSpec::hidden_size, t.hidden);
  at(&ModelSpec::num_layers, t.layers);
  at(&ModelSpec::num_attention_heads, t.heads);
  at(&ModelSpec::num_key_value_heads, t.groups ? t.groups : t.heads);
  at(&ModelSpec::head_dim, t.kv_channels ? t.kv_channels : t.heads);
  at(&ModelSpec::intermediate_size, t.ffn ? t.ffn : t.hidden);
  at(&ModelSpec::vocab_size, t.tokenizer ? t.tokenizer : t.hidden);
  at(&ModelSpec::max_position_embeddings, t.max_pos && !interpolation(*t.max_pos) ? t.max_pos : t.seq_node ? t.seq_node : t.hidden);
  at(&ModelSpec::attention_dropout, t.attention_dropout ? t.attention_dropout : t.hidden);
  at(&ModelSpec::hidden_dropout, t.hidden_dropout ? t.hidden_dropout : t.hidden);
  at(&ModelSpec::embedding_dropout, t.hidden);
  at(&ModelSpec::num_experts, t.experts ? t.experts : t.hidden);
  at(&ModelSpec::experts_per_token, t.topk ? t.topk : t.hidden);
  at(&ModelSpec::moe_intermediate_size, t.experts ? t.experts : t.hidden);
  at(&ModelSpec::capacity_factor, t.hidden);
}

// trainer.precision x megatron_amp_O2 x optim.name (the precision plugin chosen in
// MegatronTrainerBuilder._plugins, nemo/collections/nlp/parts/megatron_trainer_builder.py, and
// configure_optimizers @ v2.4.0).
void resolve_precision(Nemo& t) {
  TrainingSetup& s = t.s();
  std::string p = "32";
  if (t.precision) p = lower(as_text(*t.precision));
  const bool half16 = p == "16" || p == "16-mixed";
  const bool bf16 = p == "bf16" || p == "bf16-mixed";
  Precision v = Precision::fp32;
  if (p == "32" || p == "32-true") v = Precision::fp32;
  else if (bf16) v = t.o2 ? Precision::mixed_bf16 : Precision::amp_bf16;
  else if (half16) {
    if (t.o2)
      throw InputError(t.o2_node->where, "megatron_amp_O2 with trainer.precision 16 fails in NeMo (\"fp16 training is not yet "
                                         "supported with O2\")",
                       "use trainer.precision: bf16 with megatron_amp_O2, or turn O2 off");
    v = Precision::amp_fp16;
  } else {
    throw InputError(t.precision->where, fmt::format("unknown trainer.precision '{}'", as_text(*t.precision)),
                     "expected one of: 32, 16, bf16, 16-mixed, bf16-mixed");
  }
  if (t.precision) t.st.set(memplan::path(Choice::precision), s.precision, v, *t.precision);
  else {
    s.precision = v;
    t.st.by_default(memplan::path(Choice::precision), "Lightning default: trainer.precision 32");
  }
  // The optimizer: fused_adam (Apex FusedAdam, adam_w_mode) or the distributed optimizer, which
  // shards the fp32 master weights and Adam states over the data-parallel ranks (ZeRO-1-like).
  Runtime& r = s.runtime;
  if (t.optim_name == "fused_adam" || t.optim_name == "adamw" || t.optim_name == "distributed_fused_adam" ||
      t.optim_name == "mcore_distributed_optim") {
    s.optimizer = OptimizerKind::adamw;
  } else if (t.optim_name == "adam") {
    s.optimizer = OptimizerKind::adam;
  } else if (t.optim_name == "sgd") {
    s.optimizer = OptimizerKind::sgd;
  } else {
    s.optimizer = OptimizerKind::adamw;
    t.st.unmodelled(*t.optim, "an optimizer memplan does not know: estimated as AdamW");
  }
  if (t.optim) t.st.note(memplan::path(Choice::optimizer), *t.optim);
  else t.st.by_default(memplan::path(Choice::optimizer), "NeMo example default: optim.name fused_adam");
  if (t.optim_name == "distributed_fused_adam" || t.optim_name == "mcore_distributed_optim") {
    t.st.set(memplan::path(Count::zero_stage), s.parallel.zero_stage, 1, *t.optim);
    t.st.set(memplan::path(Choice::optimizer_impl), r.optimizer_impl, OptimizerImpl::fused, *t.optim);
  }
}

void resolve_parallel(Nemo& t) {
  TrainingSetup& s = t.s();
  Parallelism& p = s.parallel;
  // devices -1 (every visible GPU): estimated with the fewest per node the model-parallel and
  // expert-parallel degrees allow (Megatron: world % (TP x PP) and world % EP), 1 without them.
  if (t.devices_auto) {
    const int64_t tp = p.tensor_parallel, pp = p.pipeline_parallel, ep = p.expert_parallel;
    const int64_t bound = 1'000'000;  // validate()'s bound on a degree: beyond it the product could wrap
    if (tp >= 1 && pp >= 1 && ep >= 1 && tp <= bound && pp <= bound && ep <= bound) t.devices = std::lcm(tp * pp, ep);
  }
  p.num_gpus = t.devices * t.nodes;
  if (t.devices_node) t.st.note(memplan::path(Count::num_gpus), *t.devices_node);
  else t.st.by_default(memplan::path(Count::num_gpus), "Lightning default: trainer.devices 1, num_nodes 1");
  if (t.nodes > 1) t.st.set(memplan::path(Count::gpus_per_node), p.gpus_per_node, t.devices, *t.nodes_node);
  if (t.devices_auto)
    t.st.defer(memplan::path(Count::num_gpus), t.devices_node->where,
               fmt::format("trainer.devices: -1 uses every visible GPU, a count the file does not hold; estimating {} per node",
                           t.devices),
               "pass --gpus N (devices x num_nodes)");
  if (t.sequence_parallel) t.st.set(Switch::sequence_parallel, true, *t.sequence_parallel);
  // Attention: Transformer Engine's fused attention, else the legacy path's flash-attn switch,
  // else Megatron's own DotProductAttention with the scores materialised.
  if (t.te) t.st.set(memplan::path(Choice::attention), s.attention, AttentionImpl::flash, *t.te_node);
  else if (t.flash) t.st.set(memplan::path(Choice::attention), s.attention, AttentionImpl::flash, *t.flash_node);
  else {
    s.attention = AttentionImpl::eager;
    t.st.by_default(memplan::path(Choice::attention), "NeMo: transformer_engine False and use_flash_attention False: Megatron's "
                                 "DotProductAttention materialises the scores (megatron_gpt_model.py @ v2.4.0)");
  }
}

void resolve_batch(Nemo& t) {
  TrainingSetup& s = t.s();
  if (t.micro_node) t.st.set(memplan::path(Count::micro_batch), s.batch.micro_batch, t.micro, *t.micro_node);
  const int64_t dp = s.parallel.num_gpus / std::max<int64_t>(1, saturating_mul(t.tp, t.pp));
  // A micro-batch or data-parallel size below 1 is reported by validate() at its line; the
  // calculator below must not divide by it first (fuzz_load_config: division by zero).
  if (t.global_node && (t.micro < 1 || dp < 1)) {
    t.st.out.global_batch = t.global;
    t.st.note(memplan::path(Setting::global_batch), *t.global_node);
  } else if (t.global_node) {
    t.st.out.global_batch = t.global;
    t.st.note(memplan::path(Setting::global_batch), *t.global_node);
    // Megatron's microbatch calculator: global = micro x data-parallel ranks x micro-batches.
    const int64_t per_step = saturating_mul(t.micro, dp);
    if (t.global % per_step != 0)
      throw InputError(t.global_node->where,
                       fmt::format("model.global_batch_size {} is not a multiple of micro_batch_size {} x {} data-parallel "
                                   "ranks (Megatron's microbatch calculator requires it)",
                                   t.global, t.micro, dp),
                       "make global_batch_size a multiple of micro_batch_size x devices x num_nodes / (TP x PP)");
    t.st.set(memplan::path(Count::grad_accum), s.batch.grad_accum, t.global / per_step, *t.global_node);
  }
  if (!t.seq_node)
    t.st.defer(memplan::path(Count::seq_len), Where::at_file(t.st.path),
               fmt::format("model.encoder_seq_length is not set; estimating {} tokens", s.batch.seq_len),
               "set model.encoder_seq_length (or data.train_ds.max_seq_length), or pass --seq-len N");
}

// Megatron's recomputation (activations_checkpoint_* -> TransformerConfig.recompute_*,
// megatron/core/transformer/transformer_block.py @ core_v0.13.0).
void resolve_checkpointing(Nemo& t) {
  Checkpointing& c = t.s().checkpointing;
  if (!t.granularity) {
    c.mode = CheckpointMode::none;
    return t.st.by_default(memplan::path(Choice::checkpointing), "NeMo default: activations_checkpoint_granularity null (no recomputation)");
  }
  const std::string g = lower(as_text(*t.granularity));
  if (g == "selective") {
    // recompute_modules ["core_attn"]: the attention core only.
    c.mode = CheckpointMode::selective;
    return t.st.note(memplan::path(Choice::checkpointing), *t.granularity);
  }
  if (g != "full")
    throw InputError(t.granularity->where, fmt::format("unknown activations_checkpoint_granularity '{}'", g),
                     "expected one of: selective, full");
  if (!t.method)
    throw InputError(t.granularity->where, "activations_checkpoint_granularity: full needs activations_checkpoint_method "
                                           "(Megatron: \"recompute_method must be block or uniform\")",
                     "set activations_checkpoint_method: uniform (or block) and activations_checkpoint_num_layers");
  const std::string method = lower(as_text(*t.method));
  const int64_t n = count_of(t.ckpt_layers, 1);
  const int64_t layers = t.s().model.num_layers / std::max<int64_t>(1, t.pp);
  if (method == "uniform") {
    // Chunks of n layers: only each chunk's input is saved and the chunk recomputed at once.
    c.mode = CheckpointMode::full;
    t.st.note(memplan::path(Choice::checkpointing), *t.method);
    if (n > 1)
      t.st.unmodelled(*t.ckpt_layers, fmt::format("uniform recomputation in chunks of {} layers saves one input per chunk and "
                                                  "recomputes {} layers at a time; estimated as every layer checkpointed alone",
                                                  n, n));
  } else if (method == "block") {
    // The first n layers of each pipeline stage recomputed, the others keep everything.
    c.mode = n >= layers ? CheckpointMode::full : CheckpointMode::layers;
    c.layers.clear();
    // validate() refuses more than 10,000 layers at model.num_layers; the list stops there first.
    for (int64_t i = 0; i < std::min({n, layers, int64_t{10'001}}); ++i) c.layers.push_back(i);
    if (c.layers.empty()) c.mode = CheckpointMode::none;
    t.st.note(memplan::path(Choice::checkpointing), t.ckpt_layers ? *t.ckpt_layers : *t.method);
    if (t.pp > 1)
      t.st.unmodelled(*t.method, "block recomputation applies to the first layers of every pipeline stage; memplan's layer "
                                 "list names the first stage's");
  } else {
    throw InputError(t.method->where, fmt::format("unknown activations_checkpoint_method '{}'", method),
                     "expected one of: uniform, block");
  }
}

}  // namespace

void read_nemo(const Node& root, ReadState& st) {
  Nemo t(st);
  st.s().runtime.framework = Framework::megatron;
  st.by_default(memplan::path(Choice::framework), "a NeMo / Megatron config (trainer: + model: with Megatron keys)");
  read_section(root, {&root_keys()}, t, &st.out.warnings);
  resolve_parallel(t);
  read_architecture(t);
  resolve_precision(t);
  resolve_batch(t);
  resolve_checkpointing(t);
}

}  // namespace memplan::profiles::detail
