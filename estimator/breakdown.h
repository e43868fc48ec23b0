// MemoryBreakdown: the one output. Named terms (bytes, formula text, source) per phase of a
// training step; the peak is derived from the phases, never stored beside them.
#pragma once

#include "estimator/checked.h"

#include <array>
#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#include "estimator/model.h"

namespace memplan {

// Per-GPU terms, in the order they are reported. The names are the JSON keys, the table rows
// and the names `explain` and calibration reports use.
enum class Term {
  weights,             // parameters (and autocast's half copies while they are alive; a DPO reference model's copy)
  gradients,           // parameter gradients
  master_weights,      // fp32 master copy (mixed precision)
  optimizer_states,    // Adam moments, momentum, factored second moments, ...
  activations,         // tensors saved for backward (per layer, per saved tensor)
  logits_and_loss,     // logits, log-probabilities and their gradients
  transient,           // activation gradients, kernel and optimizer temporaries
  workspace,           // cuBLAS/cuBLASLt workspace
  cuda_context,        // CUDA context and loaded kernels (outside the allocator)
  allocator_overhead,  // caching-allocator rounding and fragmentation
  comm_buffers,        // DDP buckets, ZeRO reduce/all-gather buckets and prefetch
  count                // not a term: how many there are (a new term goes above it, its name below)
};
constexpr int kNumTerms = static_cast<int>(Term::count);
// The names, indexed by Term: a term without one leaves an empty slot and fails to compile.
inline constexpr std::array<const char*, kNumTerms> kTermNames = {
    "weights",   "gradients", "master_weights", "optimizer_states", "activations",       "logits_and_loss",
    "transient", "workspace", "cuda_context",   "allocator_overhead", "comm_buffers"};
template <size_t N>
constexpr bool all_named(const std::array<const char*, N>& names) {
  for (const char* n : names)
    if (n == nullptr || *n == '\0') return false;
  return true;
}
static_assert(all_named(kTermNames), "every Term needs its name in kTermNames");
const char* term_name(Term t);
Term term_at(int i);

// The groups calibration scales: what grows with the tokens of a step (activation_scale) and
// the model states (model_state_scale). The other four terms are per-device constants.
constexpr std::array<Term, 3> kDynamicTerms = {Term::activations, Term::logits_and_loss, Term::transient};
constexpr std::array<Term, 4> kModelStateTerms = {Term::weights, Term::gradients, Term::master_weights,
                                                  Term::optimizer_states};
template <size_t N>
int64_t sum_of(const std::array<int64_t, kNumTerms>& bytes, const std::array<Term, N>& terms) {
  int64_t s = 0;
  for (Term t : terms) s = checked_add(s, bytes[static_cast<int>(t)], "a sum of memory terms");
  return s;
}

enum class Phase {
  forward,
  backward,
  optimizer_step,
  count  // not a phase: how many there are
};
constexpr int kNumPhases = static_cast<int>(Phase::count);
inline constexpr std::array<const char*, kNumPhases> kPhaseNames = {"forward", "backward", "optimizer_step"};
static_assert(all_named(kPhaseNames), "every Phase needs its name in kPhaseNames");
const char* phase_name(Phase p);

struct TermText {
  std::string formula;  // the formula with this setup's numbers
  std::string source;   // where the formula comes from
};

// The live bytes per term at one phase's peak moment.
struct PhaseState {
  Phase phase = Phase::forward;
  std::array<int64_t, kNumTerms> bytes{};
  std::string at;  // the op or moment of the peak ("layer 31 backward: softmax")
  int64_t total() const;
  int64_t operator[](Term t) const { return bytes[static_cast<int>(t)]; }
  // The three figures a GPU reports: the tensors (the caching allocator's allocated bytes),
  // plus the allocator's overhead (its reserved bytes), plus what lives outside the allocator
  // (the device figure: total(), to hold against cudaMemGetInfo's free memory).
  int64_t allocated() const { return total() - (*this)[Term::cuda_context] - (*this)[Term::allocator_overhead]; }
  int64_t reserved() const { return total() - (*this)[Term::cuda_context]; }
};

// A host-memory term of one GPU rank (its process and its data-loader workers). A node holds one
// per rank on it (Parallelism::ranks_per_node).
struct HostTerm {
  std::string name;  // offloaded_optimizer_states, dataloader_prefetch, ...
  int64_t bytes = 0;
  std::string formula;
  std::string source;
  bool pinned = false;  // page-locked (cudaHostAlloc): cannot be swapped out
};

// One saved tensor of one layer kind, for the per-layer table (explain, --json).
struct SavedTensor {
  std::string layer;  // "layer", "moe layer", "head and loss", "embedding"
  std::string op;     // the op that saves it
  int64_t bytes = 0;
  std::string category;  // activation | loss | weight_copy
};

struct MemoryBreakdown {
  std::array<TermText, kNumTerms> text;
  std::vector<PhaseState> phases;  // forward, backward, optimizer_step
  std::vector<HostTerm> host;
  std::vector<SavedTensor> saved_per_layer;
  ParameterCounts params;
  std::vector<std::string> notes;  // approximations and assumptions that apply to this setup
  bool calibrated = false;
  std::string calibration;  // profile file and device when calibrated
  // The allocator_overhead term came from replaying the step's allocation sequence through the
  // caching-allocator model (replay.cpp replay_allocator), not from the percentage formula.
  bool allocator_replayed = false;
  // On CUDA without the replay: why the setup is not replayed (the allocator_overhead term is then
  // the percentage formula's guess, and the verdict says so). Empty when replayed or not CUDA.
  std::string replay_why_not;
  // What the verdict holds against the card, where the replay found it below the peak: the step
  // runs in less memory than the allocator caches when it has room (a failed cudaMalloc frees the
  // cached blocks and retries), so with the replay the least device memory known to run it is
  // the context plus the smallest allocator limit tried that the step ran in (the target's share,
  // then the card's; replay.cpp replay_allocator). -1: the peak itself.
  int64_t needed_bytes = -1;
  // Whether the step runs on the card at all (the replay capped at the memory the allocator can
  // get): 1 runs, 0 runs out, -1 not replayed (the verdict then holds the peak to the card).
  int runs = -1;
  // Where the ranks of a data-parallel job hold different amounts (torch's ZeroRedundancyOptimizer
  // shares): every rank's peak, consecutive ranks that hold the same in one entry, the breakdown
  // being the worst rank's (`worst_rank`, and why). Empty where every rank holds the same.
  struct RankPeak {
    int64_t rank = 0;       // the first rank of the entry
    int64_t last_rank = 0;  // its last (inclusive)
    int64_t peak_bytes = 0;
    std::array<int64_t, kNumPhases> phase_bytes{};  // each phase's total on this rank
  };
  std::vector<RankPeak> ranks;
  int64_t worst_rank = -1;
  std::string worst_rank_why;
  int64_t verdict_bytes() const { return needed_bytes >= 0 ? needed_bytes : peak_bytes(); }

