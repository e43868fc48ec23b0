// The readers' bounds (profiles/reader.h): only regular files, up to a size; nesting checked
// before any recursion; values (YAML aliases expanded) capped; merge keys expanded; duplicate
// keys named with both lines; JSON key positions found in one pass; numbers out of range and
// NaN at their position; files naming files checked for cycles and reported at the naming line.
// Each hostile input is built here at full size (200k levels, a billion laughs, 99k keys), so a
// regression to recursion or quadratic time fails or times out rather than passing.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "profiles/profiles.h"
#include "profiles/formats.h"
#include "profiles/reader.h"

using namespace memplan;
using namespace memplan::profiles;
using detail::Node;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "memplan-reader-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

std::string yaml_error(const std::string& text) { return error_of([&] { detail::parse_yaml(text, "f.yaml"); }); }
std::string json_error(const std::string& text) { return error_of([&] { detail::parse_json(text, "f.json"); }); }

// Seconds `f` takes, scaled to a plain optimised build: sanitizer builds run 10-20x slower.
double seconds_for(const std::function<void()>& f) {
#if defined(__SANITIZE_ADDRESS__)
  constexpr double kSlowdown = 20;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  constexpr double kSlowdown = 20;
#else
  constexpr double kSlowdown = 1;
#endif
#else
  constexpr double kSlowdown = 1;
#endif
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kSlowdown;
}

bool starts_with(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }

}  // namespace

TEST_CASE("only regular files are read: folders, FIFOs and devices are refused before reading") {
  TempDir t;
  const std::string fifo = (t.path / "pipe.yaml").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of([&] { detail::read_text_file(fifo); }) ==
        fifo + ": error: this is a FIFO (named pipe), not a regular file\nhint: memplan reads configs from regular files only "
               "(a pipe or a device could block or never end); save it to a file first");
  CHECK(error_of([&] { detail::read_text_file("/dev/zero"); }) ==
        "/dev/zero: error: this is a character device, not a regular file\nhint: memplan reads configs from regular files "
        "only (a pipe or a device could block or never end); save it to a file first");
  CHECK(error_of([&] { detail::read_text_file(t.path.string()); }) ==
        t.path.string() + ": error: this is a folder, not a file\nhint: name a file inside it");
  // load_config and --model go through the same check.
  CHECK(starts_with(error_of([&] { load_config(fifo); }), fifo + ": error: this is a FIFO"));
  CHECK(error_of([&] { load_model(fifo, Where::at_flag("--model")); }) ==
        "error: --model: '" + fifo + "' is a FIFO (named pipe), not a config.json\nhint: --model takes a preset name, a "
        "config.json or a directory holding one");
  CHECK(detail::special_file_kind(fifo) == "a FIFO (named pipe)");
  CHECK(detail::special_file_kind(t.write("a.yaml", "x: 1\n")) == "");
}

TEST_CASE("the file size limit is checked before reading, and configurable") {
  TempDir t;
  const std::string p = t.write("big.json", "{\"a\": \"" + std::string(5000, 'x') + "\"}");
  const detail::ReadLimits saved = detail::read_limits();
  detail::ReadLimits small = saved;
  small.max_file_bytes = 4096;
  detail::set_read_limits(small);
  const std::string e = error_of([&] { detail::read_text_file(p); });
  detail::set_read_limits(saved);
  CHECK(e == p + ": error: the file is 5,009 bytes, over the 4 KiB memplan reads\nhint: is this the right file? configs are a "
                 "few KiB; MEMPLAN_MAX_FILE_SIZE=64MiB raises the limit");
  CHECK(detail::read_text_file(p).size() == 5009);
  // YAML has its own, lower byte limit (yaml-cpp reads a few MB/s).
  CHECK(starts_with(yaml_error("a: " + std::string(saved.max_yaml_bytes, 'x')), "f.yaml: error: the YAML text is 1,048,579 bytes"));
}

