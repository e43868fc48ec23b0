// memplan watch: runs a training command and samples the memory it uses while it runs (each GPU
// through NVML or ROCm SMI, loaded at run time; the process tree's RSS without a GPU), prints a
// live line per interval, the peak against memplan's estimate when setup flags are given, and
// exits with the command's exit code. --replay reads back a memplan.monitor/v1 log (this
// command's --log, or the Python monitor's).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/run_trace.h"
#include "cli/python_env.h"
#include "profiles/files.h"
#include "watch/child.h"
#include "watch/monitor_log.h"
#include "watch/sampler.h"

namespace memplan::cli {
namespace {

// Exit codes for a command that cannot start, as shells, env(1) and timeout(1) use them.
constexpr int kExitCannotRun = 126;
constexpr int kExitNotFound = 127;
// Peaks are sampled at least this often, whatever the printing interval.
constexpr double kPeakSampleSeconds = 0.25;

struct WatchFlags {
  double interval = 2.0;
  std::string log;
  std::string html;
  bool quiet = false;  // no live lines: the start and the summary only
  bool force = false;
  std::string source = "auto";
  std::string replay;
  std::vector<std::string> command;
};

double fraction(int64_t used, int64_t total) { return total > 0 ? static_cast<double>(used) / static_cast<double>(total) : 0.0; }

// "18.5/24.0 GiB (77%)", or "212.4 MiB/23.5 GiB (1%)" below 1 GiB.
std::string gb_pair(int64_t used, int64_t total) {
  const double g = static_cast<double>(1 << 30);
  if (used >= (1 << 30) || used == 0)
    return fmt::format("{:.1f}/{:.1f} GiB ({:.0f}%)", used / g, total / g, 100 * fraction(used, total));
  return fmt::format("{:.1f} MiB/{:.1f} GiB ({:.0f}%)", used / static_cast<double>(1 << 20), total / g, 100 * fraction(used, total));
}

// The device whose utilization is highest: the one that runs out first.
const watch::DeviceReading& fullest(const std::vector<watch::DeviceReading>& r) {
  size_t best = 0;
  for (size_t i = 1; i < r.size(); ++i)
    if (fraction(r[i].used_bytes, r[i].total_bytes) > fraction(r[best].used_bytes, r[best].total_bytes)) best = i;
  return r[best];
}

// "[12.3s] Memory: 18.5/24.0 GiB (77%), Status: normal"; one figure per GPU when there are several.
std::string live_line(double t, const std::vector<watch::DeviceReading>& r, const Thresholds& th) {
  const auto& top = fullest(r);
  std::string memory;
  if (r.size() == 1) {
    memory = gb_pair(top.used_bytes, top.total_bytes);
  } else {
    for (const auto& d : r) memory += fmt::format("{}GPU{} {}", memory.empty() ? "" : ", ", d.index, gb_pair(d.used_bytes, d.total_bytes));
  }
  return fmt::format("[{:.1f}s] Memory: {}, Status: {}", t, memory, to_string(band_of(fraction(top.used_bytes, top.total_bytes), th)));
}

nlohmann::json devices_json(const std::vector<watch::DeviceReading>& r) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& d : r) a.push_back({{"index", d.index}, {"name", d.name}, {"used_bytes", d.used_bytes}, {"total_bytes", d.total_bytes}});
  return a;
}

