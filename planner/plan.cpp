// The plan search (see plan.h). Memory is monotone in the micro-batch while the accumulation
// regime holds (tests/estimator/invariants_test.cpp), so each group of (precision, attention,
// checkpointing, optimizer, ZeRO, offload) finds its largest fitting micro-batch by binary
// search per regime and classifies every micro-batch of its range exactly; the activation
// timeline of a (micro-batch, precision, attention, checkpointing, gradient regime) is
// simulated once and shared by every group.
#include "planner/plan.h"

#include "estimator/error.h"
#include "planner/emit.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

namespace memplan::planner {

double tier_fraction(const std::string& tier) {
  if (tier == "safe") return 0.85;
  if (tier == "balanced") return 0.90;
  if (tier == "aggressive") return 0.95;
  return 0;
}

namespace {

// "a, b,,c" -> a b c
std::vector<std::string> split_csv(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : text + ",") {
    if (c != ',') {
      if (c != ' ') cur += c;
      continue;
    }
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  }
  return out;
}

template <class E>
std::vector<E> parse_list(const std::string& text, const char* flag, std::optional<E> (*parse)(const std::string&),
                          const std::vector<std::string>& names) {
  std::vector<E> out;
  for (const std::string& item : split_csv(text)) {
    const auto v = parse(item);
    if (!v)
      throw InputError(Where::at_flag(flag), fmt::format("unknown value '{}'", item),
                       fmt::format("expected a comma list of: {}", fmt::join(names, ", ")));
    out.push_back(*v);
  }
  return out;
}

}  // namespace

PlanRequest make_request(const TrainingSetup& s, const PlanAsk& ask, const Calibration* calibration) {
  if (s.device.capacity_bytes <= 0)
    throw InputError(Where::at_flag("--gpu"), "plan needs a target", "pass --gpu PRESET (memplan gpus lists them) or --gpu-memory 40GiB");
  PlanRequest req;
  req.base = s;
  req.global_batch = ask.global_batch.value_or(ask.config_global_batch.value_or(0));
  if (req.global_batch <= 0)
    throw InputError(Where::at_flag("--global-batch"), "plan needs the global batch (sequences per optimizer step, all GPUs)",
                     "pass --global-batch 256, or set training.global_batch_size in the config");
  constexpr int64_t kMaxGlobalBatch = 1'000'000'000;
  if (req.global_batch > kMaxGlobalBatch)
    throw InputError(Where::at_flag("--global-batch"),
                     fmt::format("global batch {} is out of range (at most {} sequences per optimizer step)", req.global_batch,
                                 kMaxGlobalBatch),
                     "the global batch counts sequences over all GPUs: a few hundred to a few thousand is usual");
  const int64_t dp = s.parallel.data_parallel();
  if (req.global_batch < dp)
    throw InputError(Where::at_flag("--global-batch"),
                     fmt::format("global batch {} is smaller than the {} data-parallel ranks: each rank needs at least one sequence",
                                 req.global_batch, dp),
                     fmt::format("use --global-batch {} or more, or fewer --gpus", dp));
  if (ask.budget) {
    if (!(*ask.budget > 0 && *ask.budget <= 1))
      throw InputError(Where::at_flag("--budget"), fmt::format("must be a fraction in (0, 1] (got {})", *ask.budget), "e.g. --budget 0.88");
    req.budget = *ask.budget;
  } else {
    req.budget = tier_fraction(ask.tier);
    if (req.budget == 0)
      throw InputError(Where::at_flag("--tier"), fmt::format("unknown tier '{}'", ask.tier),
                       "expected one of: safe (85%), balanced (90%), aggressive (95%)");
  }
  EmitFormat format = EmitFormat::memplan;
  if (!ask.emit.empty() && !parse_emit_format(ask.emit, &format))
    throw InputError(Where::at_flag("--emit"), fmt::format("unknown format '{}'", ask.emit),
                     fmt::format("expected one of: {}", fmt::join(emit_format_names(), ", ")));
  req.stack = ask.emit == "deepspeed" ? Stack::deepspeed
              : ask.emit == "hf"      ? Stack::hf
              : ask.emit == "lightning" ? Stack::lightning
              : ask.emit == "torchtune" ? Stack::torchtune
              : ask.emit == "litgpt"    ? Stack::litgpt
                                        : Stack::any;
  // An explicit flag fixes that dimension; everything else is searched.
  if (!ask.optimizers.empty()) req.optimizers = parse_list<OptimizerKind>(ask.optimizers, "--optimizers", parse_optimizer, optimizer_names());
  else if (ask.optimizer_fixed) req.optimizers = {s.optimizer};
  if (!ask.precisions.empty()) req.precisions = parse_list<Precision>(ask.precisions, "--precisions", parse_precision, precision_names());
  else if (ask.precision_fixed) req.precisions = {s.precision};
  if (ask.attention_fixed) req.attentions = {s.attention};
  if (ask.checkpointing_fixed) req.checkpointings = {s.checkpointing};
  // LitGPT replaces the optimizer of a quantized run with bitsandbytes' PagedAdamW
  // (instantiate_bnb_optimizer, litgpt/utils.py @ v0.5.13).
  if (req.stack == Stack::litgpt && s.finetune.mode != FinetuneMode::full && s.finetune.base_quant != BaseQuant::none)
    req.optimizers = {OptimizerKind::paged_adamw};
  req.allow_offload = !ask.no_offload;
  req.max_micro_batch = ask.max_micro_batch;
  req.calibration = calibration;
  return req;
}