TEST_CASE("nesting is refused before the parsers recurse: 200,000 levels in JSON and YAML") {
  CHECK(json_error(std::string(200000, '[') + std::string(200000, ']')) ==
        "f.json:1:65: error: nested more than 64 levels deep\nhint: configs nest a few levels; this file looks generated "
        "wrongly (or on purpose)");
  std::string objects;
  for (int i = 0; i < 200000; ++i) objects += "{\"a\":";
  CHECK(starts_with(json_error(objects), "f.json:1:321: error: nested more than 64 levels deep"));
  CHECK(starts_with(yaml_error(std::string(200000, '[')), "f.yaml:1:64: error: nested more than 64 levels deep"));
  std::string block;
  for (int i = 0; i < 2000; ++i) block += std::string(static_cast<size_t>(i % 100), ' ') + "k:\n";
  CHECK(starts_with(yaml_error(block), "f.yaml:65:65: error: nested more than 64 levels deep"));
  std::string dashes;
  for (int i = 0; i < 100; ++i) dashes += "- ";
  CHECK(starts_with(yaml_error(dashes + "x\n"), "f.yaml:1:"));
  // 64 levels are fine.
  CHECK(json_error(std::string(64, '[') + std::string(64, ']')).empty());
}

TEST_CASE("YAML aliases: expansions count against the value limit; a billion laughs stops at it") {
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  const char* names = "abcdefghij";
  for (int i = 1; i < 10; ++i) {
    laughs += fmt::format("{0}: &{0} [", names[i]);
    for (int k = 0; k < 10; ++k) laughs += fmt::format("{}*{}", k ? ", " : "", names[i - 1]);
    laughs += "]\n";
  }
  std::string e;
  const double s = seconds_for([&] { e = yaml_error(laughs); });
  CHECK(starts_with(e, "f.yaml:"));
  CHECK(e.find("error: YAML aliases expand this file to more than 20,000 values") != std::string::npos);
  CHECK(s < 1.0);
  // A collection holding itself through an alias.
  CHECK(yaml_error("a: &a [1, *a]\n") ==
        "f.yaml:1:11: error: a YAML alias refers to the collection that holds it (a cycle)\nhint: an alias (*name) must name "
        "an anchor (&name) defined outside the value it is used in");
  // A few uses are fine and read as copies.
  const Node n = detail::parse_yaml("base: &b {x: 1}\nuse: *b\n", "f.yaml");
  REQUIRE(n.find("use"));
  CHECK(n.find("use")->find("x")->text == "1");
}

TEST_CASE("YAML merge keys expand as in YAML 1.1: own keys win, then merged mappings in order") {
  const Node n = detail::parse_yaml(
      "defaults: &d {micro_batch_size: 2, seq_len: 512}\n"
      "more: &m {seq_len: 1024, grad_accum: 4}\n"
      "training:\n"
      "  <<: [*d, *m]\n"
      "  micro_batch_size: 8\n",
      "f.yaml");
  const Node* t = n.find("training");
  REQUIRE(t);
  REQUIRE(t->entries.size() == 3);
  CHECK(t->find("micro_batch_size")->text == "8");
  CHECK(t->find("micro_batch_size")->where.line == 5);
  CHECK(t->find("seq_len")->text == "512");  // the first merged mapping wins
  CHECK(t->find("seq_len")->where.line == 1);  // positions point at where the value is written
  CHECK(t->find("seq_len")->path == "training.seq_len");
  CHECK(t->find("grad_accum")->text == "4");
  CHECK(yaml_error("a: 1\nb:\n  <<: *x\n").find("error:") != std::string::npos);  // unknown anchor: yaml-cpp's message
  CHECK(yaml_error("s: &s 3\nb:\n  <<: *s\n") ==
        "f.yaml:3:3: error: the merge key '<<' takes a mapping or a list of mappings\nhint: write <<: *name, where &name "
        "anchors a mapping (or <<: [*a, *b])");
  // A quoted '<<' is an ordinary key.
  CHECK(detail::parse_yaml("'<<': 1\n", "f.yaml").find("<<")->text == "1");
  // Through load_config: the merged keys are read like written ones.
  TempDir t2;
  const std::string cfg = t2.write("m.yaml",
                                   "base: &base\n  micro_batch_size: 3\n  max_seq_len: 256\n"
                                   "model: gpt2\ntraining:\n  <<: *base\n  gradient_accumulation_steps: 2\n");
  const LoadedConfig c = load_config(cfg);
  CHECK(c.setup.batch.micro_batch == 3);
  CHECK(c.setup.batch.seq_len == 256);
  CHECK(c.setup.batch.grad_accum == 2);
  CHECK(c.origin.of("batch.micro_batch").line == 2);
}

