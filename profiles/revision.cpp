// Reading a file as it was at a git revision, by running git without a shell (revision.h
// contract in profiles.h: read_at_revision).
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <filesystem>

#include "profiles/profiles.h"
#include "profiles/reader.h"

namespace memplan::profiles {
namespace fs = std::filesystem;
namespace {

struct GitResult {
  int status = -1;  // exit status; -1 when git could not be started
  std::string out;
  std::string err;
  bool out_over = false;  // stdout went past its limit: git was stopped
};

// git's stderr is a message or two; its stdout is a file's text, held to the config size limit.
constexpr size_t kMaxGitErrBytes = 64 * 1024;

// Reads both pipes as they fill (poll: a child writing much to one while the other is read to the
// end would block both), stdout up to `max_out` bytes (one more, to know it was over) and stderr
// up to kMaxGitErrBytes; past either the child is killed rather than read to its end.
void read_pipes(int out_fd, int err_fd, size_t max_out, pid_t pid, GitResult& r) {
  struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const int ready = poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& dst = i == 0 ? r.out : r.err;
      const size_t cap = i == 0 ? max_out + 1 : kMaxGitErrBytes;
      dst.append(buf, std::min(static_cast<size_t>(n), cap - std::min(cap, dst.size())));
      if (i == 0 && r.out.size() > max_out) {
        r.out_over = true;
        kill(pid, SIGKILL);
        return;
      }
    }
  }
}

// Runs `git -C dir args...` without a shell, its stdout held to `max_out` bytes.
GitResult git(const std::string& dir, const std::vector<std::string>& args, size_t max_out = 1 << 20) {
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
  if (pid > 0) read_pipes(out[0], err[0], max_out, pid, r);
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
  const int64_t limit = detail::read_limits().max_file_bytes;
  GitResult shown = git(dir, {"show", spec}, static_cast<size_t>(limit));
  if (shown.out_over)
    throw InputError(Where::at_file(path),
                     fmt::format("at {} this file is over the {} bytes memplan reads of a config", ref, limit),
                     "a config is a few KiB; MEMPLAN_MAX_FILE_SIZE raises the limit");
  if (shown.status != 0) {
    r.note = fmt::format("cannot read it at {}: {}", ref, trim(shown.err));
    return r;
  }
  r.text = std::move(shown.out);
  return r;
}

}  // namespace memplan::profiles
