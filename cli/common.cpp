// Flags, formatting and the JSON documents shared by the subcommands.
#include "cli/common.h"

#include "estimator/text.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <ostream>

#include "estimator/attention_kernel.h"

namespace memplan::cli {

void add_setup_flags(CLI::App& app, profiles::SetupInputs& in) {
  app.add_option("--config", in.config,
                 "training config: memplan YAML, DeepSpeed JSON, HF config.json, HF TrainingArguments/TRL, Axolotl, "
                 "torchtune, torchtitan TOML, LitGPT, LightningCLI, accelerate or NeMo (detected from its keys)")
      ->type_name("FILE");
  app.add_option("--format", in.format, "read --config as this format instead of detecting it")->type_name("NAME");
  app.add_flag("--strict", in.strict, "refuse a config with keys memplan cannot model or near-miss keys (exit 2)");
  app.add_option("--model", in.model, "preset (memplan models), HF repo id, config.json or model directory")->type_name("NAME|FILE|DIR");
  app.add_option("--gpu", in.gpu, "GPU preset (memplan gpus)")->type_name("PRESET");
  app.add_option("--gpu-memory", in.gpu_memory, "device memory, e.g. 12GiB (overrides the preset's)")->type_name("SIZE");
  app.add_option("--allocator-cap", in.allocator_cap,
                 "torch.cuda.set_per_process_memory_fraction: the most the caching allocator may hold, a size (11GiB) "
                 "or a fraction of the card (0.5); verdicts hold the step to it")
      ->type_name("SIZE|FRACTION");
  // The counts, each --NAME N, from the registry (estimator/fields.h): the fine-tuning ones after
  // --finetune, the others here.
  auto add_counts = [&app, &in](bool finetune) {
    for (const CountField& f : count_fields()) {
      if ((std::string(f.section) == "finetune") != finetune) continue;
      CLI::Option* o = app.add_option(f.flag, in.count_flag(f.id), f.help)->type_name("N");
      if (f.group) o->group(f.group);
    }
  };
  add_counts(false);
  app.add_option("--precision", in.precision, "fp32|amp-fp16|amp-bf16|bf16|fp16|mixed-fp16|mixed-bf16")->type_name("P");
  app.add_option("--optimizer", in.optimizer, "adamw|adam|sgd|sgd-momentum|adafactor|adafactor-momentum|adamw-8bit|lion|paged-adamw|paged-adamw-8bit")->type_name("O");
  app.add_option("--checkpointing", in.checkpointing, "none|full|selective|selective-op|every:K|layers:I,J,...")->type_name("MODE");
  app.add_option("--attention", in.attention, "eager|sdpa|flash")->type_name("IMPL");
  app.add_option("--zero", in.zero, "DeepSpeed ZeRO stage 0-3")->type_name("STAGE");
  app.add_option("--offload", in.offload, "none|optimizer|optimizer+params|params (params: DeepSpeed ZeRO-3 offload_param alone)")->type_name("WHAT");
  app.add_option("--finetune", in.finetune, "full|lora|qlora")->type_name("MODE");
  add_counts(true);
  app.add_option("--lora-alpha", in.lora_alpha, "LoRA alpha")->type_name("A");
  app.add_option("--lora-targets", in.lora_targets, "q,k,v,o,gate,up,down or all-linear")->type_name("LIST");
  app.add_option("--lora-dropout", in.lora_dropout, "LoRA dropout on the adapters' input (default 0)")->type_name("P");
  app.add_option("--adapter-dtype", in.adapter_dtype,
                 "fp32|model: LoRA adapters in fp32 (PEFT) or the model's dtype (torchtune, LitGPT: their default)")
      ->type_name("DTYPE");
  app.add_option("--device", in.device, "cuda (default) or cpu: whose memory behaviour to model")->type_name("cpu|cuda");
  app.add_option("--calibration", in.calibration, "calibration profile from memplan calibrate")->type_name("FILE");
  // The runtime: the stack that runs the step and its knobs (each overrides the framework's default).
  // Its choices (--framework, --optimizer-impl, --fsdp) from the registry (estimator/fields.h).
  for (const ChoiceField& f : choice_fields())
    app.add_option(f.flag, in.choice_flag(f.id), f.help)->type_name(f.type_name)->group("Runtime");
  app.add_option("--torch-version", in.torch_version, "PyTorch release the job runs (default 2.6)")->type_name("X.Y")->group("Runtime");
  app.add_option("--transformers-version", in.transformers_version,
                 "transformers release the job runs (default 4.57): its modelling code decides what is saved")
      ->type_name("X.Y")
      ->group("Runtime");
  app.add_option("--loss", in.loss, "standard|chunked[:N]|chunked:Nt|fused-linear|vocab-parallel: how the loss is computed")
      ->type_name("IMPL")->group("Runtime");
  app.add_option("--host-memory", in.host_memory,
                 "host RAM of one node, e.g. 512GiB (default: this machine's RAM with --device cpu, else unknown): "
                 "offload plans are checked against it")
      ->type_name("SIZE");
  // The yes/no switches, each --NAME and --no-NAME, from the registry (estimator/fields.h); the
  // runtime's in the Runtime group.
  for (const SwitchField& f : switch_fields()) {
    std::optional<bool>& slot = in.switch_flag(f.id);
    CLI::Option* o = app.add_flag_function(fmt::format("{},!{}", f.flag, f.negation()), [&slot](int64_t n) { slot = n > 0; }, f.help);
    if (f.section() == "runtime") o->group("Runtime");
  }
}

void add_output_flags(CLI::App& app, OutputFlags& o) {
  auto* j = app.add_flag("--json", o.json, "print the versioned JSON document");
  app.add_flag("--yaml", o.yaml, "print the document as YAML")->excludes(j);
}

std::string gib(int64_t bytes) { return text::gib(bytes); }

std::string percent(double f) { return fmt::format("{:.1f}%", 100.0 * f); }


std::string describe(const TrainingSetup& s) {
  std::string d = fmt::format("{}, {}, micro-batch {} x {} tokens, accumulation {}, checkpointing {}, attention {}",
                              to_string(s.precision), to_string(s.optimizer), s.batch.micro_batch, s.batch.seq_len,
                              s.batch.grad_accum, to_string(s.checkpointing), to_string(s.attention));
  if (s.parallel.num_gpus > 1) d += fmt::format(", {} GPUs", s.parallel.num_gpus);
  if (s.parallel.tensor_parallel > 1)
    d += fmt::format(", TP {}{}", s.parallel.tensor_parallel, s.parallel.sequence_parallel ? " with sequence parallelism" : "");
  if (s.parallel.zero_stage > 0) d += fmt::format(", ZeRO-{}", s.parallel.zero_stage);
  if (s.parallel.offload != Offload::none) d += fmt::format(", offload {}", to_string(s.parallel.offload));
  if (s.finetune.mode != FinetuneMode::full)
    d += fmt::format(", {} r={}{}", to_string(s.finetune.mode), s.finetune.lora_rank,
                     s.finetune.adapter_fp32 ? "" : " (adapters in the model's dtype)");
  if (s.parallel.fsdp != FsdpMode::none) d += fmt::format(", FSDP {}", to_string(s.parallel.fsdp));
  if (s.runtime.liger) d += ", Liger kernels";
  if (s.device.kind == DeviceKind::cpu) d += ", CPU";
  return d;
}

namespace {
// A value's origin for people: "file:line:col (key)", "--flag", "<framework> default (source)".
std::string source_of(const profiles::Provenance& o, const std::string& field) {
  if (const auto it = o.fields.find(field); it != o.fields.end()) {
    const Where& w = it->second;
    if (!w.flag.empty()) return w.flag;
    return w.key.empty() ? w.str() : fmt::format("{} ({})", w.str(), w.key);
  }
  if (const auto it = o.defaults.find(field); it != o.defaults.end()) return it->second;
  return "memplan default";
}
}  // namespace

std::string describe_runtime(const profiles::BuiltSetup& b) {
  const TrainingSetup& s = b.setup;
  const Runtime& r = s.runtime;
  std::vector<std::string> knobs;
  knobs.push_back("loss " + to_string(r, r.loss) + (r.loss_upcast ? "" : " (no fp32 upcast)"));
  knobs.push_back(fmt::format("optimizer {}", to_string(r.optimizer_impl)));
  for (const SwitchField& f : switch_fields())
    if (f.shown && f.get(s) && (!f.in_effect || f.in_effect(s))) knobs.emplace_back(f.shown);
  std::vector<std::string> by_framework;
  for (const auto& [field, source] : b.origin.defaults)
    if (source.rfind(to_string(r.framework), 0) == 0) by_framework.push_back(field);
  std::string line = fmt::format("runtime: {}, torch {}.{}: {}", to_string(r.framework), r.torch_major, r.torch_minor,
                                 fmt::join(knobs, ", "));
  if (!by_framework.empty()) line += fmt::format(" (framework defaults: {})", fmt::join(by_framework, ", "));
  return line;
}

nlohmann::json runtime_json(const TrainingSetup& s) {
  const Runtime& r = s.runtime;
  nlohmann::json j = {{"torch_version", fmt::format("{}.{}", r.torch_major, r.torch_minor)},
                      {"transformers_version", fmt::format("{}.{}", r.transformers_major, r.transformers_minor)},
                      {"loss", to_string(r, r.loss)}};
  for (const ChoiceField& f : choice_fields())
    if (f.json_section() == "runtime") j[f.json_key()] = f.get(s);
  for (const SwitchField& f : switch_fields())
    if (f.section() == "runtime") j[f.key()] = f.get(s);
  return j;
}

nlohmann::json sources_json(const profiles::BuiltSetup& b) {
  static const char* kFields[] = {
      "model.hidden_size", "precision", "optimizer", "checkpointing", "attention", "hardware.gpu", "hardware.gpu_memory",
      "hardware.allocator_cap", "parallel.zero_stage", "parallel.offload", "finetune.mode", "finetune.lora_alpha",
      "finetune.lora_targets", "finetune.adapter_dtype", "finetune.base_quant", "runtime.torch_version",
      "runtime.transformers_version", "runtime.loss"};
  nlohmann::json j = nlohmann::json::object();
  for (const char* f : kFields) j[std::string(f) == "model.hidden_size" ? "model" : f] = source_of(b.origin, f);
  for (const SwitchField& f : switch_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const CountField& f : count_fields()) j[f.path] = source_of(b.origin, f.path);
  for (const ChoiceField& f : choice_fields()) j[f.path] = source_of(b.origin, f.path);
  return j;
}

nlohmann::json setup_json(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  nlohmann::json j;
  j["model"] = {{"name", m.name},
                {"model_type", m.model_type},
                {"hidden_size", m.hidden_size},
                {"num_layers", m.num_layers},
                {"num_attention_heads", m.num_attention_heads},
                {"num_key_value_heads", m.num_key_value_heads},
                {"head_dim", m.head_dim},
                {"intermediate_size", m.intermediate_size},
                {"vocab_size", m.vocab_size},
                {"norm", to_string(m.norm)},
                {"activation", to_string(m.activation)},
                {"gated_mlp", m.gated_mlp},
                {"positions", to_string(m.positions)},
                {"tie_word_embeddings", m.tie_word_embeddings},
                {"head", to_string(m.head)}};
  if (m.num_experts > 0)
    j["model"]["moe"] = {{"num_experts", m.num_experts},
                         {"num_experts_per_token", m.experts_per_token},
                         {"expert_intermediate_size", m.expert_width()},
                         {"capacity_factor", m.capacity_factor},
                         {"num_shared_experts", m.num_shared_experts}};
  j["precision"] = to_string(s.precision);
  j["optimizer"] = to_string(s.optimizer);
  j["batch"] = {{"global_batch", saturating_mul(saturating_mul(s.batch.micro_batch, s.batch.grad_accum), s.parallel.data_parallel())}};
  j["checkpointing"] = to_string(s.checkpointing);
  j["attention"] = to_string(s.attention);
  j["parallel"] = {{"data_parallel", s.parallel.data_parallel()},
                   {"sequence_parallel", s.parallel.sequence_parallel},
                   {"zero_stage", s.parallel.zero_stage},
                   {"offload", to_string(s.parallel.offload)}};
  j["runtime"] = runtime_json(s);
  j["finetune"] = {{"mode", to_string(s.finetune.mode)}};
  if (s.finetune.mode != FinetuneMode::full) {
    j["finetune"]["lora_alpha"] = s.finetune.lora_alpha;
    j["finetune"]["lora_targets"] = s.finetune.lora_targets;
    j["finetune"]["adapter_dtype"] = s.finetune.adapter_fp32 ? "fp32" : "model";
    j["finetune"]["base_quant"] = to_string(s.finetune.base_quant);
    if (s.finetune.base_quant == BaseQuant::nf4) j["finetune"]["double_quant"] = s.finetune.double_quant;
  }
  // The counts at their paths (setup.batch.micro_batch), each where the setup shows it; the choices
  // outside the runtime (setup.parallel.fsdp).
  for (const CountField& f : count_fields())
    if (!f.shown || f.shown(s)) j[f.json_section()][f.json_key()] = f.get(s);
  for (const ChoiceField& f : choice_fields())
    if (f.json_section() != "runtime") j[f.json_section()][f.json_key()] = f.get(s);
  j["device_kind"] = to_string(s.device.kind);
  j["thresholds"] = {{"target", s.thresholds.target},
                     {"warning", s.thresholds.warning},
                     {"critical", s.thresholds.critical},
                     {"emergency", s.thresholds.emergency}};
  return j;
}

nlohmann::json verdict_json(const Verdict& v, const TrainingSetup& s) {
  if (!v.known)
    return {{"fits", nullptr}, {"utilization", nullptr}, {"headroom_bytes", nullptr}, {"status", "unknown"},
            {"target_utilization", s.thresholds.target}, {"reason", "no device capacity (pass --gpu or --gpu-memory)"}};
  return {{"fits", v.fits},
          {"runs", v.runs},
          {"utilization", v.utilization},
          {"headroom_bytes", v.headroom_bytes},
          {"status", v.status},
          {"target_utilization", s.thresholds.target}};
}

nlohmann::json host_json(const MemoryBreakdown& e, const TrainingSetup& s) {
  nlohmann::json terms = nlohmann::json::array();
  for (const HostTerm& h : e.host)
    terms.push_back({{"name", h.name}, {"bytes", h.bytes}, {"formula", h.formula}, {"source", h.source}, {"pinned", h.pinned}});
  const HostVerdict v = judge_host(e, s);
  nlohmann::json node = {{"ranks", v.ranks_per_node},
                         {"total_bytes", v.per_node_bytes},
                         {"pinned_bytes", v.pinned_per_gpu_bytes * v.ranks_per_node},
                         {"capacity_bytes", v.known ? nlohmann::json(v.capacity_bytes) : nlohmann::json(nullptr)},
                         {"fits", v.known ? nlohmann::json(v.fits) : nlohmann::json(nullptr)},
                         {"utilization", v.known ? nlohmann::json(v.utilization) : nlohmann::json(nullptr)}};
  if (!v.known) node["note"] = "host RAM per node unknown: --host-memory SIZE (or hardware.host_memory) checks it";
  return {{"terms", terms},
          {"total_bytes", v.per_gpu_bytes},
          {"per_gpu", {{"terms", terms}, {"total_bytes", v.per_gpu_bytes}, {"pinned_bytes", v.pinned_per_gpu_bytes}}},
          {"per_node", node}};
}

std::string host_line(const MemoryBreakdown& e, const TrainingSetup& s) {
  const HostVerdict v = judge_host(e, s);
  std::string line = fmt::format("host memory: {} per GPU", gib(v.per_gpu_bytes));
  if (v.pinned_per_gpu_bytes > 0) line += fmt::format(" ({} pinned)", gib(v.pinned_per_gpu_bytes));
  line += fmt::format(", {} per node ({} rank{})", gib(v.per_node_bytes), v.ranks_per_node, v.ranks_per_node == 1 ? "" : "s");
  if (!v.known) return line + "; node RAM unknown (--host-memory SIZE checks it)";
  return line + fmt::format("; node RAM {}: {} ({})", gib(v.capacity_bytes), v.fits ? "fits" : "does not fit", percent(v.utilization));
}

nlohmann::json estimate_json(const profiles::BuiltSetup& b, const MemoryBreakdown& e) {
  const TrainingSetup& s = b.setup;
  nlohmann::json j;
  j["schema"] = "memplan.estimate/v1";
  j["memplan_version"] = MEMPLAN_VERSION;
  j["setup"] = setup_json(s);
  j["setup"]["sources"] = sources_json(b);
  j["model"] = {{"name", s.model.name},
                {"hf_repo", s.model.hf_repo},
                {"parameters", e.params.total},
                {"trainable_parameters", e.params.trainable},
                {"active_parameters_per_token", e.params.active_per_token}};
  const PhaseState& peak = e.peak();
  nlohmann::json terms = nlohmann::json::array();
  for (int i = 0; i < kNumTerms; ++i)
    terms.push_back({{"name", term_name(term_at(i))},
                     {"bytes", peak.bytes[i]},
                     {"formula", e.text[i].formula},
                     {"source", e.text[i].source}});
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseState& ph : e.phases) {
    nlohmann::json t;
    for (int i = 0; i < kNumTerms; ++i) t[term_name(term_at(i))] = ph.bytes[i];
    phases.push_back({{"name", phase_name(ph.phase)}, {"bytes", ph.total()}, {"allocated_bytes", ph.allocated()},
                      {"reserved_bytes", ph.reserved()}, {"at", ph.at}, {"terms", t}});
  }
  nlohmann::json saved = nlohmann::json::array();
  for (const SavedTensor& r : e.saved_per_layer)
    saved.push_back({{"segment", r.layer}, {"op", r.op}, {"bytes", r.bytes}, {"category", r.category}});
  // The figures a user compares with what the GPU shows: torch.cuda.max_memory_allocated() (the
  // tensors; its peak may fall in another phase), max_memory_reserved(), and the device figure.
  int64_t allocated = 0;
  for (const PhaseState& ph : e.phases) allocated = std::max(allocated, ph.allocated());
  j["per_gpu"] = {{"terms", terms},
                  {"peak_bytes", e.peak_bytes()},
                  {"allocated_peak_bytes", allocated},
                  {"reserved_peak_bytes", peak.reserved()},
                  {"device_peak_bytes", peak.total()},
                  {"peak_phase", phase_name(peak.phase)},
                  {"peak_at", peak.at},
                  {"phases", phases},
                  {"saved_tensors_per_layer", saved}};
  j["host"] = host_json(e, s);
  j["device"] = {{"name", s.device.name},
                 {"kind", to_string(s.device.kind)},
                 {"capacity_bytes", s.device.capacity_bytes},
                 {"allocator_cap_bytes", s.device.allocator_cap_bytes > 0 ? nlohmann::json(s.device.allocator_cap_bytes) : nlohmann::json(nullptr)},
                 {"family", s.device.family}};
  j["verdict"] = verdict_json(judge(e, s), s);
  // What the verdict held against the target: the peak, or (the replay ran the step in the
  // target's share with the allocator's cache squeezed) that share plus the context.
  j["verdict"]["needed_bytes"] = e.verdict_bytes();
  const AttentionKernel ak = attention_kernel(s);
  j["attention_kernel"] = {{"name", backend_name(ak.backend)}, {"enable_gqa", ak.enable_gqa}, {"why", ak.why}};
  j["calibrated"] = e.calibrated;
  if (e.calibrated) j["calibration"] = e.calibration;
  j["notes"] = e.notes;
  nlohmann::json warnings = nlohmann::json::array();
  for (const Warning& w : b.warnings) warnings.push_back(w.render());
  j["warnings"] = warnings;
  return j;
}

namespace {
void to_yaml(YAML::Emitter& y, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      y << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        y << YAML::Key << it.key() << YAML::Value;
        to_yaml(y, it.value());
      }
      y << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      y << YAML::BeginSeq;
      for (const auto& v : j) to_yaml(y, v);
      y << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: y << j.get<std::string>(); break;
    case nlohmann::json::value_t::boolean: y << j.get<bool>(); break;
    case nlohmann::json::value_t::number_integer: y << j.get<int64_t>(); break;
    case nlohmann::json::value_t::number_unsigned: y << j.get<uint64_t>(); break;
    case nlohmann::json::value_t::number_float: y << j.get<double>(); break;
    default: y << YAML::Null;
  }
}
}  // namespace

void emit(std::ostream& out, const nlohmann::json& doc, Format f) {
  if (f == Format::yaml) {
    YAML::Emitter y;
    to_yaml(y, doc);
    out << y.c_str() << "\n";
  } else {
    // A path or name that is not UTF-8 (a file name is bytes) is written as U+FFFD, not refused.
    out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

void print_warnings(std::ostream& err, const std::vector<Warning>& w) {
  for (const Warning& x : w) err << x.render() << "\n";
}

}  // namespace memplan::cli