TEST_CASE("duplicate keys are errors naming both lines") {
  CHECK(yaml_error("model: gpt2\ntraining:\n  micro_batch_size: 2\n  micro_batch_size: 4\n") ==
        "f.yaml:4:3: error: duplicate key 'micro_batch_size' (also at line 3)\nhint: YAML keeps only one of them (which "
        "one depends on the tool); remove the other");
  CHECK(json_error("{\n  \"stage\": 2,\n  \"x\": 1,\n  \"stage\": 3\n}") ==
        "f.json:4:3: error: duplicate key 'stage' (also at line 2)\nhint: JSON readers keep only one of them (most the "
        "last); remove the other");
  // The same key in different mappings is fine.
  CHECK(yaml_error("a: {x: 1}\nb: {x: 2}\n").empty());
}

TEST_CASE("JSON: key positions in one pass, numbers as written, errors at their position") {
  std::string big = "{\n";
  for (int i = 0; i < 99000; ++i) big += fmt::format("  \"key{}\": {},\n", i, i);
  big += "  \"last\": 5e8\n}\n";
  Node n;
  const double s = seconds_for([&] { n = detail::parse_json(big, "f.json"); });
  CHECK(s < 2.0);  // the old search from the parent was quadratic: minutes at this size
  REQUIRE(n.entries.size() == 99001);
  CHECK(n.entries[90000].second.where.line == 90002);
  CHECK(n.entries[90000].second.where.col == 3);
  CHECK(n.find("last")->text == "5e8");
  CHECK(detail::as_int(*n.find("last")) == 500'000'000);
  std::string items = "[0";
  for (int i = 0; i < 100000; ++i) items += ",0";
  CHECK(json_error(items + "]") ==
        "f.json:1:200000: error: more than 100,000 values in one JSON file\nhint: configs hold a few hundred values; is this "
        "the right file?");
  CHECK(json_error("{\"a\": 1e400}") ==
        "f.json:1:7: error: number 1e400 is out of range\nhint: numbers must stay below about 1.8e308; check the value");
  // Python's json writes NaN, Infinity and -Infinity: read as plain text, refused where a number is read.
  const Node nf = detail::parse_json("{\"a\":\n  NaN, \"b\": [0.0, Infinity, -Infinity]}", "f.json");
  CHECK(nf.find("a")->text == "NaN");
  CHECK_FALSE(nf.find("a")->quoted);
  CHECK(nf.find("b")->items[2].text == "-Infinity");
  CHECK_THROWS_AS(detail::as_number(*nf.find("a")), InputError);
  CHECK(json_error("{\"a\":\n  nan}") ==
        "f.json:2:3: error: not a JSON number (only Python's NaN, Infinity and -Infinity are read, as text)\nhint: write a "
        "finite number (memplan's values are sizes, counts and fractions)");
  CHECK(starts_with(json_error("{\"a\": -inf}"), "f.json:1:7: error: not a JSON number"));
  CHECK(json_error("{\"a\": 1,}") == "f.json:1:9: error: a trailing ',' before '}'\nhint: JSON allows no comma after the last member");
  CHECK(json_error("{\"a\": 012}") ==
        "f.json:1:7: error: invalid number '012'\nhint: JSON numbers look like 4, -0.5 or 5e8 (no leading zeros, hex, or '.' "
        "without digits)");
  CHECK(json_error("{\"a\": \"x\n\"}") ==
        "f.json:1:9: error: a string runs past the end of its line\nhint: is a closing '\"' missing? (write \\n for a newline)");
  CHECK(json_error("{\"a\": 1") == "f.json:1:8: error: the JSON text ends inside an object\nhint: the file is cut short: a '}' is missing");
  CHECK(json_error("") == "f.json: error: the JSON file is empty\nhint: a JSON config is an object: { \"key\": value, ... }");
  CHECK(json_error("{} {}") ==
        "f.json:1:4: error: unexpected text after the end of the JSON value\nhint: a JSON file holds one value; is a ',' or "
        "an opening '{' missing?");
  CHECK(detail::parse_json("{\"k\": \"\\u00e9\\ud83d\\ude00\"}", "f.json").find("k")->text == "\xC3\xA9\xF0\x9F\x98\x80");
  // In YAML, numbers out of a double's range are reported where they are read.
  const Node y = detail::parse_yaml("a: 1e400\n", "f.yaml");
  CHECK(error_of([&] { detail::as_number(*y.find("a")); }) ==
        "f.yaml:1:1: error: a must be a number within range (got '1e400')\nhint: numbers must stay below about 1.8e308");
}

