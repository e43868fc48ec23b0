// The config tree: YAML and JSON into Nodes with positions, typed reads, near-miss keys, and the
// bounds every read keeps (ReadLimits).
//
// YAML goes through yaml-cpp, whose marks are 0-based and carry no file name. yaml-cpp recurses
// once per nesting level and builds every node before memplan sees one, so the text is scanned
// first (prescan_yaml) for an upper estimate of the nesting depth and of the number of values;
// the conversion to Nodes then counts the values again with aliases expanded, expands merge keys
// and refuses duplicate keys. JSON is parsed here (JsonParser): a small recursive-descent parser
// that knows each key's line as it reads it (nlohmann keeps no positions, and finding keys in
// the text afterwards is quadratic), checks depth before each descent, refuses duplicate keys,
// and reports numbers out of range at their position.
#include "estimator/text.h"
#include "profiles/reader.h"
#include "profiles/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include "profiles/profiles.h"
#include "profiles/yaml_subset.h"

namespace memplan::profiles::detail {

// Dotted paths name values in messages only; a hostile file with huge keys must not make every
// node carry a copy of them.
constexpr size_t kMaxPathLength = 200;

std::string child_path(const std::string& parent, const std::string& key) {
  std::string p = parent.empty() ? clip(key, 60) : parent + "." + clip(key, 60);
  if (p.size() > kMaxPathLength) p = "..." + p.substr(p.size() - kMaxPathLength);
  return p;
}

namespace {

using text::thousands;

std::string size_text(int64_t bytes) {
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (int64_t{1} << 10) && bytes % (int64_t{1} << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", thousands(bytes));
}

const char* kSizeHint = "is this the right file? configs are a few KiB; MEMPLAN_MAX_FILE_SIZE=64MiB raises the limit";
const char* kDepthHint = "configs nest a few levels; this file looks generated wrongly (or on purpose)";
const char* kValuesHint = "configs hold a few hundred values; is this the right file?";

// 1-based line and column (in bytes) of `offset`.
Where where_at(const std::string& text, size_t offset, const std::string& file) {
  offset = std::min(offset, text.size());
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
  const size_t nl = offset == 0 ? std::string::npos : text.rfind('\n', offset - 1);
  const int col = static_cast<int>(nl == std::string::npos ? offset + 1 : offset - nl);
  return Where::at_file(file, line, col);
}

ReadLimits& limits_slot() {
  static ReadLimits limits = [] {
    ReadLimits l;
    if (const char* env = std::getenv("MEMPLAN_MAX_FILE_SIZE"); env && *env) {
      std::optional<int64_t> bytes;
      if (!bare_size_error(env, Where{})) bytes = parse_size(env);
      if (!bytes || *bytes <= 0)
        throw InputError(Where{}, fmt::format("MEMPLAN_MAX_FILE_SIZE='{}' is not a size with its unit", clip(env)),
                         "write it like 64MiB, or unset it for the defaults (16 MiB; YAML 1 MiB)");
      l.max_file_bytes = l.max_yaml_bytes = *bytes;
    }
    return l;
  }();
  return limits;
}

std::string kind_of(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// ---- text checks shared by both syntaxes --------------------------------------------------------


// Size, encoding, NUL bytes: what neither parser should be handed.
void check_text_impl(const std::string& text, const std::string& path, int64_t max_bytes, const char* syntax) {
  if (static_cast<int64_t>(text.size()) > max_bytes)
    throw InputError(Where::at_file(path),
                     fmt::format("the {} text is {} bytes, over the {} memplan reads", syntax,
                                 thousands(static_cast<int64_t>(text.size())), size_text(max_bytes)),
                     kSizeHint);
  const auto starts = [&](const char* bom, size_t n) { return text.size() >= n && std::memcmp(text.data(), bom, n) == 0; };
  if (starts("\xFE\xFF", 2) || starts("\xFF\xFE", 2) || starts("\0\0\xFE\xFF", 4))
    throw InputError(Where::at_file(path), "the file is UTF-16 or UTF-32 text", "save it as UTF-8");
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0)
      throw InputError(where_at(text, i, path), "NUL byte: this is not a text file",
                       "memplan reads YAML and JSON text; is this a binary file?");
    const size_t n = utf8_length(text, i);
    if (n == 0)
      throw InputError(where_at(text, i, path), fmt::format("invalid UTF-8 (byte 0x{:02x})", c),
                       "memplan reads UTF-8 text; is this a binary file, or saved in another encoding?");
    i += n;
  }
}

// ---- YAML -------------------------------------------------------------------------------------

Where yaml_where(const YAML::Mark& m, const std::string& file) {
  if (m.is_null()) return Where::at_file(file);
  return Where::at_file(file, m.line + 1, m.column + 1);
}

// One pass over YAML text bounding what yaml-cpp would build: an upper estimate of the nesting
// (indentation levels + "- "/"? " indicators opening a line + open flow brackets) and of the
// number of values (lines, indicators, flow commas and brackets). It overestimates a little
// (continuation lines of plain scalars count as levels); real configs stay far below the limits.
void prescan_yaml(const std::string& text, const std::string& path, const ReadLimits& lim) {
  std::vector<int> indents;  // indentation of the open block levels
  int flow = 0;              // open [ and { (they span lines)
  char quote = 0;            // an open quoted scalar (they span lines too)
  bool in_block_scalar = false;
  int block_parent = 0;      // indentation of the line that opened a block scalar (| or >)
  int64_t values = 0;
  auto too_deep = [&](size_t at) {
    throw InputError(where_at(text, at, path), fmt::format("nested more than {} levels deep", lim.max_depth), kDepthHint);
  };
  auto count = [&](size_t at) {
    if (++values > lim.max_yaml_values)
      throw InputError(where_at(text, at, path), fmt::format("more than {} values in one YAML file", thousands(lim.max_yaml_values)),
                       kValuesHint);
  };
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    size_t i = pos;
    while (i < end && text[i] == ' ') ++i;
    const int indent = static_cast<int>(i - pos);
    const bool blank = i == end || text[i] == '\r' || (text[i] == '#' && quote == 0);
    if (in_block_scalar) {
      if (blank || indent > block_parent) {
        pos = end + 1;
        continue;
      }
      in_block_scalar = false;
    }
    if (blank && quote == 0) {
      pos = end + 1;
      continue;
    }
    bool value_start = quote == 0;  // a [, {, quote or block indicator here starts a value
    int extra = 0;                  // "- - x": nested sequences opened on this line
    if (flow == 0 && quote == 0) {
      while (!indents.empty() && indents.back() >= indent) indents.pop_back();
      indents.push_back(indent);
      count(i);
      while (i < end && (text[i] == '-' || text[i] == '?') && (i + 1 == end || text[i + 1] == ' ' || text[i + 1] == '\r')) {
        ++extra;
        count(i);
        ++i;
        while (i < end && text[i] == ' ') ++i;
      }
    }
    const int block = static_cast<int>(indents.size()) + extra;
    if (block + flow > lim.max_depth) too_deep(i);
    for (size_t j = i; j < end; ++j) {
      const char c = text[j];
      if (quote) {
        if (quote == '\'' && c == '\'') {
          if (j + 1 < end && text[j + 1] == '\'') ++j;
          else quote = 0;
        } else if (quote == '"' && c == '\\') {
          ++j;
        } else if (quote == '"' && c == '"') {
          quote = 0;
        }
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') continue;
      if (c == '#' && (j == pos || text[j - 1] == ' ' || text[j - 1] == '\t')) break;  // a comment
      if ((c == '"' || c == '\'') && value_start) {
        quote = c;
        value_start = false;
        continue;
      }
      if ((c == '[' || c == '{') && (value_start || flow > 0)) {
        ++flow;
        count(j);
        if (block + flow > lim.max_depth) too_deep(j);
        value_start = true;
        continue;
      }
      if ((c == ']' || c == '}') && flow > 0) {
        --flow;
        value_start = false;
        continue;
      }
      if (c == ',' && flow > 0) {
        count(j);
        value_start = true;
        continue;
      }
      if (c == ':' && (j + 1 == end || text[j + 1] == ' ' || text[j + 1] == '\r' ||
                       (flow > 0 && (text[j + 1] == ',' || text[j + 1] == ']' || text[j + 1] == '}')))) {
        count(j);
        value_start = true;
        continue;
      }
      if ((c == '|' || c == '>') && value_start && flow == 0) {
        in_block_scalar = true;
        block_parent = indent;
        break;
      }
      if ((c == '&' || c == '!') && value_start) {  // an anchor or tag: the value follows
        while (j + 1 < end && text[j + 1] != ' ') ++j;
        continue;
      }
      value_start = false;
    }
    pos = end + 1;
  }
}

// Nodes straight from yaml-cpp's parser events (its node graph is never built). Aliases are
// copies here, so each use of one adds its anchor's values to the count first (a "billion laughs"
// file stops at the limit before anything is copied); an alias to a collection still open is a
// cycle; merge keys (<<) are expanded as YAML 1.1 tools do: the mapping's own keys win, then the
// merged mappings in order; a key given twice is an error naming both lines.
class YamlBuilder : public YAML::EventHandler {
 public:
  YamlBuilder(const std::string& file, const ReadLimits& lim) : file_(file), lim_(lim) {}

