// The LitGPT emitter: a config for `litgpt finetune_lora` (or finetune_full) of
// Lightning-AI/litgpt v0.5.13: checkpoint_dir naming the model, precision, quantize, devices and
// num_nodes, the LoRA switches, train.micro_batch_size / global_batch_size / max_seq_length and
// the optimizer. LitGPT's scripts decide the rest (FSDP with every Block checkpointed on several
// devices, nothing on one, chunked cross-entropy): a plan that differs there is an error.
#include <fmt/format.h>

#include <algorithm>

#include "estimator/error.h"
#include "planner/emit.h"
#include "planner/emit_detail.h"
#include "estimator/text.h"

namespace memplan::planner {
namespace {

const char* yes(bool b) { return b ? "true" : "false"; }

[[noreturn]] void cannot(const std::string& what, const std::string& hint) {
  throw InputError(Where::at_flag("--emit"), "LitGPT cannot run this plan: " + what, hint);
}

bool has(const std::vector<std::string>& v, const char* x) { return std::find(v.begin(), v.end(), x) != v.end(); }

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::bf16: return "bf16-true";
    case Precision::amp_bf16: return "bf16-mixed";
    case Precision::fp16: return "16-true";
    case Precision::amp_fp16: return "16-mixed";
    case Precision::fp32: return "32-true";
    default:
      cannot(fmt::format("precision {}: LitGPT runs Lightning Fabric's *-true and *-mixed precisions (no fp32 master copy of "
                         "16-bit weights)",
                         to_string(p)),
             "plan with --precisions bf16,amp-bf16,fp32");
  }
}

const char* optimizer_class(OptimizerKind o) {
  switch (o) {
    case OptimizerKind::adamw: return "torch.optim.AdamW";
    case OptimizerKind::adam: return "torch.optim.Adam";
    case OptimizerKind::sgd: return "torch.optim.SGD";
    case OptimizerKind::adamw_8bit: return "bitsandbytes.optim.AdamW8bit";
    case OptimizerKind::paged_adamw: return "bitsandbytes.optim.PagedAdamW";
    case OptimizerKind::paged_adamw_8bit: return "bitsandbytes.optim.PagedAdamW8bit";
    case OptimizerKind::lion: return "bitsandbytes.optim.Lion";
    default: cannot(fmt::format("the {} optimizer", to_string(o)), "plan with --optimizers adamw");
  }
}

}  // namespace

