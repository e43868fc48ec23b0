// The config tree: YAML and JSON into Nodes with positions, typed reads, near-miss keys.
// yaml-cpp marks are 0-based and carry no file name; nlohmann reports a byte offset and keeps no
// key positions at all, so a JSON key's position is found by searching the text from where its
// parent (or previous sibling) was found, which is exact for the configs memplan reads.
#include "profiles/reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "profiles/profiles.h"

namespace memplan::profiles::detail {
namespace {

// Deeper nesting than any config has; guards the recursive conversion against hostile input.
constexpr int kMaxDepth = 64;

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

void check_depth(int depth, const Where& where) {
  if (depth > kMaxDepth) throw InputError(where, fmt::format("nested more than {} levels deep", kMaxDepth));
}

// ---- YAML -------------------------------------------------------------------------------------

Where yaml_where(const YAML::Mark& m, const std::string& file) {
  if (m.is_null()) return Where::at_file(file);
  return Where::at_file(file, m.line + 1, m.column + 1);
}

Node from_yaml(const YAML::Node& y, const std::string& file, const std::string& path, const Where& where, int depth) {
  check_depth(depth, where);
  Node n;
  n.path = path;
  n.where = where;
  switch (y.Type()) {
    case YAML::NodeType::Scalar:
      n.kind = Node::Kind::scalar;
      n.text = y.Scalar();
      n.quoted = y.Tag() == "!";  // yaml-cpp tags quoted scalars "!", plain ones "?"
      break;
    case YAML::NodeType::Sequence:
      n.kind = Node::Kind::list;
      for (const auto& item : y) n.items.push_back(from_yaml(item, file, path, yaml_where(item.Mark(), file), depth + 1));
      break;
    case YAML::NodeType::Map:
      n.kind = Node::Kind::map;
      for (const auto& kv : y) {
        const Where key_where = yaml_where(kv.first.Mark(), file);
        if (!kv.first.IsScalar()) throw InputError(key_where, "keys must be plain names");
        const std::string key = kv.first.Scalar();
        n.entries.emplace_back(key, from_yaml(kv.second, file, child_path(path, key), key_where, depth + 1));
      }
      break;
    default:
      break;  // null / undefined
  }
  return n;
}

// ---- JSON -------------------------------------------------------------------------------------

Where where_at(const std::string& text, size_t offset, const std::string& file) {
  offset = std::min(offset, text.size());
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
  const size_t nl = offset == 0 ? std::string::npos : text.rfind('\n', offset - 1);
  const int col = static_cast<int>(nl == std::string::npos ? offset + 1 : offset - nl);
  return Where::at_file(file, line, col);
}

// Offset of `"key"` followed by ':' at or after `from`; npos when not found.
size_t find_key(const std::string& text, const std::string& key, size_t from) {
  const std::string quoted = "\"" + key + "\"";
  for (size_t p = text.find(quoted, from); p != std::string::npos; p = text.find(quoted, p + 1)) {
    size_t q = p + quoted.size();
    while (q < text.size() && std::isspace(static_cast<unsigned char>(text[q]))) ++q;
    if (q < text.size() && text[q] == ':') return p;
  }
  return std::string::npos;
}

// Python's json module writes float('inf') and float('nan') as the bare literals Infinity,
// -Infinity and NaN, and real config.json files carry them (NVIDIA Nemotron-H's
// time_step_limit [0.0, Infinity]). Strict JSON has no such tokens, so outside strings they are
// rewritten as strings marked with a leading \u0001, which the converter turns back into plain
// (unquoted) scalars: a key memplan does not read stays harmless, and one it reads is refused
// as not a number. `shifts` maps offsets in the rewritten text back to the original.
constexpr char kNonFiniteMark = '\x01';

struct NonFinite {
  std::string text;
  std::vector<std::pair<size_t, size_t>> shifts;  // (offset in `text` after a rewrite, bytes added so far)
  size_t original_offset(size_t at) const {
    size_t added = 0;
    for (const auto& [from, total] : shifts)
      if (at >= from) added = total;
    return at >= added ? at - added : 0;
  }
};

NonFinite quote_non_finite(const std::string& in) {
  NonFinite out;
  if (in.find("Infinity") == std::string::npos && in.find("NaN") == std::string::npos) {
    out.text = in;
    return out;
  }
  out.text.reserve(in.size() + 64);
  bool in_string = false;
  size_t added = 0;
  auto word_at = [&](size_t i, const char* w) {
    const size_t n = std::strlen(w);
    if (in.compare(i, n, w) != 0) return false;
    const size_t end = i + n;
    return end >= in.size() || !(std::isalnum(static_cast<unsigned char>(in[end])) || in[end] == '_');
  };
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (in_string) {
      out.text += c;
      if (c == '\\' && i + 1 < in.size()) out.text += in[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out.text += c;
      continue;
    }
    for (const char* w : {"-Infinity", "Infinity", "NaN"}) {
      if (!word_at(i, w)) continue;
      const std::string quoted = std::string("\"\\u0001") + w + "\"";
      out.text += quoted;
      added += quoted.size() - std::strlen(w);
      out.shifts.emplace_back(out.text.size(), added);
      i += std::strlen(w) - 1;
      goto next;
    }
    out.text += c;
  next:;
  }
  return out;
}

struct JsonConverter {
  const std::string& text;
  const std::string& file;

