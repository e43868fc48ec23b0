// memplan measure|calibrate in the memplan executable: they run in the companion program
// memplan-measure, the only one linked with LibTorch, found as git finds its sub-commands. The
// process replaces itself with the companion (exit code, signals and terminal stay the
// companion's); with captured streams (tests, embedders) it runs it as a child and copies its
// output. Without a companion, the command says how to build one (exit 2).
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/cli.h"
#include "cli/commands.h"

extern char** environ;

namespace memplan::cli {
namespace fs = std::filesystem;
namespace {

constexpr const char* kCompanion = "memplan-measure";

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Runs `args` as a child with its stdout and stderr read through pipes into out and err.
int run_captured(const std::string& exe, const std::vector<char*>& args, std::ostream& out, std::ostream& err) {
  int pout[2], perr[2];
  if (::pipe2(pout, O_CLOEXEC) != 0) return -1;
  if (::pipe2(perr, O_CLOEXEC) != 0) {
    ::close(pout[0]);
    ::close(pout[1]);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
  posix_spawn_file_actions_adddup2(&fa, perr[1], 2);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pout[1]);
  ::close(perr[1]);
  if (rc != 0) {
    ::close(pout[0]);
    ::close(perr[0]);
    errno = rc;
    return -1;
  }
  pollfd fds[2] = {{pout[0], POLLIN, 0}, {perr[0], POLLIN, 0}};
  std::ostream* sinks[2] = {&out, &err};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->write(buf, n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      ::close(fds[i].fd);
      fds[i].fd = -1;
      --open;
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int forward(const char* command, int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  const std::string exe = find_companion();
  if (exe.empty()) {
    err << fmt::format("error: memplan {} runs real LibTorch steps in the companion program {}, which this memplan does not have\n",
                       command, kCompanion);
    err << "hint: build memplan with LibTorch: ./dev.sh test installs libtorch-dev and builds it, or apt-get install "
           "libtorch-dev libopenblas0-pthread and cmake -S . -B build -DMEMPLAN_WITH_TORCH=ON; "
           "MEMPLAN_EXEC_PATH names a folder holding memplan-measure\n";
    return kExitInvalid;
  }
  std::vector<char*> args = {const_cast<char*>(exe.c_str())};
  for (int i = 1; i < argc; ++i) args.push_back(const_cast<char*>(argv[i]));
  args.push_back(nullptr);
  out.flush();
  err.flush();
  if (&out == &std::cout && &err == &std::cerr) {
    ::execv(exe.c_str(), args.data());
  } else {
    const int code = run_captured(exe, args, out, err);
    if (code >= 0) return code;
  }
  err << fmt::format("error: cannot run {}: {}\n", exe, std::strerror(errno));
  err << fmt::format("hint: check that {} is an executable memplan-measure from the same build as this memplan\n", exe);
  return kExitInvalid;
}

Command forwarded(CLI::App& root, Io io, const char* name, const char* description) {
  auto* app = root.add_subcommand(name, description);
  app->allow_extras();
  return {app, [] { return kExitInvalid; },
          [io, name](int argc, const char* const* argv) { return forward(name, argc, argv, io.out, io.err); }};
}

}  // namespace

std::string find_companion() {
  if (const char* dir = std::getenv("MEMPLAN_EXEC_PATH"); dir && *dir) {
    const fs::path p = fs::path(dir) / kCompanion;
    return executable(p) ? p.string() : "";
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& p : {self.parent_path() / kCompanion, self.parent_path() / ".." / MEMPLAN_INSTALL_LIBEXEC_DIR / kCompanion})
    if (executable(p)) return p.lexically_normal().string();
  return "";
}

Command register_measure_forward(CLI::App& root, Io io) {
  return forwarded(root, io, "measure",
                   "run real LibTorch training steps and compare measured peaks with the estimate (memplan-measure)");
}

Command register_calibrate_forward(CLI::App& root, Io io) {
  return forwarded(root, io, "calibrate", "measure a probe series on a device (or re-fit saved measurements, --from) and fit what the estimate cannot know there (memplan-measure)");
}

}  // namespace memplan::cli
