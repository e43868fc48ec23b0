// memplan check: the CI gate in front of training-config changes. flags -> the files to check
// (directories walked for *.yaml/*.yml/*.json; files that are not training configs skipped with
// the reason) -> each config with its own target, or the --gpu default -> its baseline (--baseline
// FILE, or the same path at --base-ref read through git) -> planner::gate -> text, json, github
// workflow commands or junit. Exit 0 when every config passes, 1 when one fails, 2 when one is
// invalid (the others are still checked and reported), 2 when no config was checked at all unless
// --allow-empty. The memory logic is in planner/check.h.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/python_env.h"
#include "planner/check.h"
#include "estimator/text.h"
#include "profiles/hub.h"
#include "profiles/reader.h"

namespace memplan::cli {
namespace {
namespace fs = std::filesystem;

constexpr const char* kSchema = "memplan.check/v1";

struct CheckFlags {
  std::vector<std::string> paths;
  std::optional<std::string> gpu;         // default target for configs that name none
  std::optional<std::string> gpu_memory;  // default capacity for configs that name none
  std::optional<int64_t> gpus;            // default world size for configs that say none
  std::optional<std::string> calibration;
  std::string format = "text";
  bool strict = false;
  bool allow_empty = false;  // a run that checked no config exits 0 instead of 2
  std::optional<std::string> baseline;
  std::optional<std::string> base_ref;
  std::optional<std::string> max_growth;
  std::vector<std::string> models;  // --model ID=MODEL: a Hub id the configs name, read as MODEL
};

// "10%", "10" or "2.5%": a percentage; nullopt when it is not one.
std::optional<double> parse_percent(std::string text) {
  if (!text.empty() && text.back() == '%') text.pop_back();
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !(v >= 0) || v > 1e6) return std::nullopt;
  return v / 100.0;
}

// ---- loading ------------------------------------------------------------------------------------

// The config's own target (hardware.gpu, hardware.gpu_memory, hardware: device: cpu,
// hardware.num_gpus) wins; the flags are defaults for configs that name none.
profiles::BuiltSetup build(const std::string& path, const profiles::LoadedConfig& cfg, const CheckFlags& f) {
  profiles::SetupInputs in;
  in.config = path;
  const bool cpu = cfg.device && profiles::detail::lower(*cfg.device) == "cpu";
  if (!cfg.gpu && !cfg.gpu_memory && !cpu) {
    in.gpu = f.gpu;
    in.size_flag(Size::gpu_memory) = f.gpu_memory;
  }
  if (!cfg.origin.fields.count(memplan::path(Count::num_gpus))) in.count_flag(Count::num_gpus) = f.gpus;
  return profiles::build_setup(with_environment(in), cfg);
}

// A calibration applies to the device it was measured on.
// A baseline version of a config, built the way the config now is.
struct Baseline {
  std::string source;  // "HEAD~1:configs/train.yaml" or the --baseline file
  std::optional<profiles::BuiltSetup> built;
  std::optional<Calibration> calibration;
  std::string note;  // why there is no comparison ("new file: not at HEAD~1")
};

Baseline load_baseline_file(const std::string& path, const CheckFlags& f) {
  Baseline b;
  b.source = path;
  b.built = build(path, profiles::load_config(path), f);
  return b;
}

// The same path at `ref`, read through git. A file that did not exist there has no baseline; a
// version that does not load is noted, not an error (the config now is what the gate judges).
Baseline load_baseline_at(const std::string& path, const std::string& ref, const CheckFlags& f) {
  Baseline b;
  const profiles::Revision rev = profiles::read_at_revision(path, ref);
  b.source = rev.shown_as;
  b.note = rev.note;
  if (!rev.text) return b;
  try {
    b.built = build(path, profiles::load_config_text(*rev.text, b.source, path), f);
  } catch (const InputError& e) {
    b.note = fmt::format("the version at {} does not load: {}", ref, e.render());
  }
  return b;
}

// ---- one file -----------------------------------------------------------------------------------

enum class State { passed, failed, error, skipped };

struct Result {
  std::string path;
  State state = State::passed;
  std::string skip_reason;
  std::optional<InputError> error;
  // Checked configs:
  TrainingSetup setup;
  planner::GateResult gate;
  std::vector<Warning> warnings;
  std::vector<std::string> notes;  // calibration not applied, baseline unavailable
  std::string baseline_source;
  Where blame_where;  // the annotation's position
};

// The provenance paths the file itself set, with a line.
std::vector<std::string> fields_in_file(const profiles::Provenance& origin) {
  std::vector<std::string> out;
  for (const auto& [field, where] : origin.fields)
    if (!where.file.empty() && where.line > 0) out.push_back(field);
  return out;
}

// The position of a blamed field: the key that set it, else line 1 of the config.
Where blame_where(const profiles::Provenance& origin, const std::string& field, const std::string& path) {
  std::vector<std::string> keys = {field};
  if (field == "model") keys = {memplan::path(&ModelSpec::hidden_size), memplan::path(&ModelSpec::num_layers)};
  if (field == memplan::path(Target::gpu)) keys.push_back(memplan::path(Size::gpu_memory));
  if (field == memplan::path(Size::gpu_memory)) keys.push_back(memplan::path(Target::gpu));
  for (const std::string& k : keys) {
    const Where w = origin.of(k);
    if (!w.file.empty() && w.line > 0) return w;
  }
  return Where::at_file(path, 1, 1);
}

struct Context {
  const CheckFlags& flags;
  planner::GateOptions options;
  std::optional<Calibration> calibration;
  std::optional<Baseline> baseline_file;  // --baseline, loaded once
};

void check_config(const profiles::ConfigFile& c, const Context& ctx, Result& r) {
  std::error_code ec;
  if (!fs::exists(c.path, ec))
    throw InputError(Where::at_file(c.path), "no such file or directory", "name a training config or a folder of them");
  if (const auto why = profiles::not_a_training_config(c.path)) {
    if (!c.named) {
      r.state = State::skipped;
      r.skip_reason = *why;
      return;
    }
    throw InputError(Where::at_file(c.path), fmt::format("not a training config: {}", *why),
                     "memplan check reads memplan YAML training configs (model:, training:, hardware:); see examples/");
  }
  const profiles::LoadedConfig cfg = profiles::load_config(c.path);
  const profiles::BuiltSetup b = build(c.path, cfg, ctx.flags);
  if (b.setup.device.capacity_bytes <= 0)
    throw InputError(Where::at_file(c.path), "no target GPU for this config",
                     "set hardware.gpu (or hardware.gpu_memory) in it, or pass --gpu PRESET as the default");
  r.setup = b.setup;
  r.warnings = b.warnings;
  const Calibration* cal = nullptr;
  if (ctx.calibration) {
    if (profiles::calibration_applies(*ctx.calibration, b.setup.device)) cal = &*ctx.calibration;
    else
      r.notes.push_back(fmt::format("calibration for {} not applied: this config targets {}", ctx.calibration->device,
                                    b.setup.device.name));
  }
  std::optional<Baseline> at_ref;  // --base-ref: this file's own baseline
  if (!ctx.baseline_file && ctx.flags.base_ref) at_ref = load_baseline_at(c.path, *ctx.flags.base_ref, ctx.flags);
  const Baseline* base = ctx.baseline_file ? &*ctx.baseline_file : at_ref ? &*at_ref : nullptr;
  const TrainingSetup* base_setup = nullptr;
  const Calibration* base_cal = nullptr;
  if (base) {
    r.baseline_source = base->source;
    if (!base->note.empty()) r.notes.push_back(base->note);
    if (base->built) {
      base_setup = &base->built->setup;
      if (ctx.calibration && profiles::calibration_applies(*ctx.calibration, base_setup->device)) base_cal = &*ctx.calibration;
    }
  }
  const std::vector<std::string> in_file = fields_in_file(b.origin);
  r.gate = planner::gate(b.setup, cal, base_setup, base_cal, ctx.options, b.warnings.size(), in_file);
  r.state = r.gate.failed() ? State::failed : State::passed;
  if (!r.gate.blame.empty()) r.blame_where = blame_where(b.origin, r.gate.blame, c.path);
}

Result check_one(const profiles::ConfigFile& c, const Context& ctx) {
  Result r;
  r.path = c.path;
  try {
    check_config(c, ctx, r);
  } catch (const InputError& e) {
    r.state = State::error;
    r.error = e;
  }
  return r;
}

// ---- rendering ----------------------------------------------------------------------------------

struct Summary {
  int checked = 0, passed = 0, failed = 0, errors = 0, skipped = 0;
  int exit_code() const { return errors > 0 ? kExitInvalid : failed > 0 ? kExitDoesNotFit : kExitOk; }
};

Summary summarize(const std::vector<Result>& results) {
  Summary s;
  for (const Result& r : results) {
    if (r.state == State::passed) ++s.passed;
    if (r.state == State::failed) ++s.failed;
    if (r.state == State::error) ++s.errors;
    if (r.state == State::skipped) ++s.skipped;
  }
  s.checked = s.passed + s.failed;
  return s;
}

std::string summary_text(const Summary& s) {
  return fmt::format("memplan check: {} config{} checked: {} passed, {} failed; {} invalid; {} skipped", s.checked,
                     s.checked == 1 ? "" : "s", s.passed, s.failed, s.errors, s.skipped);
}

std::string signed_gib(int64_t bytes) { return (bytes >= 0 ? "+" : "-") + gib(bytes < 0 ? -bytes : bytes); }
std::string signed_percent(double f) { return (f >= 0 ? "+" : "") + percent(f); }

// "9.41 GiB / 11.72 GiB (80.3%, normal) on rtx-3060-12gb"
std::string usage_text(const Result& r) {
  const planner::GateResult& g = r.gate;
  // Where the replay runs the step in the target's share with the allocator's cache squeezed, the
  // verdict holds that share: say so beside the figure the card would show with room.
  const std::string squeezed =
      g.needed_bytes < g.peak_bytes ? fmt::format(", runs in {}: the allocator frees its cache and retries", gib(g.needed_bytes)) : "";
  return fmt::format("{} / {} ({}, {}{}) on {}", gib(g.peak_bytes), gib(g.capacity_bytes), percent(g.verdict.utilization),
                     g.verdict.status, squeezed, r.setup.device.name);
}

std::string change_text(const planner::FieldChange& c) {
  if (!c.effect_known || c.peak_effect_bytes == 0) return c.text();
  return fmt::format("{} ({} peak)", c.text(), signed_gib(c.peak_effect_bytes));
}

// The largest terms at the peak, for a failure nothing in a baseline explains.
std::string largest_terms(const planner::GateResult& g) {
  std::vector<int> idx;
  for (int i = 0; i < kNumTerms; ++i) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return g.terms[a] > g.terms[b]; });
  return fmt::format("{} {}, {} {}", term_name(term_at(idx[0])), gib(g.terms[idx[0]]), term_name(term_at(idx[1])),
                     gib(g.terms[idx[1]]));
}

