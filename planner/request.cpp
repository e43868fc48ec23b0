// resolve_plan (request.h): from the flags and the config to what plan() searches.
#include "planner/request.h"

#include <fmt/format.h>

#include "estimator/text.h"

namespace memplan::planner {

namespace {

// "8GiB" -> "8 GiB"; other sizes as gib() prints them.
std::string size_label(int64_t bytes) {
  const int64_t g = int64_t{1} << 30;
  return bytes % g == 0 ? fmt::format("{} GiB", bytes / g) : text::gib(bytes);
}

ModelRef model_ref(const TrainingSetup& s) {
  if (const auto p = profiles::find_model_preset(s.model.name); p && p->name == s.model.name)
    return {ModelRef::Kind::preset, p->name};
  if (!s.model.hf_repo.empty())
    if (const auto p = profiles::find_model_preset(s.model.hf_repo)) return {ModelRef::Kind::preset, p->name};
  return {ModelRef::Kind::inline_spec, s.model.name};
}

}  // namespace

std::vector<std::pair<std::string, DeviceSpec>> table_devices(const std::string& list, const TrainingSetup& base) {
  std::vector<std::pair<std::string, DeviceSpec>> out;
  const auto& catalog = profiles::gpu_catalog();
  std::string cur;
  std::vector<std::string> items;
  for (const char c : list + ",") {
    if (c == ',') {
      if (!cur.empty()) items.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (items.empty())
    throw InputError(Where::at_flag("--table"), "names no memory size or GPU", "e.g. --table 8GiB,12GiB,16GiB,24GiB or --table t4,l4,a100-40gb");
  // Each row is a whole plan search (tens of milliseconds to a second): a table people read has a
  // few rows, and a bound keeps a generated list from running for minutes.
  constexpr size_t kMaxTableRows = 64;
  if (items.size() > kMaxTableRows)
    throw InputError(Where::at_flag("--table"), fmt::format("{} memory sizes or GPUs, over the {} a table holds", items.size(), kMaxTableRows),
                     "split the list over several runs, or choose the sizes that decide the purchase");
  for (const std::string& item : items) {
    if (const profiles::GpuProfile* g = catalog.find(item)) {
      TrainingSetup t = base;
      profiles::apply_gpu(t, *g, catalog);
      profiles::carry_allocator_cap(t.device, base.device);
      out.emplace_back(fmt::format("{} ({})", g->name, size_label(t.device.capacity_bytes)), t.device);
      continue;
    }
    if (auto bare = profiles::bare_size_error(item, Where::at_flag("--table"))) throw *bare;
    const auto bytes = profiles::parse_size(item);
    if (!bytes || *bytes <= 0) {
      const auto near = catalog.suggest(item);
      throw InputError(Where::at_flag("--table"), fmt::format("'{}' names no GPU preset and is not a memory size", item),
                       near.empty() ? "write sizes like 12GiB or 24GB, or GPU presets (memplan gpus lists them)"
                                    : fmt::format("did you mean '{}'? (or a size like 12GiB)", near.front()));
    }
    DeviceSpec d = base.device;
    if (d.name == "unspecified") d.name = "custom";
    d.capacity_bytes = *bytes;
    profiles::carry_allocator_cap(d, base.device);
    out.emplace_back(size_label(*bytes), d);
  }
  return out;
}

std::unique_ptr<const ResolvedPlan> resolve_plan(const profiles::SetupInputs& in, const PlanAsk& asked, const std::string& table,
                                                 const std::function<void(const std::vector<Warning>&)>& built) {
  auto out = std::make_unique<ResolvedPlan>();
  ResolvedPlan& rp = *out;
  rp.emits = !asked.emit.empty();
  if (rp.emits && !parse_emit_format(asked.emit, &rp.format))
    throw InputError(Where::at_flag("--emit"), fmt::format("unknown format '{}'", asked.emit),
                     fmt::format("expected one of: {}", fmt::join(emit_format_names(), ", ")));
  // A plan for a tool is made with that tool's runtime (its defaults decide memory), unless
  // --framework or the config says which runs.
  if (in.config) rp.config = profiles::load_config(*in.config, in.format.value_or(""));
  rp.inputs = in;
  if (rp.emits && !in.choice_flag(Choice::framework) && !rp.config.origin.fields.count(path(Choice::framework)))
    if (const auto fw = emit_framework(rp.format)) {
      rp.inputs.choice_flag(Choice::framework) = to_string(*fw);
      rp.framework_from_emit = to_string(*fw);
    }
  rp.built = profiles::build_setup(rp.inputs, rp.config);
  // DDP's gradient_as_bucket_view (a NeMo, Lightning or memplan file's) and torch's
  // ZeroRedundancyOptimizer where the format has no key for them (planner/express.cpp): the plan
  // is made for DDP with torch's defaults (no bucket views, a torch.optim optimizer on every rank).
  struct Unsayable {
    Setting setting;
    bool sayable;
    const char* what;
    const char* cost;
    const char* keep;
  };
  TrainingSetup& built_setup = rp.built.setup;
  for (const Unsayable& u : {Unsayable{Setting::ddp_bucket_view, states_bucket_view(rp.format), "gradient_as_bucket_view",
                                       "one more copy of the gradients", "plan with --emit memplan or lightning to keep it"},
                             Unsayable{Setting::zero_redundancy_optimizer, states_zero_redundancy_optimizer(rp.format),
                                       "ZeroRedundancyOptimizer", "every rank keeps all optimizer states",
                                       "plan with --emit memplan or train-config to keep it"}}) {
    bool& on = u.setting == Setting::ddp_bucket_view ? built_setup.parallel.ddp_bucket_view : built_setup.parallel.zero_redundancy_optimizer;
    if (!rp.emits || u.sayable || !on) continue;
    on = false;
    rp.built.warnings.push_back({rp.built.origin.of(u.setting),
                                 fmt::format("--emit {} has no {}: the plan is made for DDP without it (torch's default), {}", asked.emit,
                                             u.what, u.cost),
                                 u.keep});
  }
  if (built) built(rp.built.warnings);
  TrainingSetup& s = rp.built.setup;
  // torchtune and LitGPT name models their own way, and LitGPT builds its own variant (untied,
  // padded vocabulary): the plan is made for the model the tool trains.
  if (rp.format == EmitFormat::torchtune || rp.format == EmitFormat::litgpt) {
    const bool tt = rp.format == EmitFormat::torchtune;
    const auto t = profiles::tool_model(s.model, asked.emit);
    if (!t)
      throw InputError(Where::at_flag("--emit"), fmt::format("{} has no model of {}'s architecture", tt ? "torchtune" : "LitGPT", s.model.name),
                       tt ? "torchtune builds the models of torchtune/models/*/_model_builders.py @ v0.6.1"
                          : "LitGPT builds the models of litgpt/config.py @ v0.5.13");
    s.model = t->spec;
    rp.tool = {t->name, t->tokenizer, t->checkpointer_type};
  }
  rp.ask = asked;
  rp.ask.config_global_batch = rp.built.global_batch;
  // A config (or flags) that give micro-batch x accumulation x GPUs give the global batch too.
  if (rp.built.origin.fields.count(memplan::path(Count::micro_batch)))
    rp.ask.given_batch = s.batch.micro_batch * s.batch.grad_accum * s.parallel.data_parallel();
  // An explicit flag fixes its dimension; the rest is searched.
  rp.ask.optimizer_fixed = in.choice_flag(Choice::optimizer).has_value();
  rp.ask.precision_fixed = in.choice_flag(Choice::precision).has_value();
  rp.ask.attention_fixed = in.choice_flag(Choice::attention).has_value();
  rp.ask.checkpointing_fixed = in.choice_flag(Choice::checkpointing).has_value();
  rp.ask.zero_fixed = in.count_flag(Count::zero_stage).has_value();
  rp.ask.offload_fixed = in.choice_flag(Choice::offload).has_value();
  rp.ask.fsdp_fixed = in.choice_flag(Choice::fsdp).has_value();
  // --liger / --no-liger: as given, not searched; nor with --loss, which Liger's fused loss would replace.
  if (const auto& l = in.switch_flag(Switch::liger)) rp.ask.liger_fixed_by = *l ? field(Switch::liger).flag : field(Switch::liger).negation();
  else if (const auto& loss = in.choice_flag(Choice::loss))
    rp.ask.liger_fixed_by = fmt::format("{} {} (Liger's fused loss would replace it)", field(Choice::loss).flag, *loss);
  if (!table.empty()) {
    rp.table = table_devices(table, s);
    s.device = rp.table.front().second;  // a target for the request; each row replaces it
  }
  rp.request = make_request(s, rp.ask, rp.calibration());
  if (rp.table.empty()) {
    const auto& catalog = profiles::gpu_catalog();
    for (const profiles::GpuProfile* g : catalog.all()) {
      TrainingSetup t = s;
      profiles::apply_gpu(t, *g, catalog);
      profiles::carry_allocator_cap(t.device, s.device);
      rp.cards.emplace_back(g->name, t.device);
    }
  }
  return out;
}

EmitContext emit_context(const ResolvedPlan& rp, const PlanResult& r) {
  const TrainingSetup& s = rp.base();
  EmitContext ec;
  ec.setup = r.best.setup;
  ec.model = model_ref(s);
  ec.tool = rp.tool;
  if (!rp.inputs.model && rp.built.config_path.empty()) ec.model.kind = ModelRef::Kind::inline_spec;
  // A preset's name; a card given by its memory or a cap alone has none ("custom", "unspecified"),
  // and neither has the CPU (its files state device: cpu).
  ec.gpu = s.device.name == "custom" || s.device.name == "unspecified" || s.device.kind == DeviceKind::cpu ? "" : s.device.name;
  ec.calibration = rp.inputs.calibration.value_or("");
  ec.global_batch = r.best.global_batch;
  ec.budget = rp.request.budget;
  ec.peak_bytes = r.best.peak_bytes;
  ec.tokens_per_s = r.best.time.tokens_per_s;
  return ec;
}

}  // namespace memplan::planner
