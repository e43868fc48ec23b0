// The accelerate config emitter (accelerate v1.14.0 keys): the launch only. accelerate's file
// holds the engine, the mixed precision and the process count; the model, batch, sequence length,
// optimizer and checkpointing belong to the training script, so the header's re-check command
// passes them as flags, and the file plus those flags read back to the plan's setup.
#include <fmt/format.h>

#include "estimator/estimate.h"
#include "estimator/fields.h"
#include "planner/emit_detail.h"

namespace memplan::planner::detail {
namespace {
std::string yes(bool b) { return b ? "true" : "false"; }
}  // namespace

std::string emit_accelerate(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const Finetune& f = s.finetune;
  std::vector<std::string> flags;
  // What the training script decides.
  if (c.model.kind == ModelRef::Kind::preset) flags.push_back("--model " + text::shell_word(c.model.value));
  else if (c.model.kind == ModelRef::Kind::file) flags.push_back("--model " + text::shell_word(c.model.value));
  else if (!s.model.hf_repo.empty()) flags.push_back("--model " + text::shell_word(s.model.hf_repo));  // a Hub id
  else flags.push_back("--model NAME");
  flags.push_back(flag_arg(Count::micro_batch, s.batch.micro_batch));
  flags.push_back(flag_arg(Count::seq_len, s.batch.seq_len));
  flags.push_back(flag_arg(Choice::optimizer, to_string(s.optimizer)));
  flags.push_back(flag_arg(Choice::attention, to_string(s.attention)));
  const bool deepspeed = s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
  const bool fsdp = !deepspeed && s.parallel.fsdp != FsdpMode::none;
  if (!deepspeed) flags.push_back(flag_arg(Count::grad_accum, s.batch.grad_accum));
  const bool fsdp_ac = fsdp && s.checkpointing.mode == CheckpointMode::full;
  if (!fsdp_ac) flags.push_back(flag_arg(Choice::checkpointing, to_string(s.checkpointing)));
  if (f.mode != FinetuneMode::full) {
    flags.push_back(flag_arg(Choice::finetune, to_string(f.mode)));
    flags.push_back(flag_arg(Count::lora_rank, f.lora_rank));
    flags.push_back(flag_arg(Number::lora_alpha, f.lora_alpha));
    if (f.lora_dropout > 0) flags.push_back(flag_arg(Number::lora_dropout, f.lora_dropout));
    if (!f.lora_targets.empty()) flags.push_back(flag_arg(List::lora_targets, fmt::format("{}", fmt::join(f.lora_targets, ","))));
    if (f.base_quant == BaseQuant::nf4 && !f.double_quant) flags.push_back(switch_arg(Switch::double_quant, false));
  }
  if (f.freeze_layers > 0) flags.push_back(flag_arg(Count::freeze_layers, f.freeze_layers));
  if (s.runtime.liger) flags.push_back(switch_arg(Switch::liger, true));
  if (s.runtime.loss != LossImpl::standard || s.runtime.liger) flags.push_back(flag_arg(Choice::loss, to_string(s.runtime, s.runtime.loss)));
  if (s.runtime.activation_offload) flags.push_back(switch_arg(Switch::activation_offload, true));
  // Under DeepSpeed the reader takes DeepSpeed's optimizer; the plan's kernel is said either way.
  if (s.runtime.optimizer_impl != OptimizerImpl::automatic || deepspeed)
    flags.push_back(flag_arg(Choice::optimizer_impl, to_string(s.runtime.optimizer_impl)));
  // The launch.
  std::string y = "compute_environment: LOCAL_MACHINE\n";
  const char* type = deepspeed ? "DEEPSPEED" : fsdp ? "FSDP" : s.parallel.num_gpus > 1 ? "MULTI_GPU" : "'NO'";
  y += fmt::format("distributed_type: {}\n", type);
  // Mixed precision: DeepSpeed and FSDP's own regimes, autocast otherwise; a pure 16-bit model is
  // the script's own (it loads the weights in bf16), said in the re-check flags.
  const char* mp = "'no'";
  switch (s.precision) {
    case Precision::amp_bf16: case Precision::mixed_bf16: case Precision::bf16: mp = "bf16"; break;
    case Precision::amp_fp16: case Precision::mixed_fp16: case Precision::fp16: mp = "fp16"; break;
    case Precision::fp32: break;
  }
  const bool mixed = master_bytes_per_param(s.precision) > 0;
  const bool expressible = s.precision == Precision::fp32 || (deepspeed || fsdp ? mixed : is_autocast(s.precision));
  if (!expressible) flags.push_back(flag_arg(Choice::precision, to_string(s.precision)));
  y += fmt::format("mixed_precision: {}\n", mp);
  const int64_t per_node = std::max<int64_t>(1, s.parallel.gpus_per_node);
  const int64_t machines = s.parallel.num_gpus > per_node && s.parallel.num_gpus % per_node == 0 ? s.parallel.num_gpus / per_node : 1;
  y += fmt::format("num_machines: {}\nnum_processes: {}\nmachine_rank: 0\n", machines, s.parallel.num_gpus);
  // One machine: the reader takes num_processes as the GPUs per node.
  if (machines == 1 && per_node != s.parallel.num_gpus && s.parallel.num_gpus > 1)
    flags.push_back(flag_arg(Count::gpus_per_node, per_node));
  if (s.runtime.compile) y += "dynamo_config:\n  dynamo_backend: INDUCTOR\n";
  if (deepspeed) {
    // accelerate generates the DeepSpeed config (DeepSpeedPlugin) with DeepSpeed's defaults for the
    // rest, which its reader applies (overlap_comm on at stage 3): the zero_optimization rows, the
    // offload's pin_memory and the 16-bit master state cannot differ from them here.
    TrainingSetup d;
    d.parallel.overlap_comm = s.parallel.zero_stage == 3;
    if (detail::zero_settings_differ(s, d))
      y += "# The plan's DeepSpeed settings (buckets, overlap_comm, contiguous_gradients, offload pin_memory, the 16-bit\n"
           "# master state) differ from DeepSpeed's defaults, which accelerate's generated config keeps: use memplan plan\n"
           "# --emit deepspeed for a deepspeed_config_file that states them.\n";
    y += fmt::format("deepspeed_config:\n  zero_stage: {}\n  offload_optimizer_device: {}\n  offload_param_device: {}\n"
                     "  gradient_accumulation_steps: {}\n  zero3_init_flag: {}\n",
                     s.parallel.zero_stage, offloads_optimizer(s.parallel.offload) ? "cpu" : "none",
                     offloads_params(s.parallel.offload) ? "cpu" : "none", s.batch.grad_accum,
                     yes(s.parallel.zero_stage == 3));
  } else if (fsdp) {
    const char* strategy = s.parallel.fsdp == FsdpMode::shard_grad_op ? "SHARD_GRAD_OP"
                           : s.parallel.fsdp == FsdpMode::hybrid_shard ? "HYBRID_SHARD"
                           : s.parallel.fsdp == FsdpMode::no_shard    ? "NO_SHARD"
                                                                      : "FULL_SHARD";
    // FSDP2 (fsdp_version 2) says its strategy as reshard_after_forward (true: FULL_SHARD).
    const bool v2 = fsdp_version_of(s) == 2 && (s.parallel.fsdp == FsdpMode::full_shard || s.parallel.fsdp == FsdpMode::shard_grad_op);
    const std::string how = v2 ? fmt::format("fsdp_reshard_after_forward: {}", yes(s.parallel.fsdp == FsdpMode::full_shard))
                               : fmt::format("fsdp_sharding_strategy: {}", strategy);
    y += fmt::format("fsdp_config:\n  fsdp_version: {}\n  {}\n  fsdp_offload_params: {}\n"
                     "  fsdp_activation_checkpointing: {}\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n",
                     v2 ? 2 : 1, how, yes(s.parallel.offload == Offload::optimizer_and_params), yes(fsdp_ac));
  }
  std::string out;
  for (const std::string& l : header_lines(c)) out += "# " + l + "\n";
  out += "# accelerate config (accelerate launch --config_file THIS_FILE your_script.py): the launch only. The model,\n"
         "# batch, sequence length, optimizer and checkpointing are your script's; memplan reads them from flags:\n";
  out += fmt::format("# Re-check: {}\n", recheck_command(c, "THIS_FILE", flags));
  return out + y;
}

}  // namespace memplan::planner::detail
