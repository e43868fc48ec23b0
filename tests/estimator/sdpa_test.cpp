// SDPA as torch runs it, per device and version: which kernel (CPU flash, CPU math, CUDA flash,
// mem-efficient, cuDNN or math: estimator/attention_kernel.cpp, hand-derived cases below from
// cuda/sdp_utils.cpp and sdp_utils_cpp.h), what each saves, and HF's head repetition and mask
// tensor. The saved-tensor rows of one layer are checked against the shapes in
// aten/src/ATen/native/transformers/attention.cpp @ v2.6.0 and sdp_utils_cpp.cpp @ v2.6.0 (CPU
// flash refuses GQA and dropout).
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "estimator/attention_kernel.h"
#include "estimator/estimate.h"
#include "estimator/layers.h"
#include "estimator/model.h"
#include "profiles/profiles.h"

using namespace memplan;

namespace {

constexpr int64_t kB = 2, kS = 100, kA = 8, kD = 32;  // s = 100: not a multiple of 32

TrainingSetup llama_sdpa(int64_t kv, int torch_minor, DeviceKind dev = DeviceKind::cpu) {
  TrainingSetup s;
  s.model = *profiles::family_defaults("llama");
  s.model.hidden_size = kA * kD;
  s.model.num_layers = 2;
  s.model.num_attention_heads = kA;
  s.model.num_key_value_heads = kv;
  s.model.head_dim = kD;
  s.model.intermediate_size = 512;
  s.model.vocab_size = 1024;
  s.batch.micro_batch = kB;
  s.batch.seq_len = kS;
  s.attention = AttentionImpl::sdpa;
  s.device.kind = dev;
  s.runtime.torch_major = 2;
  s.runtime.torch_minor = torch_minor;
  return s;
}

// Bytes of the saved rows of layer 0 labelled `label` ("made by -> saved by", or the op's own
// output and buffers under its name), 0 if none.
int64_t saved(const TrainingSetup& s, const std::string& label) {
  int64_t bytes = 0;
  for (const auto& r : layer_segment(s, false, 0).saved_rows())
    if (r.op == label) bytes += r.bytes;
  return bytes;
}
// Bytes of every saved row of layer 0 whose label mentions `what`.
int64_t saved_any(const TrainingSetup& s, const std::string& what) {
  int64_t bytes = 0;
  for (const auto& r : layer_segment(s, false, 0).saved_rows())
    if (r.op.find(what) != std::string::npos) bytes += r.bytes;
  return bytes;
}

}  // namespace

TEST_CASE("CPU SDPA, MHA: torch's flash kernel with an unpadded (b, s, a) fp32 logsumexp") {
  const TrainingSetup s = llama_sdpa(kA, 6);
  CHECK(saved(s, "flash attention") == kB * kA * kS * 4 + kB * kS * kA * kD * 4);  // logsumexp + output
  CHECK(saved_any(s, "sdpa math") == 0);
  // CUDA's mem-efficient kernel pads the logsumexp to 32 rows: 128 here.
  CHECK(saved(llama_sdpa(kA, 6, DeviceKind::cuda), "flash attention") == kB * kA * 128 * 4 + kB * kS * kA * kD * 4);
}

