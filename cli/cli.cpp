// run(): builds the CLI11 app from the subcommand table, parses, dispatches, and maps errors to
// exit codes. Bad input is an InputError (exit 2); anything else escaping a handler is a bug
// (exit 3).
#include "cli/cli.h"

#include <ostream>

#include "cli/commands.h"
#include "estimator/error.h"

namespace memplan::cli {

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"memplan: how much GPU memory a training job needs, whether it fits, and what fits best.\n"
               "Exit codes: 0 fits/ok, 1 does not fit, 2 invalid input, 3 internal error.",
               "memplan"};
  app.set_version_flag("--version", MEMPLAN_VERSION);
  app.require_subcommand(1);
  const Io io{out, err};
  std::vector<Command> commands = {register_estimate(app, io), register_fit(app, io),       register_plan(app, io),
                                   register_check(app, io),    register_gpus(app, io),      register_models(app, io),
                                   register_explain(app, io),  register_measure(app, io),   register_calibrate(app, io)};
  try {
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
      err << "error: " << e.what() << "\n";
      err << "hint: memplan --help lists the commands; memplan COMMAND --help their flags\n";
      return kExitInvalid;
    }
    for (const Command& c : commands)
      if (c.app->parsed()) return c.run();
    return kExitInvalid;
  } catch (const InputError& e) {
    err << e.render() << "\n";
    return kExitInvalid;
  } catch (const InternalError& e) {
    err << "internal error: " << e.what() << "\nplease report this with the command line\n";
    return kExitInternal;
  } catch (const std::exception& e) {
    err << "internal error: " << e.what() << "\nplease report this with the command line\n";
    return kExitInternal;
  }
}

}  // namespace memplan::cli
