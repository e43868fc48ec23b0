// The CI gate's logic (memplan check): one config's verdict against its target, the comparison
// with a baseline version of the same config (per-term deltas, which setup fields changed and what
// each one costs), growth, and which field an annotation should point at. Reading files, git and
// rendering live in cli/cmd_check.cpp; every byte here comes from estimate().
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "estimator/estimate.h"

namespace memplan::planner {

// A setup field that differs between the baseline and the config now, and what it costs.
struct FieldChange {
  std::string field;   // provenance path: "batch.micro_batch", "precision", "model", "hardware.gpu", ...
  std::string label;   // how people say it: "micro-batch"
  std::string before;  // value in the baseline: "4"
  std::string after;   // value now: "8"
  // The effects of this change alone, measured by reverting only this field to its baseline value
  // (false when that reverted setup is not valid, e.g. a head count that no longer divides).
  bool effect_known = false;
  int64_t peak_effect_bytes = 0;  // peak now - peak with this field reverted
  int64_t over_effect_bytes = 0;  // the same for (peak - target bytes): counts capacity and target changes
  std::array<int64_t, kNumTerms> term_effect_bytes{};  // per term at each one's peak phase
  // A runtime field (a release, a switch, the loss, ...): its value may come from a rule the file's
  // other keys set off (the framework's defaults, --liger's fused loss), so the gate blames it only
  // when the file states it.
  bool blamed_only_if_stated = false;

  std::string text() const;  // "micro-batch 4 -> 8"
};

// How one term (at the peak phase) moved between the baseline and now.
struct TermDelta {
  Term term = Term::weights;
  int64_t before_bytes = 0;
  int64_t after_bytes = 0;
  std::vector<size_t> causes;  // indices into Comparison::changes, largest effect on this term first
  int64_t delta_bytes() const { return after_bytes - before_bytes; }
};

// Terms that moved by less than this are not listed (the peak still counts them).
constexpr int64_t kTermDeltaFloorBytes = int64_t{1} << 20;

struct Comparison {
  int64_t base_peak_bytes = 0;
  int64_t peak_bytes = 0;
  double growth = 0;                 // (peak - base peak) / base peak; 0.1 is +10%
  std::vector<FieldChange> changes;  // over_effect_bytes descending; unknown effects last
  std::vector<TermDelta> terms;      // |delta| >= kTermDeltaFloorBytes, largest |delta| first
};

// Compares the config now with its baseline. REQUIRES: validate() is empty for both setups.
// Each calibration may be null.
Comparison compare(const TrainingSetup& base, const Calibration* base_cal, const TrainingSetup& now,
                   const Calibration* cal);

struct GateOptions {
  // Fail on warnings too: a config whose reader warned (a near-miss key such as
  // `micro_bach_size`, which is otherwise ignored, or DeepSpeed "auto" values) fails the gate.
  // The memory bands need no strict mode: the warning band starts at or above the target, so a
  // config in it already fails.
  bool strict = false;
  std::optional<double> max_growth;  // fraction (0.1 = 10%); peak growth beyond it fails
};

// The gate's decision on one config.
struct GateResult {
  Verdict verdict;  // judge(): fits, utilization, band
  int64_t peak_bytes = 0;
  int64_t needed_bytes = 0;  // what the verdict held (MemoryBreakdown::verdict_bytes: <= the peak)
  int64_t capacity_bytes = 0;
  int64_t target_bytes = 0;  // thresholds.target x capacity
  Phase peak_phase = Phase::forward;
  std::string peak_at;
  std::array<int64_t, kNumTerms> terms{};  // at the peak phase
  bool calibrated = false;
  std::optional<Comparison> baseline;

  bool over_budget = false;  // peak above the target utilization (verdict.fits is false)
  bool over_growth = false;  // growth against the baseline beyond GateOptions::max_growth
  bool warned = false;       // strict and the config had warnings
  // The setup field to point an annotation at (provenance path, "model" for the model as a whole);
  // empty when the config passes or only `warned` is set.
  std::string blame;
  // When blame came from the baseline: index into baseline->changes.
  std::optional<size_t> blame_change;

  bool failed() const { return over_budget || over_growth || warned; }
};

// Judges one config. `base` is the baseline setup (null: none). `warnings` is how many warnings
// the config's reader reported; `fields_in_file` the provenance paths the file itself set (a
// fallback blame must point at a line). REQUIRES: validate(now) is empty and the device capacity
// is known; validate(*base) is empty when base is given.
GateResult gate(const TrainingSetup& now, const Calibration* cal, const TrainingSetup* base, const Calibration* base_cal,
                const GateOptions& options, size_t warnings, const std::vector<std::string>& fields_in_file);

// Without a baseline change to blame: the field behind the largest group of terms, among those the
// file sets. Activation-like terms (activations, logits_and_loss, transient) point at the
// micro-batch, then sequence length, checkpointing, attention; model states (weights, gradients,
// master weights, optimizer states) at the model, then precision, optimizer, ZeRO stage.
std::string largest_contributor(const std::array<int64_t, kNumTerms>& peak_terms,
                                const std::vector<std::string>& fields_in_file);

}  // namespace memplan::planner