namespace {

std::string gib(int64_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0)); }

struct ZeroOffload {
  int zero;
  Offload offload;
};

bool flash_capable(const DeviceSpec& d) {
  return d.kind == DeviceKind::cuda && d.family != "volta" && d.family != "turing" && d.family != "apple" &&
         d.family.rfind("rdna", 0) != 0;
}

class Search {
 public:
  explicit Search(const PlanRequest& req)
      : req_(req), dp_(req.base.parallel.data_parallel()), ps_(summarize_parameters(req.base)) {
    budget_ = static_cast<int64_t>(req.budget * static_cast<double>(req.base.device.capacity_bytes));
    // Accumulation 1 (gradients appear during backward) once G / (dp * b) rounds to 1.
    for (int64_t b = 1; b <= max_b(); ++b)
      if (accum_for(b) >= 2) split_ = b;
  }

  int64_t budget() const { return budget_; }
  int64_t dp() const { return dp_; }

  int64_t accum_for(int64_t b) const {
    const double a = static_cast<double>(req_.global_batch) / static_cast<double>(dp_ * b);
    return std::max<int64_t>(1, std::llround(a));
  }
  int64_t max_b() const {
    return std::max<int64_t>(1, std::min(req_.max_micro_batch, (req_.global_batch + dp_ - 1) / dp_));
  }

  // Peak of a candidate; timelines cached by their key.
  int64_t peak(const TrainingSetup& s) {
    const auto key = std::make_tuple(s.batch.micro_batch, static_cast<int>(s.checkpointing.mode), s.checkpointing.every_k,
                                     static_cast<int>(s.attention), static_cast<int>(s.precision), gradients_persist(s));
    auto it = timelines_.find(key);
    if (it == timelines_.end()) {
      it = timelines_.emplace(key, activation_timeline(s)).first;
      ++timeline_count;
    }
    ++compositions;
    return estimate_peak(s, it->second, req_.calibration, &ps_);
  }

  // A candidate with its modelled time and global batch; peak and fits left to the caller.
  Candidate priced(const TrainingSetup& s) const {
    Candidate c;
    c.setup = s;
    c.time = step_time(s, ps_);
    c.global_batch = checked_mul(checked_mul(s.batch.micro_batch, s.batch.grad_accum, "the global batch"), dp_, "the global batch");
    return c;
  }

  Candidate evaluate(const TrainingSetup& s) {
    Candidate c = priced(s);
    c.peak_bytes = peak(s);
    c.fits = c.peak_bytes <= budget_;
    return c;
  }

  // Better: meets the global batch exactly, then more tokens/s, then less memory.
  bool better(const Candidate& a, const Candidate& b) const {
    const bool ea = a.global_batch == req_.global_batch, eb = b.global_batch == req_.global_batch;
    if (ea != eb) return ea;
    if (!ea) {
      const int64_t da = std::llabs(a.global_batch - req_.global_batch), db = std::llabs(b.global_batch - req_.global_batch);
      if (da != db) return da < db;
    }
    if (a.time.tokens_per_s != b.time.tokens_per_s) return a.time.tokens_per_s > b.time.tokens_per_s;
    return a.peak_bytes < b.peak_bytes;
  }

