// The HF TrainingArguments / TRL config emitter: SFTConfig + ModelConfig keys as `trl sft --config`
// (TrlParser) reads them. Every setting that changes memory is written out, so the file reads back
// through memplan's HF reader (profiles/formats/hf_trainer.cpp) to the same setup whatever TRL's
// defaults are; what TrainingArguments cannot say (the GPU count, a checkpointing mode other than
// full) is in the header's re-check command.
#include <fmt/format.h>

#include "estimator/estimate.h"
#include "estimator/fields.h"
#include "estimator/text.h"
#include "planner/emit_detail.h"

namespace memplan::planner::detail {
namespace {

std::string yes(bool b) { return b ? "true" : "false"; }

}  // namespace

const char* fsdp_word(FsdpMode m) {
  switch (m) {
    case FsdpMode::shard_grad_op: return "shard_grad_op";
    case FsdpMode::hybrid_shard: return "hybrid_shard";
    case FsdpMode::no_shard: return "no_shard";
    default: return "full_shard";
  }
}

std::string inline_deepspeed(const TrainingSetup& s, int64_t global_batch) {
  const std::string ds = deepspeed_text(s, global_batch, /*batch_auto=*/true);
  std::string y = "deepspeed:\n";
  size_t start = 0;
  while (start < ds.size()) {
    const size_t nl = ds.find('\n', start);
    y += "  " + ds.substr(start, nl == std::string::npos ? std::string::npos : nl - start) + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return y;
}

// An HF OptimizerNames value for the optimizer and its kernel; `flags` gets what it cannot say.
std::string hf_optim(const TrainingSetup& s, std::vector<std::string>& flags, std::string* optim_args) {
  const OptimizerImpl impl = s.runtime.optimizer_impl;
  switch (s.optimizer) {
    case OptimizerKind::adamw:
    case OptimizerKind::adam:
      if (s.optimizer == OptimizerKind::adam) flags.push_back(flag_arg(Choice::optimizer, to_string(OptimizerKind::adam)));
      if (impl == OptimizerImpl::fused) return "adamw_torch_fused";
      if (impl == OptimizerImpl::for_loop) return "adamw_hf";
      if (impl == OptimizerImpl::foreach) flags.push_back(flag_arg(Choice::optimizer_impl, to_string(OptimizerImpl::foreach)));
      return "adamw_torch";
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::sgd_momentum: *optim_args = "momentum=0.9"; return "sgd";
    case OptimizerKind::adafactor: return "adafactor";
    case OptimizerKind::adafactor_momentum: flags.push_back(flag_arg(Choice::optimizer, to_string(OptimizerKind::adafactor_momentum))); return "adafactor";
    case OptimizerKind::adamw_8bit: return "adamw_bnb_8bit";
    case OptimizerKind::lion: return "lion_32bit";
    case OptimizerKind::paged_adamw: return "paged_adamw_32bit";
    case OptimizerKind::paged_adamw_8bit: return "paged_adamw_8bit";
  }
  return "adamw_torch";
}

// PEFT module names for memplan's LoRA targets.
std::string module_name(const std::string& t) {
  for (const char* short_name : {"q", "k", "v", "o", "gate", "up", "down"})
    if (t == short_name) return t + "_proj";
  return t;
}

std::vector<std::string> saved_modules(const Finetune& f) {
  std::vector<std::string> save;
  if (f.train_embeddings) save.push_back("embed_tokens");
  if (f.train_head) save.push_back("lm_head");
  return save;
}

std::string target_flag(const EmitContext& c) { return fmt::format("{}", fmt::join(target_args(c), " ")); }

std::string recheck_command(const EmitContext& c, const std::string& file, const std::vector<std::string>& flags) {
  const TrainingSetup& s = c.setup;
  std::string cmd = fmt::format("memplan estimate --config {}", file == "THIS_FILE" ? file : text::shell_word(file));
  if (const std::string target = target_flag(c); !target.empty()) cmd += " " + target;
  if (s.parallel.num_gpus > 1) cmd += " " + flag_arg(Count::num_gpus, s.parallel.num_gpus);
  for (const std::string& f : flags) cmd += " " + f;
  return text::comment_text(cmd);  // written on a comment line
}

std::string emit_hf(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const Finetune& f = s.finetune;
  std::vector<std::string> flags;
  std::string y;
  // Model (ModelConfig).
  if (c.model.kind == ModelRef::Kind::preset && !s.model.hf_repo.empty()) y += fmt::format("model_name_or_path: {}\n", text::yaml_scalar(s.model.hf_repo));
  else if (c.model.kind == ModelRef::Kind::file) y += fmt::format("model_name_or_path: {}\n", text::yaml_scalar(c.model.value));
  else if (!s.model.hf_repo.empty()) y += fmt::format("model_name_or_path: {}\n", text::yaml_scalar(s.model.hf_repo));  // a Hub id
  else flags.push_back("--model NAME");
  y += fmt::format("attn_implementation: {}\n", s.attention == AttentionImpl::flash ? "flash_attention_2" : to_string(s.attention));
  // Engine and precision: the dtype the weights load in and the mixed-precision flag, which under
  // DeepSpeed and FSDP mean their own regimes.
  const bool deepspeed = s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
  const bool fsdp = !deepspeed && s.parallel.fsdp != FsdpMode::none;
  const bool full = f.mode == FinetuneMode::full;
  const char* dtype = "float32";
  bool bf16 = false, fp16 = false;
  switch (s.precision) {
    case Precision::fp32: break;
    case Precision::amp_bf16: bf16 = true; break;
    case Precision::amp_fp16: fp16 = true; break;
    case Precision::bf16: dtype = "bfloat16"; bf16 = !(fsdp && full); break;
    case Precision::fp16: dtype = "float16"; fp16 = !(fsdp && full); break;
    case Precision::mixed_bf16: bf16 = true; break;
    case Precision::mixed_fp16: fp16 = true; break;
  }
  const bool expressible = hf_writes_precision(s);  // planner/express.cpp
  if (!expressible) flags.push_back(flag_arg(Choice::precision, to_string(s.precision)));
  y += fmt::format("dtype: {}\n", dtype);
  y += fmt::format("bf16: {}\nfp16: {}\n", yes(bf16), yes(fp16));
  // Batch and sequence.
  y += fmt::format("per_device_train_batch_size: {}\ngradient_accumulation_steps: {}\n", s.batch.micro_batch, s.batch.grad_accum);
  y += fmt::format("max_length: {}\n", s.batch.seq_len);
  if (s.checkpointing.mode != CheckpointMode::none && s.checkpointing.mode != CheckpointMode::full)
    flags.push_back(flag_arg(Choice::checkpointing, to_string(s.checkpointing)));
  y += fmt::format("gradient_checkpointing: {}\n", yes(s.checkpointing.mode != CheckpointMode::none));
  std::string optim_args;
  y += fmt::format("optim: {}\n", hf_optim(s, flags, &optim_args));
  if (!optim_args.empty()) y += fmt::format("optim_args: \"{}\"\n", optim_args);
  // The runtime knobs TrainingArguments/TRL can switch.
  if (s.runtime.liger) {
    y += "use_liger_kernel: true\n";
    if (s.runtime.loss == LossImpl::standard) y += "liger_kernel_config:\n  fused_linear_cross_entropy: false\n";
  }
  if (s.runtime.loss == LossImpl::chunked) flags.push_back(flag_arg(Choice::loss, to_string(s.runtime, s.runtime.loss)));
  if (!s.runtime.liger) y += fmt::format("loss_type: {}\n", s.runtime.loss == LossImpl::fused_linear ? "chunked_nll" : "nll");
  y += fmt::format("torch_compile: {}\n", yes(s.runtime.compile));
  if (s.runtime.activation_offload) y += "activation_offloading: true\n";
  // Adapters (ModelConfig's PEFT and bitsandbytes keys).
  if (!full) {
    y += fmt::format("use_peft: true\nlora_r: {}\nlora_alpha: {}\nlora_dropout: {}\n", f.lora_rank, f.lora_alpha, f.lora_dropout);
    if (!f.lora_targets.empty()) {
      y += "lora_target_modules:\n";
      for (const std::string& t : f.lora_targets) y += fmt::format("  - {}\n", module_name(t));
    }
    if (const std::vector<std::string> save = saved_modules(f); !save.empty())
      y += fmt::format("lora_modules_to_save: [{}]\n", fmt::join(save, ", "));
    if (f.base_quant == BaseQuant::nf4)
      y += fmt::format("load_in_4bit: true\nbnb_4bit_quant_type: nf4\nuse_bnb_nested_quant: {}\n", yes(f.double_quant));
    if (f.base_quant == BaseQuant::int8) y += "load_in_8bit: true\n";
    if (f.mode == FinetuneMode::qlora && f.base_quant != BaseQuant::nf4) flags.push_back(flag_arg(Choice::finetune, to_string(FinetuneMode::qlora)));
  }
  if (f.freeze_layers > 0) flags.push_back(flag_arg(Count::freeze_layers, f.freeze_layers));
  // Sharding.
  if (deepspeed) {
    y += inline_deepspeed(s, c.global_batch);
  } else if (fsdp) {
    y += fmt::format("fsdp: \"{} auto_wrap{}\"\n", fsdp_word(s.parallel.fsdp),
                     s.parallel.offload == Offload::optimizer_and_params ? " offload" : "");
    // FSDP2 through accelerate: fsdp_config's version (transformers' TrainingArguments.fsdp_config).
    if (fsdp_version_of(s) == 2 && (s.parallel.fsdp == FsdpMode::full_shard || s.parallel.fsdp == FsdpMode::shard_grad_op))
      y += fmt::format("fsdp_config:\n  version: 2\n  reshard_after_forward: {}\n", yes(s.parallel.fsdp == FsdpMode::full_shard));
  }
  std::string out;
  for (const std::string& l : header_lines(c)) out += "# " + l + "\n";
  out += fmt::format("# TRL SFTConfig + ModelConfig keys (trl sft --config THIS_FILE); the GPU count is the launcher's.\n");
  out += fmt::format("# Re-check: {}\n", recheck_command(c, "THIS_FILE", flags));
  return out + y;
}

}  // namespace memplan::planner::detail
