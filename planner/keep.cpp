// The user's file with only what the plan changes (see keep.h). YAML is edited as text: yaml-cpp
// finds each key (its line and column, Node::Mark) and the value's extent is read off the text
// (a plain scalar to the end of its line or a comment, a quoted one to its closing quote, a flow
// collection to its closing bracket, a block one over the lines indented below the key), so
// comments, blank lines, quoting and key order stay as the user wrote them. JSON has no comments:
// it is parsed, changed and written with its key order.
#include "planner/keep.h"

#include "estimator/text.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>

namespace memplan::planner {
namespace {

using Path = std::vector<std::string>;

std::string path_text(const Path& p) { return fmt::format("{}", fmt::join(p, ".")); }

bool opens_with_brace(const std::string& t) {
  for (const char c : t)
    if (!std::isspace(static_cast<unsigned char>(c))) return c == '{';
  return false;
}

YAML::Node load(const std::string& text, const char* what) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw KeepError(fmt::format("{} does not parse: {}", what, e.what()));
  }
}

// A value in one line of flow YAML, for comparing and for saying what changed.
std::string flow(const YAML::Node& n);

// The same for saying what changed: a long map or list cut after 60 characters.
std::string shown(const YAML::Node& n) {
  std::string t = flow(n);
  constexpr size_t kShown = 60;
  if (t.size() > kShown && (t.front() == '{' || t.front() == '[')) {
    size_t cut = t.rfind(", ", kShown);
    if (cut == std::string::npos || cut == 0) cut = kShown;
    t = t.substr(0, cut) + ", ...}";
    if (flow(n).front() == '[') t.back() = ']';
  }
  return t;
}

std::string flow(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "null";
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << n;
  return e.c_str();
}

// The leaves of a document in order: a non-empty map's entries, recursively; anything else
// (a scalar, a sequence, an empty map, null) is one leaf.
void leaves(const YAML::Node& n, Path& p, std::vector<std::pair<Path, YAML::Node>>& out) {
  if (n.IsMap() && n.size() > 0) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      p.push_back(it->first.Scalar());
      leaves(it->second, p, out);
      p.pop_back();
    }
    return;
  }
  if (!p.empty()) out.emplace_back(p, n);
}

std::vector<std::pair<Path, YAML::Node>> leaves_of(const YAML::Node& root) {
  std::vector<std::pair<Path, YAML::Node>> out;
  Path p;
  leaves(root, p, out);
  return out;
}

bool same_key(const std::string& have, const std::string& want, const KeyVocabulary& syn) {
  if (have == want) return true;
  for (const auto& group : syn.synonyms)
    if (std::find(group.begin(), group.end(), have) != group.end() && std::find(group.begin(), group.end(), want) != group.end())
      return true;
  return false;
}

// Where a path's walk through a document stops. yaml-cpp's Node has reference semantics: `=` on a
// bound node writes into the tree, so nodes are rebound with reset() only.
struct Place {
  size_t depth = 0;  // how many of the path's keys were found
  YAML::Node node;   // the node at that depth: the root, or the value of path[depth-1]
  YAML::Node key;    // the key node of path[depth-1] (depth > 0)
  YAML::Node map;    // the map holding that key (depth > 0)
};

Place locate(const YAML::Node& root, const Path& p, const KeyVocabulary& syn) {
  Place pl;
  pl.node.reset(root);
  for (size_t i = 0; i < p.size(); ++i) {
    if (!pl.node.IsMap()) return pl;
    auto find = [&](const YAML::Node& m) {
      std::optional<YAML::const_iterator> hit;
      for (auto it = m.begin(); it != m.end() && !hit; ++it)
        if (it->first.Scalar() == p[i]) hit = it;
      for (auto it = m.begin(); it != m.end() && !hit; ++it)
        if (same_key(it->first.Scalar(), p[i], syn)) hit = it;
      return hit;
    };
    std::optional<YAML::const_iterator> hit = find(pl.node);
    if (!hit)
      for (const std::string& through : syn.see_through)
        if (const YAML::Node inner = pl.node[through]; inner.IsDefined() && inner.IsMap() && inner.size() > 0) {
          // The key is looked for, and added, in the see-through map.
          YAML::Node holder;
          holder.reset(inner);
          pl.node.reset(holder);
          hit = find(pl.node);
          break;
        }
    if (!hit) return pl;
    YAML::Node holder;
    holder.reset(pl.node);
    pl.map.reset(holder);
    pl.key.reset((*hit)->first);
    pl.node.reset((*hit)->second);
    pl.depth = i + 1;
  }
  return pl;
}

