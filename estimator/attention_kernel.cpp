// SDPA's backend choice per torch release, read from PyTorch's dispatch code. Citations name the
// function in aten/src/ATen/native/transformers/cuda/sdp_utils.cpp ("sdp_utils.cpp") or
// sdp_utils_cpp.h as they read at pytorch/pytorch@001f694a (main, after 2.11), and the pull
// request that changed a rule, from which the rule of each release follows:
//
//   priority   2.0-2.4: flash, mem-efficient, math (cuDNN, from 2.3, only behind an env flag).
//              2.5.0 put cuDNN first on sm90+ (#125343's rule, in the 2.5 release notes); 2.5.1
//              moved it behind math (#138522), where it never runs: 2.5 is read as 2.5.1, and
//              2.6-2.8 are the same.
//              2.9: cuDNN first on sm90 and sm100 (check_prefer_cudnn_attention, #162073).
//              2.10+: first only when the runtime cuDNN is > 9.15.0, on sm9x/sm10x with minor 0
//              or 3 (#171627, #170800; sdp_utils.cpp L78-99 @ 70d99e99). The 2.10 wheels bundle
//              an older cuDNN, the 2.11 wheels a newer one (huggingface/transformers#48163; the
//              H200 run of 2.11+cu130 ran _scaled_dot_product_cudnn_attention).
//   flash      fp16/bf16 only (check_dtypes_flash_attention); sm80-sm121
//              (check_flash_attention_hardware_support; sm80-sm90 before 2.7); no attn_mask
//              (check_for_attn_mask); q/k/v one head dim <= 256 (check_head_dim_size_flash);
//              training on sm86/89/120 refuses head dim in (192, 224], or (224, 256] with dropout
//              (check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120);
//              enable_gqa supported (backend_supports_grouped_query_attention = true).
//              Before 2.2 (FlashAttention 1, from the release notes): sm75+, head dim <= 128.
//   mem-eff    fp32/fp16, and bf16 on sm80+; sm50-sm121; attn_mask and dropout from 2.1; head
//              dims multiples of 8 (half) or 4 (fp32 on sm80+) (minimum_gemm_alignment,
//              check_head_dim_size_mem_efficient); K/V heads equal to q's: up to 2.11 its dense
//              constraints instantiate check_batch_size_and_num_heads_dense<false
//              /*supports_grouped_query_attention*/>, so sdp_utils_cpp.h never takes its
//              `enable_gqa && supports_gqa` branch for it; #191085 (2026-07, after 2.11; main
//              @ 001f694a has supports_gqa = true) added GQA: read here as torch >= 2.13.
//   cuDNN      fp16/bf16 (check_dtypes_low_precision); sm80-sm121; head dims <= 128 and multiples
//              of 8 (192/128 on sm90/sm10x; 256 with torch 2.11's wheels on sm90, as the H200 ran
//              pythia-1b; #185554 widens it further)
//              (check_cudnn_tensor_shapes); dropout a multiple of 1/16 (check_cudnn_dropout);
//              attn_mask accepted (check_attn_mask_shape); GQA accepted
//              (check_batch_size_and_num_heads_dense<true, false, true>).
//   math       always (select_sdp_backend).
// So fp32 with enable_gqa=True (HF's default with torch >= 2.5 and no mask tensor) runs math on
// every CUDA card up to 2.12: flash and cuDNN refuse fp32 and mem-efficient refuses the head counts.
#include "estimator/attention_kernel.h"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