  // The best fitting candidate of one group (everything fixed but the micro-batch), classifying
  // every micro-batch of the range. Returns false when none fits.
  bool best_of_group(TrainingSetup t, Candidate* best, int64_t* smallest_peak = nullptr) {
    const int64_t hi_all = max_b(), split = split_;
    bool found = false;
    auto fits_at = [&](int64_t b) {
      t.batch.micro_batch = b;
      t.batch.grad_accum = accum_for(b);
      const int64_t p = peak(t);
      if (smallest_peak && b == 1) *smallest_peak = p;
      return p <= budget_;
    };
    for (auto [lo, hi] : {std::pair<int64_t, int64_t>{1, split}, {split + 1, hi_all}}) {
      if (lo > hi) continue;
      candidates += hi - lo + 1;
      if (!fits_at(lo)) continue;
      int64_t good = lo, bad = hi + 1;
      if (fits_at(hi)) good = hi;
      else bad = hi;
      while (bad - good > 1) {
        const int64_t mid = good + (bad - good) / 2;
        (fits_at(mid) ? good : bad) = mid;
      }
      fitting += good - lo + 1;
      for (int64_t b = lo; b <= good; ++b) {
        t.batch.micro_batch = b;
        t.batch.grad_accum = accum_for(b);
        Candidate c = priced(t);
        c.fits = true;
        if (!found || better(c, *best)) {
          *best = std::move(c);
          found = true;
        }
      }
    }
    if (found) best->peak_bytes = peak(best->setup);
    return found;
  }

  std::vector<Precision> precisions(int zero) const {
    if (!req_.precisions.empty()) return req_.precisions;
    const bool bf16 = req_.base.device.bf16;
    // torchtune's dtype: pure bf16 or fp32; LitGPT's Fabric precisions (quantize wants *-true).
    if (req_.stack == Stack::torchtune) return bf16 ? std::vector<Precision>{Precision::bf16, Precision::fp32}
                                                    : std::vector<Precision>{Precision::fp32};
    if (req_.stack == Stack::litgpt) {
      const Finetune& f = req_.base.finetune;
      const bool quantized = f.mode != FinetuneMode::full && f.base_quant != BaseQuant::none;
      std::vector<Precision> p = {bf16 ? Precision::bf16 : Precision::fp16, Precision::fp32};
      if (!quantized) p.push_back(bf16 ? Precision::amp_bf16 : Precision::amp_fp16);
      return p;
    }
    const bool deepspeed = zero >= 1 || req_.stack == Stack::deepspeed;
    if (deepspeed) return {bf16 ? Precision::mixed_bf16 : Precision::mixed_fp16, Precision::fp32};
    std::vector<Precision> p = {bf16 ? Precision::amp_bf16 : Precision::amp_fp16, Precision::fp32};
    if (bf16) p.push_back(Precision::bf16);
    return p;
  }

  std::vector<AttentionImpl> attentions(Precision p) const {
    const bool sdpa_only = req_.stack == Stack::torchtune || req_.stack == Stack::litgpt;  // F.scaled_dot_product_attention
    std::vector<AttentionImpl> a = !req_.attentions.empty() ? req_.attentions
                                   : sdpa_only ? std::vector<AttentionImpl>{AttentionImpl::sdpa}
                                               : std::vector<AttentionImpl>{AttentionImpl::eager, AttentionImpl::sdpa, AttentionImpl::flash};
    const bool half = p != Precision::fp32;
    a.erase(std::remove_if(a.begin(), a.end(), [&](AttentionImpl x) {
              return x == AttentionImpl::flash && (!half || !flash_capable(req_.base.device));
            }),
            a.end());
    return a;
  }

  std::vector<Checkpointing> checkpointings() const {
    if (!req_.checkpointings.empty()) return req_.checkpointings;
    auto make = [](const char* s) { return *parse_checkpointing(s); };
    if (req_.stack == Stack::hf || req_.stack == Stack::lightning || req_.stack == Stack::torchtune) return {make("none"), make("full")};
    // LitGPT's scripts: every Block checkpointed on several devices, nothing on one.
    if (req_.stack == Stack::litgpt) return {make(req_.base.parallel.num_gpus > 1 ? "full" : "none")};
    return {make("none"), make("selective"), make("every:4"), make("every:2"), make("full")};
  }

  std::vector<OptimizerKind> optimizers() const {
    return req_.optimizers.empty() ? std::vector<OptimizerKind>{req_.base.optimizer} : req_.optimizers;
  }