TEST_CASE("text that is not UTF-8 YAML/JSON: NUL bytes, invalid UTF-8, UTF-16, several documents") {
  CHECK(yaml_error(std::string("a: 1\nb: \0\n", 10)) ==
        "f.yaml:2:4: error: NUL byte: this is not a text file\nhint: memplan reads YAML and JSON text; is this a binary file?");
  CHECK(json_error("{\"a\": \"\xff\"}") ==
        "f.json:1:8: error: invalid UTF-8 (byte 0xff)\nhint: memplan reads UTF-8 text; is this a binary file, or saved in "
        "another encoding?");
  CHECK(yaml_error("\xff\xfe" "a\0:\0") == "f.yaml: error: the file is UTF-16 or UTF-32 text\nhint: save it as UTF-8");
  CHECK(yaml_error("a: 1\n---\nb: 2\n") ==
        "f.yaml:2:1: error: a second YAML document: memplan reads one per file\nhint: remove the '---' separator, or split "
        "the documents into files");
  CHECK(yaml_error("a: 1\n---\n").empty());  // an empty document after the separator is nothing
  // yaml-cpp 0.7 leaves a stray ',' or ']' at the top unread (YAML::LoadAll loops forever on it).
  CHECK(yaml_error(",odel :r \nplaadientent\n") ==
        "f.yaml:1:1: error: unexpected ',' where a YAML value should start\nhint: is something missing before it, or is it a "
        "stray character?");
  CHECK(starts_with(yaml_error("a: 1\n]\n"), "f.yaml:2:1: error:"));
  CHECK(yaml_error("---\na: 1\n").empty());
  // A UTF-8 byte order mark is fine in both.
  CHECK(detail::parse_json("\xEF\xBB\xBF{\"a\": 1}", "f.json").find("a")->text == "1");
}