  bool started = false;  // a document began
  YAML::Mark start;      // where
  Node root;             // the document (null when empty)

  void OnDocumentStart(const YAML::Mark& m) override {
    started = true;
    start = m;
    root.where = Where::at_file(file_);
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& m, YAML::anchor_t anchor) override {
    if (expecting_key()) bad_key(m);
    Node n = begin(m);
    count(n.where);
    finish(std::move(n), anchor, 1);
  }

  void OnScalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t anchor, const std::string& value) override {
    Node n = begin(m);
    count(n.where);
    n.kind = Node::Kind::scalar;
    n.text = value;
    // yaml-cpp tags quoted scalars "!", plain ones "?"; an explicit !!str makes a string of a plain
    // scalar as quotes do (YAML 1.2 core schema), so "!!str 4" is no count.
    n.quoted = tag == "!" || tag == "tag:yaml.org,2002:str";
    if (expecting_key()) return take_key(std::move(n), anchor);
    finish(std::move(n), anchor, 1);
  }

  void OnAlias(const YAML::Mark& m, YAML::anchor_t anchor) override {
    const Where at = yaml_where(m, file_);
    if (anchor >= anchors_.size() || !anchors_[anchor].done)
      throw InputError(at, "a YAML alias refers to the collection that holds it (a cycle)",
                       "an alias (*name) must name an anchor (&name) defined outside the value it is used in");
    const Anchor& a = anchors_[anchor];
    aliased_ = true;
    values_ += a.values;
    if (values_ > lim_.max_yaml_values)
      throw InputError(at, fmt::format("YAML aliases expand this file to more than {} values", thousands(lim_.max_yaml_values)),
                       "each use of an alias (*name) copies its anchor's value; configs need a few hundred values");
    Node n = a.node;
    if (expecting_key()) {
      if (n.kind != Node::Kind::scalar) bad_key(m);
      n.where = at;
      return take_key(std::move(n), 0);
    }
    const Node shape = begin(m);
    repath(n, shape.path);
    finish(std::move(n), 0, a.values);
  }

  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(m, anchor, Node::Kind::list);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(m, anchor, Node::Kind::map);
  }
  void OnMapEnd() override {
    Frame& f = stack_.back();
    if (f.merge_at != std::string::npos) {
      std::vector<std::pair<std::string, Node>> add;
      for (auto& e : f.merged)
        if (!f.lines.count(e.first)) add.push_back(std::move(e));
      auto& entries = f.node.entries;
      entries.insert(entries.begin() + static_cast<std::ptrdiff_t>(f.merge_at), std::make_move_iterator(add.begin()),
                     std::make_move_iterator(add.end()));
    }
    close();
  }

