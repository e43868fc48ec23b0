// memplan watch through cli::run: a real python3 child that allocates memory and exits with a
// code, a child killed by a signal, a signal sent to memplan passed on to the child, commands that
// cannot start, the log and its replay, bad flags, and the GPU samplers (NVML, ROCm SMI) loaded
// with dlopen from fake_gpu_smi, a stand-in library built beside this test.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Run {
  int code = -1;
  std::string out, err;
};

Run watch(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"memplan", "watch"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Run r;
  r.code = memplan::cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// A folder of this test's own, removed when the suite ends.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("memplan-watch-test-" + std::to_string(::getpid()));
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
} g_temp;

// A fresh path in that folder.
std::string temp_path(const std::string& name) {
  const fs::path dir = g_temp.path;
  fs::create_directories(dir);
  const fs::path p = dir / name;
  fs::remove(p);
  return p.string();
}

std::vector<json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> v;
  for (std::string line; std::getline(in, line);) v.push_back(json::parse(line));
  return v;
}

// Holds 300 MiB of touched memory for a second, then exits with 3.
const std::string kAllocate = "import time; b = b'x' * (300 * 2**20); time.sleep(1.0); raise SystemExit(3)";
constexpr int64_t kMiB = 1 << 20;

struct EnvVar {
  EnvVar(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~EnvVar() { ::unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST_CASE("watch runs a real child, samples its process tree and exits with its code") {
  const std::string log = temp_path("alloc.jsonl");
  const Run r = watch({"--source", "process", "--interval", "0.3", "--log", log, "--", MEMPLAN_TEST_PYTHON, "-c", kAllocate});
  CHECK(r.code == 3);
  CHECK(r.err.find("exited with 3 after") != std::string::npos);
  CHECK(r.err.find("] Memory: ") != std::string::npos);  // the live line, "[0.3s] Memory: 0.3/23.5 GiB (1%), Status: normal"
  CHECK(r.err.find("Status: normal") != std::string::npos);
  const auto records = read_lines(log);
  REQUIRE(records.size() >= 3);
  CHECK(records.front()["kind"] == "start");
  CHECK(records.front()["schema"] == "memplan.monitor/v1");
  CHECK(records.front()["command"][0] == MEMPLAN_TEST_PYTHON);
  CHECK(records[1]["kind"] == "sample");
  const json& end = records.back();
  CHECK(end["kind"] == "end");
  CHECK(end["exit_code"] == 3);
  // The child held 300 MiB of touched bytes: the peak (sampled RSS or the kernel's ru_maxrss) sees them.
  CHECK(end["peak_bytes"].get<int64_t>() >= 300 * kMiB);
  CHECK(end["max_rss_bytes"].get<int64_t>() >= 300 * kMiB);
  CHECK(end["peak_bytes"].get<int64_t>() < 2048 * kMiB);

  SUBCASE("the log reads back") {
    const Run replay = watch({"--replay", log});
    CHECK(replay.code == 0);
    CHECK(replay.out.find("memplan watch --replay") != std::string::npos);
    CHECK(replay.out.find("] Memory: ") != std::string::npos);
    CHECK(replay.out.find("ended with exit code 3") != std::string::npos);
  }
  SUBCASE("an existing log is not replaced without --force") {
    const Run again = watch({"--log", log, "--", "true"});
    CHECK(again.code == 2);
    CHECK(again.err.find("error: --log:") == 0);
    CHECK(watch({"--source", "process", "--log", log, "--force", "--", "true"}).code == 0);
  }
}

TEST_CASE("watch --html: the run's memory over time as a report when the command ends") {
  const std::string html = temp_path("run.html");
  const std::string log = temp_path("run-html.jsonl");
  fs::remove(html);
  fs::remove(log);
  const Run r = watch({"--source", "process", "--interval", "0.3", "--log", log, "--html", html, "--model", "gpt2", "--seq-len", "128",
                       "--device", "cpu", "--", MEMPLAN_TEST_PYTHON, "-c", kAllocate});
  CHECK(r.code == 3);
  CHECK(r.err.find("wrote " + html + " (the run's memory over time)") != std::string::npos);
  std::ifstream in(html);
  std::stringstream text;
  text << in.rdbuf();
  const std::string h = text.str();
  CHECK(h.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(h.find("process tree: peak ") != std::string::npos);
  CHECK(h.find("estimate: optimizer_step (peak): ") != std::string::npos);  // the setup flags' estimate, phase by phase
  CHECK(h.find(">exit 3<") != std::string::npos);
  CHECK(h.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  // The same report from the log it wrote.
  const std::string again = temp_path("run-again.html");
  fs::remove(again);
  std::vector<const char*> argv = {"memplan", "report", "--monitor-log", log.c_str(), "--model", "gpt2", "--seq-len", "128", "--device",
                                   "cpu", "--out", again.c_str()};
  std::ostringstream out, err;
  CHECK(memplan::cli::run(static_cast<int>(argv.size()), argv.data(), out, err) == 0);
  std::ifstream in2(again);
  std::stringstream text2;
  text2 << in2.rdbuf();
  CHECK(text2.str().find("process tree: peak ") != std::string::npos);
  // And from watch --replay.
  const std::string replayed = temp_path("run-replayed.html");
  fs::remove(replayed);
  const Run rp = watch({"--replay", log, "--html", replayed});
  CHECK(rp.code == 0);
  CHECK(rp.out.find("wrote " + replayed) != std::string::npos);
  CHECK(fs::exists(replayed));
  // An --html that cannot be written stops watch before the command runs.
  const std::string marker = temp_path("ran-html");
  fs::remove(marker);
  const Run refused = watch({"--source", "process", "--html", html, "--", "touch", marker});
  CHECK(refused.code == 2);
  CHECK(refused.err.find("error: --html:") == 0);
  CHECK(!fs::exists(marker));
}

TEST_CASE("watch --quiet: no live lines, the start and the summary still") {
  const Run r = watch({"--source", "process", "--interval", "0.2", "--quiet", "--", MEMPLAN_TEST_PYTHON, "-c", kAllocate});
  CHECK(r.code == 3);
  CHECK(r.err.find("] Memory: ") == std::string::npos);
  CHECK(r.err.find("memplan watch: pid ") != std::string::npos);
  CHECK(r.err.find("exited with 3 after") != std::string::npos);
  CHECK(r.err.find("  peak: ") != std::string::npos);
}

TEST_CASE("watch compares the peak with the estimate of the setup flags") {
  const Run r = watch({"--source", "process", "--model", "gpt2", "--micro-batch", "1", "--seq-len", "128", "--device", "cpu",
                       "--", MEMPLAN_TEST_PYTHON, "-c", kAllocate});
  CHECK(r.code == 3);
  CHECK(r.err.find("estimate: ") != std::string::npos);
  CHECK(r.err.find("measured peak ") != std::string::npos);
  SUBCASE("bad setup flags stop before anything runs") {
    const std::string marker = temp_path("ran");
    const Run bad = watch({"--model", "gpt2", "--micro-batch", "0", "--", "touch", marker});
    CHECK(bad.code == 2);
    CHECK(bad.err.find("error: --micro-batch: must be at least 1") == 0);
    CHECK(!fs::exists(marker));
  }
}

TEST_CASE("watch: a child ended by a signal, and a signal sent to memplan") {
  const Run killed = watch({"--source", "process", "--", MEMPLAN_TEST_PYTHON, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"});
  CHECK(killed.code == 128 + SIGKILL);
  CHECK(killed.err.find("was ended by signal 9") != std::string::npos);

  // SIGTERM from another process to memplan reaches the child (which would otherwise sleep 30 s).
  std::thread sender([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ::kill(::getpid(), SIGTERM);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const Run forwarded = watch({"--source", "process", "--", MEMPLAN_TEST_PYTHON, "-c", "import time; time.sleep(30)"});
  sender.join();
  CHECK(forwarded.code == 128 + SIGTERM);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));

  // SIGUSR1 too (SLURM's --signal=USR1@90, a trainer's checkpoint-and-exit handler): the child's
  // handler runs and its exit code is memplan's.
  std::thread usr1([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    ::kill(::getpid(), SIGUSR1);
  });
  const Run checkpointed = watch({"--source", "process", "--", MEMPLAN_TEST_PYTHON, "-c",
                                  "import signal, sys, time; signal.signal(signal.SIGUSR1, lambda *a: sys.exit(42)); time.sleep(30)"});
  usr1.join();
  CHECK(checkpointed.code == 42);
}

TEST_CASE("watch: a reader of its output that goes away does not end it: the command's exit code and the log's end record") {
  const fs::path log = fs::temp_directory_path() / fmt::format("memplan-watch-sigpipe-{}.jsonl", ::getpid());
  fs::remove(log);
  // `| head -c 1` closes the pipe after one byte: memplan's later lines meet EPIPE (SIGPIPE ended it: 141).
  const std::string cmd = fmt::format(
      "bash -c '\"{}/memplan\" watch --source process --interval 0.2 --log \"{}\" -- \"{}\" -c \"import sys, time; time.sleep(1.2); "
      "sys.exit(7)\" 2>&1 | head -c 1 >/dev/null; exit ${{PIPESTATUS[0]}}'",
      MEMPLAN_BUILD_DIR, log.string(), MEMPLAN_TEST_PYTHON);
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
  std::ifstream in(log);
  std::string last, line;
  while (std::getline(in, line)) last = line;
  CHECK(last.find("\"kind\":\"end\"") != std::string::npos);
  CHECK(last.find("\"exit_code\":7") != std::string::npos);
  fs::remove(log);
}

TEST_CASE("watch: commands that cannot start") {
  const Run missing = watch({"--", "memplan-no-such-command"});
  CHECK(missing.code == 127);
  CHECK(missing.err.rfind("error: cannot run 'memplan-no-such-command': No such file or directory\nhint: ", 0) == 0);
  const std::string file = temp_path("not-executable.sh");
  std::ofstream(file) << "echo hi\n";
  const Run denied = watch({"--", file});
  CHECK(denied.code == 126);
  CHECK(denied.err.find("Permission denied") != std::string::npos);
}

TEST_CASE("watch: bad flags") {
  CHECK(watch({}).err.rfind("error: memplan watch needs the training command to run\nhint: memplan watch [--interval S]", 0) == 0);
  CHECK(watch({}).code == 2);
  CHECK(watch({"--interval", "0", "--", "true"}).code == 2);
  CHECK(watch({"--source", "cuda", "--", "true"}).code == 2);
  CHECK(watch({"--replay", "x.jsonl", "--", "true"}).code == 2);
  const Run replay_missing = watch({"--replay", temp_path("none.jsonl")});
  CHECK(replay_missing.code == 2);
  CHECK(replay_missing.err.find("cannot read the log") != std::string::npos);
  const std::string broken = temp_path("broken.jsonl");
  std::ofstream(broken) << R"({"schema": "memplan.monitor/v1", "kind": "start"})" << "\n" << R"({"schema": "memplan.monitor/v1", "kind": )" << "\n";
  const Run bad_log = watch({"--replay", broken});
  CHECK(bad_log.code == 2);
  CHECK(bad_log.err.rfind(broken + ":2:", 0) == 0);
}

TEST_CASE("watch: NVML missing, and the GPU samplers through dlopen") {
  SUBCASE("--source nvml without NVML is a clear error") {
    EnvVar lib("MEMPLAN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
    const Run r = watch({"--source", "nvml", "--", "true"});
    CHECK(r.code == 2);
    CHECK(r.err.rfind("error: --source: NVML is not available: ", 0) == 0);
  }
  SUBCASE("auto falls back to the process tree") {
    EnvVar lib("MEMPLAN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
    EnvVar rocm("MEMPLAN_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.1");
    const Run r = watch({"--", "true"});
    CHECK(r.code == 0);
    CHECK(r.err.find("sampling the process tree's RSS") != std::string::npos);
    CHECK(r.err.find("no GPU sampler: NVML: ") != std::string::npos);
  }
  SUBCASE("NVML") {
    EnvVar lib("MEMPLAN_NVML_LIBRARY", MEMPLAN_FAKE_GPU_SMI);
    const Run r = watch({"--source", "nvml", "--interval", "0.3", "--", MEMPLAN_TEST_PYTHON, "-c", "import time; time.sleep(0.8)"});
    CHECK(r.code == 0);
    CHECK(r.err.find("sampling nvml") != std::string::npos);
    // nvmlDeviceGetMemoryInfo_v2: used and total without the driver's reserved 512 MiB, as
    // cudaMemGetInfo counts them; the start line says which figure this is.
    CHECK(r.err.find("measuring NVML's used memory without the driver's reserved part") != std::string::npos);
    // Two devices: one figure each on the live line, the fuller one decides the status.
    CHECK(r.err.find("Memory: GPU0 18.") != std::string::npos);
    CHECK(r.err.find("/23.5 GiB (7") != std::string::npos);
    CHECK(r.err.find("GPU1 512.0 MiB/15.5 GiB (3%)") != std::string::npos);
    CHECK(r.err.find("on GPU0 Fake GPU 24GB") != std::string::npos);
  }
  SUBCASE("NVML without the v2 memory struct (an old driver): v1's figures, and it says so") {
    EnvVar lib("MEMPLAN_NVML_LIBRARY", MEMPLAN_FAKE_GPU_SMI);
    EnvVar old("FAKE_NVML_V2_MISMATCH", "1");
    const Run r = watch({"--source", "nvml", "--interval", "0.3", "--", MEMPLAN_TEST_PYTHON, "-c", "import time; time.sleep(0.8)"});
    CHECK(r.code == 0);
    CHECK(r.err.find("/24.0 GiB (7") != std::string::npos);
    CHECK(r.err.find("GPU1 1.0/16.0 GiB (6%)") != std::string::npos);
  }
  SUBCASE("CUDA_VISIBLE_DEVICES picks the GPUs") {
    EnvVar lib("MEMPLAN_NVML_LIBRARY", MEMPLAN_FAKE_GPU_SMI);
    EnvVar visible("CUDA_VISIBLE_DEVICES", "1");
    const Run r = watch({"--source", "nvml", "--", "true"});
    CHECK(r.code == 0);
    CHECK(r.err.find("on GPU1 Fake GPU 16GB") != std::string::npos);
  }
  SUBCASE("CUDA_VISIBLE_DEVICES past any index names no GPU: said, not a crash (it exited 3)") {
    EnvVar lib("MEMPLAN_NVML_LIBRARY", MEMPLAN_FAKE_GPU_SMI);
    for (const char* v : {"4294967296", "99999999999999999999999", "1,4294967296"}) {
      CAPTURE(v);
      EnvVar visible("CUDA_VISIBLE_DEVICES", v);
      const Run r = watch({"--source", "auto", "--", "true"});
      CHECK(r.code == 0);
      if (std::string(v) == "1,4294967296") CHECK(r.err.find("on GPU1 Fake GPU 16GB") != std::string::npos);
      else CHECK(r.err.find("NVML knows none of the GPUs CUDA_VISIBLE_DEVICES names") != std::string::npos);
    }
  }
  SUBCASE("ROCm SMI") {
    EnvVar lib("MEMPLAN_ROCM_SMI_LIBRARY", MEMPLAN_FAKE_GPU_SMI);
    const Run r = watch({"--source", "rocm-smi", "--", MEMPLAN_TEST_PYTHON, "-c", "raise SystemExit(5)"});
    CHECK(r.code == 5);
    CHECK(r.err.find("sampling rocm-smi") != std::string::npos);
    CHECK(r.err.find("on GPU0 Fake Instinct") != std::string::npos);
  }
}

TEST_CASE("--force never replaces an input: watch --log naming the --config file is refused") {
  const std::string config = temp_path("setup.yaml");
  std::ofstream(config) << "model: gpt2\ntraining:\n  micro_batch_size: 1\n  seq_len: 128\nhardware:\n  device: cpu\n";
  const std::string before = [&] { std::ifstream f(config); return std::string(std::istreambuf_iterator<char>(f), {}); }();
  const Run r = watch({"--source", "process", "--config", config, "--log", config, "--force", "--", "true"});
  CHECK(r.code == 2);
  CHECK(r.err.find("error: --log: will not write the log '" + config + "': it is the file given as --config") == 0);
  // Through a hard link too.
  const std::string link = temp_path("setup-link.yaml");
  fs::create_hard_link(config, link);
  CHECK(watch({"--source", "process", "--config", config, "--log", link, "--force", "--", "true"}).code == 2);
  const std::string after = [&] { std::ifstream f(config); return std::string(std::istreambuf_iterator<char>(f), {}); }();
  CHECK(after == before);
}

// The log comes from a file anyone can write (issue 24): every key of the wrong type, a size past
// 2^62 and a non-finite number are errors at their line (exit 2), never an exception from the JSON
// library (exit 3) or a negative size printed. The replay reads through the bounded reader: a
// FIFO or a device is refused, not waited on.
TEST_CASE("watch --replay: a typed reader, each wrong key at its line") {
  const std::string start =
      R"({"schema":"memplan.monitor/v1","kind":"start","source":"watch","command":["python3","t.py"],"sampler":"process"})";
  const std::string sample = R"({"schema":"memplan.monitor/v1","kind":"sample","t":0.5,"devices":[{"index":0,"name":"GPU","used_bytes":1024,"total_bytes":4096}]})";
  const std::string ok = start + "\n" + sample + "\n";
  const std::string good = temp_path("good.jsonl");
  std::ofstream(good) << ok;
  CHECK(watch({"--replay", good}).code == 0);
  struct Bad {
    std::string line, message;
  };
  const std::vector<Bad> bad = {
      {R"({"schema":"memplan.monitor/v1","kind":"sample","t":1,"devices":[{"used_bytes":1e300,"total_bytes":4096}]})",
       "sample record: 'used_bytes' must be a whole number of bytes from 0 to 2^62 (got 1e+300)"},
      {R"({"schema":"memplan.monitor/v1","kind":"sample","t":1,"devices":[{"used_bytes":-5}]})",
       "sample record: 'used_bytes' must be a whole number of bytes from 0 to 2^62 (got -5)"},
      {R"({"schema":"memplan.monitor/v1","kind":"sample","t":1,"devices":[{"used_bytes":"5"}]})",
       "sample record: 'used_bytes' must be a whole number of bytes from 0 to 2^62 (got \"5\")"},
      {R"({"schema":"memplan.monitor/v1","kind":"sample","t":"soon"})", "sample record: 't' must be a finite number (got \"soon\")"},
      {R"({"schema":"memplan.monitor/v1","kind":"sample","devices":{"a":1}})", "sample record: 'devices' must be a list (got {\"a\":1})"},
      {R"({"schema":"memplan.monitor/v1","kind":"sample","devices":[3]})", "sample record: 'devices' must be a list of objects (got 3)"},
      {R"({"schema":"memplan.monitor/v1","kind":"sample","devices":[{"name":7}]})", "sample record: 'name' must be a string (got 7)"},
      {R"({"schema":"memplan.monitor/v1","kind":"start","command":"python3 t.py"})",
       "start record: 'command' must be a list of strings (got \"python3 t.py\")"},
      {R"({"schema":"memplan.monitor/v1","kind":"start","thresholds":{"warning":"high"}})",
       "start record: 'warning' must be a finite number (got \"high\")"},
      {R"({"schema":"memplan.monitor/v1","kind":"start","thresholds":{"critical":7}})",
       "start record: 'thresholds.critical' must be a fraction in (0, 1] (got 7)"},
      {R"({"schema":"memplan.monitor/v1","kind":"step","step":"one"})", "step record: 'step' must be a whole number (got \"one\")"},
      {R"({"schema":"memplan.monitor/v1","kind":"step","step":1,"events":["leak",2]})",
       "step record: 'events' must be a list of strings (got [\"leak\",2])"},
      {R"({"schema":"memplan.monitor/v1","kind":"step","step":1,"leak":12})", "step record: 'leak' must be an object (got 12)"},
      {R"({"schema":"memplan.monitor/v1","kind":"step","step":1,"error":{"e":1}})", "step record: 'error' must be a string (got {\"e\":1})"},
      {R"({"schema":"memplan.monitor/v1","kind":"step","step":1,"recommendation":{"flags":["--x"]}})",
       "step record: 'flags' must be a string (got [\"--x\"])"},
      {R"({"schema":"memplan.monitor/v1","kind":"end","exit_code":"0"})", "end record: 'exit_code' must be a whole number (got \"0\")"},
      {R"({"schema":"memplan.monitor/v1","kind":"step","step":1,"band":"orange"})",
       "step record: 'band' must be a band: normal, above_target, warning, critical, emergency or out_of_memory (got \"orange\")"},
      {R"({"schema":"memplan.monitor/v1","kind":"end","worst_band":"ok"})",
       "end record: 'worst_band' must be a band: normal, above_target, warning, critical, emergency or out_of_memory (got \"ok\")"},
      {R"({"schema":"memplan.monitor/v1","kind":5})", "unknown record kind 5"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.line);
    const std::string path = temp_path("bad.jsonl");
    std::ofstream(path) << ok << b.line << "\n";
    const Run r = watch({"--replay", path});
    CHECK(r.code == 2);
    CHECK(r.err.rfind(path + ":3:1: error: " + b.message, 0) == 0);
  }
  // Not a regular file: refused at once.
  const std::string fifo = temp_path("log.fifo");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const Run r = watch({"--replay", fifo});
  CHECK(r.code == 2);
  CHECK(r.err.find("cannot read the log: this is a FIFO (named pipe), not a regular file") != std::string::npos);
  fs::remove(fifo);
  CHECK(watch({"--replay", "/dev/zero"}).err.find("this is a character device") != std::string::npos);
}

TEST_CASE("watch --log with an argument that is not UTF-8: logged (U+FFFD), the child watched to its end") {
  // The start record's JSON could not hold the byte: exit 3, and the child ran on unwatched.
  const std::string log = temp_path("non_utf8.jsonl");
  const Run r = watch({"--log", log, "--interval", "0.1", "--", MEMPLAN_TEST_PYTHON, "-c", "import sys; sys.exit(5)", "x\xfe"});
  CHECK(r.code == 5);
  std::ifstream in(log);
  std::string first, line, last;
  std::getline(in, first);
  while (std::getline(in, line)) last = line;
  CHECK(first.find("x\xef\xbf\xbd") != std::string::npos);
  CHECK(last.find("\"kind\":\"end\"") != std::string::npos);
}

TEST_CASE("watch --log --force replaces a symbolic link with the log, never its target, and never blocks on a FIFO") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("memplan-watch-links-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "precious") << "keep me\n";
  fs::create_symlink(dir / "precious", dir / "log-link");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  fs::create_symlink(dir / "fifo", dir / "fifo-link");
  for (const char* name : {"log-link", "fifo-link"}) {
    CAPTURE(name);
    const Run r = watch({"--source", "process", "--log", (dir / name).string(), "--force", "--", "true"});
    CHECK(r.code == 0);
    CHECK_FALSE(fs::is_symlink(dir / name));
    CHECK(fs::is_regular_file(dir / name));
    std::ifstream in(dir / name);
    std::string first;
    std::getline(in, first);
    CHECK(first.find("memplan.monitor/v1") != std::string::npos);
  }
  std::ifstream kept(dir / "precious");
  std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  CHECK(text == "keep me\n");
  CHECK(fs::is_fifo(dir / "fifo"));
  // Without --force a link is refused, as before.
  fs::create_symlink(dir / "precious", dir / "other-link");
  const Run refused = watch({"--source", "process", "--log", (dir / "other-link").string(), "--", "true"});
  CHECK(refused.code == 2);
  fs::remove_all(dir);
}
