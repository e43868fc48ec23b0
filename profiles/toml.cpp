// TOML (torchtitan's configs) into the reader's Node tree, through toml++ (Debian's
// libtomlplusplus-dev, used header-only in this one file so the executable loads no extra
// library). Keys keep their 1-based line and column; values are typed as the file wrote them.
//
// Bounds, as for YAML and JSON (profiles/reader.h): the text is checked first (size: the YAML
// limit, TOML being written by hand too; UTF-8; no NUL), then scanned for an upper estimate of
// the nesting (dotted-key parts and open brackets on a line: toml++ builds, and frees, a table per
// part recursively, so "[a.a.a...]" 500,000 parts deep would overflow the stack) before toml++
// sees it, and the values are counted as they are converted.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#include <toml++/toml.h>

#include <fmt/format.h>

#include <cctype>
#include <sstream>

#include "profiles/formats.h"

namespace memplan::profiles::detail {
namespace {

constexpr const char* kDepthHint = "configs nest a few levels; this file looks generated wrongly (or on purpose)";

// One pass: per line, the number of '.'-separated key parts outside strings and comments (an
// overestimate: a float's '.' counts too) plus the brackets open at the line (arrays span lines).
void prescan_toml(const std::string& text, const std::string& path, int max_depth) {
  int line = 1, col = 0, dots = 0, open = 0;
  char quote = 0;
  bool comment = false, multiline = false, line_begin = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++col;
    if (c == '\n') {
      ++line;
      col = 0;
      dots = 0;
      comment = false;
      line_begin = true;
      if (quote && !multiline) quote = 0;  // a broken string: toml++ reports it
      continue;
    }
    if (comment) continue;
    if (quote) {
      line_begin = false;
      if (c == '\\' && quote == '"') {
        // \uXXXX and \UXXXXXXXX need their hex digits (TOML 1.0); toml++ 3.3.0 reaches
        // TOML_UNREACHABLE on some malformed ones followed by non-ASCII text (found by
        // fuzz_load_config), so they are refused here first.
        const char e = i + 1 < text.size() ? text[i + 1] : 0;
        if (e == 'u' || e == 'U') {
          const size_t n = e == 'u' ? 4 : 8;
          for (size_t k = 0; k < n; ++k)
            if (i + 2 + k >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 2 + k])))
              throw InputError(Where::at_file(path, line, col), fmt::format("a \\{} escape needs {} hex digits", e, n),
                               "write the character itself, or its code point as \\u0105 / \\U0001F600");
        }
        ++i;
        ++col;
      } else if (c == quote) {
        if (multiline && text.compare(i, 3, std::string(3, quote)) == 0) {
          quote = 0;
          multiline = false;
          i += 2;
          col += 2;
        } else if (!multiline) {
          quote = 0;
        }
      }
      continue;
    }
    if (static_cast<unsigned char>(c) >= 0x80)
      // TOML 1.0 allows non-ASCII text only in strings and comments; toml++ 3.3.0 reaches
      // TOML_UNREACHABLE (undefined behaviour) classifying some such characters as whitespace
      // (U+0105 at a line start: found by fuzz_load_config), so they are refused here first.
      throw InputError(Where::at_file(path, line, col), "a non-ASCII character outside a string or comment",
                       "TOML keys are ASCII; quote a key or value that needs other characters");
    if (line_begin && (c == ' ' || c == '\t')) continue;
    if (line_begin && c == '[' && open == 0) {
      // A table header's first key must start like a key: toml++ 3.3.0 asserts it (parse_key,
      // TOML_ASSERT_ASSUME: an abort in a debug build, undefined behaviour in a release one)
      // instead of reporting "[!]" or "[e]" with a non-ASCII e. Found by fuzz_load_config.
      size_t j = i + 1;
      if (j < text.size() && text[j] == '[') ++j;
      while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
      const unsigned char k = j < text.size() ? static_cast<unsigned char>(text[j]) : ']';
      if (!(std::isalnum(k) && k < 0x80) && k != '_' && k != '-' && k != '"' && k != '\'' && k != ']')
        throw InputError(Where::at_file(path, line, col + static_cast<int>(j - i)),
                         "a table header must start with a key (letters, digits, '_' or '-', or a quoted name)",
                         "write [name] or [\"quoted name\"]; see https://toml.io");
    }
    line_begin = false;
    if (c == '"' || c == '\'') {
      // A quote right after a bare key or value character ("50k\"...") opens no string in TOML:
      // toml++ 3.3.0 reads on as a bare value and reaches TOML_UNREACHABLE classifying the
      // non-ASCII text this scan would take for a string's (found by fuzz_load_config).
      auto bare = [](unsigned char b) { return (std::isalnum(b) && b < 0x80) || b == '_' || b == '-' || b == '+' || b == ':'; };
      if (i > 0 && bare(static_cast<unsigned char>(text[i - 1]))) {
        size_t start = i;
        while (start > 0 && i - start < 40 && bare(static_cast<unsigned char>(text[start - 1]))) --start;
        const std::string token = text.substr(start, i - start);
        throw InputError(Where::at_file(path, line, col), fmt::format("a {} right after the bare text '{}'", c == '"' ? "quote" : "single quote", token),
                         fmt::format("a string needs a quote on both sides: {}{}{}", c, token, c));
      }
      quote = c;
      multiline = text.compare(i, 3, std::string(3, c)) == 0;
      if (multiline) {
        i += 2;
        col += 2;
      }
      continue;
    }
    if (c == '#') {
      comment = true;
      continue;
    }
    if (c == '.') ++dots;
    else if (c == '[' || c == '{') ++open;
    else if ((c == ']' || c == '}') && open > 0) --open;
    if (dots + open > max_depth)
      throw InputError(Where::at_file(path, line, col), fmt::format("nested more than {} levels deep", max_depth), kDepthHint);
  }
}

