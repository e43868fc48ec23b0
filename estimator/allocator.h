// A deterministic model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// class DeviceCachingAllocator, PyTorch 2.x): request rounding, the small and large pools, best-fit
// reuse of cached blocks, splitting and merging, max_split_size, expandable segments, the
// garbage-collection threshold and the free-and-retry path before an out-of-memory error.
// It turns a sequence of tensor allocations into the allocator's reserved memory (what decides an
// out-of-memory error); it knows nothing about models. Streams other than "one stream per
// request" (record_stream, cross-stream events) and CUDA-graph private pools are not modelled.
//
// How to feed it: a program's tensor lifetimes as an ordered list of AllocatorEvents, each
// {bytes, alloc} or {handle, free}, in the order the program makes them (the order matters: the
// allocator is best-fit over what is free at that moment). Either drive CachingAllocatorModel
// directly (malloc returns a handle, free takes it back), or build the events with the `id`
// field naming each tensor and call replay() / find_oom_boundary(). Sizes are the caller's
// un-rounded byte counts (what torch asks for: numel * element size); the model rounds them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace memplan {

// The allocator's constants, the same in 1.13 and 2.x (CUDACachingAllocator.cpp at v2.6.0, the
// constants at the top of namespace Native; c10/core/AllocatorConfig.h on later main).
inline constexpr int64_t kAllocMinBlockSize = 512;             // kMinBlockSize: every request rounds up to 512 B
inline constexpr int64_t kAllocSmallSize = 1 << 20;            // kSmallSize: <= 1 MiB goes to the small pool
inline constexpr int64_t kAllocSmallBuffer = 2 << 20;          // kSmallBuffer: small-pool segment (2 MiB)
inline constexpr int64_t kAllocLargeBuffer = 20 << 20;         // kLargeBuffer: segment for 1-10 MiB requests (20 MiB)
inline constexpr int64_t kAllocMinLargeAlloc = 10 << 20;       // kMinLargeAlloc: >= 10 MiB gets its own segment
inline constexpr int64_t kAllocRoundLarge = 2 << 20;           // kRoundLarge: own segments round up to 2 MiB
inline constexpr int64_t kAllocUnlimited = INT64_MAX;          // max_split_size default (SIZE_MAX upstream)

// PYTORCH_CUDA_ALLOC_CONF / torch.cuda.set_per_process_memory_fraction, as plain fields.
// Defaults are PyTorch's defaults (c10/cuda/CUDAAllocatorConfig.cpp at v2.6.0).
struct AllocatorConfig {
  // The most the allocator may reserve, in bytes; 0 = unlimited. With `capacity_is_fraction` it is
  // set_per_process_memory_fraction's allowed_memory_maximum (fraction * cudaMemGetInfo total,
  // truncated): a new segment fails when reserved + its size would exceed it. Otherwise it stands
  // for the device's free memory at start (cudaMalloc fails when the segment does not fit).
  int64_t capacity = 0;
  bool capacity_is_fraction = true;
  // max_split_size_mb in bytes: cached blocks at least this big are never split, a smaller request
  // never takes one, and a request this big only takes a cached block smaller than
  // request + max_non_split_rounding. kAllocUnlimited = off (the default).
  int64_t max_split_size = kAllocUnlimited;
  int64_t max_non_split_rounding = kAllocLargeBuffer;  // max_non_split_rounding_mb (2.6+), default 20 MiB
  // garbage_collection_threshold in (0, 1); 0 = off. Only active with a fraction capacity, as
  // upstream (malloc checks set_fraction).
  double gc_threshold = 0.0;
  bool expandable_segments = false;
  // roundup_power2_divisions: empty = off; one value = the same for every size; otherwise one
  // value per power-of-two interval, as CUDAAllocatorConfig::roundup_power2_divisions(size) at
  // v2.6.0 indexes them: entry 0 for sizes below 2 MiB, entry i for [2^(20+i), 2^(21+i)), the
  // last of 16 entries for everything from 32 GiB up; missing entries are 0. A value of 0 or 1
  // means plain 512-B rounding in that interval.
  std::vector<int> roundup_power2_divisions;
};