 private:
  struct Frame {
    Node node;
    YAML::anchor_t anchor = 0;
    int64_t values_before = 0;
    bool want_key = true;  // maps: the next event is a key
    std::string key;
    Where key_where;
    bool merge = false;    // the pending key is a merge key
    std::unordered_map<std::string, int> lines;  // keys written in this mapping -> line
    size_t merge_at = std::string::npos;
    std::vector<std::pair<std::string, Node>> merged;
    std::unordered_set<std::string> merged_keys;
  };
  struct Anchor {
    Node node;
    int64_t values = 0;
    bool done = false;
  };
  const std::string& file_;
  const ReadLimits& lim_;
  std::vector<Frame> stack_;
  std::vector<Anchor> anchors_;  // by yaml-cpp's anchor number (1-based)
  int64_t values_ = 0;
  bool aliased_ = false;

  bool expecting_key() const {
    return !stack_.empty() && stack_.back().node.kind == Node::Kind::map && stack_.back().want_key;
  }
  [[noreturn]] void bad_key(const YAML::Mark& m) const {
    throw InputError(yaml_where(m, file_), "keys must be plain names",
                     "a key is a name such as micro_batch_size, not a list, a mapping or nothing");
  }
  void count(const Where& at) {
    if (++values_ > lim_.max_yaml_values)
      throw InputError(at, fmt::format("more than {} values in one YAML file", thousands(lim_.max_yaml_values)), kValuesHint);
  }
  // A node about to be placed: its path and position from where it goes.
  Node begin(const YAML::Mark& m) const {
    Node n;
    n.where = yaml_where(m, file_);
    if (stack_.empty()) {
      n.where = Where::at_file(file_);
    } else if (!expecting_key()) {  // (a key keeps its own position)
      const Frame& f = stack_.back();
      if (f.node.kind == Node::Kind::map) {
        n.path = child_path(f.node.path, f.key);
        n.where = f.key_where;  // a mapping's values carry their key's position
      } else {
        n.path = f.node.path;
      }
    }
    return n;
  }
  static void repath(Node& n, const std::string& path) {
    n.path = path;
    for (auto& item : n.items) repath(item, path);
    for (auto& [k, v] : n.entries) repath(v, child_path(path, k));
  }
  void take_key(Node key, YAML::anchor_t anchor) {
    if (anchor) remember(anchor, key, 1);
    Frame& f = stack_.back();
    const auto [at, fresh] = f.lines.emplace(key.text, key.where.line);
    if (!fresh)
      throw InputError(key.where, fmt::format("duplicate key '{}' (also at line {})", clip(key.text), at->second),
                       "YAML keeps only one of them (which one depends on the tool); remove the other");
    f.key = key.text;
    f.key_where = key.where;
    f.merge = key.text == "<<" && !key.quoted;  // a quoted '<<' is a plain key
    f.want_key = false;
  }
  void open(const YAML::Mark& m, YAML::anchor_t anchor, Node::Kind kind) {
    if (expecting_key()) bad_key(m);
    if (static_cast<int>(stack_.size()) >= lim_.max_depth)
      throw InputError(yaml_where(m, file_), fmt::format("nested more than {} levels deep", lim_.max_depth), kDepthHint);
    Frame f;
    f.node = begin(m);
    count(f.node.where);
    f.node.kind = kind;
    f.anchor = anchor;
    f.values_before = values_ - 1;
    if (anchor) {
      if (anchors_.size() <= anchor) anchors_.resize(anchor + 1);
      anchors_[anchor].done = false;  // open: an alias to it now is a cycle
    }
    stack_.push_back(std::move(f));
  }
  void close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    finish(std::move(f.node), f.anchor, values_ - f.values_before);
  }
  void remember(YAML::anchor_t anchor, const Node& n, int64_t values) {
    if (anchors_.size() <= anchor) anchors_.resize(anchor + 1);
    anchors_[anchor] = {n, values, true};
  }
  // A complete node (with `values` values in it) into its parent, or as the document.
  void finish(Node n, YAML::anchor_t anchor, int64_t values) {
    if (anchor) remember(anchor, n, values);
    if (stack_.empty()) {
      root = std::move(n);
      return;
    }
    Frame& f = stack_.back();
    if (f.node.kind == Node::Kind::list) {
      f.node.items.push_back(std::move(n));
      return;
    }
    f.want_key = true;
    if (!f.merge) {
      f.node.entries.emplace_back(f.key, std::move(n));
      return;
    }
    // <<: *map, or <<: [*a, *b]: the entries the merged mappings bring (earlier ones win).
    if (f.merge_at == std::string::npos) f.merge_at = f.node.entries.size();
    auto take = [&](Node& m) {
      if (m.kind != Node::Kind::map)
        throw InputError(f.key_where, "the merge key '<<' takes a mapping or a list of mappings",
                         "write <<: *name, where &name anchors a mapping (or <<: [*a, *b])");
      for (auto& e : m.entries) {
        if (!f.merged_keys.insert(e.first).second) continue;
        repath(e.second, child_path(f.node.path, e.first));
        f.merged.emplace_back(e.first, std::move(e.second));
      }
    };
    if (n.kind == Node::Kind::list)
      for (auto& item : n.items) take(item);
    else
      take(n);
  }
};