struct Converter {
  const std::string& file;
  int max_depth;
  int64_t max_values;
  int64_t values = 0;

  Node convert(const toml::node& t, const std::string& path, const Where& where, int depth);
};

Where where_of(const toml::source_region& r, const std::string& file) {
  if (r.begin.line == 0) return Where::at_file(file);
  return Where::at_file(file, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column));
}

std::string child(const std::string& parent, const std::string& key) { return parent.empty() ? key : parent + "." + key; }

Node Converter::convert(const toml::node& t, const std::string& path, const Where& where, int depth) {
  if (depth > max_depth) throw InputError(where, fmt::format("nested more than {} levels deep", max_depth), kDepthHint);
  if (++values > max_values)
    throw InputError(where, fmt::format("more than {} values in one TOML file", max_values),
                     "configs hold a few hundred values; is this the right file?");
  Node n;
  n.path = path;
  n.where = where;
  if (const auto* tbl = t.as_table()) {
    n.kind = Node::Kind::map;
    for (auto&& [k, v] : *tbl) {
      const std::string key(k.str());
      n.entries.emplace_back(key, convert(v, child(path, key), where_of(k.source(), file), depth + 1));
    }
  } else if (const auto* arr = t.as_array()) {
    n.kind = Node::Kind::list;
    for (auto&& item : *arr) n.items.push_back(convert(item, path, where_of(item.source(), file), depth + 1));
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

Node parse_toml(const std::string& raw, const std::string& path) {
  const ReadLimits& lim = read_limits();
  check_text(raw, path, lim.max_yaml_bytes, "TOML");
  // A UTF-8 byte order mark (what some Windows editors put first) is not part of the text, as the
  // YAML reader treats it; without this the scan below would refuse it as a non-ASCII character.
  const bool bom = raw.compare(0, 3, "\xEF\xBB\xBF") == 0;
  const std::string text = bom ? raw.substr(3) : raw;
  prescan_toml(text, path, lim.max_depth);
  toml::table tbl;
  try {
    tbl = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw InputError(where_of(e.source(), path), std::string(e.description()), "see https://toml.io for the syntax");
  }
  Converter c{path, lim.max_depth, lim.max_yaml_values};
  return c.convert(tbl, "", Where::at_file(path), 0);
}

}  // namespace memplan::profiles::detail
