// Format names, detection by content, and the shared ReadState (formats.h).
#include "profiles/formats.h"

#include <fmt/format.h>

namespace memplan::profiles::detail {
namespace fs = std::filesystem;

namespace {

struct FormatInfo {
  ConfigFormat format;
  const char* name;
  const char* title;
};
const FormatInfo kFormats[] = {
    {ConfigFormat::memplan_yaml, "memplan", "memplan YAML"},
    {ConfigFormat::deepspeed_json, "deepspeed", "DeepSpeed config"},
    {ConfigFormat::hf_config, "hf-config", "Hugging Face config.json"},
    {ConfigFormat::hf_trainer, "hf-trainer", "HF TrainingArguments / TRL config"},
    {ConfigFormat::axolotl, "axolotl", "Axolotl config"},
    {ConfigFormat::llamafactory, "llamafactory", "LLaMA-Factory config"},
    {ConfigFormat::torchtune, "torchtune", "torchtune recipe config"},
    {ConfigFormat::torchtitan, "torchtitan", "torchtitan TOML config"},
    {ConfigFormat::litgpt, "litgpt", "LitGPT config"},
    {ConfigFormat::lightning, "lightning", "LightningCLI config"},
    {ConfigFormat::accelerate, "accelerate", "accelerate config"},
    {ConfigFormat::nemo, "nemo", "NeMo / Megatron config"},
};

bool has(const Node& n, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (n.find(k)) return true;
  return false;
}

// Any `_component_` under the map naming a torchtune class.
bool torchtune_component(const Node& n) {
  if (n.kind != Node::Kind::map) return false;
  for (const auto& [k, v] : n.entries) {
    if (k == "_component_" && v.kind == Node::Kind::scalar && v.text.rfind("torchtune.", 0) == 0) return true;
    if (v.kind == Node::Kind::map && torchtune_component(v)) return true;
  }
  return false;
}

}  // namespace

const char* format_name(ConfigFormat f) {
  for (const auto& i : kFormats)
    if (i.format == f) return i.name;
  return "?";
}
const char* format_title(ConfigFormat f) {
  for (const auto& i : kFormats)
    if (i.format == f) return i.title;
  return "?";
}
std::optional<ConfigFormat> parse_format(const std::string& name) {
  const std::string l = lower(name);
  for (const auto& i : kFormats)
    if (l == i.name) return i.format;
  if (l == "trl" || l == "hf" || l == "training-args" || l == "alignment-handbook") return ConfigFormat::hf_trainer;
  if (l == "memplan-yaml") return ConfigFormat::memplan_yaml;
  if (l == "megatron") return ConfigFormat::nemo;
  if (l == "llama-factory" || l == "llama_factory") return ConfigFormat::llamafactory;
  return std::nullopt;
}
std::vector<std::string> format_names() {
  std::vector<std::string> out;
  for (const auto& i : kFormats) out.emplace_back(i.name);
  return out;
}

std::optional<ConfigFormat> detect_format(const Node& root, bool json, bool toml) {
  if (root.kind != Node::Kind::map) return std::nullopt;
  if (toml) return ConfigFormat::torchtitan;
  if (json) {
    if (has(root, {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size"})) return ConfigFormat::deepspeed_json;
    if (has(root, {"model_type"})) return ConfigFormat::hf_config;
  }
  // memplan's own sections and the guides' dialects first: they may carry HF-style keys too.
  const Node* model = root.find("model");
  if (torchtune_component(root)) return ConfigFormat::torchtune;
  if (has(root, {"distributed_type"}) && has(root, {"compute_environment", "num_processes", "mixed_precision", "machine_rank"}))
    return ConfigFormat::accelerate;
  if (has(root, {"base_model"}) && has(root, {"adapter", "sequence_len", "micro_batch_size", "datasets", "load_in_4bit"}))
    return ConfigFormat::axolotl;
  // LLaMA-Factory: model_name_or_path with its own FinetuningArguments / DataArguments keys
  // (HF TrainingArguments files have none of them).
  if (has(root, {"model_name_or_path"}) &&
      has(root, {"finetuning_type", "stage", "lora_target", "lora_rank", "cutoff_len", "template", "quantization_bit", "pure_bf16",
                 "flash_attn", "disable_gradient_checkpointing", "enable_liger_kernel", "use_unsloth_gc"}))
    return ConfigFormat::llamafactory;
  // LitGPT: the scripts' one required argument, a top-level checkpoint_dir path (torchtune's is
  // checkpointer.checkpoint_dir, NeMo's and Lightning's sit under trainer:/model:).
  if (const Node* dir = root.find("checkpoint_dir"); dir && dir->kind == Node::Kind::scalar && !root.find("trainer"))
    return ConfigFormat::litgpt;
  // LitGPT pre-training: pretrain.py's model_name beside its train: section.
  if (const Node* name = root.find("model_name"); name && name->kind == Node::Kind::scalar && !root.find("trainer") && !model) {
    const Node* train = root.find("train");
    if (train && train->kind == Node::Kind::map) return ConfigFormat::litgpt;
  }
  if (const Node* trainer = root.find("trainer"); trainer && trainer->kind == Node::Kind::map) {
    const bool megatron = model && model->kind == Node::Kind::map &&
                          has(*model, {"tensor_model_parallel_size", "pipeline_model_parallel_size", "encoder_seq_length",
                                       "micro_batch_size", "megatron_amp_O2", "activations_checkpoint_granularity"});
    if (megatron || has(root, {"exp_manager"})) return ConfigFormat::nemo;
    return ConfigFormat::lightning;
  }
  // A top-level model: (a preset name or a section) or gpu: is memplan's vocabulary: HF and TRL
  // files name the model with model_name_or_path.
  const bool memplan_sections =
      has(root, {"training", "hardware", "memory", "policy", "data", "output", "runtime", "lora", "gpu", "gpu_memory"}) ||
      model != nullptr;
  if (!memplan_sections && has(root, {"per_device_train_batch_size", "model_name_or_path", "output_dir", "use_peft",
                                      "gradient_checkpointing_kwargs", "max_seq_length", "optim", "fsdp_config"}))
    return ConfigFormat::hf_trainer;
  if (json) return std::nullopt;
  return ConfigFormat::memplan_yaml;
}

void ReadState::note(const std::string& field, const Node& n) {
  Where w = n.where;
  w.key = n.path;
  out.origin.set(field, w);
}

void ReadState::unmodelled(const Node& n, const std::string& why, const std::string& hint) {
  const std::string value = n.kind == Node::Kind::scalar ? n.text : n.kind == Node::Kind::list ? "[...]" : "{...}";
  out.warnings.push_back({n.where, fmt::format("{}: {} is not modelled yet: {}", n.path, value, why),
                          hint.empty() ? "memplan estimates without it; --strict refuses such configs" : hint});
}

void ReadState::use_model(const std::string& name, const Node& n) {
  ReadModel m = resolve_model(name, n.where);
  s().model = m.spec;
  out.has_model = true;
  Where w = n.where;
  w.key = n.path;
  set_model_origin(out.origin, w);
  for (const auto& [field, where] : m.origin.fields) out.origin.set(field, where);
  out.warnings.insert(out.warnings.end(), m.warnings.begin(), m.warnings.end());
}

fs::path ReadState::beside(const std::string& relative) const {
  const fs::path p(relative);
  if (p.is_absolute()) return p;
  return file.has_parent_path() ? file.parent_path() / p : p;
}

void ReadState::defer(const std::string& field, const Where& where, const std::string& message, const std::string& hint) {
  out.deferred.push_back({field, Warning{where, message, hint}});
}

FormatReader format_reader(ConfigFormat f) {
  switch (f) {
    case ConfigFormat::hf_trainer: return read_hf_trainer_config;
    case ConfigFormat::axolotl: return read_axolotl_config;
    case ConfigFormat::llamafactory: return read_llamafactory_config;
    case ConfigFormat::accelerate: return read_accelerate_config;
    case ConfigFormat::torchtune: return read_torchtune;
    case ConfigFormat::torchtitan: return read_torchtitan;
    case ConfigFormat::litgpt: return read_litgpt;
    case ConfigFormat::lightning: return read_lightning;
    case ConfigFormat::nemo: return read_nemo;
    default: return nullptr;
  }
}

}  // namespace memplan::profiles::detail

namespace memplan::profiles {
std::vector<std::string> config_format_names() { return detail::format_names(); }
}  // namespace memplan::profiles