// The text by lines.
struct Text {
  std::string s;
  std::vector<size_t> starts;
  explicit Text(std::string t) : s(std::move(t)) {
    starts.push_back(0);
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n' && i + 1 < s.size()) starts.push_back(i + 1);
  }
  int lines() const { return static_cast<int>(starts.size()); }
  size_t end(int l) const {  // the '\n' ending line l, or the end of the text
    const size_t e = s.find('\n', starts[static_cast<size_t>(l)]);
    return e == std::string::npos ? s.size() : e;
  }
  size_t after(int l) const {  // where the line after l starts
    const size_t e = end(l);
    return e == s.size() ? e : e + 1;
  }
  // The line's indentation; -1 for a blank or comment-only line.
  int indent(int l) const {
    size_t i = starts[static_cast<size_t>(l)];
    const size_t e = end(l);
    int n = 0;
    while (i < e && s[i] == ' ') ++i, ++n;
    if (i == e || s[i] == '#' || s[i] == '\r') return -1;
    return n;
  }
  int line_of(size_t pos) const {
    return static_cast<int>(std::upper_bound(starts.begin(), starts.end(), pos) - starts.begin()) - 1;
  }
};

size_t quoted_end(const std::string& s, size_t pos) {
  const char q = s[pos];
  for (size_t i = pos + 1; i < s.size(); ++i) {
    if (q == '"' && s[i] == '\\') {
      ++i;
      continue;
    }
    if (s[i] == q) {
      if (q == '\'' && i + 1 < s.size() && s[i + 1] == '\'') {
        ++i;
        continue;
      }
      return i + 1;
    }
  }
  throw KeepError("a quoted value has no closing quote");
}

size_t flow_end(const std::string& s, size_t pos) {
  int depth = 0;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    const char prev = i == 0 ? ' ' : s[i - 1];
    if ((c == '"' || c == '\'') && (std::isspace(static_cast<unsigned char>(prev)) || prev == '[' || prev == '{' || prev == ',' || prev == ':')) {
      i = quoted_end(s, i) - 1;
    } else if (c == '#' && std::isspace(static_cast<unsigned char>(prev))) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) return i + 1;
    }
  }
  throw KeepError("a flow collection ([...] or {...}) is not closed");
}

// The value's extent when it starts on its key's line (a scalar, or a flow collection, which may
// run over lines); nullopt for a block collection, a block scalar, an empty value, a tag or anchor.
std::optional<std::pair<size_t, size_t>> inline_span(const Text& t, const YAML::Node& key, const YAML::Node& value, bool in_flow = false) {
  const YAML::Mark km = key.Mark(), vm = value.Mark();
  if (vm.pos < 0 || vm.line != km.line || static_cast<size_t>(vm.pos) >= t.s.size()) return std::nullopt;
  const size_t b = static_cast<size_t>(vm.pos);
  const char c = t.s[b];
  if (c == '|' || c == '>' || c == '&' || c == '!' || c == '*' || c == '\n' || c == '#') return std::nullopt;
  if (c == '[' || c == '{') return std::make_pair(b, flow_end(t.s, b));
  if (c == '"' || c == '\'') return std::make_pair(b, quoted_end(t.s, b));
  const size_t le = t.end(t.line_of(b));
  size_t e = le;
  for (size_t i = b + 1; i < le; ++i)
    if ((t.s[i] == '#' && (t.s[i - 1] == ' ' || t.s[i - 1] == '\t')) || (in_flow && (t.s[i] == ',' || t.s[i] == '}' || t.s[i] == ']'))) {
      e = i;
      break;
    }
  while (e > b && (t.s[e - 1] == ' ' || t.s[e - 1] == '\t' || t.s[e - 1] == '\r')) --e;
  return std::make_pair(b, e);
}