std::string cause_text(const Result& r) {
  const planner::GateResult& g = r.gate;
  if (g.blame_change) return fmt::format("cause: {}", change_text(g.baseline->changes[*g.blame_change]));
  return fmt::format("largest terms: {}", largest_terms(g));
}

// One sentence per reason the config fails (the annotation messages).
std::vector<std::string> failure_messages(const Result& r, const Context& ctx) {
  const planner::GateResult& g = r.gate;
  std::vector<std::string> out;
  // Over the target but on the card: it runs, with less headroom than the target keeps; only a
  // step the card cannot hold "does not fit" (issue 26: a run at 90.4% was called so).
  const bool runs = g.verdict.runs && g.verdict.utilization <= 1.0;
  if (g.over_budget)
    out.push_back(fmt::format("{} {}: peak {} is {} of {} ({}{}), over the {} target by {}; {}",
                              runs ? "over the target on" : "does not fit", r.setup.device.name, gib(g.peak_bytes),
                              percent(g.verdict.utilization), gib(g.capacity_bytes), g.verdict.status, runs ? "; it runs" : "",
                              percent(r.setup.thresholds.target), gib(g.peak_bytes - g.target_bytes), cause_text(r)));
  if (g.over_growth)
    out.push_back(fmt::format("peak grew {} against {} ({} -> {}), more than --max-growth {}; {}",
                              percent(g.baseline->growth), r.baseline_source, gib(g.baseline->base_peak_bytes),
                              gib(g.peak_bytes), percent(*ctx.options.max_growth), cause_text(r)));
  if (g.warned)
    out.push_back(fmt::format("{} warning{} (--strict fails on warnings)", r.warnings.size(), r.warnings.size() == 1 ? "" : "s"));
  return out;
}