TEST_CASE("CPU SDPA, GQA: enable_gqa sends torch 2.5+ to the math path, saving the s x s probabilities") {
  const TrainingSetup s = llama_sdpa(2, 6);
  CHECK(saved_any(s, "flash attention") == 0);
  CHECK(saved(s, "sdpa math _safe_softmax") == kB * kA * kS * kS * 4);
  // bmm(q*sqrt(scale), k^T*sqrt(scale)) saves both: q copied for the batched view, k^T not (the
  // repeat_interleave copy is contiguous); bmm(p, v) saves the V copy.
  CHECK(saved(s, "sdpa math matmul copy q -> sdpa math bmm q k^T") == kB * kS * kA * kD * 4);
  CHECK(saved(s, "sdpa math k^T*sqrt(scale) -> sdpa math bmm q k^T") == kB * kS * kA * kD * 4);
  CHECK(saved(s, "sdpa math repeat_interleave v -> sdpa math bmm p v") == kB * kS * kA * kD * 4);
  // On CUDA too for fp32 (flash refuses fp32, mem-efficient GQA); in bf16 the flash kernel
  // takes K/V at 2 heads (enable_gqa).
  CHECK(saved(llama_sdpa(2, 6, DeviceKind::cuda), "sdpa math _safe_softmax") == kB * kA * kS * kS * 4);
  TrainingSetup cuda_bf16 = llama_sdpa(2, 6, DeviceKind::cuda);
  cuda_bf16.precision = Precision::bf16;
  CHECK(saved_any(cuda_bf16, "sdpa math") == 0);
  CHECK(saved(cuda_bf16, "flash attention") == kB * kA * kS * 4 + kB * kS * kA * kD * 2);  // unpadded logsumexp + output

  SUBCASE("torch 2.4: no enable_gqa, HF repeats K/V and the flash kernel runs") {
    const TrainingSetup t = llama_sdpa(2, 4);
    CHECK(saved_any(t, "sdpa math") == 0);
    CHECK(saved(t, "repeat_kv k -> flash attention") == kB * kS * kA * kD * 4);
  }
  SUBCASE("a padded batch's mask tensor: HF repeats K/V (no enable_gqa) and the flash kernel saves the mask") {
    TrainingSetup t = s;
    t.runtime.sdpa_mask = SdpaMask::tensor;
    CHECK(saved_any(t, "sdpa math") == 0);
    CHECK(saved(t, "repeat_kv v -> flash attention") == kB * kS * kA * kD * 4);
    CHECK(shared_tensors(t).whole_step_bytes - shared_tensors(s).whole_step_bytes == kB * kS * kS * 4);
    // Under autocast the kernel saves a bf16 copy of the fp32 mask per call instead.
    t.precision = Precision::amp_bf16;
    CHECK(shared_tensors(t).forward_bytes - shared_tensors(s).forward_bytes == kB * kS * kS * 4);
    CHECK(saved(t, "flash attention") == kB * kA * kS * 4 + kB * kS * kS * 2 + kB * kS * kA * kD * 2);
  }
}

TEST_CASE("CPU SDPA math keeps half inputs in fp32 from torch 2.5 (allowFP16BF16ReductionMathSDP off)") {
  TrainingSetup s = llama_sdpa(kA, 6);
  s.model.attention_dropout = 0.1;  // dropout: the math path on CPU
  s.precision = Precision::bf16;
  CHECK(saved(s, "sdpa math _safe_softmax") == kB * kA * kS * kS * 4);
  s.runtime.torch_minor = 4;
  CHECK(saved(s, "sdpa math _safe_softmax") == kB * kA * kS * kS * 2);
}

TEST_CASE("SDPA before torch 2.0 is estimated as HF's eager attention (HF's sdpa path needs 2.x)") {
  TrainingSetup s = llama_sdpa(kA, 6);
  s.runtime.torch_major = 1;
  s.runtime.torch_minor = 13;
  CHECK(saved_any(s, "flash attention") == 0);
  CHECK(saved_any(s, "sdpa math") == 0);
  CHECK(saved(s, "softmax") == kB * kA * kS * kS * 4);
}

namespace {

// A CUDA card of compute capability `sm` (major * 10 + minor), torch 2.`torch_minor`,
// transformers 4.57 (enable_gqa with torch >= 2.5 and no mask tensor).
TrainingSetup on_card(int sm, Precision p, int torch_minor, int64_t kv, int64_t d = kD) {
  TrainingSetup s = llama_sdpa(kv, torch_minor, DeviceKind::cuda);
  s.model.head_dim = d;
  s.model.hidden_size = kA * d;
  s.device.compute_capability = sm;
  s.precision = p;
  return s;
}
AttnBackend backend(const TrainingSetup& s) { return attention_kernel(s).backend; }

}  // namespace

