// The job's Python and the torch and transformers it would import (python_env.h).
#include "cli/python_env.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "estimator/fields.h"
#include "profiles/files.h"

namespace memplan::cli {
namespace {

constexpr size_t kMaxProbeBytes = 256 * 1024;  // its sys.path, at most
constexpr size_t kMaxVersionFileBytes = 64 * 1024;
constexpr const char* kCacheMagic = "memplan python import path 1";

bool executable(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// `name` as execvp would find it: a path as it is, else the first PATH folder that has it.
std::string find_interpreter(const std::string& name) {
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string p = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (executable(p)) return p;
  }
  return "";
}

// Modification time of `p` in nanoseconds, -1 when it does not exist.
int64_t mtime_ns(const std::string& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// The first `max` bytes of a regular file ("" when it is not one).
std::string head_of(const std::string& p, size_t max) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    out.resize(max);
    size_t got = 0;
    while (got < max) {
      const ssize_t n = ::read(fd, out.data() + got, max - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
  }
  ::close(fd);
  return out;
}

// What decides the interpreter's import path, as one key: the interpreter (its file and where it
// resolves to, with that file's time and size), the variables Python and the usual environment
// managers read, and, for an interpreter that is a script (a pyenv shim picks its Python by folder),
// the current folder.
std::string cache_key(const std::string& interpreter) {
  std::string key = interpreter;
  char resolved[PATH_MAX];
  const std::string real = ::realpath(interpreter.c_str(), resolved) ? std::string(resolved) : interpreter;
  struct stat st {};
  ::stat(real.c_str(), &st);
  key += fmt::format("\n{}\n{}\n{}", real, mtime_ns(real), static_cast<int64_t>(st.st_size));
  for (const char* v : {"VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE",
                        "PYTHONSAFEPATH", "PYENV_VERSION", "HOME"}) {
    const char* x = std::getenv(v);
    key += fmt::format("\n{}={}", v, x ? x : "<unset>");
  }
  if (head_of(real, 4) != "\x7f" "ELF") {
    char cwd[PATH_MAX];
    key += fmt::format("\ncwd={}", ::getcwd(cwd, sizeof cwd) ? cwd : "");
  }
  return key;
}

// FNV-1a over the key: the cache file's name.
std::string key_name(const std::string& key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

// The interpreter's sys.path: run without a shell, stdin closed, stderr dropped, at most
// kProbeSeconds and kMaxProbeBytes; nullopt with `why` when it does not answer.
std::optional<std::vector<std::string>> ask_import_path(const std::string& interpreter, int timeout_s, std::string& why) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return why = "cannot make a pipe", std::nullopt;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return why = "cannot start it", std::nullopt;
  }
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 2);
    }
    ::dup2(out[1], 1);
    const char* argv[] = {interpreter.c_str(), "-c", "import sys; sys.stdout.write('\\n'.join(sys.path))", nullptr};
    ::execv(interpreter.c_str(), const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  bool over = false, late = false;
  timespec start {};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  char buf[8192];
  for (;;) {
    timespec now {};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const int64_t left_ms = int64_t{timeout_s} * 1000 - ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
    if (left_ms <= 0) {
      late = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left_ms));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      late = ready == 0;
      break;
    }
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxProbeBytes) {
      over = true;
      break;
    }
  }
  ::close(out[0]);
  if (late || over) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (late) return why = fmt::format("it did not answer within {} s", timeout_s), std::nullopt;
  if (over) return why = "its sys.path is too long", std::nullopt;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return why = WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "it cannot be run" : "it failed to print its sys.path", std::nullopt;
  std::vector<std::string> path;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (!line.empty()) path.push_back(line);  // '' (the folder of the script) differs per job: left out
  return path;
}

// The cached import path of `key`, if every folder on it is as it was when cached.
std::optional<std::vector<std::string>> cached_path(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string magic, line;
  if (!std::getline(in, magic) || magic != kCacheMagic) return std::nullopt;
  std::string stored_key;
  size_t key_lines = 0;
  if (!std::getline(in, line)) return std::nullopt;
  key_lines = std::strtoul(line.c_str(), nullptr, 10);
  for (size_t i = 0; i < key_lines && std::getline(in, line); ++i) stored_key += (i ? "\n" : "") + line;
  if (stored_key != key) return std::nullopt;
  std::vector<std::string> path;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) return std::nullopt;
    const std::string dir = line.substr(tab + 1);
    if (std::to_string(mtime_ns(dir)) != line.substr(0, tab)) return std::nullopt;  // changed: ask again
    path.push_back(dir);
  }
  return path;
}

