// memplan calibrate on this CPU: a profile is written atomically, estimate/fit use it and say
// so, and an interrupted run keeps what it gathered; calibrate --from FILE re-fits saved
// measurements (here a synthetic H200's) without running anything.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "calibrate/calibrate.h"
#include "cli/cli.h"
#include "profiles/profiles.h"

using namespace memplan;
namespace fs = std::filesystem;

namespace {
struct Run {
  int code;
  std::string out, err;
};
// memplan ARGS through the core CLI, which runs the build tree's memplan-measure for calibrate.
Run invoke(std::vector<std::string> args) {
  setenv("MEMPLAN_EXEC_PATH", MEMPLAN_BUILD_DIR, 1);
  args.insert(args.begin(), "memplan");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = cli::run(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}
std::string temp_path(const char* name) {
  const fs::path dir = fs::temp_directory_path() / "memplan-calibrate-test";
  fs::create_directories(dir);
  return (dir / name).string();
}
}  // namespace

TEST_CASE("calibrate --device cpu writes a profile that estimate applies and reports") {
  const std::string out = temp_path("cpu.yaml");
  fs::remove(out);
  const Run c = invoke({"calibrate", "--device", "cpu", "--quick", "--threads", "2", "--out", out});
  CAPTURE(c.err);
  REQUIRE(c.code == 0);
  REQUIRE(fs::exists(out));
  CHECK_FALSE(fs::exists(out + ".tmp"));
  const Calibration cal = profiles::load_calibration(out);
  // On CPU there is no context and no caching allocator: nothing is corrected.
  CHECK(cal.activation_scale == 1.0);
  CHECK(cal.model_state_scale == 1.0);
  CHECK(cal.cuda_context_bytes == -1);
  CHECK(cal.overhead_fraction == -1);
  CHECK(c.out.find("held out (fitted without it)") != std::string::npos);
  // Progress on stderr: the probe and how many, with the time since the start.
  CHECK(c.err.find("s] probe 1/") != std::string::npos);
  CHECK(c.err.find("[calibrate ") != std::string::npos);
  CHECK(c.out.find("CPU: no context, workspace or caching allocator to fit") != std::string::npos);

  const Run e = invoke({"estimate", "--model", "smollm2-135m", "--device", "cpu", "--gpu-memory", "8GiB", "--calibration", out, "--json"});
  REQUIRE(e.code == 0);
  const auto doc = nlohmann::json::parse(e.out);
  CHECK(doc["calibrated"] == true);
  CHECK(doc["calibration"] == out);
  const Run t = invoke({"estimate", "--model", "smollm2-135m", "--device", "cpu", "--gpu-memory", "8GiB", "--calibration", out});
  CHECK(t.out.find("calibrated with " + out) != std::string::npos);

  // Without --force an existing profile is kept; without --out the profile goes to the cache.
  const Run again = invoke({"calibrate", "--device", "cpu", "--quick", "--threads", "2", "--out", out});
  CHECK(again.code == 2);
  CHECK(again.err.find("will not write the calibration profile '" + out + "': it exists") != std::string::npos);
  const fs::path cache = fs::path(temp_path("cache"));
  fs::remove_all(cache);
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  const Run def = invoke({"calibrate", "--device", "cpu", "--quick", "--threads", "2", "--json", "--quiet"});
  unsetenv("XDG_CACHE_HOME");
  REQUIRE(def.code == 0);
  CHECK(def.err.find("[calibrate ") == std::string::npos);  // --quiet: no progress lines
  const std::string written = nlohmann::json::parse(def.out)["profile"];
  CHECK(written.rfind((cache / "memplan" / "calibrations" / "cpu-").string(), 0) == 0);
  CHECK(fs::exists(written));
}

TEST_CASE("an interrupted calibrate fits and stamps what it gathered") {
  calibrate::CalibrateOptions opt;
  opt.device = "cpu";
  opt.quick = true;
  opt.threads = 2;
  int lines = 0;
  opt.progress = [&](const std::string& line) {
    if (line.rfind("probe 2/", 0) == 0 && lines++ == 0) std::raise(SIGINT);  // Ctrl-C during probe 2
  };
  const calibrate::CalibrationRun run = calibrate::run_calibration(opt);
  CHECK(run.interrupted);
  CHECK(run.probes.size() == 2);  // probe 2 finished, probe 3 never started
  CHECK(run.stamp.at("interrupted") == "true");
  CHECK(run.stamp.at("probes") == "2 of 4");
  const auto [major, minor] = calibrate::parse_torch_version(run.stamp.at("libtorch"));
  const calibrate::FitReport rep = calibrate::fit_calibration(calibrate::fit_probes(run.probes, false, DeviceSpec{}, major, minor), false);
  CHECK(rep.accepted);
  CHECK(rep.probes.size() == 2);
}

TEST_CASE("harness_view (torch-free) is the harness's own harness_setup") {
  const auto [major, minor] = calibrate::parse_torch_version(calibrate::torch_version());
  for (bool cuda : {false, true})
    for (const auto& p : calibrate::probe_series(cuda, false)) {
      calibrate::MeasureOptions mo;
      mo.device = cuda ? "cuda:0" : "cpu";
      const TrainingSetup a = calibrate::harness_setup(p.setup, mo);
      const TrainingSetup b = calibrate::harness_view(p.setup, cuda, major, minor);
      CAPTURE(p.name);
      CHECK(estimate(a).peak_bytes() == estimate(b).peak_bytes());
      CHECK(a.runtime.torch_major == b.runtime.torch_major);
      CHECK(a.runtime.torch_minor == b.runtime.torch_minor);
      CHECK(a.runtime.optimizer_impl == b.runtime.optimizer_impl);
      CHECK(a.runtime.loss_upcast == b.runtime.loss_upcast);
      CHECK(a.runtime.allocator_rounding == b.runtime.allocator_rounding);
    }
}

namespace {

// A calibrate --json document of the CUDA series as a synthetic H200 measured it: what the
// estimate says under `truth`, the context read as truth's (or `context_offset` off it).
std::string saved_document(const Calibration& truth, int64_t context_offset = 0) {
  std::vector<calibrate::ProbeOutcome> outs;
  for (const auto& p : calibrate::probe_series(true, false)) {
    calibrate::ProbeOutcome o;
    o.probe = p;
    o.ok = true;
    outs.push_back(o);
  }
  const auto fit = calibrate::fit_probes(outs, true, profiles::device_for_name("NVIDIA H200"), 2, 11);
  nlohmann::json doc = {{"schema", "memplan.calibrate/v1"},
                        {"stamp", {{"device_name", "NVIDIA H200"}, {"device", "cuda:0"}, {"driver", "driver 13.0, runtime 13.0"}, {"libtorch", "2.11"}}},
                        {"cuda", true},
                        {"probes", nlohmann::json::array()}};
  for (const auto& p : fit) {
    const calibrate::Figures m = calibrate::predict(p.estimate, &truth);
    const int64_t context = truth.cuda_context_bytes + context_offset;
    doc["probes"].push_back({{"name", p.name}, {"ok", true}, {"measured_bytes", m.device}, {"measured_allocated_bytes", m.allocated},
                             {"measured_reserved_bytes", m.device - context}, {"measured_context_bytes", context}});
  }
  doc["probes"].push_back({{"name", "llama h2048 L8 b4 s4096 amp-bf16 full"}, {"ok", false}, {"note", "out of memory"}});
  doc["probes"].erase(3);  // that probe ran out of memory this time
  return doc.dump(2);
}

std::string write_file(const char* name, const std::string& text) {
  const std::string p = temp_path(name);
  std::ofstream(p) << text;
  return p;
}

}  // namespace

TEST_CASE("calibrate --from FILE re-fits saved measurements, and its own JSON round-trips") {
  Calibration truth;
  truth.cuda_context_bytes = 731 << 20;
  truth.overhead_fraction = 0.08;
  truth.overhead_bytes = 300 << 20;
  const std::string saved = write_file("saved.json", saved_document(truth));
  const std::string p1 = temp_path("from1.yaml"), p2 = temp_path("from2.yaml");
  fs::remove(p1);
  fs::remove(p2);
  const Run a = invoke({"calibrate", "--from", saved, "--out", p1, "--json"});
  CAPTURE(a.err);
  REQUIRE(a.code == 0);
  const auto doc = nlohmann::json::parse(a.out);
  CHECK(doc["cuda"] == true);
  CHECK(doc["stamp"]["device_name"] == "NVIDIA H200");
  CHECK(doc["stamp"]["libtorch"] == "2.11");
  CHECK(doc["fit"]["accepted"] == true);
  CHECK(doc["probes"].size() == 7);
  CHECK(doc["probes"][6]["ok"] == false);
  const Calibration c1 = profiles::load_calibration(p1);
  CHECK(c1.device == "NVIDIA H200");
  CHECK(c1.cuda_context_bytes == truth.cuda_context_bytes);
  // These probes are covered by the allocation replay: the allocator model leaves no parameter
  // open, so only the context is fitted (fit_test.cpp covers the formula's parameters).
  CHECK(c1.overhead_fraction == -1);
  CHECK(c1.overhead_bytes == 0);
  CHECK(c1.activation_scale == 1.0);

  // What --from printed is itself a document --from reads, with the same result.
  const Run b = invoke({"calibrate", "--from", write_file("again.json", a.out), "--out", p2});
  CAPTURE(b.err);
  REQUIRE(b.code == 0);
  CHECK(b.out.find("held out (fitted without it)") != std::string::npos);
  CHECK(b.out.find("wrote " + p2) != std::string::npos);
  const Calibration c2 = profiles::load_calibration(p2);
  CHECK(c2.cuda_context_bytes == c1.cuda_context_bytes);
  CHECK(c2.overhead_fraction == c1.overhead_fraction);
  CHECK(c2.overhead_bytes == c1.overhead_bytes);
  CHECK(c2.workspace_bytes == c1.workspace_bytes);
}

TEST_CASE("calibrate --from refuses unknown probes, and a fit worse than none writes nothing") {
  Calibration truth;
  truth.cuda_context_bytes = 731 << 20;
  std::string text = saved_document(truth);
  const std::string name = "\"llama h1024 L4 b4 s1024 amp-bf16 none\"";
  text.replace(text.find(name), name.size(), "\"llama h1024 L4 b4 s1024 amp-bf16 nothing\"");
  const std::string renamed = write_file("renamed.json", text);
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(text.find("nothing")), '\n'));
  const Run r = invoke({"calibrate", "--from", renamed, "--out", temp_path("never.yaml")});
  CHECK(r.code == 2);
  CHECK(r.err.rfind(renamed + ":" + std::to_string(line) + ":", 0) == 0);
  CHECK(r.err.find("error: unknown probe 'llama h1024 L4 b4 s1024 amp-bf16 nothing'\nhint: --from re-fits the probes of "
                   "this memplan's CUDA series") != std::string::npos);
  CHECK_FALSE(fs::exists(temp_path("never.yaml")));

  // Context read 4 GiB higher than the device figures show: every fit is worse held out.
  Calibration plain;
  plain.cuda_context_bytes = 600 << 20;
  const std::string off = write_file("off.json", saved_document(plain, int64_t{4} << 30));
  const std::string out = temp_path("refused.yaml");
  fs::remove(out);
  const Run w = invoke({"calibrate", "--from", off, "--out", out});
  CAPTURE(w.out);
  CHECK(w.code == 1);
  CHECK(w.err.find("error: calibration not written: held-out device-figure error") != std::string::npos);
  CHECK(w.err.find("hint: estimate without --calibration on this device") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(out + ".tmp"));
}
