// The subcommand table: each register_* adds a CLI11 subcommand and returns the handler to run
// when it was chosen. Handlers return the process exit code (cli.h).
#pragma once

#include <functional>
#include <utility>
#include <iosfwd>
#include <vector>

#include <CLI/CLI.hpp>

namespace memplan::cli {

struct Io {
  std::ostream& out;
  std::ostream& err;
};

struct Command {
  Command(CLI::App* a, std::function<int()> r, std::function<int(int, const char* const*)> f = {})
      : app(a), run(std::move(r)), forward(std::move(f)) {}
  CLI::App* app = nullptr;
  std::function<int()> run;
  // Set for a command another program runs (measure, calibrate): called with the whole command
  // line before any parsing, it returns that program's exit code.
  std::function<int(int argc, const char* const* argv)> forward;
};

Command register_estimate(CLI::App& root, Io io);
Command register_fit(CLI::App& root, Io io);
Command register_gpus(CLI::App& root, Io io);
Command register_models(CLI::App& root, Io io);
Command register_explain(CLI::App& root, Io io);
// In memplan: measure and calibrate, listed in --help and run by the companion (companion.cpp).
Command register_measure_forward(CLI::App& root, Io io);
Command register_calibrate_forward(CLI::App& root, Io io);
// In memplan-measure only (cmd_measure.cpp, linked with LibTorch).
Command register_measure(CLI::App& root, Io io);
Command register_calibrate(CLI::App& root, Io io);
Command register_plan(CLI::App& root, Io io);   // cmd_plan.cpp
Command register_check(CLI::App& root, Io io);  // cmd_check.cpp
Command register_watch(CLI::App& root, Io io);  // cmd_watch.cpp
Command register_report(CLI::App& root, Io io);  // cmd_report.cpp
Command register_completions(CLI::App& root, Io io);  // completions.cpp

// The examples of measure and calibrate, shared by memplan (which forwards them) and memplan-measure.
inline constexpr const char* kMeasureExamples =
    "  memplan measure --model gpt2 --micro-batch 2 --seq-len 256 --device cpu\n"
    "  memplan measure --config examples/quickstart.yaml --device cuda:0 --json";
inline constexpr const char* kCalibrateExamples =
    "  memplan calibrate --device cuda:0 --out my-gpu.yaml\n"
    "  memplan calibrate --from saved-probes.json --out my-gpu.yaml";

// The app behind run() and run_companion(): registers `table`, parses argv, runs the chosen
// command (or forwards it), and maps errors to exit codes.
// A command's name and the function that registers it. Only the command named on the command
// line is registered (CLI11 option set-up is most of a short run's work); all for --help.
struct Registrar {
  const char* name;
  Command (*add)(CLI::App&, Io);
  const char* examples;  // the --help footer: command lines that work from a checkout, one per line
};
int run_app(const std::vector<Registrar>& table, int argc, const char* const* argv, std::ostream& out, std::ostream& err);
// memplan's commands (measure and calibrate as forwarded to memplan-measure), in --help's order.
const std::vector<Registrar>& command_table();

}  // namespace memplan::cli
