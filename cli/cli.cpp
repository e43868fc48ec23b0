// run() and run_companion(): build a CLI11 app from a subcommand table, parse, dispatch, and map
// errors to exit codes. Bad input is an InputError (exit 2); anything else escaping a handler is
// a bug (exit 3). `memplan measure|calibrate` hand their arguments to the companion program
// memplan-measure (companion.cpp), the only one that links LibTorch.
#include "cli/cli.h"

#include <new>
#include <ostream>

#include <algorithm>
#include <regex>

#include "cli/commands.h"
#include "estimator/error.h"
#include "profiles/profiles.h"

namespace memplan::cli {

int run_app(const std::vector<Registrar>& table, int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"memplan: how much GPU memory a training job needs, whether it fits, and what fits best.\n"
               "Exit codes: 0 fits/ok, 1 does not fit, 2 invalid input, 3 internal error.",
               "memplan"};
  app.set_version_flag("--version", MEMPLAN_VERSION);
  app.require_subcommand(1);
  const Io io{out, err};
  std::vector<Command> commands;
  for (const Registrar& r : table)
    if (argc >= 2 && argv[1] == std::string(r.name)) commands.push_back(r.add(app, io));
  if (commands.empty())
    for (const Registrar& r : table) commands.push_back(r.add(app, io));
  try {
    // A misspelt command: name it and suggest the nearest (CLI11 only says one is required).
    if (argc >= 2 && argv[1][0] != '-') {
      std::vector<std::string> names;
      for (const Command& c : commands) names.push_back(c.app->get_name());
      const auto hit = std::find(names.begin(), names.end(), argv[1]);
      if (hit != names.end() && commands[static_cast<size_t>(hit - names.begin())].forward)
        return commands[static_cast<size_t>(hit - names.begin())].forward(argc, argv);
      if (hit == names.end()) {
        const auto near = profiles::nearest(argv[1], names);
        err << "error: unknown command '" << profiles::clip(argv[1]) << "'\n";
        err << "hint: " << (near.empty() ? "" : "did you mean '" + near[0] + "'? ") << "memplan --help lists the commands\n";
        return kExitInvalid;
      }
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      out << app.help();
      return kExitOk;
    } catch (const CLI::CallForAllHelp&) {
      out << app.help("", CLI::AppFormatMode::All);
      return kExitOk;
    } catch (const CLI::CallForVersion&) {
      out << MEMPLAN_VERSION << "\n";
      return kExitOk;
    } catch (const CLI::ParseError& e) {
      // A subcommand's own --help arrives here as CallForHelp from the subcommand.
      if (e.get_exit_code() == 0) {
        for (const Command& c : commands)
          if (c.app->parsed()) {
            out << c.app->help();
            return kExitOk;
          }
        out << app.help();
        return kExitOk;
      }
      const CLI::App* sub = nullptr;
      for (const Command& c : commands)
        if (c.app->parsed()) sub = c.app;
      const std::string cmd = sub ? sub->get_name() : "COMMAND";
      const std::string what = e.what();
      std::smatch m;
      // CLI11: "Could not convert: --micro-batch = abc" -> DESIGN.md's "error: --flag: ...".
      if (std::regex_search(what, m, std::regex("Could not convert: (--[A-Za-z0-9-]+) = (.*)"))) {
        err << "error: " << m[1] << ": cannot read '" << profiles::clip(m[2].str()) << "' as its value\n";
        err << "hint: memplan " << cmd << " --help shows what " << m[1] << " takes\n";
        return kExitInvalid;
      }
      // CLI11: "The following arguments were not expected: --micro-bach 4" -> nearest flag.
      if (sub && what.find("not expected") != std::string::npos &&
          std::regex_search(what, m, std::regex("(--[A-Za-z0-9_-]+)"))) {
        std::vector<std::string> flags;
        for (const CLI::Option* opt : sub->get_options())
          for (const std::string& n : opt->get_lnames()) flags.push_back("--" + n);
        // Python's spelling (--seq_len, the config key's) is the flag with dashes.
        std::string dashed = m[1].str();
        std::replace(dashed.begin(), dashed.end(), '_', '-');
        auto near = profiles::nearest(dashed, flags);
        if (std::find(flags.begin(), flags.end(), dashed) != flags.end()) near.insert(near.begin(), dashed);
        err << "error: unknown flag '" << profiles::clip(m[1].str()) << "' for memplan " << cmd << "\n";
        err << "hint: " << (near.empty() ? "" : "did you mean '" + near[0] + "'? ") << "memplan " << cmd << " --help lists its flags\n";
        return kExitInvalid;
      }
      // A config file given without --config: say so rather than only "not expected".
      if (sub && sub->get_option_no_throw("--config") != nullptr && what.find("not expected") != std::string::npos &&
          std::regex_search(what, m, std::regex(R"(:\s*(\S+\.(ya?ml|json)))"))) {
        err << "error: memplan " << cmd << " reads its configuration file from --config, not a bare argument ('" << m[1] << "')\n";
        err << "hint: memplan " << cmd << " --config " << m[1] << "\n";
        return kExitInvalid;
      }
      err << "error: " << profiles::clip(what, 300) << "\n";
      err << "hint: memplan --help lists the commands; memplan " << cmd << " --help their flags\n";
      return kExitInvalid;
    }
    for (const Command& c : commands)
      if (c.app->parsed()) return c.run();
    return kExitInvalid;
  } catch (const InputError& e) {
    err << e.render() << "\n";
    return kExitInvalid;
  } catch (const std::bad_alloc&) {
    // Inputs are bounded (profiles/reader.h ReadLimits, validate()), so this is an input whose
    // sizes ask for more than the machine has, not a bug: say so, exit 2 (not 3).
    err << "error: out of memory: the input is too large for memplan to handle\n"
        << "hint: configs are a few KiB and sizes such as --seq-len or --micro-batch are realistic; check the input\n";
    return kExitInvalid;
  } catch (const InternalError& e) {
    err << "internal error: " << e.what() << "\nplease report this with the command line\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    err << "internal error: " << e.what() << "\nplease report this with the command line\n";
    return kExitInternal;
  }
}

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  static const std::vector<Registrar> kCommands = {
      {"estimate", register_estimate}, {"fit", register_fit},         {"plan", register_plan},
      {"check", register_check},       {"gpus", register_gpus},       {"models", register_models},
      {"explain", register_explain},   {"measure", register_measure_forward}, {"calibrate", register_calibrate_forward},
      {"watch", register_watch}};
  return run_app(kCommands, argc, argv, out, err);
}

}  // namespace memplan::cli