namespace memplan {

namespace {

enum class Dt { fp32, fp16, bf16 };

// The dtype SDPA sees: autocast casts q/k/v to its half type (SDPA is on its lower-precision
// list), pure and mixed 16-bit training computes in it, fp32 stays fp32.
Dt sdpa_dtype(Precision p) {
  switch (p) {
    case Precision::fp32: return Dt::fp32;
    case Precision::amp_fp16: case Precision::fp16: case Precision::mixed_fp16: return Dt::fp16;
    case Precision::amp_bf16: case Precision::bf16: case Precision::mixed_bf16: return Dt::bf16;
  }
  return Dt::fp32;
}
const char* dt_name(Dt d) { return d == Dt::fp32 ? "fp32" : d == Dt::fp16 ? "fp16" : "bf16"; }

// What select_sdp_backend reads from the call.
struct SdpParams {
  bool rocm = false;
  int sm = 80;          // compute capability, major * 10 + minor
  Dt dt = Dt::fp32;
  int64_t d_qk = 0, d_v = 0;
  bool gqa = false;     // enable_gqa with fewer K/V heads than query heads
  bool mask = false;    // an attn_mask tensor
  double dropout = 0.0;
  const Runtime* rt = nullptr;
  bool torch_at_least(int a, int b) const { return rt->torch_at_least(a, b); }
};

// Each returns why the backend refuses the call, or "" when it accepts it.
std::string flash_refuses(const SdpParams& p) {
  if (p.dt == Dt::fp32) return "flash needs fp16/bf16";
  const bool fa2 = p.torch_at_least(2, 2);
  const int lo = fa2 ? 80 : 75, hi = p.torch_at_least(2, 7) ? 121 : 90;
  if (!p.rocm && (p.sm < lo || p.sm > hi)) return fmt::format("flash needs sm{}-sm{}", lo, hi);
  if (p.mask) return "flash takes no attn_mask";
  const int64_t max_d = fa2 ? 256 : 128;
  if (p.d_qk != p.d_v || p.d_qk > max_d) return fmt::format("flash needs one q/k/v head dim <= {}", max_d);
  const bool consumer = (p.sm >= 86 && p.sm <= 89) || p.sm == 120 || p.sm == 121;
  if (!p.rocm && consumer && ((p.d_qk > 192 && p.d_qk <= 224) || (p.d_qk > 224 && p.dropout > 0)))
    return fmt::format("flash cannot train head dim {} on sm{}", p.d_qk, p.sm);
  return "";
}

std::string mem_efficient_refuses(const SdpParams& p) {
  if (!p.rocm && p.sm < 50) return "mem-efficient needs sm50+";
  if (!p.rocm && p.dt == Dt::bf16 && p.sm < 80) return "mem-efficient runs bf16 on sm80+ only";
  if (p.gqa && (p.rocm || !p.torch_at_least(2, 13)))
    return "mem-efficient refuses K/V head counts other than q's (no GQA support before pytorch#191085)";
  if (!p.torch_at_least(2, 1) && (p.mask || p.dropout > 0)) return "mem-efficient takes no attn_mask or dropout before torch 2.1";
  const bool half = p.dt != Dt::fp32;
  const int64_t align = p.rocm ? (half ? 8 : 4) : half ? (p.sm >= 70 ? 8 : 1) : (p.sm >= 80 ? 4 : 1);
  if (p.d_qk % align != 0 || p.d_v % align != 0) return fmt::format("mem-efficient needs head dims divisible by {}", align);
  return "";
}

std::string cudnn_refuses(const SdpParams& p) {
  if (p.dt == Dt::fp32) return "cuDNN needs fp16/bf16";
  const bool sm9_10 = p.sm == 90 || (p.sm >= 100 && p.sm < 110);
  const bool mla_dims = sm9_10 && p.d_qk == 192 && p.d_v == 128;
  // Head dim 256 on Hopper with torch 2.11's wheels (their cuDNN is past 9.15): measured, the H200
  // ran pythia-1b (head dim 256, fp16 autocast, training) through _scaled_dot_product_cudnn_attention
  // (shared/gpu/h200-saved-tensors.txt, torch 2.11.0+cu130). Earlier releases are left at 128.
  const bool wide = p.sm == 90 && p.torch_at_least(2, 11) && p.d_qk == p.d_v && p.d_qk <= 256;
  if (!mla_dims && !wide && (p.d_qk > 128 || p.d_v > 128)) return "cuDNN needs head dims <= 128";
  if (p.d_qk % 8 != 0 || p.d_v % 8 != 0) return "cuDNN needs head dims divisible by 8";
  if (p.dropout * 16.0 != std::floor(p.dropout * 16.0)) return "cuDNN needs dropout in steps of 1/16";
  return "";
}

// Whether the release's default priority order puts cuDNN first on this card.
bool cudnn_first(const SdpParams& p) {
  if (p.rocm) return false;
  if (p.torch_at_least(2, 11)) return (p.sm / 10 == 9 || p.sm / 10 == 10) && (p.sm % 10 == 0 || p.sm % 10 == 3);
  if (p.torch_at_least(2, 10)) return false;  // the gate is there, the wheels' cuDNN is below it
  if (p.torch_at_least(2, 9)) return p.sm == 90 || p.sm == 100;
  return false;
}

AttentionKernel cuda_sdpa(const TrainingSetup& s, bool enable_gqa) {
  const ModelSpec& m = s.model;
  SdpParams p;
  p.rocm = s.device.caps && s.device.caps->backend == "rocm";
  p.sm = s.device.compute_capability > 0 ? s.device.compute_capability : 80;
  p.dt = sdpa_dtype(s.precision);
  p.d_qk = m.qk_head_dim();
  p.d_v = m.attn_out_dim();
  p.gqa = enable_gqa && m.num_key_value_heads < m.num_attention_heads;
  p.mask = s.runtime.sdpa_mask == SdpaMask::tensor;
  p.dropout = m.attention_dropout;
  p.rt = &s.runtime;

  std::string where = fmt::format("torch {}.{} on {}", s.runtime.torch_major, s.runtime.torch_minor,
                                  p.rocm ? std::string("ROCm") : fmt::format("sm{}", p.sm));
  if (!p.rocm && s.device.compute_capability <= 0) where += " (compute capability unknown: sm80 assumed)";
  std::string call = fmt::format("{}, head dim {}", dt_name(p.dt), p.d_qk == p.d_v ? fmt::format("{}", p.d_qk) : fmt::format("{}/{}", p.d_qk, p.d_v));
  if (p.gqa) call += fmt::format(", enable_gqa ({} K/V heads for {})", m.num_key_value_heads, m.num_attention_heads);
  if (p.mask) call += ", an attn_mask tensor";
  if (p.dropout > 0) call += fmt::format(", dropout {}", p.dropout);

  std::vector<std::string> refused;
  AttentionKernel k;
  k.enable_gqa = enable_gqa;
  auto pick = [&](AttnBackend b, const std::string& extra) {
    k.backend = b;
    k.why = fmt::format("{}, {}: ", call, where);
    for (const std::string& r : refused) k.why += r + "; ";
    k.why += backend_name(b) + extra;
    return k;
  };
  if (cudnn_first(p)) {
    const std::string r = cudnn_refuses(p);
    if (r.empty()) return pick(AttnBackend::cudnn, " (first in this release's order on this card)");
    refused.push_back(r);
  }
  if (std::string r = flash_refuses(p); r.empty()) return pick(AttnBackend::flash, "");
  else refused.push_back(r);
  if (std::string r = mem_efficient_refuses(p); r.empty()) return pick(AttnBackend::mem_efficient, "");
  else refused.push_back(r);
  return pick(AttnBackend::math, " (saves the s x s attention weights)");
}

}  // namespace

const char* backend_name(AttnBackend b) {
  switch (b) {
    case AttnBackend::eager: return "eager";
    case AttnBackend::flash_attn: return "flash-attn";
    case AttnBackend::flash: return "flash";
    case AttnBackend::mem_efficient: return "mem-efficient";
    case AttnBackend::cudnn: return "cudnn";
    case AttnBackend::cpu_flash: return "cpu-flash";
    case AttnBackend::math: return "math";
  }
  return "?";
}

bool gqa_native(const TrainingSetup& s) {
  return s.attention == AttentionImpl::flash ||
         (s.runtime.torch_at_least(2, 5) && s.runtime.sdpa_mask != SdpaMask::tensor && s.runtime.transformers_at_least(4, 54));
}

AttentionKernel attention_kernel(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  AttentionKernel k;
  if (s.attention == AttentionImpl::flash) {
    k.backend = AttnBackend::flash_attn;
    k.enable_gqa = true;
    k.why = "attn_implementation flash_attention_2 (the flash-attn package)";
    return k;
  }
  if (s.attention == AttentionImpl::eager) {
    k.why = "attn_implementation eager";
    return k;
  }
  if (!s.runtime.torch_at_least(2, 0)) {
    k.why = "torch < 2.0 has no scaled_dot_product_attention: HF's eager path";
    return k;
  }
  const bool enable_gqa = gqa_native(s) && m.num_key_value_heads < m.num_attention_heads;
  if (s.device.kind == DeviceKind::cuda) {
    // A GPU without SDPA's fused kernels (Apple MPS, RDNA2; RDNA3 unless AOTriton's experimental
    // kernels are switched on: profiles/gpus.yaml sdpa_fused) runs its math path, as the CPU does.
    if (s.device.caps && s.device.caps->sdpa_fused != Support::yes) {
      k.backend = AttnBackend::math;
      k.enable_gqa = enable_gqa;
      const std::string& why = s.device.caps->why[static_cast<size_t>(Feature::sdpa_fused)];
      k.why = why.empty() ? s.device.caps->label + ": no fused SDPA kernels" : why;
      return k;
    }
    return cuda_sdpa(s, enable_gqa);
  }
  // CPU, torch 2.x: the flash kernel unless dropout is on or K/V come with fewer heads
  // (check_for_dropout and check_batch_size_and_num_heads_dense<false /*no GQA*/> in
  // use_flash_attention_cpp, aten/src/ATen/native/transformers/sdp_utils_cpp.cpp @ v2.6.0).
  k.enable_gqa = enable_gqa;
  if (m.attention_dropout > 0) {
    k.backend = AttnBackend::math;
    k.why = "CPU: the flash kernel refuses dropout (check_for_dropout)";
  } else if (enable_gqa) {
    k.backend = AttnBackend::math;
    k.why = "CPU with enable_gqa: the flash kernel refuses K/V head counts other than q's (check_batch_size_and_num_heads_dense<false>)";
  } else {
    k.backend = AttnBackend::cpu_flash;
    k.why = "CPU: torch's flash kernel (use_flash_attention_cpp)";
  }
  return k;
}

}  // namespace memplan
