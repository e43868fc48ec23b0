// The config emitters (see emit.h). Each writes the vocabulary its tool reads; the memplan,
// train-config, DeepSpeed and HF files read back through memplan's own readers to the same setup
// (tests/planner/plan_test.cpp). The HF TrainingArguments/TRL, Axolotl, accelerate, Lightning,
// torchtune and LitGPT emitters are in emit_<tool>.cpp.
#include "planner/emit.h"
#include "estimator/text.h"
#include "planner/emit_detail.h"

#include "estimator/fields.h"
#include "estimator/runtime.h"
#include "profiles/profiles.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace memplan::planner {

bool parse_emit_format(const std::string& s, EmitFormat* out) {
  if (s == "memplan") *out = EmitFormat::memplan;
  else if (s == "train-config") *out = EmitFormat::train_config;
  else if (s == "deepspeed") *out = EmitFormat::deepspeed;
  else if (s == "hf" || s == "trl") *out = EmitFormat::hf;  // one file: TRL's SFTConfig + ModelConfig keys
  else if (s == "lightning") *out = EmitFormat::lightning;
  else if (s == "axolotl") *out = EmitFormat::axolotl;
  else if (s == "accelerate") *out = EmitFormat::accelerate;
  else if (s == "llamafactory" || s == "llama-factory") *out = EmitFormat::llamafactory;
  else if (s == "torchtune") *out = EmitFormat::torchtune;
  else if (s == "litgpt") *out = EmitFormat::litgpt;
  else return false;
  return true;
}

std::vector<std::string> emit_format_names() {
  return {"memplan", "train-config", "deepspeed", "hf", "trl", "lightning", "torchtune", "litgpt", "axolotl", "accelerate", "llamafactory"};
}

std::optional<EmitFormat> emit_format_of_config(const std::string& kind) {
  // memplan's YAML (any of its dialects: a train-config file kept as --emit memplan is checked by
  // its re-estimate like any other).
  if (kind == "memplan") return EmitFormat::memplan;
  if (kind == "deepspeed") return EmitFormat::deepspeed;
  if (kind == "hf-trainer") return EmitFormat::hf;
  EmitFormat f;
  if (parse_emit_format(kind, &f)) return f;
  return std::nullopt;
}

KeyVocabulary emit_vocabulary(EmitFormat f) {
  switch (f) {
    // TrainingArguments/TRL: the load dtype (torch_dtype before transformers 4.56, dtype since;
    // profiles/formats/hf_trainer.cpp reads either), the sequence length (TRL's max_seq_length
    // before 0.16, max_length since; run_clm.py's block_size), fsdp_config's options with or
    // without accelerate's fsdp_ prefix.
    case EmitFormat::hf:
      return {{{"dtype", "torch_dtype"}, {"max_length", "max_seq_length", "block_size"}, {"offload_params", "fsdp_offload_params"},
               {"fsdp_version", "version"}},
              {}};
    // Axolotl's fsdp_config takes FSDP options with or without accelerate's fsdp_ prefix (the
    // reader strips it, profiles/formats/hf_family.cpp fsdp_config).
    case EmitFormat::axolotl: return {{{"offload_params", "fsdp_offload_params"}, {"fsdp_version", "version"}}, {}};
    // LightningCLI (jsonargparse) takes a class's arguments under init_args beside its class_path.
    case EmitFormat::lightning: return {{}, {"init_args"}};
    default: return {};
  }
}

std::string default_file_name(EmitFormat f) {
  switch (f) {
    case EmitFormat::memplan: return "memplan-plan.yaml";
    case EmitFormat::train_config: return "train-config.yaml";
    case EmitFormat::deepspeed: return "ds_config.json";
    case EmitFormat::hf: return "training_args.yaml";
    case EmitFormat::lightning: return "lightning-config.yaml";
    case EmitFormat::axolotl: return "axolotl.yaml";
    case EmitFormat::accelerate: return "accelerate-config.yaml";
    case EmitFormat::llamafactory: return "llamafactory-train.yaml";
    case EmitFormat::torchtune: return "torchtune-config.yaml";
    case EmitFormat::litgpt: return "litgpt-config.yaml";
  }
  return "plan.txt";
}

