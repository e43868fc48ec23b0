// The torchtune emitter: a recipe config (pytorch/torchtune v0.6.1 keys) for the plan: the builder
// (lora_/qlora_ with its LoRA arguments), dtype, batch_size, gradient_accumulation_steps,
// tokenizer.max_seq_len, the optimizer and loss components, checkpointing/offloading/compile and,
// on several GPUs, the FSDP keys of the distributed recipes. The GPU count and the GPU are
// `tune run` and memplan flags; the header says them. What torchtune cannot run (DeepSpeed
// ZeRO, autocast, flash-attn kernels, a partial LoRA MLP) is an error naming what to change.
#include <fmt/format.h>

#include <algorithm>

#include "estimator/error.h"
#include "planner/emit.h"
#include "planner/emit_detail.h"
#include "estimator/text.h"

namespace memplan::planner {
namespace {

const char* yes(bool b) { return b ? "True" : "False"; }

[[noreturn]] void cannot(const std::string& what, const std::string& hint) {
  throw InputError(Where::at_flag("--emit"), "torchtune cannot run this plan: " + what, hint);
}

bool has(const std::vector<std::string>& v, const char* x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// LoRA arguments of the lora_* builders.
std::string lora_args(const Finetune& f) {
  std::vector<std::string> t = f.lora_targets;
  if (t.empty()) t = {"q", "v"};  // PEFT's default targets, what the plan assumed
  if (has(t, "all-linear") || has(t, "all_linear") || has(t, "all")) t = {"q", "k", "v", "o", "gate", "up", "down"};
  std::vector<std::string> attn;
  for (const auto& [m, proj] : {std::pair{"q", "q_proj"}, {"k", "k_proj"}, {"v", "v_proj"}, {"o", "output_proj"}})
    if (has(t, m)) attn.push_back(std::string("'") + proj + "'");
  const int mlp = has(t, "gate") + has(t, "up") + has(t, "down");
  if (mlp != 0 && mlp != 3)
    cannot("LoRA on part of the MLP: apply_lora_to_mlp adapts gate, up and down together", "plan with --lora-targets q,v or q,k,v,o,gate,up,down");
  for (const std::string& x : t)
    if (x != "q" && x != "k" && x != "v" && x != "o" && x != "gate" && x != "up" && x != "down")
      cannot(fmt::format("LoRA on '{}' (torchtune adapts q_proj, k_proj, v_proj, output_proj and the MLP)", x), "");
  if (attn.empty()) cannot("LoRA without an attention projection: lora_attn_modules must name one", "add q or v to --lora-targets");
  return fmt::format("  lora_attn_modules: [{}]\n  apply_lora_to_mlp: {}\n  lora_rank: {}\n  lora_alpha: {}\n  lora_dropout: {}\n",
                     fmt::join(attn, ", "), yes(mlp == 3), f.lora_rank, f.lora_alpha, f.lora_dropout);
}

std::string optimizer_section(const TrainingSetup& s) {
  const char* cls = nullptr;
  std::string extra;
  switch (s.optimizer) {
    case OptimizerKind::adamw: cls = "torch.optim.AdamW"; break;
    case OptimizerKind::adam: cls = "torch.optim.Adam"; break;
    case OptimizerKind::sgd: cls = "torch.optim.SGD"; break;
    case OptimizerKind::sgd_momentum: cls = "torch.optim.SGD"; extra = "  momentum: 0.9\n"; break;
    case OptimizerKind::adamw_8bit: cls = "bitsandbytes.optim.AdamW8bit"; break;
    case OptimizerKind::paged_adamw: cls = "bitsandbytes.optim.PagedAdamW"; break;
    case OptimizerKind::paged_adamw_8bit: cls = "bitsandbytes.optim.PagedAdamW8bit"; break;
    case OptimizerKind::lion: cls = "bitsandbytes.optim.Lion"; break;
    default: cannot(fmt::format("the {} optimizer", to_string(s.optimizer)), "plan with --optimizers adamw (or adamw-8bit, paged-adamw-8bit)");
  }
  const bool torch_optim = std::string(cls).rfind("torch.", 0) == 0;
  switch (s.runtime.optimizer_impl) {
    case OptimizerImpl::fused:
      if (!torch_optim) cannot("a fused step of a bitsandbytes optimizer", "");
      extra += "  fused: True\n";
      break;
    case OptimizerImpl::foreach:
      if (!torch_optim) cannot("a foreach step of a bitsandbytes optimizer", "");
      extra += "  foreach: True\n";
      break;
    case OptimizerImpl::for_loop:
      if (!torch_optim) cannot("a for-loop step of a bitsandbytes optimizer", "");
      extra += "  foreach: False\n";
      break;
    case OptimizerImpl::automatic: break;
  }
  return fmt::format("optimizer:\n  _component_: {}\n  lr: 2e-5\n{}", cls, extra);
}

std::string loss_section(const Runtime& r) {
  switch (r.loss) {
    case LossImpl::chunked:
      if (r.loss_chunk_tokens > 0) cannot("a loss chunked by tokens (torchtune chunks the logits into num_output_chunks)", "");
      if (!r.loss_upcast) cannot("chunked cross-entropy without the fp32 upcast", "");
      return fmt::format("loss:\n  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss\n  num_output_chunks: {}\n", r.loss_chunks);
    case LossImpl::fused_linear:
      return "loss:\n  _component_: torchtune.modules.loss.LinearCrossEntropyLoss\n";
    case LossImpl::standard:
      return "loss:\n  _component_: torch.nn.CrossEntropyLoss\n";
    case LossImpl::vocab_parallel:
      cannot("Megatron's vocab-parallel cross-entropy (torchtune has no such loss)", "plan with --loss standard or chunked");
  }
  return "";
}

}  // namespace

std::optional<Refusal> torchtune_refusal(const TrainingSetup& s) {
  const Parallelism& p = s.parallel;
  const Finetune& f = s.finetune;
  const Runtime& r = s.runtime;
  if (s.precision != Precision::bf16 && s.precision != Precision::fp32)
    return Refusal{fmt::format("precision {}: torchtune trains in dtype bf16 or fp32 (no autocast, no fp32 master copy)", to_string(s.precision)),
                   "plan with --precisions bf16,fp32"};
  if (p.zero_stage > 0) return Refusal{fmt::format("DeepSpeed ZeRO-{}: torchtune shards with FSDP2", p.zero_stage), "plan without ZeRO"};
  if (p.pipeline_parallel > 1) return Refusal{"pipeline parallelism", ""};
  if (p.offload == Offload::optimizer) return Refusal{"optimizer-only offload: fsdp_cpu_offload offloads parameters too", ""};
  if (p.offload == Offload::params) return Refusal{"parameter-only offload: fsdp_cpu_offload offloads the optimizer step too", ""};
  if (p.fsdp == FsdpMode::hybrid_shard || p.fsdp == FsdpMode::no_shard)
    return Refusal{fmt::format("FSDP {} (the v0.6.1 recipes shard fully, or keep parameters gathered)", to_string(p.fsdp)), ""};
  if (s.attention != AttentionImpl::sdpa)
    return Refusal{fmt::format("attention {}: torchtune's attention is scaled_dot_product_attention", to_string(s.attention)),
                   "plan with --attention sdpa"};
  if (s.checkpointing.mode != CheckpointMode::none && s.checkpointing.mode != CheckpointMode::full)
    return Refusal{fmt::format("checkpointing {} (enable_activation_checkpointing wraps every layer)", to_string(s.checkpointing)),
                   "plan with --checkpointing none or full"};
  if (r.activation_offload && s.checkpointing.mode != CheckpointMode::full)
    return Refusal{"activation offloading without checkpointing (torchtune offloads the checkpointed inputs)", ""};
  if (r.liger) return Refusal{"Liger kernels", ""};
  if (r.fp8) return Refusal{"fp8 linears (no v0.6.1 recipe key)", ""};
  if (f.mode == FinetuneMode::qlora && (f.base_quant != BaseQuant::nf4 || !f.double_quant))
    return Refusal{"QLoRA other than NF4 with double-quantized scales (torchao NF4Tensor)", ""};
  if (f.mode == FinetuneMode::lora && f.base_quant != BaseQuant::none) return Refusal{"LoRA over an 8-bit base", ""};
  if (f.mode == FinetuneMode::full && f.freeze_layers > 0) return Refusal{"frozen layers in a full fine-tune", ""};
  return std::nullopt;
}

std::string emit_torchtune(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const Parallelism& p = s.parallel;
  const Finetune& f = s.finetune;
  const Runtime& r = s.runtime;
  if (c.tool.name.empty()) cannot(fmt::format("torchtune has no builder for {}", s.model.name), "plan a model torchtune builds");
  if (const std::optional<Refusal> no = torchtune_refusal(s)) cannot(no->what, no->hint);

  // The builder: lora_/qlora_ before the function name.
  std::string builder = c.tool.name;
  if (f.mode != FinetuneMode::full) {
    const size_t dot = builder.rfind('.');
    builder = builder.substr(0, dot + 1) + (f.mode == FinetuneMode::qlora ? "qlora_" : "lora_") + builder.substr(dot + 1);
  }
  const bool distributed = p.num_gpus > 1 || p.offload != Offload::none || p.fsdp != FsdpMode::none;
  const char* recipe = f.mode == FinetuneMode::full ? (distributed ? "full_finetune_distributed" : "full_finetune_single_device")
                                                    : (distributed ? "lora_finetune_distributed" : "lora_finetune_single_device");
  std::string y = comment_header(c);
  if (distributed)
    y += fmt::format("# tune run --nproc_per_node {} {} --config this-file\n", p.num_gpus, recipe);
  else
    y += fmt::format("# tune run {} --config this-file\n", recipe);
  y += fmt::format("# torchtune configs hold neither the GPU nor the GPU count: memplan estimate --config this-file {} --gpus {}\n",
                   text::comment_text(detail::target_flag(c)), p.num_gpus);
  if (!c.users_file) y += "# Set the tokenizer path and the checkpointer files to your download (tune download ...).\n";
  y += "output_dir: /tmp/torchtune/memplan-plan\n";
  y += fmt::format("model:\n  _component_: {}\n", builder);
  if (f.mode != FinetuneMode::full) y += lora_args(f);
  y += "tokenizer:\n";
  y += c.tool.tokenizer.empty() ? "  _component_: SET_ME  # the tokenizer builder of this model family\n"
                                : fmt::format("  _component_: {}\n", c.tool.tokenizer);
  y += fmt::format("  path: /tmp/model/tokenizer.model\n  max_seq_len: {}\n", s.batch.seq_len);
  y += "dataset:\n  _component_: torchtune.datasets.alpaca_cleaned_dataset\n"
       "  packed: False  # rows padded to the batch's longest, at most max_seq_len (the estimate's length)\n";
  y += fmt::format("checkpointer:\n  _component_: torchtune.training.FullModelHFCheckpointer\n  checkpoint_dir: /tmp/model/\n"
                   "  checkpoint_files: [model.safetensors]\n  recipe_checkpoint: null\n  output_dir: ${{output_dir}}\n  model_type: {}\n",
                   c.tool.checkpointer_type.empty() ? "SET_ME" : c.tool.checkpointer_type);
  y += "resume_from_checkpoint: False\nseed: null\nshuffle: True\n";
  y += fmt::format("batch_size: {}\ngradient_accumulation_steps: {}\nepochs: 1\nmax_steps_per_epoch: null\n", s.batch.micro_batch,
                   s.batch.grad_accum);
  y += optimizer_section(s);
  if (f.mode == FinetuneMode::full) y += fmt::format("optimizer_in_bwd: {}\n", yes(r.optimizer_in_backward));
  else if (r.optimizer_in_backward) cannot("the optimizer in backward with LoRA (the LoRA recipes have no optimizer_in_bwd)", "");
  y += "lr_scheduler:\n  _component_: torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup\n  num_warmup_steps: 100\n";
  y += loss_section(r);
  y += fmt::format("enable_activation_checkpointing: {}\nenable_activation_offloading: {}\ncompile: {}\n",
                   yes(s.checkpointing.mode == CheckpointMode::full), yes(r.activation_offload), yes(r.compile));
  if (distributed) {
    y += fmt::format("fsdp_cpu_offload: {}\nfsdp_reshard_after_forward: {}\n", yes(p.offload == Offload::optimizer_and_params),
                     yes(p.fsdp != FsdpMode::shard_grad_op));
    if (p.tensor_parallel > 1)
      y += fmt::format("tensor_parallel_dim: {}\ntensor_parallel_plan:\n  _component_: torchtune.models.llama3.base_llama_tp_plan\n",
                       p.tensor_parallel);
  } else if (p.tensor_parallel > 1) {
    cannot("tensor parallelism on one GPU", "");
  }
  y += fmt::format("dtype: {}\ndevice: cuda\n", s.precision == Precision::bf16 ? "bf16" : "fp32");
  y += "metric_logger:\n  _component_: torchtune.training.metric_logging.DiskLogger\n  log_dir: ${output_dir}/logs\n"
       "log_every_n_steps: 1\nlog_peak_memory_stats: True\n";
  return y;
}

}  // namespace memplan::planner
