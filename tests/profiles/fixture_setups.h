// Every configuration file under examples/ and tests/data/ that memplan reads into a setup on a
// CUDA card: the corpus the speed work is checked against (a faster path must give every one of
// them the same answer). Files that are bad input (the hostile corpus, the error fixtures) or that
// name no card are skipped; a file is read as `memplan estimate --config FILE --device cuda` reads
// it, on the h100-80gb where it names no card.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "profiles/profiles.h"

namespace memplan::testing {

struct FixtureSetup {
  std::string path;  // relative to the source tree
  profiles::BuiltSetup built;
};

inline std::vector<FixtureSetup> fixture_setups() {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(MEMPLAN_TEST_DATA).parent_path().parent_path();  // tests/data -> the source tree
  std::vector<std::string> files;
  for (const char* top : {"examples", "tests/data"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      if (!e.is_regular_file()) continue;
      const std::string rel = fs::relative(e.path(), root).string();
      if (rel.find("/hostile") != std::string::npos || rel.find("/bad") != std::string::npos ||
          rel.find("tests/data/gpu/") == 0 || rel.find("tests/data/calibrate/") == 0)
        continue;
      const std::string ext = e.path().extension().string();
      if (ext == ".yaml" || ext == ".yml" || ext == ".json" || ext == ".toml") files.push_back(rel);
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<FixtureSetup> out;
  for (const std::string& rel : files) {
    profiles::SetupInputs in;
    in.config = (root / rel).string();
    in.device = "cuda";
    try {
      out.push_back({rel, profiles::build_setup(in)});
    } catch (const std::exception&) {
      try {  // a file that names no card
        in.gpu = "h100-80gb";
        out.push_back({rel, profiles::build_setup(in)});
      } catch (const std::exception&) {
      }
    }
  }
  return out;
}

}  // namespace memplan::testing
