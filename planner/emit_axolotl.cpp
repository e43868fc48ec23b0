// The Axolotl config emitter: the memory-relevant keys of an Axolotl YAML (axolotl v0.18.0 schema),
// each written out so the file reads back through memplan's Axolotl reader
// (profiles/formats/axolotl.cpp) to the same setup. Datasets and output paths are the user's; the
// GPU count is the launcher's (both said in the header).
#include <fmt/format.h>

#include "estimator/estimate.h"
#include "estimator/text.h"
#include "planner/emit_detail.h"

namespace memplan::planner::detail {
namespace {

std::string yes(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string emit_axolotl(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const Finetune& f = s.finetune;
  std::vector<std::string> flags;
  std::string y;
  if (c.model.kind == ModelRef::Kind::preset && !s.model.hf_repo.empty()) y += fmt::format("base_model: {}\n", text::yaml_scalar(s.model.hf_repo));
  else if (c.model.kind == ModelRef::Kind::file) y += fmt::format("base_model: {}\n", text::yaml_scalar(c.model.value));
  else if (!s.model.hf_repo.empty()) y += fmt::format("base_model: {}\n", text::yaml_scalar(s.model.hf_repo));  // a Hub id
  else flags.push_back("--model NAME");
  y += "# datasets: (yours)\n";
  y += fmt::format("sequence_len: {}\nmicro_batch_size: {}\ngradient_accumulation_steps: {}\n", s.batch.seq_len, s.batch.micro_batch,
                   s.batch.grad_accum);
  // Precision: Axolotl loads the model in its training dtype (resolve_dtype); DeepSpeed and FSDP's
  // mixed precision keep fp32 masters of what trains.
  const bool deepspeed = s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
  const bool fsdp = !deepspeed && s.parallel.fsdp != FsdpMode::none;
  const bool full = f.mode == FinetuneMode::full;
  bool bf16 = false, fp16 = false, bfloat16 = false;
  switch (s.precision) {
    case Precision::fp32: break;
    case Precision::bf16:
      if (fsdp && full) bfloat16 = true;
      else bf16 = true;
      break;
    case Precision::fp16: fp16 = true; break;
    case Precision::mixed_bf16: bf16 = true; break;
    case Precision::mixed_fp16: fp16 = true; break;
    case Precision::amp_bf16: bf16 = true; break;
    case Precision::amp_fp16: fp16 = true; break;
  }
  if (!axolotl_writes_precision(s)) flags.push_back(flag_arg(Choice::precision, to_string(s.precision)));
  y += fmt::format("bf16: {}\n", yes(bf16));
  if (fp16) y += "fp16: true\n";
  if (bfloat16) y += "bfloat16: true\n";
  std::string optim_args;
  y += fmt::format("optimizer: {}\n", hf_optim(s, flags, &optim_args));
  if (!optim_args.empty()) y += fmt::format("optim_args: \"{}\"\n", optim_args);
  if (s.checkpointing.mode != CheckpointMode::none && s.checkpointing.mode != CheckpointMode::full)
    flags.push_back(flag_arg(Choice::checkpointing, to_string(s.checkpointing)));
  y += fmt::format("gradient_checkpointing: {}\n", yes(s.checkpointing.mode != CheckpointMode::none));
  if (s.runtime.activation_offload) {
    if (s.checkpointing.mode == CheckpointMode::none) flags.push_back(switch_arg(Switch::activation_offload, true));
    else y += "activation_offloading: true\n";
  }
  y += fmt::format("attn_implementation: {}\n", s.attention == AttentionImpl::flash ? "flash_attention_2" : to_string(s.attention));
  // Adapters.
  if (!full) {
    const bool qlora = f.base_quant == BaseQuant::nf4;
    y += fmt::format("adapter: {}\n", qlora ? "qlora" : "lora");
    if (qlora) {
      y += "load_in_4bit: true\n";
      if (!f.double_quant) y += "bnb_config_kwargs:\n  bnb_4bit_use_double_quant: false\n";
    }
    if (f.base_quant == BaseQuant::int8) y += "load_in_8bit: true\n";
    if (f.mode == FinetuneMode::qlora && !qlora) flags.push_back(flag_arg(Choice::finetune, to_string(FinetuneMode::qlora)));
    y += fmt::format("lora_r: {}\nlora_alpha: {}\nlora_dropout: {}\n", f.lora_rank, f.lora_alpha, f.lora_dropout);
    const bool all = f.lora_targets.size() == 1 && f.lora_targets[0] == "all-linear";
    if (all) {
      y += "lora_target_linear: true\n";
    } else {
      // Axolotl has no default targets: PEFT's for Llama-like models (q_proj, v_proj) when the plan left them out.
      const std::vector<std::string> targets = f.lora_targets.empty() ? std::vector<std::string>{"q", "v"} : f.lora_targets;
      if (f.lora_targets.empty()) flags.push_back(flag_arg(List::lora_targets, "q,v"));
      y += "lora_target_modules:\n";
      for (const std::string& t : targets) y += fmt::format("  - {}\n", module_name(t));
    }
    if (const std::vector<std::string> save = saved_modules(f); !save.empty())
      y += fmt::format("lora_modules_to_save: [{}]\n", fmt::join(save, ", "));
  }
  if (f.freeze_layers > 0) flags.push_back(flag_arg(Count::freeze_layers, f.freeze_layers));
  // Kernels: Liger's plugin, or Cut Cross Entropy for a fused-linear loss without Liger.
  std::vector<std::string> plugins;
  if (s.runtime.liger) plugins.push_back("axolotl.integrations.liger.LigerPlugin");
  else if (s.runtime.loss == LossImpl::fused_linear) plugins.push_back("axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin");
  if (s.runtime.loss == LossImpl::chunked) flags.push_back(flag_arg(Choice::loss, to_string(s.runtime, s.runtime.loss)));
  if (!plugins.empty()) {
    y += "plugins:\n";
    for (const std::string& p : plugins) y += fmt::format("  - {}\n", p);
  }
  if (s.runtime.liger)
    y += fmt::format("liger_rope: true\nliger_rms_norm: true\nliger_glu_activation: true\nliger_fused_linear_cross_entropy: {}\n",
                     yes(s.runtime.loss == LossImpl::fused_linear));
  else if (s.runtime.loss == LossImpl::fused_linear)
    y += "cut_cross_entropy: true\n";
  y += fmt::format("torch_compile: {}\n", yes(s.runtime.compile));
  if (s.parallel.tensor_parallel > 1) y += fmt::format("tensor_parallel_size: {}\n", s.parallel.tensor_parallel);
  // Sharding.
  if (deepspeed) {
    y += inline_deepspeed(s, c.global_batch);
  } else if (fsdp) {
    const bool v2 = fsdp_version_of(s) == 2 && (s.parallel.fsdp == FsdpMode::full_shard || s.parallel.fsdp == FsdpMode::shard_grad_op);
    y += fmt::format("fsdp:\n  - {}\n  - auto_wrap\nfsdp_config:\n  fsdp_version: {}\n  offload_params: {}\n{}", fsdp_word(s.parallel.fsdp),
                     v2 ? 2 : 1, yes(s.parallel.offload == Offload::optimizer_and_params),
                     v2 ? fmt::format("  reshard_after_forward: {}\n", yes(s.parallel.fsdp == FsdpMode::full_shard)) : "");
  }
  std::string out;
  for (const std::string& l : header_lines(c)) out += "# " + l + "\n";
  out += "# Axolotl config (axolotl train THIS_FILE, with your datasets:); the GPU count is the launcher's.\n";
  out += fmt::format("# Re-check: {}\n", recheck_command(c, "THIS_FILE", flags));
  return out + y;
}

}  // namespace memplan::planner::detail
