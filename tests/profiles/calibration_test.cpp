// Calibration profiles: save/load round trip, atomic writes (a failed save leaves nothing),
// and strict reading of a file memplan wrote itself.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;
namespace fs = std::filesystem;

namespace {

// A fresh folder under the system temp directory, removed when the test ends.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("memplan-profiles-test-" + std::to_string(getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string load_error(const std::string& file) {
  try {
    load_calibration(std::string(MEMPLAN_TEST_DATA) + "/profiles/bad/" + file);
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}

}  // namespace

TEST_CASE("calibration profiles round-trip exactly") {
  TempDir tmp;
  Calibration c;
  c.device = "rtx-3090";
  c.cuda_context_bytes = 287'047'680;
  c.workspace_bytes = 8'519'680;
  c.activation_scale = 1.0312345678901234;
  c.model_state_scale = 0.9987;
  c.overhead_fraction = 0.0425;
  c.overhead_bytes = 12'345;
  const std::map<std::string, std::string> stamp = {
      {"device_name", "NVIDIA GeForce RTX 3090"}, {"driver", "550.54"}, {"host", "box: \"lab\" #3"}};
  const std::string path = (tmp.path / "rtx-3090.yaml").string();
  save_calibration(c, stamp, path);
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const Calibration back = load_calibration(path);
  CHECK(back.device == c.device);
  CHECK(back.file == path);
  CHECK(back.cuda_context_bytes == c.cuda_context_bytes);
  CHECK(back.workspace_bytes == c.workspace_bytes);
  CHECK(back.activation_scale == c.activation_scale);
  CHECK(back.model_state_scale == c.model_state_scale);
  CHECK(back.overhead_fraction == c.overhead_fraction);
  CHECK(back.overhead_bytes == c.overhead_bytes);
  // Unset corrections (-1) survive the trip as unset.
  save_calibration(Calibration{}, {}, path, /*force=*/true);
  CHECK(load_calibration(path).cuda_context_bytes == -1);
  CHECK(load_calibration(path).overhead_fraction == -1);
}

TEST_CASE("a failed save leaves no file behind") {
  TempDir tmp;
  // The target is a directory: refused before anything is written.
  const fs::path dir = tmp.path / "taken";
  fs::create_directories(dir);
  CHECK_THROWS_AS(save_calibration(Calibration{}, {}, dir.string(), true), InputError);
  CHECK(fs::is_directory(dir));
  // The folder does not exist: nothing is created.
  const fs::path nowhere = tmp.path / "missing" / "cal.yaml";
  try {
    save_calibration(Calibration{}, {}, nowhere.string());
    FAIL("save into a missing folder succeeded");
  } catch (const InputError& e) {
    CHECK(e.render() == nowhere.string() + ": error: will not write the calibration profile '" + nowhere.string() +
                            "': No such file or directory\nhint: check that the folder exists and is writable");
  }
  CHECK_FALSE(fs::exists(tmp.path / "missing"));
  CHECK(std::distance(fs::directory_iterator(tmp.path), fs::directory_iterator{}) == 1);  // only "taken"
}

TEST_CASE("calibration files are read strictly") {
  const std::string bad = std::string(MEMPLAN_TEST_DATA) + "/profiles/bad/";
  CHECK(load_error("calibration_schema.yaml") ==
        bad + "calibration_schema.yaml:1:1: error: expected 'schema: memplan.calibration/v1'\n"
              "hint: memplan calibrate --out FILE writes calibration profiles");
  const std::string refit = "hint: run memplan calibrate again (it writes these within bounds), or correct the hand edit";
  CHECK(load_error("calibration_scale.yaml") ==
        bad + "calibration_scale.yaml:4:3: error: corrections.activation_scale must be a multiplier in [0.25, 4] (got '-1')\n" + refit);
  CHECK(load_error("calibration_key.yaml") ==
        bad + "calibration_key.yaml:4:3: error: unknown key 'activation_scal'\nhint: did you mean 'activation_scale'?");
}

