// Hugging Face config.json -> ModelSpec. A family's entry in profiles/families.yaml gives its
// architecture (family_defaults()) and how its config is read (`hf:`): which config key states each
// field (with its transformers Config class's default for a key a file leaves out), which fields a
// file must state, and the small named readers below (kQuirks) for what is not one key per field.
// Modelling code and Config classes are read at transformers v4.57.1 unless a family says otherwise
// (configuration_<type>.py / modeling_<type>.py); families that live in remote code cite the
// checkpoint's own files.
//
// Multimodal wrappers (gemma3, llama4: hf.text_model; and any config whose text_config is a
// supported family) are read through the text model of text_config; the vision tower is not counted
// (a warning says so). What memplan cannot model is refused with the missing feature named:
// encoder-decoder models (T5's decoder stack with cross-attention) and state-space layers (Mamba-2
// in Nemotron-H).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <variant>

#include "estimator/estimate.h"
#include "estimator/model.h"
#include "profiles/detail.h"

namespace memplan::profiles {
namespace detail {
namespace {

const std::vector<std::string> kActivations = {"gelu", "gelu_new", "gelu_pytorch_tanh", "silu", "relu"};

// A model_type with no families.yaml entry, with the supported list.
InputError unsupported_type(const std::string& type, const Where& where) {
  return InputError(where, fmt::format("model_type '{}' is not supported", clip(type)),
                    fmt::format("supported model types: {}", fmt::join(supported_model_types(), ", ")));
}

// Reads a config.json's keys into the spec and notes each field's position for validation
// messages; read_field() takes a key the file leaves out from the family's hf.defaults (its Config
// class's default) when the table gives one.
struct HfReader {
  const Node& root;
  ReadModel& out;
  const HfKeys& hf;
  std::set<std::string> stated;  // the fields the keys set (from the file or a Config default)