// ---- JSON -------------------------------------------------------------------------------------

// RFC 8259 JSON into Nodes. Map values carry their key's position, list items their own, the
// root the file. Scalars keep their text as written ("5e8" stays "5e8").
class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& file, const ReadLimits& lim) : t_(text), file_(file), lim_(lim) {}

  Node parse() {
    if (t_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = line_start_ = 3;  // a UTF-8 byte order mark
    ws();
    if (pos_ >= t_.size())
      throw InputError(Where::at_file(file_), "the JSON file is empty", "a JSON config is an object: { \"key\": value, ... }");
    Node root = value("", Where::at_file(file_), 0);
    ws();
    if (pos_ < t_.size())
      fail("unexpected text after the end of the JSON value", "a JSON file holds one value; is a ',' or an opening '{' missing?");
    return root;
  }

 private:
  const std::string& t_;
  const std::string& file_;
  const ReadLimits& lim_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
  int64_t values_ = 0;
  int last_line_ = 1;  // where the last complete value ended

  Where here() const { return Where::at_file(file_, line_, static_cast<int>(pos_ - line_start_) + 1); }
  [[noreturn]] void fail(const std::string& message, const std::string& hint) const { throw InputError(here(), message, hint); }
  char peek() const { return pos_ < t_.size() ? t_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= t_.size(); }

  void ws() {
    for (; pos_ < t_.size(); ++pos_) {
      const char c = t_[pos_];
      if (c == '\n') {
        ++line_;
        line_start_ = pos_ + 1;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        break;
      }
    }
  }

  std::string got() const {
    if (at_end()) return "the end of the file";
    const char c = t_[pos_];
    if (c == '"') return "a string";
    if (c == '{' || c == '[' || c == '}' || c == ']' || c == ':' || c == ',') return fmt::format("'{}'", c);
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return "a number";
    return fmt::format("'{}'", clip(t_.substr(pos_, utf8_length(t_, pos_) ? utf8_length(t_, pos_) : 1)));
  }

  // "expected ',' or '}'": with a hint at the line where a comma is probably missing.
  [[noreturn]] void expected_separator(const char* close, const char* what) const {
    const std::string hint = line_ > last_line_ && !at_end() && t_[pos_] != close[0]
                                 ? fmt::format("is a ',' missing at the end of line {}?", last_line_)
                                 : fmt::format("JSON separates {} with ',' and closes them with '{}'", what, close);
    fail(fmt::format("expected ',' or '{}' (got {})", close, got()), hint);
  }

  Node value(const std::string& path, const Where& where, int depth) {
    if (++values_ > lim_.max_json_values) fail(fmt::format("more than {} values in one JSON file", thousands(lim_.max_json_values)), kValuesHint);
    Node n;
    n.path = path;
    n.where = where;
    const char c = peek();
    if (c == '{' || c == '[') {
      if (depth >= lim_.max_depth) fail(fmt::format("nested more than {} levels deep", lim_.max_depth), kDepthHint);
      if (c == '{') object(n, depth);
      else array(n, depth);
    } else if (c == '"') {
      n.kind = Node::Kind::scalar;
      n.quoted = true;
      n.text = string();
    } else if (literal("NaN") || literal("Infinity") || literal("-Infinity")) {
      // Python's json module writes float('nan') and float('inf') as these bare words, and real
      // config.json files carry them (NVIDIA Nemotron-H's time_step_limit [0.0, Infinity]). They
      // are read as plain scalars: a key memplan does not read stays harmless, and one it reads
      // is refused as not a (finite) number where it is read.
      n.kind = Node::Kind::scalar;
      n.text = c == 'N' ? "NaN" : c == 'I' ? "Infinity" : "-Infinity";
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      if (t_.compare(pos_, 4, "-Inf") == 0 || t_.compare(pos_, 4, "-inf") == 0) not_a_number();
      n.kind = Node::Kind::scalar;
      n.text = number();
    } else if (literal("true") || literal("false")) {
      n.kind = Node::Kind::scalar;
      n.text = c == 't' ? "true" : "false";
    } else if (literal("null")) {
      n.kind = Node::Kind::null;
    } else {
      bad_value();
    }
    last_line_ = line_;
    return n;
  }

  bool literal(const char* word) {
    const size_t n = std::strlen(word);
    if (t_.compare(pos_, n, word) != 0) return false;
    const char after = pos_ + n < t_.size() ? t_[pos_ + n] : ' ';
    if (std::isalnum(static_cast<unsigned char>(after)) || after == '_') return false;
    pos_ += n;
    return true;
  }

  [[noreturn]] void not_a_number() const {
    fail("not a JSON number (only Python's NaN, Infinity and -Infinity are read, as text)",
         "write a finite number (memplan's values are sizes, counts and fractions)");
  }

  [[noreturn]] void bad_value() const {
    const char c = peek();
    if (at_end()) fail("the JSON text ends where a value should be", "the file is cut short, or a value is missing");
    if (t_.compare(pos_, 3, "NaN") == 0 || t_.compare(pos_, 3, "nan") == 0 || t_.compare(pos_, 3, "Inf") == 0 ||
        t_.compare(pos_, 3, "inf") == 0 || t_.compare(pos_, 4, "+Inf") == 0)
      not_a_number();
    if (c == '\'') fail("JSON strings are written in double quotes", "write \"text\", not 'text'");
    if (c == '/') fail("JSON has no comments", "remove the comment (DeepSpeed and HF read strict JSON too)");
    if (c == '}' || c == ']' || c == ',' || c == ':') fail(fmt::format("expected a value (got {})", got()), "a value is missing here");
    fail(fmt::format("expected a value (got {})", got()),
         "a JSON value is an object, a list, a \"string\", a number, true, false or null");
  }

  void object(Node& n, int depth) {
    n.kind = Node::Kind::map;
    ++pos_;
    ws();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    for (;;) {
      if (peek() != '"') {
        if (peek() == '}') fail("a trailing ',' before '}'", "JSON allows no comma after the last member");
        if (peek() == '\'') fail("JSON keys are written in double quotes", "write \"key\": value");
        if (at_end()) fail("the JSON text ends inside an object", "the file is cut short: a '}' is missing");
        fail(fmt::format("expected a key in double quotes (got {})", got()), "an object's members are \"key\": value, separated by ','");
      }
      const Where key_where = here();
      const std::string key = string();
      ws();
      if (peek() != ':') fail(fmt::format("expected ':' after the key '{}' (got {})", clip(key), got()), "write \"key\": value");
      ++pos_;
      ws();
      n.entries.emplace_back(key, value(child_path(n.path, key), key_where, depth + 1));
      ws();
      if (peek() == ',') {
        ++pos_;
        ws();
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        check_duplicates(n);
        return;
      }
      if (at_end()) fail("the JSON text ends inside an object", "the file is cut short: a '}' is missing");
      expected_separator("}", "members");
    }
  }

  // Duplicate keys, found by sorting the keys' hashes (a hash set of a 200k-key object, or
  // sorting the keys themselves, costs a second): the error is at the second occurrence and names
  // the line of the first.
  static void check_duplicates(const Node& n) {
    const size_t count = n.entries.size();
    if (count < 2) return;
    std::vector<std::pair<size_t, size_t>> h(count);  // (hash, index)
    for (size_t i = 0; i < count; ++i) h[i] = {std::hash<std::string>{}(n.entries[i].first), i};
    std::sort(h.begin(), h.end());
    size_t dup = count, first = count;
    for (size_t i = 1; i < count; ++i) {
      if (h[i].first != h[i - 1].first) continue;
      // Equal hashes: compare the keys of the run (almost always two).
      for (size_t j = i; j < count && h[j].first == h[i - 1].first; ++j)
        for (size_t k = i - 1; k < j; ++k)
          if (n.entries[h[k].second].first == n.entries[h[j].second].first && h[j].second < dup) {
            dup = h[j].second;
            first = h[k].second;
          }
    }
    if (dup < count)
      throw InputError(n.entries[dup].second.where,
                       fmt::format("duplicate key '{}' (also at line {})", clip(n.entries[dup].first), n.entries[first].second.where.line),
                       "JSON readers keep only one of them (most the last); remove the other");
  }

  void array(Node& n, int depth) {
    n.kind = Node::Kind::list;
    ++pos_;
    ws();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    for (;;) {
      if (peek() == ']') fail("a trailing ',' before ']'", "JSON allows no comma after the last item");
      if (at_end()) fail("the JSON text ends inside a list", "the file is cut short: a ']' is missing");
      n.items.push_back(value(n.path, here(), depth + 1));
      ws();
      if (peek() == ',') {
        ++pos_;
        ws();
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return;
      }
      if (at_end()) fail("the JSON text ends inside a list", "the file is cut short: a ']' is missing");
      expected_separator("]", "list items");
    }
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k, ++pos_) {
      const char c = peek();
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else fail("\\u needs four hex digits", "write a character as \\u00e9 (or as UTF-8 text)");
    }
    return v;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    const Where open = here();
    ++pos_;
    std::string out;
    for (;;) {
      const size_t run = pos_;
      while (pos_ < t_.size() && t_[pos_] != '"' && t_[pos_] != '\\' && static_cast<unsigned char>(t_[pos_]) >= 0x20) ++pos_;
      out.append(t_, run, pos_ - run);
      if (at_end()) throw InputError(open, "a string is not closed", "a closing '\"' is missing");
      const char c = t_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c != '\\') {
        if (c == '\n' || c == '\r') fail("a string runs past the end of its line", "is a closing '\"' missing? (write \\n for a newline)");
        fail(fmt::format("control character 0x{:02x} in a string", static_cast<unsigned>(c)), "write it as \\u00XX");
      }
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a lone low surrogate in a \\u escape", "write the character as UTF-8 text");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (t_.compare(pos_, 2, "\\u") != 0) fail("a high surrogate without its low half", "write the character as UTF-8 text");
            pos_ += 2;
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("a high surrogate without its low half", "write the character as UTF-8 text");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default:
          --pos_;
          fail("unknown escape in a string", "JSON escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX");
      }
    }
  }

  std::string number() {
    const Where at = here();
    const size_t start = pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++pos_;
      return pos_ > from;
    };
    auto bad = [&] {
      size_t end = pos_;
      while (end < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[end])) || t_[end] == '.' || t_[end] == '+' || t_[end] == '-'))
        ++end;
      throw InputError(at, fmt::format("invalid number '{}'", clip(t_.substr(start, std::max(end, pos_ + 1) - start))),
                       "JSON numbers look like 4, -0.5 or 5e8 (no leading zeros, hex, or '.' without digits)");
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') ++pos_;
    else if (!digits()) bad();
    if (peek() == '.') {
      ++pos_;
      if (!digits()) bad();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digits()) bad();
    }
    const char after = peek();
    if (std::isalnum(static_cast<unsigned char>(after)) || after == '.' || after == '_') bad();
    std::string s = t_.substr(start, pos_ - start);
    if (s.size() > 400)
      throw InputError(at, fmt::format("a number written with {} characters", thousands(static_cast<int64_t>(s.size()))),
                       "memplan's values are sizes, counts and fractions: a few digits each");
    const double d = std::strtod(s.c_str(), nullptr);
    if (!std::isfinite(d))
      throw InputError(at, fmt::format("number {} is out of range", clip(s)), "numbers must stay below about 1.8e308; check the value");
    return s;
  }
};

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
  return n.quoted ? fmt::format("string '{}'", clip(n.text)) : fmt::format("'{}'", clip(n.text));
}

