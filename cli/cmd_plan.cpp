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
#include "planner/emit.h"
#include "planner/plan.h"

namespace memplan::cli {
namespace {

struct PlanFlags {
  planner::PlanAsk ask;
  std::string out;
  bool force = false;
};

planner::ModelRef model_ref(const TrainingSetup& s) {
  if (const auto p = profiles::find_model_preset(s.model.name); p && p->name == s.model.name)
    return {planner::ModelRef::Kind::preset, p->name};
  if (!s.model.hf_repo.empty())
    if (const auto p = profiles::find_model_preset(s.model.hf_repo)) return {planner::ModelRef::Kind::preset, p->name};
  return {planner::ModelRef::Kind::inline_spec, s.model.name};
}

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
          {"peak_bytes", c.peak_bytes},
          {"fits", c.fits},
          {"modelled_step_seconds", c.time.total_s},
          {"modelled_tokens_per_s", c.time.tokens_per_s}};
}

int run_plan(Io io, const profiles::SetupInputs& in, const PlanFlags& f, const OutputFlags& o) {
  if (!f.out.empty() && f.ask.emit.empty())
    throw InputError(Where::at_flag("--out"), "--out writes the emitted config, and no --emit format was given",
                     fmt::format("add --emit FORMAT ({})", fmt::join(planner::emit_format_names(), ", ")));
  // The emitted config goes to stdout unless --out names a file; the report then goes to stderr.
  const bool config_to_stdout = !f.ask.emit.empty() && f.out.empty();
  if (config_to_stdout && o.format() != Format::table)
    throw InputError(Where::at_flag("--emit"), "--emit without --out prints the config on stdout, where --json/--yaml would print too",
                     "add --out FILE for the config, or drop --json/--yaml");
  if (!f.out.empty()) profiles::check_can_write(f.out, {f.force, Where::at_flag("--out"), "the config"});
  std::ostream& report = config_to_stdout ? io.err : io.out;
  planner::EmitFormat fmt_out = planner::EmitFormat::memplan;
  if (!f.ask.emit.empty() && !planner::parse_emit_format(f.ask.emit, &fmt_out))
    throw InputError(Where::at_flag("--emit"), fmt::format("unknown format '{}'", f.ask.emit),
                     fmt::format("expected one of: {}", fmt::join(planner::emit_format_names(), ", ")));
  // A plan for a tool is made with that tool's runtime (its defaults decide memory), unless
  // --framework or the config says which runs.
  const profiles::LoadedConfig cfg = in.config ? profiles::load_config(*in.config, in.format.value_or("")) : profiles::LoadedConfig{};
  profiles::SetupInputs setup_in = in;
  if (!f.ask.emit.empty() && !in.framework && !cfg.origin.fields.count("runtime.framework"))
    if (const auto fw = planner::emit_framework(fmt_out)) setup_in.framework = to_string(*fw);
  profiles::BuiltSetup b = profiles::build_setup(setup_in, cfg);
  print_warnings(io.err, b.warnings);
  // torchtune and LitGPT name models their own way, and LitGPT builds its own variant (untied,
  // padded vocabulary): the plan is made for the model the tool trains.
  planner::ToolModelName tool;
  if (fmt_out == planner::EmitFormat::torchtune || fmt_out == planner::EmitFormat::litgpt) {
    const auto t = profiles::tool_model(b.setup.model, f.ask.emit);
    if (!t)
      throw InputError(Where::at_flag("--emit"),
                       fmt::format("{} has no model of {}'s architecture", f.ask.emit == "torchtune" ? "torchtune" : "LitGPT",
                                   b.setup.model.name),
                       f.ask.emit == "torchtune" ? "torchtune builds the models of torchtune/models/*/_model_builders.py @ v0.6.1"
                                                 : "LitGPT builds the models of litgpt/config.py @ v0.5.13");
    b.setup.model = t->spec;
    tool = {t->name, t->tokenizer, t->checkpointer_type};
  }
  const TrainingSetup& s = b.setup;
  planner::PlanAsk ask = f.ask;
  ask.config_global_batch = b.global_batch;
  ask.optimizer_fixed = in.optimizer.has_value();
  ask.precision_fixed = in.precision.has_value();
  ask.attention_fixed = in.attention.has_value();
  ask.checkpointing_fixed = in.checkpointing.has_value();
  const planner::PlanRequest req = planner::make_request(s, ask, calibration_of(b));
  std::vector<std::pair<std::string, DeviceSpec>> cards;
  const auto& catalog = profiles::gpu_catalog();
  for (const profiles::GpuProfile* g : catalog.all()) {
    TrainingSetup t = s;
    profiles::apply_gpu(t, *g, catalog);
    cards.emplace_back(g->name, t.device);
  }
  const planner::PlanResult r = planner::plan(req, cards);

  const std::string target = fmt::format("{} x {} ({} each)", s.parallel.num_gpus, s.device.name, gib(s.device.capacity_bytes));
  nlohmann::json doc = {{"schema", "memplan.plan/v1"}, {"memplan_version", MEMPLAN_VERSION}};
  doc["request"] = {{"model", s.model.name},
                    {"gpu", s.device.name},
                    {"num_gpus", s.parallel.num_gpus},
                    {"capacity_bytes", s.device.capacity_bytes},
                    {"global_batch", req.global_batch},
                    {"seq_len", s.batch.seq_len},
                    {"budget_fraction", req.budget},
                    {"budget_bytes", r.budget_bytes}};
  doc["search"] = {{"candidates", r.candidates},
                   {"fitting", r.fitting},
                   {"activation_timelines", r.timelines},
                   {"memory_compositions", r.compositions},
                   {"seconds", r.seconds}};
  doc["throughput_note"] = "step times and tokens/s are modelled from FLOPs and bandwidths, not measured";
  doc["calibrated"] = b.calibration.has_value();
  if (b.calibration) doc["calibration"] = b.calibration->file;
  if (!r.found) {
    doc["found"] = false;
    doc["why_not"] = r.why_not;
    doc["smallest_gpu_where_it_fits"] = r.smallest_gpu;
    doc["smallest_gpu_count_where_it_fits"] = r.smallest_gpu_count;
    if (o.format() != Format::table) {
      emit(report, doc, o.format());
    } else {
      report << fmt::format("memplan plan: {} on {}, global batch {} x {} tokens\n", s.model.name, target, req.global_batch, s.batch.seq_len);
      report << "  cannot fit: " << r.why_not << "\n";
      if (!r.smallest_gpu.empty())
        report << fmt::format("  smallest preset card where a plan exists ({} GPUs): {}\n", s.parallel.num_gpus, r.smallest_gpu);
      if (r.smallest_gpu_count > 0)
        report << fmt::format("  fewest {} GPUs where a plan exists: {}\n", s.device.name, r.smallest_gpu_count);
      if (r.smallest_gpu.empty() && r.smallest_gpu_count == 0) {
        const int64_t mp = s.parallel.tensor_parallel * s.parallel.pipeline_parallel;
        const int64_t cap = std::min<int64_t>(4096, req.global_batch * mp);
        report << fmt::format("  no preset card, and no count of these GPUs up to {}, makes it fit{}\n", cap,
                              cap < 4096 ? fmt::format(" (global batch {} allows at most {} data-parallel ranks)", req.global_batch,
                                                       req.global_batch)
                                         : "");
        if (!req.allow_offload) report << "  offload was not allowed (--no-offload); it moves optimizer states and weights to the host\n";
      }
    }
    return kExitDoesNotFit;
  }
  planner::EmitContext ec;
  ec.setup = r.best.setup;
  ec.model = model_ref(s);
  ec.tool = tool;
  if (!in.model && b.config_path.empty()) ec.model.kind = planner::ModelRef::Kind::inline_spec;
  ec.gpu = s.device.name == "custom" ? "" : s.device.name;
  ec.global_batch = r.best.global_batch;
  ec.budget = req.budget;
  ec.peak_bytes = r.best.peak_bytes;
  ec.tokens_per_s = r.best.time.tokens_per_s;
  std::string written;
  if (!f.ask.emit.empty()) {
    const std::string text = planner::emit(ec, fmt_out);
    if (config_to_stdout) {
      io.out << text;
    } else {
      profiles::write_file_atomically(f.out, text, {f.force, Where::at_flag("--out"), "the config"});
      written = f.out;
    }
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
  if (!written.empty()) doc["emitted"] = {{"format", f.ask.emit}, {"path", written}};
  if (o.format() != Format::table) {
    emit(report, doc, o.format());
    return kExitOk;
  }
  const TrainingSetup& w = r.best.setup;
  report << fmt::format("memplan plan: {} on {}, global batch {} x {} tokens, tier {} ({:.0f}%: {})\n", s.model.name, target,
                        req.global_batch, s.batch.seq_len, f.ask.budget ? "custom" : f.ask.tier, 100 * req.budget, gib(r.budget_bytes));
  if (b.calibration) report << fmt::format("  calibrated with {}\n", b.calibration->file);
  report << fmt::format("  searched {} candidates in {:.1f} ms ({} activation timelines, {} memory compositions); {} fit\n",
                        thousands(r.candidates), 1000 * r.seconds, r.timelines, thousands(r.compositions), thousands(r.fitting));
  report << "\n  best (highest modelled throughput that fits):\n";
  report << fmt::format("    micro-batch {}, accumulation {}, global batch {}{}\n", w.batch.micro_batch, w.batch.grad_accum,
                        r.best.global_batch, r.batch_note.empty() ? " (exact)" : "");
  if (!r.batch_note.empty()) report << "    note: " << r.batch_note << "\n";
  report << fmt::format("    precision {}, optimizer {}, checkpointing {}, attention {}, ZeRO-{}{}\n", to_string(w.precision),
                        to_string(w.optimizer), to_string(w.checkpointing), to_string(w.attention), w.parallel.zero_stage,
                        w.parallel.offload == Offload::none ? "" : ", offload " + std::string(to_string(w.parallel.offload)));
  report << fmt::format("    peak {} ({}) of {}; headroom {} below the budget\n", gib(r.best.peak_bytes),
                        percent(static_cast<double>(r.best.peak_bytes) / static_cast<double>(s.device.capacity_bytes)),
                        gib(s.device.capacity_bytes), gib(r.budget_bytes - r.best.peak_bytes));
  report << fmt::format("    step {:.2f} s (compute {:.2f}, communication {:.2f}, offload {:.2f}, optimizer {:.2f}), ~{} tokens/s: modelled, not measured\n",
                        r.best.time.total_s, r.best.time.compute_s, r.best.time.comm_s, r.best.time.offload_s, r.best.time.optimizer_s,
                        thousands(static_cast<int64_t>(r.best.time.tokens_per_s)));
  report << "\n  runners-up (one change from the best) and why each lost:\n";
  for (const auto& ru : r.runners_up)
    report << fmt::format("    {:<14} {:<28} {}\n", ru.dimension, ru.value, ru.why);
  if (!f.ask.emit.empty()) {
    const std::string file = written.empty() ? planner::default_file_name(fmt_out) : written;
    if (written.empty()) report << fmt::format("\n  printed the {} config on stdout (--out FILE writes it to a file)\n", f.ask.emit);
    else report << fmt::format("\n  wrote {} ({})\n", written, f.ask.emit);
    std::string check = fmt::format("memplan estimate --config {}", file);
    // What the format cannot hold (torchtune: the GPU and its count; LitGPT: the GPU).
    if (fmt_out == planner::EmitFormat::hf || fmt_out == planner::EmitFormat::torchtune)
      check += fmt::format(" --gpu {} --gpus {}", s.device.name, s.parallel.num_gpus);
    if (fmt_out == planner::EmitFormat::litgpt) check += fmt::format(" --gpu {}", s.device.name);
    report << "  re-check it: " << check << "\n";
  }
  return kExitOk;
}

}  // namespace

