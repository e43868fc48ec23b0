// run() and run_companion(): build a CLI11 app from a subcommand table, parse, dispatch, and map
// errors to exit codes. Bad input is an InputError (exit 2); anything else escaping a handler is
// a bug (exit 3). `memplan measure|calibrate` hand their arguments to the companion program
// memplan-measure (companion.cpp), the only one that links LibTorch.
#include "cli/cli.h"
#include "profiles/files.h"

#include <new>
#include <stdexcept>
#include <ostream>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "api/flags.h"
#include "cli/commands.h"
#include "estimator/error.h"
#include "profiles/profiles.h"
#include "profiles/reader.h"

namespace memplan::cli {

int run_app(const std::vector<Registrar>& table, int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  // --version needs no command: answered before any is registered (registering all of them, for
  // --help's list, is most of a short run's work).
  if (argc >= 2 && argv[1] == std::string("--version")) {
    out << MEMPLAN_VERSION << "\n";
    return kExitOk;
  }
  CLI::App app{"memplan: how much GPU memory a training job needs, whether it fits, and what fits best.\n"
               "Exit codes: 0 fits/ok, 1 does not fit, 2 invalid input, 3 internal error.",
               "memplan"};
  app.set_version_flag("--version", MEMPLAN_VERSION);
  app.require_subcommand(1);
  const Io io{out, err};
  std::vector<Command> commands;
  const auto add = [&](const Registrar& r) {
    commands.push_back(r.add(app, io));
    commands.back().app->footer(std::string("examples:\n") + r.examples);
  };
  for (const Registrar& r : table)
    if (argc >= 2 && argv[1] == std::string(r.name)) add(r);
  if (commands.empty())
    for (const Registrar& r : table) add(r);
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
      try {
        app.parse(argc, argv);
      } catch (const std::logic_error& e) {
        // std::stoll's invalid_argument or out_of_range from CLI11 2.1 reading a flag's value
        // (--liger=maybe, --liger=99999999999999999999): name the flag from the command line.
        if (!dynamic_cast<const std::invalid_argument*>(&e) && !dynamic_cast<const std::out_of_range*>(&e)) throw;
        for (int i = 2; i < argc; ++i) {
          const std::string a = argv[i];
          const size_t eq = a.find('=');
          if (a.rfind("--", 0) != 0 || eq == std::string::npos) continue;
          for (const Command& c : commands) {
            const CLI::Option* opt = c.app->get_option_no_throw(a.substr(0, eq));
            if (!opt || !opt->get_type_name().empty()) continue;  // a flag has no value type
            const std::string v = a.substr(eq + 1);
            char* end = nullptr;
            errno = 0;
            std::strtoll(v.c_str(), &end, 10);
            const bool number = !v.empty() && end && *end == '\0' && errno != ERANGE;
            static const char* const kWords[] = {"true", "false", "yes", "no", "on", "off", "enable", "disable", "t", "f", "y", "n"};
            const std::string l = profiles::detail::lower(v);
            if (number || std::find(std::begin(kWords), std::end(kWords), l) != std::end(kWords)) continue;
            err << "error: " << a.substr(0, eq) << ": cannot read '" << profiles::clip(v) << "' as its value\n";
            err << "hint: a flag takes true or false (or nothing); memplan " << c.app->get_name() << " --help lists its flags\n";
            return kExitInvalid;
          }
        }
        throw CLI::ConversionError(e.what());
      }
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
      CLI::App* sub = nullptr;
      for (const Command& c : commands)
        if (c.app->parsed()) sub = c.app;
      const std::string cmd = sub ? sub->get_name() : "COMMAND";
      const std::string what = e.what();
      // A value CLI11 could not convert (--micro-batch abc) -> DESIGN.md's "error: --flag: ...".
      if (dynamic_cast<const CLI::ConversionError*>(&e) && sub)
        if (const auto bad = api::unconvertible_value(*sub, cmd)) throw *bad;
      // Arguments the command does not take (CLI11 keeps them as the app's remaining ones).
      if (dynamic_cast<const CLI::ExtrasError*>(&e) && sub) {
        std::vector<std::string> extra = sub->remaining();
        if (extra.empty()) extra = app.remaining(true);
        // A flag: the nearest the command has (Python's spelling, --seq_len, is the flag with dashes).
        for (const std::string& a : extra) {
          if (a.rfind("--", 0) != 0) continue;
          const std::string given = a.substr(0, a.find('='));
          std::vector<std::string> flags;
          for (const CLI::Option* opt : sub->get_options())
            for (const std::string& n : opt->get_lnames()) flags.push_back("--" + n);
          std::string dashed = given;
          std::replace(dashed.begin(), dashed.end(), '_', '-');
          auto near = profiles::nearest(dashed, flags);
          if (std::find(flags.begin(), flags.end(), dashed) != flags.end()) near.insert(near.begin(), dashed);
          err << "error: unknown flag '" << profiles::clip(given) << "' for memplan " << cmd << "\n";
          err << "hint: " << (near.empty() ? "" : "did you mean '" + near[0] + "'? ") << "memplan " << cmd << " --help lists its flags\n";
          return kExitInvalid;
        }
        // A config file given without --config: say so rather than only "not expected".
        if (sub->get_option_no_throw("--config") != nullptr)
          for (const std::string& a : extra) {
            const std::string l = profiles::detail::lower(a);
            for (const char* ext : {".yaml", ".yml", ".json"})
              if (l.size() > std::string(ext).size() && profiles::detail::ends_with(l, ext)) {
                err << "error: memplan " << cmd << " reads its configuration file from --config, not a bare argument ('" << a << "')\n";
                err << "hint: memplan " << cmd << " --config " << a << "\n";
                return kExitInvalid;
              }
          }
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

const std::vector<Registrar>& command_table() {
  static const std::vector<Registrar> kCommands = {
      {"estimate", register_estimate,
       "  memplan estimate --model llama-3.2-1b --gpu rtx-3090 --micro-batch 4 --seq-len 1024 --precision bf16\n"
       "  memplan estimate --config examples/quickstart.yaml --json"},
      {"fit", register_fit, "  memplan fit --config examples/quickstart.yaml\n  memplan fit --model llama-3-8b --gpu rtx-4090 --seq-len 2048"},
      {"plan", register_plan,
       "  memplan plan --model llama-3-8b --gpu a100-40gb --gpus 4 --global-batch 256 --seq-len 2048\n"
       "  memplan plan --config examples/quickstart.yaml --emit hf --out train.yaml"},
      {"check", register_check, "  memplan check examples/ --gpu rtx-3090\n  memplan check configs/ --base-ref origin/main --max-growth 10%"},
      {"gpus", register_gpus, "  memplan gpus\n  memplan gpus --json"},
      {"models", register_models, "  memplan models\n  memplan models --json"},
      {"explain", register_explain, "  memplan explain activations\n  memplan explain --config examples/quickstart.yaml"},
      {"measure", register_measure_forward, kMeasureExamples},
      {"calibrate", register_calibrate_forward, kCalibrateExamples},
      {"watch", register_watch,
       "  memplan watch --model gpt2 --micro-batch 4 --seq-len 512 -- python3 train.py\n"
       "  memplan watch --log run.jsonl --html run.html --config train.yaml -- torchrun train.py"},
      {"report", register_report,
       "  memplan report --config examples/quickstart.yaml --out report.html\n"
       "  memplan report --config examples/quickstart.yaml --plan --svg plan --out plan.svg\n"
       "  memplan report --monitor-log run.jsonl --model gpt2 --micro-batch 4 --out run.html"},
      {"completions", register_completions, "  memplan completions bash > /etc/bash_completion.d/memplan\n"
                                             "  memplan completions zsh > \"${fpath[1]}/_memplan\""}};
  return kCommands;
}

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  profiles::forget_files_read();  // this command's inputs only (profiles/files.h)
  return run_app(command_table(), argc, argv, out, err);
}

}  // namespace memplan::cli