bool is_plain_scalar(const Node& n) { return n.kind == Node::Kind::scalar && !n.quoted; }

// A hint for "must be <what>", by the kind of value asked for.
std::string type_hint(const std::string& what) {
  if (what.find("integer") != std::string::npos) return "write a whole number, e.g. 4 (no quotes)";
  if (what.find("fraction") != std::string::npos) return "write a decimal such as 0.9";
  if (what.find("multiplier") != std::string::npos) return "a multiplier is a positive number such as 1.05";
  if (what.find("number") != std::string::npos) return "write a plain number such as 0.1 or 5e8 (no quotes)";
  if (what.find("byte count") != std::string::npos || what.find("size") != std::string::npos)
    return "write a byte count such as 25769803776, or a size such as 24GiB";
  if (what == "true or false") return "write true or false";
  if (what.find("mapping") != std::string::npos || what.find("object") != std::string::npos)
    return "put the keys under it, indented (YAML), or in { } (JSON)";
  if (what.find("string") != std::string::npos) return "write a name, e.g. llama-3.2-1b";
  return "see examples/ for the form each key takes";
}

}  // namespace

// ---- limits and files -----------------------------------------------------------------------------

const ReadLimits& read_limits() { return limits_slot(); }
void check_text(const std::string& text, const std::string& path, int64_t max_bytes, const char* syntax) {
  check_text_impl(text, path, max_bytes, syntax);
}
void set_read_limits(const ReadLimits& limits) { limits_slot() = limits; }

}  // namespace memplan::profiles::detail