// Parses PYTORCH_CUDA_ALLOC_CONF (`key:value,key:value`, spaces ignored) into an AllocatorConfig,
// following PyTorch's parser: the tokenizer and the shared keys in c10/core/AllocatorConfig.cpp
// (AcceleratorAllocatorConfig::parseArgs, 2.8+; CUDAAllocatorConfig::parseArgs in
// c10/cuda/CUDAAllocatorConfig.cpp before), the CUDA-only keys in c10/cuda/CUDAAllocatorConfig.cpp.
// Keys that change the model: max_split_size_mb (MiB, >= 20), max_non_split_rounding_mb (MiB,
// >= 20), garbage_collection_threshold (in (0, 1)), roundup_power2_divisions (a power of two for
// every size, or `[256:1,512:2,>:8]`: per power-of-two size in MiB, 0 or a power of two, `>` for
// every interval after the last one named), expandable_segments (True/False). Accepted and
// ignored (no effect on device memory): backend:native, release_lock_on_cudamalloc,
// pinned_use_cuda_host_register, pinned_num_register_threads, pinned_use_background_threads,
// pinned_reserve_segment_size_mb, graph_capture_record_stream_reuse. Anything else, a bad value,
// or backend:cudaMallocAsync (a different allocator, not modelled) is an InputError naming the
// key. An empty string gives the defaults.
AllocatorConfig parse_alloc_conf(const std::string& conf);

// One step of a program, for replay(). `id` names the tensor: an alloc creates it, a free of the
// same id releases it. Ids need not be dense; reusing an id after its free is allowed.
struct AllocatorEvent {
  enum Kind { alloc, free } kind = alloc;
  int64_t id = 0;
  int64_t bytes = 0;  // alloc only: the un-rounded request
  int stream = 0;
};

// A segment-level action, as the allocator's trace names them (segment_alloc, segment_free,
// segment_map, segment_unmap): what cudaMalloc/cudaFree or the expandable-segment mapping did.
struct SegmentAction {
  enum Kind { segment_alloc, segment_free, segment_map, segment_unmap } kind = segment_alloc;
  int64_t address = 0;
  int64_t bytes = 0;
  int stream = 0;
};

// A segment as snapshot() reports it: total size, bytes in allocated blocks, its block sizes.
struct SegmentInfo {
  int64_t address = 0;
  int64_t bytes = 0;
  int64_t allocated_bytes = 0;
  bool small_pool = false;
  bool expandable = false;
  int stream = 0;
  std::vector<std::pair<int64_t, bool>> blocks;  // (size, allocated), in address order
};

// Current and peak of a byte or count statistic (c10's Stat).
struct AllocatorStat {
  int64_t current = 0;
  int64_t peak = 0;
  void add(int64_t v);
  void sub(int64_t v) { current -= v; }
};

struct AllocatorStats {
  AllocatorStat allocated_bytes;  // sum of handed-out block sizes (after rounding, after a non-split)
  AllocatorStat reserved_bytes;   // sum of segment (or mapped page) sizes
  AllocatorStat requested_bytes;  // sum of the callers' un-rounded sizes
  AllocatorStat active_bytes;     // = allocated_bytes here (no cross-stream uses are modelled)
  AllocatorStat segments;         // segment count (cudaMalloc'd, not expandable mappings)
  int64_t num_alloc_retries = 0;  // mallocs that freed the cache and retried (counted per retry)
  int64_t num_ooms = 0;
  int64_t num_device_alloc = 0;  // cudaMalloc + cuMemMap calls
  int64_t num_device_free = 0;   // cudaFree + cuMemUnmap calls
};

// round_size (CUDACachingAllocator.cpp, v2.6.0) under `config`: what a request of `bytes` is
// rounded to (CachingAllocatorModel::round_size).
int64_t round_request(int64_t bytes, const AllocatorConfig& config);

// The allocator of one device. Deterministic: segment addresses come from `address_source` when
// set (a replay can hand the real cudaMalloc addresses back), else from a bump pointer that never
// reuses an address; only ties between equal-size free blocks depend on them.
class CachingAllocatorModel {
 public:
  static constexpr int64_t kOutOfMemory = -1;

  explicit CachingAllocatorModel(AllocatorConfig config = {});
  ~CachingAllocatorModel();
  CachingAllocatorModel(const CachingAllocatorModel&) = delete;
  CachingAllocatorModel& operator=(const CachingAllocatorModel&) = delete;

  // Allocates `bytes` (un-rounded, >= 0) on `stream`. Returns a handle (the block's address), or
  // kOutOfMemory when even after releasing the cache the segment does not fit the capacity
  // (stats().num_ooms counts it; the model stays usable, as after a caught torch OutOfMemoryError).
  int64_t malloc(int64_t bytes, int stream = 0);
  // Frees a handle malloc returned. REQUIRES: the handle is live.
  void free(int64_t handle);
  // torch.cuda.empty_cache(): releases every cached segment that holds no allocated block.
  void empty_cache();
  // torch.cuda.reset_peak_memory_stats(): peaks become the current values.
  void reset_peak_stats();

