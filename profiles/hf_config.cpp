// Hugging Face config.json -> ModelSpec. One reader per key layout (GPT-2's n_embd names,
// GPT-NeoX, the Llama-style decoders with their MoE variants, BERT); the architecture flags come
// from family_defaults() (estimator/model.h), which mirrors each family's transformers Config
// defaults and modelling code. Multi-head latent attention (DeepSeek-V2/V3) has no ModelSpec shape and is refused.
#include <algorithm>
#include <filesystem>

#include "estimator/estimate.h"
#include "profiles/detail.h"

namespace memplan::profiles {
namespace detail {
namespace {

const std::vector<std::string> kActivations = {"gelu", "gelu_new", "gelu_pytorch_tanh", "silu", "relu"};

bool is_any(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}
bool is_moe(const std::string& type) { return is_any(type, {"mixtral", "qwen2_moe", "qwen3_moe"}); }

// Reads HF keys into the spec and notes each field's position for validation messages.
struct HfReader {
  const Node& root;
  ReadModel& out;

  ModelSpec& m() { return out.spec; }
  const Node* get(const char* key) const { return root.find(key); }

  void need(const char* key, int64_t ModelSpec::*member, const char* field) {
    const Node* n = get(key);
    if (!n)
      throw InputError(Where::at_file(root.where.file), fmt::format("missing '{}'", key),
                       fmt::format("memplan reads {} from '{}' in {} configs", field, key, m().model_type));
    take(*n, member, field);
  }
  bool opt(const char* key, int64_t ModelSpec::*member, const char* field) {
    const Node* n = get(key);
    if (n) take(*n, member, field);
    return n != nullptr;
  }
  void opt(const char* key, double ModelSpec::*member, const char* field) {
    if (const Node* n = get(key)) {
      m().*member = as_number(*n);
      out.origin.set(field, n->where);
    }
  }
  void opt(const char* key, bool ModelSpec::*member) {
    if (const Node* n = get(key)) m().*member = as_bool(*n);
  }
  void activation(const char* key) {
    if (const Node* n = get(key)) m().activation = as_activation(*n);
  }
  void take(const Node& n, int64_t ModelSpec::*member, const char* field) {
    m().*member = as_int(n);
    out.origin.set(field, n.where);
  }
};

void read_gpt2(HfReader& r) {
  ModelSpec& m = r.m();
  r.need("n_embd", &ModelSpec::hidden_size, "model.hidden_size");
  r.need("n_layer", &ModelSpec::num_layers, "model.num_layers");
  r.need("n_head", &ModelSpec::num_attention_heads, "model.num_attention_heads");
  r.need("vocab_size", &ModelSpec::vocab_size, "model.vocab_size");
  r.opt("n_positions", &ModelSpec::max_position_embeddings, "model.max_position_embeddings");
  if (!r.opt("n_inner", &ModelSpec::intermediate_size, "model.intermediate_size")) m.intermediate_size = 4 * m.hidden_size;
  r.activation("activation_function");
  r.opt("attn_pdrop", &ModelSpec::attention_dropout, "model.attention_dropout");
  r.opt("resid_pdrop", &ModelSpec::hidden_dropout, "model.hidden_dropout");
  r.opt("embd_pdrop", &ModelSpec::embedding_dropout, "model.embedding_dropout");
  r.opt("tie_word_embeddings", &ModelSpec::tie_word_embeddings);
}

// The hidden_size/num_hidden_layers/... names shared by every other family.
void read_common(HfReader& r, bool intermediate_required) {
  r.need("hidden_size", &ModelSpec::hidden_size, "model.hidden_size");
  r.need("num_hidden_layers", &ModelSpec::num_layers, "model.num_layers");
  r.need("num_attention_heads", &ModelSpec::num_attention_heads, "model.num_attention_heads");
  if (intermediate_required) r.need("intermediate_size", &ModelSpec::intermediate_size, "model.intermediate_size");
  else r.opt("intermediate_size", &ModelSpec::intermediate_size, "model.intermediate_size");
  r.need("vocab_size", &ModelSpec::vocab_size, "model.vocab_size");
  r.opt("max_position_embeddings", &ModelSpec::max_position_embeddings, "model.max_position_embeddings");
  r.opt("tie_word_embeddings", &ModelSpec::tie_word_embeddings);
  r.opt("attention_dropout", &ModelSpec::attention_dropout, "model.attention_dropout");
}

void read_neox(HfReader& r) {
  read_common(r, true);
  r.activation("hidden_act");
  if (const Node* n = r.get("attention_bias")) r.m().qkv_bias = r.m().o_bias = as_bool(*n);
  r.opt("hidden_dropout", &ModelSpec::hidden_dropout, "model.hidden_dropout");
}

void read_moe(HfReader& r) {
  ModelSpec& m = r.m();
  r.need("num_experts_per_tok", &ModelSpec::experts_per_token, "model.num_experts_per_token");
  r.opt("capacity_factor", &ModelSpec::capacity_factor, "model.capacity_factor");  // memplan extension key
  if (m.model_type == "mixtral") {
    r.need("num_local_experts", &ModelSpec::num_experts, "model.num_experts");
    m.moe_intermediate_size = m.intermediate_size;  // Mixtral's experts are intermediate_size wide
    return;
  }
  r.need("num_experts", &ModelSpec::num_experts, "model.num_experts");
  r.need("moe_intermediate_size", &ModelSpec::moe_intermediate_size, "model.moe_intermediate_size");
  if (r.opt("shared_expert_intermediate_size", &ModelSpec::shared_expert_intermediate_size,
            "model.shared_expert_intermediate_size"))
    m.num_shared_experts = m.shared_expert_intermediate_size > 0 ? 1 : 0;
  r.opt("decoder_sparse_step", &ModelSpec::moe_layer_frequency, "model.moe_layer_frequency");
  r.opt("norm_topk_prob", &ModelSpec::norm_topk_prob);
  const Node* dense = r.get("mlp_only_layers");
  if (dense && dense->kind == Node::Kind::list && !dense->items.empty())
    r.out.warnings.push_back({dense->where, "mlp_only_layers is not modelled: every layer counts as a mixture-of-experts layer",
                              fmt::format("the estimate over-counts the {} dense layers' MLPs", dense->items.size())});
}

void read_decoder(HfReader& r) {
  ModelSpec& m = r.m();
  const std::string& type = m.model_type;
  read_common(r, !is_any(type, {"qwen2_moe", "qwen3_moe"}));
  r.opt("num_key_value_heads", &ModelSpec::num_key_value_heads, "model.num_key_value_heads");
  r.opt("head_dim", &ModelSpec::head_dim, "model.head_dim");
  // Gemma runs GeGLU with the tanh approximation whatever hidden_act says (GemmaConfig's
  // hidden_activation, default gelu_pytorch_tanh).
  r.activation(is_any(type, {"gemma", "gemma2"}) ? "hidden_activation" : "hidden_act");
  if (!is_any(type, {"qwen2", "qwen2_moe"}))  // Qwen2 hard-codes q/k/v bias on, o bias off
    if (const Node* n = r.get("attention_bias")) m.qkv_bias = m.o_bias = as_bool(*n);
  r.opt("mlp_bias", &ModelSpec::mlp_bias);
  if (type == "phi3") {
    r.opt("resid_pdrop", &ModelSpec::hidden_dropout, "model.hidden_dropout");
    r.opt("embd_pdrop", &ModelSpec::embedding_dropout, "model.embedding_dropout");
  }
  if (is_moe(type)) read_moe(r);
}

void read_bert(HfReader& r) {
  read_common(r, true);
  r.opt("type_vocab_size", &ModelSpec::type_vocab_size, "model.type_vocab_size");
  r.activation("hidden_act");
  r.opt("attention_probs_dropout_prob", &ModelSpec::attention_dropout, "model.attention_dropout");
  r.opt("hidden_dropout_prob", &ModelSpec::hidden_dropout, "model.hidden_dropout");
  r.m().embedding_dropout = r.m().hidden_dropout;  // BertEmbeddings uses hidden_dropout_prob
}

// architectures[0] decides the head; id2label (or num_labels) sizes a classifier.
void read_head(HfReader& r) {
  ModelSpec& m = r.m();
  if (const Node* arch = r.get("architectures")) {
    const auto names = as_text_list(*arch);
    const std::string a = names.empty() ? "" : names.front();
    if (ends_with(a, "ForCausalLM") || ends_with(a, "LMHeadModel")) m.head = HeadKind::causal_lm;
    else if (ends_with(a, "ForMaskedLM") || ends_with(a, "ForPreTraining") || a == "BertModel") m.head = HeadKind::masked_lm;
    else if (ends_with(a, "ForSequenceClassification")) m.head = HeadKind::sequence_classification;
  }
  if (const Node* labels = r.get("id2label"); labels && labels->kind == Node::Kind::map)
    m.num_labels = static_cast<int64_t>(labels->entries.size());
  else
    r.opt("num_labels", &ModelSpec::num_labels, "model.num_labels");
}

}  // namespace

Activation as_activation(const Node& n) {
  return as_choice<Activation>(n, "activation", parse_activation, kActivations);
}

ModelSpec family_defaults_or_throw(const std::string& type, const Where& where) {
  if (auto m = family_defaults(type)) return *m;
  const std::string hint = fmt::format("supported model types: {}", fmt::join(supported_model_types(), ", "));
  if (type.rfind("deepseek", 0) == 0)
    throw InputError(where, fmt::format("model_type '{}' (multi-head latent attention) is not supported", clip(type)), hint);
  throw InputError(where, fmt::format("model_type '{}' is not supported", clip(type)), hint);
}

ReadModel read_hf_config(const Node& root, const std::string& path, const std::string& name) {
  if (root.kind != Node::Kind::map) type_error(root, "a JSON object");
  const Node* type = root.find("model_type");
  if (!type)
    throw InputError(Where::at_file(path), "missing 'model_type'",
                     fmt::format("a Hugging Face config.json names its architecture in model_type (supported: {})",
                                 fmt::join(supported_model_types(), ", ")));
  ReadModel out;
  out.spec = family_defaults_or_throw(as_text(*type), type->where);
  out.spec.name = name;
  if (const Node* repo = root.find("_name_or_path")) out.spec.hf_repo = as_text(*repo);
  HfReader r{root, out};
  const std::string& t = out.spec.model_type;
  if (t == "gpt2") read_gpt2(r);
  else if (t == "gpt_neox") read_neox(r);
  else if (t == "bert") read_bert(r);
  else read_decoder(r);
  read_head(r);
  ModelSpec& m = out.spec;
  if (!root.find("num_key_value_heads")) m.num_key_value_heads = m.num_attention_heads;
  if (!root.find("head_dim") && m.num_attention_heads > 0) m.head_dim = m.hidden_size / m.num_attention_heads;
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
    if (where.empty()) where = fallback;
    // A flag already names the field ("error: --micro-batch: ..."); a file line does not.
    const std::string message = where.flag.empty() ? fmt::format("{}: {}", p.field, p.message) : p.message;
    throw InputError(where, message, p.hint);
  }
}

}  // namespace detail

}  // namespace memplan::profiles