// The lines a key's entry spans: its line, a flow value's lines, and the lines indented below it
// (a block sequence's "- " items may stand at the key's own column). Blank and comment lines
// count only between lines of the entry.
std::pair<int, int> entry_lines(const Text& t, const YAML::Node& key, const YAML::Node& value) {
  const int first = key.Mark().line;
  const int col = key.Mark().column;
  int last = first;
  if (const auto sp = inline_span(t, key, value)) last = t.line_of(sp->second - 1);
  const bool block_seq = value.IsSequence() && value.Mark().line > first;
  for (int l = last + 1; l < t.lines(); ++l) {
    const int ind = t.indent(l);
    if (ind < 0) continue;
    const size_t at = t.starts[static_cast<size_t>(l)] + static_cast<size_t>(ind);
    const bool dash = at < t.s.size() && t.s[at] == '-' && (at + 1 == t.s.size() || t.s[at + 1] == ' ' || t.s[at + 1] == '\n');
    if (ind > col || (block_seq && ind == col && dash)) last = l;
    else break;
  }
  return {first, last};
}

bool is_flow_map(const Text& t, const YAML::Node& map) {
  const YAML::Mark m = map.Mark();
  return m.pos >= 0 && static_cast<size_t>(m.pos) < t.s.size() && t.s[static_cast<size_t>(m.pos)] == '{';
}

// Lines moved from column `from` to column `to` (a key's own line first).
std::string reindent(const std::string& lines, int from, int to) {
  std::string out;
  size_t pos = 0;
  while (pos < lines.size()) {
    size_t nl = lines.find('\n', pos);
    if (nl == std::string::npos) nl = lines.size();
    std::string line = lines.substr(pos, nl - pos);
    if (!line.empty()) {
      if (to > from) {
        line.insert(0, static_cast<size_t>(to - from), ' ');
      } else {
        size_t n = 0;
        while (n < static_cast<size_t>(from - to) && n < line.size() && line[n] == ' ') ++n;
        line.erase(0, n);
      }
    }
    out += line + "\n";
    pos = nl + 1;
  }
  return out;
}

// The emitted file, parsed, with its text: where `after`'s entries are copied from.
struct Emitted {
  Text text;
  YAML::Node root;
  // The entry of `p` (which it holds) as lines at column `col`, its key spelt `key`.
  std::string entry(const Path& p, int col, const std::string& key) const {
    const Place pl = locate(root, p, KeyVocabulary{});
    if (pl.depth != p.size()) throw KeepError(fmt::format("the emitted file has no {}", path_text(p)));
    const auto [first, last] = entry_lines(text, pl.key, pl.node);
    const size_t b = text.starts[static_cast<size_t>(first)];
    std::string lines = text.s.substr(b, text.after(last) - b);
    if (!lines.empty() && lines.back() != '\n') lines += '\n';
    std::string out = reindent(lines, pl.key.Mark().column, col);
    const size_t k = static_cast<size_t>(col);
    if (key != pl.key.Scalar() && out.compare(k, pl.key.Scalar().size(), pl.key.Scalar()) == 0)
      out.replace(k, pl.key.Scalar().size(), key);
    return out;
  }
  std::optional<std::string> inline_value(const Path& p) const {
    const Place pl = locate(root, p, KeyVocabulary{});
    if (pl.depth != p.size()) return std::nullopt;
    const auto sp = inline_span(text, pl.key, pl.node);
    if (!sp) return std::nullopt;
    return text.s.substr(sp->first, sp->second - sp->first);
  }
  YAML::Node value(const Path& p) const { return locate(root, p, KeyVocabulary{}).node; }
};