TEST_CASE("CUDA SDPA dispatch: fp32 with enable_gqa runs math (flash needs half, mem-efficient refuses GQA)") {
  const TrainingSetup s = on_card(90, Precision::fp32, 11, 2);
  const AttentionKernel k = attention_kernel(s);
  CHECK(k.backend == AttnBackend::math);
  CHECK(k.enable_gqa);
  CHECK(k.why.find("flash needs fp16/bf16") != std::string::npos);
  CHECK(k.why.find("mem-efficient refuses K/V head counts") != std::string::npos);
  CHECK(std::string(backend_name(k.backend)) == "math");
  // The same on every torch from 2.5 (enable_gqa) to 2.12, on every card.
  CHECK(backend(on_card(80, Precision::fp32, 6, 2)) == AttnBackend::math);
  CHECK(backend(on_card(75, Precision::fp32, 5, 2)) == AttnBackend::math);
  // MHA fp32: mem-efficient (head dim a multiple of 4).
  CHECK(backend(on_card(90, Precision::fp32, 11, kA)) == AttnBackend::mem_efficient);
  SUBCASE("torch 2.4: no enable_gqa, HF's repeat_kv copies and mem-efficient") {
    const TrainingSetup t = on_card(90, Precision::fp32, 4, 2);
    CHECK(backend(t) == AttnBackend::mem_efficient);
    CHECK_FALSE(attention_kernel(t).enable_gqa);
    CHECK(saved(t, "repeat_kv k -> flash attention") == kB * kS * kA * kD * 4);
    CHECK(saved_any(t, "sdpa math") == 0);
  }
  SUBCASE("a mask tensor: HF repeats K/V (no enable_gqa), mem-efficient takes the mask") {
    TrainingSetup t = s;
    t.runtime.sdpa_mask = SdpaMask::tensor;
    CHECK(backend(t) == AttnBackend::mem_efficient);
    CHECK_FALSE(attention_kernel(t).enable_gqa);
  }
  SUBCASE("transformers before 4.54 always repeats K/V: mem-efficient") {
    TrainingSetup t = s;
    t.runtime.transformers_major = 4;
    t.runtime.transformers_minor = 53;
    CHECK(backend(t) == AttnBackend::mem_efficient);
  }
  SUBCASE("torch 2.13: mem-efficient has GQA (pytorch#191085)") {
    CHECK(backend(on_card(90, Precision::fp32, 13, 2)) == AttnBackend::mem_efficient);
  }
}