Command register_plan(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("plan", "the best configuration that fits, with runners-up; emits configs people paste");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto f = std::make_shared<PlanFlags>();
  auto o = std::make_shared<OutputFlags>();
  add_setup_flags(*app, *in);
  app->add_option("--global-batch", f->ask.global_batch, "sequences per optimizer step over all GPUs")->type_name("N");
  app->add_option("--tier", f->ask.tier, "memory budget: safe (85%), balanced (90%), aggressive (95%)")->type_name("TIER");
  app->add_option("--budget", f->ask.budget, "memory budget as a fraction of the card (overrides --tier)")->type_name("F");
  app->add_option("--optimizers", f->ask.optimizers, "optimizers the plan may pick (comma list; default: --optimizer or adamw)")->type_name("LIST");
  app->add_option("--precisions", f->ask.precisions, "precision regimes the plan may pick (comma list)")->type_name("LIST");
  app->add_flag("--no-offload", f->ask.no_offload, "never offload to the host");
  app->add_option("--max-micro-batch", f->ask.max_micro_batch, "largest micro-batch to consider (default 1024)")->type_name("N");
  app->add_option("--emit", f->ask.emit, "print the plan as a memplan|train-config|deepspeed|hf|lightning|torchtune|litgpt config (on stdout; the report goes to stderr)")->type_name("FORMAT");
  app->add_option("--out", f->out, "write the --emit config to this file instead (atomically)")->type_name("FILE");
  app->add_flag("--force", f->force, "let --out replace an existing file");
  add_output_flags(*app, *o);
  return {app, [io, in, f, o] { return run_plan(io, *in, *f, *o); }};
}

}  // namespace memplan::cli