std::string emit_litgpt(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const Parallelism& p = s.parallel;
  const Finetune& f = s.finetune;
  const Runtime& r = s.runtime;
  if (c.tool.name.empty()) cannot(fmt::format("LitGPT has no config for {}", s.model.name), "plan a model of litgpt/config.py");
  const char* precision = precision_name(s.precision);
  if (p.zero_stage > 0 || p.offload != Offload::none)
    cannot("DeepSpeed ZeRO or offload: LitGPT's scripts shard with FSDP and keep everything on the GPU", "plan without ZeRO and offload");
  if (p.tensor_parallel > 1 || p.pipeline_parallel > 1) cannot("tensor or pipeline parallelism (the finetune scripts are data-parallel)", "");
  if (s.attention != AttentionImpl::sdpa) cannot(fmt::format("attention {}: LitGPT calls scaled_dot_product_attention", to_string(s.attention)), "");
  // litgpt/finetune/lora.py and full.py @ v0.5.13: several devices checkpoint every Block, one none.
  const CheckpointMode script = p.num_gpus > 1 ? CheckpointMode::full : CheckpointMode::none;
  if (s.checkpointing.mode != script)
    cannot(fmt::format("checkpointing {} on {} device(s): LitGPT's scripts checkpoint every Block on several devices and nothing "
                       "on one",
                       to_string(s.checkpointing), p.num_gpus),
           fmt::format("plan with --checkpointing {}", p.num_gpus > 1 ? "full" : "none"));
  if (r.liger || r.compile || r.activation_offload || r.fp8 || r.optimizer_in_backward)
    cannot("runtime knobs the scripts have no argument for (Liger, compile, activation offload, fp8, optimizer in backward)", "");
  const bool quantized = f.mode != FinetuneMode::full && f.base_quant != BaseQuant::none;
  if (quantized && is_autocast(s.precision))
    cannot("quantize with a -mixed precision (\"Quantization and mixed precision is not supported.\")", "plan with --precisions bf16");
  if (quantized && p.num_gpus > 1) cannot("quantize on several devices", "plan on one GPU");
  if (quantized && s.optimizer != OptimizerKind::paged_adamw)
    cannot("quantize with another optimizer than bitsandbytes' PagedAdamW (the script replaces it)", "plan with --optimizers paged-adamw");
  if (f.mode == FinetuneMode::full && f.freeze_layers > 0) cannot("frozen layers", "");

  int64_t devices = p.num_gpus, nodes = 1;
  if (p.num_gpus > p.gpus_per_node && p.gpus_per_node > 0 && p.num_gpus % p.gpus_per_node == 0) {
    devices = p.gpus_per_node;
    nodes = p.num_gpus / p.gpus_per_node;
  }
  const char* script_name = f.mode == FinetuneMode::full ? "finetune_full" : "finetune_lora";
  std::string y = comment_header(c);
  y += fmt::format("# litgpt {} --config this-file; memplan estimate --config this-file {} re-checks it\n", script_name,
                   text::comment_text(detail::target_flag(c)));
  y += fmt::format("checkpoint_dir: {}\nout_dir: out/finetune/memplan-plan\nprecision: {}\n", text::yaml_scalar(c.tool.name), precision);
  if (quantized) {
    const char* q = f.base_quant == BaseQuant::int8 ? "bnb.int8-training" : f.double_quant ? "bnb.nf4-dq" : "bnb.nf4";
    y += fmt::format("quantize: {}\n", q);
  }
  y += fmt::format("devices: {}\nnum_nodes: {}\n", devices, nodes);
  if (f.mode != FinetuneMode::full) {
    std::vector<std::string> t = f.lora_targets;
    if (t.empty()) t = {"q", "v"};
    if (has(t, "all-linear") || has(t, "all_linear") || has(t, "all")) t = {"q", "k", "v", "o", "gate", "up", "down"};
    const bool gated = s.model.gated_mlp;
    const int mlp = (gated ? has(t, "gate") : 0) + has(t, "up") + has(t, "down");
    if (mlp != 0 && mlp != (gated ? 3 : 2)) cannot("LoRA on part of the MLP: lora_mlp adapts all of its layers", "");
    for (const std::string& x : t)
      if (x != "q" && x != "k" && x != "v" && x != "o" && x != "gate" && x != "up" && x != "down")
        cannot(fmt::format("LoRA on '{}'", x), "");
    if (f.lora_alpha != static_cast<double>(static_cast<int64_t>(f.lora_alpha))) cannot("a fractional lora_alpha (an int in LitGPT)", "");
    y += fmt::format("lora_r: {}\nlora_alpha: {}\nlora_dropout: {}\nlora_query: {}\nlora_key: {}\nlora_value: {}\nlora_projection: {}\n"
                     "lora_mlp: {}\nlora_head: false\n",
                     f.lora_rank, static_cast<int64_t>(f.lora_alpha), f.lora_dropout, yes(has(t, "q")), yes(has(t, "k")),
                     yes(has(t, "v")), yes(has(t, "o")), yes(mlp != 0));
  }
  const int64_t global = s.batch.micro_batch * s.batch.grad_accum * p.num_gpus;
  y += fmt::format("train:\n  global_batch_size: {}\n  micro_batch_size: {}\n  max_seq_length: {}\n  epochs: 1\n", global,
                   s.batch.micro_batch, s.batch.seq_len);
  y += fmt::format("optimizer:\n  class_path: {}\n  init_args:\n    lr: 0.0002\n", optimizer_class(s.optimizer));
  const bool torch_optim = std::string(optimizer_class(s.optimizer)).rfind("torch.", 0) == 0;
  if (r.optimizer_impl != OptimizerImpl::automatic && !torch_optim) cannot("a fused/foreach step of a bitsandbytes optimizer", "");
  if (r.optimizer_impl == OptimizerImpl::fused) y += "    fused: true\n";
  if (r.optimizer_impl == OptimizerImpl::foreach) y += "    foreach: true\n";
  if (r.optimizer_impl == OptimizerImpl::for_loop) y += "    foreach: false\n";
  return y;
}

}  // namespace memplan::planner
