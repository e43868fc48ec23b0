// Model families (families.yaml): each supported model_type's architecture defaults built from the
// table's entries, which set ModelSpec's fields by their names (estimator/fields.h's model rows; see
// families.yaml for the form), and how the HF reader reads its config.json (the entries' `hf:`).
#include <algorithm>
#include <filesystem>
#include <functional>
#include <type_traits>
#include <variant>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "estimator/fields.h"
#include "profiles/detail.h"

namespace memplan::profiles {
namespace fs = std::filesystem;
using detail::Node;

namespace {

std::string number_text(double v) { return fmt::format("{}", v); }

// How a families.yaml value sets a ModelSpec field (estimator/fields.h's row), and its value as text.
void set_field(const memplan::ModelField& f, const Node& n, ModelSpec& m) {
  std::visit(
      [&](const auto& member) {
        using M = std::decay_t<decltype(member)>;
        if constexpr (std::is_same_v<M, bool ModelSpec::*>) m.*member = detail::as_bool(n);
        else if constexpr (std::is_same_v<M, int64_t ModelSpec::*>) m.*member = detail::as_int(n);
        else if constexpr (std::is_same_v<M, double ModelSpec::*>) m.*member = detail::as_number(n);
        else if constexpr (std::is_same_v<M, std::string ModelSpec::*>) m.*member = detail::as_text(n);
        else {
          const std::string v = detail::as_text(n);
          if (!member.set(m, v))
            throw InputError(n.where, fmt::format("unknown {} '{}'", f.name, clip(v)),
                             fmt::format("expected one of: {}", fmt::join(member.names, ", ")));
        }
      },
      f.member);
}

std::string field_text(const memplan::ModelField& f, const ModelSpec& m) {
  return std::visit(
      [&](const auto& member) -> std::string {
        using M = std::decay_t<decltype(member)>;
        if constexpr (std::is_same_v<M, bool ModelSpec::*>) return m.*member ? "true" : "false";
        else if constexpr (std::is_same_v<M, int64_t ModelSpec::*>) return std::to_string(m.*member);
        else if constexpr (std::is_same_v<M, double ModelSpec::*>) return number_text(m.*member);
        else if constexpr (std::is_same_v<M, std::string ModelSpec::*>) return m.*member;
        else return member.get(m);
      },
      f.member);
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
constexpr size_t kMaxLike = 32;  // entries a family may be built from (the table's deepest chain is 7: kimi_k2's)

const char* kHfHint = "hf: has keys (field: config key or [keys]), required, defaults, quirks and text_model";

// A field the HF reader can set from a config key: a number, a flag or the activation (by its HF
// name, hidden_act's).
bool keyable(const memplan::ModelField& f) {
  if (std::holds_alternative<memplan::NamedMember>(f.member)) return f.name == "activation";
  return !std::holds_alternative<std::string ModelSpec::*>(f.member);
}

const memplan::ModelField& keyed_field(const Node& at, const std::string& name) {
  for (const memplan::ModelField& f : memplan::model_fields())
    if (f.name == name) {
      if (!keyable(f))
        throw InputError(at.where, fmt::format("'{}' is not read from a config key", name),
                         "hf: keys set numbers, flags and the activation; a quirk reader sets the others");
      return f;
    }
  throw InputError(at.where, fmt::format("'{}' is not a ModelSpec field", clip(name)), kHint);
}

// The entry's `hf:` block over what it inherits: keys and defaults one by one, required and quirks
// as a whole.
void read_hf(const Node& hf, detail::HfKeys& out) {
  if (hf.kind != Node::Kind::map) throw InputError(hf.where, "hf: must be a mapping", kHfHint);
  for (const auto& [key, n] : hf.entries) {
    if (key == "keys") {
      if (n.kind != Node::Kind::map) throw InputError(n.where, "hf.keys must be a mapping of fields to config keys", kHfHint);
      for (const auto& [field, k] : n.entries) {
        keyed_field(k, field);
        out.keys[field] = k.kind == Node::Kind::list ? detail::as_text_list(k) : std::vector<std::string>{detail::as_text(k)};
      }
    } else if (key == "required") {
      out.required = detail::as_text_list(n);
      for (const std::string& f : out.required) keyed_field(n, f);
    } else if (key == "defaults") {
      if (n.kind != Node::Kind::map) throw InputError(n.where, "hf.defaults must be a mapping of config keys to values", kHfHint);
      for (const auto& [k, v] : n.entries) out.defaults[k] = detail::as_number(v);
    } else if (key == "quirks") {
      out.quirks = detail::as_text_list(n);
      for (const std::string& q : out.quirks)
        if (!detail::is_hf_quirk(q))
          throw InputError(n.where, fmt::format("no quirk reader '{}'", clip(q)), "profiles/hf_config.cpp's kQuirks lists them");
    } else if (key == "text_model") {
      out.text_model = detail::as_text(n);
    } else {
      throw InputError(n.where, fmt::format("unknown key 'hf.{}'", clip(key)), kHfHint);
    }
  }
}

struct Families {
  std::string path;
  std::map<std::string, Entry> entries;  // bases and families by name
  std::vector<std::string> types;        // the families, in file order
  std::map<std::string, std::string> aliases;  // a model_type read as a family (`aliases:`) -> the family
  std::string refused_text;                    // the `refused:` section, at its lines (blank lines above)
  mutable std::mutex mu;
  mutable std::map<std::string, detail::Family> built;

  // ModelSpec's defaults, then what the entry is `like` (recursively), then its own fields; the
  // same for the `hf:` block, key by key.
  detail::Family build(const std::string& name, std::vector<std::string>& chain) const {
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
    detail::Family fam;
    if (const Node* like = item.find("like")) {
      const std::string base = detail::as_text(*like);
      if (!entries.count(base))
        throw InputError(like->where, fmt::format("'{}' is like '{}', which has no entry", name, clip(base)), kHint);
      fam = build(base, chain);
      fam.hf.text_model.clear();  // the wrapper's own
      fam.liger = false;          // the entry's own
    }
    static const detail::KeyTable<ModelSpec> table = [] {
      detail::KeyTable<ModelSpec> k = {{{"name", "type", "like", "source", "aliases", "hf", "liger"}, [](const Node&, ModelSpec&) {}}};
      for (const memplan::ModelField& f : memplan::model_fields())
        if (f.name != "name") k.push_back({{f.name}, [&f](const Node& n, ModelSpec& m) { set_field(f, n, m); }});
      return k;
    }();
    detail::read_section(item, {&table}, fam.spec, nullptr);
    if (const Node* hf = item.find("hf")) read_hf(*hf, fam.hf);
    if (const Node* liger = item.find("liger")) fam.liger = detail::as_bool(*liger);
    return fam;
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
  std::map<std::string, int> alias_lines;
  detail::for_each_line(text, [&](int line, const std::string& l) {
    if (!l.empty() && l[0] != ' ' && l[0] != '#' && l[0] != '\r') {  // a section
      const auto colon = l.find(':');
      section = colon == std::string::npos ? l : l.substr(0, colon);
      if ((section != "bases" && section != "families" && section != "refused") || colon == std::string::npos ||
          !trimmed(l.substr(colon + 1)).empty())
        throw InputError(Where::at_file(path, line, 1), fmt::format("unexpected '{}' at the top level", clip(l)),
                         "the table has three lists, 'bases:', 'families:' and 'refused:'");
      cur = nullptr;
      if (section == "refused") {
        if (!f->refused_text.empty()) throw InputError(Where::at_file(path, line, 1), "a second 'refused:'", kHint);
        f->refused_text = std::string(static_cast<size_t>(line - 1), '\n') + l + "\n";
      }
      return;
    }
    if (section == "refused") {  // read whole when a config is checked against it
      f->refused_text += l + "\n";
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
    } else if (cur && l.rfind("    aliases:", 0) == 0) {
      // Model types read as this family: known before any entry is parsed.
      const Node n = detail::parse_yaml(std::string(static_cast<size_t>(line - 1), '\n') + l.substr(4), path);
      const Node* list = n.find("aliases");
      if (!list || list->kind != Node::Kind::list)
        throw InputError(Where::at_file(path, line, 5), "aliases: takes a list on its line, such as [RefinedWeb, RefinedWebModel]",
                         "the table is indexed line by line before any entry is read");
      for (const std::string& a : detail::as_text_list(*list)) {
        if (!f->aliases.emplace(a, cur->name).second)
          throw InputError(Where::at_file(path, line, 5), fmt::format("'{}' is named twice", clip(a)), "an alias names no other entry or alias");
        alias_lines.emplace(a, line);
      }
    } else if (!cur) {
      if (const auto c = l.find_first_not_of(" \t\r"); c != std::string::npos && l[c] != '#')
        throw InputError(Where::at_file(path, line, static_cast<int>(c) + 1), "expected an entry ('  - type: ...') here", kHint);
      return;
    }
    cur->text += l + "\n";
  });
  if (f->types.empty()) throw InputError(Where::at_file(path), "no families ('families:' with '  - type: ...' entries)", kHint);
  for (const auto& [alias, line] : alias_lines)
    if (f->entries.count(alias))
      throw InputError(Where::at_file(path, line, 5), fmt::format("'{}' is named twice", clip(alias)),
                       fmt::format("it has an entry at line {}; an alias names no other entry or alias", f->entries.at(alias).line));
  return f;
}

// The `refused:` entries: what each is, why memplan cannot estimate it, the hint, and the model
// types and config keys that name it.
std::vector<detail::Refusal> read_refused(const Families& f) {
  std::vector<detail::Refusal> out;
  if (f.refused_text.empty()) return out;
  const Node root = detail::parse_yaml(f.refused_text, f.path);
  const Node* list = root.find("refused");
  if (!list) return out;
  if (list->kind != Node::Kind::list) throw InputError(list->where, "refused: is a list of entries", kHint);
  static const detail::KeyTable<detail::Refusal> keys = {
      {{"source"}, [](const Node&, detail::Refusal&) {}},
      {{"what"}, [](const Node& n, detail::Refusal& r) { r.what = detail::as_text(n); }},
      {{"why"}, [](const Node& n, detail::Refusal& r) { r.why = detail::as_text(n); }},
      {{"hint"}, [](const Node& n, detail::Refusal& r) { r.hint = detail::as_text(n); }},
      {{"types"}, [](const Node& n, detail::Refusal& r) { r.types = detail::as_text_list(n); }},
      {{"when_true"}, [](const Node& n, detail::Refusal& r) { r.when_true = detail::as_text_list(n); }},
      {{"when_present"}, [](const Node& n, detail::Refusal& r) { r.when_present = detail::as_text_list(n); }},
  };
  for (const Node& item : list->items) {
    if (item.kind != Node::Kind::map) throw InputError(item.where, "a refused: entry is a mapping ('- what: ...')", kHint);
    detail::Refusal r;
    detail::read_section(item, {&keys}, r, nullptr);
    if (r.what.empty() || r.why.empty())
      throw InputError(item.where, "a refused: entry says what the model is and why memplan cannot estimate it ('what:', 'why:')", kHint);
    for (const std::string& t : r.types)
      if (f.entries.count(t) || f.aliases.count(t))
        throw InputError(item.find("types")->where, fmt::format("'{}' is refused and has an entry", clip(t)),
                         "a model type is read as a family or refused, not both");
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<detail::Family> build_family(const Families& f, const std::string& type) {
  if (std::find(f.types.begin(), f.types.end(), type) == f.types.end()) return std::nullopt;
  std::vector<std::string> chain;
  detail::Family fam = f.build(type, chain);
  fam.spec.model_type = type;
  for (const std::string& r : fam.hf.required)
    if (!fam.hf.keys.count(r) || fam.hf.keys.at(r).empty())
      throw InputError(Where::at_file(f.path, f.entries.at(type).line, 5),
                       fmt::format("'{}' requires {} from its config but has no key for it", type, r), kHfHint);
  return fam;
}

const Families& families();

std::optional<detail::Family> built_family(const std::string& model_type) {
  const Families& f = families();
  std::lock_guard<std::mutex> lock(f.mu);
  auto it = f.built.find(model_type);
  if (it == f.built.end()) {
    std::optional<detail::Family> m = build_family(f, model_type);
    if (!m) return std::nullopt;
    it = f.built.emplace(model_type, std::move(*m)).first;
  }
  return it->second;
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

bool liger_patches(const std::string& model_type) {
  const std::optional<detail::Family> f = built_family(model_type);
  return f && f->liger;
}

std::optional<ModelSpec> family_defaults(const std::string& model_type) {
  if (auto f = built_family(model_type)) return f->spec;
  return std::nullopt;
}

namespace detail {
const std::vector<Refusal>& refused_families() {
  static const std::vector<Refusal> r = read_refused(families());
  return r;
}

std::vector<Refusal> refused_from_text(const std::string& text, const std::string& path) {
  return read_refused(*index_families(text, path));
}

std::optional<ModelSpec> family_from_text(const std::string& text, const std::string& path, const std::string& type) {
  if (auto f = build_family(*index_families(text, path), type)) return f->spec;
  return std::nullopt;
}

std::optional<Family> hf_family_from_text(const std::string& text, const std::string& path, const std::string& type) {
  const auto f = index_families(text, path);
  const auto a = f->aliases.find(type);
  std::optional<Family> fam = build_family(*f, a == f->aliases.end() ? type : a->second);
  if (fam) fam->spec.model_type = type;
  return fam;
}

std::optional<Family> hf_family(const std::string& model_type) {
  const auto a = families().aliases.find(model_type);
  std::optional<Family> f = built_family(a == families().aliases.end() ? model_type : a->second);
  if (f) f->spec.model_type = model_type;
  return f;
}
}  // namespace detail

std::vector<std::pair<std::string, std::string>> model_fields_text(const ModelSpec& m) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const memplan::ModelField& f : memplan::model_fields()) out.emplace_back(f.name, field_text(f, m));
  return out;
}

}  // namespace memplan::profiles