std::string error_text(const Result& r) {
  const InputError& e = *r.error;
  return e.where().file == r.path ? e.render() : fmt::format("{}: {}", r.path, e.render());
}

std::string indent(const std::string& text, const std::string& pad) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += pad + line + "\n";
  return out;
}

// The text report of one result: its line, then indented details.
std::string text_block(const Result& r, const Context& ctx) {
  const std::string pad = "      ";
  switch (r.state) {
    case State::skipped: return fmt::format("SKIP  {}: not a training config: {}\n", r.path, r.skip_reason);
    case State::error: {
      const std::string t = error_text(r);
      const size_t nl = t.find('\n');
      return "ERROR " + t.substr(0, nl) + "\n" + (nl == std::string::npos ? "" : indent(t.substr(nl + 1), pad));
    }
    default: break;
  }
  const planner::GateResult& g = r.gate;
  std::string out = fmt::format("{}  {}  {}\n", r.state == State::passed ? "PASS" : "FAIL", r.path, usage_text(r));
  for (const std::string& m : failure_messages(r, ctx)) out += pad + m + "\n";
  for (const Warning& w : r.warnings) out += indent(w.render(), pad);
  for (const std::string& n : r.notes) out += pad + "note: " + n + "\n";
  if (g.baseline) {
    const planner::Comparison& c = *g.baseline;
    out += fmt::format("{}vs {}: {} -> {} ({})\n", pad, r.baseline_source, gib(c.base_peak_bytes), gib(c.peak_bytes),
                       signed_percent(c.growth));
    for (const planner::TermDelta& d : c.terms) {
      std::vector<std::string> causes;
      for (size_t k : d.causes) causes.push_back(c.changes[k].text());
      out += fmt::format("{}  {} {}{}\n", pad, term_name(d.term), signed_gib(d.delta_bytes()),
                         causes.empty() ? "" : ": " + fmt::format("{}", fmt::join(causes, ", ")));
    }
    if (c.changes.empty()) out += pad + "  no setup field changed\n";
  }
  return out;
}

