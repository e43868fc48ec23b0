// The fit verdict, the largest micro-batch, and the search for the cheapest changes (see fit.h).
#include "planner/fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "estimator/capability.h"
#include "planner/plan.h"

namespace memplan::planner {
namespace {

// What a verdict holds against the card (estimate.h estimate_verdict_bytes).
int64_t peak(const TrainingSetup& s, const Calibration* cal) {
  return estimate_verdict_bytes(s, activation_timeline(s, /*with_rows=*/false), cal);
}

std::string gib(int64_t b) {
  const double v = static_cast<double>(b);
  if (v >= 1024.0 * 1024 * 1024 * 1024) return fmt::format("{:.2f} TiB", v / (1024.0 * 1024 * 1024 * 1024));
  return fmt::format("{:.2f} GiB", v / (1024.0 * 1024 * 1024));
}

// Checkpointing policies from none to full; a setup is offered only stronger ones.
int checkpoint_level(const Checkpointing& c) {
  switch (c.mode) {
    case CheckpointMode::none: return 0;
    case CheckpointMode::selective: return 1;
    case CheckpointMode::every: return c.every_k >= 4 ? 2 : c.every_k >= 2 ? 3 : 5;
    case CheckpointMode::full: return 5;
    default: return 4;  // per-op selective, a layer list: only full is stronger
  }
}

Precision half_autocast(const DeviceSpec& d) { return d.bf16 ? Precision::amp_bf16 : Precision::amp_fp16; }

bool bitsandbytes_runs(const DeviceSpec& d, std::string* why) { return device_support(d, Feature::bitsandbytes, why) == Support::yes; }

// What a change to one dimension does, in the words of the people who make it.
std::string precision_cost(Precision from, Precision to) {
  switch (to) {
    case Precision::amp_bf16:
    case Precision::amp_fp16:
      return fmt::format("{} autocast: half-precision activations, faster matmuls; fp32 weights and optimizer states kept",
                         to == Precision::amp_bf16 ? "bf16" : "fp16");
    case Precision::bf16: return "pure bf16 weights, gradients and optimizer states (bf16-true): 8 B/param with AdamW; watch numerics";
    case Precision::fp16: return "pure fp16 weights, gradients and states: needs loss scaling; watch numerics";
    case Precision::mixed_bf16:
    case Precision::mixed_fp16:
      return fmt::format("DeepSpeed {}: 16-bit weights and gradients, fp32 master weights and optimizer states",
                         to == Precision::mixed_bf16 ? "bf16" : "fp16");
    case Precision::fp32: return from == Precision::fp32 ? "" : "fp32 everywhere";
  }
  return "";
}

std::string checkpoint_cost(const Checkpointing& c) {
  switch (c.mode) {
    case CheckpointMode::selective: return "recomputes the attention core in backward: ~+5% compute";
    case CheckpointMode::every:
      return fmt::format("recomputes one layer in {} in backward: ~+{:.0f}% compute", c.every_k, 33.0 / static_cast<double>(c.every_k));
    case CheckpointMode::full: return "recomputes every layer's forward in backward: ~+33% compute";
    default: return "recomputes activations in backward";
  }
}

std::string sharding_cost(const Sharding& sh, int64_t dp, int64_t host_per_node, bool host_known) {
  const std::string host =
      sh.offload == Offload::none ? ""
                                  : fmt::format("; needs {} of host RAM per node{}", gib(host_per_node),
                                                host_known ? "" : " (host memory unknown: --host-memory checks it)");
  if (sh.fsdp != FsdpMode::none)
    return sh.offload != Offload::none ? "FSDP with CPU offload: shards, gradients and the step on the host" + host
                                       : fmt::format("FSDP {}: parameters, gradients and states sharded over {} GPUs, gathered per block", to_string(sh.fsdp), dp);
  if (sh.offload == Offload::optimizer)
    return fmt::format("ZeRO-{} with optimizer offload: optimizer states and the Adam step on the CPU (DeepSpeed CPU Adam){}", sh.zero, host);
  if (sh.offload == Offload::optimizer_and_params)
    return "ZeRO-3 with parameter offload: parameters stream from the host every micro-step, the slowest option" + host;
  if (sh.offload == Offload::params)
    return "ZeRO-3 with parameter offload only: 16-bit parameter shards stream from the host every micro-step; master weights, "
           "optimizer states and gradients stay on the GPU" + host;
  switch (sh.zero) {
    case 1: return fmt::format("ZeRO-1: optimizer states sharded over {} GPUs", dp);
    case 2: return fmt::format("ZeRO-2: gradients and optimizer states sharded over {} GPUs", dp);
    case 3: return fmt::format("ZeRO-3: parameters too, gathered layer by layer (~+15% step time)");
    default: return "no sharding";
  }
}

// The changes from `base` to `s`, one per dimension, with the flags and what each changes.
std::vector<Change> changes_between(const TrainingSetup& base, const TrainingSetup& s, int64_t host_per_node, bool host_known) {
  std::vector<Change> out;
  auto add = [&](const char* step, std::string flags, std::string cost) { out.push_back({step, std::move(flags), std::move(cost), s, 0, true}); };
  const int64_t dp = s.parallel.data_parallel();
  if (s.finetune.mode != base.finetune.mode)
    add("fine-tuning", flag_arg(Choice::finetune, to_string(s.finetune.mode)) + " " + flag_arg(Count::lora_rank, s.finetune.lora_rank),
        s.finetune.mode == FinetuneMode::qlora
            ? fmt::format("changes what you train: LoRA adapters (r={}) on a 4-bit NF4 base (bitsandbytes); slower matmuls", s.finetune.lora_rank)
            : fmt::format("changes what you train: LoRA adapters (r={}) on a frozen 16-bit base", s.finetune.lora_rank));
  if (s.precision != base.precision) add("precision", flag_arg(Choice::precision, to_string(s.precision)), precision_cost(base.precision, s.precision));
  if (s.batch.micro_batch != base.batch.micro_batch || s.batch.grad_accum != base.batch.grad_accum)
    add("micro-batch", flag_arg(Count::micro_batch, s.batch.micro_batch) + " " + flag_arg(Count::grad_accum, s.batch.grad_accum),
        fmt::format("same effective batch {}; more, smaller steps", s.batch.micro_batch * s.batch.grad_accum));
  if (to_string(s.checkpointing) != to_string(base.checkpointing))
    add("checkpointing", flag_arg(Choice::checkpointing, to_string(s.checkpointing)), checkpoint_cost(s.checkpointing));
  if (s.attention != base.attention)
    add("attention", flag_arg(Choice::attention, to_string(s.attention)),
        s.attention == AttentionImpl::flash ? "flash-attn kernels: no s x s scores, usually faster"
                                            : "fused SDPA: no s x s scores kept for backward");
  if (s.optimizer != base.optimizer)
    add("optimizer", flag_arg(Choice::optimizer, to_string(s.optimizer)),
        s.optimizer == OptimizerKind::adamw_8bit   ? "bitsandbytes 8-bit AdamW: block-wise 8-bit states (2 B/param instead of 8)"
        : s.optimizer == OptimizerKind::paged_adamw_8bit ? "bitsandbytes paged 8-bit AdamW: 8-bit states that page to host memory under pressure"
                                                         : "another optimizer");
  if (s.runtime.liger != base.runtime.liger)
    add("kernels", switch_arg(Switch::liger, s.runtime.liger),
        "Liger's fused RMSNorm, SwiGLU, RoPE and linear cross-entropy (no logits held); the liger-kernel package");
  const Sharding sh = sharding_of(s);
  if (!(sh == sharding_of(base))) add("sharding", sh.flags(), sharding_cost(sh, dp, host_per_node, host_known));
  if (s.batch.seq_len != base.batch.seq_len)
    add("sequence", flag_arg(Count::seq_len, s.batch.seq_len),
        fmt::format("changes what the model learns: context {} tokens instead of {}", s.batch.seq_len, base.batch.seq_len));
  return out;
}

std::string joined_flags(const std::vector<Change>& cs) {
  std::string f;
  for (const Change& c : cs) f += (f.empty() ? "" : " ") + c.flags;
  return f;
}

// The dimensions (and values) an option changes, as a set of "dimension=flags" strings.
std::vector<std::string> change_keys(const FitOption& o) {
  std::vector<std::string> k;
  for (const Change& c : o.changes) k.push_back(c.step + "=" + c.flags);
  std::sort(k.begin(), k.end());
  return k;
}

// Options whose changes include another option's, and which are not faster, add nothing.
std::vector<FitOption> prune(std::vector<FitOption> all, size_t keep) {
  std::vector<FitOption> out;
  std::vector<std::vector<std::string>> keys, out_keys;
  std::vector<double> speed;  // read before any option is moved out of `all`
  for (const FitOption& o : all) {
    keys.push_back(change_keys(o));
    speed.push_back(o.time.tokens_per_s);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    FitOption& o = all[i];
    const auto& ko = keys[i];
    bool dominated = false;
    // A subset of its changes that fits as fast, wherever it stands in the order (a change that
    // costs no speed, such as Liger's kernels, ranks beside the option without it).
    for (size_t j = 0; j < all.size() && !dominated; ++j) {
      const auto& kp = keys[j];
      dominated = kp.size() < ko.size() && std::includes(ko.begin(), ko.end(), kp.begin(), kp.end()) &&
                  speed[j] >= 0.99 * speed[i];
    }
    // The same changes with a heavier sharding or offload than a faster option kept: the lighter
    // one is offered first and is enough.
    auto but_sharding = [](std::vector<std::string> k) {
      k.erase(std::remove_if(k.begin(), k.end(), [](const std::string& x) { return x.rfind("sharding=", 0) == 0; }), k.end());
      return k;
    };
    for (size_t j = 0; j < out.size() && !dominated; ++j) {
      const auto& kp = out_keys[j];
      dominated = but_sharding(kp) == but_sharding(ko) && kp != ko && out[j].time.tokens_per_s >= o.time.tokens_per_s;
    }
    if (dominated) continue;
    out_keys.push_back(ko);
    out.push_back(std::move(o));
    if (out.size() >= keep) break;
  }
  return out;
}

FitOption option_of(const TrainingSetup& base, const Candidate& c) {
  FitOption o;
  o.setup = c.setup;
  o.peak_bytes = c.peak_bytes;
  o.time = c.time;
  o.host_per_node_bytes = c.host_per_node_bytes;
  o.host_known = base.parallel.host_memory_bytes > 0;
  o.changes = changes_between(base, c.setup, c.host_per_node_bytes, o.host_known);
  o.flags = joined_flags(o.changes);
  o.changes_training = c.setup.finetune.mode != base.finetune.mode;
  o.changes_learning = c.setup.batch.seq_len != base.batch.seq_len;
  return o;
}

}  // namespace

// peak(s, cal) <= target_bytes(s), with the replay only where the bound without it leaves that open.
bool fits(const TrainingSetup& s, const Calibration* cal) {
  const Timeline t = activation_timeline(s, /*with_rows=*/false);
  const VerdictBound b = verdict_bound(s, t, cal);
  if (b.lower > target_bytes(s)) return false;
  return b.exact || estimate_verdict_bytes(s, t, cal) <= target_bytes(s);
}

namespace {

// Largest micro-batch in [1, limit] for which `holds` (memory never falls as the micro-batch grows,
// so a doubling search, then bisection).
template <class Pred>
int64_t largest_where(const TrainingSetup& s, int64_t limit, Pred holds) {
  TrainingSetup t = s;
  auto ok = [&](int64_t b) {
    t.batch.micro_batch = b;
    // A micro-batch past what validate() accepts (its bounds keep the byte counts inside int64)
    // does not fit: the doubling search must not estimate it (fuzz_planner: 1.4e18 x 13724).
    return validate(t).empty() && holds(t);
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

}  // namespace

int64_t largest_micro_batch(const TrainingSetup& s, const Calibration* cal, int64_t limit) {
  return largest_where(s, limit, [&](const TrainingSetup& t) { return fits(t, cal); });
}

int64_t largest_micro_batch_that_runs(const TrainingSetup& s, const Calibration* cal, int64_t limit) {
  // The breakdown without its text (the search needs only the verdict).
  return largest_where(s, limit, [&](const TrainingSetup& t) {
    const Timeline tl = activation_timeline(t, /*with_rows=*/false);
    if (verdict_bound(t, tl, cal).runs == 0) return false;  // the tensors alone outgrow the card
    return step_runs(t, tl, cal);
  });
}

SearchSpace fit_space(const TrainingSetup& s, const FitAsk& ask) {
  SearchSpace sp;
  const DeviceSpec& d = s.device;
  const int64_t dp = s.parallel.data_parallel();
  std::string why;
  // Precision: bf16 autocast from fp32 (fp16 where the card has no bf16), pure 16-bit from autocast.
  sp.precisions = {s.precision};
  if (s.precision == Precision::fp32) {
    sp.precisions.push_back(half_autocast(d));
    if (d.bf16) sp.precisions.push_back(Precision::bf16);
  } else if (s.precision == Precision::amp_bf16 && d.bf16) {
    sp.precisions.push_back(Precision::bf16);
  }
  if (!d.bf16) {
    device_support(d, Feature::bf16, &why);
    sp.left_out.push_back({"bf16", why + "; fp16 is offered instead"});
  }
  // Attention.
  sp.attentions = {s.attention};
  const bool flash = device_support(d, Feature::flash_attention, &why) == Support::yes && d.kind == DeviceKind::cuda;
  if (s.attention == AttentionImpl::eager) sp.attentions.push_back(AttentionImpl::sdpa);
  if (s.attention != AttentionImpl::flash) {
    if (flash) sp.attentions.push_back(AttentionImpl::flash);
    else sp.left_out.push_back({"flash attention", why});
  }
  if (d.caps && d.caps->sdpa_fused != Support::yes && s.attention != AttentionImpl::flash) {
    device_support(d, Feature::sdpa_fused, &why);
    sp.left_out.push_back({"fused SDPA", why});
  }
  // Checkpointing: the policies stronger than the setup's.
  sp.checkpointings = {s.checkpointing};
  for (const char* k : {"selective", "every:4", "every:2", "full"}) {
    const Checkpointing c = *parse_checkpointing(k);
    if (checkpoint_level(c) > checkpoint_level(s.checkpointing)) sp.checkpointings.push_back(c);
  }
  // Optimizers: 8-bit and paged states for Adam; AdamW beside a bitsandbytes one, which no offload
  // can step (the offload options need it).
  sp.optimizers = {s.optimizer};
  if (s.optimizer == OptimizerKind::adamw_8bit || s.optimizer == OptimizerKind::paged_adamw || s.optimizer == OptimizerKind::paged_adamw_8bit)
    sp.optimizers.push_back(OptimizerKind::adamw);
  if (s.optimizer == OptimizerKind::adamw || s.optimizer == OptimizerKind::adam) {
    if (bitsandbytes_runs(d, &why)) {
      sp.optimizers.push_back(OptimizerKind::adamw_8bit);
      sp.optimizers.push_back(OptimizerKind::paged_adamw_8bit);
    } else {
      sp.left_out.push_back({"8-bit and paged optimizers", why});
    }
  }
  // Sharding: stronger ZeRO stages, then offload (the optimizer before the parameters); FSDP where
  // the framework is not DeepSpeed.
  const Sharding now = sharding_of(s);
  sp.shardings = {now};
  auto add = [&](Sharding sh) {
    if (std::find(sp.shardings.begin(), sp.shardings.end(), sh) == sp.shardings.end()) sp.shardings.push_back(sh);
  };
  const bool was_fsdp = now.fsdp != FsdpMode::none;
  bool ds = !was_fsdp && framework_allows_deepspeed(s, &why);
  if (!was_fsdp && !ds) sp.left_out.push_back({"DeepSpeed ZeRO", why});
  if (ds && device_support(d, Feature::deepspeed, &why) != Support::yes) {
    ds = false;
    sp.left_out.push_back({"DeepSpeed ZeRO and offload", why});
  }
  if (ds) {
    if (dp > 1)
      for (int z = std::max(1, now.zero + 1); z <= 3; ++z) add({z, Offload::none, FsdpMode::none, true});
    if (device_support(d, Feature::deepspeed_offload, &why) == Support::yes) {
      if (now.offload == Offload::none)
        for (int z = std::max(now.zero, dp > 1 ? 1 : 2); z <= 3; ++z) add({z, Offload::optimizer, FsdpMode::none, true});
      if (now.offload != Offload::optimizer_and_params) add({3, Offload::optimizer_and_params, FsdpMode::none, true});
    } else if (now.offload == Offload::none) {
      sp.left_out.push_back({"DeepSpeed offload", why});
    }
  }
  if (dp > 1 && now.zero == 0 && !now.deepspeed) {
    if (framework_allows_fsdp(s, &why)) {
      if (!was_fsdp) add({0, Offload::none, FsdpMode::full_shard, false});
      if (now.fsdp == FsdpMode::shard_grad_op || now.fsdp == FsdpMode::no_shard) add({0, Offload::none, FsdpMode::full_shard, false});
      if (now.offload == Offload::none) add({0, Offload::optimizer_and_params, FsdpMode::full_shard, false});
    } else if (!was_fsdp) {
      sp.left_out.push_back({"FSDP", why});
    }
  }
  // Kernels: Liger's fused RMSNorm, SwiGLU, RoPE and linear cross-entropy where the Trainer
  // applies them to this model on this card.
  sp.ligers = {s.runtime.liger};
  if (!s.runtime.liger) {
    if (!ask.liger_off.empty()) sp.left_out.push_back({"Liger kernels", ask.liger_off});
    else if (liger_applies(s, &why)) sp.ligers.push_back(true);
    else sp.left_out.push_back({"Liger kernels", why});
  }
  // Fine-tuning: adapters only ("changes what you train").
  sp.finetunes = {s.finetune.mode};
  if (s.finetune.mode == FinetuneMode::full && !s.model.quantized.any()) {
    sp.finetunes.push_back(FinetuneMode::lora);
    if (bitsandbytes_runs(d, &why)) sp.finetunes.push_back(FinetuneMode::qlora);
    else sp.left_out.push_back({"QLoRA (4-bit base)", why});
  }
  return sp;
}

FitReport fit(const TrainingSetup& s, const Calibration* cal, const FitAsk& ask) {
  FitReport r;
  const MemoryBreakdown e = estimate(s, cal);
  r.peak_bytes = e.peak_bytes();
  r.verdict = judge(e, s);
  r.host = judge_host(e, s);
  r.largest_micro_batch = largest_micro_batch(s, cal);
  r.largest_micro_batch_runs = largest_micro_batch_that_runs(s, cal);  // (after it: the probes it shares are remembered)
  if (r.largest_micro_batch > 0) {
    TrainingSetup t = s;
    t.batch.micro_batch = r.largest_micro_batch;
    r.largest_micro_batch_peak = peak(t, cal);
  }
  if (r.verdict.fits && r.host.fits) return r;

  const SearchSpace space = fit_space(s, ask);
  r.left_out = space.left_out;
  const int64_t effective = s.batch.micro_batch * s.batch.grad_accum;
  auto search = [&](const TrainingSetup& base) {
    PlanRequest req;
    req.base = base;
    req.global_batch = effective * base.parallel.data_parallel();
    req.budget = base.thresholds.target;
    req.space = space;
    req.exact_batch_only = true;
    req.max_micro_batch = base.batch.micro_batch;
    req.explain = false;
    req.resolve_all = true;  // every group's best is an option listed
    req.calibration = cal;
    PlanResult pr = plan(req);
    r.searched += pr.candidates;
    return pr;
  };

  // Each change alone, the rest as given (the micro-batch alone: the largest that keeps the
  // effective batch and fits).
  auto single = [&](const char* step, TrainingSetup t) {
    if (!combinable(sharding_of(t), t.optimizer)) return;
    const MemoryBreakdown et = estimate(t, cal);
    const HostVerdict hv = judge_host(et, t);
    const auto cs = changes_between(s, t, hv.per_node_bytes, hv.known);
    std::string cost;
    for (const Change& x : cs) cost += (cost.empty() ? "" : "; ") + x.cost;
    Change c{step, joined_flags(cs), cost, t};
    // What the verdict holds (the peak, or the target's share the step runs in with the
    // allocator's cache squeezed), against the setup's own.
    c.peak_bytes = et.verdict_bytes();
    c.fits = c.peak_bytes <= target_bytes(t) && hv.fits;
    if (c.peak_bytes < e.verdict_bytes()) r.single.push_back(std::move(c));
  };
  for (AttentionImpl a : space.attentions)
    if (a != s.attention && !(a == AttentionImpl::flash && s.precision == Precision::fp32)) {
      TrainingSetup t = s;
      t.attention = a;
      single("attention", t);
    }
  for (Precision p : space.precisions)
    if (p != s.precision) {
      TrainingSetup t = s;
      t.precision = regime_under(p, sharding_of(s));
      if (t.precision != s.precision) single("precision", t);
    }
  for (const Checkpointing& c : space.checkpointings)
    if (to_string(c) != to_string(s.checkpointing)) {
      TrainingSetup t = s;
      t.checkpointing = c;
      single("checkpointing", t);
    }
  for (int64_t b = std::min(s.batch.micro_batch - 1, std::max<int64_t>(1, r.largest_micro_batch)); b >= 1; --b)
    if (effective % b == 0) {
      TrainingSetup t = s;
      t.batch.micro_batch = b;
      t.batch.grad_accum = effective / b;
      single("micro-batch", t);
      break;
    }
  for (OptimizerKind o : space.optimizers)
    if (o != s.optimizer) {
      TrainingSetup t = s;
      t.optimizer = o;
      single("optimizer", t);
    }
  for (const Sharding& sh : space.shardings)
    if (!(sh == sharding_of(s))) {
      TrainingSetup t = s;
      apply(t, sh);
      t.precision = regime_under(s.precision, sh);
      single("sharding", t);
    }
  for (const bool liger : space.ligers)
    if (liger && !s.runtime.liger) {
      TrainingSetup t = s;
      t.runtime.liger = true;
      t.runtime.loss = LossImpl::fused_linear;  // use_liger_kernel's default (planner/plan.cpp set_liger)
      single("kernels", t);
    }

  // The search: every combination, the fastest that fit first.
  const PlanResult pr = search(s);
  std::vector<FitOption> keep_model, adapters;
  for (const Candidate& c : pr.group_bests) {
    if (!c.fits) continue;
    FitOption o = option_of(s, c);
    if (o.changes.empty()) continue;  // the setup as given (host memory aside)
    (o.changes_training ? adapters : keep_model).push_back(std::move(o));
  }
  // The fewest changes that fit (the fastest of those), beside the fastest options.
  const FitOption* fewest = nullptr;
  for (const FitOption& o : keep_model)
    if (!fewest || o.changes.size() < fewest->changes.size()) fewest = &o;  // keep_model is fastest first
  std::optional<FitOption> fewest_copy;
  if (fewest) fewest_copy = *fewest;
  r.options = prune(std::move(keep_model), 5);
  if (fewest_copy) {
    size_t smallest = SIZE_MAX;
    for (const FitOption& o : r.options) smallest = std::min(smallest, o.changes.size());
    if (fewest_copy->changes.size() < smallest) r.fewest = std::move(fewest_copy);
  }
  r.training_changes = prune(std::move(adapters), 2);
  if (pr.host_short > 0 && s.parallel.host_memory_bytes > 0)
    r.left_out.push_back({"offload", fmt::format("{} configurations fit the GPU but not the node's {} of host RAM (at the {:.0f}% target)",
                                                 pr.host_short, gib(s.parallel.host_memory_bytes), 100 * s.thresholds.target)});
  // A shorter sequence, last: only when nothing that keeps the context fits.
  if (r.options.empty()) {
    for (int64_t seq = s.batch.seq_len / 2; seq >= 128; seq /= 2) {
      TrainingSetup t = s;
      t.batch.seq_len = seq;
      const PlanResult ps = search(t);
      std::vector<FitOption> shorter;
      for (const Candidate& c : ps.group_bests)
        if (c.fits && c.setup.finetune.mode == s.finetune.mode) shorter.push_back(option_of(s, c));
      if (shorter.empty()) continue;
      for (FitOption& o : prune(std::move(shorter), 2)) r.training_changes.push_back(std::move(o));
      break;
    }
  }
  const double top = !r.options.empty() ? r.options.front().time.tokens_per_s : 0;
  for (auto* list : {&r.options, &r.training_changes})
    for (FitOption& o : *list) o.relative_speed = top > 0 ? o.time.tokens_per_s / top : 1;
  if (r.fewest) r.fewest->relative_speed = top > 0 ? r.fewest->time.tokens_per_s / top : 1;
  return r;
}

}  // namespace memplan::planner
