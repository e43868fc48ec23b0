// The config emitters (see emit.h). Each writes the vocabulary its tool reads; the memplan,
// train-config, DeepSpeed and HF files read back through memplan's own readers to the same setup
// (tests/planner/plan_test.cpp). Lightning's, torchtune's and LitGPT's are in emit_<tool>.cpp.
#include "planner/emit.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace memplan::planner {

bool parse_emit_format(const std::string& s, EmitFormat* out) {
  if (s == "memplan") *out = EmitFormat::memplan;
  else if (s == "train-config") *out = EmitFormat::train_config;
  else if (s == "deepspeed") *out = EmitFormat::deepspeed;
  else if (s == "hf") *out = EmitFormat::hf;
  else if (s == "lightning") *out = EmitFormat::lightning;
  else if (s == "torchtune") *out = EmitFormat::torchtune;
  else if (s == "litgpt") *out = EmitFormat::litgpt;
  else return false;
  return true;
}

std::vector<std::string> emit_format_names() {
  return {"memplan", "train-config", "deepspeed", "hf", "lightning", "torchtune", "litgpt"};
}

std::string default_file_name(EmitFormat f) {
  switch (f) {
    case EmitFormat::memplan: return "memplan-plan.yaml";
    case EmitFormat::train_config: return "train-config.yaml";
    case EmitFormat::deepspeed: return "ds_config.json";
    case EmitFormat::hf: return "training_args.yaml";
    case EmitFormat::lightning: return "lightning-config.yaml";
    case EmitFormat::torchtune: return "torchtune-config.yaml";
    case EmitFormat::litgpt: return "litgpt-config.yaml";
  }
  return "plan.txt";
}

namespace {

std::string gib(int64_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0)); }

