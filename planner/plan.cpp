// The plan search (see plan.h). Memory is monotone in the micro-batch while the accumulation
// regime holds (tests/estimator/invariants_test.cpp), so each group of (sharding, precision,
// attention, checkpointing, optimizer, fine-tuning) finds its largest fitting micro-batch by
// binary search per regime and per tier budget, reusing the peaks it computed, and classifies
// every micro-batch of its range exactly; the activation timeline of a (micro-batch, sequence,
// precision, attention, checkpointing, fine-tuning, gradient regime) is simulated once and shared
// by every group.
#include "planner/plan.h"

#include "estimator/error.h"
#include "estimator/fields.h"
#include "estimator/text.h"
#include "profiles/profiles.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>

namespace memplan::planner {

double tier_fraction(const std::string& tier) {
  if (tier == "safe") return 0.85;
  if (tier == "balanced") return 0.90;
  if (tier == "aggressive") return 0.95;
  return 0;
}

const std::vector<std::string>& tier_names() {
  static const std::vector<std::string> t = {"safe", "balanced", "aggressive"};
  return t;
}

namespace {

// Modelled throughputs closer than this are the same to the planner: the step-time model is a
// roofline estimate (planner/throughput.cpp), not a measurement, so a smaller gain never buys a
// configuration that asks more of the user (simplicity() below).
constexpr double kThroughputResolution = 0.02;

// How much a configuration asks of the user's setup, compared lexicographically (smaller is
// simpler): host offload (PCIe traffic, host RAM, CPU Adam), then sharding (an engine or a
// wrapper to run it), then packages beyond PyTorch (flash-attn, bitsandbytes optimizers, Liger) that
// the user's own setup (`base`: the config and flags) does not use already, then how many of the
// user's own choices (attention, optimizer) it departs from: a file that trains with
// flash_attention_2 keeps it where SDPA is no faster.
bool bnb_optimizer(const TrainingSetup& s) {
  return s.optimizer == OptimizerKind::adamw_8bit || s.optimizer == OptimizerKind::paged_adamw ||
         s.optimizer == OptimizerKind::paged_adamw_8bit;
}

std::tuple<int, int, int, int> simplicity(const TrainingSetup& s, const TrainingSetup& base) {
  const Sharding sh = sharding_of(s);
  const int offload = offloads_params(sh.offload) ? 2 : sh.offload == Offload::optimizer ? 1 : 0;
  const int sharding = sh.fsdp != FsdpMode::none ? 3 : sh.zero > 0 ? sh.zero : sh.deepspeed ? 1 : 0;
  const bool flash = s.attention == AttentionImpl::flash && base.attention != AttentionImpl::flash;
  return {offload, sharding, flash + (bnb_optimizer(s) && !bnb_optimizer(base)) + (s.runtime.liger && !base.runtime.liger),
          (s.attention != base.attention) + (s.optimizer != base.optimizer)};
}

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

std::string global_batch_source(const PlanAsk& ask) {
  if (ask.global_batch) return "--global-batch";
  if (ask.config_global_batch) return "the config's global batch";
  if (ask.given_batch) return "micro-batch x accumulation x GPUs as given";
  return "";
}

PlanRequest make_request(const TrainingSetup& s, const PlanAsk& ask, const Calibration* calibration) {
  if (s.device.capacity_bytes <= 0)
    throw InputError(Where::at_flag(field(Target::gpu).flag), "plan needs a target", "pass --gpu PRESET (memplan gpus lists them) or --gpu-memory 40GiB");
  PlanRequest req;
  req.base = s;
  req.global_batch = ask.global_batch.value_or(ask.config_global_batch.value_or(ask.given_batch.value_or(0)));
  if (req.global_batch <= 0)
    throw InputError(Where::at_flag("--global-batch"), "plan needs the global batch (sequences per optimizer step, all GPUs)",
                     "pass --global-batch 256, set training.global_batch_size in the config, or give --micro-batch and --grad-accum");
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
  if (!ask.emit.empty()) {
    EmitFormat format = EmitFormat::memplan;
    if (!parse_emit_format(ask.emit, &format))
      throw InputError(Where::at_flag("--emit"), fmt::format("unknown format '{}'", ask.emit),
                       fmt::format("expected one of: {}", fmt::join(emit_format_names(), ", ")));
    req.format = format;
  }
  // An explicit flag fixes that dimension; everything else is searched.
  Constraints& c = req.constraints;
  if (!ask.optimizers.empty()) c.optimizers = parse_list<OptimizerKind>(ask.optimizers, "--optimizers", parse_optimizer, optimizer_names());
  else if (ask.optimizer_fixed) c.optimizers = {s.optimizer};
  if (!ask.precisions.empty()) c.precisions = parse_list<Precision>(ask.precisions, "--precisions", parse_precision, precision_names());
  else if (ask.precision_fixed) c.precisions = {s.precision};
  if (ask.attention_fixed) c.attentions = {s.attention};
  if (ask.checkpointing_fixed) c.checkpointings = {s.checkpointing};
  if (ask.zero_fixed) c.zero = s.parallel.zero_stage;
  if (ask.offload_fixed) c.offload = s.parallel.offload;
  if (ask.fsdp_fixed) c.fsdp = s.parallel.fsdp;
  c.no_deepspeed = ask.no_deepspeed;
  c.liger_fixed_by = ask.liger_fixed_by;
  c.allow_offload = !ask.no_offload;
  // LitGPT replaces the optimizer of a quantized run with bitsandbytes' PagedAdamW
  // (instantiate_bnb_optimizer, litgpt/utils.py @ v0.5.13).
  if (s.runtime.framework == Framework::litgpt && s.finetune.mode != FinetuneMode::full && s.finetune.base_quant != BaseQuant::none)
    c.optimizers = {OptimizerKind::paged_adamw};
  if (ask.max_micro_batch < 1)
    throw InputError(Where::at_flag("--max-micro-batch"), fmt::format("must be at least 1 (got {})", ask.max_micro_batch));
  // The search tries micro-batches up to this bound; 65,536 sequences per GPU per forward is far
  // beyond what any card holds at a useful sequence length.
  constexpr int64_t kMaxMicroBatch = 65536;
  if (ask.max_micro_batch > kMaxMicroBatch)
    throw InputError(Where::at_flag("--max-micro-batch"), fmt::format("must be at most {} (got {})", kMaxMicroBatch, ask.max_micro_batch),
                     "a micro-batch is the sequences one GPU runs per forward: a few to a few thousand");
  req.max_micro_batch = ask.max_micro_batch;
  req.calibration = calibration;
  req.space = plan_space(s, c);  // throws on contradictions, before any search
  return req;
}

namespace {

// Everything the search varies, for one group (all but the micro-batch).
struct Group {
  Sharding sharding;
  Precision precision;
  AttentionImpl attention;
  Checkpointing checkpointing;
  OptimizerKind optimizer;
  FinetuneMode finetune;
};

// Activation timelines by what they depend on within one plan() call (estimate.h Timeline): the
// searches over one card share them (the request's own and the feasibility searches over GPU
// counts, where only the data-parallel ranks, and so the accumulation, differ).
using TimelineKey = std::tuple<int64_t, int64_t, int, int64_t, int, int, bool, int, int64_t, bool, int, int64_t, double>;
struct TimelineCache {
  std::mutex mu;  // the searches of one plan() call run on several threads
  std::map<TimelineKey, Timeline> map;  // (a std::map: what it returns stays where it is)
};

}  // namespace

size_t search_threads() {
  if (const char* env = std::getenv("MEMPLAN_THREADS"); env && *env) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(env, &end, 10);
    if (!end || *end != '\0' || errno == ERANGE || v < 1 || v > kMaxSearchThreads)
      throw InputError(Where::at_flag("MEMPLAN_THREADS"),
                       fmt::format("must be a number of threads from 1 to {} (got '{}')", kMaxSearchThreads, memplan::profiles::clip(env)),
                       "unset it to search on every core");
    return static_cast<size_t>(v);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

// f(state, i) for i in [0, n) on up to search_threads() threads, each with its own state from
// make(), handed to finish() (one thread at a time) when the thread is done; an exception of f is
// rethrown here, the one of the lowest i.
template <class Make, class F, class Finish>
void for_each_index(size_t n, Make&& make, F&& f, Finish&& finish) {
  const size_t threads = std::min(n, search_threads());
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(n);
  std::mutex finishing;
  auto work = [&] {
    auto state = make();
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        f(state, i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(finishing);
    finish(state);
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

class Search {
 public:
  // timelines: a cache shared with other searches on the same card and model (null: its own).
  Search(const PlanRequest& req, const SearchSpace& space, TimelineCache* timelines = nullptr)
      : req_(req), space_(space), dp_(req.base.parallel.data_parallel()), timelines_(timelines ? timelines : &own_timelines_) {
    budgets_.push_back(req.budget);
    if (req.explain)
      for (const std::string& t : tier_names()) budgets_.push_back(tier_fraction(t));
    for (double f : budgets_) budget_bytes_.push_back(static_cast<int64_t>(f * static_cast<double>(req.base.device.capacity_bytes)));
    host_capacity_ = req.base.parallel.host_memory_bytes;
    // Accumulation 1 (gradients appear during backward) once G / (dp * b) rounds to 1.
    for (int64_t b = 1; b <= max_b(); ++b)
      if (accum_for(b) >= 2) split_ = b;
  }

  int64_t budget() const { return budget_bytes_[0]; }
  int64_t budget_at(size_t level) const { return budget_bytes_[level]; }
  size_t levels() const { return budgets_.size(); }
  int64_t host_budget(size_t level = 0) const {
    return host_capacity_ > 0 ? static_cast<int64_t>(budgets_[level] * static_cast<double>(host_capacity_)) : 0;
  }
  int64_t dp() const { return dp_; }

  int64_t accum_for(int64_t b) const {
    const double a = static_cast<double>(req_.global_batch) / static_cast<double>(dp_ * b);
    return std::max<int64_t>(1, std::llround(a));
  }
  int64_t max_b() const {
    return std::max<int64_t>(1, std::min(req_.max_micro_batch, (req_.global_batch + dp_ - 1) / dp_));
  }
  bool exact(int64_t b) const { return b * accum_for(b) * dp_ == req_.global_batch; }

  const ParamSummary& summary(const TrainingSetup& s) {
    const auto key = std::make_tuple(static_cast<int>(s.finetune.mode), s.finetune.lora_rank, static_cast<int>(s.finetune.base_quant));
    auto it = summaries_.find(key);
    if (it == summaries_.end()) it = summaries_.emplace(key, summarize_parameters(s)).first;
    return it->second;
  }

  struct Eval {
    int64_t peak = 0;
    int64_t host_per_node = 0;
  };

  // The candidate's timeline, cached by its key.
  const Timeline& timeline(const TrainingSetup& s, const ParamSummary& ps) {
    const TimelineKey key{s.batch.micro_batch, s.batch.seq_len, static_cast<int>(s.checkpointing.mode),
                          s.checkpointing.every_k, static_cast<int>(s.attention), static_cast<int>(s.precision),
                          gradients_persist(s), static_cast<int>(s.finetune.mode), s.finetune.lora_rank, s.runtime.liger,
                          static_cast<int>(s.runtime.loss), micro_batches_in_flight(s), step_temps_per_grad_byte(s, ps)};
    {
      std::lock_guard<std::mutex> lock(timelines_->mu);
      auto it = timelines_->map.find(key);
      if (it != timelines_->map.end()) return it->second;
    }
    Timeline made = activation_timeline(s, /*with_rows=*/false);  // (two threads may both make one: one is kept)
    std::lock_guard<std::mutex> lock(timelines_->mu);
    const auto [it, fresh] = timelines_->map.emplace(key, std::move(made));
    if (fresh) ++timeline_count;
    return it->second;
  }

  // Peak and host memory of a candidate.
  Eval evaluate_memory(const TrainingSetup& s) {
    const ParamSummary& ps = summary(s);
    const Timeline& t = timeline(s, ps);
    ++compositions;
    const MemoryBreakdown b = compose(s, t, req_.calibration, /*with_text=*/false, &ps);
    return {b.verdict_bytes(), b.host_bytes() * s.parallel.ranks_per_node()};
  }

  // What a candidate's peak is at least, and its host memory, without the allocation replay
  // (estimate.h verdict_bound); `exact` where the setup is not replayed.
  struct Bound {
    int64_t lower = 0;
    bool exact = false;
    int64_t host_per_node = 0;
  };
  Bound bound_memory(const TrainingSetup& s) {
    const ParamSummary& ps = summary(s);
    const VerdictBound v = verdict_bound(s, timeline(s, ps), req_.calibration, &ps);
    return {v.lower, v.exact, v.host_bytes * s.parallel.ranks_per_node()};
  }

  // Whether `s` fits budget level `level`: the replay only where the bound leaves it open.
  bool fits_level(const TrainingSetup& s, size_t level) {
    const Bound b = bound_memory(s);
    if (!host_ok(b.host_per_node, level) || b.lower > budget_at(level)) return false;
    return b.exact || evaluate_memory(s).peak <= budget_at(level);
  }

  bool host_ok(int64_t host_per_node, size_t level = 0) const {
    return host_capacity_ <= 0 || host_per_node <= host_budget(level);
  }

  // A candidate with its modelled time and global batch; memory left to the caller.
  Candidate priced(const TrainingSetup& s) {
    Candidate c;
    c.setup = s;
    c.time = step_time(s, summary(s));
    c.global_batch = checked_mul(checked_mul(s.batch.micro_batch, s.batch.grad_accum, "the global batch"), dp_, "the global batch");
    return c;
  }

  Candidate evaluate(const TrainingSetup& s, size_t level = 0) {
    Candidate c = priced(s);
    const Eval e = evaluate_memory(s);
    c.peak_bytes = e.peak;
    c.host_per_node_bytes = e.host_per_node;
    c.host_fits = host_ok(e.host_per_node, level);
    c.fits = c.peak_bytes <= budget_at(level) && c.host_fits;
    return c;
  }

  // Better: meets the global batch exactly, then more tokens/s, then less memory.
  int64_t batch_distance(const Candidate& c) const { return std::llabs(c.global_batch - req_.global_batch); }
  bool better(const Candidate& a, const Candidate& b) const {
    const bool ea = a.global_batch == req_.global_batch, eb = b.global_batch == req_.global_batch;
    if (ea != eb) return ea;
    if (!ea) {
      const int64_t da = batch_distance(a), db = batch_distance(b);
      if (da != db) return da < db;
    }
    if (a.time.tokens_per_s != b.time.tokens_per_s) return a.time.tokens_per_s > b.time.tokens_per_s;
    return a.peak_bytes < b.peak_bytes;
  }

  // The one to recommend among candidates from different groups: the best by `better`, unless a
  // simpler one (less offload, less sharding, fewer extra packages: simplicity()) meets the
  // global batch as well and is within the throughput model's resolution of it. The model is a
  // roofline estimate: a 0.3% modelled gain does not pay for DeepSpeed with parameter offload.
  // Nullptr when `cs` has nothing `keep` accepts.
  //
  // On one GPU, ZeRO has no other rank to partition over and saves memory only by moving it to the
  // host, which the HF Trainer's DeepSpeed guide offers "in GPU-limited environments ... to fit and
  // train really large models on a single GPU" (https://huggingface.co/docs/transformers/v4.49.0/deepspeed):
  // there a plan with ZeRO or offload is recommended only when nothing that keeps the step on the
  // GPU fits. The roofline prices the PCIe traffic and the CPU optimizer, not the engine's
  // partitioning hooks.
  static bool on_gpu(const Candidate& c) {
    const Sharding sh = sharding_of(c.setup);
    return sh.zero == 0 && sh.offload == Offload::none && sh.fsdp == FsdpMode::none;
  }
  // Whether pick() may keep only candidates that stay on the GPU (one data-parallel rank).
  bool gpu_only_rule() const { return req_.base.parallel.data_parallel() == 1; }

  // How pick() decided: the best by better() among those it considered, and whether it kept only
  // candidates that stay on the GPU.
  struct PickInfo {
    const Candidate* top = nullptr;
    bool gpu_only = false;
  };
  template <class Keep>
  const Candidate* pick(const std::vector<Candidate>& cs, Keep&& keep_any, PickInfo* info = nullptr) const {
    std::vector<const Candidate*> ps;
    ps.reserve(cs.size());
    for (const Candidate& c : cs) ps.push_back(&c);
    return pick(ps, keep_any, info);
  }
  // The same over candidates held elsewhere (no copies).
  template <class Keep>
  const Candidate* pick(const std::vector<const Candidate*>& cs, Keep&& keep_any, PickInfo* info = nullptr) const {
    bool gpu_only = false;
    if (gpu_only_rule())
      for (const Candidate* c : cs) gpu_only = gpu_only || (keep_any(*c) && on_gpu(*c));
    auto keep = [&](const Candidate& c) { return keep_any(c) && (!gpu_only || on_gpu(c)); };
    const Candidate* top = nullptr;
    for (const Candidate* c : cs)
      if (keep(*c) && (!top || better(*c, *top))) top = c;
    if (info) *info = {top, gpu_only};
    if (!top) return nullptr;
    const Candidate* choice = top;
    for (const Candidate* c : cs) {
      if (!keep(*c) || c->global_batch != top->global_batch) continue;
      if (c->time.tokens_per_s < top->time.tokens_per_s * (1 - kThroughputResolution)) continue;
      const auto sc = simplicity(c->setup, req_.base), sb = simplicity(choice->setup, req_.base);
      if (sc < sb || (sc == sb && better(*c, *choice))) choice = c;
    }
    return choice;
  }

  // What the bounds alone say of a group (best_of_group with `optimistic`): where a micro-batch's
  // bound is within a budget it is taken to fit, so each level's best is at least as good (by
  // better()) as the group's real best there, and a micro-batch whose bound is over the budget
  // does not fit. `decided`: no bound left the answer to the replay, so it is the group's exact one.
  struct Optimistic {
    bool decided = true;
    int64_t fitting = 0, host_short = 0;  // the counts best_of_group would add (exact only when decided)
  };

  // The best fitting candidate of one group (everything fixed but the micro-batch) at each budget
  // level, classifying every micro-batch of the range. best[level] stays empty when none fits.
  // `smallest_peak` gets the bound at micro-batch 1 (exact_peak() turns it into the peak); `host_short` counts micro-batches that fit
  // the GPU but not the node's RAM (level 0). `count_candidates` / `count_fitting`: add to those
  // counts. With `optimistic`, no replay is made: the bounds decide (see Optimistic), and the
  // fitting counts go there. Only the levels in `level_mask` (bit i: level i) are searched, the
  // others left empty; `memo` keeps the exact peaks between calls for the same group.
  std::vector<std::optional<Candidate>> best_of_group(TrainingSetup t, Bound* smallest_peak = nullptr, bool count_candidates = true,
                                                      bool count_fitting = true, Optimistic* optimistic = nullptr,
                                                      uint32_t level_mask = ~0u, std::map<int64_t, Eval>* memo = nullptr) {
    std::vector<std::optional<Candidate>> best(levels());
    // Each micro-batch's bound, and its exact peak once a budget needs it (the replay).
    std::map<int64_t, Eval> own;
    std::map<int64_t, Eval>& seen = memo ? *memo : own;
    std::map<int64_t, Bound> bounds;
    auto at = [&](int64_t b) -> TrainingSetup& {
      t.batch.micro_batch = b;
      t.batch.grad_accum = accum_for(b);
      return t;
    };
    auto eval_at = [&](int64_t b) -> const Eval& {
      auto it = seen.find(b);
      if (it != seen.end()) return it->second;
      return seen.emplace(b, evaluate_memory(at(b))).first->second;
    };
    auto bound_at = [&](int64_t b) -> const Bound& {
      auto it = bounds.find(b);
      if (it != bounds.end()) return it->second;
      return bounds.emplace(b, bound_memory(at(b))).first->second;
    };
    // Whether micro-batch b's peak is within `budget` (exactly as eval_at(b).peak <= budget).
    auto peak_within = [&](int64_t b, int64_t budget) {
      const Bound& bd = bound_at(b);
      if (bd.lower > budget) return false;
      if (bd.exact) return true;
      if (optimistic) return optimistic->decided = false, true;
      return eval_at(b).peak <= budget;
    };
    int64_t* const fitting_count = optimistic ? &optimistic->fitting : count_fitting ? &fitting : nullptr;
    int64_t* const host_short_count = optimistic ? &optimistic->host_short : count_fitting ? &host_short : nullptr;
    const int64_t hi_all = max_b(), split = split_;
    for (size_t level = 0; level < levels(); ++level) {
      if (!(level_mask >> level & 1u)) continue;
      auto fits_at = [&](int64_t b) { return host_ok(bound_at(b).host_per_node, level) && peak_within(b, budget_at(level)); };
      for (auto [lo, hi] : {std::pair<int64_t, int64_t>{1, split}, {split + 1, hi_all}}) {
        if (lo > hi) continue;
        if (level == 0 && count_candidates) candidates += hi - lo + 1;
        // Host memory grows with the micro-batch only through the data loader: monotone too.
        if (!fits_at(lo)) continue;
        int64_t good = lo, bad = hi + 1;
        if (fits_at(hi)) good = hi;
        else bad = hi;
        while (bad - good > 1) {
          const int64_t mid = good + (bad - good) / 2;
          (fits_at(mid) ? good : bad) = mid;
        }
        if (level == 0 && fitting_count) *fitting_count += good - lo + 1;
        for (int64_t b = lo; b <= good; ++b) {
          if (req_.exact_batch_only && !exact(b)) continue;
          t.batch.micro_batch = b;
          t.batch.grad_accum = accum_for(b);
          Candidate c = priced(t);
          c.fits = true;
          if (!best[level] || better(c, *best[level])) best[level] = std::move(c);
        }
      }
      if (best[level]) {
        const int64_t b = best[level]->setup.batch.micro_batch;
        const Bound& bd = bound_at(b);
        const Eval e = optimistic && !bd.exact ? Eval{bd.lower, bd.host_per_node} : eval_at(b);  // exact: no replay
        best[level]->peak_bytes = e.peak;
        best[level]->host_per_node_bytes = e.host_per_node;
        best[level]->host_fits = true;
      }
    }
    if (smallest_peak) *smallest_peak = bound_at(1);
    if (host_short_count && (level_mask & 1u) && host_capacity_ > 0) {  // GPU-fitting micro-batches (of those looked at) the node's RAM refuses
      std::vector<int64_t> looked;
      for (const auto& kv : bounds) looked.push_back(kv.first);
      for (const auto& kv : seen) looked.push_back(kv.first);
      std::sort(looked.begin(), looked.end());
      looked.erase(std::unique(looked.begin(), looked.end()), looked.end());
      for (int64_t b : looked)
        if (!host_ok(bound_at(b).host_per_node, 0) && peak_within(b, budget_at(0))) ++*host_short_count;
    }
    return best;
  }

  // The exact peak of a setup whose bound is `b`.
  int64_t exact_peak(const TrainingSetup& s, const Bound& b) { return b.exact ? b.lower : evaluate_memory(s).peak; }

  // Every group of the space, as a setup (micro-batch unset).
  template <class F>
  void for_each_group(F&& f) {
    for (const Sharding& sh : space_.shardings)
      for (FinetuneMode ft : space_.finetunes) {
        std::vector<Precision> seen;
        for (Precision asked : space_.precisions) {
          const Precision p = regime_under(asked, sh);
          if (std::find(seen.begin(), seen.end(), p) != seen.end()) continue;
          seen.push_back(p);
          for (AttentionImpl a : space_.attentions) {
            if (a == AttentionImpl::flash && p == Precision::fp32) continue;  // flash-attn runs fp16/bf16 only
            for (const Checkpointing& ck : space_.checkpointings)
              for (OptimizerKind o : space_.optimizers)
                for (const bool liger : ligers()) {
                  if (!combinable(sh, o)) continue;  // 8-bit/paged states never go with offload
                  TrainingSetup t = req_.base;
                  apply(t, sh);
                  t.precision = p;
                  t.attention = a;
                  t.checkpointing = ck;
                  t.optimizer = o;
                  set_finetune(t, ft);
                  set_liger(t, liger);
                  f(t, asked);
                }
          }
        }
      }
  }

  std::vector<bool> ligers() const { return space_.ligers.empty() ? std::vector<bool>{req_.base.runtime.liger} : space_.ligers; }

  // Liger turned on applies its fused linear cross-entropy too, as use_liger_kernel does
  // (apply_liger_kernel_to_*(fused_linear_cross_entropy=True), src/liger_kernel/transformers/
  // monkey_patch.py @ v0.5.10; build_setup's rule for --liger).
  void set_liger(TrainingSetup& t, bool liger) const {
    if (t.runtime.liger == liger) return;
    t.runtime.liger = liger;
    t.runtime.loss = liger ? LossImpl::fused_linear : req_.base.runtime.loss;
  }

  static void set_finetune(TrainingSetup& t, FinetuneMode ft) {
    if (t.finetune.mode == ft) return;
    t.finetune.mode = ft;
    t.finetune.base_quant = ft == FinetuneMode::qlora ? BaseQuant::nf4 : BaseQuant::none;
    if (ft != FinetuneMode::full && t.finetune.lora_rank < 1) t.finetune.lora_rank = 16;
  }

  int64_t candidates = 0, fitting = 0, timeline_count = 0, compositions = 0, host_short = 0;
  // Another search's counts added to these (the threads' searches of one plan() call).
  void add_counts(const Search& o) {
    candidates += o.candidates;
    fitting += o.fitting;
    timeline_count += o.timeline_count;
    compositions += o.compositions;
    host_short += o.host_short;
  }

 private:
  const PlanRequest& req_;
  const SearchSpace& space_;
  int64_t dp_;
  std::vector<double> budgets_;       // [0]: the request's; then safe, balanced, aggressive
  std::vector<int64_t> budget_bytes_;
  int64_t host_capacity_ = 0;
  int64_t split_ = 0;  // largest micro-batch whose accumulation is >= 2
  std::map<std::tuple<int, int64_t, int>, ParamSummary> summaries_;
  TimelineCache own_timelines_;
  TimelineCache* timelines_;
};

std::string describe_value(const std::string& dim, const TrainingSetup& s) {
  if (dim == "micro-batch") return std::to_string(s.batch.micro_batch);
  if (dim == "checkpointing") return to_string(s.checkpointing);
  if (dim == "attention") return to_string(s.attention);
  if (dim == "precision") return to_string(s.precision);
  if (dim == "optimizer") return to_string(s.optimizer);
  if (dim == "fine-tuning") return to_string(s.finetune.mode);
  if (dim == "kernels") return s.runtime.liger ? "Liger" : "PyTorch's";
  if (dim == "ZeRO/offload") return sharding_of(s).describe(s.parallel.data_parallel());
  return "?";
}

// Why a runner-up that fits is slower, in the terms of its dimension.
std::string slower_because(const std::string& dim, const TrainingSetup& alt, const TrainingSetup& best) {
  if (dim == "checkpointing")
    return alt.checkpointing.mode == CheckpointMode::none ? "fits only with a smaller micro-batch" : "recomputes activations";
  if (dim == "attention") return alt.attention == AttentionImpl::eager ? "materialises the s x s scores" : "slower kernel";
  if (dim == "ZeRO/offload") {
    if (alt.parallel.offload != Offload::none) return "host transfers and a CPU optimizer step";
    if (alt.parallel.fsdp != FsdpMode::none) return "parameter all-gathers per block";
    return alt.parallel.zero_stage > best.parallel.zero_stage ? "not needed: more communication" : "more memory per GPU";
  }
  if (dim == "precision") return alt.precision == Precision::fp32 ? "fp32 matmuls" : "different memory/speed trade";
  if (dim == "micro-batch") return "smaller matmuls";
  return "slower";
}

// The same configuration (micro-batch, accumulation and every searched dimension).
bool same_choice(const TrainingSetup& a, const TrainingSetup& b) {
  return a.batch.micro_batch == b.batch.micro_batch && a.batch.grad_accum == b.batch.grad_accum && sharding_of(a) == sharding_of(b) &&
         a.precision == b.precision && a.attention == b.attention && to_string(a.checkpointing) == to_string(b.checkpointing) &&
         a.optimizer == b.optimizer && a.finetune.mode == b.finetune.mode && a.runtime.liger == b.runtime.liger;
}

// The dimension in which two groups differ, or "" when they differ in none or several.
std::string differing_dimension(const TrainingSetup& t, const TrainingSetup& w) {
  const bool same_zo = sharding_of(t) == sharding_of(w);
  const bool same_p = t.precision == w.precision, same_a = t.attention == w.attention;
  const bool same_c = to_string(t.checkpointing) == to_string(w.checkpointing), same_o = t.optimizer == w.optimizer;
  const bool same_f = t.finetune.mode == w.finetune.mode, same_k = t.runtime.liger == w.runtime.liger;
  const int diff = !same_zo + !same_p + !same_a + !same_c + !same_o + !same_f + !same_k;
  if (diff != 1) return "";
  return !same_zo ? "ZeRO/offload" : !same_p ? "precision" : !same_a ? "attention" : !same_c ? "checkpointing" : !same_o ? "optimizer"
         : !same_f ? "fine-tuning" : "kernels";
}

// The note a group of precision `asked` searched as DeepSpeed's `regime` gives ("" when the same).
std::string regime_note(Precision asked, Precision regime) {
  if (asked == regime) return "";
  return fmt::format("{} runs as {} under DeepSpeed (its bf16/fp16 keeps fp32 master weights and states): the DeepSpeed candidates "
                     "use {}",
                     to_string(asked), to_string(regime), to_string(regime));
}

}  // namespace

PlanResult plan(const PlanRequest& req, const std::vector<std::pair<std::string, DeviceSpec>>& gpus) {
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult r;
  const SearchSpace space = req.space ? *req.space : plan_space(req.base, req.constraints);
  r.left_out = space.left_out;
  TimelineCache timelines;  // this card's: the request's search and the GPU-count searches
  Search search(req, space, &timelines);
  r.budget_bytes = search.budget();
  r.host_budget_bytes = search.host_budget();
  // The groups where nothing fits, at micro-batch 1 with their bounds: the smallest peak among them,
  // for why_not, is found only if nothing fits at all (lowest bound first, until the next bound is
  // above the least peak found).
  std::vector<std::pair<Search::Bound, TrainingSetup>> unfit;
  std::vector<std::vector<Candidate>> tier_fitting(tier_names().size());  // each group's best at each tier's budget
  std::vector<char> expressible;                                          // per entry of r.group_bests
  std::string first_unexpressed;
  // Each group's search on its own (the groups are independent), on several threads; the results
  // are then taken in the groups' order, as one thread would have.
  std::vector<std::pair<TrainingSetup, Precision>> groups;
  search.for_each_group([&](const TrainingSetup& t, Precision asked) { groups.emplace_back(t, asked); });
  struct GroupSearch {
    std::vector<std::optional<Candidate>> best;  // exact at the levels in `exact`
    Search::Bound p1;
    std::vector<std::optional<Candidate>> optimistic;  // what the bounds allow (lazy search)
    Search::Optimistic bounds;
    uint32_t exact = 0;                  // bit i: best[i] is the exact answer at budget level i
    std::map<int64_t, Search::Eval> seen;  // its exact peaks, kept between its searches
    bool exact_at(size_t level) const { return exact >> level & 1u; }
  };
  std::vector<GroupSearch> searched(groups.size());
  const uint32_t all_levels = (1u << search.levels()) - 1;
  auto make_worker = [&] { return std::make_unique<Search>(req, space, &timelines); };
  auto merge = [&](std::unique_ptr<Search>& w) { search.add_counts(*w); };
  // The groups' exact searches (their replays) at the levels asked (masks), on several threads.
  auto resolve = [&](const std::vector<std::pair<size_t, uint32_t>>& which) {
    for_each_index(
        which.size(), make_worker,
        [&](std::unique_ptr<Search>& w, size_t k) {
          GroupSearch& g = searched[which[k].first];
          const uint32_t mask = which[k].second & ~g.exact;
          if (!mask) return;
          const auto got = w->best_of_group(groups[which[k].first].first, nullptr, /*count_candidates=*/false, /*count_fitting=*/true,
                                            nullptr, mask, &g.seen);
          for (size_t level = 0; level < got.size(); ++level)
            if (mask >> level & 1u) g.best[level] = got[level];
          g.exact |= mask;
        },
        merge);
  };
  // Every group not yet exact at every level, to be searched at all of them.
  auto every_open = [&] {
    std::vector<std::pair<size_t, uint32_t>> open;
    for (size_t g = 0; g < groups.size(); ++g)
      if (searched[g].exact != all_levels) open.emplace_back(g, all_levels);
    return open;
  };
  if (req.resolve_all) {
    for_each_index(
        groups.size(), make_worker,
        [&](std::unique_ptr<Search>& w, size_t i) {
          searched[i].best = w->best_of_group(groups[i].first, &searched[i].p1);
          searched[i].exact = all_levels;
        },
        merge);
  } else {
    // First what the bounds say of every group, without a replay; a group they decide is done.
    for_each_index(
        groups.size(), make_worker,
        [&](std::unique_ptr<Search>& w, size_t i) {
          GroupSearch& g = searched[i];
          g.optimistic = w->best_of_group(groups[i].first, &g.p1, /*count_candidates=*/true, /*count_fitting=*/false, &g.bounds);
          if (g.bounds.decided) {  // (its optimistic best is then never read)
            g.best = std::move(g.optimistic);
            g.optimistic.clear();
            g.exact = all_levels;
          } else {
            g.best.assign(g.optimistic.size(), std::nullopt);
          }
        },
        merge);
    bool open = false;  // a group the bounds left to the replay
    for (const GroupSearch& g : searched) {
      if (g.exact) search.fitting += g.bounds.fitting, search.host_short += g.bounds.host_short;
      open = open || !g.exact;
    }
    if (open) {
      // Then, level by level, only the groups that could change what is printed, by their bounds'
      // best: a group whose optimistic best at a budget neither beats that pick's top, nor comes
      // within the throughput resolution of it (where a simpler plan would be chosen), nor could turn
      // the stay-on-the-GPU rule, cannot change the pick there, since its real best is no better
      // (Optimistic). The picks: the request's budget (and the best the --emit format expresses),
      // each tier's, and each DeepSpeed regime note; then the runners-up, which differ from the
      // winner in one dimension (at the request's budget). Four groups at a time, most promising
      // first, whatever the thread count, so that the counts printed do not depend on the machine.
      constexpr size_t kBatch = 4;
      const auto any = [](const Candidate&) { return true; };
      auto expressible_setup = [&](const Candidate& c) { return !req.format || can_express(*req.format, c.setup, nullptr); };
      const size_t pick_levels = req.explain ? search.levels() : 1;
      auto note_of = [&](size_t g) { return regime_note(groups[g].second, groups[g].first.precision); };
      // The groups that could change the pick at `level` among those `keep` accepts: their bit set.
      auto could_change = [&](size_t level, const auto& keep, std::vector<uint32_t>& needed) {
        std::vector<const Candidate*> known;
        for (const GroupSearch& g : searched)
          if (g.exact_at(level) && g.best[level] && keep(*g.best[level])) known.push_back(&*g.best[level]);
        Search::PickInfo info;
        search.pick(known, keep, &info);
        const Candidate* top = info.top;
        const bool gpu_only = info.gpu_only;
        for (size_t g = 0; g < searched.size(); ++g) {
          const GroupSearch& gs = searched[g];
          if (gs.exact_at(level) || !gs.optimistic[level]) continue;
          const Candidate& o = *gs.optimistic[level];
          if (!keep(o)) continue;
          bool could = !top;
          if (search.gpu_only_rule() && !gpu_only && Search::on_gpu(o)) could = true;
          if (search.gpu_only_rule() && gpu_only && !Search::on_gpu(o)) continue;
          if (top && !search.better(*top, o)) could = true;
          if (top && search.batch_distance(o) <= search.batch_distance(*top) && o.time.tokens_per_s >= top->time.tokens_per_s * (1 - kThroughputResolution)) could = true;
          if (could) needed[g] |= 1u << level;
        }
      };
      auto resolve_needed = [&](const std::vector<uint32_t>& needed) {
        std::vector<std::pair<size_t, uint32_t>> which;
        for (size_t g = 0; g < needed.size(); ++g)
          if (needed[g]) which.emplace_back(g, needed[g]);
        if (which.empty()) return false;
        auto first_level = [](uint32_t m) { return static_cast<size_t>(__builtin_ctz(m)); };
        std::stable_sort(which.begin(), which.end(), [&](const auto& a, const auto& b) {
          const size_t la = first_level(a.second), lb = first_level(b.second);
          if (la != lb) return la < lb;
          const auto &oa = searched[a.first].optimistic[la], &ob = searched[b.first].optimistic[lb];
          if (bool(oa) != bool(ob)) return bool(oa);
          return oa && search.better(*oa, *ob);
        });
        if (which.size() > kBatch) which.resize(kBatch);
        resolve(which);
        return true;
      };
      for (;;) {
        std::vector<uint32_t> needed(groups.size(), 0);
        for (size_t level = 0; level < pick_levels; ++level) could_change(level, any, needed);
        if (req.format) could_change(0, expressible_setup, needed);
        // A DeepSpeed regime note is printed where a group of that regime fits.
        std::vector<std::string> noted;
        for (size_t g = 0; g < groups.size(); ++g)
          if (searched[g].exact_at(0) && searched[g].best[0] && !note_of(g).empty()) noted.push_back(note_of(g));
        for (size_t g = 0; g < groups.size(); ++g)
          if (!searched[g].exact_at(0) && !note_of(g).empty() && searched[g].optimistic[0] &&
              std::find(noted.begin(), noted.end(), note_of(g)) == noted.end())
            needed[g] |= 1u;
        if (!resolve_needed(needed)) break;
      }
      // Nothing fits (why_not's smallest peak and host shortfall are over every group), or the format
      // cannot express the overall best (its note names the first group it cannot express): every group.
      std::vector<const Candidate*> known;
      for (const GroupSearch& g : searched)
        if (g.exact_at(0) && g.best[0]) known.push_back(&*g.best[0]);
      const Candidate* overall = search.pick(known, any);
      const Candidate* chosen = search.pick(known, expressible_setup);
      std::vector<std::pair<size_t, uint32_t>> rest;
      if (!overall || (req.format && (!chosen || !same_choice(overall->setup, chosen->setup)))) {
        rest = every_open();
      } else if (req.explain) {
        for (size_t g = 0; g < groups.size(); ++g)
          if (!searched[g].exact_at(0) && !differing_dimension(groups[g].first, chosen->setup).empty()) rest.emplace_back(g, 1u);
      }
      if (!rest.empty()) resolve(rest);
      // The bounds' promise kept: no group's real best beats its optimistic one at any budget (if one
      // did, a group left out might have won; then every group is searched at every budget).
      bool kept = true;
      for (const GroupSearch& g : searched)
        for (size_t level = 0; !g.bounds.decided && level < g.best.size(); ++level)
          if (g.exact_at(level) && g.best[level] && (!g.optimistic[level] || search.better(*g.best[level], *g.optimistic[level]))) kept = false;
      if (!kept) resolve(every_open());
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::optional<Candidate>>& best = searched[g].best;
    for (size_t i = 0; i + 1 < best.size(); ++i)
      if (searched[g].exact_at(i + 1) && best[i + 1]) tier_fitting[i].push_back(*best[i + 1]);
    if (!searched[g].exact_at(0)) {
      r.undecided += searched[g].bounds.fitting;
      continue;
    }
    const TrainingSetup& t = groups[g].first;
    const Precision asked = groups[g].second;
    Search::Bound& p1 = searched[g].p1;
    if (!best[0]) {
      TrainingSetup one = t;
      one.batch.micro_batch = 1;
      one.batch.grad_accum = search.accum_for(1);
      unfit.emplace_back(p1, std::move(one));
      continue;
    }
    Candidate& c = *best[0];
    if (const std::string note = regime_note(asked, t.precision);
        !note.empty() && std::find(r.regime_notes.begin(), r.regime_notes.end(), note) == r.regime_notes.end())
      r.regime_notes.push_back(note);
    std::string why;
    const bool can = !req.format || can_express(*req.format, c.setup, &why);
    if (!can && first_unexpressed.empty()) first_unexpressed = why;
    r.group_bests.push_back(c);
    expressible.push_back(can);
  }
  r.candidates = search.candidates;
  r.fitting = search.fitting;
  r.host_short = search.host_short;
  const auto any = [](const Candidate&) { return true; };
  std::optional<Candidate> overall;
  if (const Candidate* o = search.pick(r.group_bests, any)) overall = *o;
  if (const Candidate* b = search.pick(r.group_bests, [&](const Candidate& c) { return bool(expressible[&c - r.group_bests.data()]); })) {
    r.best = *b;
    r.found = true;
  }
  // Fastest first, the recommendation first of all (fit lists the options in this order).
  std::stable_sort(r.group_bests.begin(), r.group_bests.end(), [&](const Candidate& a, const Candidate& b) {
    const bool ra = r.found && same_choice(a.setup, r.best.setup), rb = r.found && same_choice(b.setup, r.best.setup);
    if (ra != rb) return ra;
    return search.better(a, b);
  });
  for (size_t i = 0; req.explain && i < tier_fitting.size(); ++i) {
    TierPlan tp;
    tp.tier = tier_names()[i];
    tp.fraction = tier_fraction(tp.tier);
    tp.budget_bytes = search.budget_at(i + 1);
    const Candidate* b = search.pick(tier_fitting[i], any);
    tp.found = b != nullptr;
    if (tp.found) tp.best = *b;
    r.tiers.push_back(std::move(tp));
  }
  if (overall && r.found && !same_choice(overall->setup, r.best.setup)) {
    r.unrestricted = overall;
    const double loss = 1.0 - r.best.time.tokens_per_s / overall->time.tokens_per_s;
    r.format_note = fmt::format("--emit {} cannot express the overall best ({}); this is the best it can express, {:.0f}% slower "
                                "(modelled)",
                                emit_format_name(*req.format), first_unexpressed, 100 * loss);
  } else if (overall && !r.found) {
    r.unrestricted = overall;
    r.format_note = fmt::format("--emit {} cannot express any configuration that fits ({})", emit_format_name(*req.format), first_unexpressed);
  }

  if (r.found && req.explain) {
    if (r.best.global_batch != req.global_batch)
      r.batch_note = fmt::format("global batch {} is not reachable exactly: {} x {} x {} = {} (nearest)", req.global_batch,
                                 r.best.setup.batch.micro_batch, r.best.setup.batch.grad_accum, search.dp(), r.best.global_batch);
    // Runners-up: change one dimension of the winner at a time.
    const TrainingSetup& w = r.best.setup;
    // `best`: the group's search (best_of_group) made above.
    auto add = [&](const std::string& dim, TrainingSetup alt, const std::vector<std::optional<Candidate>>& best) {
      RunnerUp ru;
      ru.dimension = dim;
      ru.value = describe_value(dim, alt);
      Candidate c;
      if (best[0]) {
        c = *best[0];
        const double loss = 1.0 - c.time.tokens_per_s / r.best.time.tokens_per_s;
        if (std::fabs(loss) < kThroughputResolution)
          ru.why = fmt::format("same modelled throughput (within {:.0f}%); peak {} vs {}", 100 * kThroughputResolution, text::fixed_gib(c.peak_bytes),
                               text::fixed_gib(r.best.peak_bytes));
        else
          ru.why = fmt::format("{:+.0f}% throughput (modelled): {}", -100 * loss, slower_because(dim, c.setup, w));
        if (c.setup.batch.micro_batch != w.batch.micro_batch && dim != "micro-batch")
          ru.why += fmt::format(" (best at micro-batch {})", c.setup.batch.micro_batch);
        std::string why;
        if (req.format && !can_express(*req.format, c.setup, &why)) ru.why += fmt::format("; --emit {} cannot express it", emit_format_name(*req.format));
      } else {
        alt.batch.micro_batch = 1;
        alt.batch.grad_accum = search.accum_for(1);
        c = search.evaluate(alt);
        ru.why = c.peak_bytes > r.budget_bytes
                     ? fmt::format("does not fit: even micro-batch 1 needs {} > {} budget", text::fixed_gib(c.peak_bytes), text::fixed_gib(r.budget_bytes))
                     : fmt::format("does not fit the node: needs {} of host RAM > {} budget", text::fixed_gib(c.host_per_node_bytes),
                                   text::fixed_gib(r.host_budget_bytes));
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
               : c.peak_bytes > r.budget_bytes ? fmt::format("does not fit: {} > {} budget", text::fixed_gib(c.peak_bytes), text::fixed_gib(r.budget_bytes))
                                               : fmt::format("does not fit the node: {} of host RAM > {} budget", text::fixed_gib(c.host_per_node_bytes),
                                                             text::fixed_gib(r.host_budget_bytes));
      r.runners_up.push_back(std::move(ru));
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::string dim = differing_dimension(groups[g].first, w);
      if (!dim.empty()) add(dim, groups[g].first, searched[g].best);
    }
  } else if (!overall && req.explain) {
    int64_t smallest = -1;
    std::sort(unfit.begin(), unfit.end(), [](const auto& a, const auto& b) { return a.first.lower < b.first.lower; });
    for (const auto& [bound, setup] : unfit) {
      if (smallest >= 0 && bound.lower >= smallest) break;
      const int64_t p = search.exact_peak(setup, bound);
      if (smallest < 0 || p < smallest) smallest = p;
    }
    r.why_not = fmt::format("nothing fits the {} budget ({:.0f}% of {}): the smallest configuration tried needs {}", text::fixed_gib(r.budget_bytes),
                            100 * req.budget, text::fixed_gib(req.base.device.capacity_bytes), text::fixed_gib(std::max<int64_t>(0, smallest)));
    if (r.host_short > 0)
      r.why_not += fmt::format("; {} configurations fit the GPU but need more host RAM than the node's {} budget", r.host_short,
                               text::fixed_gib(r.host_budget_bytes));
    // same_card: q differs from req in the number of GPUs only, so the timelines carry over.
    auto feasible = [&](const PlanRequest& q, bool same_card) {
      SearchSpace sp;
      try {
        sp = plan_space(q.base, q.constraints);  // another card runs other things
      } catch (const InputError&) {
        return false;
      }
      Search s(q, sp, same_card ? &timelines : nullptr);
      bool ok = false;
      s.for_each_group([&](TrainingSetup t, Precision) {
        if (ok) return;
        t.batch.micro_batch = 1;
        t.batch.grad_accum = s.accum_for(1);
        ok = s.fits_level(t, 0);
      });
      return ok;
    };
    std::vector<std::pair<std::string, DeviceSpec>> sorted = gpus;
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.capacity_bytes < b.second.capacity_bytes; });
    for (const auto& [name, dev] : sorted) {
      if (dev.capacity_bytes <= req.base.device.capacity_bytes) continue;
      PlanRequest q = req;
      q.base.device = dev;
      if (feasible(q, /*same_card=*/false)) {
        r.smallest_gpu = name;
        break;
      }
    }
    const int64_t mp = req.base.parallel.tensor_parallel * req.base.parallel.pipeline_parallel;
    for (int64_t n = req.base.parallel.num_gpus * 2; n <= 4096; n *= 2) {
      if (n % mp != 0 || n / mp > req.global_batch) continue;
      PlanRequest q = req;
      q.base.parallel.num_gpus = n;
      if (feasible(q, /*same_card=*/true)) {
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

// ---- the per-memory-size table ---------------------------------------------------------------

std::vector<std::string> optimisations(const TrainingSetup& p, const TrainingSetup& base) {
  std::vector<std::string> out;
  switch (p.precision) {
    case Precision::amp_bf16: out.emplace_back("mixed precision (bf16 autocast)"); break;
    case Precision::amp_fp16: out.emplace_back("mixed precision (fp16 autocast)"); break;
    case Precision::mixed_bf16: out.emplace_back("mixed precision (DeepSpeed bf16)"); break;
    case Precision::mixed_fp16: out.emplace_back("mixed precision (DeepSpeed fp16)"); break;
    case Precision::bf16: out.emplace_back("pure bf16"); break;
    case Precision::fp16: out.emplace_back("pure fp16"); break;
    case Precision::fp32: break;
  }
  if (p.checkpointing.mode != CheckpointMode::none) out.push_back(fmt::format("gradient checkpointing ({})", to_string(p.checkpointing)));
  if (p.attention == AttentionImpl::flash) out.emplace_back("flash attention");
  if (p.attention == AttentionImpl::sdpa && base.attention == AttentionImpl::eager) out.emplace_back("SDPA attention");
  if (p.optimizer != base.optimizer) out.emplace_back(fmt::format("{} optimizer", to_string(p.optimizer)));
  const Sharding sh = sharding_of(p);
  if (sh.fsdp != FsdpMode::none || sh.zero > 0 || sh.offload != Offload::none) out.push_back(sh.describe(p.parallel.data_parallel()));
  if (p.finetune.mode != FinetuneMode::full)
    out.push_back(fmt::format("{} r={}", p.finetune.mode == FinetuneMode::qlora ? "QLoRA" : "LoRA", p.finetune.lora_rank));
  return out;
}

std::vector<TableRow> plan_table(const PlanRequest& req, const std::vector<std::pair<std::string, DeviceSpec>>& devices) {
  std::vector<TableRow> rows;
  for (const auto& [label, device] : devices) {
    PlanRequest q = req;
    q.base.device = device;
    q.space = plan_space(q.base, q.constraints);
    rows.push_back({label, device, plan(q)});
  }
  return rows;
}

std::string table_markdown(const std::vector<TableRow>& rows, const TrainingSetup& base) {
  std::string out = "| GPU memory | Micro-batch | Gradient accumulation | Other optimizations | Peak |\n";
  out += "| ---------- | ----------- | --------------------- | ------------------- | ---- |\n";
  for (const TableRow& row : rows) {
    const PlanResult& r = row.result;
    if (!r.found) {
      out += fmt::format("| {} | - | - | does not fit: {} | - |\n", row.label,
                         r.why_not.empty() ? r.format_note : r.why_not.substr(0, r.why_not.find(':')));
      continue;
    }
    const TrainingSetup& s = r.best.setup;
    const std::vector<std::string> opts = optimisations(s, base);
    out += fmt::format("| {} | {} | {} | {} | {} ({:.0f}%) |\n", row.label, s.batch.micro_batch, s.batch.grad_accum,
                       opts.empty() ? std::string("None") : fmt::format("{}", fmt::join(opts, " + ")), text::fixed_gib(r.best.peak_bytes),
                       100.0 * static_cast<double>(r.best.peak_bytes) / static_cast<double>(row.device.capacity_bytes));
  }
  return out;
}

}  // namespace memplan::planner
