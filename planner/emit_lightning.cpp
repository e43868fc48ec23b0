// The LightningCLI emitter: the plan's Trainer arguments (devices, num_nodes, precision, the
// strategy in its class_path form so that ZeRO stage, offload and buckets are exact,
// accumulate_grad_batches) and data.batch_size, plus what Lightning cannot hold (the model,
// sequence length, checkpointing, attention, optimizer, target GPU, runtime knobs) as a commented
// memplan YAML block between "# --- memplan setup" and "# --- end memplan setup" lines. LightningCLI
// rejects unknown keys but ignores comments; memplan's Lightning reader reads the block first and
// lets trainer: win, so `memplan estimate --config` on this file gives the plan's setup and peak.
#include <fmt/format.h>

#include <sstream>

#include "estimator/error.h"
#include "estimator/fields.h"
#include "planner/emit.h"

namespace memplan::planner {
namespace {

const char* yes(bool b) { return b ? "true" : "false"; }

[[noreturn]] void cannot(const std::string& what, const std::string& hint) {
  throw InputError(Where::at_flag("--emit"), "Lightning cannot run this plan: " + what, hint);
}

// The plan as memplan YAML (emit_memplan) without its header, plus the runtime the framework
// defaults would otherwise decide, each line commented out.
std::string memplan_block(const EmitContext& c) {
  const Runtime& r = c.setup.runtime;
  std::string doc = emit(c, EmitFormat::memplan);
  const std::string header = comment_header(c);
  if (doc.rfind(header, 0) == 0) doc = doc.substr(header.size());
  // emit_memplan's own training.runtime section (knobs that differ from the framework's defaults)
  // says less than the full runtime below: drop it.
  if (const size_t at = doc.find("\n  runtime:\n"); at != std::string::npos) {
    size_t end = at + 1 + std::string("  runtime:\n").size();
    while (end < doc.size() && doc.compare(end, 4, "    ") == 0) {
      const size_t nl = doc.find('\n', end);
      end = nl == std::string::npos ? doc.size() : nl + 1;
    }
    doc.erase(at + 1, end - at - 1);
  }
  doc += fmt::format("runtime:\n  {}: {}\n", field(Choice::framework).key, field(Choice::framework).get(c.setup));
  for (const VersionField& f : version_fields()) doc += fmt::format("  {}: \"{}\"\n", f.keys[0], f.text(c.setup));
  doc += fmt::format("  loss: {}\n  {}: {}\n", to_string(r, r.loss), field(Choice::optimizer_impl).key, field(Choice::optimizer_impl).get(c.setup));
  for (const SwitchField& f : switch_fields())
    if (f.section() == "runtime") doc += fmt::format("  {}: {}\n", f.key(), yes(f.get(c.setup)));
  doc += fmt::format("  {}: {}\n", field(Choice::fsdp).key, field(Choice::fsdp).get(c.setup));
  // "# " before every line: the reader blanks the '#', so the YAML keeps its shape two columns in.
  std::istringstream in(doc);
  std::string out, line;
  while (std::getline(in, line)) out += line.empty() ? "#\n" : "# " + line + "\n";
  return out;
}

}  // namespace

std::string emit_lightning(const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  const Parallelism& p = s.parallel;
  const bool deepspeed = p.zero_stage > 0 || master_bytes_per_param(s.precision) > 0;
  // Trainer(precision=...): under DeepSpeedStrategy every 16-bit setting keeps fp32 master weights
  // (DeepSpeedPrecision), so only the mixed regimes and fp32 have a spelling there.
  std::string precision;
  if (deepspeed) {
    switch (s.precision) {
      case Precision::mixed_bf16: precision = "bf16-mixed"; break;
      case Precision::mixed_fp16: precision = "16-mixed"; break;
      case Precision::fp32: precision = "32-true"; break;
      default:
        cannot(fmt::format("{} with DeepSpeed ZeRO-{}: Lightning's DeepSpeed strategy keeps fp32 master weights for every 16-bit "
                           "precision",
                           to_string(s.precision), p.zero_stage),
               "plan with --precisions mixed-bf16 (or fp32), or without ZeRO");
    }
  } else {
    switch (s.precision) {
      case Precision::fp32: precision = "32-true"; break;
      case Precision::amp_bf16: precision = "bf16-mixed"; break;
      case Precision::amp_fp16: precision = "16-mixed"; break;
      case Precision::bf16: precision = s.runtime.fp8 ? "transformer-engine" : "bf16-true"; break;
      case Precision::fp16: precision = s.runtime.fp8 ? "transformer-engine-float16" : "16-true"; break;
      default: break;
    }
  }
  // devices per node x num_nodes.
  int64_t devices = p.num_gpus, nodes = 1;
  if (p.num_gpus > p.gpus_per_node && p.gpus_per_node > 0 && p.num_gpus % p.gpus_per_node == 0) {
    devices = p.gpus_per_node;
    nodes = p.num_gpus / p.gpus_per_node;
  }
  std::string strategy;
  if (deepspeed) {
    // DeepSpeedStrategy (src/lightning/pytorch/strategies/deepspeed.py @ 2.6.5): every memory
    // argument written, its defaults (buckets 2e8, overlap_comm True) differing from DeepSpeed's.
    strategy = fmt::format(
        "\n    class_path: lightning.pytorch.strategies.DeepSpeedStrategy\n    init_args:\n      stage: {}\n"
        "      offload_optimizer: {}\n      offload_parameters: {}\n      allgather_bucket_size: {}\n      reduce_bucket_size: {}\n"
        "      overlap_comm: {}",
        p.zero_stage, yes(offloads_optimizer(p.offload)), yes(offloads_params(p.offload)), p.allgather_bucket_elems,
        p.reduce_bucket_elems, yes(p.overlap_comm));
  } else if (p.fsdp != FsdpMode::none) {
    const char* sharding = p.fsdp == FsdpMode::full_shard      ? "FULL_SHARD"
                           : p.fsdp == FsdpMode::shard_grad_op ? "SHARD_GRAD_OP"
                           : p.fsdp == FsdpMode::hybrid_shard  ? "HYBRID_SHARD"
                                                               : "NO_SHARD";
    if (p.offload == Offload::optimizer || p.offload == Offload::params)
      cannot("FSDP offloads parameters with the optimizer states", "plan with --offload optimizer+params or none");
    strategy = fmt::format("\n    class_path: lightning.pytorch.strategies.FSDPStrategy\n    init_args:\n      sharding_strategy: {}\n"
                           "      cpu_offload: {}",
                           sharding, yes(p.offload == Offload::optimizer_and_params));
  } else {
    if (p.offload != Offload::none) cannot("offload needs DeepSpeed or FSDP", "plan with ZeRO, or --fsdp");
    // DDP's gradient_as_bucket_view: DDPStrategy passes its other keywords to DistributedDataParallel
    // (src/lightning/pytorch/strategies/ddp.py @ 2.6.5, **kwargs -> self._ddp_kwargs), which the reader
    // takes back from init_args.
    if (p.num_gpus > 1 && p.ddp_bucket_view)
      strategy = "\n    class_path: lightning.pytorch.strategies.DDPStrategy\n    init_args:\n      gradient_as_bucket_view: true";
    else
      strategy = p.num_gpus > 1 ? " ddp" : " auto";
  }
  std::string y = comment_header(c);
  y += "# python main.py fit --config this-file (LightningCLI); memplan estimate --config this-file re-checks it.\n";
  y += fmt::format("# Your LightningModule / DataModule must apply what Lightning cannot say: checkpointing {}{}, "
                   "attention {}, sequence length {}, optimizer {}.\n",
                   to_string(s.checkpointing),
                   s.checkpointing.mode == CheckpointMode::full ? " (model.gradient_checkpointing_enable())" : "",
                   to_string(s.attention), s.batch.seq_len, to_string(s.optimizer));
  y += "# --- memplan setup (the plan behind this file; LightningCLI ignores comments, memplan reads them) ---\n";
  y += memplan_block(c);
  y += "# --- end memplan setup ---\n";
  y += fmt::format("trainer:\n  accelerator: gpu\n  devices: {}\n  num_nodes: {}\n  precision: {}\n  accumulate_grad_batches: {}\n"
                   "  strategy:{}\n",
                   devices, nodes, precision, s.batch.grad_accum, strategy);
  y += fmt::format("data:\n  batch_size: {}\n", s.batch.micro_batch);
  return y;
}

}  // namespace memplan::planner
