// The flags of measure and calibrate, torch-free: memplan-measure runs them (cmd_measure.cpp) and
// memplan's completions list them (completions.cpp) from this one definition.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/common.h"
#include "profiles/profiles.h"

namespace memplan::cli {

struct MeasureFlags {
  int steps = 2;
  int threads = 0;
  int64_t layers = 0;
  std::string out;
  bool force = false;
  bool quick = false;
  bool quiet = false;  // --quiet: no progress lines
  std::string from;  // calibrate --from: saved measurements to re-fit
};

// A measure or calibrate subcommand added to `root` with its flags, and where they land.
struct MeasureCommand {
  CLI::App* app = nullptr;
  std::shared_ptr<profiles::SetupInputs> in;
  std::shared_ptr<MeasureFlags> flags;
  std::shared_ptr<OutputFlags> output;
};
MeasureCommand add_measure_command(CLI::App& root);
MeasureCommand add_calibrate_command(CLI::App& root);

}  // namespace memplan::cli
