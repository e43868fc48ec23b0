// A second engine for replay(): the caching-allocator rules of allocator.h for PyTorch's default
// settings only, with its own lean state, for the replays the estimator and the planner make by
// the hundred. What it covers it answers exactly as CachingAllocatorModel does (the same blocks
// chosen, split and merged, the same segments, peaks and retries; tests/estimator/
// allocator_fast_test.cpp replays both on every sequence the tests know and on random ones);
// everything else stays with the model, which remains the reference.
//
// Covered: request rounding (with roundup_power2_divisions too), the small and large pools,
// best-fit reuse, splitting and merging, a capacity of either kind with the free-and-retry path
// (release_cached_blocks) before an out-of-memory error, and peaks reset at an event. Not covered
// (the model replays these): expandable segments, max_split_size, the garbage-collection
// threshold, and any event on a stream other than 0.
#pragma once

#include <cstdint>
#include <vector>

#include "estimator/allocator.h"

namespace memplan::fast_replay {

// Whether the engine answers for `config` (see above; the events' streams are checked by run()).
bool covers(const AllocatorConfig& config);

// replay() of `events` whose ids are the dense slots `slot[i]` (< slots), without segment
// actions. Returns false, and leaves `out` alone, when an event is on a stream other than 0.
// REQUIRES: covers(config); every free names a live slot (MEMPLAN_CHECK).
bool run(const std::vector<AllocatorEvent>& events, const std::vector<int32_t>& slot, size_t slots,
         const AllocatorConfig& config, int64_t reset_peaks_at, ReplayResult& out);

// run() with config.capacity 0, and beside it the replays capped at each of `capacities` (the
// same settings, config.capacity = c): `capped[k]` is what run() with that capacity gives, peaks
// reset at `reset_peaks_at` too. Each capped replay is made only from where it departs from the
// uncapped one (the first new segment that takes reserved memory past its capacity), on a copy of
// the engine made there; one that never does is the uncapped replay. With `first_that_runs` the
// capped replays stop at the first that runs (`capped` holds those made, in order). False as run()
// is. REQUIRES: covers(config), config.capacity == 0, every capacity > 0.
bool run_with_caps(const std::vector<AllocatorEvent>& events, const std::vector<int32_t>& slot, size_t slots,
                   const AllocatorConfig& config, int64_t reset_peaks_at, const std::vector<int64_t>& capacities,
                   ReplayResult& out, std::vector<ReplayResult>& capped, bool first_that_runs = false);

}  // namespace memplan::fast_replay