// The memplan.monitor/v1 lines of the run: to --log as they come, and folded into the run's
// trace for --html (its memory bounded: RunTraceBuilder), never kept whole.
class Log {
 public:
  Log(const std::string& path, bool force, std::vector<std::pair<std::string, std::string>> inputs, bool keep) : keep_(keep) {
    if (path.empty()) return;
    profiles::check_can_write(path, {force, Where::at_flag("--log"), "the log", std::move(inputs)});
    // The log is written as the run goes, so not through a temporary file: a symbolic link there
    // (allowed with --force) is replaced by the log itself, never followed (truncating its target,
    // or blocking on a FIFO it names); what is opened must be a regular file.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && ::unlink(path.c_str()) != 0)
      throw InputError(Where::at_flag("--log"), fmt::format("cannot replace the link '{}': {}", path, std::strerror(errno)),
                       "check the folder is writable");
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd_ < 0) throw InputError(Where::at_flag("--log"), fmt::format("cannot write '{}': {}", path, std::strerror(errno)), "check the folder exists and is writable");
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      fd_ = -1;
      throw InputError(Where::at_flag("--log"), fmt::format("will not write the log '{}': it is not a regular file", path), "choose another path");
    }
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  }
  ~Log() {
    if (fd_ >= 0) ::close(fd_);
  }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;
  void write(nlohmann::json record) {
    if (fd_ < 0 && !keep_) return;
    nlohmann::json line = {{"schema", watch::kMonitorSchema}};
    line.update(record);
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";  // invalid UTF-8 (an argv byte) as U+FFFD
    if (keep_) {
      ++lines_;
      if (std::optional<watch::LogRecord> rec = watch::parse_monitor_line(text.substr(0, text.size() - 1), "(this run)", lines_))
        trace_.add(*rec);
    }
    if (fd_ < 0) return;
    for (size_t done = 0; done < text.size();) {  // whole lines, as they come
      const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // a full disk: the run goes on, the log stops
      done += static_cast<size_t>(n);
    }
  }
  // The run's trace, once (for --html).
  report::RunTrace trace(const MemoryBreakdown* estimate) { return trace_.finish(estimate); }

 private:
  int fd_ = -1;
  bool keep_ = false;
  int lines_ = 0;
  RunTraceBuilder trace_;
};

std::unique_ptr<watch::Sampler> open_gpu_sampler(const std::string& source, std::string* notes) {
  std::string why;
  if (source == "nvml" || source == "auto") {
    if (auto s = watch::open_nvml(&why)) return s;
    if (source == "nvml")
      throw InputError(Where::at_flag("--source"), fmt::format("NVML is not available: {}", why),
                       "NVML (libnvidia-ml.so.1) comes with the NVIDIA driver; on a machine without one use --source process");
    *notes += fmt::format("NVML: {}\n", why);
  }
  if (source == "rocm-smi" || source == "auto") {
    if (auto s = watch::open_rocm_smi(&why)) return s;
    if (source == "rocm-smi")
      throw InputError(Where::at_flag("--source"), fmt::format("ROCm SMI is not available: {}", why),
                       "ROCm SMI (librocm_smi64.so.1) comes with ROCm; on a machine without one use --source process");
    *notes += fmt::format("ROCm SMI: {}\n", why);
  }
  return nullptr;
}

