// Which kernel runs a setup's attention, as data: the backend torch's scaled_dot_product_attention
// dispatch picks for the device, torch release, dtype, head dimensions, GQA flag, mask and dropout
// (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp and sdp_utils_cpp.{h,cpp}), or the eager
// and flash-attn paths when the setup asks for them. What each kernel saves lives in layers.cpp.
#pragma once

#include <string>

#include "estimator/setup.h"

namespace memplan {

enum class AttnBackend {
  eager,          // HF eager attention: matmul, softmax, matmul (also SDPA before torch 2.0)
  flash_attn,     // the flash-attn package (attn_implementation="flash_attention_2")
  flash,          // SDPA's FlashAttention-2 kernel (_scaled_dot_product_flash_attention)
  mem_efficient,  // SDPA's CUTLASS memory-efficient kernel (_scaled_dot_product_efficient_attention)
  cudnn,          // SDPA's cuDNN kernel (_scaled_dot_product_cudnn_attention)
  cpu_flash,      // SDPA's CPU flash kernel (_scaled_dot_product_flash_attention_cpu)
  math,           // SDPA's composite math path (_scaled_dot_product_attention_math): saves s x s
};

// The kernel and the reason, as `estimate --json` reports them ("attention_kernel").
struct AttentionKernel {
  AttnBackend backend = AttnBackend::eager;
  // HF passes K/V at their own head count with enable_gqa=True (no repeat_kv copies).
  bool enable_gqa = false;
  std::string why;
};

// The kernel a setup's attention runs and why. On CUDA the SDPA backend follows torch's priority
// order and each backend's constraints at the setup's torch release (runtime.torch_*), on the
// card's compute capability (device.compute_capability; 0, a bare capacity, is taken as sm80).
AttentionKernel attention_kernel(const TrainingSetup& s);

// Short name of a backend: "eager", "flash-attn", "flash", "mem-efficient", "cudnn", "cpu-flash", "math".
const char* backend_name(AttnBackend b);

// Whether HF's sdpa path hands K/V to SDPA at their own head count (enable_gqa=True) rather than
// repeat_kv copies: transformers >= 4.54 with torch >= 2.5 and no mask tensor (use_gqa_in_sdpa,
// integrations/sdpa_attention.py @ v4.54.0, PR #39412); flash-attn always takes them so.
bool gqa_native(const TrainingSetup& s);

}  // namespace memplan
