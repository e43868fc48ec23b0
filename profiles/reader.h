// The one config reader behind every profiles/ parser (internal to profiles/). YAML (yaml-cpp)
// and JSON (a small parser here) files become the same tree of Nodes carrying 1-based
// file:line:col, and all lookups, type checks and "did you mean" warnings go through the helpers
// here, so a message reads the same whatever the syntax. Library exceptions never escape: they
// become InputError.
//
// The readers bound their work, so a hostile or broken file is refused quickly with a message
// instead of hanging or exhausting memory (ReadLimits): only regular files are read, up to a size;
// nesting depth is checked before yaml-cpp sees the text (the JSON parser checks it as it goes);
// the number of values, YAML alias expansions included, is capped; duplicate keys are errors
// naming both lines; YAML 1.1 merge keys (<<: *defaults) are expanded; numbers out of a double's
// range are errors at their position. A reader that calls read_text_file, parse_yaml and
// parse_json gets all of this.
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
#include "estimator/text.h"
#include "profiles/profiles.h"  // clip, parse_size, edit_distance

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
// The dotted path of `key` under `parent` (keys clipped, the whole kept to the last 200 characters).
std::string child_path(const std::string& parent, const std::string& key);
inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// ---- limits ----------------------------------------------------------------------------------

// How much a reader takes on. Real configs are a few KiB, nest a few levels and hold a few hundred
// values; the limits leave orders of magnitude of room and keep every read well under a second
// and a few hundred MiB. yaml-cpp parses about 2-3 MB/s and 100k values/s, hence YAML's lower caps.
struct ReadLimits {
  int64_t max_file_bytes = int64_t{16} << 20;  // any file read (JSON up to this)
  int64_t max_yaml_bytes = int64_t{1} << 20;   // YAML text
  int max_depth = 64;                          // nesting of maps and lists
  int64_t max_json_values = 100'000;           // nodes of a JSON document (an HF config with 21k labels: 44k)
  int64_t max_yaml_values = 20'000;            // nodes of a YAML document, alias expansions included
  int max_references = 8;                      // files naming files (deepspeed: -> memplan: -> ...)
};
// The limits in force: the defaults, or with $MEMPLAN_MAX_FILE_SIZE (a size such as 64MiB) as the
// byte limit of every file (YAML included). InputError when the variable is not a size.
const ReadLimits& read_limits();
// Replaces the limits (tests, fuzzers).
void set_read_limits(const ReadLimits& limits);

// ---- files -------------------------------------------------------------------------------------

// The whole file. Only a regular file (or a link to one) is read, never a folder, FIFO, device or
// socket (they could block or never end), and only up to read_limits().max_file_bytes.
// InputError at the file itself, or, when `named_at` is given (the line of another file, or a
// flag, that named this path), at that place with the path in the message.
std::string read_text_file(const std::string& path, const Where& named_at = Where{});
// The same with another byte limit (a monitor log, git's output, a token).
std::string read_text_file(const std::string& path, const Where& named_at, int64_t max_bytes);
// The same file read line by line (a line without its '\n'; the last one also when the file does
// not end in one), each handed to `each` with its 1-based number as it is read, until `each`
// returns false: memory for one line, whatever the file's length (a day-long monitor log). A line
// over max_line_bytes is an InputError at its number; the file's checks and max_bytes are
// read_text_file's.
void for_each_text_line(const std::string& path, const Where& named_at, int64_t max_bytes, int64_t max_line_bytes,
                        const std::function<bool(const std::string& line, int number)>& each);
// A file that may be absent or anything (the HF cache's refs/main, a token file in a shared cache):
// its text when it is a regular file of at most max_bytes that reads without blocking, else nullopt.
std::optional<std::string> read_small_file(const std::string& path, int64_t max_bytes);
// What a path is, for messages: "a folder", "a FIFO (named pipe)", "a character device", ...;
// "" for a regular file (or a link to one) and for a path that does not exist.
std::string special_file_kind(const std::string& path);

// Parse errors become InputError at the offending position. Both check the text first (size,
// NUL bytes, UTF-8, nesting depth, number of values) and report what they refuse at its line.
Node parse_yaml(const std::string& text, const std::string& path);
// parse_yaml through yaml-cpp alone, for every file (parse_yaml reads the block-style subset of
// yaml_subset.h without it): the reference the subset reader is tested against.
Node parse_yaml_with_yaml_cpp(const std::string& text, const std::string& path);
Node parse_json(const std::string& text, const std::string& path);
// A bundled table read by lines and its entries parsed one at a time (gpus.yaml, families.yaml):
// f(line number, line without its newline) for each line.
template <class F>
void for_each_line(const std::string& text, F&& f) {
  size_t pos = 0;
  for (int line = 1; pos < text.size(); ++line) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    f(line, text.substr(pos, end - pos));
    pos = end + 1;
  }
}