TEST_CASE("CUDA SDPA dispatch: cuDNN first where the release prefers it") {
  // 2.11: sm90, sm100 (cuDNN > 9.15 in the wheels); not sm89 or sm120.
  CHECK(backend(on_card(90, Precision::bf16, 11, 2)) == AttnBackend::cudnn);
  CHECK(backend(on_card(90, Precision::amp_fp16, 11, kA)) == AttnBackend::cudnn);
  CHECK(backend(on_card(100, Precision::bf16, 11, 2)) == AttnBackend::cudnn);
  CHECK(backend(on_card(89, Precision::bf16, 11, 2)) == AttnBackend::flash);
  CHECK(backend(on_card(120, Precision::bf16, 11, 2)) == AttnBackend::flash);
  // 2.10: the wheels' cuDNN is below the gate; 2.9 prefers it on sm90; 2.5.1-2.8 never.
  CHECK(backend(on_card(90, Precision::bf16, 10, 2)) == AttnBackend::flash);
  CHECK(backend(on_card(90, Precision::bf16, 9, 2)) == AttnBackend::cudnn);
  CHECK(backend(on_card(90, Precision::bf16, 6, 2)) == AttnBackend::flash);
  CHECK(backend(on_card(90, Precision::bf16, 5, 2)) == AttnBackend::flash);
  // cuDNN's limits: head dim <= 128 (else flash, <= 256), but 256 on sm90 with torch 2.11 (the
  // H200 ran pythia-1b, head dim 256, fp16, through cuDNN); dropout in steps of 1/16; it takes a mask.
  CHECK(backend(on_card(90, Precision::bf16, 11, kA, 256)) == AttnBackend::cudnn);
  CHECK(backend(on_card(90, Precision::bf16, 11, kA, 192)) == AttnBackend::cudnn);
  CHECK(backend(on_card(90, Precision::bf16, 9, kA, 256)) == AttnBackend::flash);
  TrainingSetup drop = on_card(90, Precision::bf16, 11, kA);
  drop.model.attention_dropout = 0.1;
  CHECK(backend(drop) == AttnBackend::flash);
  drop.model.attention_dropout = 0.125;
  CHECK(backend(drop) == AttnBackend::cudnn);
  TrainingSetup mask = on_card(90, Precision::bf16, 11, 2);
  mask.runtime.sdpa_mask = SdpaMask::tensor;
  CHECK(backend(mask) == AttnBackend::cudnn);
  mask.runtime.torch_minor = 6;  // flash takes no mask: mem-efficient
  CHECK(backend(mask) == AttnBackend::mem_efficient);
  // cuDNN's logsumexp (b, a, s, 1) is not padded to 32 rows (s = 100).
  const TrainingSetup c = on_card(90, Precision::bf16, 11, kA);
  CHECK(saved(c, "flash attention") == kB * kA * kS * 4 + kB * kS * kA * kD * 2);
}

TEST_CASE("CUDA SDPA dispatch: head dims, older cards and ROCm") {
  // fp16, head dim 256, sm80: flash takes up to 256.
  CHECK(backend(on_card(80, Precision::amp_fp16, 6, kA, 256)) == AttnBackend::flash);
  // sm86 trains head dim 256 without dropout, not with it, nor (192, 224]: mem-efficient.
  CHECK(backend(on_card(86, Precision::amp_fp16, 6, kA, 256)) == AttnBackend::flash);
  TrainingSetup d = on_card(86, Precision::amp_fp16, 6, kA, 256);
  d.model.attention_dropout = 0.1;
  CHECK(backend(d) == AttnBackend::mem_efficient);
  CHECK(backend(on_card(86, Precision::amp_fp16, 6, kA, 208)) == AttnBackend::mem_efficient);
  // FlashAttention 1 (torch 2.1): head dim <= 128.
  CHECK(backend(on_card(80, Precision::amp_fp16, 1, kA, 256)) == AttnBackend::mem_efficient);
  // V100 (sm70): no flash; fp16 MHA mem-efficient, fp16 GQA math.
  CHECK(backend(on_card(70, Precision::amp_fp16, 6, kA)) == AttnBackend::mem_efficient);
  CHECK(backend(on_card(70, Precision::amp_fp16, 6, 2)) == AttnBackend::math);
  // Unknown compute capability (a bare --gpu-memory): sm80 assumed, and said.
  const AttentionKernel u = attention_kernel(on_card(0, Precision::bf16, 11, 2));
  CHECK(u.backend == AttnBackend::flash);
  CHECK(u.why.find("sm80 assumed") != std::string::npos);
  // ROCm (AOTriton): no cuDNN; flash takes GQA in half, mem-efficient never.
  TrainingSetup r = on_card(0, Precision::bf16, 11, 2);
  auto caps = std::make_shared<Capabilities>();
  caps->backend = "rocm";
  r.device.caps = caps;
  CHECK(backend(r) == AttnBackend::flash);
  r.precision = Precision::fp32;
  CHECK(backend(r) == AttnBackend::math);
  // Flash-attn and eager are what the setup names.
  TrainingSetup f = on_card(90, Precision::bf16, 11, 2);
  f.attention = AttentionImpl::flash;
  CHECK(backend(f) == AttnBackend::flash_attn);
  f.attention = AttentionImpl::eager;
  CHECK(backend(f) == AttnBackend::eager);
}
