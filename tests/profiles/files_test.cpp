// write_file_atomically: never clobbers what it was not asked to replace, never follows a link,
// never leaves a temporary; cache_dir follows XDG_CACHE_HOME / HOME.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "profiles/files.h"

using namespace memplan;
using namespace memplan::profiles;
namespace fs = std::filesystem;

namespace {
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "memplan-files-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};
std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
std::string error_of(const std::string& path, const std::string& text, bool force) {
  try {
    write_file_atomically(path, text, {force, Where::at_flag("--out"), "the plan"});
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}
size_t entries(const fs::path& dir) { return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator{})); }
}  // namespace

TEST_CASE("a new file is written whole; an existing one only with force") {
  TempDir t;
  const std::string p = (t.path / "plan.yaml").string();
  CHECK(error_of(p, "one\n", false).empty());
  CHECK(slurp(p) == "one\n");
  CHECK(error_of(p, "two\n", false) ==
        "error: --out: will not write the plan '" + p + "': it exists\nhint: pass --force to replace it, or choose another path");
  CHECK(slurp(p) == "one\n");
  CHECK(error_of(p, "two\n", true).empty());
  CHECK(slurp(p) == "two\n");
  CHECK(entries(t.path) == 1);  // no temporary left
}

// Two runs writing the same file at once (two plan --out --force in a CI matrix) leave one whole
// file, never a mix or a torn one, and no temporary: each writes its own temporary and renames it.
TEST_CASE("two processes writing one file at once leave one of the two, whole") {
  TempDir t;
  const std::string p = (t.path / "plan.yaml").string();
  const std::string a(256 << 10, 'a'), b(256 << 10, 'b');
  REQUIRE(error_of(p, a, false).empty());
  pid_t kids[2];
  for (int k = 0; k < 2; ++k) {
    kids[k] = ::fork();
    REQUIRE(kids[k] >= 0);
    if (kids[k] == 0) {
      for (int i = 0; i < 100; ++i)
        if (!error_of(p, k == 0 ? a : b, true).empty()) ::_exit(1);
      ::_exit(0);
    }
  }
  int torn = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string now = slurp(p);
    if (now != a && now != b) ++torn;
  }
  for (pid_t kid : kids) {
    int status = 0;
    REQUIRE(::waitpid(kid, &status, 0) == kid);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  CHECK(torn == 0);
  const std::string last = slurp(p);
  CHECK((last == a || last == b));
  CHECK(entries(t.path) == 1);
}

TEST_CASE("a user's FILE.tmp is never touched") {
  TempDir t;
  const fs::path p = t.path / "plan.yaml";
  std::ofstream(p.string() + ".tmp") << "mine\n";
  CHECK(error_of(p.string(), "plan\n", false).empty());
  CHECK(slurp(p.string() + ".tmp") == "mine\n");
  CHECK(entries(t.path) == 2);
}

TEST_CASE("a symbolic link is never followed; with force the link itself is replaced") {
  TempDir t;
  const fs::path target = t.path / "precious.txt", link = t.path / "plan.yaml";
  std::ofstream(target) << "precious\n";
  fs::create_symlink(target, link);
  CHECK(error_of(link.string(), "x\n", false) == "error: --out: will not write the plan '" + link.string() +
                                                     "': it is a symbolic link\nhint: pass --force to replace the link itself "
                                                     "(its target is left alone)");
  CHECK(error_of(link.string(), "x\n", true).empty());
  CHECK(slurp(target) == "precious\n");
  CHECK_FALSE(fs::is_symlink(link));
  CHECK(slurp(link) == "x\n");
}

TEST_CASE("a read-only file, a folder, a missing folder") {
  TempDir t;
  const fs::path ro = t.path / "ro.yaml";
  std::ofstream(ro) << "keep\n";
  ::chmod(ro.c_str(), 0444);
  CHECK(error_of(ro.string(), "x\n", false) ==
        "error: --out: will not write the plan '" + ro.string() + "': it is read-only\nhint: pass --force to replace it");
  CHECK(slurp(ro) == "keep\n");
  CHECK(error_of(t.path.string(), "x\n", true) ==
        "error: --out: will not write the plan '" + t.path.string() + "': it is a folder\nhint: name a file inside it");
  const fs::path missing = t.path / "no" / "plan.yaml";
  CHECK(error_of(missing.string(), "x\n", false) == "error: --out: will not write the plan '" + missing.string() +
                                                        "': No such file or directory\nhint: check that the folder exists and is writable");
  CHECK(entries(t.path) == 1);
}

TEST_CASE("cache_dir: XDG_CACHE_HOME, else HOME/.cache") {
  TempDir t;
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old_xdg ? old_xdg : "";
  setenv("XDG_CACHE_HOME", t.path.c_str(), 1);
  CHECK(cache_dir() == (t.path / "memplan").string());
  CHECK(fs::is_directory(t.path / "memplan"));
  setenv("XDG_CACHE_HOME", "relative/is/ignored", 1);
  const char* home = std::getenv("HOME");
  if (home && *home == '/') CHECK(cache_dir() == (fs::path(home) / ".cache" / "memplan").string());
  if (old_xdg) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
}
