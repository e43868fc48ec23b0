// The block-style YAML reader (profiles/yaml_subset.h) against yaml-cpp (parse_yaml_with_yaml_cpp):
// on every YAML file in the repository and on each entry of the bundled tables as they are read
// (with the lines above blanked), the Nodes are identical where the subset reader takes the text,
// and where yaml-cpp refuses a text the subset reader declines it; the same on thousands of
// mutations of those files (a character inserted, deleted or replaced, a line duplicated or
// re-indented), which reach the corners the files do not.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "profiles/reader.h"
#include "profiles/yaml_subset.h"

using namespace memplan;
using namespace memplan::profiles::detail;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every field of two trees, with the first difference in `why`.
bool same(const Node& a, const Node& b, std::string& why) {
  auto differ = [&](const std::string& what) {
    why = what + " at '" + a.path + "' (" + a.where.str() + " / " + b.where.str() + ")";
    return false;
  };
  if (a.kind != b.kind) return differ("kind");
  if (a.text != b.text) return differ("text '" + a.text + "' / '" + b.text + "'");
  if (a.quoted != b.quoted) return differ("quoted");
  if (a.path != b.path) return differ("path '" + b.path + "'");
  if (a.where.file != b.where.file || a.where.line != b.where.line || a.where.col != b.where.col) return differ("where");
  if (a.entries.size() != b.entries.size() || a.items.size() != b.items.size()) return differ("size");
  for (size_t i = 0; i < a.entries.size(); ++i) {
    if (a.entries[i].first != b.entries[i].first) return differ("key '" + a.entries[i].first + "'");
    if (!same(a.entries[i].second, b.entries[i].second, why)) return false;
  }
  for (size_t i = 0; i < a.items.size(); ++i)
    if (!same(a.items[i], b.items[i], why)) return false;
  return true;
}

struct Tally {
  int taken = 0, declined = 0, refused = 0;
};

// One text through parse_yaml (its checks, then the subset reader, then yaml-cpp) and through
// yaml-cpp alone: the same tree, or the same error at the same place; tallied by who read it.
void compare(const std::string& text, const std::string& name, Tally& t) {
  Node reference, got;
  std::string ref_error, got_error;
  try {
    reference = parse_yaml_with_yaml_cpp(text, name);
  } catch (const InputError& e) {
    ref_error = e.render();
  }
  try {
    got = parse_yaml(text, name);
  } catch (const InputError& e) {
    got_error = e.render();
  }
  if (!ref_error.empty()) {
    ++t.refused;
    if (got_error != ref_error) FAIL_CHECK(name << ": yaml-cpp refuses it (" << ref_error << "), parse_yaml says '" << got_error << "':\n" << text);
    return;
  }
  if (!got_error.empty()) {
    FAIL_CHECK(name << ": parse_yaml refuses what yaml-cpp reads: " << got_error);
    return;
  }
  Node quick;
  (parse_yaml_subset(text, name, read_limits(), quick) ? t.taken : t.declined) += 1;
  std::string why;
  if (!same(reference, got, why)) FAIL_CHECK(name << ": " << why << "\n" << text);
}

std::vector<std::filesystem::path> repo_yaml() {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(MEMPLAN_TEST_DATA).parent_path().parent_path();
  std::vector<fs::path> out;
  for (const char* top : {"examples", "tests/data", "profiles"})
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) out.push_back(e.path());
    }
  std::sort(out.begin(), out.end());
  return out;
}

// The bundled tables are read an entry at a time: each "  - " entry with blank lines above it.
std::vector<std::string> table_entries(const std::string& text) {
  std::vector<std::string> out;
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("  - ", 0) != 0) continue;
    std::string e(i, '\n');
    size_t j = i;
    do e += lines[j++] + "\n";
    while (j < lines.size() && lines[j].rfind("  - ", 0) != 0 && (lines[j].empty() || lines[j][0] == ' ' || lines[j][0] == '#'));
    out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("yaml subset: every YAML file of the repository and each table entry, as yaml-cpp reads them") {
  Tally t;
  int files = 0;
  for (const auto& p : repo_yaml()) {
    const std::string text = slurp(p);
    compare(text, p.string(), t);
    ++files;
    if (p.filename() == "gpus.yaml" || p.filename() == "families.yaml")
      for (const std::string& e : table_entries(text)) compare(e, p.string(), t);
  }
  MESSAGE(files << " files and the tables' entries: " << t.taken << " read by the subset reader, " << t.declined << " left to yaml-cpp, "
                << t.refused << " refused by yaml-cpp");
  CHECK(files > 100);
  CHECK(t.taken > 150);  // the tables' entries and most configs
}

TEST_CASE("yaml subset: mutations of the repository's YAML never read differently") {
  // MEMPLAN_YAML_MUTATIONS / MEMPLAN_YAML_SEED: a longer or another run than CI's.
  std::mt19937_64 rng(std::getenv("MEMPLAN_YAML_SEED") ? std::strtoull(std::getenv("MEMPLAN_YAML_SEED"), nullptr, 10) : 20261206);
  const std::string alphabet = " \n-:#'\"[],{}&*!|>?%@`~\\xyz019.";
  std::vector<std::string> texts;
  for (const auto& p : repo_yaml()) {
    std::string s = slurp(p);
    if (s.size() > 6000) s.resize(6000);  // the first lines of the long tables
    texts.push_back(s);
  }
  Tally t;
  const int trials = std::getenv("MEMPLAN_YAML_MUTATIONS") ? std::atoi(std::getenv("MEMPLAN_YAML_MUTATIONS")) : 4000;
  for (int trial = 0; trial < trials; ++trial) {
    std::string s = texts[std::uniform_int_distribution<size_t>(0, texts.size() - 1)(rng)];
    const int edits = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      const size_t at = std::uniform_int_distribution<size_t>(0, s.size() - 1)(rng);
      const char c = alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
        case 0: s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        case 1: s.erase(at, 1); break;
        case 2: s[at] = c; break;
        case 3: {  // duplicate the line
          const size_t b = s.rfind('\n', at) == std::string::npos ? 0 : s.rfind('\n', at) + 1;
          const size_t e = s.find('\n', at);
          const std::string line = s.substr(b, e == std::string::npos ? std::string::npos : e - b + 1);
          s.insert(b, line);
          break;
        }
        default: {  // re-indent the line by one or two spaces
          const size_t b = s.rfind('\n', at) == std::string::npos ? 0 : s.rfind('\n', at) + 1;
          if (std::uniform_int_distribution<int>(0, 1)(rng)) s.insert(b, std::uniform_int_distribution<int>(0, 1)(rng) ? " " : "  ");
          else if (s.compare(b, 1, " ") == 0) s.erase(b, 1);
          break;
        }
      }
    }
    compare(s, "mutated.yaml", t);
  }
  MESSAGE(trials << " mutations: " << t.taken << " read by the subset reader, " << t.declined << " left to yaml-cpp, " << t.refused
                              << " refused by yaml-cpp");
  CHECK(t.taken > 500);
  CHECK(t.refused > 200);
}
