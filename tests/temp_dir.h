// A folder of the test's own (mkdtemp under the system's temporary folder), removed with
// everything in it when the object goes.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace memplan::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "memplan-test") {
    std::string t = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // `text` written to `name` inside it, byte for byte; its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

}  // namespace memplan::testing
