// memplan's allocation sequence (estimator/sequence.h) against the allocations of real LibTorch
// steps on this CPU, event by event (issue 48: "a sequence with the right peak and the wrong order
// gives the wrong boundary under a cap"). The harness (calibrate/measure.cpp) runs the steps with
// the counting allocator recording every allocation and free (cpu_counter::start_recording); the
// sequence is unrolled for the same setup on CPU (harness_setup: its torch, its for-loop optimizer,
// no allocator rounding, no cuBLAS workspace). Both are cut to one step (step 1 creates the
// optimizer's states, the last is the steady one) and to the tensors of at least kMinBytes (the
// scalars a step makes -- the loss, its division, the optimizer's step counts -- are not in the
// sequence). Then:
//  - allocations are paired by a longest common subsequence of their sizes, in order: `claimed`
//    is the share of the sequence's allocations found in the real step in the same order, `covered`
//    the share of the real step's allocated bytes that the sequence names;
//  - over the paired tensors and the frees of tensors from before the step, the two streams of
//    allocations and frees are aligned again: `order` is the share of the sequence's events that
//    happen where the real step has them (1: the same interleaving of allocations and frees).
// Each kind of step the sequence models is a case here; a new kind comes with its case.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "calibrate/measure.h"
#include "estimator/sequence.h"
#include "tests/calibrate/matrix_cases.h"

using namespace memplan;

