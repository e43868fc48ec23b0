// The fit verdict, the largest micro-batch and the OOM ladder (see fit.h).
#include "planner/fit.h"

#include <fmt/format.h>

namespace memplan::planner {
namespace {

int64_t peak(const TrainingSetup& s, const Calibration* cal) { return estimate_peak(s, activation_timeline(s), cal); }

Change make(const char* step, std::string flags, std::string cost, TrainingSetup t, const Calibration* cal) {
  Change c{step, std::move(flags), std::move(cost), std::move(t)};
  c.peak_bytes = peak(c.setup, cal);
  c.fits = c.peak_bytes <= target_bytes(c.setup);
  return c;
}

// Each ladder step proposes its change (or nothing) from a setup; `aggressive` picks the
// strongest variant (full checkpointing rather than selective) for the cumulative path.
using Step = std::vector<Change> (*)(const TrainingSetup&, const Calibration*, bool aggressive);

std::vector<Change> flash_step(const TrainingSetup& s, const Calibration* cal, bool) {
  if (s.attention != AttentionImpl::eager) return {};
  TrainingSetup t = s;
  const bool half = s.precision != Precision::fp32;
  t.attention = half && s.device.kind == DeviceKind::cuda ? AttentionImpl::flash : AttentionImpl::sdpa;
  return {make("flash attention", fmt::format("--attention {}", to_string(t.attention)),
               "usually faster: no s x s scores in memory", t, cal)};
}

std::vector<Change> precision_step(const TrainingSetup& s, const Calibration* cal, bool) {
  TrainingSetup t = s;
  std::string cost;
  if (s.precision == Precision::fp32) {
    t.precision = s.device.bf16 ? Precision::amp_bf16 : Precision::amp_fp16;
    cost = "faster on tensor cores; fp32 master weights kept";
  } else if (is_autocast(s.precision)) {
    t.precision = s.precision == Precision::amp_bf16 ? Precision::bf16 : Precision::fp16;
    cost = "pure 16-bit (bf16-true): 8 B/param with AdamW, no fp32 master copy (watch numerics)";
  } else {
    return {};
  }
  return {make("mixed precision", fmt::format("--precision {}", to_string(t.precision)), cost, t, cal)};
}

std::vector<Change> checkpoint_step(const TrainingSetup& s, const Calibration* cal, bool aggressive) {
  std::vector<Change> out;
  if (s.checkpointing.mode == CheckpointMode::none && !aggressive && s.attention == AttentionImpl::eager) {
    TrainingSetup t = s;
    t.checkpointing.mode = CheckpointMode::selective;
    out.push_back(make("activation checkpointing", "--checkpointing selective", "~+5% compute (recompute attention scores)", t, cal));
    if (out.back().fits) return out;
  }
  if (s.checkpointing.mode != CheckpointMode::full) {
    TrainingSetup t = s;
    t.checkpointing.mode = CheckpointMode::full;
    if (aggressive) out.clear();
    out.push_back(make("activation checkpointing", "--checkpointing full", "~+33% compute (one extra forward)", t, cal));
  }
  return out;
}

std::vector<Change> micro_batch_step(const TrainingSetup& s, const Calibration* cal, bool) {
  if (s.batch.micro_batch <= 1) return {};
  TrainingSetup t = s;
  t.batch.micro_batch = s.batch.micro_batch - 1;
  const int64_t effective = s.batch.micro_batch * s.batch.grad_accum;
  int64_t b = largest_micro_batch(t, cal, s.batch.micro_batch - 1);
  // Keep the effective batch exactly: the largest fitting micro-batch that divides it.
  for (int64_t d = b; d >= 1; --d)
    if (effective % d == 0) {
      b = d;
      break;
    }
  t.batch.micro_batch = b > 0 ? b : 1;
  t.batch.grad_accum = (effective + t.batch.micro_batch - 1) / t.batch.micro_batch;
  const int64_t kept = t.batch.micro_batch * t.batch.grad_accum;
  std::string cost = kept == effective ? fmt::format("same effective batch {}; more, smaller steps", effective)
                                       : fmt::format("effective batch {} (was {}); more, smaller steps", kept, effective);
  return {make("smaller micro-batch, more accumulation",
               fmt::format("--micro-batch {} --grad-accum {}", t.batch.micro_batch, t.batch.grad_accum), cost, t, cal)};
}

std::vector<Change> zero_step(const TrainingSetup& s, const Calibration* cal, bool aggressive) {
  if (s.parallel.data_parallel() <= 1) return {};
  std::vector<Change> out;
  for (int z = s.parallel.zero_stage + 1; z <= 3; ++z) {
    TrainingSetup t = s;
    t.parallel.zero_stage = z;
    out.push_back(make("ZeRO stage", fmt::format("--zero {}", z),
                       z == 3 ? "~+15% step time (parameter all-gathers)" : "little: reduce-scatter instead of all-reduce", t, cal));
    if (out.back().fits && !aggressive) break;
  }
  if (aggressive && !out.empty()) out.erase(out.begin(), out.end() - 1);
  return out;
}

std::vector<Change> sequence_step(const TrainingSetup& s, const Calibration* cal, bool) {
  // Halve until it fits, but not past the point where halving stops helping (the optimizer
  // step or the model states may set a floor).
  TrainingSetup t = s;
  int64_t last = peak(s, cal);
  while (t.batch.seq_len > 128) {
    TrainingSetup n = t;
    n.batch.seq_len /= 2;
    const int64_t p = peak(n, cal);
    if (p >= last) break;
    t = n;
    last = p;
    if (p <= target_bytes(t)) break;
  }
  if (t.batch.seq_len == s.batch.seq_len) return {};
  return {make("shorter sequence", fmt::format("--seq-len {}", t.batch.seq_len), "changes what the model learns (context length)", t, cal)};
}

std::vector<Change> offload_step(const TrainingSetup& s, const Calibration* cal, bool aggressive) {
  std::vector<Change> out;
  if (s.parallel.offload == Offload::none) {
    TrainingSetup t = s;
    t.parallel.offload = Offload::optimizer;
    if (t.parallel.zero_stage == 0) t.parallel.zero_stage = 2;  // ZeRO-Offload runs on stage 1-3, one GPU included
    out.push_back(make("CPU offload", fmt::format("--zero {} --offload optimizer", t.parallel.zero_stage),
                       "several times slower steps; needs host RAM for the optimizer states", t, cal));
    if (out.back().fits && !aggressive) return out;
  }
  if (s.parallel.offload != Offload::optimizer_and_params) {
    TrainingSetup t = s;
    t.parallel.offload = Offload::optimizer_and_params;
    t.parallel.zero_stage = 3;
    if (aggressive) out.clear();
    out.push_back(make("CPU offload", "--zero 3 --offload optimizer+params", "the slowest option: parameters stream from the host", t, cal));
  }
  return out;
}

const Step kLadder[] = {flash_step, precision_step, checkpoint_step, micro_batch_step, zero_step, sequence_step, offload_step};

}  // namespace

bool fits(const TrainingSetup& s, const Calibration* cal) { return peak(s, cal) <= target_bytes(s); }

int64_t largest_micro_batch(const TrainingSetup& s, const Calibration* cal, int64_t limit) {
  TrainingSetup t = s;
  auto ok = [&](int64_t b) {
    t.batch.micro_batch = b;
    // A micro-batch past what validate() accepts (its bounds keep the byte counts inside int64)
    // does not fit: the doubling search must not estimate it (fuzz_planner: 1.4e18 x 13724).
    return validate(t).empty() && fits(t, cal);
  };
  if (!ok(1)) return 0;
  int64_t lo = 1, hi = 2;
  while (hi <= limit && ok(hi)) {
    lo = hi;
    hi *= 2;
  }
  hi = std::min(hi, limit + 1);
  while (hi - lo > 1) {  // ok(lo) holds, ok(hi) does not (or hi is past the limit)
    const int64_t mid = lo + (hi - lo) / 2;
    (ok(mid) ? lo : hi) = mid;
  }
  return lo;
}

FitReport fit(const TrainingSetup& s, const Calibration* cal) {
  FitReport r;
  const MemoryBreakdown e = estimate(s, cal);
  r.peak_bytes = e.peak_bytes();
  r.verdict = judge(e, s);
  r.largest_micro_batch = largest_micro_batch(s, cal);
  if (r.largest_micro_batch > 0) {
    TrainingSetup t = s;
    t.batch.micro_batch = r.largest_micro_batch;
    r.largest_micro_batch_peak = peak(t, cal);
  }
  if (r.verdict.fits) return r;
  // A change that does not lower the peak (the optimizer step may dominate) is not a fix.
  for (Step step : kLadder)
    for (Change& c : step(s, cal, false))
      if (c.peak_bytes < r.peak_bytes) r.single.push_back(std::move(c));
  TrainingSetup t = s;
  int64_t current = r.peak_bytes;
  for (Step step : kLadder) {
    std::vector<Change> cs = step(t, cal, true);
    if (cs.empty()) continue;
    // Keep the first variant of this step that fits, else its strongest.
    Change* pick = &cs.back();
    for (Change& c : cs)
      if (c.fits) { pick = &c; break; }
    if (pick->peak_bytes >= current) continue;
    t = pick->setup;
    current = pick->peak_bytes;
    r.cumulative.push_back(*pick);
    if (pick->fits) break;
  }
  // Outside the ladder: a smaller optimizer state, or training adapters only.
  if (s.optimizer == OptimizerKind::adamw || s.optimizer == OptimizerKind::adam) {
    TrainingSetup o = s;
    o.optimizer = OptimizerKind::adamw_8bit;
    r.other.push_back(make("8-bit optimizer", "--optimizer adamw-8bit", "bitsandbytes block-wise 8-bit states", o, cal));
  }
  if (s.finetune.mode == FinetuneMode::full) {
    TrainingSetup o = s;
    o.finetune.mode = FinetuneMode::lora;
    o.finetune.lora_rank = 16;
    if (o.precision == Precision::fp32 || is_autocast(o.precision)) o.precision = s.device.bf16 ? Precision::bf16 : Precision::fp16;
    r.other.push_back(make("LoRA fine-tuning", fmt::format("--finetune lora --lora-rank 16 --precision {}", to_string(o.precision)),
                           "trains adapters only (16-bit frozen base)", o, cal));
    o.finetune.mode = FinetuneMode::qlora;
    o.finetune.base_quant = BaseQuant::nf4;
    r.other.push_back(make("QLoRA fine-tuning", fmt::format("--finetune qlora --lora-rank 16 --precision {}", to_string(o.precision)),
                           "4-bit NF4 base weights; slower matmuls (dequantization)", o, cal));
  }
  return r;
}

}  // namespace memplan::planner
