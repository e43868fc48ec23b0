// Child process handling for memplan watch. Signals: the handler only calls kill(2), which is
// async-signal-safe, and only for a signal another process sent (si_code <= 0: SI_USER, SI_QUEUE,
// SI_TKILL); a signal the terminal generated (si_code SI_KERNEL) went to the whole foreground
// process group, the child included.
#include "watch/child.h"

#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace memplan::watch {
namespace {

// What a job scheduler or a user sends to stop, checkpoint or re-read its config (SLURM's
// --signal=USR1@90, torchrun's and Lightning's SIGUSR1/SIGUSR2 handlers) goes on to the command.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
volatile sig_atomic_t g_child = -1;
volatile sig_atomic_t g_received = 0;
struct sigaction g_previous[sizeof kForwarded / sizeof kForwarded[0]];

void forward(int sig, siginfo_t* info, void*) {
  g_received = sig;
  if (info != nullptr && info->si_code <= 0 && g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

}  // namespace

bool Child::start(const std::vector<std::string>& argv, int* error) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child starts with default dispositions and nothing blocked, whatever memplan has.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : kForwarded) sigaddset(&defaults, s);
  sigaddset(&defaults, SIGPIPE);  // memplan ignores it (below); the command gets the default
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  g_received = 0;
  // Handlers first, so a signal that arrives just after the spawn is not lost.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = &forward;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof kForwarded / sizeof kForwarded[0]; ++i) ::sigaction(kForwarded[i], &sa, &g_previous[i]);
  // A reader of memplan's output that goes away (`memplan watch ... 2>&1 | head -1`) must not kill
  // the watcher and leave the command unwatched, its exit code and the log's end record lost: its
  // writes fail with EPIPE instead, and it goes on.
  struct sigaction ignore;
  std::memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);
  handlers_ = true;
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    restore_handlers();
    *error = rc;
    return false;
  }
  pid_ = pid;
  g_child = pid;
  return true;
}

bool Child::poll(ChildExit* exit) {
  if (pid_ <= 0) return true;
  int status = 0;
  rusage ru{};
  const pid_t r = ::wait4(pid_, &status, WNOHANG, &ru);
  if (r == 0 || (r < 0 && errno == EINTR)) return false;
  if (r < 0) {  // not our child any more (ECHILD): report what we can
    exit->exit_code = 128;
  } else if (WIFEXITED(status)) {
    exit->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit->signal = WTERMSIG(status);
    exit->exit_code = 128 + exit->signal;
  }
  exit->max_rss_bytes = static_cast<int64_t>(ru.ru_maxrss) * 1024;  // kilobytes on Linux
  pid_ = -1;
  g_child = -1;
  restore_handlers();
  return true;
}

int Child::received_signal() { return g_received; }

void Child::restore_handlers() {
  if (!handlers_) return;
  for (size_t i = 0; i < sizeof kForwarded / sizeof kForwarded[0]; ++i) ::sigaction(kForwarded[i], &g_previous[i], nullptr);
  // SIGPIPE stays ignored: what memplan writes after the command ended (its summary) fails
  // quietly too, and the exit code is the command's.
  handlers_ = false;
}

Child::~Child() {
  // Only reached with a child still running when memplan itself fails: do not leave it orphaned
  // without a word; it keeps running, as it would under a shell.
  restore_handlers();
  g_child = -1;
}

std::string error_text(int error) { return std::strerror(error); }

}  // namespace memplan::watch
