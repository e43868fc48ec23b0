// MemoryBreakdown's names and queries, and the verdicts that hold a breakdown against the card's
// bands (Thresholds) and the node's host RAM (breakdown.h).
#include "estimator/breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "estimator/error.h"

#include "estimator/checked.h"
#include "estimator/estimate.h"

namespace memplan {

// ---- names ---------------------------------------------------------------------------------

const char* term_name(Term t) {
  const int i = static_cast<int>(t);
  return i >= 0 && i < kNumTerms ? kTermNames[static_cast<size_t>(i)] : "?";
}
Term term_at(int i) { return static_cast<Term>(i); }

const char* phase_name(Phase p) {
  const int i = static_cast<int>(p);
  return i >= 0 && i < kNumPhases ? kPhaseNames[static_cast<size_t>(i)] : "?";
}

int64_t PhaseState::total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t = checked_add(t, b, "a phase's total bytes");
  return t;
}

const PhaseState& MemoryBreakdown::peak() const {
  size_t best = 0;
  for (size_t i = 1; i < phases.size(); ++i)
    if (phases[i].total() > phases[best].total()) best = i;
  return phases.at(best);
}
const PhaseState& MemoryBreakdown::at(Phase p) const {
  for (const auto& ph : phases)
    if (ph.phase == p) return ph;
  throw InternalError(fmt::format("a breakdown of {} phases has no {} phase", phases.size(), phase_name(p)));
}
int64_t MemoryBreakdown::allocated_peak_bytes() const {
  int64_t allocated = 0;
  for (const PhaseState& ph : phases) allocated = std::max(allocated, ph.allocated());
  return allocated;
}

int64_t MemoryBreakdown::host_bytes() const {
  int64_t t = 0;
  for (const auto& h : host) t = checked_add(t, h.bytes, "the host memory total");
  return t;
}
int64_t MemoryBreakdown::host_pinned_bytes() const {
  int64_t t = 0;
  for (const auto& h : host)
    if (h.pinned) t += h.bytes;
  return t;
}

HostVerdict judge_host(const MemoryBreakdown& b, const TrainingSetup& s) {
  HostVerdict v;
  v.per_gpu_bytes = b.host_bytes();
  v.pinned_per_gpu_bytes = b.host_pinned_bytes();
  v.ranks_per_node = s.parallel.ranks_per_node();
  v.per_node_bytes = v.per_gpu_bytes * v.ranks_per_node;
  v.capacity_bytes = s.parallel.host_memory_bytes;
  v.known = v.capacity_bytes > 0;
  if (v.known) {
    v.utilization = static_cast<double>(v.per_node_bytes) / static_cast<double>(v.capacity_bytes);
    v.fits = v.utilization <= s.thresholds.target;
  }
  return v;
}

int64_t target_bytes(const TrainingSetup& s) {
  return static_cast<int64_t>(s.thresholds.target * static_cast<double>(s.device.capacity_bytes));
}

Verdict judge(const MemoryBreakdown& b, const TrainingSetup& s) {
  Verdict v;
  const int64_t cap = s.device.capacity_bytes;
  if (cap <= 0) return v;
  v.known = true;
  const int64_t peak = b.verdict_bytes();
  v.utilization = static_cast<double>(peak) / static_cast<double>(cap);
  v.headroom_bytes = target_bytes(s) - peak;
  v.fits = peak <= target_bytes(s);
  v.runs = b.runs >= 0 ? b.runs == 1 : peak <= cap;
  if (!v.runs) v.fits = false;  // what does not run on the card cannot fit its target
  v.status = to_string(band_of(v.utilization, s.thresholds));
  return v;
}

Band band_of(double u, const Thresholds& t) {
  if (u > 1.0) return Band::out_of_memory;
  if (u >= t.emergency) return Band::emergency;
  if (u >= t.critical) return Band::critical;
  if (u >= t.warning) return Band::warning;
  if (u > t.target) return Band::above_target;
  return Band::normal;
}

namespace {
constexpr const char* kBandNames[] = {"normal", "above_target", "warning", "critical", "emergency", "out_of_memory"};
static_assert(std::size(kBandNames) == static_cast<size_t>(Band::count), "a band without a name");
}  // namespace

const char* to_string(Band b) {
  const size_t i = static_cast<size_t>(b);
  MEMPLAN_CHECK(i < std::size(kBandNames), "no such band");
  return kBandNames[i];
}

std::optional<Band> parse_band(const std::string& name) {
  for (size_t i = 0; i < std::size(kBandNames); ++i)
    if (name == kBandNames[i]) return static_cast<Band>(i);
  return std::nullopt;
}

}  // namespace memplan
