// TOML (torchtitan's configs) into the reader's Node tree, through toml++ (Debian's
// libtomlplusplus-dev, used header-only in this one file so the executable loads no extra
// library). Keys keep their 1-based line and column; values are typed as the file wrote them.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include <fmt/format.h>

#include <sstream>

#include "profiles/formats.h"

namespace memplan::profiles::detail {
namespace {

constexpr int kMaxTomlDepth = 64;

Where where_of(const toml::source_region& r, const std::string& file) {
  if (r.begin.line == 0) return Where::at_file(file);
  return Where::at_file(file, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column));
}

std::string child(const std::string& parent, const std::string& key) { return parent.empty() ? key : parent + "." + key; }

Node convert(const toml::node& t, const std::string& file, const std::string& path, const Where& where, int depth) {
  if (depth > kMaxTomlDepth) throw InputError(where, fmt::format("nested more than {} levels deep", kMaxTomlDepth));
  Node n;
  n.path = path;
  n.where = where;
  if (const auto* tbl = t.as_table()) {
    n.kind = Node::Kind::map;
    for (auto&& [k, v] : *tbl) {
      const std::string key(k.str());
      n.entries.emplace_back(key, convert(v, file, child(path, key), where_of(k.source(), file), depth + 1));
    }
  } else if (const auto* arr = t.as_array()) {
    n.kind = Node::Kind::list;
    for (auto&& item : *arr) n.items.push_back(convert(item, file, path, where_of(item.source(), file), depth + 1));
  } else {
    n.kind = Node::Kind::scalar;
    if (const auto* s = t.as_string()) {
      n.text = s->get();
      n.quoted = true;
    } else if (const auto* i = t.as_integer()) {
      n.text = std::to_string(i->get());
    } else if (const auto* f = t.as_floating_point()) {
      n.text = fmt::format("{}", f->get());
    } else if (const auto* b = t.as_boolean()) {
      n.text = b->get() ? "true" : "false";
    } else {  // dates and times: as written
      std::ostringstream os;
      t.visit([&os](auto&& v) { os << v; });
      n.text = os.str();
      n.quoted = true;
    }
  }
  return n;
}

}  // namespace

Node parse_toml(const std::string& text, const std::string& path) {
  toml::table tbl;
  try {
    tbl = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw InputError(where_of(e.source(), path), std::string(e.description()), "see https://toml.io for the syntax");
  }
  return convert(tbl, path, "", Where::at_file(path), 0);
}

}  // namespace memplan::profiles::detail
