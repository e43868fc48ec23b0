// _memplan: the compiled half of the memplan Python package. It binds the library, not the
// command line's handlers: a call's keywords are read by the flags `memplan COMMAND` declares
// (api/flags.h) into profiles::SetupInputs, profiles::build_setup builds the setup, the estimator
// and planner compute, and the documents (api/documents.h) come back as Python objects with no
// JSON text in between. `Setup` and `Breakdown` are the setup and the per-GPU breakdown themselves;
// memplan/_commands.py turns keywords into flags and InputErrorParts into memplan.InputError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "api/documents.h"
#include "api/flags.h"
#include "api/plan_file.h"
#include "estimator/breakdown.h"
#include "estimator/error.h"
#include "estimator/estimate.h"
#include "estimator/fields.h"
#include "planner/fit.h"
#include "planner/plan.h"
#include "planner/request.h"
#include "profiles/profiles.h"
#include "profiles/files.h"

namespace py = pybind11;

namespace memplan::python {
namespace {

// The exit codes of DESIGN.md's contract, for callers that mirror the CLI's.
constexpr int kExitOk = 0;
constexpr int kExitDoesNotFit = 1;

// Text with the temporary files written for dict arguments named as those arguments
// ("<config dict>"), as memplan/_commands.py names them in errors and warnings.
using Renames = std::vector<std::pair<std::string, std::string>>;
std::string renamed(std::string text, const Renames& renames) {
  for (const auto& [from, to] : renames)
    for (size_t at = text.find(from); !from.empty() && at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  return text;
}

// A document as Python objects: dicts, lists, str, int, float, bool, None, its text with `renames`
// applied. Text that is not UTF-8 (a file name is bytes) becomes U+FFFD, as the CLI's JSON writes it.
py::object to_python(const nlohmann::json& j, const Renames& renames = {}) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[to_python(nlohmann::json(it.key()), renames)] = to_python(it.value(), renames);
      return d;
    }
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& v : j) l.append(to_python(v, renames));
      return l;
    }
    case nlohmann::json::value_t::string: {
      const std::string s = renamed(j.get_ref<const std::string&>(), renames);
      PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
      if (!o) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(o);
    }
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.get<double>());
    default: return py::none();
  }
}

std::vector<std::string> rendered(const std::vector<Warning>& warnings) {
  std::vector<std::string> out;
  for (const Warning& w : warnings) out.push_back(w.render());
  return out;
}

// The runtime versions the Python call filled from the interpreter's imported modules
// (memplan/_commands.py): (keyword, version memplan read, the module's full version, module).
using Filled = std::vector<std::tuple<std::string, std::string, std::string, std::string>>;

// The setup path of the version row whose flag is the keyword `key` ("torch_version" ->
// "runtime.torch_version").
std::string version_path(const std::string& key) {
  for (const memplan::VersionField& f : memplan::version_fields()) {
    std::string keyword = std::string(f.flag).substr(2);
    std::replace(keyword.begin(), keyword.end(), '-', '_');
    if (keyword == key) return f.path;
  }
  throw std::logic_error("no version row for the filled keyword " + key);
}

// What the call filled, said in the document: `from_interpreter` and one note each.
std::string filled_note(const std::tuple<std::string, std::string, std::string, std::string>& f, const std::string& caller) {
  const auto& [key, version, found, module] = f;
  return fmt::format("{} {} from this interpreter's {} {} ({} filled it; pass {}= to say otherwise, or "
                     "from_interpreter=False for memplan's default)",
                     version_path(key), version, module, found, caller, key);
}
void say_filled(nlohmann::json& doc, const Filled& filled, const std::string& caller) {
  for (const auto& f : filled) {
    const auto& [key, version, found, module] = f;
    doc["from_interpreter"][key] = {{"version", version}, {"found", found}, {"module", module}};
    doc["notes"].push_back(filled_note(f, caller));
  }
}

// An InputError after the reader warnings that came first (plan reads the config before it finds
// what is missing): Python issues the warnings, then raises the error, as the CLI prints them.
struct WarnedInputError : InputError {
  WarnedInputError(const InputError& e, std::vector<std::string> w) : InputError(e), warnings(std::move(w)) {}
  std::vector<std::string> warnings;
};

// What memplan COMMAND takes, registered on `app` into `in` (and `plan` for plan).
void add_flags(const std::string& command, CLI::App& app, profiles::SetupInputs& in, api::PlanFlags& plan) {
  if (command != "estimate" && command != "fit" && command != "plan")
    throw py::value_error("memplan has no command '" + command + "' in Python (estimate, fit, plan)");
  api::add_setup_flags(app, in);
  if (command == "plan") api::add_plan_flags(app, plan);
}

