// Model families (families.yaml): ModelSpec's fields by name, and each supported model_type's
// architecture defaults built from the table's entries (see families.yaml for the form).
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "profiles/detail.h"

namespace memplan::profiles {
namespace fs = std::filesystem;
using detail::Node;

namespace {

// One ModelSpec field: its name (the member's), how a YAML value sets it, and its value as text.
struct ModelField {
  std::string name;
  std::function<void(const Node&, ModelSpec&)> set;
  std::function<std::string(const ModelSpec&)> text;
};

std::string number_text(double v) { return fmt::format("{}", v); }

ModelField field(const char* name, bool ModelSpec::*member) {
  return {name, [member](const Node& n, ModelSpec& m) { m.*member = detail::as_bool(n); },
          [member](const ModelSpec& m) { return std::string(m.*member ? "true" : "false"); }};
}
ModelField field(const char* name, int64_t ModelSpec::*member) {
  return {name, [member](const Node& n, ModelSpec& m) { m.*member = detail::as_int(n); },
          [member](const ModelSpec& m) { return std::to_string(m.*member); }};
}
ModelField field(const char* name, double ModelSpec::*member) {
  return {name, [member](const Node& n, ModelSpec& m) { m.*member = detail::as_number(n); },
          [member](const ModelSpec& m) { return number_text(m.*member); }};
}
ModelField field(const char* name, std::string ModelSpec::*member) {
  return {name, [member](const Node& n, ModelSpec& m) { m.*member = detail::as_text(n); },
          [member](const ModelSpec& m) { return m.*member; }};
}
// An enum by its names (the words families.yaml uses).
template <class E>
ModelField field(const char* name, E ModelSpec::*member, std::vector<std::pair<const char*, E>> names) {
  auto set = [member, names, name](const Node& n, ModelSpec& m) {
    const std::string v = detail::as_text(n);
    for (const auto& [word, value] : names)
      if (v == word) {
        m.*member = value;
        return;
      }
    std::vector<std::string> known;
    for (const auto& p : names) known.emplace_back(p.first);
    throw InputError(n.where, fmt::format("unknown {} '{}'", name, clip(v)), fmt::format("expected one of: {}", fmt::join(known, ", ")));
  };
  auto text = [member, names](const ModelSpec& m) {
    for (const auto& [word, value] : names)
      if (m.*member == value) return std::string(word);
    return std::string("?");
  };
  return {name, set, text};
}

const std::vector<ModelField>& model_fields() {
  static const std::vector<ModelField> t = {
      field("name", &ModelSpec::name),
      field("model_type", &ModelSpec::model_type),
      field("hf_repo", &ModelSpec::hf_repo),
      field("checkpoint_dtype", &ModelSpec::checkpoint_dtype),
      field("head", &ModelSpec::head, {{"causal_lm", HeadKind::causal_lm}, {"masked_lm", HeadKind::masked_lm},
                                       {"sequence_classification", HeadKind::sequence_classification}}),
      field("hidden_size", &ModelSpec::hidden_size),
      field("num_layers", &ModelSpec::num_layers),
      field("num_attention_heads", &ModelSpec::num_attention_heads),
      field("num_key_value_heads", &ModelSpec::num_key_value_heads),
      field("head_dim", &ModelSpec::head_dim),
      field("intermediate_size", &ModelSpec::intermediate_size),
      field("vocab_size", &ModelSpec::vocab_size),
      field("max_position_embeddings", &ModelSpec::max_position_embeddings),
      field("num_labels", &ModelSpec::num_labels),
      field("type_vocab_size", &ModelSpec::type_vocab_size),
      field("norm", &ModelSpec::norm, {{"layer_norm", NormKind::layer_norm}, {"rms_norm", NormKind::rms_norm}}),
      field("activation", &ModelSpec::activation, {{"gelu", Activation::gelu}, {"gelu_tanh", Activation::gelu_tanh},
                                                   {"gelu_new", Activation::gelu_new}, {"silu", Activation::silu},
                                                   {"relu", Activation::relu}}),
      field("gated_mlp", &ModelSpec::gated_mlp),
      field("positions", &ModelSpec::positions, {{"learned", PositionKind::learned}, {"rotary", PositionKind::rotary},
                                                 {"alibi", PositionKind::alibi}, {"none", PositionKind::none}}),
      field("tie_word_embeddings", &ModelSpec::tie_word_embeddings),
      field("qkv_bias", &ModelSpec::qkv_bias),
      field("o_bias", &ModelSpec::o_bias),
      field("mlp_bias", &ModelSpec::mlp_bias),
      field("norm_bias", &ModelSpec::norm_bias),
      field("final_norm", &ModelSpec::final_norm),
      field("bert_style", &ModelSpec::bert_style),
      field("fused_qkv", &ModelSpec::fused_qkv),
      field("fused_gate_up", &ModelSpec::fused_gate_up),
      field("parallel_residual", &ModelSpec::parallel_residual),
      field("rotary_fraction", &ModelSpec::rotary_fraction),
      field("post_norms", &ModelSpec::post_norms),
      field("qk_norm", &ModelSpec::qk_norm, {{"none", QkNorm::none}, {"per_head", QkNorm::per_head}, {"full_width", QkNorm::full_width},
                                             {"per_head_layer_norm", QkNorm::per_head_layer_norm}, {"l2", QkNorm::l2}}),
      field("attn_softcap", &ModelSpec::attn_softcap),
      field("final_softcap", &ModelSpec::final_softcap),
      field("scale_embeddings", &ModelSpec::scale_embeddings),
      field("causal_mask", &ModelSpec::causal_mask, {{"additive", MaskKind::additive}, {"bool_buffer", MaskKind::bool_buffer},
                                                     {"padding", MaskKind::padding}, {"bool_4d", MaskKind::bool_4d}}),
      field("softmax_fp32", &ModelSpec::softmax_fp32),
      field("attn_weights_held_by_layer", &ModelSpec::attn_weights_held_by_layer),
      field("parallel_shared_norm", &ModelSpec::parallel_shared_norm),
      field("pre_norms", &ModelSpec::pre_norms),
      field("norm_weight_fp32", &ModelSpec::norm_weight_fp32),
      field("norm_fp32_manual", &ModelSpec::norm_fp32_manual),
      field("rope_fp32", &ModelSpec::rope_fp32),
      field("lm_head_bias", &ModelSpec::lm_head_bias),
      field("logit_scale", &ModelSpec::logit_scale),
      field("residual_multiplier", &ModelSpec::residual_multiplier),
      field("attention_sinks", &ModelSpec::attention_sinks),
      field("sliding_window", &ModelSpec::sliding_window),
      field("global_attention_every", &ModelSpec::global_attention_every),
      field("q_lora_rank", &ModelSpec::q_lora_rank),
      field("kv_lora_rank", &ModelSpec::kv_lora_rank),
      field("qk_rope_head_dim", &ModelSpec::qk_rope_head_dim),
      field("qk_nope_head_dim", &ModelSpec::qk_nope_head_dim),
      field("v_head_dim", &ModelSpec::v_head_dim),
      field("attention_dropout", &ModelSpec::attention_dropout),
      field("hidden_dropout", &ModelSpec::hidden_dropout),
      field("embedding_dropout", &ModelSpec::embedding_dropout),
      field("num_experts", &ModelSpec::num_experts),
      field("experts_per_token", &ModelSpec::experts_per_token),
      field("moe_intermediate_size", &ModelSpec::moe_intermediate_size),
      field("num_shared_experts", &ModelSpec::num_shared_experts),
      field("shared_expert_intermediate_size", &ModelSpec::shared_expert_intermediate_size),
      field("shared_expert_gate", &ModelSpec::shared_expert_gate),
      field("norm_topk_prob", &ModelSpec::norm_topk_prob),
      field("capacity_factor", &ModelSpec::capacity_factor),
      field("moe_layer_frequency", &ModelSpec::moe_layer_frequency),
      field("first_dense_layers", &ModelSpec::first_dense_layers),
      field("router", &ModelSpec::router, {{"softmax_topk", RouterKind::softmax_topk}, {"topk_softmax", RouterKind::topk_softmax},
                                           {"sigmoid", RouterKind::sigmoid}, {"topk_sigmoid", RouterKind::topk_sigmoid}}),
      field("router_bias", &ModelSpec::router_bias),
      field("router_fp32", &ModelSpec::router_fp32),
      field("routed_scaling_factor", &ModelSpec::routed_scaling_factor),
      field("expert_groups", &ModelSpec::expert_groups),
      field("topk_groups", &ModelSpec::topk_groups),
      field("moe_impl", &ModelSpec::moe_impl, {{"loop", MoeImpl::loop}, {"all_experts", MoeImpl::all_experts}}),
      field("moe_fp32_combine", &ModelSpec::moe_fp32_combine),
      field("fused_expert_gate_up", &ModelSpec::fused_expert_gate_up),
      field("expert_bias", &ModelSpec::expert_bias),
      field("clamped_swiglu", &ModelSpec::clamped_swiglu),
      field("stacked_experts_v5", &ModelSpec::stacked_experts_v5),
  };
  return t;
}

// families.yaml split into entries by lines (a top-level key starts a section, "  - " an entry
// whose first line names it): a command builds one family, and the strict YAML reader costs about
// a microsecond per byte, so only the entries that family is built from are parsed, once.
struct Entry {
  int line = 0;      // the "  - " line
  std::string text;  // the entry's lines
  std::string name;  // its `name` (a base) or `type` (a family)
  bool base = false;
};

const char* kHint = "see profiles/families.yaml for the table's form";
constexpr size_t kMaxLike = 32;  // entries a family may be built from (the table's deepest chain is 4)

struct Families {
  std::string path;
  std::map<std::string, Entry> entries;  // bases and families by name
  std::vector<std::string> types;        // the families, in file order
  mutable std::mutex mu;
  mutable std::map<std::string, ModelSpec> built;

