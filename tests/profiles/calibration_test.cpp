// Calibration profiles: save/load round trip, atomic writes (a failed save leaves nothing),
// and strict reading of a file memplan wrote itself.
#include <doctest/doctest.h>

#include <filesystem>
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
  CHECK(load_error("calibration_scale.yaml") ==
        bad + "calibration_scale.yaml:4:3: error: corrections.activation_scale must be a multiplier in (0, 100] (got '-1')\n"
              "hint: a multiplier is a positive number such as 1.05");
  CHECK(load_error("calibration_key.yaml") ==
        bad + "calibration_key.yaml:4:3: error: unknown key 'activation_scal'\nhint: did you mean 'activation_scale'?");
}