// What every parser checks first: at most `max_bytes` bytes, UTF-8 without NUL bytes; InputError
// at the file, or at the offending byte, naming `syntax` ("TOML").
void check_text(const std::string& text, const std::string& path, int64_t max_bytes, const char* syntax);

// Length of the valid UTF-8 sequence at `i` of `t`, or 0 (estimator/text.h).
using text::utf8_length;

// ---- typed values: each throws InputError at the node, "<path> must be <what> (got <value>)" ----

[[noreturn]] void type_error(const Node& n, const std::string& what);
// The same with a hint of the caller's.
[[noreturn]] void type_error(const Node& n, const std::string& what, const std::string& hint);
int64_t as_int(const Node& n);    // integers; integral floats such as 5e8 too (DeepSpeed writes them)

// ---- counts: what a file says of GPUs, nodes, batches, degrees, layers, ranks, lengths ----------
// Every count a reader takes from a file is an integer in [1, kMaxCount] (as_count) or [0,
// kMaxCount] (as_count0, where 0 means "none" or "the default"), refused at its key otherwise. Two
// counts multiply without wrapping (10^18 < 2^63); products of more, or products held to a
// physical bound (GPUs), go through count_product, which refuses at the factor that crosses it.
constexpr int64_t kMaxCount = 1'000'000'000;
// The most GPUs a product of a file's parallel degrees, devices and nodes may name (validate()'s
// bound on parallel.num_gpus).
constexpr int64_t kMaxGpus = 1'000'000;
int64_t as_count(const Node& n);   // 1..kMaxCount: "<path> must be a positive integer (got x)"
int64_t as_count0(const Node& n);  // 0..kMaxCount
// memplan's own YAML keys that map one to one onto a setup field: any integer, as written. Nothing
// multiplies it before validate(), which refuses it at this key's line with the field's bound, and
// a flag given for the same field replaces it first (a flag fixes a problem in the file).
int64_t as_field_count(const Node& n);
// One factor of a product: its value and the key it came from (nullptr: a default or a flag).
struct Factor {
  int64_t value;
  const Node* node;
};
// The product of positive factors, at most `limit`; otherwise InputError at the last factor with a
// node whose value pushes it over (or at `fallback`), naming every factor: "<what>: 8 x 4294967296 =
// 34359738368 is more than <limit>". A factor below 1 is refused at its node.
int64_t count_product(std::initializer_list<Factor> factors, int64_t limit, const char* what, const Where& fallback);
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
  throw InputError(where, fmt::format("unknown {} '{}'", what, clip(text)),
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
// than 5 characters, <= 1 otherwise (case differences count as a typo too). Names longer than
// kMaxSuggestLength are never near anything (and cost nothing to compare).
constexpr size_t kMaxSuggestLength = 64;
inline bool has_non_ascii(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return true;
  return false;
}
std::optional<std::string> near_miss(const std::string& key, const std::vector<std::string>& known);
[[noreturn]] void not_a_map(const Node& n);

// Unknown keys of one section looked at for a near miss; past this many the rest are ignored
// quietly, so a file of a million unknown keys costs no more than one of a thousand.
constexpr size_t kMaxNearMissChecks = 1000;

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
  size_t checked = 0;
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
    if (warnings && checked++ >= kMaxNearMissChecks) continue;
    const auto guess = near_miss(key, known);
    if (!guess && warnings) continue;
    const std::string hint = guess ? fmt::format("did you mean '{}'?", *guess)
                                   : fmt::format("known keys here: {}", fmt::join(known, ", "));
    // A known key retyped with a lookalike letter (Cyrillic 'і' for 'i') is meant as that key:
    // ignoring it would estimate with the default silently, so it is an error.
    if (guess && has_non_ascii(key))
      throw InputError(value.where, fmt::format("unknown key '{}' (it has non-ASCII characters)", clip(key)),
                       fmt::format("did you mean '{}'? retype it in ASCII", *guess));
    if (!warnings) throw InputError(value.where, fmt::format("unknown key '{}'", clip(key)), hint);
    warnings->push_back({value.where, fmt::format("unknown key '{}'", clip(key)), hint});
  }
}

}  // namespace memplan::profiles::detail
