// SDPA as torch runs it, per device and version: which kernel (CPU flash, CPU math, CUDA fused),
// what each saves, and HF's head repetition and mask tensor. The saved-tensor rows of one layer
// are checked against the shapes in aten/src/ATen/native/transformers/attention.cpp @ v2.6.0
// and sdp_utils_cpp.cpp @ v2.6.0 (CPU flash refuses GQA and dropout).
#include <doctest/doctest.h>

#include <string>

#include "estimator/estimate.h"
#include "estimator/layers.h"
#include "estimator/model.h"

using namespace memplan;

namespace {

constexpr int64_t kB = 2, kS = 100, kA = 8, kD = 32;  // s = 100: not a multiple of 32

TrainingSetup llama_sdpa(int64_t kv, int torch_minor, DeviceKind dev = DeviceKind::cpu) {
  TrainingSetup s;
  s.model = *family_defaults("llama");
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
  // On CUDA the fused kernel takes K/V at 2 heads (enable_gqa).
  CHECK(saved_any(llama_sdpa(2, 6, DeviceKind::cuda), "sdpa math") == 0);

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