  // Adds a segment that exists before the sequence starts (a replay of a recording that began
  // after some allocations), with the blocks inside it that are allocated: (offset, size) pairs,
  // in address order. Returns the handles of those blocks, which free() accepts. Counts toward
  // reserved and allocated like any segment. REQUIRES: no expandable segments.
  std::vector<int64_t> seed_segment(int64_t address, int64_t bytes, bool small_pool, int stream,
                                    const std::vector<std::pair<int64_t, int64_t>>& live_blocks);

  // A segment address for a new cudaMalloc of `bytes`; unset = bump allocation.
  std::function<int64_t(int64_t bytes)> address_source;

  const AllocatorStats& stats() const { return stats_; }
  const AllocatorConfig& config() const { return config_; }
  // Every segment action so far, in order.
  const std::vector<SegmentAction>& segment_actions() const { return actions_; }
  // The segments now, in address order.
  std::vector<SegmentInfo> snapshot() const;

  // The allocator's rounding of a request (round_size), and the segment size a miss asks for
  // (get_allocation_size); exposed for the estimator and the tests.
  int64_t round_size(int64_t bytes) const;
  static int64_t allocation_size(int64_t rounded_bytes);

 // The allocator's state (blocks, pools, expandable segments); defined in allocator.cpp.
  struct Impl;

 private:
  friend struct ReplayDriver;  // replay(): malloc_block/free_block, no handle table
  // malloc and free by the block's index in the arena (valid until its free_block), without
  // malloc's handle table; -1 for out of memory.
  int malloc_block(int64_t bytes, int stream);
  void free_block(int block);

  Impl* impl_;
  AllocatorConfig config_;
  AllocatorStats stats_;
  std::vector<SegmentAction> actions_;
};

// What replay() reports.
struct ReplayResult {
  bool ran = true;                 // false: an allocation ran out of memory (replay stops there)
  int64_t oom_event = -1;          // index of the failing alloc event, or -1
  int64_t peak_reserved = 0;
  int64_t peak_allocated = 0;
  int64_t num_alloc_retries = 0;
  std::vector<SegmentAction> segment_actions;
};

// Feeds `events` through a fresh model with `config`. An alloc whose size is negative or a free of
// an unknown id is an internal error (MEMPLAN_CHECK). `reset_peaks_at` >= 0: the peaks are reset
// (torch.cuda.reset_peak_memory_stats) just before that event, so they cover what follows.
// Without `segment_actions` the result has none, and the settings PyTorch has by default (no
// expandable segments, max_split_size or garbage collection; one stream) are replayed by a leaner
// engine with the same answers (allocator_fast.h), several times faster.
ReplayResult replay(const std::vector<AllocatorEvent>& events, const AllocatorConfig& config,
                    int64_t reset_peaks_at = -1, bool segment_actions = true);

// replay(events, config, reset_peaks_at, false) with config.capacity 0, and in `capped[k]` the same
// with config.capacity = capacities[k] as the device's free memory (capacity_is_fraction false).
// Where the lean engine covers the settings, each capped replay goes on from where it first departs
// from the uncapped one (the first segment that takes reserved memory past its capacity; before
// that the two are the same event for event), so the set costs little more than the uncapped one.
// With `first_that_runs` the capped replays stop at the first that runs (`capped` holds those made).
ReplayResult replay_with_caps(const std::vector<AllocatorEvent>& events, const AllocatorConfig& config, int64_t reset_peaks_at,
                              const std::vector<int64_t>& capacities, std::vector<ReplayResult>& capped,
                              bool first_that_runs = false);

// The most bytes the live allocations of `events` hold at once, each request rounded as `config`
// rounds it (round_size). Every allocated block is at least its rounded request and reserved memory
// holds every allocated block, so a capacity below this runs out of memory (replay(events, c).ran is
// false) whatever the packing; what that replay would say, known without one.
int64_t peak_rounded_requests(const std::vector<AllocatorEvent>& events, const AllocatorConfig& config);

// The smallest capacity (a multiple of `granularity` bytes, default 2 MiB) at which `events` run
// to the end without an out-of-memory error, found by bisection over replays with
// config.capacity set (the rest of `config` kept). Running is monotone in the capacity for the
// allocator's rules in all but contrived sequences; the bisection assumes it. The unlimited run's
// peak reserved is an upper bound, and the answer is never above it.
int64_t find_oom_boundary(const std::vector<AllocatorEvent>& events, const AllocatorConfig& config,
                          int64_t granularity = kAllocRoundLarge);

}  // namespace memplan
