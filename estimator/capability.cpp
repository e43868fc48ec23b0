// Device capabilities against a setup (capability.h).
#include "estimator/capability.h"

#include "estimator/fields.h"

#include <fmt/format.h>

namespace memplan {
namespace {

Support caps_support(const Capabilities& c, Feature f) {
  switch (f) {
    case Feature::flash_attention: return c.flash_attention;
    case Feature::sdpa_fused: return c.sdpa_fused;
    case Feature::bitsandbytes: return c.bitsandbytes;
    case Feature::deepspeed: return c.deepspeed;
    case Feature::deepspeed_offload: return c.deepspeed_offload;
    case Feature::multi_gpu: return c.multi_gpu;
    default: return Support::yes;
  }
}

std::string card(const DeviceSpec& d) {
  return d.caps && !d.caps->label.empty() ? fmt::format("{} ({})", d.name, d.caps->label) : d.name;
}

bool uses_bf16(Precision p) { return p == Precision::amp_bf16 || p == Precision::bf16 || p == Precision::mixed_bf16; }

}  // namespace

Support device_support(const DeviceSpec& d, Feature f, std::string* why) {
  if (f == Feature::bf16) {
    if (d.bf16) return Support::yes;
    if (why) *why = fmt::format("{} has no bf16 arithmetic", card(d));
    return Support::no;
  }
  if (!d.caps) return Support::yes;
  const Support s = caps_support(*d.caps, f);
  if (s != Support::yes && why) {
    const std::string& w = d.caps->why[static_cast<size_t>(f)];
    *why = fmt::format("{}: {}", card(d), w.empty() ? fmt::format("{} is {}", to_string(f), s == Support::no ? "not supported" : "partly supported") : w);
  }
  return s;
}

bool setup_uses(const TrainingSetup& s, Feature f) {
  switch (f) {
    case Feature::bf16: return uses_bf16(s.precision);
    case Feature::flash_attention: return s.attention == AttentionImpl::flash;
    case Feature::sdpa_fused: return s.attention == AttentionImpl::sdpa;
    case Feature::bitsandbytes:
      return s.optimizer == OptimizerKind::adamw_8bit || s.optimizer == OptimizerKind::paged_adamw ||
             s.optimizer == OptimizerKind::paged_adamw_8bit || s.finetune.base_quant != BaseQuant::none ||
             s.model.quantized.method == "bitsandbytes";
    case Feature::deepspeed: return s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
    case Feature::deepspeed_offload: return s.parallel.offload != Offload::none && s.parallel.fsdp == FsdpMode::none;
    case Feature::multi_gpu: return s.parallel.num_gpus > 1;
    case Feature::kCount: break;
  }
  return false;
}

std::vector<Problem> device_problems(const TrainingSetup& s) {
  std::vector<Problem> out;
  if (s.device.kind != DeviceKind::cuda) return out;  // the CPU target runs what its torch runs
  struct Ask {
    Feature f;
    const char* field;
    const char* hint;
  };
  const Ask asks[] = {
      {Feature::bf16, path(Choice::precision), "use fp16 instead (amp-fp16, or mixed-fp16 with DeepSpeed): memplan fit and plan pick it for this card"},
      {Feature::flash_attention, path(Choice::attention), "use --attention sdpa (or eager); memplan fit and plan only offer what the card runs"},
      {Feature::bitsandbytes, s.finetune.base_quant != BaseQuant::none ? path(Choice::finetune) : path(Choice::optimizer),
       "use a 32-bit optimizer (adamw) and a 16-bit base (--finetune lora) on this card"},
      {Feature::deepspeed, memplan::path(Count::zero_stage), "run without DeepSpeed (--zero 0; FSDP shards across GPUs)"},
      {Feature::deepspeed_offload, path(Choice::offload), "drop --offload"},
      {Feature::multi_gpu, memplan::path(Count::num_gpus), "plan for one GPU (--gpus 1)"},
  };
  for (const Ask& a : asks) {
    if (!setup_uses(s, a.f)) continue;
    std::string why;
    const Support sup = device_support(s.device, a.f, &why);
    if (sup == Support::yes) continue;
    out.push_back({a.field, fmt::format("{}: {}{}", to_string(a.f), why, sup == Support::partial ? " (a preview; results may differ)" : ""),
                   a.hint});
  }
  return out;
}

}  // namespace memplan
