// The setup's and plan's flags (api/flags.h).
#include "api/flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "estimator/fields.h"
#include "planner/emit.h"

namespace memplan::api {

void add_setup_flags(CLI::App& app, profiles::SetupInputs& in) {
  app.add_option("--config", in.config,
                 "training config: memplan YAML, DeepSpeed JSON, HF config.json, HF TrainingArguments/TRL, Axolotl, "
                 "torchtune, torchtitan TOML, LitGPT, LightningCLI, accelerate or NeMo (detected from its keys)")
      ->type_name("FILE");
  app.add_option("--format", in.format, "read --config as this format instead of detecting it")->type_name("NAME");
  app.add_flag("--strict", in.strict, "refuse a config with keys memplan cannot model or near-miss keys (exit 2)");
  app.add_option("--model", in.model, "preset (memplan models), HF repo id, config.json or model directory")->type_name("NAME|FILE|DIR");
  // The target (--gpu here, --device and --calibration after the lists) from the registry.
  auto add_target = [&app, &in](Target id) {
    const TargetField& f = field(id);
    app.add_option(f.flag, in.target_flag(id), f.help)->type_name(f.type_name);
  };
  add_target(Target::gpu);
  // The sizes (--gpu-memory, --allocator-cap, --host-memory) from the registry (estimator/fields.h).
  for (const SizeField& f : size_fields()) app.add_option(f.flag, in.size_flag(f.id), f.help)->type_name(f.type_name);
  // The counts, each --NAME N, from the registry (estimator/fields.h): the fine-tuning ones after
  // --finetune, the others here.
  auto add_counts = [&app, &in](bool finetune) {
    for (const CountField& f : count_fields()) {
      if ((std::string(f.section) == "finetune") != finetune || f.id == Count::zero_stage) continue;
      CLI::Option* o = app.add_option(f.flag, in.count_flag(f.id), f.help)->type_name("N");
      if (f.group) o->group(f.group);
    }
  };
  add_counts(false);
  // The training's choices (--precision ... --finetune, --adapter-dtype) from the registry, --zero (a
  // count) before --offload.
  for (const ChoiceField& f : choice_fields()) {
    if (f.runtime()) continue;
    if (f.id == Choice::offload) {
      const CountField& zero = field(Count::zero_stage);
      app.add_option(zero.flag, in.count_flag(zero.id), zero.help)->type_name("STAGE");
    }
    app.add_option(f.flag, in.choice_flag(f.id), f.help)->type_name(f.type_name);
  }
  add_counts(true);
  // The numbers with a flag (--lora-alpha, --lora-dropout) and the lists (--lora-targets) from the registry.
  for (const NumberField& f : number_fields())
    if (f.flag) app.add_option(f.flag, in.number_flag(f.id), f.help)->type_name(f.type_name);
  for (const ListField& f : list_fields()) app.add_option(f.flag, in.list_flag(f.id), f.help)->type_name(f.type_name);
  add_target(Target::device);
  add_target(Target::calibration);
  // The runtime: the stack that runs the step and its knobs (each overrides the framework's default).
  // Its choices (--framework, --optimizer-impl, --fsdp, --loss) and releases (--torch-version,
  // --transformers-version) from the registry (estimator/fields.h).
  for (const ChoiceField& f : choice_fields())
    if (f.runtime()) app.add_option(f.flag, in.choice_flag(f.id), f.help)->type_name(f.type_name)->group("Runtime");
  for (const VersionField& f : version_fields())
    app.add_option(f.flag, in.version_flag(f.id), f.help)->type_name("X.Y")->group("Runtime");
  // The yes/no switches, each --NAME and --no-NAME, from the registry (estimator/fields.h); the
  // runtime's in the Runtime group.
  for (const SwitchField& f : switch_fields()) {
    std::optional<bool>& slot = in.switch_flag(f.id);
    CLI::Option* o = app.add_flag_function(fmt::format("{},!{}", f.flag, f.negation()), [&slot](int64_t n) { slot = n > 0; }, f.help);
    if (f.section() == "runtime") o->group("Runtime");
  }
}

void add_plan_flags(CLI::App& app, PlanFlags& f) {
  app.add_option("--global-batch", f.ask.global_batch,
                 "sequences per optimizer step over all GPUs (default: the config's, or micro-batch x accumulation x GPUs)")
      ->type_name("N");
  app.add_option("--tier", f.ask.tier, "memory budget: safe (85%), balanced (90%), aggressive (95%)")->type_name("TIER");
  app.add_option("--budget", f.ask.budget, "memory budget as a fraction of the card (overrides --tier)")->type_name("F");
  app.add_option("--optimizers", f.ask.optimizers, "optimizers the plan may pick (comma list; default: --optimizer or adamw)")->type_name("LIST");
  app.add_option("--precisions", f.ask.precisions, "precision regimes the plan may pick (comma list)")->type_name("LIST");
  app.add_flag("--no-offload", f.ask.no_offload, "never offload to the host");
  app.add_flag("--no-deepspeed", f.ask.no_deepspeed, "never plan DeepSpeed (ZeRO); DDP and FSDP stay (--zero 0 says the same)");
  app.add_option("--table", f.table,
                 "one plan per memory size or GPU preset (8GiB,12GiB,16GiB,24GiB or t4,l4,...; at most 64), printed as a markdown table")
      ->type_name("LIST");
  app.add_option("--max-micro-batch", f.ask.max_micro_batch, "largest micro-batch to consider (default 1024, at most 65536)")->type_name("N");
  app.add_option("--emit", f.ask.emit, "print the plan as a " + fmt::format("{}", fmt::join(planner::emit_format_names(), "|")) +
                                            " config (on stdout; the report goes to stderr)")->type_name("FORMAT");
  app.add_option("--out", f.out, "write the --emit config to this file instead (atomically)")->type_name("FILE");
  app.add_flag("--force", f.force, "let --out replace an existing file");
  app.add_flag("--fresh", f.fresh,
               "with --emit for a --config in that format: write memplan's own file instead of the config with only the plan's changes");
}

planner::FitAsk fit_ask(const profiles::SetupInputs& in) {
  planner::FitAsk ask;
  if (const auto& liger = in.switch_flag(Switch::liger); liger && !*liger) ask.liger_off = field(Switch::liger).negation() + " keeps them off";
  else if (const auto& loss = in.choice_flag(Choice::loss); !liger && loss)
    ask.liger_off = fmt::format("{} {}: Liger's fused loss would replace it", field(Choice::loss).flag, *loss);
  return ask;
}

std::optional<InputError> unconvertible_value(CLI::App& app, const std::string& command) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0) continue;
    bool fails = false;
    try {
      opt->run_callback();
    } catch (const CLI::ConversionError&) {
      fails = true;
    } catch (const std::invalid_argument&) {  // CLI11 2.1 reads a flag's value with std::stoll
      fails = true;
    } catch (const std::out_of_range&) {
      fails = true;
    } catch (const CLI::Error&) {
    }
    if (!fails) continue;
    const std::vector<std::string> values = opt->results();
    return InputError(Where::at_flag(opt->get_name()),
                      "cannot read '" + profiles::clip(values.empty() ? "" : values.back()) + "' as its value",
                      "memplan " + command + " --help shows what " + opt->get_name() + " takes");
  }
  return std::nullopt;
}

}  // namespace memplan::api
