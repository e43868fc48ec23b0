// memplan plan: flags -> base setup and search space -> planner::plan -> the plan, its
// runners-up, and the emitted config file (written atomically).
#include <fmt/format.h>

#include <ostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/python_env.h"
#include "estimator/estimate.h"
#include "planner/emit.h"
#include "planner/plan.h"
#include "planner/request.h"

namespace memplan::cli {
namespace {

using api::EmittedConfig;
using api::PlanFlags;

void print_left_out(std::ostream& report, const planner::PlanResult& r) {
  if (r.left_out.empty()) return;
  report << "\n  left out of the search:\n";
  for (const auto& l : r.left_out) report << fmt::format("    {}: {}\n", l.option, l.why);
}

// --table: one plan per memory size, as the markdown table memory guides write by hand.
int run_table(Io io, const planner::ResolvedPlan& rp, const OutputFlags& o) {
  const TrainingSetup& s = rp.base();
  const planner::PlanAsk& ask = rp.ask;
  const planner::PlanRequest& req = rp.request;
  const std::vector<planner::TableRow> rows = planner::plan_table(req, rp.table);
  if (o.format() != Format::table) {
    emit(io.out, api::plan_table_json(rp, rows), o.format());
    return kExitOk;
  }
  io.out << fmt::format("memplan plan: {} on {} GPU{}, global batch {} x {} tokens ({}), tier {:.0f}%; per size the modelled fastest plan (or a simpler one within 2%)\n\n",
                        s.model.name, s.parallel.num_gpus, s.parallel.num_gpus == 1 ? "" : "s", req.global_batch, s.batch.seq_len,
                        planner::global_batch_source(ask), 100 * req.budget);
  io.out << planner::table_markdown(rows, s);
  bool any = false;
  for (const auto& row : rows) any = any || row.result.found;
  return any ? kExitOk : kExitDoesNotFit;
}

std::string target_text(const TrainingSetup& s) {
  return fmt::format("{} x {} ({} each)", s.parallel.num_gpus, s.device.name, gib(s.device.capacity_bytes));
}

// Nothing fits at all (why_not), or something fits that --emit's format cannot write (format_note).
void print_no_plan(std::ostream& report, const planner::ResolvedPlan& rp, const planner::PlanResult& r) {
  const TrainingSetup& s = rp.base();
  const planner::PlanRequest& req = rp.request;
  report << fmt::format("memplan plan: {} on {}, global batch {} x {} tokens\n", s.model.name, target_text(s), req.global_batch, s.batch.seq_len);
  const bool unexpressed = r.why_not.empty() && !r.format_note.empty();
  report << "  cannot fit: " << (unexpressed ? r.format_note : r.why_not) << "\n";
  if (!r.smallest_gpu.empty())
    report << fmt::format("  smallest preset card where a plan exists ({} GPUs): {}\n", s.parallel.num_gpus, r.smallest_gpu);
  if (r.smallest_gpu_count > 0)
    report << fmt::format("  fewest {} GPUs where a plan exists: {}\n", s.device.name, r.smallest_gpu_count);
  if (r.smallest_gpu.empty() && r.smallest_gpu_count == 0 && !unexpressed) {
    const int64_t mp = s.parallel.tensor_parallel * s.parallel.pipeline_parallel;
    const int64_t cap = std::min<int64_t>(4096, req.global_batch * mp);
    report << fmt::format("  no preset card, and no count of these GPUs up to {}, makes it fit{}\n", cap,
                          cap < 4096 ? fmt::format(" (global batch {} allows at most {} data-parallel ranks)", req.global_batch,
                                                   req.global_batch)
                                     : "");
    if (!req.constraints.allow_offload)
      report << "  offload was not allowed (--no-offload); it moves optimizer states and weights to the host\n";
  }
  if (!r.format_note.empty() && !unexpressed) report << "  " << r.format_note << "\n";
  print_left_out(report, r);
}

// The plan: the best, its tiers, why each runner-up lost, what was left out, and the file written.
void print_plan(std::ostream& report, const planner::ResolvedPlan& rp, const planner::PlanResult& r, const EmittedConfig& e, const PlanFlags& f,
                const profiles::SetupInputs& in) {
  const TrainingSetup& s = rp.base();
  const planner::PlanRequest& req = rp.request;
  const planner::PlanAsk& ask = rp.ask;
  const std::string target = target_text(s);
  const TrainingSetup& w = r.best.setup;
  report << fmt::format("memplan plan: {} on {}, global batch {} x {} tokens, tier {} ({:.0f}%: {})\n", s.model.name, target,
                        req.global_batch, s.batch.seq_len, f.ask.budget ? "custom" : f.ask.tier, 100 * req.budget, gib(r.budget_bytes));
  if (!ask.global_batch) report << fmt::format("  global batch {} from {}\n", req.global_batch, planner::global_batch_source(ask));
  if (!rp.framework_from_emit.empty())
    report << fmt::format("  planned for {}'s runtime (--emit {}; --framework overrides it)\n", rp.framework_from_emit, f.ask.emit);
  if (rp.built.calibration) report << fmt::format("  calibrated with {}\n", rp.built.calibration->file);
  report << fmt::format("  searched {} candidates in {:.1f} ms ({} activation timelines, {} memory compositions); {} fit{}\n",
                        thousands(r.candidates), 1000 * r.seconds, thousands(r.timelines), thousands(r.compositions), thousands(r.fitting),
                        r.undecided > 0 ? fmt::format(", up to {} more in groups that cannot change the plan (not replayed)", thousands(r.undecided))
                                        : "");
  report << "\n  best (highest modelled throughput that fits, or a simpler plan within 2% of it):\n";
  report << fmt::format("    micro-batch {}, accumulation {}, global batch {}{}\n", w.batch.micro_batch, w.batch.grad_accum,
                        r.best.global_batch, r.batch_note.empty() ? " (exact)" : "");
  if (!r.batch_note.empty()) report << "    note: " << r.batch_note << "\n";
  report << fmt::format("    precision {}, optimizer {}, checkpointing {}, attention {}{}, {}{}\n", to_string(w.precision),
                        to_string(w.optimizer), to_string(w.checkpointing), to_string(w.attention),
                        w.runtime.liger ? ", Liger kernels" : "", planner::sharding_of(w).describe(w.parallel.data_parallel()),
                        w.finetune.mode == FinetuneMode::full ? "" : fmt::format(", {} r={}", to_string(w.finetune.mode), w.finetune.lora_rank));
  report << fmt::format("    peak {} ({}) of {}; headroom {} below the budget\n", gib(r.best.peak_bytes),
                        percent(static_cast<double>(r.best.peak_bytes) / static_cast<double>(s.device.capacity_bytes)),
                        gib(s.device.capacity_bytes), gib(r.budget_bytes - r.best.peak_bytes));
  report << fmt::format("    step {:.2f} s (compute {:.2f}, communication {:.2f}, offload {:.2f}, optimizer {:.2f}), ~{} tokens/s: modelled, not measured\n",
                        r.best.time.total_s, r.best.time.compute_s, r.best.time.comm_s, r.best.time.offload_s, r.best.time.optimizer_s,
                        thousands(static_cast<int64_t>(r.best.time.tokens_per_s)));
  {
    // Host memory of the best: per GPU and per node, against the node's RAM when known.
    const int64_t ranks = w.parallel.ranks_per_node();
    if (r.best.host_per_node_bytes > 0 || s.parallel.host_memory_bytes > 0)
      report << fmt::format("    host memory {} per GPU, {} per node ({} rank{}){}\n", gib(r.best.host_per_node_bytes / ranks),
                            gib(r.best.host_per_node_bytes), ranks, ranks == 1 ? "" : "s",
                            s.parallel.host_memory_bytes > 0
                                ? fmt::format(" of the node's {}", gib(s.parallel.host_memory_bytes))
                                : w.parallel.offload != Offload::none ? ": node RAM unknown, pass --host-memory SIZE to check the offload"
                                                                      : "");
  }
  for (const std::string& n : r.regime_notes) report << "    note: " << n << "\n";
  if (!r.format_note.empty()) report << "    note: " << r.format_note << "\n";
  if (!r.tiers.empty()) {
    report << "\n  tiers (the same search, other budgets):\n";
    for (const auto& tp : r.tiers) {
      if (!tp.found) {
        report << fmt::format("    {:<10} {:>3.0f}%  nothing fits\n", tp.tier, 100 * tp.fraction);
        continue;
      }
      const TrainingSetup& x = tp.best.setup;
      report << fmt::format("    {:<10} {:>3.0f}%  micro-batch {} x {}, {}, {}, {}{}, {}: {} (~{} tokens/s)\n", tp.tier, 100 * tp.fraction,
                            x.batch.micro_batch, x.batch.grad_accum, to_string(x.precision), to_string(x.checkpointing),
                            to_string(x.attention), x.runtime.liger ? ", Liger" : "", planner::sharding_of(x).describe(x.parallel.data_parallel()),
                            gib(tp.best.peak_bytes),
                            thousands(static_cast<int64_t>(tp.best.time.tokens_per_s)));
    }
  }
  report << "\n  runners-up (one change from the best) and why each lost:\n";
  for (const auto& ru : r.runners_up)
    report << fmt::format("    {:<14} {:<28} {}\n", ru.dimension, ru.value, ru.why);
  print_left_out(report, r);
  if (!f.ask.emit.empty()) {
    const std::string file = e.written.empty() ? planner::default_file_name(rp.format) : e.written;
    if (e.written.empty()) report << fmt::format("\n  printed the {} config on stdout (--out FILE writes it to a file)\n", f.ask.emit);
    else report << fmt::format("\n  wrote {} ({})\n", e.written, f.ask.emit);
    if (e.kept) {
      const size_t n = e.kept->file.changes.size();
      report << fmt::format("  kept {} and changed {} (--fresh writes memplan's own file instead){}\n", *in.config,
                            n == 0 ? "nothing: it holds the plan" : fmt::format("{} value{}", n, n == 1 ? "" : "s"), n == 0 ? "" : ":");
      for (const std::string& c : e.kept->file.changes) report << "    " << c << "\n";
    } else if (!e.not_kept.empty()) {
      report << fmt::format("  note: memplan's own {} file, not {} with the plan's changes: {}\n", f.ask.emit, *in.config, e.not_kept);
    }
    const std::string check = api::recheck_command(e, rp, file);
    report << "  re-check it: " << check << "\n";
  }
}

int run_plan(Io io, const profiles::SetupInputs& in, const PlanFlags& f, const OutputFlags& o) {
  api::check_plan_flags(in, f, o.format() != Format::table);
  const auto resolved = planner::resolve_plan(in, f.ask, f.table, [&](const std::vector<Warning>& w) { print_warnings(io.err, w); });
  const planner::ResolvedPlan& rp = *resolved;
  if (!rp.table.empty()) return run_table(io, rp, o);
  const planner::PlanResult r = planner::plan(rp.request, rp.cards);
  std::ostream& report = rp.emits && f.out.empty() ? io.err : io.out;  // the config itself goes to stdout
  const EmittedConfig e = r.found ? api::emit_plan_config(in, f, rp, r) : EmittedConfig{};
  if (r.found && rp.emits && f.out.empty()) io.out << e.text;
  if (o.format() != Format::table) emit(report, api::plan_json(rp, r, e, f, in), o.format());
  else if (r.found) print_plan(report, rp, r, e, f, in);
  else print_no_plan(report, rp, r);
  return r.found ? kExitOk : kExitDoesNotFit;
}

}  // namespace

Command register_plan(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("plan", "the best configuration that fits, with runners-up; emits configs people paste");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto f = std::make_shared<PlanFlags>();
  auto o = std::make_shared<OutputFlags>();
  add_setup_flags(*app, *in);
  api::add_plan_flags(*app, *f);
  add_output_flags(*app, *o);
  return {app, [io, in, f, o] { return run_plan(io, with_environment(*in), *f, *o); }};
}

}  // namespace memplan::cli