void render_text(std::ostream& out, const std::vector<Result>& results, const Context& ctx) {
  for (const Result& r : results) out << text_block(r, ctx);
  if (results.empty()) out << "note: no files to check\n";
  out << summary_text(summarize(results)) << "\n";
}

// GitHub workflow commands: '%', CR and LF are escaped in messages; ':' and ',' too in properties.
std::string gh_data(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else out += c;
  }
  return out;
}
std::string gh_property(const std::string& s) {
  std::string out;
  for (char c : gh_data(s)) {
    if (c == ':') out += "%3A";
    else if (c == ',') out += "%2C";
    else out += c;
  }
  return out;
}
std::string gh_command(const char* kind, const Where& w, const std::string& fallback_file, const std::string& message) {
  const std::string file = w.file.empty() ? fallback_file : w.file;
  return fmt::format("::{} file={},line={},col={},title=memplan::{}", kind, gh_property(file), w.line > 0 ? w.line : 1,
                     w.col > 0 ? w.col : 1, gh_data(message));
}

// The runner reads every log line that starts with "::" as a workflow command, so the text report
// (file names and key names a pull request chooses) runs with commands switched off:
// ::stop-commands::TOKEN ... ::TOKEN:: (docs.github.com, "Workflow commands for GitHub Actions",
// "Stopping and starting workflow commands"), the token unguessable so the text cannot end it early.
std::string stop_token() {
  std::random_device rd;
  return fmt::format("memplan-{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

// The text report as log lines, each result followed by its annotations; a notice at the end.
void render_github(std::ostream& out, const std::vector<Result>& results, const Context& ctx) {
  const std::string token = stop_token();
  for (const Result& r : results) {
    out << "::stop-commands::" << token << "\n" << text_block(r, ctx) << "::" << token << "::\n";
    if (r.state == State::error) {
      const InputError& e = *r.error;
      const std::string msg = e.where().flag.empty() ? e.message() : fmt::format("{}: {}", e.where().flag, e.message());
      out << gh_command("error", e.where(), r.path, e.hint().empty() ? msg : msg + "\nhint: " + e.hint()) << "\n";
      continue;
    }
    if (r.state == State::skipped) continue;
    const planner::GateResult& g = r.gate;
    std::vector<std::string> messages = failure_messages(r, ctx);
    if (g.warned) messages.pop_back();  // the warnings themselves are annotated below, as errors
    for (const std::string& m : messages) out << gh_command("error", r.blame_where, r.path, m) << "\n";
    for (const Warning& w : r.warnings)
      out << gh_command(g.warned ? "error" : "warning", w.where, r.path, w.hint.empty() ? w.message : w.message + "\nhint: " + w.hint)
          << "\n";
  }
  out << "::notice title=memplan::" << gh_data(summary_text(summarize(results))) << "\n";
}

const char* state_name(State s) {
  switch (s) {
    case State::passed: return "pass";
    case State::failed: return "fail";
    case State::error: return "error";
    case State::skipped: return "skipped";
  }
  return "";
}

nlohmann::json where_json(const Where& w) {
  nlohmann::json j = {{"file", w.file}, {"line", w.line}, {"col", w.col}};
  if (!w.flag.empty()) j["flag"] = w.flag;
  return j;
}

nlohmann::json baseline_json(const Result& r, const Context& ctx) {
  const planner::GateResult& g = r.gate;
  nlohmann::json j = {{"source", r.baseline_source}};
  if (!g.baseline) {
    j["compared"] = false;
    j["note"] = r.notes.empty() ? "" : r.notes.back();
    return j;
  }
  const planner::Comparison& c = *g.baseline;
  j["compared"] = true;
  j["peak_bytes"] = c.base_peak_bytes;
  j["growth"] = c.growth;
  j["max_growth"] = ctx.options.max_growth ? nlohmann::json(*ctx.options.max_growth) : nlohmann::json(nullptr);
  j["over_growth"] = g.over_growth;
  j["changes"] = nlohmann::json::array();
  for (const planner::FieldChange& ch : c.changes)
    j["changes"].push_back({{"field", ch.field},
                            {"label", ch.label},
                            {"before", ch.before},
                            {"after", ch.after},
                            {"effect_known", ch.effect_known},
                            {"peak_effect_bytes", ch.peak_effect_bytes},
                            {"text", ch.text()}});
  j["terms"] = nlohmann::json::array();
  for (const planner::TermDelta& d : c.terms) {
    nlohmann::json causes = nlohmann::json::array();
    for (size_t k : d.causes) causes.push_back(c.changes[k].text());
    j["terms"].push_back({{"name", term_name(d.term)},
                          {"before_bytes", d.before_bytes},
                          {"after_bytes", d.after_bytes},
                          {"delta_bytes", d.delta_bytes()},
                          {"causes", causes}});
  }
  return j;
}

nlohmann::json result_json(const Result& r, const Context& ctx) {
  nlohmann::json j = {{"path", r.path}, {"result", state_name(r.state)}};
  if (r.state == State::skipped) {
    j["status"] = "skipped";
    j["reason"] = r.skip_reason;
    return j;
  }
  if (r.state == State::error) {
    const InputError& e = *r.error;
    j["status"] = "error";
    j["error"] = {{"message", e.message()}, {"hint", e.hint()}, {"where", where_json(e.where())}, {"text", error_text(r)}};
    return j;
  }
  const planner::GateResult& g = r.gate;
  j["status"] = g.verdict.fits ? "fits" : "over";
  j["peak_bytes"] = g.peak_bytes;
  j["peak_phase"] = phase_name(g.peak_phase);
  j["capacity_bytes"] = g.capacity_bytes;
  j["target_bytes"] = g.target_bytes;
  j["needed_bytes"] = g.needed_bytes;
  j["runs"] = g.verdict.known ? nlohmann::json(g.verdict.runs) : nlohmann::json(nullptr);
  j["utilization"] = g.verdict.utilization;
  j["target_utilization"] = r.setup.thresholds.target;
  j["band"] = g.verdict.status;
  j["device"] = r.setup.device.name;
  j["calibrated"] = g.calibrated;
  j["model"] = r.setup.model.name;
  j["setup"] = describe(r.setup);
  nlohmann::json failures = nlohmann::json::array();
  if (g.over_budget) failures.push_back("over_budget");
  if (g.over_growth) failures.push_back("over_growth");
  if (g.warned) failures.push_back("warnings");
  j["failures"] = failures;
  j["messages"] = failure_messages(r, ctx);
  if (!g.blame.empty()) {
    j["blame"] = where_json(r.blame_where);
    j["blame"]["field"] = g.blame;
  }
  nlohmann::json warnings = nlohmann::json::array();
  for (const Warning& w : r.warnings) warnings.push_back(w.render());
  j["warnings"] = warnings;
  j["notes"] = r.notes;
  if (!r.baseline_source.empty() || g.baseline) j["baseline"] = baseline_json(r, ctx);
  return j;
}

void render_json(std::ostream& out, const std::vector<Result>& results, const Context& ctx) {
  const Summary s = summarize(results);
  nlohmann::json doc;
  doc["schema"] = kSchema;
  doc["memplan_version"] = MEMPLAN_VERSION;
  doc["options"] = {{"strict", ctx.options.strict},
                    {"max_growth", ctx.options.max_growth ? nlohmann::json(*ctx.options.max_growth) : nlohmann::json(nullptr)},
                    {"gpu", ctx.flags.gpu ? nlohmann::json(*ctx.flags.gpu) : nlohmann::json(nullptr)},
                    {"base_ref", ctx.flags.base_ref ? nlohmann::json(*ctx.flags.base_ref) : nlohmann::json(nullptr)},
                    {"baseline", ctx.flags.baseline ? nlohmann::json(*ctx.flags.baseline) : nlohmann::json(nullptr)}};
  doc["results"] = nlohmann::json::array();
  for (const Result& r : results) doc["results"].push_back(result_json(r, ctx));
  doc["summary"] = {{"checked", s.checked}, {"passed", s.passed}, {"failed", s.failed}, {"errors", s.errors}, {"skipped", s.skipped}};
  doc["exit_code"] = s.exit_code();
  emit(out, doc, Format::json);
}

// One <testsuite>, a <testcase> per file: <failure> over budget or growth, <error> invalid input,
// <skipped/> not a training config.
void render_junit(std::ostream& out, const std::vector<Result>& results, const Context& ctx) {
  const Summary s = summarize(results);
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << fmt::format("<testsuite name=\"memplan check\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">\n",
                     results.size(), s.failed, s.errors, s.skipped);
  for (const Result& r : results) {
    out << fmt::format("  <testcase classname=\"memplan\" name=\"{}\">\n", text::xml_text(r.path));
    const std::string report = text_block(r, ctx);
    if (r.state == State::skipped) {
      out << fmt::format("    <skipped message=\"{}\"/>\n", text::xml_text(r.skip_reason));
    } else if (r.state == State::error) {
      out << fmt::format("    <error message=\"{}\" type=\"invalid_input\">{}</error>\n", text::xml_text(r.error->message()),
                         text::xml_text(error_text(r)));
    } else if (r.state == State::failed) {
      const std::vector<std::string> m = failure_messages(r, ctx);
      const char* type = r.gate.over_budget ? "over_budget" : r.gate.over_growth ? "over_growth" : "warnings";
      out << fmt::format("    <failure message=\"{}\" type=\"{}\">{}</failure>\n", text::xml_text(m.front()), type, text::xml_text(report));
    }
    out << fmt::format("    <system-out>{}</system-out>\n", text::xml_text(report));
    out << "  </testcase>\n";
  }
  out << "</testsuite>\n";
}

// ---- the command --------------------------------------------------------------------------------

int run_check(Io io, const CheckFlags& f) {
  Context ctx{f, {}, std::nullopt, std::nullopt};
  ctx.options.strict = f.strict;
  if (f.max_growth) {
    ctx.options.max_growth = parse_percent(*f.max_growth);
    if (!ctx.options.max_growth)
      throw InputError(Where::at_flag("--max-growth"), fmt::format("cannot read '{}' as a percentage", *f.max_growth),
                       "write it like 10% or 10");
    if (!f.baseline && !f.base_ref)
      throw InputError(Where::at_flag("--max-growth"), "growth needs something to grow from",
                       "pass --base-ref GIT_REF or --baseline FILE");
  }
  if (f.gpu_memory) profiles::read_size(*f.gpu_memory, Where::at_flag(memplan::field(Size::gpu_memory).flag), "a GPU's memory");
  if (f.gpu && !profiles::gpu_catalog().find(*f.gpu)) {
    const auto near = profiles::gpu_catalog().suggest(*f.gpu);
    throw InputError(Where::at_flag(memplan::field(Target::gpu).flag), fmt::format("unknown GPU '{}'", profiles::clip(*f.gpu)),
                     near.empty() ? "memplan gpus lists the presets"
                                  : fmt::format("did you mean {}? (memplan gpus lists the presets)", fmt::join(near, ", ")));
  }
  // --model ID=MODEL: every config (and baseline) that names ID reads MODEL, with no network.
  std::vector<std::pair<std::string, std::string>> map;
  for (const std::string& m : f.models) {
    const size_t eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size() || !profiles::hub::is_repo_id(m.substr(0, eq)))
      throw InputError(Where::at_flag("--model"), fmt::format("cannot read '{}' as ID=MODEL", profiles::clip(m)),
                       "write the Hub id a config names, '=', and the model to read for it: --model "
                       "NousResearch/Meta-Llama-3-8B=llama-3-8b (a preset, a config.json or a model folder)");
    profiles::load_model(m.substr(eq + 1), Where::at_flag("--model"));  // the mapped model exists (its error names --model)
    map.emplace_back(m.substr(0, eq), m.substr(eq + 1));
  }
  const profiles::hub::ModelMapScope mapped(std::move(map));
  if (f.calibration) ctx.calibration = profiles::load_calibration(*f.calibration);
  if (f.baseline) ctx.baseline_file = load_baseline_file(*f.baseline, f);

  std::vector<Result> results;
  for (const profiles::ConfigFile& c : profiles::find_config_files(f.paths)) results.push_back(check_one(c, ctx));

  if (f.format == "json") render_json(io.out, results, ctx);
  else if (f.format == "github") render_github(io.out, results, ctx);
  else if (f.format == "junit") render_junit(io.out, results, ctx);
  else render_text(io.out, results, ctx);
  // Fail closed: a gate that checked nothing must not pass (a folder of configs memplan could not
  // recognise, or only skipped files).
  const Summary s = summarize(results);
  if (s.checked == 0 && s.errors == 0 && !f.allow_empty)
    throw InputError(Where{}, fmt::format("no training config was checked ({} file{} skipped)", s.skipped, s.skipped == 1 ? "" : "s"),
                     "name the training configs (a named file that is not one is an error that says why), or pass "
                     "--allow-empty to accept a run that checks none");
  return s.exit_code();
}

}  // namespace