namespace {

constexpr int64_t kMinBytes = 1024;
constexpr int kSteps = 3;
// The bars, per case and step. What the allocator's answer rests on is held tightly: the bytes
// alive when the step begins (what the loop keeps across steps: gradients, logits, states) and
// the step's peak, over every event however small, within 0.5%. The event-level figures are
// ratchets at what the sequence reached when this test came (LibTorch 1.13 and 2.6 on this CPU:
// the HF loop's step 3 claimed 94.7%, order 75.6%, lifetimes 57.6%): the backward's per-op
// temporaries that no segment table lists (the recorded step has about 35% more allocations) and
// frees one op off are what is left; raise them as the segment tables follow the kernels closer.
constexpr double kLiveBar = 0.5;        // % of the recorded bytes
constexpr double kClaimedBar = 0.85;    // of the sequence's allocations, found in order
constexpr double kOrderBar = 0.68;      // of the sequence's events, where the recording has them
constexpr double kLifetimesBar = 0.30;  // of the freed bytes, freed in the same place

// One event with a process-wide tensor number (never reused) and the tensor's bytes.
struct Ev {
  bool alloc = true;
  int64_t tensor = 0;  // 0: allocated before the recording started
  int64_t bytes = 0;
};

std::vector<Ev> from_recording(const std::vector<calibrate::cpu_counter::Event>& in) {
  std::vector<Ev> out;
  out.reserve(in.size());
  for (const auto& e : in) out.push_back({e.alloc, e.id, e.bytes});
  return out;
}

// The sequence's events with its reused slots turned into tensor numbers, and its frees given
// their tensor's bytes.
std::vector<Ev> from_sequence(const AllocationSequence& seq) {
  std::vector<Ev> out;
  out.reserve(seq.events.size());
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> live;  // slot -> (tensor, bytes)
  int64_t next = 1;
  for (const AllocatorEvent& e : seq.events) {
    if (e.kind == AllocatorEvent::alloc) {
      live[e.id] = {next, e.bytes};
      out.push_back({true, next++, e.bytes});
    } else {
      const auto it = live.find(e.id);
      REQUIRE(it != live.end());
      out.push_back({false, it->second.first, it->second.second});
      live.erase(it);
    }
  }
  return out;
}

// The longest common subsequence of a and b under `same`: the index pairs, in order.
template <class T, class Same>
std::vector<std::pair<size_t, size_t>> lcs(const std::vector<T>& a, const std::vector<T>& b, Same same) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<uint32_t>> d(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;) d[i][j] = same(a[i], b[j]) ? d[i + 1][j + 1] + 1 : std::max(d[i + 1][j], d[i][j + 1]);
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0, j = 0; i < n && j < m;) {
    if (same(a[i], b[j])) {
      out.emplace_back(i++, j++);
    } else if (d[i + 1][j] >= d[i][j + 1]) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

struct Comparison {
  size_t seq_allocs = 0, real_allocs = 0, paired = 0;
  int64_t real_bytes = 0, paired_bytes = 0;
  size_t seq_events = 0, in_order = 0;
  // Lifetimes: each paired tensor's free (and each free of a tensor from before the step) placed
  // by the paired allocations before it, or "not in this step"; `lifetimes` frees of `frees`
  // fall in the same place on both sides, weighted by their bytes.
  int64_t frees_bytes = 0, lifetimes_bytes = 0;
  double claimed() const { return seq_allocs ? static_cast<double>(paired) / seq_allocs : 1.0; }
  double covered() const { return real_bytes ? static_cast<double>(paired_bytes) / real_bytes : 1.0; }
  double order() const { return seq_events ? static_cast<double>(in_order) / seq_events : 1.0; }
  double lifetimes() const { return frees_bytes ? static_cast<double>(lifetimes_bytes) / frees_bytes : 1.0; }
};

// Where each free of `evs` falls: for paired tensors (by pair number), the number of paired
// allocations before it (kNever: not freed in the window); and the frees of tensors from before
// the window, in order, with their bytes and place.
constexpr size_t kNever = SIZE_MAX;
struct Places {
  std::unordered_map<int64_t, size_t> paired;
  std::vector<std::pair<int64_t, size_t>> outside;  // (bytes, place)
};
Places places(const std::vector<Ev>& evs, const std::unordered_map<int64_t, int64_t>& pair,
              const std::unordered_map<int64_t, bool>& in_window) {
  Places p;
  size_t allocs = 0;
  for (const Ev& e : evs) {
    const auto it = pair.find(e.tensor);
    if (e.alloc) {
      if (it != pair.end()) {
        ++allocs;
        p.paired.emplace(it->second, kNever);
      }
    } else if (it != pair.end()) {
      p.paired[it->second] = allocs;
    } else if (!in_window.count(e.tensor)) {
      p.outside.emplace_back(e.bytes, allocs);
    }
  }
  return p;
}

// The events of [begin, end) of at least kMinBytes.
std::vector<Ev> window(const std::vector<Ev>& all, size_t begin, size_t end) {
  std::vector<Ev> out;
  for (size_t i = begin; i < end && i < all.size(); ++i)
    if (all[i].bytes >= kMinBytes) out.push_back(all[i]);
  return out;
}

Comparison compare(const std::vector<Ev>& seq, const std::vector<Ev>& real, bool verbose) {
  Comparison c;
  std::vector<Ev> sa, ra;  // the allocations
  for (const Ev& e : seq)
    if (e.alloc) sa.push_back(e);
  for (const Ev& e : real)
    if (e.alloc) ra.push_back(e);
  c.seq_allocs = sa.size();
  c.real_allocs = ra.size();
  for (const Ev& e : ra) c.real_bytes += e.bytes;
  const auto pairs = lcs(sa, ra, [](const Ev& x, const Ev& y) { return x.bytes == y.bytes; });
  c.paired = pairs.size();
  std::unordered_map<int64_t, int64_t> seq_pair, real_pair;  // tensor -> pair number (1, 2, ...)
  for (size_t k = 0; k < pairs.size(); ++k) {
    seq_pair[sa[pairs[k].first].tensor] = static_cast<int64_t>(k + 1);
    real_pair[ra[pairs[k].second].tensor] = static_cast<int64_t>(k + 1);
    c.paired_bytes += ra[pairs[k].second].bytes;
  }
  // The streams over paired tensors, plus frees of tensors allocated before the window (named by
  // their bytes: -bytes).
  std::unordered_map<int64_t, bool> seq_in_window, real_in_window;
  for (const Ev& e : sa) seq_in_window[e.tensor] = true;
  for (const Ev& e : ra) real_in_window[e.tensor] = true;
  struct Tok {
    bool alloc;
    int64_t what;
    bool operator==(const Tok& o) const { return alloc == o.alloc && what == o.what; }
  };
  auto stream = [](const std::vector<Ev>& evs, const std::unordered_map<int64_t, int64_t>& pair,
                   const std::unordered_map<int64_t, bool>& in_window) {
    std::vector<Tok> out;
    for (const Ev& e : evs) {
      if (const auto it = pair.find(e.tensor); it != pair.end()) {
        out.push_back({e.alloc, it->second});
      } else if (!e.alloc && !in_window.count(e.tensor)) {
        out.push_back({false, -e.bytes});
      }
    }
    return out;
  };
  // A run of frees with no allocation between them leaves the caching allocator in the same state
  // whatever their order (each free merges its block with free neighbours: the final blocks are
  // the same), so each run is compared as a set: sorted.
  auto runs_sorted = [](std::vector<Tok> t) {
    for (size_t i = 0; i < t.size();) {
      size_t j = i;
      while (j < t.size() && !t[j].alloc) ++j;
      std::sort(t.begin() + static_cast<std::ptrdiff_t>(i), t.begin() + static_cast<std::ptrdiff_t>(j),
                [](const Tok& x, const Tok& y) { return x.what < y.what; });
      i = j == i ? i + 1 : j;
    }
    return t;
  };
  const std::vector<Tok> ss = runs_sorted(stream(seq, seq_pair, seq_in_window)), rs = runs_sorted(stream(real, real_pair, real_in_window));
  c.seq_events = ss.size();
  const auto aligned = lcs(ss, rs, [](const Tok& x, const Tok& y) { return x == y; });
  c.in_order = aligned.size();
  {
    const Places ps = places(seq, seq_pair, seq_in_window), pr = places(real, real_pair, real_in_window);
    for (size_t k = 0; k < pairs.size(); ++k) {
      const int64_t bytes = sa[pairs[k].first].bytes;
      c.frees_bytes += bytes;
      if (ps.paired.at(static_cast<int64_t>(k + 1)) == pr.paired.at(static_cast<int64_t>(k + 1))) c.lifetimes_bytes += bytes;
    }
    // The frees of older tensors: paired by their sizes in order; one either side alone is a
    // tensor whose lifetime the sequence has wrong.
    const auto out = lcs(ps.outside, pr.outside, [](const auto& x, const auto& y) { return x.first == y.first; });
    int64_t all = 0;
    for (const auto& o : ps.outside) all += o.first;
    for (const auto& o : pr.outside) all += o.first;
    for (const auto& [i, j] : out) {
      all -= ps.outside[i].first;  // counted once, not on both sides
      if (ps.outside[i].second == pr.outside[j].second) c.lifetimes_bytes += ps.outside[i].first;
    }
    c.frees_bytes += all;
  }
  if (std::getenv("MEMPLAN_EVENTS_ORDER")) {  // the paired streams, side by side
    size_t i = 0, j = 0, k = 0;
    auto text = [&](const Tok& t, const std::vector<Ev>& evs, const std::unordered_map<int64_t, int64_t>& pair) {
      int64_t bytes = -t.what;
      if (t.what > 0)
        for (const Ev& e : evs)
          if (e.alloc && pair.count(e.tensor) && pair.at(e.tensor) == t.what) bytes = e.bytes;
      return std::string(t.alloc ? "alloc " : "free  ") + (t.what > 0 ? "#" + std::to_string(t.what) : "(before)") + " " + std::to_string(bytes);
    };
    while (i < ss.size() || j < rs.size()) {
      if (k < aligned.size() && aligned[k].first == i && aligned[k].second == j) {
        std::printf("    %-34s = %s\n", text(ss[i], seq, seq_pair).c_str(), text(rs[j], real, real_pair).c_str());
        ++i, ++j, ++k;
      } else if (i < ss.size() && (k >= aligned.size() || i < aligned[k].first)) {
        std::printf("    %-34s <\n", text(ss[i++], seq, seq_pair).c_str());
      } else {
        std::printf("    %-34s > %s\n", "", text(rs[j++], real, real_pair).c_str());
      }
    }
  }
  if (verbose) {
    size_t i = 0, j = 0;
    std::printf("    %-28s | %s\n", "sequence", "recorded");
    const auto& paired_at = pairs;
    size_t k = 0;
    while (i < sa.size() || j < ra.size()) {
      if (k < paired_at.size() && paired_at[k].first == i && paired_at[k].second == j) {
        std::printf("    alloc %12lld         = | alloc %12lld\n", (long long)sa[i].bytes, (long long)ra[j].bytes);
        ++i, ++j, ++k;
      } else if (i < sa.size() && (k >= paired_at.size() || i < paired_at[k].first)) {
        std::printf("    alloc %12lld  (only here)|\n", (long long)sa[i++].bytes);
      } else {
        std::printf("    %-28s | alloc %12lld (only here)\n", "", (long long)ra[j++].bytes);
      }
    }
  }
  return c;
}

// Bytes alive when event `at` is about to happen, and the most alive at once over [at, end):
// every event counted, however small.
struct Live {
  int64_t at_start = 0, peak = 0;
};
Live live(const std::vector<Ev>& evs, size_t at, size_t end) {
  Live l;
  int64_t now = 0;
  for (size_t i = 0; i < end && i < evs.size(); ++i) {
    if (i == at) l.at_start = l.peak = now;
    now += evs[i].alloc ? evs[i].bytes : -evs[i].bytes;
    if (i >= at) l.peak = std::max(l.peak, now);
  }
  return l;
}

double pct(int64_t a, int64_t b) { return b ? 100.0 * static_cast<double>(a - b) / static_cast<double>(b) : 0.0; }

struct EventCase {
  std::string name;
  TrainingSetup setup;
};

TrainingSetup base_setup() {
  TrainingSetup t;
  t.model = testing::tiny_llama(128, 2, 4, 2, 1024);
  t.precision = Precision::fp32;
  t.optimizer = OptimizerKind::adamw;
  t.batch.micro_batch = 2;
  t.batch.seq_len = 64;
  t.device.kind = DeviceKind::cpu;
  t.device.name = "cpu";
  return t;
}

std::vector<EventCase> event_cases() {
  std::vector<EventCase> out;
  auto add = [&](std::string name, auto change) {
    TrainingSetup t = base_setup();
    change(t);
    out.push_back({std::move(name), std::move(t)});
  };
  add("llama fp32 adamw (the HF loop)", [](TrainingSetup&) {});
  add("accumulation 3", [](TrainingSetup& t) { t.batch.grad_accum = 3; });
  add("full checkpointing, sgd-momentum", [](TrainingSetup& t) {
    t.checkpointing = *parse_checkpointing("full");
    t.optimizer = OptimizerKind::sgd_momentum;
  });
  add("lora q,v", [](TrainingSetup& t) {
    t.finetune.mode = FinetuneMode::lora;
    t.finetune.lora_rank = 8;
    t.finetune.lora_alpha = 16;
  });
  add("lora q,v with modules_to_save embed_tokens and lm_head", [](TrainingSetup& t) {
    t.finetune.mode = FinetuneMode::lora;
    t.finetune.lora_rank = 8;
    t.finetune.lora_alpha = 16;
    t.finetune.train_head = true;
    t.finetune.train_embeddings = true;
  });
  add("lora q,v, modules_to_save lm_head, pure bf16", [](TrainingSetup& t) {  // bf16 copy and states, fp32 adapters
    t.finetune.mode = FinetuneMode::lora;
    t.finetune.lora_rank = 8;
    t.finetune.lora_alpha = 16;
    t.finetune.train_head = true;
    t.precision = Precision::bf16;
  });
  // The loops other than the HF Trainer's that the sequence models.
  add("kept logits (nanoGPT, LitGPT)", [](TrainingSetup& t) { t.runtime.keep_logits = true; });
  add("kept logits, accumulation 2", [](TrainingSetup& t) {
    t.runtime.keep_logits = true;
    t.batch.grad_accum = 2;
  });
  add("zero_grad(set_to_none=False)", [](TrainingSetup& t) { t.runtime.zero_grad_set_to_none = false; });
  add("zero_grad(set_to_none=False), accumulation 2", [](TrainingSetup& t) {
    t.runtime.zero_grad_set_to_none = false;
    t.batch.grad_accum = 2;
  });
  add("zero_grad after the next forward (Lightning)", [](TrainingSetup& t) { t.runtime.zero_grad_after_forward = true; });
  add("zero_grad after the next forward, accumulation 2", [](TrainingSetup& t) {
    t.runtime.zero_grad_after_forward = true;
    t.batch.grad_accum = 2;
  });
  // Optimizers: transformers' Adafactor (the harness runs its step statement by statement), on a
  // batch small enough that the step's temporaries make the peak.
  auto step_peak = [](TrainingSetup& t, OptimizerKind o) {
    t.optimizer = o;
    t.batch.micro_batch = 1;
    t.batch.seq_len = 16;
  };
  add("adafactor", [&](TrainingSetup& t) { step_peak(t, OptimizerKind::adafactor); });
  add("adafactor with beta1, accumulation 2", [&](TrainingSetup& t) {
    step_peak(t, OptimizerKind::adafactor_momentum);
    t.batch.grad_accum = 2;
  });
  add("adafactor, pure bf16", [&](TrainingSetup& t) {  // fp32 copies of each gradient and parameter
    step_peak(t, OptimizerKind::adafactor);
    t.precision = Precision::bf16;
  });
  add("adafactor, lora q,v", [&](TrainingSetup& t) {
    step_peak(t, OptimizerKind::adafactor);
    t.finetune.mode = FinetuneMode::lora;
    t.finetune.lora_rank = 8;
    t.finetune.lora_alpha = 16;
  });
  return out;
}

}  // namespace