namespace memplan::profiles {

std::string clip(const std::string& s, size_t max) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (i < s.size()) {
    // Never end inside a UTF-8 sequence: drop a trailing partial one.
    size_t k = out.size();
    while (k > 0 && (static_cast<unsigned char>(out[k - 1]) & 0xC0) == 0x80) --k;
    if (k > 0 && (static_cast<unsigned char>(out[k - 1]) & 0xC0) == 0xC0) out.resize(k - 1);
    out += "...";
  }
  return out;
}

}  // namespace memplan::profiles

namespace memplan::profiles::detail {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const Node* Node::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return v.kind == Kind::null ? nullptr : &v;
  return nullptr;
}

std::string special_file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return kind_of(st.st_mode);
}

std::string read_text_file(const std::string& path, const Where& named_at) {
  return read_text_file(path, named_at, read_limits().max_file_bytes);
}

namespace {

// read_text_file's reading: the checks, then the file's bytes handed to `chunk` as they are read
// (first a null pointer with the size to expect); `chunk` returns false to stop reading.
template <class Chunk>
void read_file_chunks(const std::string& path, const Where& named_at, int64_t max_bytes, Chunk&& chunk) {
  ReadLimits lim = read_limits();
  lim.max_file_bytes = max_bytes;
  const bool named = !named_at.empty();
  auto refuse = [&](const std::string& what, const std::string& hint) {
    if (named) throw InputError(named_at, fmt::format("cannot read '{}': {}", clip(path, 200), what), hint);
    throw InputError(Where::at_file(path), what, hint);
  };
  auto not_regular = [&](const std::string& kind) {
    if (kind == "a folder")
      refuse(named ? "it is a folder" : "this is a folder, not a file", "name a file inside it");
    refuse(named ? fmt::format("it is {}, not a regular file", kind) : fmt::format("this is {}, not a regular file", kind),
           "memplan reads configs from regular files only (a pipe or a device could block or never end); save it to a file first");
  };
  auto too_large = [&](int64_t bytes) {
    refuse(fmt::format("{}{} bytes, over the {} memplan reads", named ? "it is " : "the file is ", thousands(bytes),
                       size_text(lim.max_file_bytes)),
           kSizeHint);
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    refuse(named ? fmt::format("{}", std::strerror(err)) : fmt::format("cannot open the file ({})", std::strerror(err)),
           err == ENOENT ? (named ? "the path is relative to the folder of the file that names it" : "check the path")
                         : "check the file's permissions");
  }
  if (!S_ISREG(st.st_mode)) not_regular(kind_of(st.st_mode));
  if (st.st_size > lim.max_file_bytes) too_large(st.st_size);
  // Opened without blocking and checked again: the path may have changed since stat().
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    refuse(named ? std::string(std::strerror(err)) : fmt::format("cannot open the file ({})", std::strerror(err)),
           "check the file's permissions");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) not_regular(kind_of(st.st_mode));
  note_file_read(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), path);  // never an output (files.h)
  (void)chunk(nullptr, static_cast<size_t>(std::max<off_t>(0, std::min<off_t>(st.st_size, lim.max_file_bytes))));  // the size to expect
  int64_t total = 0;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      // A regular file whose read would block is one of the kernel's (/proc/kmsg): waiting for it
      // could be forever, and retrying at once spins.
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        refuse(named ? "reading it would block (a kernel or device file, not a config)"
                     : "reading the file would block (a kernel or device file, not a config)",
               "memplan reads configs from regular files only; save it to a file first");
      const int err = errno;
      refuse(named ? std::string(std::strerror(err)) : fmt::format("cannot read the file ({})", std::strerror(err)),
             "check the file and the disk");
    }
    total += n;
    if (total > lim.max_file_bytes) too_large(total);
    if (!chunk(buf, static_cast<size_t>(n))) return;  // the reader has what it wants
  }
}

}  // namespace