// Reads `args` (flags and values, as on the command line) with the command's flags. A value the
// flag cannot take is an InputError naming the flag, as the CLI says it.
void parse(const std::string& command, const std::vector<std::string>& args, profiles::SetupInputs& in, api::PlanFlags& plan) {
  CLI::App app;
  add_flags(command, app, in, plan);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (dynamic_cast<const CLI::ConversionError*>(&e))
      if (auto bad = api::unconvertible_value(app, command)) throw *bad;
    throw InputError(Where{}, profiles::clip(e.what(), 300), "memplan.flags('" + command + "') lists the keyword arguments");
  } catch (const std::logic_error&) {  // CLI11 2.1 reads a flag's value with std::stoll
    if (auto bad = api::unconvertible_value(app, command)) throw *bad;
    throw;
  }
}

// One step's per-GPU breakdown of a built setup.
class Breakdown {
 public:
  Breakdown(std::shared_ptr<const profiles::BuiltSetup> b, MemoryBreakdown e, Filled filled, std::string caller, Renames renames)
      : b_(std::move(b)), e_(std::move(e)), filled_(std::move(filled)), caller_(std::move(caller)), renames_(std::move(renames)) {}
  int64_t peak_bytes() const { return e_.peak_bytes(); }
  int64_t verdict_bytes() const { return e_.verdict_bytes(); }
  int64_t allocated_peak_bytes() const { return e_.allocated_peak_bytes(); }
  int64_t reserved_peak_bytes() const { return e_.peak().reserved(); }
  std::string peak_phase() const { return phase_name(e_.peak_phase()); }
  std::string peak_at() const { return e_.peak().at; }
  py::dict terms() const { return terms_of(e_.peak()); }
  py::list phases() const {
    py::list out;
    for (const PhaseState& ph : e_.phases) {
      py::dict d;
      d["name"] = phase_name(ph.phase);
      d["bytes"] = ph.total();
      d["allocated_bytes"] = ph.allocated();
      d["reserved_bytes"] = ph.reserved();
      d["at"] = ph.at;
      d["terms"] = terms_of(ph);
      out.append(d);
    }
    return out;
  }
  py::dict parameters() const {
    py::dict d;
    d["total"] = e_.params.total;
    d["trainable"] = e_.params.trainable;
    d["active_per_token"] = e_.params.active_per_token;
    return d;
  }
  py::object verdict() const {
    return to_python(api::estimate_verdict_json(e_, b_->setup));
  }
  std::string band() const {
    const Verdict v = judge(e_, b_->setup);
    return v.known ? v.status : "unknown";
  }
  py::object host() const { return to_python(api::host_json(e_, b_->setup), renames_); }
  // The estimator's notes and the versions the call filled (the document's `notes`).
  std::vector<std::string> notes() const {
    std::vector<std::string> out;
    for (const std::string& n : e_.notes) out.push_back(renamed(n, renames_));
    for (const auto& f : filled_) out.push_back(filled_note(f, caller_));
    return out;
  }
  bool calibrated() const { return e_.calibrated; }
  py::object document() const { return to_python(document_json(), renames_); }
  int exit_code() const {
    const Verdict v = judge(e_, b_->setup);
    return v.known && !v.fits ? kExitDoesNotFit : kExitOk;
  }

 private:
  static py::dict terms_of(const PhaseState& ph) {
    py::dict d;
    for (int i = 0; i < kNumTerms; ++i) d[term_name(term_at(i))] = ph.bytes[i];
    return d;
  }
  nlohmann::json document_json() const {
    nlohmann::json doc = api::estimate_json(*b_, e_);
    say_filled(doc, filled_, caller_);
    return doc;
  }
  std::shared_ptr<const profiles::BuiltSetup> b_;
  MemoryBreakdown e_;
  Filled filled_;
  std::string caller_;
  Renames renames_;
};