  // ModelSpec's defaults, then what the entry is `like` (recursively), then its own fields.
  ModelSpec build(const std::string& name, std::vector<std::string>& chain) const {
    const Entry& e = entries.at(name);
    if (std::find(chain.begin(), chain.end(), name) != chain.end())
      throw InputError(Where::at_file(path, e.line), fmt::format("'{}' is its own ancestor through `like`", name), kHint);
    if (chain.size() >= kMaxLike)
      throw InputError(Where::at_file(path, e.line), fmt::format("'{}' is more than {} entries down a `like` chain", name, kMaxLike), kHint);
    chain.push_back(name);
    // Parsed alone, the entry keeps its lines: blank lines stand for the file above it (so a YAML
    // syntax error in it is reported at its line of the file too).
    const Node root = detail::parse_yaml(std::string(static_cast<size_t>(e.line - 1), '\n') + e.text, path);
    if (root.kind != Node::Kind::list || root.items.size() != 1 || root.items[0].kind != Node::Kind::map)
      throw InputError(Where::at_file(path, e.line), "expected one entry ('- type: ...') here", kHint);
    const Node& item = root.items[0];
    if (const Node* other = item.find(e.base ? "type" : "name"))
      throw InputError(other->where, e.base ? "a base has a name, not a type" : "a family has a type, not a name",
                       "bases: entries are '- name: ...', families: entries '- type: ...'");
    ModelSpec m;
    if (const Node* like = item.find("like")) {
      const std::string base = detail::as_text(*like);
      if (!entries.count(base))
        throw InputError(like->where, fmt::format("'{}' is like '{}', which has no entry", name, clip(base)), kHint);
      m = build(base, chain);
    }
    static const detail::KeyTable<ModelSpec> table = [] {
      detail::KeyTable<ModelSpec> k = {{{"name", "type", "like", "source"}, [](const Node&, ModelSpec&) {}}};
      for (const ModelField& f : model_fields())
        if (f.name != "name") k.push_back({{f.name}, f.set});
      return k;
    }();
    detail::read_section(item, {&table}, m, nullptr);
    return m;
  }
};

// A one-line scalar's text: quoted ("a #b", 'x'), or up to a comment.
std::string trimmed(std::string v) {
  const auto b = v.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  v = v.substr(b);
  if (v[0] == '"' || v[0] == '\'') {
    const auto close = v.find(v[0], 1);
    return close == std::string::npos ? v : v.substr(1, close - 1);
  }
  if (const auto hash = v.find(" #"); hash != std::string::npos) v.resize(hash);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.pop_back();
  return v;
}

std::unique_ptr<Families> index_families(const std::string& text, const std::string& path) {
  auto f = std::make_unique<Families>();
  f->path = path;
  std::string section;
  Entry* cur = nullptr;
  detail::for_each_line(text, [&](int line, const std::string& l) {
    if (!l.empty() && l[0] != ' ' && l[0] != '#' && l[0] != '\r') {  // a section
      const auto colon = l.find(':');
      section = colon == std::string::npos ? l : l.substr(0, colon);
      if ((section != "bases" && section != "families") || colon == std::string::npos || !trimmed(l.substr(colon + 1)).empty())
        throw InputError(Where::at_file(path, line, 1), fmt::format("unexpected '{}' at the top level", clip(l)),
                         "the table has two lists, 'bases:' and 'families:'");
      cur = nullptr;
      return;
    }
    if (l.rfind("  - ", 0) == 0 && !section.empty()) {
      const char* key = section == "bases" ? "name:" : "type:";
      const std::string first = l.substr(4);
      if (first.rfind(key, 0) != 0)
        throw InputError(Where::at_file(path, line, 5), fmt::format("an entry of '{}' starts with '{}'", section, key), kHint);
      const std::string name = trimmed(first.substr(5));
      if (name.empty()) throw InputError(Where::at_file(path, line, 5), fmt::format("'{}' has no value", key), kHint);
      const auto [it, fresh] = f->entries.emplace(name, Entry{line, "", name, section == "bases"});
      if (!fresh)
        throw InputError(Where::at_file(path, line, 5), fmt::format("'{}' has two entries", clip(name)),
                         fmt::format("the first is at line {}", it->second.line));
      cur = &it->second;
      if (section == "families") f->types.push_back(name);
    } else if (!cur) {
      if (const auto c = l.find_first_not_of(" \t\r"); c != std::string::npos && l[c] != '#')
        throw InputError(Where::at_file(path, line, static_cast<int>(c) + 1), "expected an entry ('  - type: ...') here", kHint);
      return;
    }
    cur->text += l + "\n";
  });
  if (f->types.empty()) throw InputError(Where::at_file(path), "no families ('families:' with '  - type: ...' entries)", kHint);
  return f;
}

std::optional<ModelSpec> build_family(const Families& f, const std::string& type) {
  if (std::find(f.types.begin(), f.types.end(), type) == f.types.end()) return std::nullopt;
  std::vector<std::string> chain;
  ModelSpec m = f.build(type, chain);
  m.model_type = type;
  return m;
}

const Families& families() {
  static const std::unique_ptr<Families> f = [] {
    const std::string path = (fs::path(data_dir()) / "families.yaml").string();
    return index_families(detail::read_text_file(path), path);
  }();
  return *f;
}

}  // namespace

const std::vector<std::string>& supported_model_types() { return families().types; }

std::optional<ModelSpec> family_defaults(const std::string& model_type) {
  const Families& f = families();
  std::lock_guard<std::mutex> lock(f.mu);
  auto it = f.built.find(model_type);
  if (it == f.built.end()) {
    std::optional<ModelSpec> m = build_family(f, model_type);
    if (!m) return std::nullopt;
    it = f.built.emplace(model_type, std::move(*m)).first;
  }
  return it->second;
}

namespace detail {
std::optional<ModelSpec> family_from_text(const std::string& text, const std::string& path, const std::string& type) {
  return build_family(*index_families(text, path), type);
}
}  // namespace detail

std::vector<std::pair<std::string, std::string>> model_fields_text(const ModelSpec& m) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const ModelField& f : model_fields()) out.emplace_back(f.name, f.text(m));
  return out;
}

}  // namespace memplan::profiles