// `text` with what the plan sets at `p`.
std::string set_yaml(const std::string& text, const Path& p, const Emitted& after, const KeyVocabulary& syn,
                     std::vector<std::string>& changes) {
  const Text t(text);
  const YAML::Node root = load(text, "the file being edited");
  const Place pl = locate(root, p, syn);
  const YAML::Node want = after.value(p);
  if (pl.depth == p.size()) {
    // The key is there: its value is replaced, in place when both are written on the key's line.
    const std::string old = flow(pl.node);
    if (old == flow(want)) return text;
    const auto span = inline_span(t, pl.key, pl.node, p.size() > 1 && is_flow_map(t, pl.map));
    const auto now = after.inline_value(p);
    Path shown_path = p;
    shown_path.back() = pl.key.Scalar();
    changes.push_back(fmt::format("{}: {} -> {}", path_text(shown_path), shown(pl.node), shown(want)));
    if (span && now) return text.substr(0, span->first) + *now + text.substr(span->second);
    if (p.size() > 1 && is_flow_map(t, pl.map))
      throw KeepError(fmt::format("{} is inside a flow map ({{...}}) and changes shape", path_text(p)));
    const auto [first, last] = entry_lines(t, pl.key, pl.node);
    const size_t b = t.starts[static_cast<size_t>(first)];
    return text.substr(0, b) + after.entry(p, pl.key.Mark().column, pl.key.Scalar()) + text.substr(t.after(last));
  }
  const size_t d = pl.depth;
  const Path head(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(d + 1));
  if (pl.node.IsMap() && pl.node.size() > 0 && !is_flow_map(t, pl.node)) {
    // The key is missing from a block map: added after the map's last entry, at its column.
    YAML::Node last_key, last_value;
    int col = -1;
    for (auto it = pl.node.begin(); it != pl.node.end(); ++it) {
      if (col < 0) col = it->first.Mark().column;
      last_key.reset(it->first);
      last_value.reset(it->second);
    }
    const int end_line = entry_lines(t, last_key, last_value).second;
    size_t at = t.after(end_line);
    std::string before = text.substr(0, at);
    if (!before.empty() && before.back() != '\n') before += '\n';
    const std::string added = after.entry(head, col, head.back());
    changes.push_back(head.size() == p.size() ? fmt::format("+ {}: {}", path_text(p), shown(want))
                                              : fmt::format("+ {}: {}", path_text(head), shown(after.value(head))));
    return before + added + text.substr(at);
  }
  if (d == 0) {
    if (pl.node.IsNull() && text.find_first_not_of(" \t\r\n") == std::string::npos) {
      changes.push_back(fmt::format("+ {}: {}", path_text(head), shown(after.value(head))));
      return after.entry(head, 0, head.back());
    }
    throw KeepError("the file is not a map of keys");
  }
  // What stands at p[0..d) is a scalar, an empty value or a flow map: replaced whole.
  const Path at_path(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(d));
  if (at_path.size() > 1 && is_flow_map(t, pl.map))
    throw KeepError(fmt::format("{} is inside a flow map ({{...}}) and changes shape", path_text(at_path)));
  const auto [first, last] = entry_lines(t, pl.key, pl.node);
  const size_t b = t.starts[static_cast<size_t>(first)];
  Path shown_path = at_path;
  shown_path.back() = pl.key.Scalar();
  changes.push_back(fmt::format("{}: {} -> {}", path_text(shown_path), shown(pl.node), shown(after.value(at_path))));
  return text.substr(0, b) + after.entry(at_path, pl.key.Mark().column, pl.key.Scalar()) + text.substr(t.after(last));
}

// `text` without the entry at `p`, and without the maps that removal leaves empty.
std::string remove_yaml(std::string text, Path p, const KeyVocabulary& syn, std::vector<std::string>& changes) {
  bool first_removal = true;
  while (!p.empty()) {
    const Text t(text);
    const YAML::Node root = load(text, "the file being edited");
    const Place pl = locate(root, p, syn);
    if (pl.depth != p.size()) return text;
    if (!first_removal && !(pl.node.IsNull() || (pl.node.IsMap() && pl.node.size() == 0))) return text;
    if (p.size() > 1 && is_flow_map(t, pl.map))
      throw KeepError(fmt::format("{} is inside a flow map ({{...}})", path_text(p)));
    const auto [first, last] = entry_lines(t, pl.key, pl.node);
    if (first_removal) changes.push_back(fmt::format("- {}", path_text(p)));
    text = text.substr(0, t.starts[static_cast<size_t>(first)]) + text.substr(t.after(last));
    first_removal = false;
    p.pop_back();
  }
  return text;
}

