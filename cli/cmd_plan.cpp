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
#include "planner/emit.h"
#include "planner/plan.h"

namespace memplan::cli {
namespace {

struct PlanFlags {
  std::optional<int64_t> global_batch;
  std::string tier = "balanced";
  std::optional<double> budget;
  std::string optimizers, precisions, emit, out;
  bool no_offload = false;
  int64_t max_micro_batch = 1024;
};

template <class E>
std::vector<E> parse_list(const std::string& text, const char* flag, std::optional<E> (*parse)(const std::string&),
                          const std::vector<std::string>& names) {
  std::vector<E> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto v = parse(item);
    if (!v) throw InputError(Where::at_flag(flag), fmt::format("unknown value '{}'", item), fmt::format("expected a comma list of: {}", fmt::join(names, ", ")));
    out.push_back(*v);
  }
  return out;
}

planner::ModelRef model_ref(const TrainingSetup& s) {
  if (const auto p = profiles::find_model_preset(s.model.name); p && p->name == s.model.name)
    return {planner::ModelRef::Kind::preset, p->name};
  if (!s.model.hf_repo.empty())
    if (const auto p = profiles::find_model_preset(s.model.hf_repo)) return {planner::ModelRef::Kind::preset, p->name};
  return {planner::ModelRef::Kind::inline_spec, s.model.name};
}

// Writes through a temporary file and a rename: never a half-written config.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw InputError(Where::at_flag("--out"), fmt::format("cannot write '{}'", path), "check the folder exists and is writable");
    f << text;
    if (!f.flush()) {
      std::remove(tmp.c_str());
      throw InputError(Where::at_flag("--out"), fmt::format("cannot write '{}'", path), "is the disk full?");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw InputError(Where::at_flag("--out"), fmt::format("cannot write '{}': {}", path, ec.message()));
  }
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
  profiles::BuiltSetup b = profiles::build_setup(in);
  print_warnings(io.err, b.warnings);
  const TrainingSetup& s = b.setup;
  if (s.device.capacity_bytes <= 0)
    throw InputError(Where::at_flag("--gpu"), "plan needs a target", "pass --gpu PRESET (memplan gpus lists them) or --gpu-memory 40GiB");
  planner::PlanRequest req;
  req.base = s;
  req.global_batch = f.global_batch.value_or(b.global_batch.value_or(0));
  if (req.global_batch <= 0)
    throw InputError(Where::at_flag("--global-batch"), "plan needs the global batch (sequences per optimizer step, all GPUs)",
                     "pass --global-batch 256, or set training.global_batch_size in the config");
  const int64_t dp = s.parallel.data_parallel();
  if (req.global_batch < dp)
    throw InputError(Where::at_flag("--global-batch"),
                     fmt::format("global batch {} is smaller than the {} data-parallel ranks: each rank needs at least one sequence",
                                 req.global_batch, dp),
                     fmt::format("use --global-batch {} or more, or fewer --gpus", dp));
  if (f.budget) {
    if (!(*f.budget > 0 && *f.budget <= 1))
      throw InputError(Where::at_flag("--budget"), fmt::format("must be a fraction in (0, 1] (got {})", *f.budget), "e.g. --budget 0.88");
    req.budget = *f.budget;
  } else {
    req.budget = planner::tier_fraction(f.tier);
    if (req.budget == 0)
      throw InputError(Where::at_flag("--tier"), fmt::format("unknown tier '{}'", f.tier), "expected one of: safe (85%), balanced (90%), aggressive (95%)");
  }
  planner::EmitFormat fmt_out = planner::EmitFormat::memplan;
  if (!f.emit.empty() && !planner::parse_emit_format(f.emit, &fmt_out))
    throw InputError(Where::at_flag("--emit"), fmt::format("unknown format '{}'", f.emit), "expected one of: memplan, seed, deepspeed, hf, lightning");
  req.stack = f.emit == "deepspeed" ? planner::Stack::deepspeed
              : f.emit == "hf"      ? planner::Stack::hf
              : f.emit == "lightning" ? planner::Stack::lightning
                                      : planner::Stack::any;
  // An explicit flag fixes that dimension; everything else is searched.
  if (!f.optimizers.empty()) req.optimizers = parse_list<OptimizerKind>(f.optimizers, "--optimizers", parse_optimizer, optimizer_names());
  else if (in.optimizer) req.optimizers = {s.optimizer};
  if (!f.precisions.empty()) req.precisions = parse_list<Precision>(f.precisions, "--precisions", parse_precision, precision_names());
  else if (in.precision) req.precisions = {s.precision};
  if (in.attention) req.attentions = {s.attention};
  if (in.checkpointing) req.checkpointings = {s.checkpointing};
  req.allow_offload = !f.no_offload;
  req.max_micro_batch = f.max_micro_batch;
  req.calibration = calibration_of(b);
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
      emit(io.out, doc, o.format());
    } else {
      io.out << fmt::format("memplan plan: {} on {}, global batch {} x {} tokens\n", s.model.name, target, req.global_batch, s.batch.seq_len);
      io.out << "  cannot fit: " << r.why_not << "\n";
      if (!r.smallest_gpu.empty())
        io.out << fmt::format("  smallest preset card where a plan exists ({} GPUs): {}\n", s.parallel.num_gpus, r.smallest_gpu);
      if (r.smallest_gpu_count > 0)
        io.out << fmt::format("  fewest {} GPUs where a plan exists: {}\n", s.device.name, r.smallest_gpu_count);
      if (r.smallest_gpu.empty() && r.smallest_gpu_count == 0) {
        const int64_t mp = s.parallel.tensor_parallel * s.parallel.pipeline_parallel;
        const int64_t cap = std::min<int64_t>(4096, req.global_batch * mp);
        io.out << fmt::format("  no preset card, and no count of these GPUs up to {}, makes it fit{}\n", cap,
                              cap < 4096 ? fmt::format(" (global batch {} allows at most {} data-parallel ranks)", req.global_batch,
                                                       req.global_batch)
                                         : "");
        if (!req.allow_offload) io.out << "  offload was not allowed (--no-offload); it moves optimizer states and weights to the host\n";
      }
    }
    return kExitDoesNotFit;
  }
  planner::EmitContext ec;
  ec.setup = r.best.setup;
  ec.model = model_ref(s);
  if (!in.model && b.config_path.empty()) ec.model.kind = planner::ModelRef::Kind::inline_spec;
  ec.gpu = s.device.name == "custom" ? "" : s.device.name;
  ec.global_batch = r.best.global_batch;
  ec.budget = req.budget;
  ec.peak_bytes = r.best.peak_bytes;
  ec.tokens_per_s = r.best.time.tokens_per_s;
  std::string written;
  if (!f.emit.empty()) {
    written = f.out.empty() ? planner::default_file_name(fmt_out) : f.out;
    write_atomically(written, planner::emit(ec, fmt_out));
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
  if (!written.empty()) doc["emitted"] = {{"format", f.emit}, {"path", written}};
  if (o.format() != Format::table) {
    emit(io.out, doc, o.format());
    return kExitOk;
  }
  const TrainingSetup& w = r.best.setup;
  io.out << fmt::format("memplan plan: {} on {}, global batch {} x {} tokens, tier {} ({:.0f}%: {})\n", s.model.name, target,
                        req.global_batch, s.batch.seq_len, f.budget ? "custom" : f.tier, 100 * req.budget, gib(r.budget_bytes));
  if (b.calibration) io.out << fmt::format("  calibrated with {}\n", b.calibration->file);
  io.out << fmt::format("  searched {} candidates in {:.1f} ms ({} activation timelines, {} memory compositions); {} fit\n",
                        thousands(r.candidates), 1000 * r.seconds, r.timelines, thousands(r.compositions), thousands(r.fitting));
  io.out << "\n  best (highest modelled throughput that fits):\n";
  io.out << fmt::format("    micro-batch {}, accumulation {}, global batch {}{}\n", w.batch.micro_batch, w.batch.grad_accum,
                        r.best.global_batch, r.batch_note.empty() ? " (exact)" : "");
  if (!r.batch_note.empty()) io.out << "    note: " << r.batch_note << "\n";
  io.out << fmt::format("    precision {}, optimizer {}, checkpointing {}, attention {}, ZeRO-{}{}\n", to_string(w.precision),
                        to_string(w.optimizer), to_string(w.checkpointing), to_string(w.attention), w.parallel.zero_stage,
                        w.parallel.offload == Offload::none ? "" : ", offload " + std::string(to_string(w.parallel.offload)));
  io.out << fmt::format("    peak {} ({}) of {}; headroom {} below the budget\n", gib(r.best.peak_bytes),
                        percent(static_cast<double>(r.best.peak_bytes) / static_cast<double>(s.device.capacity_bytes)),
                        gib(s.device.capacity_bytes), gib(r.budget_bytes - r.best.peak_bytes));
  io.out << fmt::format("    step {:.2f} s (compute {:.2f}, communication {:.2f}, offload {:.2f}, optimizer {:.2f}), ~{} tokens/s: modelled, not measured\n",
                        r.best.time.total_s, r.best.time.compute_s, r.best.time.comm_s, r.best.time.offload_s, r.best.time.optimizer_s,
                        thousands(static_cast<int64_t>(r.best.time.tokens_per_s)));
  io.out << "\n  runners-up (one change from the best) and why each lost:\n";
  for (const auto& ru : r.runners_up)
    io.out << fmt::format("    {:<14} {:<28} {}\n", ru.dimension, ru.value, ru.why);
  if (!written.empty()) {
    io.out << fmt::format("\n  wrote {} ({})\n", written, f.emit);
    std::string check = fmt::format("memplan estimate --config {}", written);
    if (fmt_out == planner::EmitFormat::hf || fmt_out == planner::EmitFormat::lightning)
      check += fmt::format(" --gpu {} --gpus {}", s.device.name, s.parallel.num_gpus);
    if (fmt_out != planner::EmitFormat::lightning) io.out << "  re-check it: " << check << "\n";
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
  app->add_option("--global-batch", f->global_batch, "sequences per optimizer step over all GPUs")->type_name("N");
  app->add_option("--tier", f->tier, "memory budget: safe (85%), balanced (90%), aggressive (95%)")->type_name("TIER");
  app->add_option("--budget", f->budget, "memory budget as a fraction of the card (overrides --tier)")->type_name("F");
  app->add_option("--optimizers", f->optimizers, "optimizers the plan may pick (comma list; default: --optimizer or adamw)")->type_name("LIST");
  app->add_option("--precisions", f->precisions, "precision regimes the plan may pick (comma list)")->type_name("LIST");
  app->add_flag("--no-offload", f->no_offload, "never offload to the host");
  app->add_option("--max-micro-batch", f->max_micro_batch, "largest micro-batch to consider (default 1024)")->type_name("N");
  app->add_option("--emit", f->emit, "write the plan as memplan|seed|deepspeed|hf|lightning config")->type_name("FORMAT");
  app->add_option("--out", f->out, "file to write with --emit (default: a standard name in the current folder)")->type_name("FILE");
  add_output_flags(*app, *o);
  return {app, [io, in, f, o] { return run_plan(io, *in, *f, *o); }};
}

}  // namespace memplan::cli
