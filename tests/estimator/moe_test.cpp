// transformers 5's MoE experts (estimator/layers.cpp grouped_experts): stacked expert parameters
// run through torch._grouped_mm, which autocast leaves alone, so under AMP the experts save fp32
// tensors. The rows of one layer are checked against shared/gpu/h200-saved-tensors.txt
// (l-moe-nano-amp at micro-batch 2 x 256 on the H200, torch 2.11, transformers 5.17), derived by
// hand below; transformers 4.x keeps the per-expert loop.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "estimator/layers.h"
#include "estimator/model.h"
#include "tests/estimator/specs.h"

using namespace memplan;

namespace {

// moe-nano at micro-batch 2 x 256, amp-bf16 on the H200 (torch 2.11), as the saved-tensor listing ran it.
TrainingSetup moe_nano(int transformers_major, int transformers_minor) {
  TrainingSetup s;
  s.model = testing::moe_nano();
  s.batch.micro_batch = 2;
  s.batch.seq_len = 256;
  s.precision = Precision::amp_bf16;
  s.attention = AttentionImpl::sdpa;
  s.device.kind = DeviceKind::cuda;
  s.device.compute_capability = 90;
  s.runtime.torch_major = 2;
  s.runtime.torch_minor = 11;
  s.runtime.transformers_major = transformers_major;
  s.runtime.transformers_minor = transformers_minor;
  return s;
}

int64_t saved_where(const TrainingSetup& s, const std::string& what) {
  int64_t bytes = 0;
  for (const auto& r : layer_segment(s, true, 0).saved_rows())
    if (r.op.find(what) != std::string::npos) bytes += r.bytes;
  return bytes;
}

int64_t saved_total(const TrainingSetup& s) {
  int64_t bytes = 0;
  for (const auto& r : layer_segment(s, true, 0).saved_rows()) bytes += r.bytes;
  return bytes;
}

}  // namespace

TEST_CASE("transformers 5 MoE: grouped_mm experts save fp32 under bf16 autocast (one layer, by hand)") {
  const TrainingSetup s = moe_nano(5, 17);
  REQUIRE(grouped_mm_experts(s));
  CHECK_FALSE(grouped_mm_experts(moe_nano(4, 57)));
  TrainingSetup old_torch = s;
  old_torch.runtime.torch_minor = 8;  // no torch._grouped_mm before 2.9
  CHECK_FALSE(grouped_mm_experts(old_torch));

  // N = 512 tokens, S = N * K = 1024 routed rows, h 512, f 1408, E 4; fp32 (4 B) throughout.
  constexpr int64_t S = 1024, h = 512, f = 1408, E = 4;
  // From h200-saved-tensors.txt, per layer (8 x each row there):
  //   GroupedMmBackward0  self (S, h) f32 + self (S, f) f32 + offs (E,) int32   = 7,864,336 B
  //   MulBackward0        (S, 2f) gate|up storage + silu(gate) (S, f) + down output (S, h)
  //                       + sample weights (S, 1) f32                           = 19,402,752 B
  //   IndexBackward0      3 x (S,) int64 (perm // K, perm, inv_perm)            = 24,576 B
  //   MaskedFillBackward0 (S, 1) bool                                           = 1,024 B
  const int64_t grouped = S * h * 4 + S * f * 4 + E * 4;
  const int64_t mul = S * 2 * f * 4 + S * f * 4 + S * h * 4 + S * 4;
  const int64_t index = 3 * S * 8, mask = S;
  CHECK(grouped == 7864336);
  CHECK(mul == 19402752);
  const int64_t experts = grouped + mul + index + mask;
  // The whole layer as the card saved it (h200-saved-tensors.txt, l-moe-nano-amp b2 s256): the
  // file's totals per node, less the lm_head's rows (MmBackward0 mat2 (512, 32000) and self
  // (512, 512) bf16), the final norm's (MulBackward0 2 x (2, 256, 512) + (2, 256, 1) f32) and the
  // shared cos/sin (2 x (1, 1, 256, 64) f32), over 8 layers:
  //   Mul (191039488 - 2099200 - 131072) / 8 = 23601152   Mm (66879488 - 32768000 - 524288) / 8 = 4198400
  //   GroupedMm 7864336  cuDNN attention 1064976  Index 24576  TopK 8192  Softmax 8192  Div 6144
  //   MaskedFill 1024                                                   = 36,777,000 B
  // memplan leaves out the cuDNN kernel's two int64 philox scalars (16 B) and an 8-byte scalar.
  const int64_t v5 = saved_total(s);
  CHECK(v5 <= 36777000);
  CHECK(v5 >= 36777000 - 32);
  // The experts' part of it, in fp32.
  CHECK(saved_where(s, "grouped_mm") >= S * f * 4);
  CHECK(v5 - experts == 9484288);  // router, norms and attention: as transformers 4 runs them
  // transformers 4.57 runs the per-expert loop instead: bf16 activations, plus autocast's cached
  // bf16 copy of every expert's three matrices (E x 3 x h x f x 2 B), saved by their matmuls.
  int64_t v4_copies = 0;
  for (const auto& r : layer_segment(moe_nano(4, 57), true, 0).saved_rows())
    if (r.cat == sim::Cat::weight_copy) v4_copies += r.bytes;
  CHECK(v4_copies == E * 3 * h * f * 2 + (h * 8 * 64 + 2 * h * 4 * 64 + 8 * 64 * h + h * E) * 2);
  // No autocast half copy of the stacked expert weights (the router's and attention's remain).
  int64_t copies = 0;
  for (const auto& r : layer_segment(s, true, 0).saved_rows())
    if (r.cat == sim::Cat::weight_copy) copies += r.bytes;
  const int64_t attn_router_copies = (h * 8 * 64 + 2 * h * 4 * 64 + 8 * 64 * h + h * E) * 2;  // q, k, v, o, router
  CHECK(copies == attn_router_copies);
}

TEST_CASE("transformers 5 MoE: stacked expert parameters, one tensor per projection and layer") {
  const TrainingSetup v5 = moe_nano(5, 17), v4 = moe_nano(4, 57);
  CHECK(count_parameters(v5).total == count_parameters(v4).total);
  int64_t experts_v5 = 0, experts_v4 = 0;
  for (const ParamTensor& p : parameter_tensors(v5))
    if (p.group == ParamGroup::experts) {
      experts_v5 += p.count;
      CHECK_FALSE(p.matmul);  // no autocast cache for _grouped_mm
    }
  for (const ParamTensor& p : parameter_tensors(v4))
    if (p.group == ParamGroup::experts) experts_v4 += p.count;
  CHECK(experts_v5 == 2 * 8);      // gate_up_proj (E, 2f, h) and down_proj (E, h, f) per layer
  CHECK(experts_v4 == 3 * 4 * 8);  // E gate, up and down linears per layer
  const auto lins = layer_linears(v5, true);
  CHECK(std::count_if(lins.begin(), lins.end(), [](const Linear& l) { return l.role == Role::expert_gate_up; }) == 1);
}