// A training setup as the library built it from a call's keywords: the model, batch, precision,
// parallelism, runtime and device, with where each value came from.
class Setup {
 public:
  // `filled`: the versions the call took from the interpreter; `caller`: the function that says so
  // ("memplan.setup()"); `renames`: the temporary files of dict arguments and the names they go by.
  Setup(const std::string& command, const std::vector<std::string>& args, Filled filled, std::string caller, Renames renames)
      : command_(command), filled_(std::move(filled)), caller_(std::move(caller)), renames_(std::move(renames)) {
    if (command == "plan") throw py::value_error("a plan searches many setups: memplan.plan() takes the keywords itself");
    api::PlanFlags unused;
    parse(command, args, in_, unused);
    py::gil_scoped_release unlocked;  // reading a config or a Hub model can take a while
    b_ = std::make_shared<const profiles::BuiltSetup>(profiles::build_setup(in_));
  }
  std::shared_ptr<Breakdown> estimate() const {
    std::optional<MemoryBreakdown> e;
    {
      py::gil_scoped_release unlocked;
      e = memplan::estimate(b_->setup, calibration());
    }
    return std::make_shared<Breakdown>(b_, std::move(*e), filled_, caller_, renames_);
  }
  // memplan.fit/v1 of this setup, with fit's options.
  std::tuple<py::object, int> fit() const {
    const TrainingSetup& s = b_->setup;
    if (s.device.capacity_bytes <= 0)
      throw InputError(Where::at_flag(field(Target::gpu).flag), "fit needs a device capacity",
                       "pass --gpu PRESET (memplan gpus lists them) or --gpu-memory 12GiB");
    nlohmann::json doc;
    bool ok = false;
    {
      py::gil_scoped_release unlocked;
      const MemoryBreakdown e = memplan::estimate(s, calibration());
      const planner::FitReport r = planner::fit(s, calibration(), api::fit_ask(in_));
      ok = r.verdict.fits && r.host.fits;
      doc = api::fit_json(*b_, e, r);
      say_filled(doc, filled_, caller_);
    }
    return {to_python(doc, renames_), ok ? kExitOk : kExitDoesNotFit};
  }
  py::object setup() const {
    nlohmann::json j = api::setup_json(b_->setup);
    j["sources"] = api::sources_json(*b_);
    return to_python(j, renames_);
  }
  py::object sources() const { return to_python(api::sources_json(*b_), renames_); }
  std::vector<std::string> warnings() const {
    std::vector<std::string> out;
    for (const std::string& w : rendered(b_->warnings)) out.push_back(renamed(w, renames_));
    return out;
  }
  std::string describe() const { return api::describe(b_->setup); }
  std::string describe_runtime() const { return renamed(api::describe_runtime(*b_), renames_); }
  std::string model() const { return b_->setup.model.name; }
  std::string config_path() const { return renamed(b_->config_path, renames_); }
  std::string config_format() const { return b_->config_format; }

 private:
  const Calibration* calibration() const { return b_->calibration ? &*b_->calibration : nullptr; }
  std::string command_;
  Filled filled_;
  std::string caller_;
  Renames renames_;
  profiles::SetupInputs in_;
  std::shared_ptr<const profiles::BuiltSetup> b_;
};

// The plan document of `memplan plan --json` for the flags read into `in` and `f`, the reader
// warnings added to `warnings` as they come, and the exit code the CLI would give.
nlohmann::json plan_document(const profiles::SetupInputs& in, const api::PlanFlags& f, std::vector<std::string>& warnings, int& code) {
  api::check_plan_flags(in, f, true);
  const auto resolved = planner::resolve_plan(in, f.ask, f.table, [&](const std::vector<Warning>& w) {
    const std::vector<std::string> r = rendered(w);
    warnings.insert(warnings.end(), r.begin(), r.end());
  });
  const planner::ResolvedPlan& rp = *resolved;
  if (!rp.table.empty()) return api::plan_table_json(rp, planner::plan_table(rp.request, rp.table));
  const planner::PlanResult r = planner::plan(rp.request, rp.cards);
  const api::EmittedConfig e = r.found ? api::emit_plan_config(in, f, rp, r) : api::EmittedConfig{};
  code = r.found ? kExitOk : kExitDoesNotFit;
  return api::plan_json(rp, r, e, f, in);
}

// (memplan.plan/v1 or plan-table/v1, the reader warnings, the exit code) for the keywords.
std::tuple<py::object, std::vector<std::string>, int> plan(const std::vector<std::string>& args, const Filled& filled, const Renames& renames) {
  profiles::forget_files_read();  // the files this call reads are its own inputs (profiles/files.h)
  profiles::SetupInputs in;
  api::PlanFlags f;
  parse("plan", args, in, f);
  std::vector<std::string> warnings;
  nlohmann::json doc;
  int code = kExitOk;
  try {
    py::gil_scoped_release unlocked;  // plan searches for tens of milliseconds; let other threads run
    doc = plan_document(in, f, warnings, code);
  } catch (const InputError& e) {
    throw WarnedInputError(e, warnings);
  }
  say_filled(doc, filled, "memplan.plan()");
  return {to_python(doc, renames), warnings, code};
}

