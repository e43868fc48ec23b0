// Hugging Face config.json -> ModelSpec. Each family is a mapping from its config keys (with the
// defaults of its transformers Config class for keys a file leaves out) onto ModelSpec; the
// architecture features come from family_defaults() (profiles/families.yaml) and are adjusted here by
// the keys that switch them. Modelling code and Config classes are read at transformers v4.57.1
// unless a family says otherwise (configuration_<type>.py / modeling_<type>.py); families that live
// in remote code cite the checkpoint's own files.
//
// Multimodal wrappers (gemma3, llama4, and any config whose text_config is a supported family) are
// read through the text model of text_config; the vision tower is not counted (a warning says so).
// What memplan cannot model is refused with the missing feature named: encoder-decoder models
// (T5's decoder stack with cross-attention) and state-space layers (Mamba-2 in Nemotron-H).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "estimator/estimate.h"
#include "estimator/model.h"
#include "profiles/detail.h"

namespace memplan::profiles {
namespace detail {
namespace {

const std::vector<std::string> kActivations = {"gelu", "gelu_new", "gelu_pytorch_tanh", "silu", "relu"};

bool is_any(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

// Reads HF keys into the spec and notes each field's position for validation messages. A key the
// file leaves out takes the family Config's default from `defaults` when there is one.
struct HfReader {
  const Node& root;
  ReadModel& out;
  std::map<std::string, double> defaults;  // key -> the transformers Config default

  ModelSpec& m() { return out.spec; }
  const Node* get(const char* key) const { return root.find(key); }
  bool has(const char* key) const { return get(key) != nullptr; }
  // The key is written, null included.
  bool present(const char* key) const {
    return std::any_of(root.entries.begin(), root.entries.end(), [&](const auto& e) { return e.first == key; });
  }

  void need(const char* key, int64_t ModelSpec::*member) {
    const Node* n = get(key);
    if (!n) {
      if (auto d = defaults.find(key); d != defaults.end()) {
        m().*member = static_cast<int64_t>(d->second);
        return;
      }
      throw InputError(Where::at_file(root.where.file), fmt::format("missing '{}'", key),
                       fmt::format("memplan reads {} from '{}' in {} configs", memplan::path(member), key, m().model_type));
    }
    take(*n, member);
  }
  // The first of `keys` present (alternative spellings), else need() of the first.
  void need_any(std::initializer_list<const char*> keys, int64_t ModelSpec::*member) {
    for (const char* k : keys)
      if (has(k)) return need(k, member);
    need(*keys.begin(), member);
  }
  bool opt(const char* key, int64_t ModelSpec::*member) {
    const Node* n = get(key);
    if (n) take(*n, member);
    else if (auto d = defaults.find(key); d != defaults.end()) m().*member = static_cast<int64_t>(d->second);
    return n != nullptr;
  }
  void opt(const char* key, double ModelSpec::*member) {
    if (const Node* n = get(key)) {
      m().*member = as_number(*n);
      out.origin.set(memplan::path(member), n->where);
    }
  }
  void opt(const char* key, bool ModelSpec::*member) {
    if (const Node* n = get(key)) m().*member = as_bool(*n);
  }
  double number(const char* key, double otherwise) const {
    const Node* n = get(key);
    return n ? as_number(*n) : otherwise;
  }
  bool flag(const char* key, bool otherwise) const {
    const Node* n = get(key);
    return n ? as_bool(*n) : otherwise;
  }
  void activation(const char* key) {
    if (const Node* n = get(key)) m().activation = as_activation(*n);
  }
  void take(const Node& n, int64_t ModelSpec::*member) {
    m().*member = as_int(n);
    out.origin.set(memplan::path(member), n.where);
  }
  void warn(const Node* at, std::string message, std::string hint) {
    out.warnings.push_back({at ? at->where : root.where, std::move(message), std::move(hint)});
  }
};

void read_gpt2(HfReader& r) {
  ModelSpec& m = r.m();
  r.need("n_embd", &ModelSpec::hidden_size);
  r.need("n_layer", &ModelSpec::num_layers);
  r.need("n_head", &ModelSpec::num_attention_heads);
  r.need("vocab_size", &ModelSpec::vocab_size);
  r.opt("n_positions", &ModelSpec::max_position_embeddings);
  if (!r.opt("n_inner", &ModelSpec::intermediate_size)) m.intermediate_size = 4 * m.hidden_size;
  r.activation("activation_function");
  r.opt("attn_pdrop", &ModelSpec::attention_dropout);
  r.opt("resid_pdrop", &ModelSpec::hidden_dropout);
  r.opt("embd_pdrop", &ModelSpec::embedding_dropout);
  r.opt("tie_word_embeddings", &ModelSpec::tie_word_embeddings);
}

// GPTBigCodeConfig (StarCoder, SantaCoder): GPT-2's key names; multi_query (default True) gives
// one KV head.
void read_gpt_bigcode(HfReader& r) {
  read_gpt2(r);
  ModelSpec& m = r.m();
  m.num_key_value_heads = r.flag("multi_query", true) ? 1 : m.num_attention_heads;
}

// The hidden_size/num_hidden_layers/... names shared by most families.
void read_common(HfReader& r, bool intermediate_required) {
  r.need("hidden_size", &ModelSpec::hidden_size);
  r.need("num_hidden_layers", &ModelSpec::num_layers);
  r.need("num_attention_heads", &ModelSpec::num_attention_heads);
  if (intermediate_required) r.need("intermediate_size", &ModelSpec::intermediate_size);
  else r.opt("intermediate_size", &ModelSpec::intermediate_size);
  r.need("vocab_size", &ModelSpec::vocab_size);
  r.opt("max_position_embeddings", &ModelSpec::max_position_embeddings);
  r.opt("tie_word_embeddings", &ModelSpec::tie_word_embeddings);
  r.opt("attention_dropout", &ModelSpec::attention_dropout);
  r.opt("num_key_value_heads", &ModelSpec::num_key_value_heads);
  r.opt("head_dim", &ModelSpec::head_dim);
}

// sliding_window with the layer pattern: layer_types (every n-th "full_attention"), or the
// family's fixed pattern from profiles/families.yaml. Qwen2 carries a window it does not use unless
// use_sliding_window is true.
void read_sliding_window(HfReader& r) {
  ModelSpec& m = r.m();
  if (r.has("use_sliding_window") && !r.flag("use_sliding_window", false)) return;
  r.opt("sliding_window", &ModelSpec::sliding_window);
  if (const Node* pattern = r.get("sliding_window_pattern")) m.global_attention_every = as_int(*pattern);
  if (const Node* types = r.get("layer_types"); types && types->kind == Node::Kind::list) {
    const auto names = as_text_list(*types);
    int64_t first_full = -1;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == "full_attention") {
        first_full = static_cast<int64_t>(i);
        break;
      }
    m.global_attention_every = first_full < 0 ? 0 : first_full + 1;
  }
}

void read_neox(HfReader& r) {
  read_common(r, true);
  r.activation("hidden_act");
  if (const Node* n = r.get("attention_bias")) r.m().qkv_bias = r.m().o_bias = as_bool(*n);
  r.opt("hidden_dropout", &ModelSpec::hidden_dropout);
  r.opt("rotary_pct", &ModelSpec::rotary_fraction);
  r.opt("use_parallel_residual", &ModelSpec::parallel_residual);
}

void read_moe(HfReader& r) {
  ModelSpec& m = r.m();
  r.need("num_experts_per_tok", &ModelSpec::experts_per_token);
  r.opt("capacity_factor", &ModelSpec::capacity_factor);  // memplan extension key
  if (m.model_type == "mixtral") {
    r.need("num_local_experts", &ModelSpec::num_experts);
    m.moe_intermediate_size = m.intermediate_size;  // Mixtral's experts are intermediate_size wide
    return;
  }
  r.need("num_experts", &ModelSpec::num_experts);
  r.need("moe_intermediate_size", &ModelSpec::moe_intermediate_size);
  if (r.opt("shared_expert_intermediate_size", &ModelSpec::shared_expert_intermediate_size))
    m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
  r.opt("decoder_sparse_step", &ModelSpec::moe_layer_frequency);
  r.opt("norm_topk_prob", &ModelSpec::norm_topk_prob);
  const Node* dense = r.get("mlp_only_layers");
  if (dense && dense->kind == Node::Kind::list && !dense->items.empty())
    r.warn(dense, "mlp_only_layers is not modelled: every layer counts as a mixture-of-experts layer",
           fmt::format("the estimate over-counts the {} dense layers' MLPs", dense->items.size()));
}

// Llama-lineage decoders: llama, mistral, mixtral, qwen2/3(-moe), gemma/2/3, phi3, olmo2/3,
// cohere, internlm2.
void read_decoder(HfReader& r) {
  ModelSpec& m = r.m();
  const std::string& type = m.model_type;
  read_common(r, !is_any(type, {"qwen2_moe", "qwen3_moe"}));
  // Gemma runs GeGLU with the tanh approximation whatever hidden_act says (GemmaConfig's
  // hidden_activation, default gelu_pytorch_tanh).
  const bool gemma = is_any(type, {"gemma", "gemma2", "gemma3_text"});
  r.activation(gemma ? "hidden_activation" : "hidden_act");
  if (!is_any(type, {"qwen2", "qwen2_moe"}))  // Qwen2 hard-codes q/k/v bias on, o bias off
    if (const Node* n = r.get("attention_bias")) m.qkv_bias = m.o_bias = as_bool(*n);
  if (type == "internlm2")  // InternLM2Attention: wqkv and wo take config.bias
    if (const Node* n = r.get("bias")) m.qkv_bias = m.o_bias = as_bool(*n);
  r.opt("mlp_bias", &ModelSpec::mlp_bias);
  // Partial RoPE (Phi-4-mini 0.75): the rotary embedding's inv_freq covers int(d * factor).
  r.opt("partial_rotary_factor", &ModelSpec::rotary_fraction);
  if (type == "phi3") {
    r.opt("resid_pdrop", &ModelSpec::hidden_dropout);
    r.opt("embd_pdrop", &ModelSpec::embedding_dropout);
  }
  if (is_any(type, {"gemma2", "gemma3_text"})) {
    // attn_logit_softcapping / final_logit_softcapping: null turns soft-capping off; absent keeps
    // the Config default (Gemma-2: 50 and 30; Gemma-3: none).
    if (r.present("attn_logit_softcapping")) {
      const Node* n = r.get("attn_logit_softcapping");
      m.attn_softcap = n ? as_number(*n) : 0.0;
    }
    if (r.present("final_logit_softcapping")) {
      const Node* n = r.get("final_logit_softcapping");
      m.final_softcap = n ? as_number(*n) : 0.0;
    }
  }
  if (type == "cohere") {
    r.opt("logit_scale", &ModelSpec::logit_scale);
    if (r.flag("use_qk_norm", false)) m.qk_norm = QkNorm::per_head_layer_norm;
  }
  read_sliding_window(r);
  if (is_any(type, {"mixtral", "qwen2_moe", "qwen3_moe"})) read_moe(r);
}

void read_bert(HfReader& r) {
  read_common(r, true);
  r.opt("type_vocab_size", &ModelSpec::type_vocab_size);
  r.activation("hidden_act");
  r.opt("attention_probs_dropout_prob", &ModelSpec::attention_dropout);
  r.opt("hidden_dropout_prob", &ModelSpec::hidden_dropout);
  r.m().embedding_dropout = r.m().hidden_dropout;  // BertEmbeddings uses hidden_dropout_prob
}

// PhiConfig (modeling_phi.py): one input_layernorm feeding attention and fc1/fc2 in parallel,
// partial_rotary_factor (default 0.5), resid_pdrop/embd_pdrop.
void read_phi(HfReader& r) {
  ModelSpec& m = r.m();
  read_common(r, true);
  r.activation("hidden_act");
  r.opt("partial_rotary_factor", &ModelSpec::rotary_fraction);
  r.opt("resid_pdrop", &ModelSpec::hidden_dropout);
  r.opt("embd_pdrop", &ModelSpec::embedding_dropout);
  if (r.flag("qk_layernorm", false))
    throw InputError(r.get("qk_layernorm")->where, "phi's qk_layernorm (a LayerNorm shared by the heads of q and k) is not modelled",
                     "phi-1, phi-1.5 and phi-2 publish qk_layernorm false");
  (void)m;
}

// StableLmConfig (modeling_stablelm.py): LayerNorm, partial RoPE (0.25), use_qkv_bias,
// use_parallel_residual (one shared norm), qk_layernorm (a LayerNorm per head).
void read_stablelm(HfReader& r) {
  ModelSpec& m = r.m();
  read_common(r, true);
  r.activation("hidden_act");
  r.opt("partial_rotary_factor", &ModelSpec::rotary_fraction);
  m.qkv_bias = r.flag("use_qkv_bias", false);
  m.parallel_residual = m.parallel_shared_norm = r.flag("use_parallel_residual", false);
  if (r.flag("qk_layernorm", false)) m.qk_norm = QkNorm::per_head_layer_norm;
  r.opt("hidden_dropout", &ModelSpec::hidden_dropout);
}

// Starcoder2Config: use_bias on every linear, residual_dropout, embedding_dropout, tied.
void read_starcoder2(HfReader& r) {
  ModelSpec& m = r.m();
  read_common(r, true);
  r.activation("hidden_act");
  m.qkv_bias = m.o_bias = m.mlp_bias = r.flag("use_bias", true);
  r.opt("residual_dropout", &ModelSpec::hidden_dropout);
  r.opt("embedding_dropout", &ModelSpec::embedding_dropout);
  read_sliding_window(r);
}

// FalconConfig (and the legacy RefinedWeb/RefinedWebModel configs of the checkpoints' own
// configuration_RW.py: n_embed, n_head, n_layer, n_head_kv). KV heads: new_decoder_architecture
// -> num_kv_heads, multi_query -> 1, else all (FalconAttention.__init__).
void read_falcon(HfReader& r) {
  ModelSpec& m = r.m();
  const bool refined_web = m.model_type == "RefinedWeb";  // Falcon-40B's layout before transformers' port
  r.need_any({"hidden_size", "n_embed"}, &ModelSpec::hidden_size);
  r.need_any({"num_hidden_layers", "n_layer"}, &ModelSpec::num_layers);
  r.need_any({"num_attention_heads", "n_head"}, &ModelSpec::num_attention_heads);
  r.need("vocab_size", &ModelSpec::vocab_size);
  r.opt("max_position_embeddings", &ModelSpec::max_position_embeddings);
  r.opt("tie_word_embeddings", &ModelSpec::tie_word_embeddings);
  r.opt("attention_dropout", &ModelSpec::attention_dropout);
  r.opt("hidden_dropout", &ModelSpec::hidden_dropout);
  r.activation("activation");
  const bool new_arch = r.flag("new_decoder_architecture", refined_web);
  const bool multi_query = r.flag("multi_query", !refined_web);
  int64_t kv = m.num_attention_heads;
  if (const Node* n = r.has("num_kv_heads") ? r.get("num_kv_heads") : r.get("n_head_kv")) {
    kv = as_int(*n);
    r.out.origin.set(memplan::path(&ModelSpec::num_key_value_heads), n->where);
  }
  m.num_key_value_heads = new_arch ? kv : multi_query ? 1 : m.num_attention_heads;
  m.qkv_bias = m.o_bias = m.mlp_bias = r.flag("bias", false);
  if (!r.opt("ffn_hidden_size", &ModelSpec::intermediate_size)) m.intermediate_size = 4 * m.hidden_size;
  if (r.flag("alibi", false)) m.positions = PositionKind::alibi;
  const bool parallel = new_arch || r.flag("parallel_attn", true);
  m.parallel_residual = parallel;
  // new_decoder_architecture: ln_attn and ln_mlp (num_ln_in_parallel_attn 2 unless set to 1).
  const int64_t lns = new_arch ? static_cast<int64_t>(r.number("num_ln_in_parallel_attn", 2)) : 1;
  m.parallel_shared_norm = parallel && lns == 1;
}

// MPTConfig (modeling_mpt.py): d_model, n_heads, n_layers, expansion_ratio, no_bias, attn_config.
void read_mpt(HfReader& r) {
  ModelSpec& m = r.m();
  r.need("d_model", &ModelSpec::hidden_size);
  r.need("n_layers", &ModelSpec::num_layers);
  r.need("n_heads", &ModelSpec::num_attention_heads);
  r.need("vocab_size", &ModelSpec::vocab_size);
  r.opt("max_seq_len", &ModelSpec::max_position_embeddings);
  r.opt("tie_word_embeddings", &ModelSpec::tie_word_embeddings);
  m.intermediate_size = static_cast<int64_t>(std::llround(r.number("expansion_ratio", 4) * static_cast<double>(m.hidden_size)));
  const bool bias = !r.flag("no_bias", true);
  m.qkv_bias = m.o_bias = m.mlp_bias = m.norm_bias = bias;
  r.opt("resid_pdrop", &ModelSpec::hidden_dropout);
  r.opt("emb_pdrop", &ModelSpec::embedding_dropout);
  if (const Node* attn = r.get("attn_config"); attn && attn->kind == Node::Kind::map) {
    if (const Node* p = attn->find("attn_pdrop")) m.attention_dropout = as_number(*p);
    if (const Node* qk = attn->find("qk_ln"); qk && as_bool(*qk))
      throw InputError(qk->where, "MPT's attn_config.qk_ln (LayerNorm on q and k) is not modelled",
                       "mosaicml/mpt-7b and mpt-30b publish qk_ln false");
    if (const Node* al = attn->find("alibi"); al && !as_bool(*al)) m.positions = PositionKind::none;
  }
}

// DeepseekConfig (deepseek-ai/deepseek-moe-16b-base configuration_deepseek.py), DeepseekV2Config
// and DeepseekV3Config (transformers), Kimi-K2 (DeepseekV3 layout, model_type kimi_k2): dense
// first_k_dense_replace layers, n_routed_experts of moe_intermediate_size, n_shared_experts, and
// multi-head latent attention when kv_lora_rank is given.
void read_deepseek(HfReader& r) {
  ModelSpec& m = r.m();
  read_common(r, true);
  r.activation("hidden_act");
  if (const Node* n = r.get("attention_bias")) m.qkv_bias = m.o_bias = as_bool(*n);
  r.need("n_routed_experts", &ModelSpec::num_experts);
  r.need("num_experts_per_tok", &ModelSpec::experts_per_token);
  r.need("moe_intermediate_size", &ModelSpec::moe_intermediate_size);
  r.opt("n_shared_experts", &ModelSpec::num_shared_experts);
  r.opt("first_k_dense_replace", &ModelSpec::first_dense_layers);
  r.opt("norm_topk_prob", &ModelSpec::norm_topk_prob);
  r.opt("routed_scaling_factor", &ModelSpec::routed_scaling_factor);
  r.opt("n_group", &ModelSpec::expert_groups);
  r.opt("topk_group", &ModelSpec::topk_groups);
  r.opt("capacity_factor", &ModelSpec::capacity_factor);
  if (const Node* f = r.get("moe_layer_freq"); f && as_int(*f) != 1)
    throw InputError(f->where, fmt::format("moe_layer_freq {} is not modelled (every layer after first_k_dense_replace is MoE)", as_int(*f)),
                     "every published DeepSeek config uses moe_layer_freq 1");
  if (const Node* sf = r.get("scoring_func")) {
    const std::string f = as_text(*sf);
    if (f == "sigmoid") m.router = RouterKind::sigmoid;
    else if (f == "softmax") m.router = RouterKind::softmax_topk;
    else throw InputError(sf->where, fmt::format("scoring_func '{}' is not modelled", f), "expected softmax or sigmoid");
  }
  if (r.has("kv_lora_rank")) {
    r.need("kv_lora_rank", &ModelSpec::kv_lora_rank);
    r.opt("q_lora_rank", &ModelSpec::q_lora_rank);  // null: one q_proj
    r.need("qk_rope_head_dim", &ModelSpec::qk_rope_head_dim);
    r.need("qk_nope_head_dim", &ModelSpec::qk_nope_head_dim);
    r.need("v_head_dim", &ModelSpec::v_head_dim);
    m.head_dim = m.qk_rope_head_dim + m.qk_nope_head_dim;
    m.num_key_value_heads = m.num_attention_heads;  // MLA: every head has its own k and v
  } else if (m.model_type != "deepseek") {
    throw InputError(Where::at_file(r.root.where.file), fmt::format("{} without 'kv_lora_rank'", m.model_type),
                     "DeepSeek-V2/V3 configs describe multi-head latent attention with kv_lora_rank, q_lora_rank, "
                     "qk_rope_head_dim, qk_nope_head_dim and v_head_dim");
  }
}

// GraniteMoeConfig: every layer is MoE (intermediate_size is the expert width), input_linear
// fuses gate|up, embedding/residual/attention multipliers and logits_scaling.
void read_granitemoe(HfReader& r) {
  ModelSpec& m = r.m();
  read_common(r, true);
  r.activation("hidden_act");
  if (const Node* n = r.get("attention_bias")) m.qkv_bias = m.o_bias = as_bool(*n);
  r.need("num_local_experts", &ModelSpec::num_experts);
  r.need("num_experts_per_tok", &ModelSpec::experts_per_token);
  m.moe_intermediate_size = m.intermediate_size;
  m.norm_topk_prob = false;
  m.scale_embeddings = r.number("embedding_multiplier", 1.0) != 1.0;
  m.residual_multiplier = r.number("residual_multiplier", 1.0);
  const double logits_scaling = r.number("logits_scaling", 1.0);
  m.logit_scale = logits_scaling != 0 ? 1.0 / logits_scaling : 1.0;
}

// GptOssConfig: intermediate_size is the expert width (no dense MLP), num_local_experts,
// num_experts_per_tok (older files: experts_per_token), attention sinks, sliding layers.
void read_gpt_oss(HfReader& r) {
  ModelSpec& m = r.m();
  read_common(r, true);
  if (const Node* n = r.get("attention_bias")) m.qkv_bias = m.o_bias = as_bool(*n);
  r.need("num_local_experts", &ModelSpec::num_experts);
  r.need_any({"num_experts_per_tok", "experts_per_token"}, &ModelSpec::experts_per_token);
  m.moe_intermediate_size = m.intermediate_size;
  m.norm_topk_prob = false;
  read_sliding_window(r);
}

// Llama4TextConfig: intermediate_size is the routed and shared experts' width, intermediate_size_mlp
// the dense layers'; interleave_moe_layer_step; use_qk_norm (L2, no weights).
void read_llama4_text(HfReader& r) {
  ModelSpec& m = r.m();
  r.defaults = {{"vocab_size", 202048},        {"hidden_size", 5120},       {"intermediate_size", 8192},
                {"intermediate_size_mlp", 16384}, {"num_hidden_layers", 48},  {"num_attention_heads", 40},
                {"num_key_value_heads", 8},   {"head_dim", 128},           {"num_local_experts", 16},
                {"num_experts_per_tok", 1},   {"interleave_moe_layer_step", 1}};
  read_common(r, true);
  r.activation("hidden_act");
  if (const Node* n = r.get("attention_bias")) m.qkv_bias = m.o_bias = as_bool(*n);
  r.need("num_local_experts", &ModelSpec::num_experts);
  r.need("num_experts_per_tok", &ModelSpec::experts_per_token);
  m.moe_intermediate_size = m.intermediate_size;
  m.shared_expert_intermediate_size = m.intermediate_size;
  r.need("intermediate_size_mlp", &ModelSpec::intermediate_size);
  r.opt("interleave_moe_layer_step", &ModelSpec::moe_layer_frequency);
  if (!r.flag("use_qk_norm", true)) m.qk_norm = QkNorm::none;
  m.norm_topk_prob = false;
}

// Gemma3TextConfig defaults (a gemma3 wrapper's text_config states only what differs).
void gemma3_text_defaults(HfReader& r) {
  r.defaults = {{"vocab_size", 262208}, {"hidden_size", 2304},    {"intermediate_size", 9216}, {"num_hidden_layers", 26},
                {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"head_dim", 256},     {"max_position_embeddings", 131072},
                {"sliding_window", 4096}};
}

// architectures[0] decides the head; id2label (or num_labels) sizes a classifier.
void read_head(HfReader& r, const Node& top) {
  ModelSpec& m = r.m();
  if (const Node* arch = top.find("architectures")) {
    const auto names = as_text_list(*arch);
    const std::string a = names.empty() ? "" : names.front();
    if (ends_with(a, "ForCausalLM") || ends_with(a, "LMHeadModel") || ends_with(a, "ForConditionalGeneration"))
      m.head = HeadKind::causal_lm;
    else if (ends_with(a, "ForMaskedLM") || ends_with(a, "ForPreTraining") || a == "BertModel") m.head = HeadKind::masked_lm;
    else if (ends_with(a, "ForSequenceClassification")) m.head = HeadKind::sequence_classification;
  }
  if (const Node* labels = top.find("id2label"); labels && labels->kind == Node::Kind::map)
    m.num_labels = static_cast<int64_t>(labels->entries.size());
  else if (const Node* n = top.find("num_labels"))
    m.num_labels = as_int(*n);
}

// quantization_config of a pre-quantized checkpoint -> the stored bits per weight, scales and zero
// points included (transformers' quantizers at v4.57.1, quantizer_<method>.py):
//   bitsandbytes  load_in_4bit: 4 bits + an fp32 absmax per 64 (4.5), or with double quant an
//                 8-bit absmax and an fp32 scale per 256 blocks (4.127); load_in_8bit: 8 bits
//   gptq, awq     `bits` + a 16-bit scale and a `bits`-wide zero per group of group_size
//   compressed-tensors  config_groups' weights: num_bits + a 16-bit scale (and a zero point when
//                 not symmetric) per group when the strategy is "group"
//   fp8           8 bits + an fp32 scale per weight_block_size block (DeepSeek-V3: 128 x 128)
//   mxfp4         4 bits + an 8-bit shared exponent per 32, experts only (GPT-OSS); training loads
//                 them dequantized to bf16 (Mxfp4Config(dequantize=True), the gpt-oss fine-tuning
//                 recipe), so memplan counts 16-bit experts and says so
WeightQuant read_quantization(const Node& q) {
  WeightQuant w;
  const Node* m = q.find("quant_method");
  if (!m) throw InputError(q.where, "quantization_config without 'quant_method'", "transformers names the quantizer in quant_method");
  w.method = as_text(*m);
  auto number = [&](const Node& n, const char* key, double otherwise) {
    const Node* v = n.find(key);
    return v ? as_number(*v) : otherwise;
  };
  auto flag = [&](const char* key) {
    const Node* v = q.find(key);
    return v && as_bool(*v);
  };
  auto grouped = [](double bits, double group, double zero_bits) {
    return group > 0 ? bits + (16.0 + zero_bits) / group : bits;
  };
  if (w.method == "bitsandbytes") {
    if (flag("load_in_4bit")) w.bits = flag("bnb_4bit_use_double_quant") ? 4.0 + 8.0 / 64 + 32.0 / (64 * 256) : 4.5;
    else if (flag("load_in_8bit")) w.bits = 8.0;
    else throw InputError(q.where, "a bitsandbytes quantization_config with neither load_in_4bit nor load_in_8bit", "");
  } else if (w.method == "gptq" || w.method == "awq") {
    const double bits = number(q, w.method == "gptq" ? "bits" : "bits", 4);
    const double group = number(q, "group_size", 128);
    const bool zero = w.method == "gptq" || !q.find("zero_point") || as_bool(*q.find("zero_point"));
    w.bits = grouped(bits, group, zero ? bits : 0);
  } else if (w.method == "compressed-tensors") {
    const Node* groups = q.find("config_groups");
    const Node* weights = nullptr;
    if (groups && groups->kind == Node::Kind::map)
      for (const auto& [name, g] : groups->entries)
        if ((weights = g.find("weights"))) break;
    if (!weights) throw InputError(q.where, "a compressed-tensors quantization_config without config_groups weights", "");
    const double bits = number(*weights, "num_bits", 8);
    const Node* strategy = weights->find("strategy");
    const bool group = strategy && as_text(*strategy) == "group";
    const Node* sym = weights->find("symmetric");
    w.bits = group ? grouped(bits, number(*weights, "group_size", 128), sym && !as_bool(*sym) ? bits : 0) : bits;
  } else if (w.method == "fp8") {
    double block = 0;
    if (const Node* b = q.find("weight_block_size"); b && b->kind == Node::Kind::list && b->items.size() == 2)
      block = as_number(b->items[0]) * as_number(b->items[1]);
    w.bits = block > 0 ? 8.0 + 32.0 / block : 8.0;
  } else if (w.method == "mxfp4") {
    // Kept for the record: read_hf_config dequantizes (see there).
    w.bits = 4.0 + 8.0 / 32;
    w.experts_only = true;
  } else {
    throw InputError(m->where, fmt::format("quant_method '{}' is not modelled", w.method),
                     "memplan knows bitsandbytes, gptq, awq, compressed-tensors, fp8 and mxfp4 checkpoints");
  }
  return w;
}

// Families memplan refuses, with the feature it would need.
void refuse_unsupported(const Node& root, const std::string& type, const Where& where) {
  const Node* ed = root.find("is_encoder_decoder");
  if (is_any(type, {"t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "whisper", "longt5", "switch_transformers"}) ||
      (ed && as_bool(*ed)))
    throw InputError(where, fmt::format("model_type '{}' is an encoder-decoder model: memplan does not model a decoder stack "
                                        "with cross-attention over the encoder's output", type),
                     "memplan estimates decoder-only language models and BERT-style encoders");
  if (is_any(type, {"nemotron_h", "mamba", "mamba2", "jamba", "falcon_mamba", "falcon_h1", "zamba", "zamba2", "bamba",
                    "granitemoehybrid", "lfm2"}) ||
      root.find("hybrid_override_pattern") || root.find("ssm_state_size") || root.find("mamba_d_state"))
    throw InputError(where, fmt::format("model_type '{}' has state-space (Mamba) layers: memplan does not model their selective "
                                        "scan's saved tensors", type),
                     "memplan estimates attention + MLP/MoE transformer layers");
}

ModelSpec defaults_for(const std::string& type, const Where& where) {
  if (type == "RefinedWeb" || type == "RefinedWebModel") {
    ModelSpec m = family_defaults_or_throw("falcon", where);
    m.model_type = type;
    return m;
  }
  return family_defaults_or_throw(type, where);
}

}  // namespace

Activation as_activation(const Node& n) {
  return as_choice<Activation>(n, "activation", parse_activation, kActivations);
}

ModelSpec family_defaults_or_throw(const std::string& type, const Where& where) {
  if (auto m = family_defaults(type)) return *m;
  const std::string hint = fmt::format("supported model types: {}", fmt::join(supported_model_types(), ", "));
  throw InputError(where, fmt::format("model_type '{}' is not supported", clip(type)), hint);
}

ReadModel read_hf_config(const Node& root, const std::string& path, const std::string& name) {
  if (root.kind != Node::Kind::map) type_error(root, "a JSON object");
  const Node* type = root.find("model_type");
  if (!type)
    throw InputError(Where::at_file(path), "missing 'model_type'",
                     fmt::format("a Hugging Face config.json names its architecture in model_type (supported: {})",
                                 fmt::join(supported_model_types(), ", ")));
  std::string t = as_text(*type);
  refuse_unsupported(root, t, type->where);
  ReadModel out;
  // A multimodal wrapper: read the text model of text_config.
  const Node* body = &root;
  const Node* text = root.find("text_config");
  if (text && text->kind == Node::Kind::map) {
    const Node* inner_type = text->find("model_type");
    std::string inner = inner_type ? as_text(*inner_type) : t == "gemma3" ? "gemma3_text" : t == "llama4" ? "llama4_text" : "";
    if (inner.empty())
      throw InputError(text->where, "text_config without 'model_type'", "memplan reads a multimodal model through its text model");
    refuse_unsupported(*text, inner, inner_type ? inner_type->where : text->where);
    if (inner == "gemma3") inner = "gemma3_text";
    if (inner == "llama4") inner = "llama4_text";
    body = text;
    if (root.find("vision_config") || root.find("audio_config"))
      out.warnings.push_back({type->where, fmt::format("'{}' is multimodal: only its text model ({}) is counted", t, inner),
                              "the vision tower and projector add their weights and activations on top"});
    t = inner;
  } else if (t == "gemma3") {
    t = "gemma3_text";
  } else if (t == "llama4") {
    t = "llama4_text";
  }
  out.spec = defaults_for(t, type->where);
  out.spec.name = name;
  if (const Node* repo = root.find("_name_or_path")) out.spec.hf_repo = as_text(*repo);
  // The stored dtype (transformers 4.x writes torch_dtype, 5.x dtype; a multimodal wrapper may
  // state it on the text model only).
  for (const Node* n : {root.find("dtype"), root.find("torch_dtype"), text && text->kind == Node::Kind::map ? text->find("dtype") : nullptr,
                        text && text->kind == Node::Kind::map ? text->find("torch_dtype") : nullptr})
    if (n && n->kind == Node::Kind::scalar && out.spec.checkpoint_dtype.empty()) out.spec.checkpoint_dtype = n->text;
  HfReader r{*body, out, {}};
  if (t == "gpt2") read_gpt2(r);
  else if (t == "gpt_bigcode") read_gpt_bigcode(r);
  else if (t == "gpt_neox") read_neox(r);
  else if (t == "bert" || t == "roberta") read_bert(r);
  else if (t == "phi") read_phi(r);
  else if (t == "stablelm") read_stablelm(r);
  else if (t == "starcoder2") read_starcoder2(r);
  else if (t == "falcon" || t == "RefinedWeb" || t == "RefinedWebModel") read_falcon(r);
  else if (t == "mpt") read_mpt(r);
  else if (is_any(t, {"deepseek", "deepseek_v2", "deepseek_v3", "kimi_k2"})) read_deepseek(r);
  else if (t == "granitemoe") read_granitemoe(r);
  else if (t == "gpt_oss") read_gpt_oss(r);
  else if (t == "llama4_text") read_llama4_text(r);
  else {
    if (t == "gemma3_text") gemma3_text_defaults(r);
    read_decoder(r);
  }
  ModelSpec& m = out.spec;
  // The wrapper states tie_word_embeddings for the whole model when the text config does not.
  if (body != &root && !body->find("tie_word_embeddings"))
    if (const Node* tie = root.find("tie_word_embeddings")) m.tie_word_embeddings = as_bool(*tie);
  read_head(r, root);
  if (const Node* q = root.find("quantization_config"); q && q->kind == Node::Kind::map) {
    const WeightQuant w = read_quantization(*q);
    if (w.method == "mxfp4")
      out.warnings.push_back({q->where, "the MXFP4 experts are counted dequantized to 16 bits, as training loads them "
                                        "(Mxfp4Config(dequantize=True))", "inference keeps them at 4.25 bits per weight"});
    else
      m.quantized = w;
  }
  if (m.num_key_value_heads == 0) m.num_key_value_heads = m.num_attention_heads;
  if (m.head_dim == 0 && m.num_attention_heads > 0) m.head_dim = m.hidden_size / m.num_attention_heads;
  TrainingSetup alone;
  alone.model = m;
  throw_first_problem(alone, out.origin, "model.", Where::at_file(path));
  return out;
}

std::string config_model_name(const std::string& path) {
  const std::filesystem::path p(path);
  std::string name = p.stem().string();
  if (name == "config" && p.has_parent_path()) name = p.parent_path().filename().string();
  return name;
}

ReadModel read_hf_config_file(const std::string& path, const Where& named_at) {
  return read_hf_config(parse_json(read_text_file(path, named_at), path), path, config_model_name(path));
}

void throw_first_problem(const TrainingSetup& s, const Provenance& origin, const std::string& prefix,
                         const Where& fallback) {
  for (const Problem& p : validate(s)) {
    if (p.field.rfind(prefix, 0) != 0) continue;
    Where where = origin.of(p.field);
    // A GPU count nothing stated that the parallel degrees cannot split: the degree the file or
    // a flag stated is where the problem is (DeepSpeed's autotp_size 4 on the default one GPU).
    if (where.empty() && p.field == memplan::path(Count::num_gpus))
      for (const char* degree : {memplan::path(Count::tensor_parallel), memplan::path(Count::pipeline_parallel)})
        if (where.empty()) where = origin.of(degree);
    if (where.empty()) where = fallback;
    // A flag already names the field ("error: --micro-batch: ..."); a file line does not.
    std::string message = where.flag.empty() ? fmt::format("{}: {}", p.field, p.message) : p.message;
    // A value the reader derived from the key (DPO's doubled batch, Axolotl's padded length) says
    // how, so the number in the message is one the user can find.
    if (where.key.find(' ') != std::string::npos) message += fmt::format(" (the value is {})", where.key);
    throw InputError(where, message, p.hint);
  }
}

}  // namespace detail

}  // namespace memplan::profiles