TEST_CASE("suggestions only for names of reasonable length, and quickly") {
  const std::string huge(1 << 20, 'a');
  std::optional<std::string> miss;
  std::vector<std::string> near;
  const double s = seconds_for([&] {
    miss = detail::near_miss(huge, {"micro_batch_size", "seq_len"});
    near = nearest(huge, {"llama-2-7b", "gpt2"});
  });
  CHECK(!miss);
  CHECK(near.empty());
  CHECK(s < 0.1);
  CHECK(detail::near_miss("micro_batch_sise", {"micro_batch_size", "seq_len"}) == std::optional<std::string>("micro_batch_size"));
  // Messages show a long or hostile name clipped, control characters escaped.
  CHECK(clip(std::string(100, 'k'), 10) == "kkkkkkkkkk...");
  CHECK(clip("a\x1b[31mb") == "a\\x1b[31mb");
  CHECK(clip("\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9...");
  // Unknown keys as long as YAML allows (1024 characters) cost nothing and suggest nothing.
  TempDir t;
  std::string many = "model: gpt2\ntraining:\n";
  for (int i = 0; i < 900; ++i) many += fmt::format("  {}{}: 1\n", huge.substr(0, 1000), i);
  LoadedConfig c;
  const double s2 = seconds_for([&] { c = load_config(t.write("k.yaml", many)); });
  REQUIRE(c.warnings.size() == 21);  // 20 said, then one counting the other 880
  CHECK(c.warnings[20].message == "880 more keys here that memplan does not read");
  CHECK(s2 < 1.0);
}

TEST_CASE("files naming files: cycles refused, problems reported at the naming line") {
  TempDir t;
  const std::string self = t.write("self.json", "{\"train_micro_batch_size_per_gpu\": 1, \"memplan\": {\"deepspeed\": \"self.json\"}}");
  CHECK(error_of([&] { load_config(self); }) ==
        self + ":1:51: error: memplan.deepspeed: '" + (t.path / "self.json").string() +
            "' is a file already being read (a cycle: self.json -> self.json)\nhint: a config cannot include itself, directly "
            "or through another file");
  const std::string a = t.write("a.yaml", "model: gpt2\ndeepspeed: b.json\n");
  t.write("b.json", "{\"train_micro_batch_size_per_gpu\": 2,\n \"memplan\": {\"deepspeed\": \"c.json\"}}");
  t.write("c.json", "{\"train_micro_batch_size_per_gpu\": 3,\n \"memplan\": {\"deepspeed\": \"b.json\"}}");
  CHECK(starts_with(error_of([&] { load_config(a); }),
                    (t.path / "c.json").string() + ":2:14: error: memplan.deepspeed: '" + (t.path / "b.json").string() +
                        "' is a file already being read (a cycle: a.yaml -> b.json -> c.json -> b.json)"));
  const std::string missing = t.write("m.yaml", "model: gpt2\ntraining:\n  deepspeed: nowhere/ds.json\n");
  CHECK(error_of([&] { load_config(missing); }) ==
        missing + ":3:3: error: training.deepspeed: cannot read '" + (t.path / "nowhere/ds.json").string() +
            "': No such file or directory\nhint: the path is relative to the folder of the file that names it; deepspeed: "
            "names a ds_config.json");
  const std::string fifo = (t.path / "ds.json").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string to_fifo = t.write("f.yaml", "model: gpt2\ndeepspeed: ds.json\n");
  CHECK(starts_with(error_of([&] { load_config(to_fifo); }),
                    to_fifo + ":2:1: error: deepspeed: cannot read '" + fifo + "': it is a FIFO (named pipe), not a regular file"));
  const std::string hf = t.write("h.yaml", "model:\n  hf_config: .\n");
  CHECK(starts_with(error_of([&] { load_config(hf); }), hf + ":2:3: error: model.hf_config: cannot read '"));
  // A relative path inside a DeepSpeed file resolves against that file's folder.
  fs::create_directories(t.path / "sub");
  t.write("sub/ds.json", "{\"train_micro_batch_size_per_gpu\": 5, \"memplan\": {\"model\": {\"hf_config\": \"tiny.json\"}}}");
  t.write("sub/tiny.json",
          "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
          "\"intermediate_size\": 128, \"vocab_size\": 100}");
  const LoadedConfig c = load_config(t.write("top.yaml", "deepspeed: sub/ds.json\n"));
  CHECK(c.setup.batch.micro_batch == 5);
  CHECK(c.setup.model.hidden_size == 64);
}

TEST_CASE("a known key retyped with a lookalike non-ASCII letter is an error, not a quiet default") {
  TempDir t;
  const std::string p = t.write("l.yaml", "model: gpt2\ntraining:\n  micro_batch_s\xD1\x96ze: 8\n");
  CHECK(error_of([&] { load_config(p); }) ==
        p + ":3:3: error: unknown key 'micro_batch_s\xD1\x96ze' (it has non-ASCII characters)\nhint: did you mean "
            "'micro_batch_size'? retype it in ASCII");
  // Other non-ASCII keys are said like any unknown key (memplan does not read them).
  const LoadedConfig o = load_config(t.write("o.yaml", "model: gpt2\n\xC3\xA9tiquette: x\n"));
  REQUIRE(o.warnings.size() == 1);
  CHECK(o.warnings[0].message.rfind("unknown key '\xC3\xA9tiquette'", 0) == 0);
}

TEST_CASE("TOML is bounded like YAML: size, NUL bytes, nesting before toml++ recurses, values") {
  auto toml_error = [](const std::string& text) { return error_of([&] { detail::parse_toml(text, "job.toml"); }); };
  CHECK(detail::parse_toml("[model]\nname = \"llama3\"\nlr = 8.0e-4\n", "job.toml").find("model")->find("name")->text == "llama3");
  // 500,000 dotted parts: toml++ would build (and free) a table per part, recursively.
  std::string deep = "[a";
  for (int i = 0; i < 500000; ++i) deep += ".a";
  double s = 0;
  std::string e;
  s = seconds_for([&] { e = toml_error(deep + "]\nx = 1\n"); });
  CHECK(starts_with(e, "job.toml:1:129: error: nested more than 64 levels deep\nhint: configs nest a few levels"));
  CHECK(s < 1.0);
  std::string arrays(200000, '[');
  CHECK(starts_with(toml_error("x = " + arrays), "job.toml:1:69: error: nested more than 64 levels deep"));
  // Dots inside strings and comments are not nesting.
  CHECK(detail::parse_toml("a = \"" + std::string(100, '.') + "\" # " + std::string(100, '.') + "\n", "job.toml").find("a"));
  const std::string nul("a = 1\nb = \"x\0y\"\n", 16);
  CHECK(starts_with(toml_error(nul), "job.toml:2:7: error: NUL byte"));
  CHECK(starts_with(toml_error("a = \"" + std::string(2 << 20, 'x') + "\"\n"),
                    "job.toml: error: the TOML text is 2,097,159 bytes, over the 1 MiB memplan reads"));
  std::string many = "x = [";
  for (int i = 0; i < 30000; ++i) many += "1,";
  many += "1]\n";
  e = toml_error(many);
  CHECK(starts_with(e, "job.toml:1:"));
  CHECK(e.find(": error: more than 20000 values in one TOML file\nhint: ") != std::string::npos);
  // A UTF-8 byte order mark first is not text (as in YAML); positions stay those of the text.
  const Node bom = detail::parse_toml("\xEF\xBB\xBF[model]\nname = \"llama3\"\n", "job.toml");
  CHECK(bom.find("model")->find("name")->text == "llama3");
  CHECK(bom.find("model")->find("name")->where.line == 2);
  CHECK(starts_with(toml_error("\xEF\xBB\xBF[model]\nname = \"llama3\"\nx = \xC3\xA9\n"), "job.toml:3:5: error: a non-ASCII character"));
}

TEST_CASE("TOML table headers that toml++ 3.3.0 would assert on are refused first (fuzz_load_config)") {
  auto toml_error = [](const std::string& text) { return error_of([&] { detail::parse_toml(text, "job.toml"); }); };
  CHECK(toml_error("[!]\n") ==
        "job.toml:1:2: error: a table header must start with a key (letters, digits, '_' or '-', or a quoted name)\nhint: "
        "write [name] or [\"quoted name\"]; see https://toml.io");
  CHECK(starts_with(toml_error("[model]\nname = \"x\"\n  [[ \xC3\xA9]]\n"), "job.toml:3:6: error: a table header must start with a key"));
  CHECK(starts_with(toml_error("[\x05# x\n"), "job.toml:1:2: error: a table header must start with a key"));
  CHECK(starts_with(toml_error("a = 1\n[\n"), "job.toml:2:2: error: a table header must start with a key"));
  // Non-ASCII outside strings and comments: toml++ 3.3.0 reached TOML_UNREACHABLE on U+0105.
  CHECK(toml_error("\xC4\x85" "f1a") ==
        "job.toml:1:1: error: a non-ASCII character outside a string or comment\nhint: TOML keys are ASCII; quote a key or "
        "value that needs other characters");
  CHECK(detail::parse_toml("# caf\xC3\xA9\nname = \"caf\xC3\xA9\"\n", "job.toml").find("name")->text == "caf\xC3\xA9");
  // A \u escape without its hex digits before non-ASCII text: toml++ 3.3.0 reached TOML_UNREACHABLE.
  CHECK(toml_error("i = \"m\\uMax_4\xC4\x85" "f\"\n") ==
        "job.toml:1:7: error: a \\u escape needs 4 hex digits\nhint: write the character itself, or its code point as "
        "\\u0105 / \\U0001F600");
  CHECK(detail::parse_toml("name = \"caf\\u00e9 \\U0001F600\"\n", "job.toml").find("name")->text == "caf\xC3\xA9 \xF0\x9F\x98\x80");
  // A quote right after a bare value opens no string: toml++ 3.3.0 read on and reached
  // TOML_UNREACHABLE on the non-ASCII text this scan took for a string's.
  CHECK(toml_error("interval = 50k\"mot4Mas\xC4\x85" "f1\n") ==
        "job.toml:1:15: error: a quote right after the bare text '50k'\nhint: a string needs a quote on both sides: \"50k\"");
  CHECK(detail::parse_toml("a.\"b c\".d = 1\ne = [\"x\",\"y\"]\nf = {g = 'h'}\n", "job.toml").find("e")->items.size() == 2);
  // Not headers: brackets inside a multi-line array or a string.
  CHECK(detail::parse_toml("x = [\n  [1, 2],\n  [3],\n]\ny = \"\"\"\n[!]\"\"\"\n", "job.toml").find("x")->items.size() == 2);
  CHECK(detail::parse_toml("[a-b]\n[_c]\n[\"d e\"]\n[ 'f' ]\n[[g]]\n", "job.toml").find("g"));
}

TEST_CASE("YAML's explicit !!str makes a string of a plain scalar, as quotes do: no count from '!!str 4'") {
  const Node n = detail::parse_yaml("a: !!str 4\nb: 4\nc: \"4\"\n", "f.yaml");
  CHECK(n.find("a")->quoted);
  CHECK_FALSE(n.find("b")->quoted);
  CHECK(n.find("c")->quoted);
  CHECK(error_of([] { load_config_text("model: gpt2\ntraining:\n  micro_batch_size: !!str 4\n", "c.yaml", "c.yaml"); }) ==
        "c.yaml:3:3: error: training.micro_batch_size must be a positive integer (got string '4')\n"
        "hint: write a whole number, e.g. 4 (no quotes)");
}

TEST_CASE("counts: bounded as read, and their products refused at the factor that crosses the bound") {
  const Node n = detail::parse_yaml("a: 0\nb: 8\nc: 1000000000\nd: 1000000001\ne: -3\nf: 7905747460161236407\n", "c.yaml");
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return e.where().str() + ": " + e.what();
    }
    return std::string("no error");
  };
  CHECK(detail::as_count(*n.find("b")) == 8);
  CHECK(detail::as_count(*n.find("c")) == detail::kMaxCount);
  CHECK(detail::as_count0(*n.find("a")) == 0);
  CHECK(message([&] { detail::as_count(*n.find("a")); }) == "c.yaml:1:1: a must be a positive integer (got '0')");
  CHECK(message([&] { detail::as_count(*n.find("e")); }) == "c.yaml:5:1: e must be a positive integer (got '-3')");
  CHECK(message([&] { detail::as_count0(*n.find("e")); }) == "c.yaml:5:1: e must be an integer of 0 or more (got '-3')");
  CHECK(message([&] { detail::as_count(*n.find("d")); }) ==
        "c.yaml:4:1: d is too large (1000000001): a count here is at most 1000000000");
  CHECK(message([&] { detail::as_count(*n.find("f")); }) ==
        "c.yaml:6:1: f is too large (7905747460161236407): a count here is at most 1000000000");
  // Two bounded counts multiply inside 64 bits; a product is held to its bound at the factor that
  // crosses it, and names every factor as written.
  const Node* b = n.find("b");
  const Node* c = n.find("c");
  CHECK(detail::count_product({{8, b}, {4, nullptr}}, detail::kMaxGpus, "x", Where{}) == 32);
  CHECK(message([&] { detail::count_product({{8, b}, {detail::kMaxCount, c}}, detail::kMaxGpus, "devices x nodes", Where{}); }) ==
        "c.yaml:3:1: devices x nodes: 8 x 1000000000 is more than 1000000");
  // Five factors of 10^9 would wrap 64 bits; the product stops at the first that crosses.
  CHECK(message([&] {
          detail::count_product({{detail::kMaxCount, c}, {detail::kMaxCount, nullptr}, {detail::kMaxCount, nullptr}},
                                detail::kMaxCount, "degrees", Where{});
        }) == "c.yaml:3:1: degrees: 1000000000 x 1000000000 x 1000000000 is more than 1000000000");
  CHECK(message([&] { detail::count_product({{0, n.find("a")}, {8, b}}, detail::kMaxGpus, "x", Where{}); }) ==
        "c.yaml:1:1: a must be a positive integer (got '0')");
}

TEST_CASE("a regular file whose read would block (/proc/kmsg) is refused, not retried forever") {
  // /proc/kmsg is a regular file of size 0 that blocks until the kernel logs; opened O_NONBLOCK it
  // answers EAGAIN, which the reader retried at once (100% CPU, forever). Readable only as root.
  if (::access("/proc/kmsg", R_OK) != 0) return;  // not root: nothing to check here
  std::string msg;
  try {
    detail::read_text_file("/proc/kmsg");
  } catch (const InputError& e) {
    msg = e.render();
  }
  CHECK(msg.rfind("/proc/kmsg: error: reading the file would block", 0) == 0);
}
