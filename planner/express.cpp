// What each emitted format can express (emit.h: can_express, recheck_flags). A plan asked for in
// a format picks the best configuration that format can write so that it reads back the same;
// the search itself never changes with the format.
#include <fmt/format.h>

#include "estimator/fields.h"
#include "estimator/text.h"
#include "planner/emit.h"
#include "planner/space.h"

namespace memplan::planner {

std::string emit_format_name(EmitFormat f) {
  for (const std::string& name : emit_format_names()) {
    EmitFormat g;
    if (parse_emit_format(name, &g) && g == f) return name;
  }
  return "?";
}

bool hf_writes_precision(const TrainingSetup& s) {
  // torch_dtype + bf16/fp16: autocast over fp32 or 16-bit weights; DeepSpeed's and FSDP's
  // mixed precision (fp32 masters) when they run the step.
  const bool deepspeed = s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
  const bool fsdp = !deepspeed && s.parallel.fsdp != FsdpMode::none;
  const bool full = s.finetune.mode == FinetuneMode::full;
  const bool mixed = master_bytes_per_param(s.precision) > 0;
  if (deepspeed) return mixed || s.precision == Precision::fp32;
  if (fsdp && full) return mixed || s.precision == Precision::fp32 || !is_autocast(s.precision);
  return !mixed;
}

bool axolotl_writes_precision(const TrainingSetup& s) {
  // Axolotl loads the model in its training dtype (bf16/fp16 mean 16-bit weights, no autocast);
  // DeepSpeed and FSDP full fine-tunes keep fp32 masters.
  const bool deepspeed = s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
  const bool fsdp_full = !deepspeed && s.parallel.fsdp != FsdpMode::none && s.finetune.mode == FinetuneMode::full;
  switch (s.precision) {
    case Precision::fp32: return true;
    case Precision::bf16: return !deepspeed;
    case Precision::fp16: return !deepspeed && !fsdp_full;
    case Precision::mixed_bf16: case Precision::mixed_fp16: return deepspeed || fsdp_full;
    case Precision::amp_bf16: case Precision::amp_fp16: return false;
  }
  return false;
}

bool llamafactory_writes_precision(const TrainingSetup& s) {
  const bool deepspeed = s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
  const bool full = s.finetune.mode == FinetuneMode::full;
  if (deepspeed) return master_bytes_per_param(s.precision) > 0 || s.precision == Precision::fp32;
  if (full)  // the trainable weights upcast to fp32 under autocast, or pure_bf16
    return s.precision == Precision::fp32 || s.precision == Precision::amp_bf16 || s.precision == Precision::amp_fp16 ||
           s.precision == Precision::bf16;
  // Adapters: the frozen base in the checkpoint's dtype (model/loader.py @ v0.9.5 L155).
  const std::string& dt = s.model.checkpoint_dtype;
  if (dt == "bfloat16") return s.precision == Precision::bf16;
  if (dt == "float16") return s.precision == Precision::fp16 && s.finetune.adapter_fp32;
  return s.precision == Precision::fp32 || s.precision == Precision::amp_bf16 || s.precision == Precision::amp_fp16;
}

namespace {

bool none_or_full(const Checkpointing& c) { return c.mode == CheckpointMode::none || c.mode == CheckpointMode::full; }

}  // namespace

// HF TrainingArguments, Axolotl and LLaMA-Factory have no key for gradient_as_bucket_view
// (TrainingArguments' ddp_* arguments are the backend, timeout, bucket cap, find_unused_parameters and
// broadcast_buffers; transformers training_args.py @ v4.52.4), nor has accelerate's config file.
bool states_bucket_view(EmitFormat f) {
  return f != EmitFormat::hf && f != EmitFormat::axolotl && f != EmitFormat::llamafactory && f != EmitFormat::accelerate;
}

// torch's ZeroRedundancyOptimizer: only memplan's own files state it (a LightningCLI file could
// name it as its optimizer's class_path; the Lightning writer does not write that).
bool states_zero_redundancy_optimizer(EmitFormat f) { return f == EmitFormat::memplan || f == EmitFormat::train_config; }

bool can_express(EmitFormat f, const TrainingSetup& s, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const Sharding sh = sharding_of(s);
  // A DeepSpeed config states tensor parallelism as AutoTP training (tensor_parallel.autotp_size),
  // which runs with ZeRO 0-2 only (https://www.deepspeed.ai/tutorials/autotp-training/).
  const bool writes_deepspeed = f == EmitFormat::deepspeed || f == EmitFormat::hf || f == EmitFormat::axolotl || f == EmitFormat::llamafactory;
  if (writes_deepspeed && sh.deepspeed && s.parallel.tensor_parallel > 1 && sh.zero == 3)
    return no("DeepSpeed's AutoTP training (tensor_parallel.autotp_size) runs with ZeRO 0, 1 or 2, not ZeRO-3");
  // Pipeline and expert parallelism are the model code's (Megatron's, torchtitan's, DeepSpeed's
  // PipelineModule and MoE ep_size): of the files memplan writes, only its own YAML, the training
  // script's config and the DeepSpeed config's memplan block state them; the others' re-check
  // would drop them.
  const bool states_degrees = f == EmitFormat::memplan || f == EmitFormat::train_config || f == EmitFormat::deepspeed;
  if (!states_degrees && s.parallel.pipeline_parallel > 1)
    return no(fmt::format("this format has no pipeline-parallel setting (--pipeline-parallel {}): plan with --emit memplan",
                          s.parallel.pipeline_parallel));
  if (!states_degrees && s.parallel.expert_parallel > 1)
    return no(fmt::format("this format has no expert-parallel setting (--expert-parallel {}): plan with --emit memplan",
                          s.parallel.expert_parallel));
  switch (f) {
    case EmitFormat::deepspeed:
      // A ds_config runs DeepSpeed's engine: ZeRO (or stage 0 with its mixed precision).
      if (!sh.deepspeed) return no(fmt::format("a DeepSpeed config runs DeepSpeed's engine, not {}", sh.describe(s.parallel.data_parallel())));
      return true;
    case EmitFormat::hf:
    case EmitFormat::axolotl: {
      // Both run the HF Trainer (Axolotl builds TrainingArguments): checkpointing all or nothing,
      // and only the precisions their keys can say (hf_writes_precision / axolotl_writes_precision,
      // the emitters' own rule).
      const char* tool = f == EmitFormat::hf ? "HF TrainingArguments" : "Axolotl";
      if (!none_or_full(s.checkpointing))
        return no(fmt::format("{} turns gradient checkpointing on or off: no {}", tool, to_string(s.checkpointing)));
      if (s.runtime.framework != Framework::hf_trainer && s.runtime.framework != Framework::deepspeed)
        return no(fmt::format("an {} file runs the HF Trainer, not --framework {}", tool, to_string(s.runtime.framework)));
      if (!(f == EmitFormat::hf ? hf_writes_precision(s) : axolotl_writes_precision(s)))
        return no(fmt::format("{} cannot say {} under {}", tool, to_string(s.precision), sh.describe(s.parallel.data_parallel())));
      return true;
    }
    case EmitFormat::llamafactory: {
      // llamafactory-cli train runs the HF Trainer; FSDP goes through an accelerate config, and
      // its freeze tuning keeps the head frozen where memplan's partial freeze trains it.
      if (!none_or_full(s.checkpointing))
        return no(fmt::format("LLaMA-Factory turns gradient checkpointing on or off: no {}", to_string(s.checkpointing)));
      if (s.runtime.framework != Framework::hf_trainer && s.runtime.framework != Framework::deepspeed)
        return no(fmt::format("a LLaMA-Factory file runs the HF Trainer, not --framework {}", to_string(s.runtime.framework)));
      if (sh.fsdp != FsdpMode::none) return no("LLaMA-Factory runs FSDP through an accelerate config: plan with --emit accelerate");
      if (s.finetune.freeze_layers > 0) return no("LLaMA-Factory's freeze tuning keeps the output head frozen; memplan's --freeze-layers trains it");
      if (s.runtime.activation_offload) return no("LLaMA-Factory has no activation offloading");
      if (s.runtime.loss == LossImpl::chunked || (s.runtime.loss == LossImpl::fused_linear && !s.runtime.liger))
        return no("LLaMA-Factory's fused loss is Liger's (enable_liger_kernel)");
      if (s.parallel.tensor_parallel > 1) return no("LLaMA-Factory's Trainer has no tensor parallelism");
      if (!llamafactory_writes_precision(s))
        return no(fmt::format("LLaMA-Factory cannot say {} for this model (it loads the checkpoint's {})", to_string(s.precision),
                              s.model.checkpoint_dtype.empty() ? std::string("dtype") : s.model.checkpoint_dtype));
      return true;
    }
    case EmitFormat::lightning:
      // Lightning's Trainer arguments carry precision, devices, accumulation and the strategy;
      // checkpointing is the LightningModule's (gradient_checkpointing_enable(): all or nothing).
      if (!none_or_full(s.checkpointing))
        return no(fmt::format("Lightning checkpoints every layer or none (the module's gradient_checkpointing_enable()): no {}",
                              to_string(s.checkpointing)));
      if (s.precision == Precision::mixed_bf16 && !sh.deepspeed) return no("Lightning's bf16-mixed outside DeepSpeed is autocast, not mixed-bf16");
      if (s.precision == Precision::mixed_fp16 && !sh.deepspeed) return no("Lightning's 16-mixed outside DeepSpeed is autocast, not mixed-fp16");
      if (sh.deepspeed && s.precision != Precision::mixed_bf16 && s.precision != Precision::mixed_fp16 && s.precision != Precision::fp32)
        return no("Lightning's DeepSpeed strategy keeps fp32 master weights for every 16-bit precision");
      if (sh.fsdp != FsdpMode::none && (sh.offload == Offload::optimizer || sh.offload == Offload::params))
        return no("Lightning's FSDP offloads parameters with the optimizer");
      if (sh.fsdp == FsdpMode::none && !sh.deepspeed && sh.offload != Offload::none) return no("offload needs DeepSpeed or FSDP");
      return true;
    case EmitFormat::torchtune:
    case EmitFormat::litgpt: {
      // torchtune's and LitGPT's recipes: their own runtime (plan with --framework, or let --emit
      // set it), no DeepSpeed, F.scaled_dot_product_attention.
      const Framework want = f == EmitFormat::torchtune ? Framework::torchtune : Framework::litgpt;
      const char* tool = f == EmitFormat::torchtune ? "torchtune" : "LitGPT";
      if (s.runtime.framework != want) return no(fmt::format("a {} config runs {}'s recipes, not --framework {}", tool, tool, to_string(s.runtime.framework)));
      if (sh.deepspeed) return no(fmt::format("{} has no DeepSpeed", tool));
      if (s.attention != AttentionImpl::sdpa) return no(fmt::format("{} runs SDPA attention", tool));
      if (f == EmitFormat::torchtune && !none_or_full(s.checkpointing)) return no("torchtune checkpoints every layer or none");
      // The rest of what its recipes have no key for, as the emitter refuses it.
      if (f == EmitFormat::torchtune)
        if (const std::optional<Refusal> refusal = torchtune_refusal(s))
          return no("torchtune cannot run " + refusal->what + (refusal->hint.empty() ? "" : "; " + refusal->hint));
      if (f == EmitFormat::litgpt && sh.offload != Offload::none) return no("LitGPT does not offload");
      // On several GPUs both run FSDP (torchtune's *_distributed recipes fully_shard every layer;
      // LitGPT's scripts pick FSDPStrategy, and checkpoint every Block there and nothing on one GPU:
      // emit_torchtune.cpp, emit_litgpt.cpp).
      if (s.parallel.num_gpus > 1 && sh.fsdp == FsdpMode::none)
        return no(fmt::format("{} shards with FSDP on several GPUs, not {}", tool, sh.describe(s.parallel.data_parallel())));
      if (f == EmitFormat::litgpt && s.checkpointing.mode != (s.parallel.num_gpus > 1 ? CheckpointMode::full : CheckpointMode::none))
        return no("LitGPT's scripts checkpoint every Block on several GPUs and nothing on one");
      return true;
    }
    default:
      return true;
  }
}

std::vector<std::string> recheck_flags(EmitFormat f, const EmitContext& c) {
  const TrainingSetup& s = c.setup;
  std::vector<std::string> out;
  auto target = [&] {
    out = target_args(c);
    out.insert(out.end(), {field(Count::num_gpus).flag, std::to_string(s.parallel.num_gpus)});
  };
  switch (f) {
    // What the format cannot hold: HF and torchtune, the GPU and its count; LitGPT, the GPU.
    // (Lightning's file carries the whole setup in its commented memplan block.)
    case EmitFormat::hf: case EmitFormat::torchtune: target(); break;
    case EmitFormat::litgpt: out = target_args(c); break;
    // The others hold the target; none holds the calibration profile.
    default:
      if (!c.calibration.empty()) out = {field(Target::calibration).flag, c.calibration};
      break;
  }
  return out;
}

}  // namespace memplan::planner
