// The allocator's overhead from replaying the step's allocation sequence (sequence.h) through the
// caching-allocator model (allocator.h), and the bounds a calibration's corrections are held to.
#include "estimator/states.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "estimator/allocator.h"
#include "estimator/estimate.h"
#include "estimator/sequence.h"

namespace memplan::est {

std::string human(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}


// A calibration's corrections within the bounds its reader keeps (profiles/calibration.cpp):
// checked again here because the estimator is also handed calibrations built in code.
void check_calibration(const Calibration& c) {
  constexpr int64_t kTiB = int64_t{1} << 40;
  auto bad = [](const char* field, const std::string& why) {
    throw InputError(Where{}, fmt::format("calibration {}: {}", field, why),
                     "run memplan calibrate again, or keep hand edits within these bounds");
  };
  if (c.cuda_context_bytes < -1 || c.cuda_context_bytes > kTiB) bad("cuda_context_bytes", "must be -1 or 0 to 1 TiB");
  if (c.workspace_bytes < -1 || c.workspace_bytes > kTiB) bad("workspace_bytes", "must be -1 or 0 to 1 TiB");
  const std::string bounds = fmt::format("must be in [{}, {}]", Calibration::kMinScale, Calibration::kMaxScale);
  auto in_bounds = [](double v) { return v >= Calibration::kMinScale && v <= Calibration::kMaxScale; };
  if (!in_bounds(c.activation_scale)) bad("activation_scale", bounds);
  if (!in_bounds(c.model_state_scale)) bad("model_state_scale", bounds);
  if (!(c.overhead_fraction == -1 || (c.overhead_fraction >= 0 && c.overhead_fraction < 1)))
    bad("overhead_fraction", "must be in [0, 1) (or -1)");
  if (c.overhead_bytes < 0 || c.overhead_bytes > kTiB) bad("overhead_bytes", "must be 0 to 1 TiB");
}



// On CUDA, the allocator's overhead from replaying the process's allocation sequence through the
// caching-allocator model (estimator/sequence.h): reserved at the peak minus the tensors there.
// Reserved only grows in a steady step, so the same bytes stand in every phase; the phase with
// the most tensors is then the peak and its total is reserved + context. Setups the sequence does
// not cover, and calibrations that fitted the overhead or scale the terms, keep the formula.
// Returns false (and changes nothing) where it does not apply; `why_not` says why when the
// sequence does not cover the setup.
bool replay_may_apply(const TrainingSetup& s, const Calibration* cal) {
  if (s.device.kind != DeviceKind::cuda || !s.runtime.allocator_rounding) return false;
  if (cal && (cal->overhead_fraction >= 0 || cal->overhead_bytes != 0 || cal->activation_scale != 1.0 ||
              cal->model_state_scale != 1.0))
    return false;
  return sequence_not_modelled(s).empty();
}

// The memory the allocator can get: the card's, less what lives outside it (the context); an
// allocator cap (set_per_process_memory_fraction) is already in the card's capacity
// (profiles/build.cpp: the cap plus the context), and bounds the allocator here too. `target`:
// the allocator's share of the target (thresholds.target of the card, less the context).
AllocatorRoom allocator_room(const TrainingSetup& s, int64_t context) {
  AllocatorRoom r;
  r.room = s.device.capacity_bytes > 0 ? std::max<int64_t>(0, s.device.capacity_bytes - context) : 0;
  if (r.room > 0 && s.device.allocator_cap_bytes > 0) r.room = std::min(r.room, s.device.allocator_cap_bytes);
  r.target = r.room > 0 ? std::clamp<int64_t>(target_bytes(s) - context, 0, r.room) : 0;
  return r;
}

bool replay_allocator(const TrainingSetup& s, const Calibration* cal, MemoryBreakdown& b, bool with_text, std::string& why_not) {
  if (s.device.kind != DeviceKind::cuda || !s.runtime.allocator_rounding) return false;
  if (cal && (cal->overhead_fraction >= 0 || cal->overhead_bytes != 0 || cal->activation_scale != 1.0 ||
              cal->model_state_scale != 1.0))
    return false;
  const int64_t context = b.phases.empty() ? 0 : b.phases.front()[Term::cuda_context];
  const auto [room, target] = allocator_room(s, context);
  auto T = [](Term t) { return static_cast<int>(t); };
  auto tensors = [&](const PhaseState& ph) { return ph.total() - ph[Term::cuda_context] - ph[Term::allocator_overhead]; };
  int64_t allocated = 0;  // the tensors' peak over the phases
  for (const PhaseState& ph : b.phases) allocated = std::max(allocated, tensors(ph));
  // Where the tensors alone are more than the target's share (or the card's room), the step cannot
  // be said to run there, whatever the replay's packing: the verdict is never below the tensors and
  // the context (verdict_bound() relies on it), and those capped replays are not made.
  const bool share_possible = target > 0 && allocated <= target;
  const bool room_possible = room > 0 && allocated <= room;
  // Two steps: the second is the steady one (on the 15 H200 cases the third adds nothing). Where the
  // uncapped reserved memory is more than the allocator may hold, the allocator frees its cache and
  // retries before it fails (CUDACachingAllocator.cpp malloc: release_cached_blocks), so the step may
  // still run there: one more replay, capped, says whether it runs within the target, and where it
  // does not, one more whether it runs on the card at all.
  const int64_t asked = share_possible ? target : room_possible ? room : 0;
  const int64_t fallback = share_possible && room_possible && target < room ? room : 0;  // where it does not run in the share
  const ReservedPrediction p = predict_reserved(s, /*boundary=*/false, kMaxReplayEvents, /*capacity=*/asked, /*steps=*/2, fallback);
  if (!p.modelled) {
    why_not = p.why_not;
    return false;
  }
  const bool runs_in_target = share_possible && (p.peak_reserved <= target || p.runs_in_capacity == 1);
  bool runs_on_card = room_possible && (runs_in_target || p.peak_reserved <= room || (asked == room && p.runs_in_capacity == 1));
  if (room_possible && !runs_on_card && asked != room) runs_on_card = p.runs_in_fallback == 1;
  // What the card shows: the uncapped reserved memory, or the whole room where the step runs only
  // by squeezing the cache into it (the H200's 11 GiB-capped Qwen2.5-0.5B run reserved 11.68 of
  // 11.81 GB); a step that runs out keeps the uncapped figure, over the card.
  const bool squeezed = room > 0 && p.peak_reserved > room && runs_on_card;
  const int64_t reserved = squeezed ? room : p.peak_reserved;
  if (room > 0) {
    b.runs = runs_on_card ? 1 : 0;
    // Running within the target's share with the cache squeezed: the verdict holds that share.
    if (runs_in_target && p.peak_reserved > target) b.needed_bytes = context + target;
  }
  const int64_t overhead = std::max<int64_t>(0, reserved - allocated);
  for (PhaseState& ph : b.phases) ph.bytes[T(Term::allocator_overhead)] = overhead;
  if (!with_text) return true;
  const std::string within_target =
      b.needed_bytes >= 0 ? fmt::format("; capped at the target's {} (the allocator's share of {:.0f}% of the card) it still runs: "
                                        "the verdict holds that",
                                        human(target), 100 * s.thresholds.target)
                          : "";
  b.text[T(Term::allocator_overhead)] = {
      (squeezed ? fmt::format("caching-allocator replay of the process's allocations (model build, 3 steps): reserved {} would "
                             "exceed the {} the card leaves the allocator; replayed within it, the allocator frees its cache "
                             "and retries and the step runs with the card full: {} - tensors {} at the peak{}",
                             human(p.peak_reserved), human(room), human(room), human(allocated),
                             s.runtime.expandable_segments ? ", expandable segments" : "")
               : fmt::format("caching-allocator replay of the process's allocations (model build, 3 steps): reserved {} - tensors {} at "
                             "the peak{}",
                             human(p.peak_reserved), human(allocated), s.runtime.expandable_segments ? ", expandable segments" : "")) +
          within_target,
      "estimator/sequence.cpp (the segment walk's tensors in order) through estimator/allocator.cpp "
      "(CUDACachingAllocator.cpp: rounding, pools, splitting, best fit)"};
  return true;
}

}  // namespace memplan::est
