// The search space (space.h): what may be tried on this card, under this framework and these
// constraints, and why the rest is left out.
#include "planner/space.h"

#include <fmt/format.h>

#include <algorithm>

#include "estimator/capability.h"
#include "estimator/error.h"
#include "planner/emit.h"
#include "profiles/profiles.h"

namespace memplan::planner {

std::string Sharding::describe(int64_t data_parallel) const {
  if (fsdp != FsdpMode::none)
    return offload != Offload::none ? fmt::format("FSDP {} + CPU offload", to_string(fsdp)) : fmt::format("FSDP {}", to_string(fsdp));
  if (zero == 0 && !deepspeed) return data_parallel > 1 ? "DDP" : "no sharding";
  const std::string z = fmt::format("ZeRO-{}", zero);
  return offload == Offload::none ? z : fmt::format("{} + offload {}", z, to_string(offload));
}

std::string Sharding::flags() const {
  if (fsdp != FsdpMode::none)
    return offload != Offload::none
               ? fmt::format("{} {}", flag_arg(Choice::fsdp, to_string(fsdp)), flag_arg(Choice::offload, to_string(Offload::optimizer_and_params)))
               : flag_arg(Choice::fsdp, to_string(fsdp));
  if (offload != Offload::none) return fmt::format("{} {}", flag_arg(Count::zero_stage, zero), flag_arg(Choice::offload, to_string(offload)));
  return flag_arg(Count::zero_stage, zero);
}

Sharding sharding_of(const TrainingSetup& s) {
  Sharding sh;
  sh.zero = s.parallel.zero_stage;
  sh.offload = s.parallel.offload;
  sh.fsdp = s.parallel.fsdp;
  sh.deepspeed = s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
  return sh;
}

void apply(TrainingSetup& s, const Sharding& sh) {
  s.parallel.zero_stage = sh.zero;
  s.parallel.offload = sh.offload;
  s.parallel.fsdp = sh.fsdp;
  // Offload buffers pinned: what memplan's emitted DeepSpeed configs ask for (faster transfers).
  if (sh.offload != Offload::none) s.parallel.offload_pin_memory = true;
  // DeepSpeed overlaps communication by default at stage 3 only (overlap_comm = stage == 3 when
  // unset: deepspeed/runtime/zero/config.py @ v0.16.4 L351-353): what a config written without
  // the key (accelerate's, an HF one) runs; memplan's own ds_config states it.
  if (sh.deepspeed && sh.zero == 3) s.parallel.overlap_comm = true;
}

Precision regime_under(Precision p, const Sharding& sh) {
  if (!sh.deepspeed) return p;
  switch (p) {
    case Precision::amp_bf16: case Precision::bf16: return Precision::mixed_bf16;
    case Precision::amp_fp16: case Precision::fp16: return Precision::mixed_fp16;
    default: return p;
  }
}

std::vector<Precision> default_precisions(const DeviceSpec& d) {
  if (d.bf16) return {Precision::amp_bf16, Precision::fp32, Precision::bf16};
  return {Precision::amp_fp16, Precision::fp32};
}

bool framework_allows_deepspeed(const TrainingSetup& s, std::string* why) {
  switch (s.runtime.framework) {
    case Framework::torchtune:
      if (why) *why = "torchtune shards with FSDP, not DeepSpeed (torchtune/training/_distributed.py @ v0.6.1)";
      return false;
    case Framework::torchtitan:
      if (why) *why = "torchtitan shards with FSDP2, not DeepSpeed (torchtitan/models/llama3/infra/parallelize.py @ v0.2.2)";
      return false;
    case Framework::litgpt:
      if (why) *why = "LitGPT's recipes shard with FSDP (litgpt/finetune/lora.py @ v0.5.7 FSDPStrategy)";
      return false;
    case Framework::megatron:
      if (why) *why = "Megatron-LM runs its own distributed optimizer, not DeepSpeed ZeRO";
      return false;
    default: return true;
  }
}

bool framework_allows_fsdp(const TrainingSetup& s, std::string* why) {
  if (s.runtime.framework == Framework::deepspeed) {
    if (why) *why = flag_arg(Choice::framework, to_string(Framework::deepspeed)) + " runs DeepSpeed's engine, which shards with ZeRO";
    return false;
  }
  if (s.runtime.framework == Framework::megatron) {
    if (why) *why = "Megatron-LM runs its own distributed optimizer";
    return false;
  }
  return true;
}

namespace {

bool uses_bf16(Precision p) { return p == Precision::amp_bf16 || p == Precision::bf16 || p == Precision::mixed_bf16; }

bool bitsandbytes_optimizer(OptimizerKind o) {
  return o == OptimizerKind::adamw_8bit || o == OptimizerKind::paged_adamw || o == OptimizerKind::paged_adamw_8bit;
}

}  // namespace

bool combinable(const Sharding& sh, OptimizerKind o, std::string* why) {
  if (sh.offload == Offload::none || !bitsandbytes_optimizer(o)) return true;
  if (why)
    *why = fmt::format("{} steps on the GPU: offload steps the optimizer on the CPU (DeepSpeed CPU Adam, FSDP CPUOffload)", to_string(o));
  return false;
}

SearchSpace plan_space(const TrainingSetup& base, const Constraints& c) {
  SearchSpace sp;
  const DeviceSpec& d = base.device;
  const int64_t dp = base.parallel.data_parallel();
  std::string why;

  // Contradictions first: they are the user's, and the hint says which to drop.
  if (c.zero && *c.zero > 0 && c.no_deepspeed)
    throw InputError(Where::at_flag("--no-deepspeed"), fmt::format("{} asks for DeepSpeed ZeRO and --no-deepspeed rules it out", flag_arg(Count::zero_stage, *c.zero)),
                     fmt::format("drop one of them: {} plans without DeepSpeed (DDP or FSDP)", flag_arg(Count::zero_stage, 0)));
  if (c.zero && *c.zero > 0 && c.fsdp && *c.fsdp != FsdpMode::none)
    throw InputError(Where::at_flag(field(Choice::fsdp).flag), fmt::format("FSDP and DeepSpeed ZeRO-{} both shard the model; a job runs one of them", *c.zero),
                     fmt::format("drop {} or {}", field(Choice::fsdp).flag, field(Count::zero_stage).flag));
  if (c.offload && *c.offload != Offload::none && !c.allow_offload)
    throw InputError(Where::at_flag("--no-offload"), fmt::format("{} asks for offload and --no-offload rules it out", flag_arg(Choice::offload, to_string(*c.offload))),
                     "drop one of them");
  const bool ds_framework = base.runtime.framework == Framework::deepspeed;
  if (ds_framework && c.no_deepspeed)
    throw InputError(Where::at_flag("--no-deepspeed"), flag_arg(Choice::framework, to_string(Framework::deepspeed)) + " runs DeepSpeed's engine and --no-deepspeed rules it out",
                     "drop one of them");

  // Precisions.
  sp.precisions = c.precisions.empty() ? default_precisions(d) : c.precisions;
  const Framework fw = base.runtime.framework;
  if (c.precisions.empty() && fw == Framework::torchtune) {
    // torchtune's dtype: pure bf16 or fp32 (torchtune/training/precision.py @ v0.6.1).
    sp.precisions = d.bf16 ? std::vector<Precision>{Precision::bf16, Precision::fp32} : std::vector<Precision>{Precision::fp32};
    sp.left_out.push_back({"autocast", "torchtune trains in one dtype (bf16 or fp32), without autocast"});
  } else if (c.precisions.empty() && fw == Framework::litgpt) {
    // LitGPT's Fabric precisions; quantize wants a *-true one (litgpt/finetune/lora.py @ v0.5.13).
    const Finetune& f = base.finetune;
    const bool quantized = f.mode != FinetuneMode::full && f.base_quant != BaseQuant::none;
    sp.precisions = {d.bf16 ? Precision::bf16 : Precision::fp16, Precision::fp32};
    if (!quantized) sp.precisions.push_back(d.bf16 ? Precision::amp_bf16 : Precision::amp_fp16);
  }
  if (!d.bf16) {
    const auto before = sp.precisions.size();
    sp.precisions.erase(std::remove_if(sp.precisions.begin(), sp.precisions.end(), uses_bf16), sp.precisions.end());
    if (sp.precisions.size() != before || c.precisions.empty()) {
      device_support(d, Feature::bf16, &why);
      sp.left_out.push_back({"bf16", why + "; fp16 is tried instead"});
    }
    if (sp.precisions.empty())
      throw InputError(Where::at_flag(c.precisions.size() == 1 ? field(Choice::precision).flag : "--precisions"), fmt::format("bf16: {}", why),
                       "allow fp16 (amp-fp16, mixed-fp16) or fp32");
  }

  // Attention (torchtune and LitGPT call F.scaled_dot_product_attention).
  const bool sdpa_only = fw == Framework::torchtune || fw == Framework::litgpt;
  sp.attentions = !c.attentions.empty() ? c.attentions
                  : sdpa_only           ? std::vector<AttentionImpl>{AttentionImpl::sdpa}
                                        : std::vector<AttentionImpl>{AttentionImpl::eager, AttentionImpl::sdpa, AttentionImpl::flash};
  if (device_support(d, Feature::flash_attention, &why) != Support::yes &&
      std::find(sp.attentions.begin(), sp.attentions.end(), AttentionImpl::flash) != sp.attentions.end()) {
    sp.attentions.erase(std::remove(sp.attentions.begin(), sp.attentions.end(), AttentionImpl::flash), sp.attentions.end());
    sp.left_out.push_back({"flash attention", why});
    if (sp.attentions.empty())
      throw InputError(Where::at_flag(field(Choice::attention).flag), fmt::format("flash attention: {}", why),
                       fmt::format("use {} or eager", flag_arg(Choice::attention, to_string(AttentionImpl::sdpa))));
  }
  if (d.caps && d.caps->sdpa_fused != Support::yes) {
    device_support(d, Feature::sdpa_fused, &why);
    sp.left_out.push_back({"fused SDPA", why + " (sdpa is kept, with that memory)"});
  }

  // Checkpointing.
  if (!c.checkpointings.empty()) {
    sp.checkpointings = c.checkpointings;
  } else if (fw == Framework::torchtune) {
    // enable_activation_checkpointing: every layer or none (torchtune recipes @ v0.6.1).
    for (const char* k : {"none", "full"}) sp.checkpointings.push_back(*parse_checkpointing(k));
  } else if (fw == Framework::litgpt) {
    // LitGPT's scripts: every Block checkpointed on several devices, nothing on one.
    sp.checkpointings.push_back(*parse_checkpointing(base.parallel.num_gpus > 1 ? "full" : "none"));
  } else {
    for (const char* k : {"none", "selective", "every:4", "every:2", "full"}) sp.checkpointings.push_back(*parse_checkpointing(k));
  }

  // Optimizers.
  sp.optimizers = c.optimizers.empty() ? std::vector<OptimizerKind>{base.optimizer} : c.optimizers;
  // A bitsandbytes optimizer steps on the GPU, so no offload plan can keep it: with the optimizer
  // not asked for, AdamW is tried beside it (a file's paged 8-bit AdamW otherwise left "cannot fit"
  // where AdamW with ZeRO-3 offload fits).
  if (c.optimizers.empty() && bitsandbytes_optimizer(base.optimizer) && c.allow_offload) sp.optimizers.push_back(OptimizerKind::adamw);
  if (device_support(d, Feature::bitsandbytes, &why) != Support::yes) {
    const auto before = sp.optimizers.size();
    sp.optimizers.erase(std::remove_if(sp.optimizers.begin(), sp.optimizers.end(), bitsandbytes_optimizer), sp.optimizers.end());
    if (sp.optimizers.size() != before) sp.left_out.push_back({"8-bit and paged optimizers", why});
    if (sp.optimizers.empty())
      throw InputError(Where::at_flag(c.optimizers.size() > 1 ? "--optimizers" : field(Choice::optimizer).flag), fmt::format("bitsandbytes: {}", why),
                       "allow a 32-bit optimizer: --optimizers adamw");
  }

  // Sharding and offload.
  bool deepspeed = !c.no_deepspeed && !(c.fsdp && *c.fsdp != FsdpMode::none) && !(c.zero && *c.zero == 0 && !ds_framework);
  if (deepspeed && !framework_allows_deepspeed(base, &why)) {
    deepspeed = false;
    if (c.zero && *c.zero > 0)
      throw InputError(Where::at_flag(field(Count::zero_stage).flag), fmt::format("ZeRO-{}: {}", *c.zero, why),
                       fmt::format("drop {} (FSDP is planned instead)", field(Count::zero_stage).flag));
    sp.left_out.push_back({"DeepSpeed ZeRO", why});
  }
  if (deepspeed && device_support(d, Feature::deepspeed, &why) != Support::yes) {
    deepspeed = false;
    if (c.zero && *c.zero > 0)
      throw InputError(Where::at_flag(field(Count::zero_stage).flag), fmt::format("DeepSpeed: {}", why), fmt::format("drop {}", field(Count::zero_stage).flag));
    sp.left_out.push_back({"DeepSpeed ZeRO", why});
  }
  if (c.no_deepspeed) sp.left_out.push_back({"DeepSpeed ZeRO", "--no-deepspeed"});
  // A config that runs FSDP has chosen its stack (an FSDP launcher or plugin): DeepSpeed would
  // mean another launcher and config, so it is planned only when asked for (--zero N --fsdp none).
  if (deepspeed && !c.no_deepspeed && !c.zero && !c.fsdp && base.parallel.fsdp != FsdpMode::none) {
    deepspeed = false;
    sp.left_out.push_back({"DeepSpeed ZeRO", fmt::format("the config runs FSDP {}; pass {} {} to plan DeepSpeed instead", to_string(base.parallel.fsdp),
                                                         flag_arg(Count::zero_stage, "N"), flag_arg(Choice::fsdp, to_string(FsdpMode::none)))});
  }
  bool ds_offload = deepspeed && c.allow_offload && device_support(d, Feature::deepspeed_offload, &why) == Support::yes;
  if (deepspeed && c.allow_offload && !ds_offload) sp.left_out.push_back({"DeepSpeed offload", why});
  bool fsdp = dp > 1 && !(c.zero && *c.zero > 0) && !ds_framework;
  if (fsdp && !framework_allows_fsdp(base, &why)) {
    fsdp = false;
    sp.left_out.push_back({"FSDP", why});
  }
  if (c.fsdp && *c.fsdp != FsdpMode::none && dp <= 1)
    throw InputError(Where::at_flag(field(Choice::fsdp).flag), "FSDP shards across data-parallel ranks and this plan has one",
                     fmt::format("pass {} or more, or drop {}", flag_arg(Count::num_gpus, 2), field(Choice::fsdp).flag));
  if (dp > 1 && device_support(d, Feature::multi_gpu, &why) != Support::yes)
    throw InputError(Where::at_flag(field(Count::num_gpus).flag), fmt::format("multi-GPU: {}", why),
                     fmt::format("plan for one GPU ({})", flag_arg(Count::num_gpus, 1)));
  if (!c.allow_offload) sp.left_out.push_back({"offload", "--no-offload"});
  // LitGPT neither offloads nor runs DeepSpeed (litgpt/finetune/*.py @ v0.5.13: FSDPStrategy).
  const bool allow_offload = c.allow_offload && fw != Framework::litgpt;
  if (c.allow_offload && !allow_offload) sp.left_out.push_back({"offload", "LitGPT's scripts do not offload"});

  auto want = [&](const Sharding& sh) {
    // --zero N: that ZeRO stage; --zero 0 rules DeepSpeed out and leaves DDP and FSDP.
    if (c.zero && !(sh.zero == *c.zero && (sh.fsdp == FsdpMode::none || *c.zero == 0))) return false;
    if (c.offload && sh.offload != *c.offload) return false;
    if (c.fsdp && sh.fsdp != *c.fsdp) return false;
    return std::find(sp.shardings.begin(), sp.shardings.end(), sh) == sp.shardings.end();
  };
  auto add = [&](Sharding sh) {
    if (want(sh)) sp.shardings.push_back(sh);
  };
  // Without DeepSpeed: one GPU or DDP (DeepSpeed's engine at stage 0 with --framework deepspeed).
  add({0, Offload::none, FsdpMode::none, ds_framework});
  if (deepspeed) {
    const int first = dp > 1 ? 1 : 4;  // on one GPU ZeRO only matters with offload
    for (int z = first; z <= 3; ++z) add({z, Offload::none, FsdpMode::none, true});
    if (ds_offload) {
      // Optimizer offload before parameter offload: ZeRO-Offload, then ZeRO-Infinity's parameters.
      for (int z = dp > 1 ? 1 : 2; z <= 3; ++z) add({z, Offload::optimizer, FsdpMode::none, true});
      add({3, Offload::optimizer_and_params, FsdpMode::none, true});
    }
  }
  if (fsdp) {
    for (FsdpMode m : {FsdpMode::full_shard, FsdpMode::shard_grad_op}) add({0, Offload::none, m, false});
    if (allow_offload) add({0, Offload::optimizer_and_params, FsdpMode::full_shard, false});
  }
  if (sp.shardings.empty())
    throw InputError(Where::at_flag(c.zero ? field(Count::zero_stage).flag : c.fsdp ? field(Choice::fsdp).flag : field(Choice::offload).flag),
                     "no sharding/offload choice is left once the constraints and the card are applied",
                     sp.left_out.empty() ? fmt::format("relax {}, {} or {}", field(Count::zero_stage).flag, field(Choice::fsdp).flag, field(Choice::offload).flag)
                                         : sp.left_out.back().option + ": " + sp.left_out.back().why);
  sp.finetunes = {base.finetune.mode};
  // Liger's fused kernels where the Trainer applies them to this model on this card (as fit).
  sp.ligers = {base.runtime.liger};
  if (!base.runtime.liger) {
    if (!c.liger_fixed_by.empty()) sp.left_out.push_back({"Liger kernels", c.liger_fixed_by});
    else if (liger_applies(base, &why)) sp.ligers.push_back(true);
    else sp.left_out.push_back({"Liger kernels", why});
  }
  return sp;
}

bool liger_applies(const TrainingSetup& s, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (s.runtime.framework != Framework::hf_trainer && s.runtime.framework != Framework::deepspeed)
    return no(fmt::format("Liger's kernels are applied by the HF Trainer (use_liger_kernel) and the tools on it, not by {}",
                          to_string(s.runtime.framework)));
  if (!profiles::liger_patches(s.model.model_type))
    return no(fmt::format("Liger has no kernels for model_type '{}' (MODEL_TYPE_TO_APPLY_LIGER_FN, "
                          "src/liger_kernel/transformers/monkey_patch.py @ v0.5.10)",
                          s.model.model_type));
  // Triton kernels: CUDA and ROCm GPUs, not the CPU nor Apple's MPS (the catalog's "apple" family).
  if (s.device.kind != DeviceKind::cuda || s.device.family == "apple") return no("Liger's kernels are Triton kernels for CUDA and ROCm GPUs");
  return true;
}

}  // namespace memplan::planner