  // The phase with the largest total (the first such phase on ties).
  const PhaseState& peak() const;
  int64_t peak_bytes() const { return peak().total(); }
  Phase peak_phase() const { return peak().phase; }
  const PhaseState& at(Phase p) const;  // InternalError when the breakdown has no such phase
  // torch.cuda.max_memory_allocated()'s figure: the tensors' largest total over the phases (its
  // phase may differ from the device peak's).
  int64_t allocated_peak_bytes() const;
  int64_t host_bytes() const;         // host terms of one GPU rank
  int64_t host_pinned_bytes() const;  // the pinned part of them
};

// The memory bands (Thresholds, setup.h), the one definition the verdicts, `memplan watch`, its
// monitor log and the Python monitor share: a fraction u of the device's memory is
//   normal        u <= target           above_target  target < u < warning
//   warning       warning <= u < critical   critical  critical <= u < emergency
//   emergency     emergency <= u <= 1       out_of_memory  u > 1
enum class Band { normal, above_target, warning, critical, emergency, out_of_memory, count };
Band band_of(double utilization, const Thresholds& t);
const char* to_string(Band b);  // "normal", "above_target", ...
std::optional<Band> parse_band(const std::string& name);

// Where a peak sits against the device's memory bands.
struct Verdict {
  bool known = false;        // false when the device capacity is unknown
  bool fits = false;         // needed <= target * capacity (needed: MemoryBreakdown::verdict_bytes)
  bool runs = false;         // the step runs on the card at all (needed <= capacity, or the replay ran there)
  double utilization = 0;    // needed / capacity
  int64_t headroom_bytes = 0;  // target * capacity - needed (negative when over)
  std::string status;  // the band of `utilization` (band_of), by name
};
Verdict judge(const MemoryBreakdown& b, const TrainingSetup& s);

// Host memory per node against the node's RAM (Parallelism::host_memory_bytes).
struct HostVerdict {
  int64_t per_gpu_bytes = 0;   // one rank's host terms
  int64_t pinned_per_gpu_bytes = 0;
  int64_t ranks_per_node = 1;
  int64_t per_node_bytes = 0;  // per_gpu_bytes x ranks_per_node
  int64_t capacity_bytes = 0;  // host RAM per node (0: unknown)
  bool known = false;          // capacity known
  bool fits = true;            // per_node_bytes <= target x capacity (true when unknown)
  double utilization = 0;      // per_node_bytes / capacity
};
HostVerdict judge_host(const MemoryBreakdown& b, const TrainingSetup& s);
// The byte budget a peak is judged against: thresholds.target x device capacity.
int64_t target_bytes(const TrainingSetup& s);

}  // namespace memplan
