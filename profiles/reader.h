// The one config reader behind every profiles/ parser (internal to profiles/). YAML (yaml-cpp)
// and JSON (nlohmann) files become the same tree of Nodes carrying 1-based file:line:col, and all
// lookups, type checks and "did you mean" warnings go through the helpers here, so a message reads
// the same whatever the syntax. Library exceptions never escape: they become InputError.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "estimator/error.h"

namespace memplan::profiles::detail {

struct Node {
  enum class Kind { null, scalar, list, map };
  Kind kind = Kind::null;
  std::string text;     // scalar text as written ("4096", "bf16", "true")
  bool quoted = false;  // a string in the file (JSON string, quoted YAML): never a number or bool
  std::string path;     // dotted key path for messages ("training.micro_batch_size")
  Where where;          // the key's position; the value's for the root and list items
  std::vector<std::pair<std::string, Node>> entries;  // map entries in file order
  std::vector<Node> items;                            // list items

  // The value under `key`; nullptr when absent or null (YAML `key:` / JSON null mean "not set").
  const Node* find(const std::string& key) const;
};

std::string lower(std::string s);  // ASCII lower case: names and keys compare case-insensitively
inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The whole file; InputError at Where{path} when it cannot be read.
std::string read_text_file(const std::string& path);
// Parse errors become InputError at the offending position, with the library's message.
Node parse_yaml(const std::string& text, const std::string& path);
Node parse_json(const std::string& text, const std::string& path);

// ---- typed values: each throws InputError at the node, "<path> must be <what> (got <value>)" ----

[[noreturn]] void type_error(const Node& n, const std::string& what);
int64_t as_int(const Node& n);    // integers; integral floats such as 5e8 too (DeepSpeed writes them)
int64_t as_count(const Node& n);  // as_int, worded "a positive integer" (0 is left to validation)
double as_number(const Node& n);
bool as_bool(const Node& n);      // true/false (YAML also yes/no/on/off)
std::string as_text(const Node& n);
std::vector<std::string> as_text_list(const Node& n);  // a list of scalars or "a,b,c"
std::vector<std::string> split_list(const std::string& text);  // "a, b,,c" -> a b c
int64_t as_size(const Node& n);   // bytes as a number or a size string ("24GiB")

// A name from a fixed set: "unknown <what> 'x'" with hint "expected one of: ..." at `where`.
template <class E, class Parse>
E parse_choice(const std::string& text, const char* what, Parse parse, const std::vector<std::string>& names,
               const Where& where) {
  if (auto v = parse(text)) return *v;
  throw InputError(where, fmt::format("unknown {} '{}'", what, text),
                   fmt::format("expected one of: {}", fmt::join(names, ", ")));
}
template <class E, class Parse>
E as_choice(const Node& n, const char* what, Parse parse, const std::vector<std::string>& names) {
  return parse_choice<E>(as_text(n), what, parse, names, n.where);
}

// ---- sections: a table of known keys per section ------------------------------------------------

// A known key, its aliases, and what reading it does to the reader's state.
template <class State>
struct Key {
  std::vector<std::string> names;
  std::function<void(const Node& value, State& st)> apply;
};
template <class State>
using KeyTable = std::vector<Key<State>>;

// The known key closest to an unknown one, within a typo: edit distance <= 2 for keys longer
// than 5 characters, <= 1 otherwise (case differences count as a typo too).
std::optional<std::string> near_miss(const std::string& key, const std::vector<std::string>& known);
[[noreturn]] void not_a_map(const Node& n);

// Applies every present key of `map` found in `tables`. Other keys are ignored (real configs
// carry learning rates and paths), except near-misses of a known key: a Warning into `warnings`,
// or an InputError when `warnings` is null (strict files written by memplan itself).
template <class State>
void read_section(const Node& map, std::initializer_list<const KeyTable<State>*> tables, State& st,
                  std::vector<Warning>* warnings) {
  if (map.kind != Node::Kind::map) not_a_map(map);
  std::vector<std::string> known;
  for (const auto* t : tables)
    for (const auto& k : *t) known.insert(known.end(), k.names.begin(), k.names.end());
  for (const auto& [key, value] : map.entries) {
    const Key<State>* hit = nullptr;
    for (const auto* t : tables)
      for (const auto& k : *t)
        for (const auto& name : k.names)
          if (name == key) hit = &k;
    if (hit) {
      if (value.kind != Node::Kind::null) hit->apply(value, st);
      continue;
    }
    const auto guess = near_miss(key, known);
    if (!guess && warnings) continue;
    const std::string hint = guess ? fmt::format("did you mean '{}'?", *guess)
                                   : fmt::format("known keys here: {}", fmt::join(known, ", "));
    if (!warnings) throw InputError(value.where, fmt::format("unknown key '{}'", key), hint);
    warnings->push_back({value.where, fmt::format("unknown key '{}'", key), hint});
  }
}

}  // namespace memplan::profiles::detail