  ModelSpec& m() { return out.spec; }
  const Node* get(const char* key) const { return root.find(key); }
  bool has(const char* key) const { return get(key) != nullptr; }
  // The key is written, null included.
  bool present(const char* key) const {
    return std::any_of(root.entries.begin(), root.entries.end(), [&](const auto& e) { return e.first == key; });
  }
  void opt(const char* key, int64_t ModelSpec::*member) {
    if (const Node* n = get(key)) take(*n, member);
  }
  double number(const char* key, double otherwise) const {
    const Node* n = get(key);
    return n ? as_number(*n) : otherwise;
  }
  bool flag(const char* key, bool otherwise) const {
    const Node* n = get(key);
    return n ? as_bool(*n) : otherwise;
  }
  void take(const Node& n, int64_t ModelSpec::*member) {
    m().*member = as_int(n);
    out.origin.set(memplan::path(member), n.where);
  }
  void warn(const Node* at, std::string message, std::string hint) {
    out.warnings.push_back({at ? at->where : root.where, std::move(message), std::move(hint)});
  }
};

// One field from the first of its keys the file states; else from the Config default of the first
// key that has one; else, when the family requires it, an error naming the key.
void read_field(HfReader& r, const memplan::ModelField& f, const std::vector<std::string>& keys, bool required) {
  ModelSpec& m = r.m();
  const Node* n = nullptr;
  for (const std::string& k : keys)
    if ((n = r.get(k.c_str()))) break;
  std::optional<double> fallback;
  if (!n)
    for (const std::string& k : keys)
      if (auto d = r.hf.defaults.find(k); d != r.hf.defaults.end() && !fallback) fallback = d->second;
  if (!n && !fallback) {
    if (required)
      throw InputError(Where::at_file(r.root.where.file), fmt::format("missing '{}'", keys.front()),
                       fmt::format("memplan reads {} from '{}' in {} configs", f.path, keys.front(), m.model_type));
    return;
  }
  r.stated.insert(f.name);
  std::visit(
      [&](const auto& member) {
        using M = std::decay_t<decltype(member)>;
        if constexpr (std::is_same_v<M, int64_t ModelSpec::*>) {
          m.*member = n ? as_int(*n) : static_cast<int64_t>(*fallback);
          if (n) r.out.origin.set(f.path, n->where);
        } else if constexpr (std::is_same_v<M, double ModelSpec::*>) {
          m.*member = n ? as_number(*n) : *fallback;
          if (n) r.out.origin.set(f.path, n->where);
        } else if constexpr (std::is_same_v<M, bool ModelSpec::*>) {
          m.*member = n ? as_bool(*n) : *fallback != 0;
        } else if constexpr (std::is_same_v<M, memplan::NamedMember>) {
          if (n) m.activation = as_activation(*n);  // the only named field with keys (families.cpp)
        }
      },
      f.member);
}

// The family's keys (families.yaml's hf.keys): the required fields first, in the table's order,
// then the others in ModelSpec's.
void read_keys(HfReader& r) {
  auto keys_of = [&](const std::string& field) -> const std::vector<std::string>* {
    const auto k = r.hf.keys.find(field);
    return k == r.hf.keys.end() || k->second.empty() ? nullptr : &k->second;
  };
  for (const std::string& name : r.hf.required)
    for (const memplan::ModelField& f : memplan::model_fields())
      if (f.name == name) read_field(r, f, *keys_of(name), true);
  for (const memplan::ModelField& f : memplan::model_fields())
    if (const auto* keys = keys_of(f.name);
        keys && std::find(r.hf.required.begin(), r.hf.required.end(), f.name) == r.hf.required.end())
      read_field(r, f, *keys, false);
}

// ---- quirk readers: what a family's config states other than one key per field (families.yaml
// names them in hf.quirks; they run after the keys) ----

// intermediate_size unstated: 4 x hidden_size (GPT2MLP's `n_inner or 4 * n_embd`; FalconMLP's
// 4 * hidden_size without ffn_hidden_size).
void mlp_4x(HfReader& r) {
  if (!r.stated.count("intermediate_size")) r.m().intermediate_size = 4 * r.m().hidden_size;
}

// GPTBigCodeConfig multi_query (default True): one KV head.
void multi_query(HfReader& r) {
  r.m().num_key_value_heads = r.flag("multi_query", true) ? 1 : r.m().num_attention_heads;
}

// sliding_window with the layer pattern: layer_types (every n-th "full_attention"), or the
// family's fixed pattern from profiles/families.yaml. Qwen2 carries a window it does not use unless
// use_sliding_window is true.
void sliding_window(HfReader& r) {
  ModelSpec& m = r.m();
  if (r.has("use_sliding_window") && !r.flag("use_sliding_window", false)) return;
  read_field(r, memplan::field(&ModelSpec::sliding_window), {"sliding_window"}, false);  // Gemma3TextConfig's 4096 when left out
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

// Gemma-2/3 attn_logit_softcapping / final_logit_softcapping: null turns soft-capping off; absent
// keeps the Config default (Gemma-2: 50 and 30; Gemma-3: none).
void softcaps(HfReader& r) {
  ModelSpec& m = r.m();
  if (r.present("attn_logit_softcapping")) {
    const Node* n = r.get("attn_logit_softcapping");
    m.attn_softcap = n ? as_number(*n) : 0.0;
  }
  if (r.present("final_logit_softcapping")) {
    const Node* n = r.get("final_logit_softcapping");
    m.final_softcap = n ? as_number(*n) : 0.0;
  }
}

// CohereConfig use_qk_norm: a LayerNorm per head on q and k.
void cohere_qk_norm(HfReader& r) {
  if (r.flag("use_qk_norm", false)) r.m().qk_norm = QkNorm::per_head_layer_norm;
}

// StableLmConfig qk_layernorm: a LayerNorm per head on q and k.
void stablelm_qk_layernorm(HfReader& r) {
  if (r.flag("qk_layernorm", false)) r.m().qk_norm = QkNorm::per_head_layer_norm;
}

// PhiConfig qk_layernorm (a LayerNorm shared by the heads of q and k): refused.
void phi_qk_layernorm(HfReader& r) {
  if (r.flag("qk_layernorm", false))
    throw InputError(r.get("qk_layernorm")->where, "phi's qk_layernorm (a LayerNorm shared by the heads of q and k) is not modelled",
                     "phi-1, phi-1.5 and phi-2 publish qk_layernorm false");
}

// Qwen2-MoE shared_expert_intermediate_size: one shared expert when it is above 0.
void shared_expert_count(HfReader& r) {
  if (r.stated.count("shared_expert_intermediate_size"))
    r.m().num_shared_experts = r.m().shared_expert_intermediate_size > 0 ? 1 : 0;
}

// Qwen-MoE mlp_only_layers: dense layers memplan counts as MoE (said, not refused).
void mlp_only_layers(HfReader& r) {
  const Node* dense = r.get("mlp_only_layers");
  if (dense && dense->kind == Node::Kind::list && !dense->items.empty())
    r.warn(dense, "mlp_only_layers is not modelled: every layer counts as a mixture-of-experts layer",
           fmt::format("the estimate over-counts the {} dense layers' MLPs", dense->items.size()));
}

// FalconConfig (and the legacy RefinedWeb/RefinedWebModel configs of the checkpoints' own
// configuration_RW.py: n_head_kv). KV heads: new_decoder_architecture -> num_kv_heads,
// multi_query -> 1, else all (FalconAttention.__init__); parallel_attn, alibi, and
// num_ln_in_parallel_attn under the new architecture.
void falcon_layout(HfReader& r) {
  ModelSpec& m = r.m();
  const bool refined_web = m.model_type == "RefinedWeb";  // Falcon-40B's layout before transformers' port
  const bool new_arch = r.flag("new_decoder_architecture", refined_web);
  const bool multi_query = r.flag("multi_query", !refined_web);
  int64_t kv = m.num_attention_heads;
  if (const Node* n = r.has("num_kv_heads") ? r.get("num_kv_heads") : r.get("n_head_kv")) {
    kv = as_int(*n);
    r.out.origin.set(memplan::path(&ModelSpec::num_key_value_heads), n->where);
  }
  m.num_key_value_heads = new_arch ? kv : multi_query ? 1 : m.num_attention_heads;
  if (r.flag("alibi", false)) m.positions = PositionKind::alibi;
  const bool parallel = new_arch || r.flag("parallel_attn", true);
  m.parallel_residual = parallel;
  // new_decoder_architecture: ln_attn and ln_mlp (num_ln_in_parallel_attn 2 unless set to 1).
  const int64_t lns = new_arch ? static_cast<int64_t>(r.number("num_ln_in_parallel_attn", 2)) : 1;
  m.parallel_shared_norm = parallel && lns == 1;
}

// MPTConfig (modeling_mpt.py): expansion_ratio, no_bias, attn_config.
void mpt_layout(HfReader& r) {
  ModelSpec& m = r.m();
  m.intermediate_size = static_cast<int64_t>(std::llround(r.number("expansion_ratio", 4) * static_cast<double>(m.hidden_size)));
  const bool bias = !r.flag("no_bias", true);
  m.qkv_bias = m.o_bias = m.mlp_bias = m.norm_bias = bias;
  if (const Node* attn = r.get("attn_config"); attn && attn->kind == Node::Kind::map) {
    if (const Node* p = attn->find("attn_pdrop")) m.attention_dropout = as_number(*p);
    if (const Node* qk = attn->find("qk_ln"); qk && as_bool(*qk))
      throw InputError(qk->where, "MPT's attn_config.qk_ln (LayerNorm on q and k) is not modelled",
                       "mosaicml/mpt-7b and mpt-30b publish qk_ln false");
    if (const Node* al = attn->find("alibi"); al && !as_bool(*al)) m.positions = PositionKind::none;
  }
}

// DeepseekConfig (deepseek-ai/deepseek-moe-16b-base configuration_deepseek.py), DeepseekV2Config and
// DeepseekV3Config: every layer after first_k_dense_replace is MoE; scoring_func picks the router.
void deepseek_moe(HfReader& r) {
  ModelSpec& m = r.m();
  if (const Node* f = r.get("moe_layer_freq"); f && as_int(*f) != 1)
    throw InputError(f->where, fmt::format("moe_layer_freq {} is not modelled (every layer after first_k_dense_replace is MoE)", as_int(*f)),
                     "every published DeepSeek config uses moe_layer_freq 1");
  if (const Node* sf = r.get("scoring_func")) {
    const std::string f = as_text(*sf);
    if (f == "sigmoid") m.router = RouterKind::sigmoid;
    else if (f == "softmax") m.router = RouterKind::softmax_topk;
    else throw InputError(sf->where, fmt::format("scoring_func '{}' is not modelled", f), "expected softmax or sigmoid");
  }
}

// DeepSeek multi-head latent attention, when the config states kv_lora_rank: q_lora_rank (null:
// one q_proj), qk_rope_head_dim, qk_nope_head_dim, v_head_dim; every head has its own k and v.
void latent_attention(HfReader& r) {
  ModelSpec& m = r.m();
  if (!r.has("kv_lora_rank")) return;
  read_field(r, memplan::field(&ModelSpec::kv_lora_rank), {"kv_lora_rank"}, true);
  r.opt("q_lora_rank", &ModelSpec::q_lora_rank);
  for (const auto& [key, member] : {std::pair{"qk_rope_head_dim", &ModelSpec::qk_rope_head_dim},
                                    std::pair{"qk_nope_head_dim", &ModelSpec::qk_nope_head_dim},
                                    std::pair{"v_head_dim", &ModelSpec::v_head_dim}})
    read_field(r, memplan::field(member), {key}, true);
  m.head_dim = m.qk_rope_head_dim + m.qk_nope_head_dim;
  m.num_key_value_heads = m.num_attention_heads;
}

// DeepSeek-V2/V3 describe their attention with kv_lora_rank: a config without it is refused.
void needs_latent_attention(HfReader& r) {
  if (!r.has("kv_lora_rank"))
    throw InputError(Where::at_file(r.root.where.file), fmt::format("{} without 'kv_lora_rank'", r.m().model_type),
                     "DeepSeek-V2/V3 configs describe multi-head latent attention with kv_lora_rank, q_lora_rank, "
                     "qk_rope_head_dim, qk_nope_head_dim and v_head_dim");
}

// GraniteMoeConfig: embedding_multiplier (scaled embeddings unless 1), logits_scaling (the logits
// divided by it).
void granite_multipliers(HfReader& r) {
  ModelSpec& m = r.m();
  m.scale_embeddings = r.number("embedding_multiplier", 1.0) != 1.0;
  const double logits_scaling = r.number("logits_scaling", 1.0);
  m.logit_scale = logits_scaling != 0 ? 1.0 / logits_scaling : 1.0;
}

// Llama4TextConfig use_qk_norm (default True, an L2 norm without weights).
void llama4_qk_norm(HfReader& r) {
  if (!r.flag("use_qk_norm", true)) r.m().qk_norm = QkNorm::none;
}

using Quirk = void (*)(HfReader&);
const std::map<std::string, Quirk> kQuirks = {
    {"mlp_4x", mlp_4x},
    {"multi_query", multi_query},
    {"sliding_window", sliding_window},
    {"softcaps", softcaps},
    {"cohere_qk_norm", cohere_qk_norm},
    {"stablelm_qk_layernorm", stablelm_qk_layernorm},
    {"phi_qk_layernorm", phi_qk_layernorm},
    {"shared_expert_count", shared_expert_count},
    {"mlp_only_layers", mlp_only_layers},
    {"falcon_layout", falcon_layout},
    {"mpt_layout", mpt_layout},
    {"deepseek_moe", deepseek_moe},
    {"latent_attention", latent_attention},
    {"needs_latent_attention", needs_latent_attention},
    {"granite_multipliers", granite_multipliers},
    {"llama4_qk_norm", llama4_qk_norm},
};
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
  // A number of the config within what the quantizer takes, else an error at its key: a bit width
  // of 1 to 16, a group or block of 1 to 2^20 weights (GPTQ/AWQ's -1: one group per row).
  enum class Want { bits, group };
  auto number = [&](const Node& n, const char* key, double otherwise, Want want = Want::bits) {
    const Node* v = n.find(key);
    if (!v) return otherwise;
    const double x = as_number(*v);
    const bool whole = std::isfinite(x) && x == std::floor(x);
    const bool ok = want == Want::bits ? whole && x >= 1 && x <= 16 : whole && ((x >= 1 && x <= (1 << 20)) || x == -1);
    if (!ok)
      throw InputError(v->where,
                       fmt::format("quantization_config {} {} is not {}", key, v->text,
                                   want == Want::bits ? "a bit width (a whole number from 1 to 16)"
                                                      : "a group size (a whole number of weights from 1 to 1,048,576, or -1)"),
                       want == Want::bits ? "GPTQ and AWQ store 2, 3, 4 or 8 bits per weight; compressed-tensors 4 or 8"
                                          : "checkpoints group 32, 64 or 128 weights per scale (-1: one scale per row)");
    return x;
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
    const double group = number(q, "group_size", 128, Want::group);
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
    w.bits = group ? grouped(bits, number(*weights, "group_size", 128, Want::group), sym && !as_bool(*sym) ? bits : 0) : bits;
  } else if (w.method == "fp8") {
    double block = 0;
    if (const Node* b = q.find("weight_block_size"); b && b->kind == Node::Kind::list && b->items.size() == 2) {
      double side[2];
      for (int i = 0; i < 2; ++i) {
        side[i] = as_number(b->items[i]);
        if (!std::isfinite(side[i]) || side[i] != std::floor(side[i]) || side[i] < 1 || side[i] > (1 << 20))
          throw InputError(b->items[i].where, fmt::format("quantization_config weight_block_size {} is not a block side", b->items[i].text),
                           "fp8 checkpoints scale blocks of 128 x 128 weights (DeepSeek-V3)");
      }
      block = side[0] * side[1];
    }
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

// What memplan refuses (families.yaml's refused:), with the feature it would need.
void refuse_unsupported(const Node& root, const std::string& type, const Where& where) {
  for (const Refusal& r : refused_families()) {
    const bool named = std::find(r.types.begin(), r.types.end(), type) != r.types.end() ||
                       std::any_of(r.when_true.begin(), r.when_true.end(),
                                   [&](const std::string& k) { const Node* n = root.find(k); return n && as_bool(*n); }) ||
                       std::any_of(r.when_present.begin(), r.when_present.end(), [&](const std::string& k) { return root.find(k) != nullptr; });
    if (named) throw InputError(where, fmt::format("model_type '{}' {}: {}", type, r.what, r.why), r.hint);
  }
}

// The family a config.json's model_type is read as (its families.yaml entry or an alias of one).
Family hf_family_or_throw(const std::string& type, const Where& where) {
  if (auto f = hf_family(type)) return *f;
  throw unsupported_type(type, where);
}

// A multimodal wrapper's text model (families.yaml's hf.text_model: gemma3 -> gemma3_text); "" for
// any other type.
std::string text_model_of(const std::string& type) {
  const std::optional<Family> f = hf_family(type);
  return f ? f->hf.text_model : std::string();
}

}  // namespace

bool is_hf_quirk(const std::string& name) { return kQuirks.count(name) > 0; }

Activation as_activation(const Node& n) {
  return as_choice<Activation>(n, "activation", parse_activation, kActivations);
}

ModelSpec family_defaults_or_throw(const std::string& type, const Where& where) {
  if (auto m = family_defaults(type)) return *m;
  throw unsupported_type(type, where);
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
    std::string inner = inner_type ? as_text(*inner_type) : text_model_of(t);
    if (inner.empty())
      throw InputError(text->where, "text_config without 'model_type'", "memplan reads a multimodal model through its text model");
    refuse_unsupported(*text, inner, inner_type ? inner_type->where : text->where);
    if (const std::string wrapped = text_model_of(inner); !wrapped.empty()) inner = wrapped;
    body = text;
    if (root.find("vision_config") || root.find("audio_config"))
      out.warnings.push_back({type->where, fmt::format("'{}' is multimodal: only its text model ({}) is counted", t, inner),
                              "the vision tower and projector add their weights and activations on top"});
    t = inner;
  } else if (const std::string wrapped = text_model_of(t); !wrapped.empty()) {
    t = wrapped;
  }
  const Family family = hf_family_or_throw(t, type->where);
  out.spec = family.spec;
  out.spec.name = name;
  if (const Node* repo = root.find("_name_or_path")) out.spec.hf_repo = as_text(*repo);
  // The stored dtype (transformers 4.x writes torch_dtype, 5.x dtype; a multimodal wrapper may
  // state it on the text model only).
  for (const Node* n : {root.find("dtype"), root.find("torch_dtype"), text && text->kind == Node::Kind::map ? text->find("dtype") : nullptr,
                        text && text->kind == Node::Kind::map ? text->find("torch_dtype") : nullptr})
    if (n && n->kind == Node::Kind::scalar && out.spec.checkpoint_dtype.empty()) out.spec.checkpoint_dtype = n->text;
  HfReader r{*body, out, family.hf, {}};
  read_keys(r);
  for (const std::string& q : family.hf.quirks) kQuirks.at(q)(r);
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
  // No num_key_value_heads (or null): every head has its own K/V, as the configs' __init__ set it
  // (LlamaConfig: `if num_key_value_heads is None: num_key_value_heads = num_attention_heads`). A
  // stated 0 is left for validation to refuse at its key: transformers divides by it.
  const Node* kv = body->find("num_key_value_heads");
  if (m.num_key_value_heads == 0 && (!kv || kv->kind == Node::Kind::null)) m.num_key_value_heads = m.num_attention_heads;
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