std::string read_text_file(const std::string& path, const Where& named_at, int64_t max_bytes) {
  std::string text;
  read_file_chunks(path, named_at, max_bytes, [&](const char* data, size_t n) {
    if (data) text.append(data, n);
    else text.reserve(n);
    return true;
  });
  return text;
}

void for_each_text_line(const std::string& path, const Where& named_at, int64_t max_bytes, int64_t max_line_bytes,
                        const std::function<bool(const std::string& line, int number)>& each) {
  std::string line;
  int number = 1;
  bool more = true;
  read_file_chunks(path, named_at, max_bytes, [&](const char* data, size_t n) {
    if (!data) return true;
    for (size_t i = 0; i < n && more;) {
      const char* nl = static_cast<const char*>(std::memchr(data + i, '\n', n - i));
      const size_t take = nl ? static_cast<size_t>(nl - (data + i)) : n - i;
      if (static_cast<int64_t>(line.size() + take) > max_line_bytes)
        throw InputError(Where::at_file(path, number), fmt::format("line {} is over {} bytes", number, thousands(max_line_bytes)),
                         "one record per line, each far shorter: is this the file you meant?");
      line.append(data + i, take);
      i += take;
      if (nl) {
        more = each(line, number++);
        line.clear();
        ++i;
      }
    }
    return more;
  });
  if (more && !line.empty()) each(line, number);
}

Node parse_yaml(const std::string& text, const std::string& path) {
  const ReadLimits& lim = read_limits();
  check_text_impl(text, path, lim.max_yaml_bytes, "YAML");
  prescan_yaml(text, path, lim);
  // The plain block style memplan's data files and most configs use, without yaml-cpp (which
  // spent most of a short run's time reading them); yaml-cpp for everything else.
  if (Node quick; parse_yaml_subset(text, path, lim, quick)) return quick;
  return parse_yaml_with_yaml_cpp(text, path);
}

Node parse_yaml_with_yaml_cpp(const std::string& text, const std::string& path) {
  const ReadLimits& lim = read_limits();
  check_text_impl(text, path, lim.max_yaml_bytes, "YAML");
  prescan_yaml(text, path, lim);
  std::istringstream in(text);
  YAML::Parser parser(in);
  YamlBuilder first(path, lim);
  try {
    if (!parser.HandleNextDocument(first)) {
      Node empty;  // an empty file, or only comments
      empty.where = Where::at_file(path);
      return empty;
    }
    // Later documents: an error when one holds something. yaml-cpp 0.7 leaves a token it cannot
    // start a value with (a ',' or ']' at the top) unread and would return the same empty
    // document forever (YAML::LoadAll never ends on such text): no progress is an error here.
    YAML::Mark last = first.start;
    for (int d = 1;; ++d) {
      YamlBuilder next(path, lim);
      if (!parser.HandleNextDocument(next)) break;
      const Where at = yaml_where(next.start, path);
      if (next.start.pos == last.pos || d > 16) {
        const size_t p = static_cast<size_t>(std::max(0, next.start.pos));
        throw InputError(at, fmt::format("unexpected '{}' where a YAML value should start", p < text.size() ? clip(text.substr(p, 1)) : ""),
                         "is something missing before it, or is it a stray character?");
      }
      if (next.root.kind != Node::Kind::null)
        throw InputError(at, "a second YAML document: memplan reads one per file",
                         "remove the '---' separator, or split the documents into files");
      last = next.start;
    }
  } catch (const YAML::DeepRecursion& e) {
    throw InputError(yaml_where(e.mark, path), "nested too deeply for the YAML parser", kDepthHint);
  } catch (const YAML::Exception& e) {
    throw InputError(yaml_where(e.mark, path), e.msg == YAML::ErrorMsg::BAD_FILE ? "the YAML parser cannot read this file" : e.msg,
                     "see examples/ for memplan config files; YAML indents with spaces, and quotes text holding ': ' or '#'");
  }
  return std::move(first.root);
}