void store_path(const std::string& file, const std::string& key, const std::vector<std::string>& path) {
  std::string text = std::string(kCacheMagic) + "\n";
  size_t key_lines = 1;
  for (char c : key) key_lines += c == '\n';
  text += fmt::format("{}\n{}\n", key_lines, key);
  for (const std::string& dir : path) text += fmt::format("{}\t{}\n", mtime_ns(dir), dir);
  const std::string tmp = file + fmt::format(".{}.tmp", static_cast<long>(::getpid()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
}

// `__version__ = "X"` (or 'X') in `text`: X, else "".
std::string version_assignment(const std::string& text) {
  size_t at = 0;
  while ((at = text.find("__version__", at)) != std::string::npos) {
    size_t i = at + 11;
    at = i;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= text.size() || text[i] != '=') continue;
    ++i;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i >= text.size() || (text[i] != '"' && text[i] != '\'')) continue;
    const char q = text[i++];
    const size_t end = text.find(q, i);
    if (end == std::string::npos || end - i > 64) continue;
    const std::string v = text.substr(i, end - i);
    if (v.find('\n') == std::string::npos) return v;
  }
  return "";
}

}  // namespace

PythonEnvironment probe_python(const std::string& python, const std::string& cache_dir, int timeout_s) {
  PythonEnvironment env;
  env.interpreter = find_interpreter(python);
  if (env.interpreter.empty()) {
    env.why_none = python.find('/') != std::string::npos ? fmt::format("{} is not an executable", python) : fmt::format("no {} on PATH", python);
    return env;
  }
  const std::string key = cache_key(env.interpreter);
  const std::string file = cache_dir.empty() ? "" : cache_dir + "/" + key_name(key) + ".txt";
  std::optional<std::vector<std::string>> path;
  if (!file.empty()) path = cached_path(file, key);
  if (!path) {
    std::string why;
    path = ask_import_path(env.interpreter, timeout_s, why);
    if (!path) {
      env.why_none = fmt::format("{}: {}", env.interpreter, why);
      return env;
    }
    if (!file.empty()) store_path(file, key, *path);
  }
  env.import_path = *path;
  // As `import torch` finds it: the first folder on the path with the package.
  struct Package {
    const char* library;
    const char* version_file;  // inside the package
  };
  for (const Package& pkg : {Package{"torch", "version.py"}, Package{"transformers", "__init__.py"}}) {
    for (const std::string& dir : env.import_path) {
      const std::string root = dir + "/" + pkg.library;
      if (mtime_ns(root + "/__init__.py") < 0) continue;
      const std::string vf = root + "/" + pkg.version_file;
      env.found.push_back({pkg.library, version_assignment(head_of(vf, kMaxVersionFileBytes)), vf});
      break;
    }
  }
  return env;
}

const PythonEnvironment& python_environment() {
  static const PythonEnvironment env = [] {
    const char* asked = std::getenv("MEMPLAN_JOB_PYTHON");
    if (asked && (!*asked || std::string(asked) == "none")) {
      PythonEnvironment off;
      off.off = true;
      off.why_none = fmt::format("MEMPLAN_JOB_PYTHON is {}: no Python asked", *asked ? "none" : "empty");
      return off;
    }
    std::string cache;
    try {
      cache = profiles::cache_dir() + "/python";
      ::mkdir(cache.c_str(), 0755);
      if (mtime_ns(cache) < 0) cache.clear();
    } catch (const std::exception&) {  // no cache folder: ask each time
      cache.clear();
    }
    return probe_python(asked ? asked : "python3", cache, kProbeSeconds);
  }();
  return env;
}

profiles::SetupInputs with_environment(const profiles::SetupInputs& in) {
  profiles::SetupInputs out = in;
  const PythonEnvironment& env = python_environment();
  if (env.off) return out;
  for (const VersionField& f : version_fields()) {
    auto& slot = out.environment[static_cast<size_t>(f.id)];
    if (!env.why_none.empty()) {
      slot = profiles::SetupInputs::EnvironmentRelease{"", env.why_none};
      continue;
    }
    const FoundRelease* hit = nullptr;
    for (const FoundRelease& r : env.found)
      if (r.library == f.library) hit = &r;
    if (!hit)
      slot = profiles::SetupInputs::EnvironmentRelease{"", fmt::format("none installed for {}", env.interpreter)};
    else if (hit->version.empty())
      slot = profiles::SetupInputs::EnvironmentRelease{"", fmt::format("{} names no __version__", hit->file)};
    else
      slot = profiles::SetupInputs::EnvironmentRelease{
          hit->version, fmt::format("installed for {}: {} says {}", env.interpreter, hit->file, hit->version)};
  }
  return out;
}

}  // namespace memplan::cli
