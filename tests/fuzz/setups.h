// The invariants every estimate keeps and random training setups, shared by the libFuzzer
// targets (tests/fuzz/fuzz_common.h, with FuzzedDataProvider) and the estimator's property test
// (tests/estimator/properties_test.cpp, with a seeded generator). D provides FuzzedDataProvider's
// ConsumeIntegral, ConsumeIntegralInRange, ConsumeBool, ConsumeProbability, ConsumeFloatingPoint.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "estimator/estimate.h"
#include "estimator/model.h"
#include "profiles/profiles.h"

namespace memplan::fuzz {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "memplan fuzz: invariant broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// No negative term; each phase's total is the sum of its terms (computed without overflow); the
// peak is the largest phase; no negative host term.
inline void check_breakdown(const MemoryBreakdown& b) {
  if (b.phases.size() != kNumPhases) fail(fmt::format("{} phases", b.phases.size()));
  int64_t largest = INT64_MIN;
  for (const PhaseState& ph : b.phases) {
    __int128 sum = 0;
    for (int i = 0; i < kNumTerms; ++i) {
      if (ph.bytes[i] < 0) fail(fmt::format("negative {} in {}: {}", term_name(term_at(i)), phase_name(ph.phase), ph.bytes[i]));
      sum += ph.bytes[i];
    }
    if (sum > INT64_MAX) fail(fmt::format("{} total overflows int64", phase_name(ph.phase)));
    if (static_cast<int64_t>(sum) != ph.total()) fail(fmt::format("{} total is not the sum of its terms", phase_name(ph.phase)));
    largest = std::max(largest, ph.total());
  }
  if (b.peak_bytes() != largest) fail("the peak is not the largest phase");
  for (const HostTerm& h : b.host)
    if (h.bytes < 0) fail(fmt::format("negative host term {}: {}", h.name, h.bytes));
}

// estimate() and the planner's estimate_peak() agree, and the peak never falls when the
// micro-batch or the sequence grows (when the grown setup is still valid).
inline void check_estimate(const TrainingSetup& s, const Calibration* cal) {
  const MemoryBreakdown b = estimate(s, cal);
  check_breakdown(b);
  const Timeline t = activation_timeline(s);
  if (estimate_peak(s, t, cal) != b.peak_bytes()) fail("estimate_peak differs from estimate().peak_bytes()");
  for (int grow = 0; grow < 2; ++grow) {
    TrainingSetup g = s;
    if (grow == 0) g.batch.micro_batch += 1;
    else g.batch.seq_len += 1 + s.batch.seq_len / 4;
    if (!validate(g).empty()) continue;
    const MemoryBreakdown gb = estimate(g, cal);
    check_breakdown(gb);
    // The tensors never fall. Reserved memory may: where the allocator overhead comes from the
    // allocation replay, a larger batch can pack into the caching allocator's segments better (as
    // the real allocator does), so the whole peak is held to this only under the formula.
    auto tensors = [](const MemoryBreakdown& m) {
      int64_t a = 0;
      for (const PhaseState& ph : m.phases) a = std::max(a, ph.allocated());
      return a;
    };
    const bool replayed = b.allocator_replayed || gb.allocator_replayed;
    const int64_t before = replayed ? tensors(b) : b.peak_bytes(), after = replayed ? tensors(gb) : gb.peak_bytes();
    if (after < before)
      fail(fmt::format("the {} falls from {} to {} when the {} grows from {} to {}", replayed ? "tensors' peak" : "peak", before,
                       after, grow == 0 ? "micro-batch" : "sequence", grow == 0 ? s.batch.micro_batch : s.batch.seq_len,
                       grow == 0 ? g.batch.micro_batch : g.batch.seq_len));
  }
}

// A value for a size field: mostly in [lo, hi], sometimes anything an int64 holds.
template <class D>
inline int64_t size_in(D& d, int64_t lo, int64_t hi) {
  switch (d.ConsumeIntegralInRange(0, 15)) {
    case 0: return d.template ConsumeIntegral<int64_t>();
    case 1: return d.template ConsumeIntegralInRange<int64_t>(hi, INT64_MAX);
    case 2: return d.template ConsumeIntegralInRange<int64_t>(INT64_MIN, lo);
    default: return d.template ConsumeIntegralInRange<int64_t>(lo, hi);
  }
}

template <class D>
inline double fraction_in(D& d, double lo, double hi) {
  switch (d.ConsumeIntegralInRange(0, 15)) {
    case 0: return d.template ConsumeFloatingPoint<double>();  // any double: NaN, inf, huge, negative
    default: return lo + (hi - lo) * d.template ConsumeProbability<double>();
  }
}

template <class E, class D>
E pick(D& d, std::initializer_list<E> values) {
  return *(values.begin() + d.template ConsumeIntegralInRange<size_t>(0, values.size() - 1));
}

// A training setup from the fuzzer's bytes: a model family's defaults with sizes mostly in the
// range of real models and now and then any int64, and every setup field drawn the same way.
template <class D>
inline TrainingSetup random_setup(D& d) {
  TrainingSetup s;
  const auto types = profiles::supported_model_types();
  s.model = *profiles::family_defaults(types[d.template ConsumeIntegralInRange<size_t>(0, types.size() - 1)]);
  ModelSpec& m = s.model;
  m.name = "fuzz";
  m.num_attention_heads = size_in(d, 1, 128);
  const int64_t heads = m.num_attention_heads;
  m.head_dim = size_in(d, 1, 256);
  m.hidden_size = d.ConsumeBool() && heads > 0 && m.head_dim > 0 && heads < (1 << 20) && m.head_dim < (1 << 20)
                      ? heads * m.head_dim
                      : size_in(d, 1, 16384);
  m.num_key_value_heads = d.ConsumeBool() ? heads : size_in(d, 1, 128);
  m.num_layers = size_in(d, 1, 96);
  m.intermediate_size = size_in(d, 0, 65536);
  m.vocab_size = size_in(d, 1, 262144);
  m.max_position_embeddings = size_in(d, 0, 131072);
  m.num_labels = size_in(d, 0, 1000);
  m.type_vocab_size = size_in(d, 0, 16);
  m.attention_dropout = fraction_in(d, 0, 0.5);
  m.hidden_dropout = fraction_in(d, 0, 0.5);
  m.embedding_dropout = fraction_in(d, 0, 0.5);
  m.tie_word_embeddings = d.ConsumeBool();
  if (d.ConsumeBool()) {
    m.num_experts = size_in(d, 0, 64);
    m.experts_per_token = size_in(d, 1, 8);
    m.moe_intermediate_size = size_in(d, 0, 8192);
    m.num_shared_experts = size_in(d, 0, 2);
    m.shared_expert_intermediate_size = size_in(d, 0, 8192);
    m.capacity_factor = d.ConsumeBool() ? 0.0 : fraction_in(d, 0, 4);
    m.moe_layer_frequency = size_in(d, 1, 4);
    m.first_dense_layers = size_in(d, 0, 4);
  }
  s.precision = pick(d, {Precision::fp32, Precision::amp_fp16, Precision::amp_bf16, Precision::bf16, Precision::fp16,
                         Precision::mixed_fp16, Precision::mixed_bf16});
  s.optimizer = pick(d, {OptimizerKind::adamw, OptimizerKind::adam, OptimizerKind::sgd, OptimizerKind::sgd_momentum,
                         OptimizerKind::adafactor, OptimizerKind::adafactor_momentum, OptimizerKind::adamw_8bit,
                         OptimizerKind::lion, OptimizerKind::paged_adamw, OptimizerKind::paged_adamw_8bit});
  s.batch.micro_batch = size_in(d, 1, 64);
  s.batch.seq_len = size_in(d, 1, 32768);
  s.batch.grad_accum = size_in(d, 1, 64);
  s.checkpointing.mode = pick(d, {CheckpointMode::none, CheckpointMode::selective, CheckpointMode::every, CheckpointMode::full});
  s.checkpointing.every_k = size_in(d, 1, 8);
  s.attention = pick(d, {AttentionImpl::eager, AttentionImpl::sdpa, AttentionImpl::flash});
  Parallelism& p = s.parallel;
  p.num_gpus = size_in(d, 1, 512);
  p.tensor_parallel = d.ConsumeBool() ? 1 : size_in(d, 1, 8);
  p.pipeline_parallel = d.ConsumeBool() ? 1 : size_in(d, 1, 8);
  p.expert_parallel = d.ConsumeBool() ? 1 : size_in(d, 1, 8);
  // Expert-parallel groups divide the GPUs (validate() refuses the rest; tests/cli/fields_test.cpp
  // checks that): the draw is kept as the largest degree that divides, so that as many setups as
  // before reach the estimator. (A GPU count drawn from all of int64 is left to validate(): gcd of
  // INT64_MIN is undefined.)
  if (p.expert_parallel > 1 && p.num_gpus > 0) p.expert_parallel = std::gcd(p.expert_parallel, p.num_gpus);
  p.zero_stage = static_cast<int>(d.template ConsumeIntegralInRange<int64_t>(-1, 4));
  p.offload = pick(d, {Offload::none, Offload::optimizer, Offload::optimizer_and_params});
  if (d.ConsumeBool()) {
    p.reduce_bucket_elems = size_in(d, 0, 1'000'000'000);
    p.allgather_bucket_elems = size_in(d, 0, 1'000'000'000);
    p.stage3_prefetch_bucket_elems = size_in(d, 0, 100'000'000);
    p.stage3_max_live_parameters = size_in(d, 0, 1'000'000'000);
  }
  p.overlap_comm = d.ConsumeBool();
  p.ddp_bucket_view = d.ConsumeBool();
  Finetune& f = s.finetune;
  f.mode = pick(d, {FinetuneMode::full, FinetuneMode::lora, FinetuneMode::qlora});
  f.lora_rank = size_in(d, 1, 256);
  f.lora_alpha = fraction_in(d, 1, 64);
  f.lora_dropout = fraction_in(d, 0, 0.3);
  if (d.ConsumeBool()) f.lora_targets = {"q", "v"};
  f.freeze_layers = size_in(d, 0, 8);
  f.base_quant = f.mode == FinetuneMode::qlora ? BaseQuant::nf4 : pick(d, {BaseQuant::none, BaseQuant::int8});
  f.double_quant = d.ConsumeBool();
  f.train_embeddings = d.ConsumeBool();
  f.train_head = d.ConsumeBool();
  DeviceSpec& dev = s.device;
  dev.kind = d.ConsumeIntegralInRange(0, 7) == 0 ? DeviceKind::cpu : DeviceKind::cuda;
  dev.family = "generic";
  dev.capacity_bytes = size_in(d, 0, int64_t{192} << 30);
  dev.cuda_context_bytes = size_in(d, 0, int64_t{1} << 30);
  dev.cublas_workspace_bytes = size_in(d, 0, int64_t{64} << 20);
  Runtime& r = s.runtime;
  r.torch_major = static_cast<int>(d.ConsumeIntegralInRange(1, 2));
  r.torch_minor = static_cast<int>(d.ConsumeIntegralInRange(0, 13));
  r.optimizer_impl = pick(d, {OptimizerImpl::automatic, OptimizerImpl::for_loop, OptimizerImpl::foreach, OptimizerImpl::fused});
  r.loss_upcast = d.ConsumeBool();
  r.keep_logits = d.ConsumeBool();
  r.zero_grad_set_to_none = d.ConsumeBool();
  r.allocator_rounding = dev.kind == DeviceKind::cuda && d.ConsumeBool();
  s.data.num_workers = size_in(d, 0, 16);
  s.data.prefetch_factor = size_in(d, 0, 8);
  if (d.ConsumeBool()) {
    s.thresholds.target = fraction_in(d, 0.5, 0.95);
    s.thresholds.warning = std::max(s.thresholds.target, fraction_in(d, 0.5, 0.97));
  }
  return s;
}

// A calibration drawn from the fuzzer's bytes, within what load_calibration accepts most of the time.
template <class D>
inline Calibration random_calibration(D& d) {
  Calibration c;
  c.device = "fuzz";
  c.cuda_context_bytes = size_in(d, -1, int64_t{2} << 30);
  c.workspace_bytes = size_in(d, -1, int64_t{256} << 20);
  c.activation_scale = fraction_in(d, 0.5, 2);
  c.model_state_scale = fraction_in(d, 0.5, 2);
  c.overhead_fraction = d.ConsumeBool() ? -1 : fraction_in(d, 0, 0.5);
  c.overhead_bytes = size_in(d, -(int64_t{1} << 30), int64_t{4} << 30);
  return c;
}

}  // namespace memplan::fuzz