// One flag of a command: (long names without dashes, the value's type name, takes a value, help).
using FlagInfo = std::tuple<std::vector<std::string>, std::string, bool, std::string>;

std::vector<FlagInfo> flags(const std::string& command) {
  CLI::App app;
  profiles::SetupInputs in;
  api::PlanFlags plan;
  add_flags(command, app, in, plan);
  std::vector<FlagInfo> result;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_lnames().empty()) continue;
    result.emplace_back(o->get_lnames(), o->get_type_name(), o->get_items_expected_max() > 0, o->get_description());
  }
  return result;
}

// memplan::InputError -> _memplan.InputErrorParts(message, file, line, col, flag, hint, the reader
// warnings that came before it), which memplan/_commands.py raises as memplan.InputError; any other
// C++ exception escaping the library is a bug: _memplan.InternalError (the CLI's exit 3).
PyObject* g_input_error = nullptr;
PyObject* g_internal_error = nullptr;

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const InputError& e) {
    const Where& w = e.where();
    const auto* warned = dynamic_cast<const WarnedInputError*>(&e);
    const py::tuple args = py::make_tuple(e.message(), w.file, w.line, w.col, w.flag, e.hint(),
                                          warned ? warned->warnings : std::vector<std::string>{});
    PyErr_SetObject(g_input_error, args.ptr());
  } catch (const py::error_already_set&) {
    throw;  // a Python error raised on the way: pybind11's own translation
  } catch (const py::builtin_exception&) {
    throw;
  } catch (const std::exception& e) {
    PyErr_SetString(g_internal_error, e.what());  // a bug (the CLI's exit 3)
  }
}

}  // namespace
}  // namespace memplan::python

