// The LLaMA-Factory config emitter: the memory-relevant keys of a `llamafactory-cli train` YAML
// (LLaMA-Factory v0.9.5), each written so the file reads back through memplan's LLaMA-Factory
// reader (profiles/formats/llamafactory.cpp) to the same setup. LLaMA-Factory loads the base in
// its checkpoint's dtype and upcasts what trains to fp32 (express.cpp says which precisions that
// leaves); datasets, template and output paths are the user's; the GPU count is the launcher's.
#include <fmt/format.h>

#include "estimator/text.h"
#include "planner/emit_detail.h"

namespace memplan::planner::detail {

std::string emit_llamafactory(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const Finetune& f = s.finetune;
  std::vector<std::string> flags;
  std::string y;
  if (c.model.kind == ModelRef::Kind::file) y += fmt::format("model_name_or_path: {}\n", text::yaml_scalar(c.model.value));
  else if (!s.model.hf_repo.empty()) y += fmt::format("model_name_or_path: {}\n", text::yaml_scalar(s.model.hf_repo));
  else flags.push_back("--model NAME");
  y += "stage: sft\ndo_train: true\n";
  const bool full = f.mode == FinetuneMode::full;
  y += fmt::format("finetuning_type: {}\n", full ? "full" : "lora");
  if (!full) {
    y += fmt::format("lora_rank: {}\nlora_alpha: {}\nlora_dropout: {}\n", f.lora_rank, f.lora_alpha, f.lora_dropout);
    // lora_target all is every linear layer; a plan without targets has PEFT's default for
    // Llama-like models (q_proj, v_proj), which LLaMA-Factory does not assume: written out.
    const bool all = f.lora_targets.size() == 1 && f.lora_targets[0] == "all-linear";
    std::vector<std::string> modules;
    for (const std::string& t : f.lora_targets.empty() ? std::vector<std::string>{"q", "v"} : f.lora_targets) modules.push_back(module_name(t));
    y += fmt::format("lora_target: {}\n", all ? std::string("all") : fmt::format("{}", fmt::join(modules, ",")));
    if (const std::vector<std::string> save = saved_modules(f); !save.empty())
      y += fmt::format("additional_target: {}\n", fmt::join(save, ","));
    if (f.base_quant == BaseQuant::nf4)
      y += fmt::format("quantization_bit: 4\nquantization_method: bnb\ndouble_quantization: {}\n", f.double_quant ? "true" : "false");
    if (f.base_quant == BaseQuant::int8) y += "quantization_bit: 8\nquantization_method: bnb\n";
  }
  y += "# dataset: (yours)\n# template: (yours)\n";
  y += fmt::format("cutoff_len: {}\nper_device_train_batch_size: {}\ngradient_accumulation_steps: {}\n", s.batch.seq_len,
                   s.batch.micro_batch, s.batch.grad_accum);
  // Precision: bf16/fp16 switch the Trainer's autocast (and fill DeepSpeed's "auto"); pure_bf16
  // trains 16-bit weights without the fp32 upcast (express.cpp: llamafactory_writes_precision).
  const bool pure = s.precision == Precision::bf16 && (full || !f.adapter_fp32);
  if (pure) y += "pure_bf16: true\n";
  else if (s.precision == Precision::bf16 || s.precision == Precision::amp_bf16 || s.precision == Precision::mixed_bf16) y += "bf16: true\n";
  else if (s.precision == Precision::fp16 || s.precision == Precision::amp_fp16 || s.precision == Precision::mixed_fp16) y += "fp16: true\n";
  if (!llamafactory_writes_precision(s)) flags.push_back(flag_arg(Choice::precision, to_string(s.precision)));
  if (s.checkpointing.mode == CheckpointMode::none) y += "disable_gradient_checkpointing: true\n";
  else if (s.checkpointing.mode != CheckpointMode::full) flags.push_back(flag_arg(Choice::checkpointing, to_string(s.checkpointing)));
  y += fmt::format("flash_attn: {}\n", s.attention == AttentionImpl::flash ? "fa2" : s.attention == AttentionImpl::eager ? "disabled" : "sdpa");
  if (s.runtime.liger) y += "enable_liger_kernel: true\n";
  std::string optim_args;
  y += fmt::format("optim: {}\n", hf_optim(s, flags, &optim_args));
  if (!optim_args.empty()) y += fmt::format("optim_args: \"{}\"\n", optim_args);
  if (s.runtime.compile) y += "torch_compile: true\n";
  if (s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed) y += inline_deepspeed(s, c.global_batch);
  std::string out;
  for (const std::string& l : header_lines(c)) out += "# " + l + "\n";
  out += "# LLaMA-Factory config (llamafactory-cli train THIS_FILE, with your dataset: and template:); the GPU count is the "
         "launcher's (FORCE_TORCHRUN=1 NPROC_PER_NODE=N).\n";
  out += fmt::format("# Re-check: {}\n", recheck_command(c, "THIS_FILE", flags));
  return out + y;
}

}  // namespace memplan::planner::detail