int replay(Io io, const std::string& path, const WatchFlags& f, const profiles::SetupInputs& in) {
  // --html: the replayed run's report, refused before reading when it cannot be written.
  std::optional<profiles::WriteOptions> html;
  if (!f.html.empty()) {
    auto inputs = profiles::input_files(in);
    inputs.emplace_back(path, "--replay");
    html = profiles::WriteOptions{f.force, Where::at_flag("--html"), "the run's report", inputs};
    profiles::check_can_write(f.html, *html);
  }
  // Read twice, a line at a time (a day-long log is never held whole): checked whole first, so that
  // a bad line is an error before anything is printed, then printed, those same lines only (a log
  // still being written may have grown since).
  const int lines = for_each_monitor_record(path, Where{}, [](const watch::LogRecord&) {});
  Thresholds th;
  RunTraceBuilder trace;
  using Kind = watch::LogRecord::Kind;
  for_each_monitor_record(path, Where{}, [&](const watch::LogRecord& r) {
    if (html) trace.add(r);
    switch (r.kind) {
      case Kind::start: {
        th = r.thresholds;
        const std::string what = r.source == "watch" && !r.command.empty()
                                     ? fmt::format("'{}'", fmt::join(r.command, " "))
                                     : fmt::format("monitor on {}", r.device.empty() ? "?" : r.device);
        const std::string by = !r.reader.empty() ? r.reader : !r.sampler.empty() ? r.sampler : "?";
        io.out << fmt::format("memplan watch --replay {}: {} ({})\n", path, what, by);
        break;
      }
      case Kind::sample: {
        std::vector<watch::DeviceReading> devices;
        for (const watch::LogDevice& d : r.devices)
          devices.push_back({static_cast<int>(d.index), d.name, d.used_bytes, d.total_bytes});
        if (!devices.empty()) io.out << live_line(r.t, devices, th) << "\n";
        break;
      }
      case Kind::step: {
        if (!r.error.empty()) {
          io.out << fmt::format("[step {}] memory reading failed: {}\n", r.step, r.error);
          break;
        }
        std::string line = fmt::format("[step {}] Memory: {}, Status: {}", r.step, gb_pair(r.peak_used_bytes, r.capacity_bytes),
                                       r.band.empty() ? "?" : r.band);
        for (const std::string& ev : r.events) {
          if (ev == "leak" && r.leak_rate_bytes_per_step)
            line += fmt::format(", leak: +{:.1f} MiB/step since step {}", *r.leak_rate_bytes_per_step / (1 << 20), r.leak_since_step);
          else if (ev == "departure" && r.departure_error)
            line += fmt::format(", {:+.1f}% against the estimate (likely {})", 100 * *r.departure_error,
                                r.departure_term.empty() ? "?" : r.departure_term);
          else if (ev == "recommendation" && !r.recommendation_flags.empty())
            line += fmt::format("; memplan fit: {}", r.recommendation_flags);
        }
        io.out << line << "\n";
        break;
      }
      case Kind::end:
        if (r.exit_code)
          io.out << fmt::format("ended with exit code {} after {:.1f} s; peak {}\n", *r.exit_code, r.t,
                                gb_pair(r.peak_bytes, r.capacity_bytes));
        else
          io.out << fmt::format("ended after {} steps; worst band {}\n", r.steps, r.worst_band.empty() ? "?" : r.worst_band);
        break;
    }
  }, lines);
  if (html) {
    const auto e = estimate_of_flags(io.err, in);
    profiles::write_file_atomically(f.html, report::run_html(trace.finish(e ? &e->breakdown : nullptr)), *html);
    io.out << fmt::format("wrote {} (the run's memory over time)\n", f.html);
  }
  return kExitOk;
}

