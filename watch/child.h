// The training command memplan watch runs: started with posix_spawnp (PATH lookup, the caller's
// standard streams, environment and process group), waited for without blocking, and sent the
// signals memplan receives from another process (kill). A terminal's Ctrl-C already reaches the
// child, which shares memplan's process group, so it is not sent twice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memplan::watch {

struct ChildExit {
  int exit_code = 0;          // the process's exit status, or 128 + signal when a signal ended it
  int signal = 0;             // the signal that ended it (0: it exited)
  int64_t max_rss_bytes = 0;  // the kernel's peak RSS of the largest process waited for (ru_maxrss)
};

class Child {
 public:
  // Starts argv[0] (looked up in PATH) with argv. Returns false with errno's value in *error when
  // it cannot start (ENOENT: no such command, EACCES: not executable, ...). While a child runs,
  // SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to memplan by a process are passed on to it.
  bool start(const std::vector<std::string>& argv, int* error);
  // True once the child has ended (filling *exit); false while it runs. Never blocks.
  bool poll(ChildExit* exit);
  int pid() const { return pid_; }
  // The signal memplan received while the child ran (0: none).
  static int received_signal();
  ~Child();

 private:
  int pid_ = -1;
  bool handlers_ = false;
  void restore_handlers();
};

// "No such file or directory" and so on.
std::string error_text(int error);

}  // namespace memplan::watch
