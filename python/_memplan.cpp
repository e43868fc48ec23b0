// _memplan: the compiled half of the memplan Python package. It runs the CLI's own command
// handlers (cli/commands.h) on captured streams, so `memplan.estimate(...)` returns exactly the
// document `memplan estimate --json` prints. Keyword checking, did-you-mean and JSON decoding live
// in memplan/__init__.py; this file only parses flags, runs the handler and hands InputError's
// parts (message, where, hint) back to Python, which raises memplan.InputError from them.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli/cli.h"
#include "cli/commands.h"
#include "estimator/breakdown.h"
#include "estimator/error.h"
#include "profiles/profiles.h"

namespace py = pybind11;

namespace memplan::python {
namespace {

// The commands the module offers, each registered the way `memplan COMMAND` registers it.
cli::Command register_command(const std::string& name, CLI::App& root, cli::Io io) {
  if (name == "estimate") return cli::register_estimate(root, io);
  if (name == "fit") return cli::register_fit(root, io);
  if (name == "plan") return cli::register_plan(root, io);
  throw py::value_error("memplan has no command '" + name + "' in Python (estimate, fit, plan)");
}

// One flag of a command: (long names without dashes, the value's type name, takes a value, help).
using FlagInfo = std::tuple<std::vector<std::string>, std::string, bool, std::string>;

std::vector<FlagInfo> flags(const std::string& command) {
  std::ostringstream out, err;
  CLI::App root;
  const cli::Command c = register_command(command, root, {out, err});
  std::vector<FlagInfo> result;
  for (const CLI::Option* o : c.app->get_options()) {
    if (o->get_lnames().empty()) continue;
    result.emplace_back(o->get_lnames(), o->get_type_name(), o->get_items_expected_max() > 0,
                        o->get_description());
  }
  return result;
}

// Result of a run, as plain values Python turns into a document or an exception:
// kind "ok" (exit code, stdout, stderr), "input_error" (message, file, line, col, flag, hint,
// stderr), "parse_error" (CLI11's message), "internal_error" (message).
py::tuple run(const std::string& command, const std::vector<std::string>& args) {
  std::ostringstream out, err;
  CLI::App root;
  const cli::Command c = register_command(command, root, {out, err});
  std::vector<std::string> argv = {"memplan", command};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<const char*> ptrs;
  for (const std::string& a : argv) ptrs.push_back(a.c_str());
  try {
    root.parse(static_cast<int>(ptrs.size()), ptrs.data());
  } catch (const CLI::ParseError& e) {
    return py::make_tuple("parse_error", std::string(e.what()));
  }
  int code = 0;
  try {
    py::gil_scoped_release unlocked;  // plan searches for tens of milliseconds; let other threads run
    code = c.run();
  } catch (const InputError& e) {
    const Where& w = e.where();
    return py::make_tuple("input_error", e.message(), w.file, w.line, w.col, w.flag, e.hint(), err.str());
  } catch (const std::exception& e) {
    return py::make_tuple("internal_error", std::string(e.what()));
  }
  return py::make_tuple("ok", code, out.str(), err.str());
}

}  // namespace
}  // namespace memplan::python

PYBIND11_MODULE(_memplan, m) {
  m.doc() = "memplan's C++ core: the CLI's estimate, fit and plan handlers on captured streams";
  m.def("run", &memplan::python::run, py::arg("command"), py::arg("args"),
        "Runs `memplan COMMAND ARGS...`; returns a tuple whose first item says how it ended");
  m.def("flags", &memplan::python::flags, py::arg("command"),
        "The command's flags: (long names, type name, takes a value, description) each");
  m.def("nearest", [](const std::string& word, const std::vector<std::string>& candidates) {
          return memplan::profiles::nearest(word, candidates);
        }, py::arg("word"), py::arg("candidates"), "The closest candidates within a typo's distance, best first (the CLI's did-you-mean)");
  m.def("band_of", [](double utilization, double target, double warning, double critical, double emergency) {
          return std::string(memplan::to_string(memplan::band_of(utilization, memplan::Thresholds{target, warning, critical, emergency})));
        }, py::arg("utilization"), py::arg("target"), py::arg("warning"), py::arg("critical"), py::arg("emergency"),
        "The memory band of a fraction of device memory: the estimator's one definition (estimator/breakdown.h)");
  {
    py::list bands;
    for (int i = 0; i < static_cast<int>(memplan::Band::count); ++i)
      bands.append(memplan::to_string(static_cast<memplan::Band>(i)));
    m.attr("bands") = py::tuple(bands);
  }
  m.attr("version") = MEMPLAN_VERSION;
  m.attr("exit_ok") = memplan::cli::kExitOk;
  m.attr("exit_does_not_fit") = memplan::cli::kExitDoesNotFit;
}