Node parse_json(const std::string& text, const std::string& path) {
  const ReadLimits& lim = read_limits();
  check_text_impl(text, path, lim.max_file_bytes, "JSON");
  return JsonParser(text, path, lim).parse();
}

// ---- typed values -------------------------------------------------------------------------------

void type_error(const Node& n, const std::string& what) { type_error(n, what, type_hint(what)); }

void type_error(const Node& n, const std::string& what, const std::string& hint) {
  const std::string subject = n.path.empty() ? "the file" : n.path;
  throw InputError(n.where, fmt::format("{} must be {} (got {})", subject, what, describe(n)), hint);
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
  if (!std::isfinite(d) || d == std::floor(d)) type_error(n, fmt::format("{} below 2^63", what));
  type_error(n, what);
}
}  // namespace

std::optional<std::string> read_small_file(const std::string& path, int64_t max_bytes) {
  try {
    return read_text_file(path, Where{}, max_bytes);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

int64_t as_int(const Node& n) { return read_int(n, "an integer"); }
namespace {
int64_t read_count(const Node& n, int64_t lo) {
  const char* what = lo > 0 ? "a positive integer" : "an integer of 0 or more";
  const int64_t v = read_int(n, what);
  if (v < lo) type_error(n, what);
  if (v > kMaxCount)
    throw InputError(n.where, fmt::format("{} is too large ({}): a count here is at most {}", n.path, v, kMaxCount),
                     "check the value and its units: GPUs, nodes, batch sizes, lengths and layers are whole numbers far below this");
  return v;
}
}  // namespace

int64_t as_count(const Node& n) { return read_count(n, 1); }
int64_t as_count0(const Node& n) { return read_count(n, 0); }
int64_t as_field_count(const Node& n) { return read_int(n, "a positive integer"); }

int64_t count_product(std::initializer_list<Factor> factors, int64_t limit, const char* what, const Where& fallback) {
  // "8 x 4294967296": the factors as the refusal names them (built only for one).
  auto expr = [&] {
    std::vector<int64_t> values;
    for (const Factor& f : factors) values.push_back(f.value);
    return fmt::format("{}", fmt::join(values, " x "));
  };
  __int128 product = 1;
  const Node* last = nullptr;
  for (const Factor& f : factors) {
    if (f.node) last = f.node;
    if (f.value < 1) {
      if (f.node) type_error(*f.node, "a positive integer");
      throw InputError(fallback, fmt::format("{}: {} has a factor below 1", what, expr()), "every factor is a count of 1 or more");
    }
    product *= f.value;
    if (product > limit) {
      const Where& w = f.node ? f.node->where : last ? last->where : fallback;
      throw InputError(w, fmt::format("{}: {} is more than {}", what, expr(), limit),
                       "check each of these values (memplan multiplies them)");
    }
  }
  return static_cast<int64_t>(product);
}

double as_number(const Node& n) {
  const bool numeric = is_plain_scalar(n) && looks_numeric(n.text);
  const double v = numeric ? std::strtod(n.text.c_str(), nullptr) : NAN;
  if (numeric && !std::isfinite(v)) type_error(n, "a number within range", "numbers must stay below about 1.8e308");
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

// A size with its unit, as every size flag takes it (read_size): a bare number, 24 or 24e9, is
// refused with the flags' hint, not read as bytes.
int64_t as_size(const Node& n) {
  if (n.kind == Node::Kind::scalar) {
    if (auto bare = bare_size_error(n.text, n.where)) {
      const std::string subject = n.path.empty() ? "the size" : n.path;
      throw InputError(n.where, fmt::format("{}: {}", subject, bare->message()), bare->hint());
    }
    if (auto v = parse_size(n.text)) return *v;
  }
  type_error(n, "a size like 24GiB or 24GB");
}

// ---- keys -------------------------------------------------------------------------------------

std::optional<std::string> near_miss(const std::string& key, const std::vector<std::string>& known) {
  if (key.size() > kMaxSuggestLength) return std::nullopt;
  const int limit = key.size() > 5 ? 2 : 1;
  std::optional<std::string> best;
  int best_d = limit + 1;
  const std::string lk = lower(key);
  for (const auto& k : known) {
    if (k == key) return std::nullopt;  // an exact match is not a miss
    const size_t diff = k.size() > key.size() ? k.size() - key.size() : key.size() - k.size();
    if (diff > static_cast<size_t>(limit)) continue;  // more edits than a typo, whatever the letters
    const int d = edit_distance(lk, lower(k));
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

}  // namespace memplan::profiles::detail