TEST_CASE("impossible corrections are refused at their line") {
  // Each file is a valid profile but for its line 5.
  const std::string bad = std::string(MEMPLAN_TEST_DATA) + "/profiles/bad/";
  const std::string refit = "\nhint: run memplan calibrate again (it writes these within bounds), or correct the hand edit";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"calibration_overhead_negative.yaml", "corrections.overhead_bytes must be a byte count from 0 to 1 TiB (got '-2097152')"},
      {"calibration_context_negative.yaml", "corrections.cuda_context_bytes must be a byte count up to 1 TiB (or -1 for none) (got '-5')"},
      {"calibration_scale_zero.yaml", "corrections.model_state_scale must be a multiplier in [0.25, 4] (got '0')"},
      {"calibration_scale_absurd.yaml", "corrections.activation_scale must be a multiplier in [0.25, 4] (got '50')"},
      {"calibration_fraction.yaml", "corrections.overhead_fraction must be a fraction in [0, 1) (or -1 for none) (got '1')"},
      {"calibration_huge.yaml", "corrections.workspace_bytes must be a byte count up to 1 TiB (or -1 for none) (got '2199023255552')"},
  };
  for (const auto& c : cases) {  // no structured binding: clang 14 cannot CAPTURE one
    const std::string file = c.first;
    CAPTURE(file);
    CHECK(load_error(file) == bad + file + ":5:3: error: " + c.second + refit);
  }
}

TEST_CASE("a profile used on another GPU than it was made on is warned about") {
  TempDir tmp;
  Calibration c;
  c.device = "NVIDIA H200";  // the name the driver gives; gpus.yaml lists it as h200's alias
  c.cuda_context_bytes = 700 << 20;
  const std::string path = (tmp.path / "h200.yaml").string();
  save_calibration(c, {}, path);
  SetupInputs in;
  in.model = "gpt2";
  in.calibration = path;
  in.gpu = "rtx-4090";
  const BuiltSetup other = build_setup(in);
  REQUIRE(other.warnings.size() == 1);
  CHECK(other.warnings[0].render() ==
        path + ": warning: calibration profile made on NVIDIA H200 applied to rtx-4090\n"
               "hint: its context and allocator figures are that device's: run memplan calibrate on a rtx-4090, or leave out "
               "--calibration");
  in.gpu = "h200";
  CHECK(build_setup(in).warnings.empty());
  in.gpu = "h200-sxm";  // an alias of the same preset
  CHECK(build_setup(in).warnings.empty());
  in.gpu.reset();  // no card named: nothing to compare with
  CHECK(build_setup(in).warnings.empty());
  CHECK(calibration_applies(c, profiles::device_for_name("NVIDIA H200")));
  CHECK_FALSE(calibration_applies(c, profiles::device_for_name("NVIDIA GeForce RTX 4090")));
}

TEST_CASE("saved calibrate measurements are read strictly") {
  TempDir tmp;
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string p = (tmp.path / name).string();
    std::ofstream(p) << text;
    return p;
  };
  auto error_of = [](const std::string& p) {
    try {
      load_saved_calibration(p);
    } catch (const InputError& e) {
      return e.render();
    }
    return std::string();
  };
  const std::string head = "{\"schema\": \"memplan.calibrate/v1\",\n \"stamp\": {\"device_name\": \"NVIDIA H200\", \"libtorch\": \"2.11\"},\n";
  const std::string good = write("good.json", head + " \"cuda\": true,\n \"probes\": [\n  {\"name\": \"a\", \"ok\": true, \"measured_bytes\": 5,"
                                                     " \"measured_context_bytes\": 2},\n  {\"name\": \"b\", \"ok\": false, \"note\": \"oom\"}]}\n");
  const SavedCalibration s = load_saved_calibration(good);
  CHECK(s.cuda);
  CHECK(s.stamp.at("device_name") == "NVIDIA H200");
  REQUIRE(s.probes.size() == 2);
  CHECK(s.probes[0].measured_bytes == 5);
  CHECK(s.probes[0].measured_context_bytes == 2);
  CHECK(s.probes[0].where.line == 5);
  CHECK_FALSE(s.probes[1].ok);

  const std::string neg = write("neg.json", head + " \"cuda\": true,\n \"probes\": [\n  {\"name\": \"a\", \"ok\": true, \"measured_bytes\": -5}]}\n");
  CHECK(error_of(neg).rfind(neg + ":5:", 0) == 0);
  CHECK(error_of(neg).find("measured_bytes must be a byte count from 0 to 1 TiB (got '-5')") != std::string::npos);
  const std::string typo = write("typo.json", head + " \"cuda\": true,\n \"probes\": [\n  {\"name\": \"a\", \"ok\": true, \"measured_byte\": 5}]}\n");
  CHECK(error_of(typo).find("unknown key 'measured_byte'\nhint: did you mean 'measured_bytes'?") != std::string::npos);
  const std::string nocuda = write("nocuda.json", head + " \"probes\": []}\n");
  CHECK(error_of(nocuda).find("no \"cuda\"") != std::string::npos);
  const std::string profile = write("profile.json", "{\"schema\": \"memplan.calibration/v1\"}\n");
  CHECK(error_of(profile) == profile + ":1:2: error: expected \"schema\": \"memplan.calibrate/v1\"\n"
                                       "hint: memplan calibrate --json > FILE saves the measurements --from reads");
}