// The header of an earlier memplan plan at the top of the user's file, taken off.
const char* const kHeaderEnd = "# memplan's header ends here";

std::string without_memplan_header(const std::string& t) {
  if (t.rfind("# memplan ", 0) != 0) return t;
  const size_t at = t.find(kHeaderEnd);
  if (at != std::string::npos) {
    const size_t nl = t.find('\n', at);
    return nl == std::string::npos ? "" : t.substr(nl + 1);
  }
  size_t pos = 0;  // a file memplan wrote whole: its opening comment block
  while (pos < t.size() && t[pos] == '#') {
    const size_t nl = t.find('\n', pos);
    if (nl == std::string::npos) return "";
    pos = nl + 1;
  }
  return t.substr(pos);
}

std::string opening_comments(const std::string& t) {
  size_t pos = 0;
  while (pos < t.size() && t[pos] == '#') {
    const size_t nl = t.find('\n', pos);
    if (nl == std::string::npos) return t + "\n";
    pos = nl + 1;
  }
  return t.substr(0, pos);
}

// ---- JSON ---------------------------------------------------------------------------------

nlohmann::ordered_json to_json(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return nullptr;
  if (n.IsMap()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (auto it = n.begin(); it != n.end(); ++it) j[it->first.Scalar()] = to_json(it->second);
    return j;
  }
  if (n.IsSequence()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& e : n) j.push_back(to_json(e));
    return j;
  }
  const std::string& v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted: a string whatever it reads like
  static const std::regex kInt("[-+]?[0-9]+"), kFloat("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  if (v == "true" || v == "True" || v == "TRUE") return true;
  if (v == "false" || v == "False" || v == "FALSE") return false;
  if (v == "null" || v == "Null" || v == "NULL" || v == "~") return nullptr;
  try {
    if (std::regex_match(v, kInt)) return std::stoll(v);
    if (std::regex_match(v, kFloat)) return std::stod(v);
  } catch (const std::out_of_range&) {
  }
  return v;
}

nlohmann::ordered_json* find_json(nlohmann::ordered_json& obj, const std::string& key, const KeyVocabulary& syn) {
  if (!obj.is_object()) return nullptr;
  if (auto it = obj.find(key); it != obj.end()) return &*it;
  for (auto& [k, v] : obj.items())
    if (same_key(k, key, syn)) return &v;
  return nullptr;
}

KeptFile keep_json(const std::string& user, const std::vector<Path>& sets, const std::vector<Path>& removes, const YAML::Node& after,
                   const KeyVocabulary& syn) {
  nlohmann::ordered_json doc;
  try {
    doc = nlohmann::ordered_json::parse(user);
  } catch (const nlohmann::json::exception& e) {
    throw KeepError(fmt::format("the file does not parse as JSON: {}", e.what()));
  }
  if (!doc.is_object()) throw KeepError("the file is not a JSON object");
  KeptFile k;
  for (const Path& p : sets) {
    const nlohmann::ordered_json want = to_json(locate(after, p, KeyVocabulary{}).node);
    nlohmann::ordered_json* cur = &doc;
    for (size_t i = 0; i < p.size(); ++i) {
      nlohmann::ordered_json* next = find_json(*cur, p[i], syn);
      if (i + 1 == p.size()) {
        if (next && *next == want) break;
        k.changes.push_back(next ? fmt::format("{}: {} -> {}", path_text(p), next->dump(), want.dump())
                                 : fmt::format("+ {}: {}", path_text(p), want.dump()));
        if (next) *next = want;
        else (*cur)[p[i]] = want;
        break;
      }
      if (!next || !next->is_object()) {
        if (next) k.changes.push_back(fmt::format("{}: {} -> {{...}}", path_text(Path(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(i + 1))), next->dump()));
        if (next) *next = nlohmann::ordered_json::object();
        else (*cur)[p[i]] = nlohmann::ordered_json::object();
        next = find_json(*cur, p[i], syn);
      }
      cur = next;
    }
  }
  for (const Path& p : removes) {
    std::vector<nlohmann::ordered_json*> chain{&doc};
    for (const std::string& key : p) {
      nlohmann::ordered_json* next = find_json(*chain.back(), key, syn);
      if (!next) break;
      chain.push_back(next);
    }
    if (chain.size() != p.size() + 1) continue;
    k.changes.push_back(fmt::format("- {}", path_text(p)));
    for (size_t i = p.size(); i > 0; --i) {
      nlohmann::ordered_json& parent = *chain[i - 1];
      for (auto it = parent.begin(); it != parent.end(); ++it)
        if (&*it == chain[i]) {
          parent.erase(it);
          break;
        }
      if (i > 1 && !parent.empty()) break;
    }
  }
  k.text = doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return k;
}

}  // namespace