  // Converts `j`; `cursor` moves past every key found, so siblings are searched in file order.
  Node convert(const nlohmann::ordered_json& j, const std::string& path, const Where& where, size_t& cursor, int depth) {
    check_depth(depth, where);
    Node n;
    n.path = path;
    n.where = where;
    if (j.is_object()) {
      n.kind = Node::Kind::map;
      for (const auto& [key, value] : j.items()) {
        size_t at = find_key(text, key, cursor);
        if (at == std::string::npos) at = find_key(text, key, 0);
        const Where key_where = at == std::string::npos ? Where::at_file(file) : where_at(text, at, file);
        if (at != std::string::npos) cursor = std::max(cursor, at + key.size() + 2);
        n.entries.emplace_back(key, convert(value, child_path(path, key), key_where, cursor, depth + 1));
      }
    } else if (j.is_array()) {
      n.kind = Node::Kind::list;
      for (const auto& item : j) n.items.push_back(convert(item, path, where, cursor, depth + 1));
    } else if (j.is_string()) {
      n.kind = Node::Kind::scalar;
      n.text = j.get<std::string>();
      n.quoted = true;
      if (!n.text.empty() && n.text[0] == kNonFiniteMark) {  // a bare Infinity/NaN (quote_non_finite)
        n.text.erase(0, 1);
        n.quoted = false;
      }
    } else if (!j.is_null()) {
      n.kind = Node::Kind::scalar;
      n.text = j.dump();  // numbers and booleans as JSON writes them
    }
    return n;
  }
};

// nlohmann reports the offset of the last character it read: the end of the offending token.
// Pointing at the token's start reads better ("expected ':'" at the string, not its last quote).
size_t token_start(const std::string& text, size_t offset) {
  if (offset >= text.size()) return offset;
  if (text[offset] == '"') {
    for (size_t p = offset; p-- > 0;)
      if (text[p] == '"' && (p == 0 || text[p - 1] != '\\')) return p;
    return offset;
  }
  auto in_literal = [&](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '-'; };
  while (offset > 0 && in_literal(text[offset]) && in_literal(text[offset - 1])) --offset;
  return offset;
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 3, column 0: <msg>";
// its column is unreliable after a newline, so the position is recomputed from the byte offset.
std::string json_message(const std::string& what) {
  size_t p = what.find("column ");
  p = p == std::string::npos ? std::string::npos : what.find(": ", p);
  if (p != std::string::npos) return what.substr(p + 2);
  p = what.find("] ");
  return p == std::string::npos ? what : what.substr(p + 2);
}

// ---- scalars ----------------------------------------------------------------------------------

// [+-]digits[.digits][(e|E)[+-]digits]: what both YAML and JSON write for numbers.
bool looks_numeric(const std::string& t) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    return i > start;
  };
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
  if (!digits()) return false;
  if (i < t.size() && t[i] == '.') {
    ++i;
    digits();
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == t.size();
}

std::string describe(const Node& n) {
  switch (n.kind) {
    case Node::Kind::map: return "a mapping";
    case Node::Kind::list: return "a list";
    case Node::Kind::null: return "nothing";
    case Node::Kind::scalar: break;
  }
  return n.quoted ? fmt::format("string '{}'", n.text) : fmt::format("'{}'", n.text);
}

bool is_plain_scalar(const Node& n) { return n.kind == Node::Kind::scalar && !n.quoted; }

}  // namespace

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const Node* Node::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return v.kind == Kind::null ? nullptr : &v;
  return nullptr;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Where::at_file(path), fmt::format("cannot open the file ({})", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Node parse_yaml(const std::string& text, const std::string& path) {
  try {
    return from_yaml(YAML::Load(text), path, "", Where::at_file(path), 0);
  } catch (const YAML::Exception& e) {
    throw InputError(yaml_where(e.mark, path), e.msg);
  }
}

Node parse_json(const std::string& text, const std::string& path) {
  nlohmann::ordered_json j;
  const NonFinite nf = quote_non_finite(text);
  try {
    j = nlohmann::ordered_json::parse(nf.text);
  } catch (const nlohmann::json::parse_error& e) {
    const size_t at = nf.original_offset(e.byte == 0 ? 0 : e.byte - 1);
    throw InputError(where_at(text, token_start(text, at), path), json_message(e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(Where::at_file(path), json_message(e.what()));
  }
  size_t cursor = 0;
  return JsonConverter{text, path}.convert(j, "", Where::at_file(path), cursor, 0);
}

// ---- typed values -------------------------------------------------------------------------------

void type_error(const Node& n, const std::string& what) {
  const std::string subject = n.path.empty() ? "the file" : n.path;
  throw InputError(n.where, fmt::format("{} must be {} (got {})", subject, what, describe(n)));
}

void not_a_map(const Node& n) { type_error(n, "a mapping of keys"); }

namespace {
int64_t read_int(const Node& n, const char* what) {
  if (!is_plain_scalar(n) || !looks_numeric(n.text)) type_error(n, what);
  const std::string& t = n.text;
  const char* first = t.c_str() + (t[0] == '+' ? 1 : 0);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(first, t.c_str() + t.size(), v);
  if (ec == std::errc() && end == t.c_str() + t.size()) return v;
  const double d = std::strtod(t.c_str(), nullptr);
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  if (std::isfinite(d) && d == std::floor(d)) type_error(n, fmt::format("{} below 2^63", what));
  type_error(n, what);
}
}  // namespace

int64_t as_int(const Node& n) { return read_int(n, "an integer"); }
int64_t as_count(const Node& n) { return read_int(n, "a positive integer"); }

double as_number(const Node& n) {
  const double v = is_plain_scalar(n) && looks_numeric(n.text) ? std::strtod(n.text.c_str(), nullptr) : NAN;
  if (!std::isfinite(v)) type_error(n, "a number");
  return v;
}

bool as_bool(const Node& n) {
  if (is_plain_scalar(n)) {
    const std::string t = lower(n.text);
    if (t == "true" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "no" || t == "off") return false;
  }
  type_error(n, "true or false");
}

std::string as_text(const Node& n) {
  if (n.kind != Node::Kind::scalar) type_error(n, "a string");
  return n.text;
}

std::vector<std::string> as_text_list(const Node& n) {
  std::vector<std::string> out;
  if (n.kind == Node::Kind::list) {
    for (const auto& item : n.items) out.push_back(as_text(item));
    return out;
  }
  return split_list(as_text(n));
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

int64_t as_size(const Node& n) {
  if (n.kind == Node::Kind::scalar)
    if (auto v = parse_size(n.text)) return *v;
  if (is_plain_scalar(n) && looks_numeric(n.text) && n.text[0] != '-') return as_int(n);  // 24e9
  type_error(n, "a size like 24GiB, 24GB or 25769803776");
}

// ---- keys -------------------------------------------------------------------------------------

std::optional<std::string> near_miss(const std::string& key, const std::vector<std::string>& known) {
  const int limit = key.size() > 5 ? 2 : 1;
  std::optional<std::string> best;
  int best_d = limit + 1;
  for (const auto& k : known) {
    if (k == key) return std::nullopt;  // an exact match is not a miss
    const int d = edit_distance(lower(key), lower(k));
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

}  // namespace memplan::profiles::detail
