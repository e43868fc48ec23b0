// Reading a file as it was at a git revision, by running git without a shell (revision.h
// contract in profiles.h: read_at_revision).
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <filesystem>

#include "profiles/profiles.h"

namespace memplan::profiles {
namespace fs = std::filesystem;
namespace {

struct GitResult {
  int status = -1;  // exit status; -1 when git could not be started
  std::string out;
  std::string err;
};

std::string read_all(int fd) {
  std::string s;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    s.append(buf, static_cast<size_t>(n));
  }
  return s;
}

// Runs `git -C dir args...` without a shell. git's stderr is small (one message), so reading
// stdout to the end first cannot block on it.
GitResult git(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> words = {"git", "-C", dir};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int out[2], err[2];
  if (pipe(out) != 0) return {};
  if (pipe(err) != 0) {
    close(out[0]);
    close(out[1]);
    return {};
  }
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    execvp("git", argv.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  GitResult r;
  if (pid > 0) {
    r.out = read_all(out[0]);
    r.err = read_all(err[0]);
  }
  close(out[0]);
  close(err[0]);
  if (pid < 0) return r;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (r.status == 127) r.status = -1;
  return r;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

}  // namespace

Revision read_at_revision(const std::string& path, const std::string& ref) {
  Revision r;
  const fs::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const std::string name = p.filename().string();
  const GitResult prefix = git(dir, {"rev-parse", "--show-prefix"});
  if (prefix.status < 0)
    throw InputError(Where::at_flag("--base-ref"), "cannot run git", "install git, or compare with --baseline FILE");
  if (prefix.status != 0)
    throw InputError(Where::at_file(path), fmt::format("--base-ref needs a git repository: {}", trim(prefix.err)),
                     "run it inside the repository's work tree, or compare with --baseline FILE");
  r.shown_as = fmt::format("{}:{}{}", ref, trim(prefix.out), name);
  if (git(dir, {"rev-parse", "--verify", "--quiet", ref + "^{commit}"}).status != 0)
    throw InputError(Where::at_flag("--base-ref"), fmt::format("unknown revision '{}'", ref),
                     "name a branch, tag or commit; in GitHub Actions check out with fetch-depth: 0 so that "
                     "origin/<base branch> exists");
  const std::string spec = ref + ":./" + name;
  if (git(dir, {"cat-file", "-e", spec}).status != 0) {
    r.note = fmt::format("new file: not in {}, no baseline", ref);
    return r;
  }
  GitResult shown = git(dir, {"show", spec});
  if (shown.status != 0) {
    r.note = fmt::format("cannot read it at {}: {}", ref, trim(shown.err));
    return r;
  }
  r.text = std::move(shown.out);
  return r;
}

}  // namespace memplan::profiles
