// memplan calibrate on this CPU: a profile is written atomically, estimate/fit use it and say
// so, and an interrupted run keeps what it gathered.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
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
  // On CPU the uncalibrated model is already within a fraction of a percent: the fit stays near 1.
  CHECK(cal.activation_scale == doctest::Approx(1.0).epsilon(0.05));
  CHECK(cal.model_state_scale == doctest::Approx(1.0).epsilon(0.05));
  CHECK(c.out.find("largest error") != std::string::npos);

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
  const Run def = invoke({"calibrate", "--device", "cpu", "--quick", "--threads", "2", "--json"});
  unsetenv("XDG_CACHE_HOME");
  REQUIRE(def.code == 0);
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
  const std::string out = temp_path("interrupted.yaml");
  profiles::save_calibration(run.fitted, run.stamp, out, /*force=*/true);
  CHECK(profiles::load_calibration(out).activation_scale > 0);
}
