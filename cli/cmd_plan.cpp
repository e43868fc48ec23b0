// memplan plan: flags -> base setup and search space -> planner::plan -> the plan, its
// runners-up, and the emitted config file (written atomically).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "profiles/files.h"
#include "profiles/reader.h"
#include "estimator/checked.h"
#include "estimator/estimate.h"
#include "planner/emit.h"
#include "planner/keep.h"
#include "planner/plan.h"
#include "planner/request.h"

namespace memplan::cli {
namespace {

struct PlanFlags {
  planner::PlanAsk ask;
  std::string out;
  bool force = false;
  std::string table;  // --table 8GiB,12GiB or GPU presets
  bool fresh = false;  // --fresh: memplan's own file for --emit even when --config is in that format
};

nlohmann::json candidate_json(const planner::Candidate& c) {
  const TrainingSetup& s = c.setup;
  return {{"micro_batch", s.batch.micro_batch},
          {"grad_accum", s.batch.grad_accum},
          {"global_batch", c.global_batch},
          {"precision", to_string(s.precision)},
          {"optimizer", to_string(s.optimizer)},
          {"checkpointing", to_string(s.checkpointing)},
          {"attention", to_string(s.attention)},
          {"zero_stage", s.parallel.zero_stage},
          {"offload", to_string(s.parallel.offload)},
          {"fsdp", to_string(s.parallel.fsdp)},
          {"finetune", to_string(s.finetune.mode)},
          {"liger", s.runtime.liger},
          {"peak_bytes", c.peak_bytes},
          {"host_per_node_bytes", c.host_per_node_bytes},
          {"host_fits", c.host_fits},
          {"fits", c.fits},
          {"modelled_step_seconds", c.time.total_s},
          {"modelled_tokens_per_s", c.time.tokens_per_s}};
}

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
    nlohmann::json doc = {{"schema", "memplan.plan-table/v1"}, {"memplan_version", MEMPLAN_VERSION}};
    doc["request"] = {{"model", s.model.name}, {"num_gpus", s.parallel.num_gpus}, {"global_batch", req.global_batch},
                      {"global_batch_source", planner::global_batch_source(ask)}, {"seq_len", s.batch.seq_len},
                      {"budget_fraction", req.budget}};
    doc["rows"] = nlohmann::json::array();
    for (const auto& row : rows) {
      nlohmann::json j = {{"label", row.label}, {"capacity_bytes", row.device.capacity_bytes}, {"found", row.result.found}};
      if (row.result.found) {
        j["best"] = candidate_json(row.result.best);
        j["optimizations"] = planner::optimisations(row.result.best.setup, s);
      } else {
        j["why_not"] = row.result.why_not.empty() ? row.result.format_note : row.result.why_not;
      }
      doc["rows"].push_back(j);
    }
    emit(io.out, doc, o.format());
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

// --emit for a --config already in that format: the user's file with only what the plan changes
// (planner/keep.h). "Before" is what the emitter writes for the file's own setup: the file read
// with the flags that say where it runs (model, GPU, count, versions), none of those that change
// the setup, so a flag's value the plan used (--seq-len 2048) is written into the file. The kept
// file is then re-estimated as its re-check line says, read from where it will be written; it is
// used only when that gives the plan's peak within 0.5%, otherwise `why` says what went wrong.
struct KeptConfig {
  planner::KeptFile file;
  std::vector<std::string> recheck_extra;  // flags the re-check needs beside the header's
};

std::optional<KeptConfig> keep_config(const profiles::SetupInputs& in, const profiles::SetupInputs& setup_in,
                                      const profiles::LoadedConfig& cfg, const planner::EmitContext& ec, planner::EmitFormat format,
                                      const std::string& fresh, const std::string& written_at, const Calibration* cal,
                                      int64_t plan_peak, std::string* why) {
  try {
    profiles::SetupInputs bi;
    bi.config = in.config;
    bi.format = in.format;
    bi.model = in.model;
    bi.gpu = in.gpu;
    bi.gpu_memory = in.gpu_memory;
    bi.allocator_cap = in.allocator_cap;
    bi.count_flag(Count::num_gpus) = in.count_flag(Count::num_gpus);
    bi.device = in.device;
    bi.calibration = in.calibration;
    bi.choice_flag(Choice::framework) = setup_in.choice_flag(Choice::framework);
    bi.torch_version = in.torch_version;
    bi.transformers_version = in.transformers_version;
    bi.count_flag(Count::gpus_per_node) = in.count_flag(Count::gpus_per_node);
    bi.host_memory = in.host_memory;
    planner::EmitContext eb = ec;
    eb.setup = profiles::build_setup(bi, cfg).setup;
    eb.setup.model = ec.setup.model;  // the same model, as the tool builds it (torchtune's, LitGPT's variant)
    const Batch& batch = eb.setup.batch;
    eb.global_batch = checked_mul(checked_mul(batch.micro_batch, batch.grad_accum, "the global batch"), eb.setup.parallel.data_parallel(),
                                  "the global batch");
    const std::string before = planner::emit(eb, format);
    const std::string user = profiles::detail::read_text_file(*in.config, Where::at_flag("--config"));
    KeptConfig k{planner::keep_user_file(user, before, fresh, *in.config, planner::emit_vocabulary(format)), {}};
    // The re-check the file states (or the flags its format cannot hold), and the model and format
    // the plan was given, which the user's file may name otherwise.
    std::string check = planner::recheck_from_header(k.file.text, "KEPT");
    if (check.empty()) {
      check = "memplan estimate --config KEPT";
      for (const std::string& a : planner::recheck_flags(format, ec)) check += " " + a;
    }
    const std::string prefix = "memplan estimate ";
    if (check.rfind(prefix, 0) != 0) throw InputError(Where{}, "its re-check line is not a memplan estimate command");
    CLI::App app;
    profiles::SetupInputs ci;
    add_setup_flags(app, ci);
    app.parse(check.substr(prefix.size()), false);
    ci.config.reset();
    ci.format.reset();
    // What the plan was told and the user's file may not say (a DeepSpeed config holds no GPU):
    // the target and the model as given.
    auto extra = [&](const char* flag, std::optional<std::string>& slot, const std::optional<std::string>& given) {
      if (!given || slot == given) return;
      slot = given;
      k.recheck_extra.insert(k.recheck_extra.end(), {flag, *given});
    };
    if (!ci.gpu && !ci.gpu_memory) {
      extra("--gpu", ci.gpu, in.gpu);
      extra("--gpu-memory", ci.gpu_memory, in.gpu_memory);
    }
    const std::optional<int64_t>& gpus = in.count_flag(Count::num_gpus);
    if (!ci.count_flag(Count::num_gpus) && gpus && *gpus > 1) {
      ci.count_flag(Count::num_gpus) = gpus;
      k.recheck_extra.insert(k.recheck_extra.end(), {field(Count::num_gpus).flag, std::to_string(*gpus)});
    }
    extra("--model", ci.model, in.model);
    if (in.format) k.recheck_extra.insert(k.recheck_extra.end(), {"--format", *in.format});
    const profiles::LoadedConfig back = profiles::load_config_text(k.file.text, written_at, written_at, in.format.value_or(""));
    const profiles::BuiltSetup cb = profiles::build_setup(ci, back);
    const int64_t peak = estimate(cb.setup, cal).verdict_bytes();
    const double off = std::abs(static_cast<double>(peak - plan_peak)) / static_cast<double>(plan_peak);
    if (off > 0.005) {
      *why = fmt::format("it re-estimates to {} where the plan is {} ({:+.1f}%)", gib(peak), gib(plan_peak),
                         100.0 * static_cast<double>(peak - plan_peak) / static_cast<double>(plan_peak));
      return std::nullopt;
    }
    return k;
  } catch (const InputError& e) {
    *why = e.message();
  } catch (const planner::KeepError& e) {
    *why = e.what();
  } catch (const CLI::Error& e) {
    *why = fmt::format("its re-check line does not parse ({})", e.what());
  }
  return std::nullopt;
}

// The command line's own contradictions, before anything is read.
void check_flags(const profiles::SetupInputs& in, const PlanFlags& f, const OutputFlags& o) {
  if (!f.out.empty() && f.ask.emit.empty())
    throw InputError(Where::at_flag("--out"), "--out writes the emitted config, and no --emit format was given",
                     fmt::format("add --emit FORMAT ({})", fmt::join(planner::emit_format_names(), ", ")));
  if (!f.ask.emit.empty() && f.out.empty() && o.format() != Format::table)
    throw InputError(Where::at_flag("--emit"), "--emit without --out prints the config on stdout, where --json/--yaml would print too",
                     "add --out FILE for the config, or drop --json/--yaml");
  if (!f.out.empty()) profiles::check_can_write(f.out, {f.force, Where::at_flag("--out"), "the config", profiles::input_files(in)});
  if (!f.table.empty() && !f.ask.emit.empty())
    throw InputError(Where::at_flag("--table"), "--table prints one plan per memory size; --emit writes one config",
                     "drop --emit (or --table)");
}

// The config --emit asked for: written to --out (or printed on stdout), --config's own file with
// the plan's changes where it is in that format and keeps the plan's peak.
struct Emitted {
  planner::EmitContext context;
  std::string text;
  std::string written;             // --out, once written
  std::optional<KeptConfig> kept;  // --config's own file with the plan's changes
  std::string not_kept;            // why it could not be kept
};

Emitted emit_config(Io io, const profiles::SetupInputs& in, const PlanFlags& f, const planner::ResolvedPlan& rp,
                    const planner::PlanResult& r) {
  Emitted e;
  e.context = planner::emit_context(rp, r);
  if (!rp.emits) return e;
  e.text = planner::emit(e.context, rp.format);
  if (in.config && !f.fresh && planner::emit_format_of_config(rp.config.kind) == rp.format) {
    planner::EmitContext users = e.context;
    users.users_file = true;
    e.kept = keep_config(in, rp.inputs, rp.config, users, rp.format, planner::emit(users, rp.format), f.out.empty() ? *in.config : f.out,
                         rp.calibration(), r.best.peak_bytes, &e.not_kept);
    if (e.kept) e.text = e.kept->file.text;
  }
  if (f.out.empty()) {
    io.out << e.text;
  } else {
    profiles::write_file_atomically(f.out, e.text, {f.force, Where::at_flag("--out"), "the config", profiles::input_files(in)});
    e.written = f.out;
  }
  return e;
}

std::string target_text(const TrainingSetup& s) {
  return fmt::format("{} x {} ({} each)", s.parallel.num_gpus, s.device.name, gib(s.device.capacity_bytes));
}

// memplan.plan/v1: the request, what was searched, and the plan (or why none).
nlohmann::json plan_document(const planner::ResolvedPlan& rp, const planner::PlanResult& r, const Emitted& e, const PlanFlags& f,
                             const profiles::SetupInputs& in) {
  const TrainingSetup& s = rp.base();
  const planner::PlanRequest& req = rp.request;
  nlohmann::json doc = {{"schema", "memplan.plan/v1"}, {"memplan_version", MEMPLAN_VERSION}};
  doc["request"] = {{"model", s.model.name},
                    {"gpu", s.device.name},
                    {"num_gpus", s.parallel.num_gpus},
                    {"capacity_bytes", s.device.capacity_bytes},
                    {"global_batch", req.global_batch},
                    {"seq_len", s.batch.seq_len},
                    {"global_batch_source", planner::global_batch_source(rp.ask)},
                    {"budget_fraction", req.budget},
                    {"budget_bytes", r.budget_bytes},
                    {"host_memory_bytes", s.parallel.host_memory_bytes > 0 ? nlohmann::json(s.parallel.host_memory_bytes) : nlohmann::json(nullptr)},
                    {"gpus_per_node", s.parallel.gpus_per_node}};
  doc["left_out"] = nlohmann::json::array();
  for (const auto& l : r.left_out) doc["left_out"].push_back({{"option", l.option}, {"why", l.why}});
  doc["notes"] = r.regime_notes;
  if (!r.format_note.empty()) doc["format_note"] = r.format_note;
  doc["tiers"] = nlohmann::json::array();
  for (const auto& tp : r.tiers) {
    nlohmann::json j = {{"tier", tp.tier}, {"fraction", tp.fraction}, {"budget_bytes", tp.budget_bytes}, {"found", tp.found}};
    if (tp.found) j["best"] = candidate_json(tp.best);
    doc["tiers"].push_back(j);
  }
  doc["search"] = {{"candidates", r.candidates},
                   {"fitting", r.fitting},
                   {"activation_timelines", r.timelines},
                   {"memory_compositions", r.compositions},
                   {"seconds", r.seconds}};
  doc["throughput_note"] = "step times and tokens/s are modelled from FLOPs and bandwidths, not measured";
  doc["calibrated"] = rp.built.calibration.has_value();
  if (rp.built.calibration) doc["calibration"] = rp.built.calibration->file;
  if (!r.found) {
    doc["found"] = false;
    doc["why_not"] = r.why_not;
    doc["smallest_gpu_where_it_fits"] = r.smallest_gpu;
    doc["smallest_gpu_count_where_it_fits"] = r.smallest_gpu_count;
    return doc;
  }
  doc["found"] = true;
  doc["best"] = candidate_json(r.best);
  doc["best"]["modelled"] = {{"compute_s", r.best.time.compute_s},
                             {"comm_s", r.best.time.comm_s},
                             {"offload_s", r.best.time.offload_s},
                             {"optimizer_s", r.best.time.optimizer_s},
                             {"utilisation", r.best.time.utilisation}};
  if (!r.batch_note.empty()) doc["batch_note"] = r.batch_note;
  doc["runners_up"] = nlohmann::json::array();
  for (const auto& ru : r.runners_up) {
    nlohmann::json j = candidate_json(ru.candidate);
    j["dimension"] = ru.dimension;
    j["value"] = ru.value;
    j["why"] = ru.why;
    doc["runners_up"].push_back(j);
  }
  if (!e.written.empty()) doc["emitted"] = {{"format", f.ask.emit}, {"path", e.written}};
  if (e.kept) doc["emitted"]["kept"] = {{"from", *in.config}, {"changes", e.kept->file.changes}};
  else if (!e.not_kept.empty()) doc["emitted"]["not_kept"] = {{"from", *in.config}, {"why", e.not_kept}};
  return doc;
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
void print_plan(std::ostream& report, const planner::ResolvedPlan& rp, const planner::PlanResult& r, const Emitted& e, const PlanFlags& f,
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
  report << fmt::format("  searched {} candidates in {:.1f} ms ({} activation timelines, {} memory compositions); {} fit\n",
                        thousands(r.candidates), 1000 * r.seconds, thousands(r.timelines), thousands(r.compositions), thousands(r.fitting));
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
    // A format whose header states how to re-check it (HF, Axolotl, accelerate) is taken at its word;
    // otherwise the flags the format cannot carry are added (recheck_flags).
    std::string check = planner::recheck_from_header(e.text, file);
    if (check.empty()) {
      check = fmt::format("memplan estimate --config {}", file);
      for (const std::string& a : planner::recheck_flags(rp.format, e.context)) check += " " + a;
    }
    if (e.kept)
      for (const std::string& a : e.kept->recheck_extra) check += " " + a;
    report << "  re-check it: " << check << "\n";
  }
}

int run_plan(Io io, const profiles::SetupInputs& in, const PlanFlags& f, const OutputFlags& o) {
  check_flags(in, f, o);
  const auto resolved = planner::resolve_plan(in, f.ask, f.table, [&](const std::vector<Warning>& w) { print_warnings(io.err, w); });
  const planner::ResolvedPlan& rp = *resolved;
  if (!rp.table.empty()) return run_table(io, rp, o);
  const planner::PlanResult r = planner::plan(rp.request, rp.cards);
  std::ostream& report = rp.emits && f.out.empty() ? io.err : io.out;  // the config itself goes to stdout
  const Emitted e = r.found ? emit_config(io, in, f, rp, r) : Emitted{};
  if (o.format() != Format::table) emit(report, plan_document(rp, r, e, f, in), o.format());
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
  app->add_option("--global-batch", f->ask.global_batch,
                  "sequences per optimizer step over all GPUs (default: the config's, or micro-batch x accumulation x GPUs)")
      ->type_name("N");
  app->add_option("--tier", f->ask.tier, "memory budget: safe (85%), balanced (90%), aggressive (95%)")->type_name("TIER");
  app->add_option("--budget", f->ask.budget, "memory budget as a fraction of the card (overrides --tier)")->type_name("F");
  app->add_option("--optimizers", f->ask.optimizers, "optimizers the plan may pick (comma list; default: --optimizer or adamw)")->type_name("LIST");
  app->add_option("--precisions", f->ask.precisions, "precision regimes the plan may pick (comma list)")->type_name("LIST");
  app->add_flag("--no-offload", f->ask.no_offload, "never offload to the host");
  app->add_flag("--no-deepspeed", f->ask.no_deepspeed, "never plan DeepSpeed (ZeRO); DDP and FSDP stay (--zero 0 says the same)");
  app->add_option("--table", f->table,
                  "one plan per memory size or GPU preset (8GiB,12GiB,16GiB,24GiB or t4,l4,...; at most 64), printed as a markdown table")
      ->type_name("LIST");
  app->add_option("--max-micro-batch", f->ask.max_micro_batch, "largest micro-batch to consider (default 1024, at most 65536)")->type_name("N");
  app->add_option("--emit", f->ask.emit, "print the plan as a " + fmt::format("{}", fmt::join(planner::emit_format_names(), "|")) +
                                              " config (on stdout; the report goes to stderr)")->type_name("FORMAT");
  app->add_option("--out", f->out, "write the --emit config to this file instead (atomically)")->type_name("FILE");
  app->add_flag("--force", f->force, "let --out replace an existing file");
  app->add_flag("--fresh", f->fresh,
                "with --emit for a --config in that format: write memplan's own file instead of the config with only the plan's changes");
  add_output_flags(*app, *o);
  return {app, [io, in, f, o] { return run_plan(io, *in, *f, *o); }};
}

}  // namespace memplan::cli