Command register_check(CLI::App& root, Io io) {
  auto* app = root.add_subcommand(
      "check",
      "CI gate: is every training config within its GPU's target utilization (exit 0), is one over (1), invalid (2)");
  auto f = std::make_shared<CheckFlags>();
  app->add_option("paths", f->paths, "training configs, or folders walked for *.yaml, *.yml and *.json")
      ->required()
      ->type_name("PATH...");
  app->add_option(memplan::field(Target::gpu).flag, f->gpu, "GPU preset for configs that name no hardware.gpu (memplan gpus)")->type_name("PRESET");
  // The setup flags' names (estimator/fields.h), with check's meaning: a default for the configs.
  app->add_option(memplan::field(Size::gpu_memory).flag, f->gpu_memory, "device memory for configs that name no target, e.g. 24GiB")->type_name("SIZE");
  app->add_option(memplan::field(Count::num_gpus).flag, f->gpus, "number of GPUs for configs that name no hardware.num_gpus")->type_name("N");
  app->add_option(memplan::field(Target::calibration).flag, f->calibration, "calibration profile (applied to configs on its device)")->type_name("FILE");
  app->add_option("--format", f->format, "text (default), json (memplan.check/v1), github (workflow annotations), junit")
      ->check(CLI::IsMember({"text", "json", "github", "junit"}))
      ->type_name("FORMAT");
  app->add_option("--model", f->models,
                  "ID=MODEL: read the Hub id ID, where a config names it, as MODEL (a preset, config.json or model folder), "
                  "without the network; repeatable")
      ->type_name("ID=MODEL");
  app->add_flag("--strict", f->strict, "fail on warnings too (near-miss keys, DeepSpeed \"auto\" values)");
  app->add_flag("--allow-empty", f->allow_empty, "exit 0 when no training config was found to check (default: exit 2)");
  auto* baseline = app->add_option("--baseline", f->baseline, "compare each config with this config")->type_name("FILE");
  app->add_option("--base-ref", f->base_ref, "compare each config with the same path at this git revision")
      ->type_name("GIT_REF")
      ->excludes(baseline);
  app->add_option("--max-growth", f->max_growth, "fail when the peak grew more than this against the baseline, e.g. 10%")
      ->type_name("PCT");
  return {app, [io, f] { return run_check(io, *f); }};
}

}  // namespace memplan::cli