  std::vector<ZeroOffload> zero_offload() const {
    std::vector<ZeroOffload> z;
    // torchtune shards with FSDP2 (fsdp_cpu_offload moves parameters, gradients and the step to
    // the host); LitGPT neither offloads nor runs DeepSpeed.
    // An FSDP setup (--fsdp, or a framework's default) is not also DeepSpeed's: FSDP's CPU offload
    // moves parameters, gradients and the step together.
    const bool fsdp = req_.base.parallel.fsdp != FsdpMode::none;
    if (req_.stack == Stack::torchtune || req_.stack == Stack::litgpt || fsdp) {
      z.push_back({0, Offload::none});
      if (req_.stack != Stack::litgpt && req_.allow_offload && fsdp) z.push_back({0, Offload::optimizer_and_params});
      return z;
    }
    if (dp_ > 1) {
      for (int s = 0; s <= 3; ++s) z.push_back({s, Offload::none});
      if (req_.allow_offload)
        for (ZeroOffload x : {ZeroOffload{1, Offload::optimizer}, {2, Offload::optimizer}, {3, Offload::optimizer},
                              {3, Offload::optimizer_and_params}})
          z.push_back(x);
    } else {
      z.push_back({0, Offload::none});  // ZeRO on one GPU only matters for offload
      if (req_.allow_offload) {
        z.push_back({2, Offload::optimizer});
        z.push_back({3, Offload::optimizer_and_params});
      }
    }
    return z;
  }

  // Every group of the grid.
  template <class F>
  void for_each_group(F&& f) {
    const std::vector<Checkpointing> ckpts = checkpointings();
    const std::vector<OptimizerKind> opts = optimizers();
    for (const ZeroOffload& zo : zero_offload())
      for (Precision p : precisions(zo.zero))
        for (AttentionImpl a : attentions(p))
          for (const Checkpointing& c : ckpts)
            for (OptimizerKind o : opts) {
              TrainingSetup t = req_.base;
              t.parallel.zero_stage = zo.zero;
              t.parallel.offload = zo.offload;
              t.precision = p;
              t.attention = a;
              t.checkpointing = c;
              t.optimizer = o;
              f(t);
            }
  }

  int64_t candidates = 0, fitting = 0, timeline_count = 0, compositions = 0;

 private:
  const PlanRequest& req_;
  int64_t dp_;
  ParamSummary ps_;
  int64_t budget_ = 0;
  int64_t split_ = 0;  // largest micro-batch whose accumulation is >= 2
  std::map<std::tuple<int64_t, int, int64_t, int, int, bool>, Timeline> timelines_;
};

std::string describe_value(const std::string& dim, const TrainingSetup& s) {
  if (dim == "micro-batch") return std::to_string(s.batch.micro_batch);
  if (dim == "checkpointing") return to_string(s.checkpointing);
  if (dim == "attention") return to_string(s.attention);
  if (dim == "precision") return to_string(s.precision);
  if (dim == "optimizer") return to_string(s.optimizer);
  if (dim == "ZeRO/offload")
    return s.parallel.offload == Offload::none ? fmt::format("ZeRO-{}", s.parallel.zero_stage)
                                               : fmt::format("ZeRO-{} + offload {}", s.parallel.zero_stage, to_string(s.parallel.offload));
  return "?";
}

// Why a runner-up that fits is slower, in the terms of its dimension.
std::string slower_because(const std::string& dim, const TrainingSetup& alt, const TrainingSetup& best) {
  if (dim == "checkpointing")
    return alt.checkpointing.mode == CheckpointMode::none ? "fits only with a smaller micro-batch" : "recomputes activations";
  if (dim == "attention") return alt.attention == AttentionImpl::eager ? "materialises the s x s scores" : "slower kernel";
  if (dim == "ZeRO/offload") {
    if (alt.parallel.offload != Offload::none) return "host transfers and a CPU optimizer step";
    return alt.parallel.zero_stage > best.parallel.zero_stage ? "not needed: more communication" : "more memory per GPU";
  }
  if (dim == "precision") return alt.precision == Precision::fp32 ? "fp32 matmuls" : "different memory/speed trade";
  if (dim == "micro-batch") return "smaller matmuls";
  return "slower";
}

}  // namespace