TEST_CASE("the allocation sequence against recorded CPU steps, event by event") {
  const char* only = std::getenv("MEMPLAN_EVENTS_ONLY");
  const bool verbose = std::getenv("MEMPLAN_EVENTS_VERBOSE") != nullptr;
  std::printf("\nLibTorch %s: the sequence's allocations and frees of >= %lld B against the recorded steps'\n",
              calibrate::torch_version().c_str(), static_cast<long long>(kMinBytes));
  std::printf("%-48s %4s  %8s %8s %7s %7s %7s %9s %8s %8s\n", "case", "step", "sequence", "recorded", "claimed", "covered", "order",
              "lifetimes", "at start", "peak");
  for (const EventCase& c : event_cases()) {
    if (only && c.name.find(only) == std::string::npos) continue;
    if (c.setup.precision == Precision::bf16 && !calibrate::cpu_supports_bf16()) {
      std::printf("%-48s skipped: no avx512_bf16 on this CPU\n", c.name.c_str());
      continue;
    }
    calibrate::MeasureOptions opt;
    opt.device = "cpu";
    opt.threads = 2;
    opt.steps = kSteps;
    opt.record_events = true;
    const calibrate::MeasureResult r = calibrate::measure(c.setup, opt);
    const TrainingSetup h = calibrate::harness_setup(c.setup, opt);
    CAPTURE(c.name);
    REQUIRE(step_sequence_not_modelled(h).empty());
    const AllocationSequence seq = allocation_sequence(h, kSteps);
    REQUIRE(seq.step_begins.size() == static_cast<size_t>(kSteps));
    REQUIRE(r.step_begins.size() == static_cast<size_t>(kSteps));
    const std::vector<Ev> s = from_sequence(seq), rec = from_recording(r.events);
    for (int step : {0, kSteps - 1}) {
      const size_t se = step + 1 < kSteps ? seq.step_begins[step + 1] : s.size();
      const size_t re = step + 1 < kSteps ? r.step_begins[step + 1] : rec.size();
      const Comparison cmp = compare(window(s, seq.step_begins[step], se), window(rec, r.step_begins[step], re), verbose);
      const Live ls = live(s, seq.step_begins[step], se), lr = live(rec, r.step_begins[step], re);
      std::printf("%-48s %4d  %8zu %8zu %6.1f%% %6.1f%% %6.1f%% %8.1f%% %+7.2f%% %+7.2f%%\n", c.name.c_str(), step + 1, cmp.seq_allocs,
                  cmp.real_allocs, 100 * cmp.claimed(), 100 * cmp.covered(), 100 * cmp.order(), 100 * cmp.lifetimes(),
                  pct(ls.at_start, lr.at_start), pct(ls.peak, lr.peak));
      CAPTURE(step);
      CHECK(std::abs(pct(ls.at_start, lr.at_start)) <= kLiveBar);
      CHECK(std::abs(pct(ls.peak, lr.peak)) <= kLiveBar);
      CHECK(cmp.claimed() >= kClaimedBar);
      CHECK(cmp.order() >= kOrderBar);
      CHECK(cmp.lifetimes() >= kLifetimesBar);
    }
  }
}
