// memplan report: the estimate of a setup (the same flags and --config as estimate) written as
// one self-contained HTML file, or one chart as SVG (--svg CHART), through report/.
#include <fmt/format.h>

#include <memory>
#include <ostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/probes.h"
#include "cli/run_trace.h"
#include "cli/python_env.h"
#include "planner/request.h"
#include "profiles/files.h"
#include "report/report.h"

namespace memplan::cli {
namespace {

struct ReportFlags {
  std::string out;
  std::string svg;
  std::string monitor_log;
  bool force = false;
  bool plan = false;
  std::optional<int64_t> global_batch;
  std::string probes;
};

// The most plan rows the chart shows (the fastest of each kind first).
constexpr size_t kMaxPlanRows = 10;

// A plan candidate in two short lines for the chart.
report::PlanRow plan_row(const planner::Candidate& c, bool best) {
  const TrainingSetup& s = c.setup;
  report::PlanRow r;
  r.label = fmt::format("micro-batch {} x {} accumulation", s.batch.micro_batch, s.batch.grad_accum);
  std::string d = fmt::format("{}, {}, checkpointing {}, {}", to_string(s.precision), to_string(s.optimizer), to_string(s.checkpointing),
                              to_string(s.attention));
  if (s.parallel.zero_stage > 0) d += fmt::format(", ZeRO-{}", s.parallel.zero_stage);
  if (s.parallel.fsdp != FsdpMode::none) d += fmt::format(", FSDP {}", to_string(s.parallel.fsdp));
  if (s.parallel.offload != Offload::none) d += fmt::format(", offload {}", to_string(s.parallel.offload));
  if (s.runtime.liger) d += ", Liger";
  r.detail = d;
  r.peak_bytes = c.peak_bytes;
  r.tokens_per_s = c.time.tokens_per_s;
  r.best = best;
  return r;
}


// --monitor-log: the run's memory over time, against the estimate when the setup flags name a model.
int run_log_report(Io io, const profiles::SetupInputs& in, const ReportFlags& f) {
  for (const auto& [given, flag] : {std::pair{f.plan, "--plan"}, std::pair{f.global_batch.has_value(), "--global-batch"},
                                     std::pair{!f.probes.empty(), "--probes"}})
    if (given)
      throw InputError(Where::at_flag(flag), fmt::format("{} belongs to the estimate's report, not to a run's (--monitor-log)", flag),
                       fmt::format("drop {}, or make two reports", flag));
  if (!f.svg.empty() && f.svg != "run")
    throw InputError(Where::at_flag("--svg"), fmt::format("with --monitor-log the one chart is 'run' (got '{}')", profiles::clip(f.svg)),
                     "drop --monitor-log for the estimate's charts");
  auto inputs = profiles::input_files(in);
  inputs.emplace_back(f.monitor_log, "--monitor-log");
  const profiles::WriteOptions w{f.force, Where::at_flag("--out"), f.svg.empty() ? "the report" : "the chart", inputs};
  profiles::check_can_write(f.out, w);
  RunTraceBuilder trace;
  for_each_monitor_record(f.monitor_log, Where::at_flag("--monitor-log"), [&](const watch::LogRecord& rec) { trace.add(rec); });
  const auto e = estimate_of_flags(io.err, in);
  const report::RunTrace r = trace.finish(e ? &e->breakdown : nullptr);
  const std::string out = f.svg.empty() ? report::run_html(r) : report::run_svg(r);
  profiles::write_file_atomically(f.out, out, w);
  io.out << fmt::format("wrote {} ({} of {}, {} bytes)\n", f.out, f.svg.empty() ? "the run's report" : "the run chart", r.title, out.size());
  return kExitOk;
}

int run_report(Io io, const profiles::SetupInputs& in, const ReportFlags& f) {
  if (f.out.empty())
    throw InputError(Where::at_flag("--out"), "memplan report writes a file: --out is missing",
                     "e.g. memplan report --config examples/quickstart.yaml --out report.html");
  if (!f.monitor_log.empty()) return run_log_report(io, in, f);
  std::optional<report::Chart> chart;
  if (!f.svg.empty()) {
    chart = report::parse_chart(f.svg);
    if (!chart && f.svg == "run")
      throw InputError(Where::at_flag("--svg"), "the run chart is a monitor log's", "add --monitor-log FILE (memplan watch --log writes one)");
    if (!chart)
      throw InputError(Where::at_flag("--svg"), fmt::format("unknown chart '{}'", profiles::clip(f.svg)),
                       fmt::format("expected one of: {}", fmt::join(report::chart_names(), ", ")));
  }
  if (chart == report::Chart::plan && !f.plan)
    throw InputError(Where::at_flag("--svg"), "the plan chart needs --plan", "add --plan (and --global-batch N unless the setup gives one)");
  if (chart == report::Chart::probes && f.probes.empty())
    throw InputError(Where::at_flag("--svg"), "the probes chart needs --probes FILE", "a saved memplan calibrate --json document");
  if (f.global_batch && !f.plan)
    throw InputError(Where::at_flag("--global-batch"), "--global-batch is the plan's: it needs --plan", "add --plan, or drop --global-batch");
  auto inputs = profiles::input_files(in);
  if (!f.probes.empty()) inputs.emplace_back(f.probes, "--probes");
  const profiles::WriteOptions w{f.force, Where::at_flag("--out"), chart ? "the chart" : "the report", inputs};
  profiles::check_can_write(f.out, w);
  report::Input r;
  if (!f.probes.empty()) {
    const profiles::SavedCalibration saved = profiles::load_saved_calibration(f.probes);
    const calibrate::FitReport fit = fit_saved(saved);
    for (const calibrate::ProbeReport& p : fit.probes) r.probes.push_back({p.name, p.measured.device, p.uncalibrated.device, p.held_out});
    const auto device = saved.stamp.find("device_name");
    r.probes_note = fmt::format("{} probes on {}: fit {} ({}); mean |error| {:.1f}% uncalibrated, {:.1f}% held out", fit.probes.size(),
                                device == saved.stamp.end() ? "?" : device->second, fit.model.empty() ? "nothing fitted" : fit.model,
                                fit.accepted ? "accepted" : "refused", 100 * fit.mean_uncalibrated, 100 * fit.mean_held_out);
  }
  std::unique_ptr<const planner::ResolvedPlan> rp;
  profiles::BuiltSetup built;
  if (f.plan) {
    // The plan `memplan plan` makes with the same flags: its request resolved the same way.
    planner::PlanAsk ask;
    ask.global_batch = f.global_batch;
    rp = planner::resolve_plan(in, ask, "", [&](const std::vector<Warning>& warn) { print_warnings(io.err, warn); });
    planner::PlanRequest whole = rp->request;
    whole.resolve_all = true;  // the report lists every group's best beside the plan's
    const planner::PlanResult p = planner::plan(whole, rp->cards);
    r.plan_budget_bytes = p.budget_bytes;
    r.plan_note = fmt::format("global batch {} x {} tokens ({}), budget {:.0f}% of the card: {} candidates, {} fit{}", rp->request.global_batch,
                              rp->base().batch.seq_len, planner::global_batch_source(rp->ask), 100 * rp->request.budget,
                              text::thousands(p.candidates), text::thousands(p.fitting), p.found ? "" : "; nothing fits");
    if (p.found) {
      r.plan.push_back(plan_row(p.best, true));
      for (const planner::Candidate& c : p.group_bests) {
        if (r.plan.size() >= kMaxPlanRows) break;
        if (c.peak_bytes == p.best.peak_bytes && c.time.tokens_per_s == p.best.time.tokens_per_s && describe(c.setup) == describe(p.best.setup))
          continue;
        r.plan.push_back(plan_row(c, false));
      }
    }
  } else {
    built = profiles::build_setup(in);
    print_warnings(io.err, built.warnings);
  }
  const profiles::BuiltSetup& b = rp ? rp->built : built;
  r.setup = b.setup;
  r.estimate = estimate(b.setup, calibration_of(b));
  r.calibration = calibration_of(b);
  r.version = MEMPLAN_VERSION;
  const TrainingSetup& s = b.setup;
  r.title = s.device.capacity_bytes > 0 ? fmt::format("{} on {}", s.model.name, s.device.name) : s.model.name;
  r.lines.push_back(describe(s));
  r.lines.push_back(describe_runtime(b));
  if (!b.config_path.empty()) r.lines.push_back(fmt::format("config: {} (read as {})", b.config_path, b.config_format));
  const Verdict v = judge(r.estimate, s);
  const std::string verdict =
      v.known ? fmt::format("{} of {} ({:.1f}%, {}): {}", gib(r.estimate.verdict_bytes()), gib(s.device.capacity_bytes), 100 * v.utilization,
                            v.status, v.fits ? "fits the target" : v.runs ? "runs, above the target" : "does not fit")
              : fmt::format("{} (no device capacity: pass --gpu or --gpu-memory for a verdict)", gib(r.estimate.verdict_bytes()));
  r.lines.push_back("verdict: " + verdict);
  const std::string text = chart ? report::svg(r, *chart) : report::html(r);
  profiles::write_file_atomically(f.out, text, w);
  io.out << fmt::format("wrote {} ({}, {} bytes): {}\n", f.out, chart ? fmt::format("the {} chart as SVG", report::to_string(*chart)) : "HTML report",
                        text.size(), verdict);
  return kExitOk;
}

}  // namespace

Command register_report(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("report", "the estimate as pictures: one self-contained HTML file (or one chart as SVG)");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto f = std::make_shared<ReportFlags>();
  add_setup_flags(*app, *in);
  app->add_option("--out", f->out, "the file to write (atomically): the HTML report, or the --svg chart")->type_name("FILE");
  app->add_option("--svg", f->svg, "write only this chart, as SVG: breakdown|phases|micro-batch|seq-len|layers|plan (with --plan)|probes (with --probes), "
                  "run (with --monitor-log)")
      ->type_name("CHART");
  app->add_option("--monitor-log", f->monitor_log,
                  "a run's memory over time instead: a memplan.monitor/v1 log (memplan watch --log, memplan.Monitor(log=...)), "
                  "against the estimate when setup flags name a model")
      ->type_name("FILE");
  app->add_flag("--force", f->force, "let --out replace an existing file");
  app->add_flag("--plan", f->plan, "add the plan's candidates (memplan plan's search with the same flags), their peak and modelled speed");
  app->add_option("--global-batch", f->global_batch, "with --plan: sequences per optimizer step (default: the setup's)")->type_name("N");
  app->add_option("--probes", f->probes,
                  "add a calibration run's probes (a saved memplan calibrate --json): measured against estimated, and against "
                  "the fit made without each")
      ->type_name("FILE");
  return {app, [io, in, f] { return run_report(io, with_environment(*in), *f); }};
}

}  // namespace memplan::cli