int run_watch(Io io, const profiles::SetupInputs& in, const WatchFlags& f) {
  if (!f.replay.empty()) {
    if (!f.command.empty())
      throw InputError(Where::at_flag("--replay"), "--replay reads a log; it runs no command",
                       "drop the command, or drop --replay to run it");
    return replay(io, f.replay, f, in);
  }
  if (f.command.empty())
    throw InputError(Where{}, "memplan watch needs the training command to run",
                     "memplan watch [--interval S] [--log FILE] [setup flags] -- python train.py ...");
  if (!(f.interval > 0 && f.interval <= 3600))
    throw InputError(Where::at_flag("--interval"), fmt::format("must be between 0 and 3600 seconds (got {})", f.interval),
                     "--interval 2 prints a line every 2 seconds");
  if (f.source != "auto" && f.source != "nvml" && f.source != "rocm-smi" && f.source != "process")
    throw InputError(Where::at_flag("--source"), fmt::format("unknown source '{}'", f.source), "auto, nvml, rocm-smi or process");

  // The estimate to compare with, before anything runs: bad setup flags stop here (exit 2).
  std::optional<int64_t> estimate_peak;
  std::optional<MemoryBreakdown> estimated;
  Thresholds th;
  if (auto e = estimate_of_flags(io.err, in)) {
    estimated = std::move(e->breakdown);
    estimate_peak = estimated->peak_bytes();
    th = e->thresholds;
  }
  // --html: refused before anything runs when it cannot be written (or would replace --log or an input).
  std::optional<profiles::WriteOptions> html;
  if (!f.html.empty()) {
    auto inputs = profiles::input_files(in);
    if (!f.log.empty()) inputs.emplace_back(f.log, "--log");
    html = profiles::WriteOptions{f.force, Where::at_flag("--html"), "the run's report", inputs};
    profiles::check_can_write(f.html, *html);
  }
  Log log(f.log, f.force, profiles::input_files(in), html.has_value());
  std::string notes;
  std::unique_ptr<watch::Sampler> sampler = f.source == "process" ? nullptr : open_gpu_sampler(f.source, &notes);

  watch::Child child;
  int error = 0;
  io.out.flush();
  io.err.flush();
  if (!child.start(f.command, &error)) {
    const int code = error == ENOENT ? kExitNotFound : kExitCannotRun;
    io.err << fmt::format("error: cannot run '{}': {}\n", f.command[0], watch::error_text(error));
    io.err << (error == ENOENT ? "hint: check the command's name and PATH (memplan watch -- python3 train.py)\n"
                               : "hint: check that the command is an executable file\n");
    log.write({{"kind", "end"}, {"t", 0.0}, {"exit_code", code}, {"error", watch::error_text(error)}});
    return code;
  }
  if (!sampler) sampler = watch::open_process_tree(child.pid());
  const std::string source = sampler->source();
  io.err << fmt::format("memplan watch: pid {}, sampling {} every {:.2f} s{}\n", child.pid(),
                        source == "process" ? "the process tree's RSS" : source, std::min(kPeakSampleSeconds, f.interval),
                        estimate_peak ? fmt::format(", estimate {}", gib(*estimate_peak)) : "");
  io.err << "  measuring " << sampler->measures() << "\n";
  if (source == "process" && !notes.empty()) {
    std::istringstream lines(notes);
    for (std::string line; std::getline(lines, line);) io.err << "  no GPU sampler: " << line << "\n";
  }
  log.write({{"kind", "start"}, {"source", "watch"}, {"sampler", source}, {"measures", sampler->measures()}, {"time", std::time(nullptr)}, {"command", f.command},
             {"pid", child.pid()}, {"interval", f.interval},
             {"thresholds", {{"target", th.target}, {"warning", th.warning}, {"critical", th.critical}, {"emergency", th.emergency}}},
             {"estimate", estimate_peak ? nlohmann::json{{"peak_bytes", *estimate_peak}} : nlohmann::json(nullptr)}});

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const double step = std::min(kPeakSampleSeconds, f.interval);
  double next_sample = 0, next_print = f.interval;
  watch::DeviceReading peak;
  double peak_t = 0;
  Band worst = Band::normal;
  watch::ChildExit ended;
  // Sample before asking whether the child ended, so that even a command that exits at once has one reading
  // (and a GPU name) behind its peak line.
  for (;;) {
    const double t = seconds();
    if (t >= next_sample) {
      next_sample = t + step;
      std::vector<watch::DeviceReading> r;
      try {
        r = sampler->read();
      } catch (const std::exception& e) {
        io.err << fmt::format("memplan watch: {} failed ({}); sampling the process tree from now on\n", source, e.what());
        sampler = watch::open_process_tree(child.pid());
        r = sampler->read();
      }
      const auto& top = fullest(r);
      const Band band = band_of(fraction(top.used_bytes, top.total_bytes), th);
      if (top.used_bytes > peak.used_bytes) {
        peak = top;
        peak_t = t;
      }
      const bool worse = band > worst;
      if (worse) worst = band;
      nlohmann::json rec = {{"kind", "sample"}, {"t", t}, {"devices", devices_json(r)}, {"used_bytes", top.used_bytes},
                            {"capacity_bytes", top.total_bytes}, {"utilization", fraction(top.used_bytes, top.total_bytes)},
                            {"band", to_string(band)}};
      log.write(rec);
      if (!f.quiet && (t >= next_print || worse)) {
        io.err << live_line(t, r, th) << "\n";
        io.err.flush();
        if (t >= next_print) next_print = t + f.interval;
      }
    }
    if (child.poll(&ended)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double t = seconds();
  // The kernel's peak RSS of the largest process catches what sampling between intervals missed.
  if (source == "process" && ended.max_rss_bytes > peak.used_bytes) {
    peak.used_bytes = ended.max_rss_bytes;
    peak.total_bytes = peak.total_bytes ? peak.total_bytes : watch::host_capacity_bytes();
    peak.name = "process tree";
    peak_t = -1;
  }
  if (peak.total_bytes == 0) peak.total_bytes = source == "process" ? watch::host_capacity_bytes() : 0;
  const std::string cmd = fmt::format("{}", fmt::join(f.command, " "));
  if (ended.signal)
    io.err << fmt::format("memplan watch: '{}' was ended by signal {} ({}) after {:.1f} s; exit code {}\n", cmd, ended.signal,
                          strsignal(ended.signal), t, ended.exit_code);
  else
    io.err << fmt::format("memplan watch: '{}' exited with {} after {:.1f} s\n", cmd, ended.exit_code, t);
  const std::string band = to_string(band_of(fraction(peak.used_bytes, peak.total_bytes), th));
  io.err << fmt::format("  peak: {} of {} ({:.1f}%, {}) on {}{}\n", gib(peak.used_bytes), gib(peak.total_bytes),
                        100 * fraction(peak.used_bytes, peak.total_bytes), band,
                        source == "process" ? "the process tree (RSS)" : fmt::format("GPU{} {}", peak.index, peak.name),
                        peak_t >= 0 ? fmt::format(" at {:.1f} s", peak_t) : " (the kernel's peak RSS of its largest process)");
  if (estimate_peak) {
    const double err = fraction(peak.used_bytes - *estimate_peak, *estimate_peak);
    io.err << fmt::format("  estimate: {} (memplan estimate with the same flags); measured peak {:+.1f}% against it{}\n",
                          gib(*estimate_peak), 100 * err,
                          source == "process" ? " (RSS also holds the interpreter and libraries; the estimate counts tensors)"
                                              : " (device-wide: every process on the GPU, and the CUDA context)");
  }
  log.write({{"kind", "end"}, {"t", t}, {"exit_code", ended.exit_code}, {"signal", ended.signal}, {"peak_bytes", peak.used_bytes},
             {"capacity_bytes", peak.total_bytes}, {"peak_t", peak_t >= 0 ? nlohmann::json(peak_t) : nlohmann::json(nullptr)},
             {"band", band}, {"worst_band", to_string(worst)}, {"max_rss_bytes", ended.max_rss_bytes},
             {"estimate_peak_bytes", estimate_peak ? nlohmann::json(*estimate_peak) : nlohmann::json(nullptr)}});
  if (html) {
    const report::RunTrace r = log.trace(estimated ? &*estimated : nullptr);
    profiles::write_file_atomically(f.html, report::run_html(r), *html);
    io.err << fmt::format("  wrote {} (the run's memory over time)\n", f.html);
  }
  return ended.exit_code;
}

}  // namespace

Command register_watch(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("watch", "run a training command and watch its memory live (GPUs through NVML/ROCm SMI, else the process tree)");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto f = std::make_shared<WatchFlags>();
  add_setup_flags(*app, *in);
  app->add_option("--interval", f->interval, "seconds between printed lines (default 2; peaks are sampled every 0.25 s)")->type_name("S");
  app->add_option("--log", f->log, "write memplan.monitor/v1 JSON lines to FILE")->type_name("FILE");
  app->add_option("--html", f->html, "when the command ends (or from the --replay log), write the run's memory over time as a self-contained HTML file")
      ->type_name("FILE");
  app->add_flag("--force", f->force, "let --log and --html replace an existing file");
  app->add_flag("--quiet", f->quiet, "no live lines while the command runs: what is watched, then the summary");
  app->add_option("--source", f->source, "auto (NVML, then ROCm SMI, else the process tree), nvml, rocm-smi or process")->type_name("WHAT");
  app->add_option("--replay", f->replay, "print a memplan.monitor/v1 log (this command's --log or memplan.Monitor's) and exit")->type_name("FILE");
  app->add_option("command", f->command, "the training command and its arguments, after --")->type_name("-- COMMAND ARGS...");
  return {app, [io, in, f] { return run_watch(io, with_environment(*in), *f); }};
}

}  // namespace memplan::cli
