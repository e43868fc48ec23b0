// The config a plan writes (api/plan_file.h).
#include "api/plan_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "estimator/checked.h"
#include "estimator/estimate.h"
#include "estimator/fields.h"
#include "estimator/text.h"
#include "profiles/files.h"
#include "profiles/reader.h"

namespace memplan::api {
namespace {

// --emit for a --config already in that format: the user's file with only what the plan changes
// (planner/keep.h). "Before" is what the emitter writes for the file's own setup: the file read
// with the flags that say where it runs (model, GPU, count, versions), none of those that change
// the setup, so a flag's value the plan used (--seq-len 2048) is written into the file. The kept
// file is then re-estimated as its re-check line says, read from where it will be written; it is
// used only when that gives the plan's peak within 0.5%, otherwise `why` says what went wrong.
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
    bi.sizes = in.sizes;  // the card's memory, the allocator cap, the node's RAM
    bi.count_flag(Count::num_gpus) = in.count_flag(Count::num_gpus);
    bi.device = in.device;
    bi.calibration = in.calibration;
    bi.choice_flag(Choice::framework) = setup_in.choice_flag(Choice::framework);
    bi.versions = in.versions;
    bi.count_flag(Count::gpus_per_node) = in.count_flag(Count::gpus_per_node);
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
    // The sizes too (the card's memory unless the line names a card, the allocator cap, the node's
    // RAM): a kept file keeps its own allocator_cap where the flag replaced it.
    const bool names_card = ci.gpu || ci.size_flag(Size::gpu_memory);
    for (const TargetField& t : target_fields())  // the card unless the line names one; the device kind, the calibration
      if (t.id != Target::gpu || !names_card) extra(t.flag, ci.target_flag(t.id), in.target_flag(t.id));
    for (const SizeField& s : size_fields())
      if (!(s.id == Size::gpu_memory ? names_card : ci.size_flag(s.id).has_value())) extra(s.flag, ci.size_flag(s.id), in.size_flag(s.id));
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
      *why = fmt::format("it re-estimates to {} where the plan is {} ({:+.1f}%)", text::gib(peak), text::gib(plan_peak),
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

}  // namespace

void check_plan_flags(const profiles::SetupInputs& in, const PlanFlags& f, bool document_output) {
  if (!f.out.empty() && f.ask.emit.empty())
    throw InputError(Where::at_flag("--out"), "--out writes the emitted config, and no --emit format was given",
                     fmt::format("add --emit FORMAT ({})", fmt::join(planner::emit_format_names(), ", ")));
  if (!f.ask.emit.empty() && f.out.empty() && document_output)
    throw InputError(Where::at_flag("--emit"), "--emit without --out prints the config on stdout, where --json/--yaml would print too",
                     "add --out FILE for the config, or drop --json/--yaml");
  if (!f.out.empty()) profiles::check_can_write(f.out, {f.force, Where::at_flag("--out"), "the config", profiles::input_files(in)});
  if (!f.table.empty() && !f.ask.emit.empty())
    throw InputError(Where::at_flag("--table"), "--table prints one plan per memory size; --emit writes one config",
                     "drop --emit (or --table)");
}

EmittedConfig emit_plan_config(const profiles::SetupInputs& in, const PlanFlags& f, const planner::ResolvedPlan& rp,
                               const planner::PlanResult& r) {
  EmittedConfig e;
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
  if (!f.out.empty()) {
    profiles::write_file_atomically(f.out, e.text, {f.force, Where::at_flag("--out"), "the config", profiles::input_files(in)});
    e.written = f.out;
  }
  return e;
}


std::string recheck_command(const EmittedConfig& e, const planner::ResolvedPlan& rp, const std::string& file) {
  // A format whose header states how to re-check it (HF, Axolotl, accelerate) is taken at its word;
  // otherwise the flags the format cannot carry are added (recheck_flags).
  std::string check = planner::recheck_from_header(e.text, file);
  if (check.empty()) {
    check = fmt::format("memplan estimate --config {}", text::shell_word(file));
    for (const std::string& a : planner::recheck_flags(rp.format, e.context)) check += " " + a;
  }
  if (e.kept)
    for (const std::string& a : e.kept->recheck_extra) check += " " + (a.rfind("--", 0) == 0 ? a : text::shell_word(a));
  return check;
}

}  // namespace memplan::api