PlanResult plan(const PlanRequest& req, const std::vector<std::pair<std::string, DeviceSpec>>& gpus) {
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult r;
  Search search(req);
  r.budget_bytes = search.budget();
  int64_t smallest = -1;
  search.for_each_group([&](const TrainingSetup& t) {
    Candidate c;
    int64_t p1 = 0;
    if (search.best_of_group(t, &c, &p1)) {
      if (!r.found || search.better(c, r.best)) {
        r.best = std::move(c);
        r.found = true;
      }
    } else if (smallest < 0 || p1 < smallest) {
      smallest = p1;
    }
  });
  r.candidates = search.candidates;
  r.fitting = search.fitting;

  if (r.found) {
    if (r.best.global_batch != req.global_batch)
      r.batch_note = fmt::format("global batch {} is not reachable exactly: {} x {} x {} = {} (nearest)", req.global_batch,
                                 r.best.setup.batch.micro_batch, r.best.setup.batch.grad_accum, search.dp(), r.best.global_batch);
    // Runners-up: change one dimension of the winner at a time.
    const TrainingSetup& w = r.best.setup;
    auto add = [&](const std::string& dim, TrainingSetup alt) {
      Candidate c;
      RunnerUp ru;
      ru.dimension = dim;
      ru.value = describe_value(dim, alt);
      int64_t p1 = 0;
      if (search.best_of_group(alt, &c, &p1)) {
        const double loss = 1.0 - c.time.tokens_per_s / r.best.time.tokens_per_s;
        if (std::fabs(loss) < 0.005)
          ru.why = fmt::format("same modelled throughput; peak {} vs {}", gib(c.peak_bytes), gib(r.best.peak_bytes));
        else
          ru.why = fmt::format("{:+.0f}% throughput (modelled): {}", -100 * loss, slower_because(dim, c.setup, w));
        if (c.setup.batch.micro_batch != w.batch.micro_batch && dim != "micro-batch")
          ru.why += fmt::format(" (best at micro-batch {})", c.setup.batch.micro_batch);
      } else {
        c = search.evaluate([&] { alt.batch.micro_batch = 1; alt.batch.grad_accum = search.accum_for(1); return alt; }());
        ru.why = fmt::format("does not fit: even micro-batch 1 needs {} > {} budget", gib(c.peak_bytes), gib(r.budget_bytes));
      }
      ru.candidate = std::move(c);
      r.runners_up.push_back(std::move(ru));
    };
    // The next micro-batch up, as is.
    if (w.batch.micro_batch < search.max_b()) {
      TrainingSetup alt = w;
      alt.batch.micro_batch += 1;
      alt.batch.grad_accum = search.accum_for(alt.batch.micro_batch);
      Candidate c = search.evaluate(alt);
      RunnerUp ru{"micro-batch", std::to_string(alt.batch.micro_batch), c, ""};
      ru.why = c.fits ? fmt::format("{:+.0f}% throughput (modelled), global batch {}", 100 * (c.time.tokens_per_s / r.best.time.tokens_per_s - 1),
                                    c.global_batch)
                      : fmt::format("does not fit: {} > {} budget", gib(c.peak_bytes), gib(r.budget_bytes));
      r.runners_up.push_back(std::move(ru));
    }
    search.for_each_group([&](const TrainingSetup& t) {
      // Groups that differ from the winner in exactly one dimension.
      const bool same_zo = t.parallel.zero_stage == w.parallel.zero_stage && t.parallel.offload == w.parallel.offload;
      const bool same_p = t.precision == w.precision, same_a = t.attention == w.attention;
      const bool same_c = to_string(t.checkpointing) == to_string(w.checkpointing), same_o = t.optimizer == w.optimizer;
      const int diff = !same_zo + !same_p + !same_a + !same_c + !same_o;
      if (diff != 1) return;
      const std::string dim = !same_zo ? "ZeRO/offload" : !same_p ? "precision" : !same_a ? "attention" : !same_c ? "checkpointing" : "optimizer";
      add(dim, t);
    });
  } else {
    r.why_not = fmt::format("nothing fits the {} budget ({:.0f}% of {}): the smallest configuration tried needs {}", gib(r.budget_bytes),
                            100 * req.budget, gib(req.base.device.capacity_bytes), gib(std::max<int64_t>(0, smallest)));
    auto feasible = [&](const PlanRequest& q) {
      Search s(q);
      bool ok = false;
      s.for_each_group([&](TrainingSetup t) {
        if (ok) return;
        t.batch.micro_batch = 1;
        t.batch.grad_accum = s.accum_for(1);
        ok = s.peak(t) <= s.budget();
      });
      return ok;
    };
    std::vector<std::pair<std::string, DeviceSpec>> sorted = gpus;
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.capacity_bytes < b.second.capacity_bytes; });
    for (const auto& [name, dev] : sorted) {
      if (dev.capacity_bytes <= req.base.device.capacity_bytes) continue;
      PlanRequest q = req;
      q.base.device = dev;
      if (feasible(q)) {
        r.smallest_gpu = name;
        break;
      }
    }
    const int64_t mp = req.base.parallel.tensor_parallel * req.base.parallel.pipeline_parallel;
    for (int64_t n = req.base.parallel.num_gpus * 2; n <= 4096; n *= 2) {
      if (n % mp != 0 || n / mp > req.global_batch) continue;
      PlanRequest q = req;
      q.base.parallel.num_gpus = n;
      if (feasible(q)) {
        r.smallest_gpu_count = n;
        break;
      }
    }
  }
  r.timelines = search.timeline_count;
  r.compositions = search.compositions;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace memplan::planner