PYBIND11_MODULE(_memplan, m) {
  namespace mp = memplan::python;
  m.doc() = "memplan's C++ library: setups, their per-GPU breakdown, fit and plan, and the memory bands";
  mp::g_input_error = PyErr_NewException("_memplan.InputErrorParts", PyExc_ValueError, nullptr);
  m.attr("InputErrorParts") = py::handle(mp::g_input_error);
  mp::g_internal_error = PyErr_NewException("_memplan.InternalError", PyExc_RuntimeError, nullptr);
  m.attr("InternalError") = py::handle(mp::g_internal_error);
  py::register_exception_translator(&mp::translate);

  py::class_<mp::Breakdown, std::shared_ptr<mp::Breakdown>>(m, "Breakdown",
                                                          "One training step's memory on one GPU, term by term and phase by phase")
      .def_property_readonly("peak_bytes", &mp::Breakdown::peak_bytes, "the step's peak on the device (torch + allocator + context)")
      .def_property_readonly("verdict_bytes", &mp::Breakdown::verdict_bytes, "what the verdict holds against the card's target")
      .def_property_readonly("allocated_peak_bytes", &mp::Breakdown::allocated_peak_bytes, "torch.cuda.max_memory_allocated()'s figure")
      .def_property_readonly("reserved_peak_bytes", &mp::Breakdown::reserved_peak_bytes, "torch.cuda.max_memory_reserved()'s figure")
      .def_property_readonly("peak_phase", &mp::Breakdown::peak_phase, "forward, backward or optimizer_step")
      .def_property_readonly("peak_at", &mp::Breakdown::peak_at, "where in the phase the peak falls")
      .def_property_readonly("terms", &mp::Breakdown::terms, "{term: bytes} at the peak")
      .def_property_readonly("phases", &mp::Breakdown::phases, "each phase's total, allocated, reserved and terms")
      .def_property_readonly("parameters", &mp::Breakdown::parameters, "{total, trainable, active_per_token}")
      .def_property_readonly("verdict", &mp::Breakdown::verdict, "the verdict document (fits, runs, utilization, headroom, status)")
      .def_property_readonly("band", &mp::Breakdown::band, "the peak's memory band on the card (memplan.bands), or 'unknown'")
      .def_property_readonly("host", &mp::Breakdown::host, "host memory per GPU and per node")
      .def_property_readonly("notes", &mp::Breakdown::notes)
      .def_property_readonly("calibrated", &mp::Breakdown::calibrated)
      .def_property_readonly("exit_code", &mp::Breakdown::exit_code, "memplan estimate's exit code: 0 fits or unknown, 1 does not fit")
      .def("document", &mp::Breakdown::document, "the memplan.estimate/v1 document");

  py::class_<mp::Setup, std::shared_ptr<mp::Setup>>(m, "Setup", "A training setup as memplan built it, with each value's source")
      .def(py::init<const std::string&, const std::vector<std::string>&, mp::Filled, std::string, mp::Renames>(), py::arg("command"),
           py::arg("args"), py::arg("filled") = mp::Filled{}, py::arg("caller") = "memplan.setup()", py::arg("renames") = mp::Renames{})
      .def("estimate", &mp::Setup::estimate, "the per-GPU breakdown of one step")
      .def("fit", &mp::Setup::fit, "(memplan.fit/v1 document, exit code)")
      .def_property_readonly("setup", &mp::Setup::setup, "the setup document (as in memplan.estimate/v1's 'setup', with sources)")
      .def_property_readonly("sources", &mp::Setup::sources, "where each value came from")
      .def_property_readonly("warnings", &mp::Setup::warnings, "the readers' warnings, as the CLI prints them")
      .def_property_readonly("model", &mp::Setup::model)
      .def_property_readonly("config_path", &mp::Setup::config_path)
      .def_property_readonly("config_format", &mp::Setup::config_format)
      .def("describe", &mp::Setup::describe, "the one-line description memplan estimate prints")
      .def("describe_runtime", &mp::Setup::describe_runtime, "the runtime line memplan estimate prints");

  m.def("plan", &mp::plan, py::arg("args"), py::arg("filled") = mp::Filled{}, py::arg("renames") = mp::Renames{}, "(memplan.plan/v1 document, warnings, exit code) of `memplan plan ARGS... --json`");
  m.def("versions", [] {
          std::vector<std::tuple<std::string, std::string, int>> out;
          for (const memplan::VersionField& f : memplan::version_fields()) out.emplace_back(f.flag, f.library, f.max_major);
          return out;
        }, "The releases memplan models (estimator/fields.h): (flag, the Python module whose __version__ it is, the largest major it reads; 0: any)");
  m.def("setup_paths", [] {
          // Each registry row with a flag: its path (the `sources` key), where an estimate document
          // shows its value (api/documents.cpp), dotted from the document's top, and a switch's
          // negation ("--no-liger", which `sources` names when the flag turned it off).
          std::vector<std::tuple<std::string, std::string, std::string, std::string>> out;
          auto add = [&](const auto& rows) {
            for (const auto& f : rows)
              if (f.flag) out.emplace_back(f.flag, f.path, std::string("setup.") + f.path, "");
          };
          for (const memplan::SwitchField& f : memplan::switch_fields())
            out.emplace_back(f.flag, f.path, std::string("setup.") + f.path, f.negation());
          add(memplan::count_fields());
          add(memplan::choice_fields());
          add(memplan::number_fields());
          add(memplan::list_fields());
          add(memplan::version_fields());
          // The targets the document shows: the card's name and the device kind. Not given back: the
          // sizes (the document shows the capacity and the cap in bytes, after a fraction or a
          // preset resolved them) and the calibration profile's path.
          out.emplace_back(memplan::field(memplan::Target::gpu).flag, memplan::path(memplan::Target::gpu), "device.name", "");
          out.emplace_back(memplan::field(memplan::Target::device).flag, memplan::path(memplan::Target::device), "setup.device_kind", "");
          return out;
        }, "(flag, setup path, the dotted place in an estimate document that shows its value, a switch's negation or '') of every setup field with a flag the document shows (estimator/fields.h)");
  m.def("flags", &mp::flags, py::arg("command"), "The command's flags: (long names, type name, takes a value, description) each");
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
    // The thresholds' defaults: the number registry's thresholds.* rows on a default setup
    // (estimator/setup.h Thresholds).
    py::dict thresholds;
    const std::string prefix = "thresholds.";
    for (const memplan::NumberField& f : memplan::number_fields())
      if (std::string(f.path).rfind(prefix, 0) == 0) thresholds[py::str(std::string(f.path).substr(prefix.size()))] = f.get(memplan::TrainingSetup{});
    m.attr("default_thresholds") = thresholds;
  }
  m.attr("version") = MEMPLAN_VERSION;
  m.attr("exit_ok") = mp::kExitOk;
  m.attr("exit_does_not_fit") = mp::kExitDoesNotFit;
}