namespace {

// The header every file opens with (as comment lines, without the comment marker).
std::vector<std::string> header(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const int64_t cap = s.device.capacity_bytes;
  const int64_t target = static_cast<int64_t>(c.budget * static_cast<double>(cap));
  // Names from outside (a model folder, a user's GPU catalog) as one comment line each.
  return {fmt::format("memplan {} plan: {} on {} x {}", MEMPLAN_VERSION, text::comment_text(s.model.name), s.parallel.num_gpus,
                      !c.gpu.empty() ? text::comment_text(c.gpu) : s.device.kind == DeviceKind::cpu ? "cpu" : text::fixed_gib(cap) + " GPU"),
          fmt::format("estimated peak {} of {} ({:.1f}%), headroom {} below the {:.0f}% budget", text::fixed_gib(c.peak_bytes), text::fixed_gib(cap),
                      100.0 * static_cast<double>(c.peak_bytes) / static_cast<double>(cap), text::fixed_gib(target - c.peak_bytes), 100 * c.budget),
          fmt::format("global batch {} = {} x {} x {} GPUs, {} tokens each; ~{:.0f} tokens/s (modelled, not measured)",
                      c.global_batch, s.batch.micro_batch, s.batch.grad_accum, s.parallel.data_parallel(), s.batch.seq_len,
                      c.tokens_per_s)};
}

std::string hash_header(const EmitContext& c) {
  std::string out;
  for (const auto& l : header(c)) out += "# " + l + "\n";
  return out;
}

std::string yaml_bool(bool b) { return b ? "true" : "false"; }

std::string checkpointing_value(const Checkpointing& k) {
  return k.mode == CheckpointMode::none ? "false" : k.mode == CheckpointMode::full ? "true" : "\"" + to_string(k) + "\"";
}

// The model: section (preset, hf_config, or the architecture inline).
std::string model_section(const EmitContext& c, bool with_attention) {
  const ModelSpec& m = c.setup.model;
  std::string y = "model:\n";
  switch (c.model.kind) {
    case ModelRef::Kind::preset: y += fmt::format("  preset: {}\n", text::yaml_scalar(c.model.value)); break;
    case ModelRef::Kind::file: y += fmt::format("  hf_config: {}\n", text::yaml_scalar(c.model.value)); break;
    case ModelRef::Kind::inline_spec:
      y += fmt::format("  name: {}\n  model_type: {}\n  hidden_size: {}\n  num_layers: {}\n  num_attention_heads: {}\n"
                       "  num_key_value_heads: {}\n  head_dim: {}\n  intermediate_size: {}\n  vocab_size: {}\n"
                       "  max_position_embeddings: {}\n  norm: {}\n  activation: {}\n  gated_mlp: {}\n  tie_word_embeddings: {}\n",
                       text::yaml_scalar(m.name), text::yaml_scalar(m.model_type), m.hidden_size, m.num_layers, m.num_attention_heads, m.num_key_value_heads, m.head_dim,
                       m.intermediate_size, m.vocab_size, m.max_position_embeddings,
                       m.norm == NormKind::rms_norm ? "rms_norm" : "layer_norm", to_string(m.activation), yaml_bool(m.gated_mlp),
                       yaml_bool(m.tie_word_embeddings));
      if (m.num_experts > 0)
        y += fmt::format("  num_experts: {}\n  num_experts_per_token: {}\n  moe_intermediate_size: {}\n  capacity_factor: {}\n",
                         m.num_experts, m.experts_per_token, m.expert_width(), m.capacity_factor);
      if (m.attention_dropout > 0 || m.hidden_dropout > 0)
        y += fmt::format("  attention_dropout: {}\n  hidden_dropout: {}\n", m.attention_dropout, m.hidden_dropout);
      break;
  }
  if (with_attention) y += fmt::format("  {}: {}\n", field(Choice::attention).key, to_string(c.setup.attention));
  return y;
}

// The counts of the registry (estimator/fields.h) that memplan YAML section `section` reads and
// does not write anyway (`written`), where `s` differs from the default the reader starts from, as
// (first key, value).
std::vector<std::pair<std::string, int64_t>> count_entries(const TrainingSetup& s, const char* section,
                                                            std::initializer_list<Count> written) {
  const TrainingSetup plain;
  std::vector<std::pair<std::string, int64_t>> e;
  for (const CountField& f : count_fields())
    if (std::string(f.section) == section && std::find(written.begin(), written.end(), f.id) == written.end() &&
        f.get(s) != f.get(plain))
      e.emplace_back(f.keys[0], f.get(s));
  return e;
}

// The same as "  key: value" lines.
std::string count_lines(const TrainingSetup& s, const char* section, std::initializer_list<Count> written) {
  std::string y;
  for (const auto& [k, v] : count_entries(s, section, written)) y += fmt::format("  {}: {}\n", k, v);
  return y;
}

std::string hardware_section(const EmitContext& c) {
  std::string y = "hardware:\n";
  const DeviceSpec& d = c.setup.device;
  if (!c.gpu.empty()) y += fmt::format("  {}: {}\n", field(Target::gpu).key, text::yaml_scalar(c.gpu));
  if (d.kind == DeviceKind::cpu) y += fmt::format("  {}: cpu\n", field(Target::device).key);
  // Sizes with their unit, as memplan reads them back (profiles::read_size refuses a bare number).
  if (const int64_t card = stated_card_bytes(c); card > 0) y += fmt::format("  {}: {}\n", field(Size::gpu_memory).key, text::size_argument(card));
  if (d.allocator_cap_bytes > 0) y += fmt::format("  {}: {}\n", field(Size::allocator_cap).key, allocator_cap_text(d));
  if (const int64_t host = stated_host_bytes(c); host > 0) y += fmt::format("  {}: {}\n", field(Size::host_memory).key, text::size_argument(host));
  y += fmt::format("  {}: {}\n", field(Count::num_gpus).keys[0], c.setup.parallel.num_gpus);
  return y + count_lines(c.setup, "hardware", {Count::num_gpus});
}

// The planning budget as the target; the default bands above it, raised to it when it is higher.
Thresholds emitted_thresholds(double budget) {
  const Thresholds d;
  return {budget, std::max(d.warning, budget), std::max(d.critical, budget), std::max(d.emergency, budget)};
}

std::string memory_section(const EmitContext& c, const char* indent) {
  const Thresholds t = emitted_thresholds(c.budget);
  TrainingSetup with;
  with.thresholds = t;
  std::string y = fmt::format("{}memory:\n", indent);
  for (const NumberField& f : number_fields())  // the thresholds, under their first keys
    if (std::string(f.section) == "memory") y += fmt::format("{}  {}: {:.2f}\n", indent, f.keys[0], f.get(with));
  return y;
}

// The knobs a framework's defaults may set (the runtime's switches and choices, the loss, the
// adapters' dtype) that the memplan file emitted for `s` must state (by setup path): those where `s`
// differs from what the reader makes of the rest -- the default TrainingSetup with `s`'s
// framework, versions, parallelism, fine-tuning method and device, the knobs stated, and the
// framework's defaults for the others. A default may follow a stated knob (compile_loss follows compile and the loss), so
// what is stated grows until it settles.
std::set<std::string> stated_knobs(const TrainingSetup& s) {
  TrainingSetup base;
  base.runtime.framework = s.runtime.framework;
  for (const VersionField& f : version_fields()) {
    const auto [major, minor] = f.get(s);
    f.set(base, major, minor);
  }
  base.runtime.zero_grad_set_to_none = s.runtime.torch_major >= 2;
  base.parallel = s.parallel;
  base.parallel.fsdp = FsdpMode::none;
  base.parallel.sequence_parallel = Parallelism{}.sequence_parallel;
  base.finetune.mode = s.finetune.mode;
  base.device = s.device;
  std::set<std::string> stated;
  TrainingSetup d;
  for (size_t pass = 0; pass <= kSwitchCount + 3; ++pass) {
    d = base;
    for (const SwitchField& f : switch_fields())
      if (stated.count(f.path)) f.set(d, f.get(s));
    // The choices read by their key (the runtime's, the loss, the adapters' dtype); the framework
    // is the base's already.
    for (const ChoiceField& f : choice_fields())
      if (f.read == ChoiceRead::key && f.id != Choice::framework && stated.count(f.path)) f.set(d, f.get(s));
    apply_framework_defaults(d, [&stated](const std::string& f) { return stated.count(f) > 0; });
    const size_t before = stated.size();
    for (const SwitchField& f : switch_fields())
      if (f.get(s) != f.get(d)) stated.insert(f.path);
    for (const ChoiceField& f : choice_fields())
      if (f.read == ChoiceRead::key && f.get(s) != f.get(d)) stated.insert(f.path);
    if (stated.size() == before) break;
  }
  return stated;
}

// The switches of `section` among the `stated` knobs (stated_knobs(s)), as (key, value) pairs.
std::vector<std::pair<std::string, std::string>> switch_entries(const TrainingSetup& s, const std::set<std::string>& stated,
                                                                const std::string& section) {
  std::vector<std::pair<std::string, std::string>> e;
  for (const SwitchField& f : switch_fields())
    if (f.section() == section && stated.count(f.path)) e.emplace_back(f.key(), yaml_bool(f.get(s)));
  return e;
}

// The runtime as (key, value) pairs of memplan's runtime: section: the framework when it is not
// the HF Trainer, and every knob that differs from what that framework's defaults give (a reader
// applies them to what the file leaves out), so the file reads back to the same runtime.
std::vector<std::pair<std::string, std::string>> runtime_entries(const TrainingSetup& s, const std::set<std::string>& stated) {
  const Runtime& r = s.runtime;
  const TrainingSetup plain;
  std::vector<std::pair<std::string, std::string>> e;
  auto choice = [&](Choice id) { e.emplace_back(field(id).key, field(id).get(s)); };
  if (r.framework != Framework::hf_trainer) choice(Choice::framework);
  for (const VersionField& f : version_fields())
    if (f.get(s) != f.get(plain)) e.emplace_back(f.keys[0], "\"" + f.text(s) + "\"");
  if (stated.count(path(Choice::loss))) choice(Choice::loss);
  if (stated.count(path(Choice::optimizer_impl))) choice(Choice::optimizer_impl);
  for (auto& kv : switch_entries(s, stated, "runtime")) e.push_back(std::move(kv));
  if (stated.count(path(Choice::fsdp))) choice(Choice::fsdp);
  return e;
}

std::string runtime_section(const TrainingSetup& s, const std::set<std::string>& stated, const char* indent) {
  const auto e = runtime_entries(s, stated);
  if (e.empty()) return "";
  std::string y = fmt::format("{}runtime:\n", indent);
  for (const auto& [k, v] : e) y += fmt::format("{}  {}: {}\n", indent, k, v);
  return y;
}

std::string finetune_section(const EmitContext& c, const std::set<std::string>& stated) {
  const Finetune& f = c.setup.finetune;
  const std::string counts = count_lines(c.setup, "finetune", {Count::lora_rank});
  if (f.mode == FinetuneMode::full) return counts.empty() ? "" : "finetune:\n" + counts;  // freeze_layers
  std::string y = fmt::format("lora:\n  {}: {}\n  {}: {}\n  {}: {}\n  {}: {}\n", field(Choice::finetune).key, to_string(f.mode),
                              field(Count::lora_rank).keys[0], f.lora_rank, field(Number::lora_alpha).keys[0], f.lora_alpha,
                              field(Number::lora_dropout).keys[0], f.lora_dropout);
  for (const ListField& l : list_fields())  // the LoRA targets (empty: PEFT's default, nothing to write)
    if (std::string(l.section) == "finetune" && !l.get(c.setup).empty())
      y += fmt::format("  {}: [{}]\n", l.keys[0], fmt::join(l.get(c.setup), ", "));
  // What the adapters' setup trains beside them (PEFT's modules_to_save, read into Setting::train_head
  // and train_embeddings).
  if (const std::vector<std::string> save = detail::saved_modules(f); !save.empty())
    y += fmt::format("  modules_to_save: [{}]\n", fmt::join(save, ", "));
  y += counts;
  for (const auto& [k, v] : switch_entries(c.setup, stated, "finetune")) y += fmt::format("  {}: {}\n", k, v);
  if (stated.count(path(Choice::adapter_dtype)))  // a dtype the framework's default does not give
    y += fmt::format("  {}: {}\n", field(Choice::adapter_dtype).key, field(Choice::adapter_dtype).get(c.setup));
  return y;
}

// The setting rows read in file section `section` whose value differs from TrainingSetup's default
// (what a file that leaves them out reads back as), as "key: value" lines under `indent`.
std::string changed_setting_lines(const TrainingSetup& s, const char* section, const char* indent) {
  const TrainingSetup defaults;
  std::string y;
  for (const SettingField& f : setting_fields())
    if (f.section && std::string(f.section) == section && f.get(s) != f.get(defaults))
      y += fmt::format("{}{}: {}\n", indent, f.keys[0], f.yes_no ? yaml_bool(f.get(s) != 0) : std::to_string(f.get(s)));
  return y;
}

// DeepSpeed's 16-bit master state where the setup keeps it: only beside fp32 masters' regime
// (mixed-bf16/fp16; deepspeed/runtime/precision_config.py @ v0.18.3).
bool half_master_state(const TrainingSetup& s) { return s.parallel.half_master && master_bytes_per_param(s.precision) > 0; }

// The deepspeed: block under training: of a file memplan reads (its YAML, the train-config):
// `short_form`, the file's own short keys, where the ZeRO settings (the setting rows of
// zero_optimization, the offload's pin_memory, DeepSpeed's 16-bit master state) are what that block
// reads back as; else a DeepSpeed config of its own, which states them.
std::string deepspeed_block(const TrainingSetup& s, const std::string& short_form) {
  if (!detail::zero_settings_differ(s, TrainingSetup{})) return short_form;
  const std::string zero = changed_setting_lines(s, kZeroSection, "      ");
  // DeepSpeed's 16-bit master state, which its bf16:/fp16: section states beside the precision.
  const bool bf16 = s.precision == Precision::mixed_bf16;
  const bool half = half_master_state(s);
  std::string y = fmt::format("  deepspeed:\n    zero_optimization:\n      stage: {}\n", s.parallel.zero_stage);
  for (const auto& [name, on] : {std::pair{"offload_optimizer", offloads_optimizer(s.parallel.offload)},
                                 std::pair{"offload_param", offloads_params(s.parallel.offload)}})
    if (on) y += fmt::format("      {}:\n        device: cpu\n        pin_memory: {}\n", name, yaml_bool(s.parallel.offload_pin_memory));
  y += zero;
  if (half) {
    y += fmt::format("    {0}:\n      enabled: true\n      {0}_master_weights_and_grads: true\n", bf16 ? "bf16" : "fp16");
    if (bf16 && s.parallel.half_optimizer_states) y += "      bf16_optimizer_states: true\n";
  }
  return y;
}

std::string emit_memplan(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const std::set<std::string> stated = stated_knobs(s);  // once: the runtime, training and lora sections share it
  std::string y = hash_header(c);
  y += model_section(c, true);
  y += hardware_section(c);
  y += fmt::format("training:\n  {}: {}\n  {}: {}\n  global_batch_size: {}\n  {}: {}\n  {}: {}\n  {}: {}\n  {}: {}\n",
                   field(Count::micro_batch).keys[0], s.batch.micro_batch, field(Count::grad_accum).keys[0], s.batch.grad_accum,
                   c.global_batch, field(Count::seq_len).keys[0], s.batch.seq_len, field(Choice::precision).key,
                   to_string(s.precision), field(Choice::optimizer).key, to_string(s.optimizer), field(Choice::checkpointing).key,
                   checkpointing_value(s.checkpointing));
  y += count_lines(s, "training", {Count::micro_batch, Count::grad_accum, Count::zero_stage});  // the parallel degrees
  for (const auto& [k, v] : switch_entries(s, stated, "parallel")) y += fmt::format("  {}: {}\n", k, v);
  y += changed_setting_lines(s, "training", "  ");  // DDP's gradient_as_bucket_view
  if (s.parallel.fsdp != FsdpMode::none) {
    if (s.parallel.offload != Offload::none)  // FSDP CPUOffload
      y += fmt::format("  {}: {}\n", field(Choice::offload).key, to_string(s.parallel.offload));
  } else if (s.parallel.zero_stage > 0 || s.parallel.offload != Offload::none) {
    y += deepspeed_block(s, fmt::format("  deepspeed:\n    use_deepspeed: true\n    zero_stage: {}\n    offload_optimizer: {}\n"
                                        "    offload_param: {}\n",
                                        s.parallel.zero_stage, yaml_bool(offloads_optimizer(s.parallel.offload)),
                                        yaml_bool(offloads_params(s.parallel.offload))));
  }
  y += memory_section(c, "  ");
  y += runtime_section(s, stated, "  ");
  y += finetune_section(c, stated);
  // The DataLoader's settings where they differ from torch's defaults (host memory: prefetched and
  // pinned batches).
  if (const std::string data = changed_setting_lines(s, "data", "  "); !data.empty()) y += "data:\n" + data;
  return y;
}

// A training script's config: model/training/data/deepspeed/memory/output sections.
std::string emit_train_config(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  std::string y = hash_header(c);
  y += model_section(c, false);
  y += fmt::format("  use_flash_attention: {}\n", yaml_bool(s.attention == AttentionImpl::flash));
  if (s.attention == AttentionImpl::sdpa) y += "  attention: sdpa\n";
  y += fmt::format("training:\n  batch_size: {}\n  gradient_accumulation_steps: {}\n  global_batch_size: {}\n", s.batch.micro_batch,
                   s.batch.grad_accum, c.global_batch);
  switch (s.precision) {
    case Precision::amp_bf16: case Precision::mixed_bf16: y += "  mixed_precision: bf16\n"; break;
    case Precision::amp_fp16: case Precision::mixed_fp16: y += "  mixed_precision: fp16\n"; break;
    default: y += fmt::format("  precision: {}\n", to_string(s.precision));
  }
  y += fmt::format("  optimizer: {}\n", to_string(s.optimizer));
  y += count_lines(s, "training", {Count::micro_batch, Count::grad_accum, Count::zero_stage});  // the parallel degrees
  if (s.parallel.fsdp != FsdpMode::none) {
    if (s.parallel.offload != Offload::none)  // FSDP CPUOffload
      y += fmt::format("  {}: {}\n", field(Choice::offload).key, to_string(s.parallel.offload));
  } else {
    const bool ds = s.parallel.zero_stage > 0 || master_bytes_per_param(s.precision) > 0;
    std::string short_form = fmt::format("  deepspeed:\n    use_deepspeed: {}\n    zero_stage: {}\n    cpu_offload: {}\n", yaml_bool(ds),
                                         s.parallel.zero_stage, yaml_bool(offloads_optimizer(s.parallel.offload)));
    if (offloads_params(s.parallel.offload)) short_form += "    offload_param: true\n";
    y += s.parallel.zero_stage > 0 || s.parallel.offload != Offload::none ? deepspeed_block(s, short_form) : short_form;
  }
  y += changed_setting_lines(s, "training", "  ");  // DDP's gradient_as_bucket_view
  y += memory_section(c, "  ");
  y += fmt::format("data:\n  max_length: {}\n", s.batch.seq_len) + changed_setting_lines(s, "data", "  ");
  y += fmt::format("output:\n  gradient_checkpointing: {}\n", checkpointing_value(s.checkpointing));
  y += hardware_section(c);
  const std::set<std::string> stated = stated_knobs(s);
  y += runtime_section(s, stated, "");
  y += finetune_section(c, stated);
  return y;
}

nlohmann::ordered_json deepspeed_json(const TrainingSetup& s, int64_t global_batch) {
  nlohmann::ordered_json j;
  j["train_batch_size"] = global_batch;
  j["train_micro_batch_size_per_gpu"] = s.batch.micro_batch;
  j["gradient_accumulation_steps"] = s.batch.grad_accum;
  const bool half = half_master_state(s);
  if (s.precision == Precision::mixed_bf16 || s.precision == Precision::amp_bf16 || s.precision == Precision::bf16) {
    j["bf16"] = {{"enabled", true}};
    if (half) j["bf16"]["bf16_master_weights_and_grads"] = true;
    if (half && s.parallel.half_optimizer_states) j["bf16"]["bf16_optimizer_states"] = true;
  }
  if (s.precision == Precision::mixed_fp16 || s.precision == Precision::amp_fp16 || s.precision == Precision::fp16) {
    j["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16}};
    if (half) j["fp16"]["fp16_master_weights_and_grads"] = true;
  }
  nlohmann::ordered_json z;
  z["stage"] = s.parallel.zero_stage;
  // The settings under their keys (estimator/fields.h), the stage-3 ones at stage 3.
  z[key(Setting::overlap_comm)] = s.parallel.overlap_comm;
  z[key(Setting::reduce_bucket_elems)] = s.parallel.reduce_bucket_elems;
  z[key(Setting::allgather_bucket_elems)] = s.parallel.allgather_bucket_elems;
  if (!s.parallel.contiguous_gradients) z[key(Setting::contiguous_gradients)] = false;  // DeepSpeed's default is true
  if (s.parallel.zero_stage == 3) {
    z[key(Setting::stage3_prefetch_bucket_elems)] = s.parallel.stage3_prefetch_bucket_elems;
    z[key(Setting::stage3_max_live_parameters)] = s.parallel.stage3_max_live_parameters;
  }
  const bool pin = s.parallel.offload_pin_memory;
  if (offloads_optimizer(s.parallel.offload)) z["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", pin}};
  if (offloads_params(s.parallel.offload)) z["offload_param"] = {{"device", "cpu"}, {"pin_memory", pin}};
  j["zero_optimization"] = z;
  // AutoTP training (https://www.deepspeed.ai/tutorials/autotp-training/), which the reader takes back.
  if (s.parallel.tensor_parallel > 1) j["tensor_parallel"] = {{"autotp_size", s.parallel.tensor_parallel}};
  return j;
}

std::string emit_deepspeed(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  nlohmann::ordered_json j;
  const auto h = header(c);
  j["_comment"] = fmt::format("{}", fmt::join(h, "; "));
  const nlohmann::ordered_json ds = deepspeed_json(s, c.global_batch);  // named: items() must not outlive it
  for (const auto& [k, v] : ds.items()) j[k] = v;
  // What DeepSpeed cannot express, for `memplan estimate --config` (DeepSpeed ignores it).
  nlohmann::ordered_json m;
  if (c.model.kind == ModelRef::Kind::preset) m["model"] = c.model.value;
  else if (c.model.kind == ModelRef::Kind::file) m["model"] = {{"hf_config", c.model.value}};
  m["hardware"] = nlohmann::ordered_json::object();
  if (!c.gpu.empty()) m["hardware"][field(Target::gpu).key] = c.gpu;
  if (s.device.kind == DeviceKind::cpu) m["hardware"][field(Target::device).key] = "cpu";
  if (const int64_t card = stated_card_bytes(c); card > 0) m["hardware"][field(Size::gpu_memory).key] = text::size_argument(card);
  if (s.device.allocator_cap_bytes > 0) m["hardware"][field(Size::allocator_cap).key] = allocator_cap_text(s.device);
  if (const int64_t host = stated_host_bytes(c); host > 0) m["hardware"][field(Size::host_memory).key] = text::size_argument(host);
  m["hardware"][field(Count::num_gpus).keys[0]] = s.parallel.num_gpus;
  for (const auto& [k, v] : count_entries(s, "hardware", {Count::num_gpus})) m["hardware"][k] = v;
  TrainingSetup budget;
  budget.thresholds = emitted_thresholds(c.budget);
  nlohmann::ordered_json memory = nlohmann::ordered_json::object();
  for (const NumberField& f : number_fields())  // the thresholds, under their first keys
    if (std::string(f.section) == "memory") memory[f.keys[0]] = f.get(budget);
  m["training"] = {{"seq_len", s.batch.seq_len},
                   {field(Choice::attention).key, to_string(s.attention)},
                   {field(Choice::checkpointing).key, to_string(s.checkpointing)},
                   {field(Choice::optimizer).key, to_string(s.optimizer)},
                   {"memory", memory}};
  // The parallel degrees DeepSpeed's keys do not hold (tensor parallelism is its AutoTP above).
  for (const auto& [k, v] : count_entries(s, "training", {Count::micro_batch, Count::grad_accum, Count::tensor_parallel, Count::zero_stage}))
    m["training"][k] = v;
  nlohmann::ordered_json rt = nlohmann::ordered_json::object();
  const std::set<std::string> stated = stated_knobs(s);
  for (const auto& [k, v] : runtime_entries(s, stated))
    rt[k] = v == "true" ? nlohmann::ordered_json(true) : v == "false" ? nlohmann::ordered_json(false)
            : v.front() == '"' ? nlohmann::ordered_json(v.substr(1, v.size() - 2)) : nlohmann::ordered_json(v);
  if (!rt.empty()) m["runtime"] = rt;
  if (s.finetune.mode != FinetuneMode::full) {
    m["lora"] = {{field(Choice::finetune).key, to_string(s.finetune.mode)},
                 {field(Count::lora_rank).keys[0], s.finetune.lora_rank},
                 {field(Number::lora_alpha).keys[0], s.finetune.lora_alpha},
                 {field(Number::lora_dropout).keys[0], s.finetune.lora_dropout}};
    for (const ListField& l : list_fields())
      if (std::string(l.section) == "finetune" && !l.get(s).empty()) m["lora"][l.keys[0]] = l.get(s);
    for (const SwitchField& f : switch_fields())
      if (f.section() == "finetune" && stated.count(f.path)) m["lora"][f.key()] = f.get(s);
    if (stated.count(path(Choice::adapter_dtype))) m["lora"][field(Choice::adapter_dtype).key] = field(Choice::adapter_dtype).get(s);
  }
  for (const auto& [k, v] : count_entries(s, "finetune", {Count::lora_rank}))  // freeze_layers
    m[s.finetune.mode == FinetuneMode::full ? "finetune" : "lora"][k] = v;
  j["memplan"] = m;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string allocator_cap_text(const DeviceSpec& d) {
  if (d.allocator_cap_bytes <= 0) return "";
  return d.allocator_cap_fraction > 0 ? fmt::format("{}", d.allocator_cap_fraction) : text::size_argument(d.allocator_cap_bytes);
}

int64_t stated_card_bytes(const EmitContext& c) {
  const int64_t card = c.setup.device.card_bytes();
  // The CPU's is this machine's RAM unless --gpu-memory replaced it.
  if (c.setup.device.kind == DeviceKind::cpu) return card != profiles::host_memory_bytes() ? card : 0;
  if (c.gpu.empty()) return card;
  const profiles::GpuProfile* preset = profiles::gpu_catalog().find(c.gpu);
  return preset && card > 0 && preset->usable_bytes() != card ? card : 0;
}

int64_t stated_host_bytes(const EmitContext& c) {
  const int64_t host = c.setup.parallel.host_memory_bytes;
  // --device cpu's default is this machine's RAM (profiles/build.cpp): a file states only another.
  if (c.setup.device.kind == DeviceKind::cpu && host == profiles::host_memory_bytes()) return 0;
  return std::max<int64_t>(host, 0);
}

std::vector<std::string> target_args(const EmitContext& c) {
  const DeviceSpec& d = c.setup.device;
  std::vector<std::string> out;
  if (!c.gpu.empty()) out = {field(Target::gpu).flag, c.gpu};
  if (d.kind == DeviceKind::cpu) out.insert(out.end(), {field(Target::device).flag, "cpu"});
  if (const int64_t card = stated_card_bytes(c); card > 0) out.insert(out.end(), {field(Size::gpu_memory).flag, text::size_argument(card)});
  if (d.allocator_cap_bytes > 0) out.insert(out.end(), {field(Size::allocator_cap).flag, allocator_cap_text(d)});
  if (const int64_t host = stated_host_bytes(c); host > 0) out.insert(out.end(), {field(Size::host_memory).flag, text::size_argument(host)});
  if (!c.calibration.empty()) out.insert(out.end(), {field(Target::calibration).flag, c.calibration});
  return out;
}

namespace detail {
std::vector<std::string> header_lines(const EmitContext& c) { return header(c); }
bool zero_settings_differ(const TrainingSetup& s, const TrainingSetup& base) {
  for (const SettingField& f : setting_fields())
    if (f.section && std::string(f.section) == kZeroSection && f.get(s) != f.get(base)) return true;
  return (s.parallel.offload_pin_memory && s.parallel.offload != Offload::none) || half_master_state(s);
}
std::string deepspeed_text(const TrainingSetup& s, int64_t global_batch, bool batch_auto) {
  nlohmann::ordered_json j = deepspeed_json(s, global_batch);
  if (batch_auto)
    for (const char* k : {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}) j[k] = "auto";
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace detail

std::string recheck_from_header(const std::string& text, const std::string& file) {
  const std::string tag = "# Re-check: ";
  const size_t at = text.find(tag);
  if (at == std::string::npos) return "";
  const size_t end = text.find('\n', at);
  std::string cmd = text.substr(at + tag.size(), end == std::string::npos ? std::string::npos : end - at - tag.size());
  const std::string word = text::shell_word(file);
  for (size_t p = cmd.find("THIS_FILE"); p != std::string::npos; p = cmd.find("THIS_FILE", p + word.size())) cmd.replace(p, 9, word);
  return cmd;
}

std::string emit(const EmitContext& c, EmitFormat f) {
  switch (f) {
    case EmitFormat::memplan: return emit_memplan(c);
    case EmitFormat::train_config: return emit_train_config(c);
    case EmitFormat::deepspeed: return emit_deepspeed(c);
    case EmitFormat::hf: return detail::emit_hf(c);
    case EmitFormat::axolotl: return detail::emit_axolotl(c);
    case EmitFormat::accelerate: return detail::emit_accelerate(c);
    case EmitFormat::llamafactory: return detail::emit_llamafactory(c);
    case EmitFormat::lightning: return emit_lightning(c);
    case EmitFormat::torchtune: return emit_torchtune(c);
    case EmitFormat::litgpt: return emit_litgpt(c);
  }
  return "";
}

std::optional<Framework> emit_framework(EmitFormat f) {
  switch (f) {
    case EmitFormat::lightning: return Framework::lightning;
    case EmitFormat::torchtune: return Framework::torchtune;
    case EmitFormat::litgpt: return Framework::litgpt;
    default: return std::nullopt;
  }
}

std::string comment_header(const EmitContext& c) { return hash_header(c); }

}  // namespace memplan::planner
