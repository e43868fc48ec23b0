// Does a setup fit, and if not, which changes make it fit at the least modelled cost. fit searches
// (it does not walk a ladder): every combination of the changes the card runs — precision (bf16
// from fp32 where the card has it), a smaller micro-batch with more accumulation (the effective
// batch kept), checkpointing policies (selective, every:K, full), attention kernels, 8-bit and
// paged optimizers, ZeRO stages and offload (optimizer before parameters), FSDP where the
// framework is not DeepSpeed — goes through plan's search (plan.h) and the few fastest that fit
// are reported with what each changes. LoRA/QLoRA ("changes what you train") and a shorter
// sequence (tried last: "changes what the model learns") are reported apart. Every number comes
// from estimate(); speed from throughput.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "estimator/estimate.h"
#include "planner/space.h"
#include "planner/throughput.h"

namespace memplan::planner {

// One change to one dimension of the setup and what it does.
struct Change {
  std::string step;      // the dimension: "precision", "micro-batch", "checkpointing", "attention", ...
  std::string flags;     // how to ask for it on the command line ("--attention flash")
  std::string cost;      // what it changes or costs ("recomputes the forward: ~+33% compute")
  TrainingSetup setup;   // the setup with the change applied (alone, for FitReport::single)
  int64_t peak_bytes = 0;  // what the verdict holds (MemoryBreakdown::verdict_bytes)
  bool fits = false;
};

// A combination of changes that makes the setup fit.
struct FitOption {
  TrainingSetup setup;
  std::vector<Change> changes;     // one per dimension changed, in the order people read them
  std::string flags;               // all of them: "--precision amp-bf16 --micro-batch 1 --grad-accum 16 ..."
  int64_t peak_bytes = 0;
  StepTime time;                   // modelled
  double relative_speed = 1;       // tokens/s against the fastest option that keeps the model and sequence
  int64_t host_per_node_bytes = 0; // host RAM the option needs per node
  bool host_known = false;         // the node's RAM is known (--host-memory or --device cpu) and was checked
  bool changes_training = false;   // LoRA/QLoRA: trains adapters, not the model
  bool changes_learning = false;   // a shorter sequence: changes what the model learns
};

struct FitReport {
  Verdict verdict;                 // of the setup as given
  int64_t peak_bytes = 0;
  HostVerdict host;                // host memory of the setup as given, per node
  int64_t largest_micro_batch = 0;   // largest micro-batch that fits with nothing else changed (0: none)
  int64_t largest_micro_batch_peak = 0;
  // Largest micro-batch whose step runs on the card at all (nothing else changed; 0: none): where
  // the allocation replay covers the setup, the one the caching allocator model runs within the
  // memory it can get (its cache freed and the request retried before an out-of-memory error);
  // else the largest whose peak is within the card.
  int64_t largest_micro_batch_runs = 0;
  std::vector<Change> single;      // each change alone, the setup otherwise as given
  std::vector<FitOption> options;  // the few fastest combinations that fit, training the model as asked
  std::optional<FitOption> fewest; // the fitting combination with the fewest changes (fastest among
                                   // those), when none of `options` is as small
  std::vector<FitOption> training_changes;  // LoRA/QLoRA, then shorter sequences, that fit
  std::vector<LeftOut> left_out;   // changes not offered, and why (the card, the framework, host RAM)
  int64_t searched = 0;            // candidates classified
};

// What the user fixed by a flag: fit keeps it as given and does not offer to change it.
struct FitAsk {
  // Why Liger's kernels stay off, the flag that says so ("--no-liger keeps them off"); empty: fit
  // may offer them. (--liger turns them on, and fit never offers to turn them off.)
  std::string liger_off;
};

// REQUIRES: validate(s) is empty and s.device.capacity_bytes > 0.
FitReport fit(const TrainingSetup& s, const Calibration* cal = nullptr, const FitAsk& ask = {});

// Largest micro-batch in [1, limit] whose peak stays within the target (0 if even 1 does not).
// Memory never falls as the micro-batch grows, so this is a binary search.
int64_t largest_micro_batch(const TrainingSetup& s, const Calibration* cal = nullptr, int64_t limit = 65536);

// Largest micro-batch in [1, limit] whose step runs on the card at all (Verdict::runs; 0: none).
int64_t largest_micro_batch_that_runs(const TrainingSetup& s, const Calibration* cal = nullptr, int64_t limit = 65536);

// True when the setup's peak is within the target utilisation of its device.
bool fits(const TrainingSetup& s, const Calibration* cal = nullptr);

// The space fit searches for a setup: its own value in every dimension plus the alternatives that
// use less memory and run on its card (the reasons for the rest in left_out).
SearchSpace fit_space(const TrainingSetup& s, const FitAsk& ask = {});

}  // namespace memplan::planner
