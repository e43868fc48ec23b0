// Model families (families.yaml): each supported model_type's architecture defaults built from the
// table's entries, which set ModelSpec's fields by their names (estimator/fields.h's model rows; see
// families.yaml for the form).
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
      for (const memplan::ModelField& f : memplan::model_fields())
        if (f.name != "name") k.push_back({{f.name}, [&f](const Node& n, ModelSpec& m) { set_field(f, n, m); }});
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
  for (const memplan::ModelField& f : memplan::model_fields()) out.emplace_back(f.name, field_text(f, m));
  return out;
}

}  // namespace memplan::profiles