// The header every file opens with (as comment lines, without the comment marker).
std::vector<std::string> header(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const int64_t cap = s.device.capacity_bytes;
  const int64_t target = static_cast<int64_t>(c.budget * static_cast<double>(cap));
  return {fmt::format("memplan {} plan: {} on {} x {}", MEMPLAN_VERSION, s.model.name, s.parallel.num_gpus,
                      c.gpu.empty() ? gib(cap) + " GPU" : c.gpu),
          fmt::format("estimated peak {} of {} ({:.1f}%), headroom {} below the {:.0f}% budget", gib(c.peak_bytes), gib(cap),
                      100.0 * static_cast<double>(c.peak_bytes) / static_cast<double>(cap), gib(target - c.peak_bytes), 100 * c.budget),
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
    case ModelRef::Kind::preset: y += fmt::format("  preset: {}\n", c.model.value); break;
    case ModelRef::Kind::file: y += fmt::format("  hf_config: {}\n", c.model.value); break;
    case ModelRef::Kind::inline_spec:
      y += fmt::format("  name: {}\n  model_type: {}\n  hidden_size: {}\n  num_layers: {}\n  num_attention_heads: {}\n"
                       "  num_key_value_heads: {}\n  head_dim: {}\n  intermediate_size: {}\n  vocab_size: {}\n"
                       "  max_position_embeddings: {}\n  norm: {}\n  activation: {}\n  gated_mlp: {}\n  tie_word_embeddings: {}\n",
                       m.name, m.model_type, m.hidden_size, m.num_layers, m.num_attention_heads, m.num_key_value_heads, m.head_dim,
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
  if (with_attention) y += fmt::format("  attention: {}\n", to_string(c.setup.attention));
  return y;
}

std::string hardware_section(const EmitContext& c) {
  std::string y = "hardware:\n";
  if (!c.gpu.empty()) y += fmt::format("  gpu: {}\n", c.gpu);
  else y += fmt::format("  gpu_memory: {}\n", c.setup.device.capacity_bytes);
  y += fmt::format("  num_gpus: {}\n", c.setup.parallel.num_gpus);
  return y;
}

// The planning budget as the target; the default bands above it, raised to it when it is higher.
Thresholds emitted_thresholds(double budget) {
  const Thresholds d;
  return {budget, std::max(d.warning, budget), std::max(d.critical, budget), std::max(d.emergency, budget)};
}

std::string memory_section(const EmitContext& c, const char* indent) {
  const Thresholds t = emitted_thresholds(c.budget);
  return fmt::format("{0}memory:\n{0}  target_utilization: {1:.2f}\n{0}  warning_threshold: {2:.2f}\n"
                     "{0}  critical_threshold: {3:.2f}\n{0}  emergency_threshold: {4:.2f}\n",
                     indent, t.target, t.warning, t.critical, t.emergency);
}

std::string finetune_section(const EmitContext& c) {
  const Finetune& f = c.setup.finetune;
  if (f.mode == FinetuneMode::full) return "";
  std::string y = fmt::format("lora:\n  method: {}\n  r: {}\n  lora_alpha: {}\n  lora_dropout: {}\n", to_string(f.mode), f.lora_rank,
                              f.lora_alpha, f.lora_dropout);
  if (!f.lora_targets.empty()) y += fmt::format("  target_modules: [{}]\n", fmt::join(f.lora_targets, ", "));
  return y;
}

std::string emit_memplan(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  std::string y = hash_header(c);
  y += model_section(c, true);
  y += hardware_section(c);
  y += fmt::format("training:\n  micro_batch_size: {}\n  gradient_accumulation_steps: {}\n  global_batch_size: {}\n  seq_len: {}\n"
                   "  precision: {}\n  optimizer: {}\n  gradient_checkpointing: {}\n",
                   s.batch.micro_batch, s.batch.grad_accum, c.global_batch, s.batch.seq_len, to_string(s.precision),
                   to_string(s.optimizer), checkpointing_value(s.checkpointing));
  if (s.parallel.zero_stage > 0 || s.parallel.offload != Offload::none)
    y += fmt::format("  deepspeed:\n    use_deepspeed: true\n    zero_stage: {}\n    offload_optimizer: {}\n    offload_param: {}\n",
                     s.parallel.zero_stage, yaml_bool(s.parallel.offload != Offload::none),
                     yaml_bool(s.parallel.offload == Offload::optimizer_and_params));
  y += memory_section(c, "  ");
  y += finetune_section(c);
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
  const bool ds = s.parallel.zero_stage > 0 || master_bytes_per_param(s.precision) > 0;
  y += fmt::format("  deepspeed:\n    use_deepspeed: {}\n    zero_stage: {}\n    cpu_offload: {}\n", yaml_bool(ds), s.parallel.zero_stage,
                   yaml_bool(s.parallel.offload != Offload::none));
  if (s.parallel.offload == Offload::optimizer_and_params) y += "    offload_param: true\n";
  y += memory_section(c, "  ");
  y += fmt::format("data:\n  max_length: {}\n", s.batch.seq_len);
  y += fmt::format("output:\n  gradient_checkpointing: {}\n", checkpointing_value(s.checkpointing));
  y += hardware_section(c);
  y += finetune_section(c);
  return y;
}

nlohmann::ordered_json deepspeed_json(const TrainingSetup& s, int64_t global_batch) {
  nlohmann::ordered_json j;
  j["train_batch_size"] = global_batch;
  j["train_micro_batch_size_per_gpu"] = s.batch.micro_batch;
  j["gradient_accumulation_steps"] = s.batch.grad_accum;
  if (s.precision == Precision::mixed_bf16 || s.precision == Precision::amp_bf16 || s.precision == Precision::bf16)
    j["bf16"] = {{"enabled", true}};
  if (s.precision == Precision::mixed_fp16 || s.precision == Precision::amp_fp16 || s.precision == Precision::fp16)
    j["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16}};
  nlohmann::ordered_json z;
  z["stage"] = s.parallel.zero_stage;
  z["overlap_comm"] = s.parallel.overlap_comm;
  z["reduce_bucket_size"] = s.parallel.reduce_bucket_elems;
  z["allgather_bucket_size"] = s.parallel.allgather_bucket_elems;
  if (s.parallel.zero_stage == 3) {
    z["stage3_prefetch_bucket_size"] = s.parallel.stage3_prefetch_bucket_elems;
    z["stage3_max_live_parameters"] = s.parallel.stage3_max_live_parameters;
  }
  if (s.parallel.offload != Offload::none) z["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (s.parallel.offload == Offload::optimizer_and_params) z["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  j["zero_optimization"] = z;
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
  if (!c.gpu.empty()) m["hardware"] = {{"gpu", c.gpu}, {"num_gpus", s.parallel.num_gpus}};
  else m["hardware"] = {{"gpu_memory", s.device.capacity_bytes}, {"num_gpus", s.parallel.num_gpus}};
  const Thresholds t = emitted_thresholds(c.budget);
  m["training"] = {{"seq_len", s.batch.seq_len},
                   {"attention", to_string(s.attention)},
                   {"gradient_checkpointing", to_string(s.checkpointing)},
                   {"optimizer", to_string(s.optimizer)},
                   {"memory",
                    {{"target_utilization", t.target},
                     {"warning_threshold", t.warning},
                     {"critical_threshold", t.critical},
                     {"emergency_threshold", t.emergency}}}};
  j["memplan"] = m;
  return j.dump(2) + "\n";
}

const char* hf_optim(OptimizerKind o) {
  switch (o) {
    case OptimizerKind::adamw: return "adamw_torch";
    case OptimizerKind::adam: return "adamw_torch";
    case OptimizerKind::sgd: case OptimizerKind::sgd_momentum: return "sgd";
    case OptimizerKind::adafactor: case OptimizerKind::adafactor_momentum: return "adafactor";
    case OptimizerKind::adamw_8bit: return "adamw_bnb_8bit";
    case OptimizerKind::lion: return "lion_32bit";
    case OptimizerKind::paged_adamw: return "paged_adamw_32bit";
    case OptimizerKind::paged_adamw_8bit: return "paged_adamw_8bit";
  }
  return "adamw_torch";
}

// HF TrainingArguments / TRL SFTConfig + ModelConfig keys only, so HfArgumentParser accepts it.
std::string emit_hf(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  std::string y = hash_header(c);
  y += "# memplan estimate --config this-file --gpu ... --gpus ... re-checks it\n";
  if (c.model.kind == ModelRef::Kind::preset && !s.model.hf_repo.empty()) y += fmt::format("model_name_or_path: {}\n", s.model.hf_repo);
  else if (c.model.kind == ModelRef::Kind::file) y += fmt::format("model_name_or_path: {}\n", c.model.value);
  else y += "# model_name_or_path: (an inline architecture has no hub id)\n";
  y += fmt::format("attn_implementation: {}\n", s.attention == AttentionImpl::flash ? "flash_attention_2" : to_string(s.attention));
  if (s.precision == Precision::bf16) y += "torch_dtype: bfloat16\n";
  if (s.precision == Precision::fp16) y += "torch_dtype: float16\n";
  y += fmt::format("per_device_train_batch_size: {}\ngradient_accumulation_steps: {}\n", s.batch.micro_batch, s.batch.grad_accum);
  y += fmt::format("gradient_checkpointing: {}\n", yaml_bool(s.checkpointing.mode != CheckpointMode::none));
  const bool bf = s.precision == Precision::amp_bf16 || s.precision == Precision::mixed_bf16;
  const bool fp = s.precision == Precision::amp_fp16 || s.precision == Precision::mixed_fp16;
  y += fmt::format("bf16: {}\nfp16: {}\n", yaml_bool(bf), yaml_bool(fp));
  y += fmt::format("optim: {}\n", hf_optim(s.optimizer));
  y += fmt::format("max_length: {}\n", s.batch.seq_len);
  if (s.parallel.zero_stage > 0) {
    // The DeepSpeed config inline (TrainingArguments.deepspeed takes a dict).
    const std::string ds = deepspeed_json(s, c.global_batch).dump(2);
    y += "deepspeed:\n";
    size_t start = 0;
    // JSON is valid YAML flow style; indent it under the key.
    while (start < ds.size()) {
      const size_t nl = ds.find('\n', start);
      y += "  " + ds.substr(start, nl == std::string::npos ? std::string::npos : nl - start) + "\n";
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  return y;
}

}  // namespace

std::string emit(const EmitContext& c, EmitFormat f) {
  switch (f) {
    case EmitFormat::memplan: return emit_memplan(c);
    case EmitFormat::train_config: return emit_train_config(c);
    case EmitFormat::deepspeed: return emit_deepspeed(c);
    case EmitFormat::hf: return emit_hf(c);
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