KeptFile keep_user_file(const std::string& user, const std::string& before, const std::string& after_in, const std::string& source,
                        const KeyVocabulary& syn) {
  const bool json = opens_with_brace(user);
  // A JSON emission edits a YAML file in YAML's own block style.
  std::string after = after_in;
  if (!json && opens_with_brace(after)) after = opening_comments(after) + YAML::Dump(load(after, "the emitted file")) + "\n";
  const YAML::Node b = load(before, "the emitted file"), a = load(after, "the emitted file");
  std::map<Path, std::string> was;
  for (const auto& [p, n] : leaves_of(b)) was[p] = flow(n);
  std::vector<Path> sets, removes;
  std::set<Path> now;
  for (const auto& [p, n] : leaves_of(a)) {
    now.insert(p);
    const auto it = was.find(p);
    if (it == was.end() || it->second != flow(n)) sets.push_back(p);
  }
  // A leaf the plan's file drops goes with the largest part of the file the plan's file has none
  // of: without fsdp: the user's whole fsdp_config: goes, whatever keys it holds.
  for (const auto& [p, n] : leaves_of(b)) {
    if (now.count(p)) continue;
    const size_t kept_depth = locate(a, p, KeyVocabulary{}).depth;
    if (kept_depth >= p.size()) continue;  // a map in the plan's file where a value was: set above
    const Path gone(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(kept_depth + 1));
    if (std::find(removes.begin(), removes.end(), gone) == removes.end()) removes.push_back(gone);
  }
  if (json) return keep_json(user, sets, removes, a, syn);

  KeptFile k;
  const Emitted emitted{Text(after), a};
  std::string text = without_memplan_header(user);
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (!text.empty() && !load(text, "the file").IsMap()) throw KeepError("the file is not a map of keys");
  // Each edit is checked where it landed: a text edit placed by indentation can land inside
  // something the lines do not show (a quoted scalar left open over lines).
  for (const Path& p : sets) {
    text = set_yaml(text, p, emitted, syn, k.changes);
    const Place now_at = locate(load(text, "the edited file"), p, syn);
    if (now_at.depth != p.size() || flow(now_at.node) != flow(emitted.value(p)))
      throw KeepError(fmt::format("{} could not be set where the file's structure puts it", path_text(p)));
  }
  for (const Path& p : removes) {
    text = remove_yaml(text, p, syn, k.changes);
    if (locate(load(text, "the edited file"), p, syn).depth == p.size())
      throw KeepError(fmt::format("{} could not be removed where the file's structure puts it", path_text(p)));
  }
  std::string head = opening_comments(after);
  head += fmt::format("# The rest is {} as it was, with {}:\n", text::comment_text(source),
                      k.changes.empty() ? "nothing changed (it holds the plan)" : "what the plan changes");
  for (const std::string& c : k.changes) head += "#   " + text::comment_text(c) + "\n";
  head += std::string(kHeaderEnd) + "\n";
  k.text = head + text;
  return k;
}

}  // namespace memplan::planner
