// The subcommand table: each register_* adds a CLI11 subcommand and returns the handler to run
// when it was chosen. Handlers return the process exit code (cli.h).
#pragma once

#include <functional>
#include <iosfwd>
#include <vector>

#include <CLI/CLI.hpp>

namespace memplan::cli {

struct Io {
  std::ostream& out;
  std::ostream& err;
};

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command register_estimate(CLI::App& root, Io io);
Command register_fit(CLI::App& root, Io io);
Command register_gpus(CLI::App& root, Io io);
Command register_models(CLI::App& root, Io io);
Command register_explain(CLI::App& root, Io io);
Command register_measure(CLI::App& root, Io io);
Command register_calibrate(CLI::App& root, Io io);
Command register_plan(CLI::App& root, Io io);   // cmd_plan.cpp
Command register_check(CLI::App& root, Io io);  // cmd_check.cpp

}  // namespace memplan::cli
