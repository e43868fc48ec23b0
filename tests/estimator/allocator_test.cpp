// The caching-allocator model (estimator/allocator.h): hand-derived cases for each rule, then a
// replay of twenty-one real allocator recordings from an H200 with PyTorch 2.11 (tests/data/gpu/traces,
// decompressed into the build folder; five under non-default PYTORCH_CUDA_ALLOC_CONF, read with
// parse_alloc_conf), which must produce the same segment actions in the same order (for
// expandable segments the same maps at the same offsets), the same reserved and allocated peaks,
// and under the 11 GiB cap the same outcome and retry count.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "estimator/allocator.h"
#include "estimator/error.h"

using namespace memplan;

namespace {
constexpr int64_t MiB = int64_t{1} << 20;
constexpr int64_t GiB = int64_t{1} << 30;

std::vector<int64_t> segment_sizes(const CachingAllocatorModel& m, SegmentAction::Kind kind) {
  std::vector<int64_t> out;
  for (const auto& a : m.segment_actions()) {
    if (a.kind == kind) out.push_back(a.bytes);
  }
  return out;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Rules, one at a time. Every expected number is derived in the comment from the rule it checks
// (CUDACachingAllocator.cpp at v2.6.0, functions named in estimator/allocator.cpp).

TEST_CASE("allocator: round_size rounds to 512 B, or to power-of-two divisions when configured") {
  CachingAllocatorModel plain;
  CHECK(plain.round_size(0) == 512);        // below kMinBlockSize -> 512
  CHECK(plain.round_size(4) == 512);
  CHECK(plain.round_size(512) == 512);
  CHECK(plain.round_size(513) == 1024);     // next multiple of 512
  CHECK(plain.round_size(100'000'000) == 100'000'256);  // 195313 * 512 (libtorch-notes §1.2)

  AllocatorConfig c;
  c.roundup_power2_divisions = {4};
  CachingAllocatorModel div4(c);
  CHECK(div4.round_size(1200) == 1536);  // 1200 <= 512 * 4: the 512 rule applies (1536)
  CHECK(div4.round_size(2100) == 2560);  // between 2048 and 4096, steps of 512: 2048, 2560, ...
  CHECK(div4.round_size(4096) == 4096);  // a power of two stays
  // 5 MiB + 1 B: floor 4 MiB, steps of 1 MiB -> 6 MiB (a 512-B rounding would give 5 MiB + 512).
  CHECK(div4.round_size(5 * MiB + 1) == 6 * MiB);

  // Per-interval table: entry 0 covers < 2 MiB, entry 1 covers [2, 4) MiB. 8 divisions there:
  // 3 MiB + 1 -> floor 2 MiB, step 256 KiB -> 3 MiB + 256 KiB; entry 0 is 0 -> 512 rounding.
  c.roundup_power2_divisions = {0, 8};
  CachingAllocatorModel table(c);
  CHECK(table.round_size(3 * MiB + 1) == 3 * MiB + 256 * 1024);
  CHECK(table.round_size(1 * MiB + 1) == 1 * MiB + 512);
}

TEST_CASE("allocator: small requests share 2 MiB segments, 1-10 MiB share 20 MiB, larger get their own") {
  CHECK(CachingAllocatorModel::allocation_size(512) == 2 * MiB);
  CHECK(CachingAllocatorModel::allocation_size(1 * MiB) == 2 * MiB);        // <= kSmallSize: small pool
  CHECK(CachingAllocatorModel::allocation_size(1 * MiB + 512) == 20 * MiB);  // < kMinLargeAlloc
  CHECK(CachingAllocatorModel::allocation_size(10 * MiB) == 10 * MiB);      // >= 10 MiB: rounded to 2 MiB
  CHECK(CachingAllocatorModel::allocation_size(10 * MiB + 512) == 12 * MiB);

  CachingAllocatorModel m;
  // 600 KiB: one 2 MiB small segment; a second 600 KiB fits its 1448 KiB remainder.
  m.malloc(600 * 1024);
  m.malloc(600 * 1024);
  // 1.5 MiB: a 20 MiB large segment, split (remainder 18.5 MiB > 1 MiB); 3 MiB reuses the rest.
  m.malloc(3 * MiB / 2);
  m.malloc(3 * MiB);
  // 100,000,000 B -> 100,000,256 B -> its own 48 * 2 MiB = 100,663,296 B segment; the remainder
  // 663,040 B is not above 1 MiB, so the block is not split and counts whole as allocated.
  m.malloc(100'000'000);
  CHECK(segment_sizes(m, SegmentAction::segment_alloc) == std::vector<int64_t>{2 * MiB, 20 * MiB, 100'663'296});
  CHECK(m.stats().reserved_bytes.current == 2 * MiB + 20 * MiB + 100'663'296);
  // allocated: 2 * 600 KiB + 1.5 MiB + 3 MiB + 100,663,296 (the unsplit block, not the request).
  CHECK(m.stats().allocated_bytes.current == 2 * 600 * 1024 + 3 * MiB / 2 + 3 * MiB + 100'663'296);
  CHECK(m.stats().requested_bytes.current == 2 * 600 * 1024 + 3 * MiB / 2 + 3 * MiB + 100'000'000);
}

TEST_CASE("allocator: best fit takes the smallest cached block that fits, then the lowest address") {
  CachingAllocatorModel m;
  const int64_t a = m.malloc(40 * MiB);
  const int64_t b = m.malloc(30 * MiB);
  const int64_t c = m.malloc(30 * MiB);
  const int64_t keep = m.malloc(50 * MiB);
  m.free(a);
  m.free(c);
  m.free(b);
  // Cached: 40, 30 (b), 30 (c). A 25 MiB request takes a 30 MiB block (smallest fit), and of the
  // two the lower address (b, allocated first, so lower under the bump addresses). Its 5 MiB
  // remainder is > 1 MiB, so it is split.
  const int64_t d = m.malloc(25 * MiB);
  CHECK(d == b);
  CHECK(m.stats().reserved_bytes.current == 150 * MiB);  // no new segment
  CHECK(m.stats().allocated_bytes.current == 75 * MiB);  // keep 50 + d 25
  (void)keep;
}

TEST_CASE("allocator: a split block merges back with its free neighbours") {
  CachingAllocatorModel m;
  const int64_t x = m.malloc(2 * MiB);  // 20 MiB segment: [x 2][rest 18]
  const int64_t y = m.malloc(4 * MiB);  // carved from the rest: [x 2][y 4][rest 14]
  CHECK(y == x + 2 * MiB);
  m.free(x);
  m.free(y);  // y merges with x before it and the 14 MiB after: one 20 MiB block again
  const auto snap = m.snapshot();
  REQUIRE(snap.size() == 1);
  CHECK(snap[0].blocks == std::vector<std::pair<int64_t, bool>>{{20 * MiB, false}});
  // Whole again, so empty_cache can free it.
  m.empty_cache();
  CHECK(m.stats().reserved_bytes.current == 0);
  CHECK(segment_sizes(m, SegmentAction::segment_free) == std::vector<int64_t>{20 * MiB});
}

TEST_CASE("allocator: a large-pool remainder of 1 MiB or less is not split off; small-pool remainders are") {
  CachingAllocatorModel m;
  const int64_t a = m.malloc(11 * MiB);  // own 12 MiB segment: remainder 1 MiB is not > 1 MiB
  CHECK(m.stats().allocated_bytes.current == 12 * MiB);
  m.free(a);
  // 2 MiB + 512 from a cached 12 MiB block: remainder 10 MiB - 512 > 1 MiB -> split, 2 MiB + 512 allocated.
  m.malloc(2 * MiB + 512);
  CHECK(m.stats().allocated_bytes.current == 2 * MiB + 512);
  CHECK(m.stats().reserved_bytes.current == 12 * MiB);
  // Small pool: any remainder >= 512 B is split, so two 1 MiB requests share one 2 MiB segment.
  m.malloc(1 * MiB);
  m.malloc(1 * MiB);
  CHECK(segment_sizes(m, SegmentAction::segment_alloc) == std::vector<int64_t>{12 * MiB, 2 * MiB});
}

TEST_CASE("allocator: max_split_size keeps oversize blocks whole and reserves them for oversize requests") {
  AllocatorConfig c;
  c.max_split_size = 64 * MiB;
  CachingAllocatorModel m(c);
  const int64_t big = m.malloc(100 * MiB);
  m.free(big);
  // 30 MiB < max_split: the cached 100 MiB block is oversize and may not serve it -> new segment.
  m.malloc(30 * MiB);
  CHECK(segment_sizes(m, SegmentAction::segment_alloc) == std::vector<int64_t>{100 * MiB, 30 * MiB});
  // 90 MiB >= max_split: takes the 100 MiB block (100 < 90 + 20 rounding limit), unsplit.
  m.malloc(90 * MiB);
  CHECK(m.stats().allocated_bytes.current == 30 * MiB + 100 * MiB);
  CHECK(m.stats().reserved_bytes.current == 130 * MiB);

  CachingAllocatorModel n(c);
  const int64_t huge = n.malloc(200 * MiB);
  n.free(huge);
  // 70 MiB >= max_split, but the cached 200 MiB is not below 70 + 20 MiB: a new 70 MiB segment.
  n.malloc(70 * MiB);
  CHECK(segment_sizes(n, SegmentAction::segment_alloc) == std::vector<int64_t>{200 * MiB, 70 * MiB});
}

TEST_CASE("allocator: out of memory frees the cache and retries once before failing") {
  AllocatorConfig c;
  c.capacity = 100 * MiB;  // a memory fraction's allowed_memory_maximum
  CachingAllocatorModel m(c);
  const int64_t a = m.malloc(60 * MiB);
  m.free(a);  // 60 MiB cached, whole
  // 50 MiB: the cached 60 MiB block would fit (best fit takes it, 10 MiB remainder split): no new segment.
  const int64_t b = m.malloc(50 * MiB);
  m.free(b);
  // 70 MiB: no cached block fits; 60 + 70 > 100 -> refused; release_cached_blocks frees the
  // whole 60 MiB segment, the retry (counted) fits 70 <= 100.
  const int64_t d = m.malloc(70 * MiB);
  CHECK(d != CachingAllocatorModel::kOutOfMemory);
  CHECK(m.stats().num_alloc_retries == 1);
  CHECK(m.stats().num_ooms == 0);
  CHECK(segment_sizes(m, SegmentAction::segment_free) == std::vector<int64_t>{60 * MiB});
  CHECK(m.stats().reserved_bytes.current == 70 * MiB);
  CHECK(m.stats().reserved_bytes.peak == 70 * MiB);
  // 40 MiB more: 70 + 40 > 100, nothing cached to free: the retry is counted and fails -> OOM.
  CHECK(m.malloc(40 * MiB) == CachingAllocatorModel::kOutOfMemory);
  CHECK(m.stats().num_alloc_retries == 2);
  CHECK(m.stats().num_ooms == 1);
  // The model stays usable after the error (as after a caught OutOfMemoryError): 2 MiB gets a
  // 20 MiB segment, 70 + 20 <= 100.
  const int64_t s = m.malloc(2 * MiB);
  CHECK(s != CachingAllocatorModel::kOutOfMemory);
  CHECK(m.stats().reserved_bytes.current == 90 * MiB);
}

TEST_CASE("allocator: with max_split_size, one oversize cached block is freed before everything else") {
  AllocatorConfig c;
  c.capacity = 300 * MiB;
  c.max_split_size = 64 * MiB;
  CachingAllocatorModel m(c);
  const int64_t small_seg = m.malloc(30 * MiB);  // 30 MiB segment
  const int64_t big1 = m.malloc(100 * MiB);
  const int64_t big2 = m.malloc(150 * MiB);
  m.free(small_seg);
  m.free(big1);
  m.free(big2);
  // 200 MiB (>= max_split): cached 150 is too small, reserved 280 + 200 > 300. The first
  // remedy (release_available_cached_blocks) looks for one oversize block >= 200: none, so it frees
  // the largest oversize ones from the top until 200 MiB are freed: 150, then 100 (250 >= 200).
  // The 30 MiB segment (below max_split) stays; no retry is counted, as the remedy was not
  // release_cached_blocks. 30 + 200 <= 300.
  CHECK(m.malloc(200 * MiB) != CachingAllocatorModel::kOutOfMemory);
  CHECK(m.stats().num_alloc_retries == 0);
  CHECK(segment_sizes(m, SegmentAction::segment_free) == std::vector<int64_t>{150 * MiB, 100 * MiB});
  CHECK(m.stats().reserved_bytes.current == 230 * MiB);
}

TEST_CASE("allocator: expandable segments map 20 MiB (large) and 2 MiB (small) pages into one segment") {
  AllocatorConfig c;
  c.expandable_segments = true;
  CachingAllocatorModel m(c);
  // 30 MiB: maps ceil(30 / 20) = 2 pages = 40 MiB; the 10 MiB left over is split off (any
  // remainder >= 512 B splits with expandable segments).
  const int64_t a = m.malloc(30 * MiB);
  CHECK(m.stats().reserved_bytes.current == 40 * MiB);
  // 25 MiB: the free 10 MiB block can grow into the unmapped space after it: map 15 MiB more ->
  // one page (20 MiB), merged with the 10 MiB: 30 MiB free, 25 taken, 5 left.
  const int64_t b = m.malloc(25 * MiB);
  CHECK(b == a + 30 * MiB);  // contiguous in the one segment
  CHECK(m.stats().reserved_bytes.current == 60 * MiB);
  // Small pool: 4 KiB maps one 2 MiB page of a separate small segment.
  m.malloc(4096);
  CHECK(m.stats().reserved_bytes.current == 62 * MiB);
  CHECK(segment_sizes(m, SegmentAction::segment_map) == std::vector<int64_t>{40 * MiB, 20 * MiB, 2 * MiB});
  CHECK(segment_sizes(m, SegmentAction::segment_alloc).empty());
  // Freeing a and emptying the cache unmaps the whole pages inside a's 30 MiB (page 0: 0-20 MiB)
  // and leaves the partly used page 1 mapped.
  m.free(a);
  m.empty_cache();
  CHECK(segment_sizes(m, SegmentAction::segment_unmap) == std::vector<int64_t>{20 * MiB});
  CHECK(m.stats().reserved_bytes.current == 42 * MiB);
}

TEST_CASE("allocator: garbage collection above the threshold frees old whole cached segments") {
  AllocatorConfig c;
  c.capacity = 100 * MiB;
  c.gc_threshold = 0.5;  // act above 50 MiB reserved
  CachingAllocatorModel m(c);
  const int64_t a = m.malloc(40 * MiB);
  m.free(a);
  // 30 MiB: a lookup (the 40 MiB cached block fits, 10 MiB remainder split) - no GC on a hit.
  const int64_t b = m.malloc(30 * MiB);
  m.free(b);  // merged back: 40 MiB whole
  // 44 MiB: miss; reserved 40 <= 50: no GC; a new 44 MiB segment: 84 MiB.
  const int64_t d = m.malloc(44 * MiB);
  CHECK(m.stats().reserved_bytes.current == 84 * MiB);
  // 50 MiB: miss (the cached 40 is too small), reserved 84 > 50 -> GC frees the whole cached
  // 40 MiB (the only freeable block, so its age is the average), then 44 + 50 <= 100 fits at once.
  CHECK(m.malloc(50 * MiB) != CachingAllocatorModel::kOutOfMemory);
  CHECK(segment_sizes(m, SegmentAction::segment_free) == std::vector<int64_t>{40 * MiB});
  CHECK(m.stats().num_alloc_retries == 0);
  (void)d;
}

TEST_CASE("allocator: replay and the out-of-memory boundary") {
  // Three 30 MiB tensors live together, then a 90 MiB one after they die.
  std::vector<AllocatorEvent> ev = {
      {AllocatorEvent::alloc, 1, 30 * MiB}, {AllocatorEvent::alloc, 2, 30 * MiB}, {AllocatorEvent::alloc, 3, 30 * MiB},
      {AllocatorEvent::free, 1},           {AllocatorEvent::free, 2},           {AllocatorEvent::free, 3},
      {AllocatorEvent::alloc, 4, 90 * MiB}, {AllocatorEvent::free, 4}};
  const ReplayResult r = replay(ev, {});
  // Unlimited: the 90 MiB tensor finds no cached block of 90 (three separate 30 MiB segments) and
  // gets its own: peak 180 MiB.
  CHECK(r.ran);
  CHECK(r.peak_reserved == 180 * MiB);
  // Capped, the cache is freed before the 90 MiB segment: 90 MiB is the least that runs.
  CHECK(find_oom_boundary(ev, {}) == 90 * MiB);
  AllocatorConfig c;
  c.capacity = 90 * MiB - 2 * MiB;
  const ReplayResult tight = replay(ev, c);
  CHECK_FALSE(tight.ran);
  CHECK(tight.oom_event == 2);  // the third 30 MiB tensor
}

TEST_CASE("allocator: parse_alloc_conf reads PYTORCH_CUDA_ALLOC_CONF as PyTorch's parser does") {
  // Defaults for an empty string.
  const AllocatorConfig none = parse_alloc_conf("");
  CHECK(none.max_split_size == kAllocUnlimited);
  CHECK_FALSE(none.expandable_segments);
  CHECK(none.roundup_power2_divisions.empty());

  CHECK(parse_alloc_conf("expandable_segments:True").expandable_segments);
  CHECK_FALSE(parse_alloc_conf("expandable_segments:False").expandable_segments);
  CHECK(parse_alloc_conf("max_split_size_mb:128").max_split_size == 128 * MiB);
  CHECK(parse_alloc_conf("max_non_split_rounding_mb:64").max_non_split_rounding == 64 * MiB);
  // Two keys, spaces ignored (the tokenizer drops them).
  const AllocatorConfig two = parse_alloc_conf("garbage_collection_threshold:0.6, max_split_size_mb:256");
  CHECK(two.gc_threshold == doctest::Approx(0.6));
  CHECK(two.max_split_size == 256 * MiB);
  // One division count applies to all 16 intervals (1 MiB .. 64 GiB).
  CHECK(parse_alloc_conf("roundup_power2_divisions:4").roundup_power2_divisions == std::vector<int>(16, 4));
  // The PyTorch docs' list: 256:1 is entry log2(256) = 8 and, being first, fills entries 0-7 too;
  // 512:2 -> entry 9; 1024:4 -> entry 10; '>:8' fills entries after the last named (11-15).
  const std::vector<int> expected = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8};
  CHECK(parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]").roundup_power2_divisions == expected);
  // Keys with no effect on device memory are accepted.
  CHECK_NOTHROW(parse_alloc_conf("backend:native,pinned_use_cuda_host_register:True,pinned_num_register_threads:8"));

  // Refused, each with a message naming the problem.
  auto refuses = [](const std::string& conf, const std::string& fragment) {
    CAPTURE(conf);
    try {
      parse_alloc_conf(conf);
      FAIL("accepted");
    } catch (const InputError& e) {
      CAPTURE(e.message());
      CHECK(e.message().find(fragment) != std::string::npos);
    }
  };
  refuses("max_split_sise_mb:128", "unrecognized key 'max_split_sise_mb'");
  refuses("max_split_size_mb:10", "too small, must be >= 20");  // kLargeBuffer / 1 MiB
  refuses("max_split_size_mb:abc", "expected a non-negative integer");
  refuses("max_split_size_mb", "expected ':'");
  refuses("garbage_collection_threshold:1.0", "(0.0, 1.0)");
  refuses("garbage_collection_threshold:0", "(0.0, 1.0)");
  refuses("expandable_segments:true", "expected True or False");
  refuses("roundup_power2_divisions:3", "power of 2");
  refuses("roundup_power2_divisions:[300:2]", "intervals have to be powers of 2");
  refuses("roundup_power2_divisions:[256:3]", "0 or a power of 2");
  refuses("roundup_power2_divisions:[256:2", "']' closing");
  refuses("backend:cudaMallocAsync", "only the native one");
  refuses("max_split_size_mb:128;expandable_segments:True", "non-negative integer");
  refuses("expandable_segments:True:False", "expected ','");
}

// ---------------------------------------------------------------------------------------------
// Real traces.

namespace {

// cudaMemGetInfo's total on the recording H200 (shared/gpu/README.md, h200-loops.jsonl `info`):
// set_per_process_memory_fraction keeps fraction * total, truncated (setMemoryFraction, v2.6.0).
constexpr double kH200Total = 150'109'880'320.0;

struct TraceOutcome {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> trace_actions;  // segment_alloc/segment_free, size
  std::vector<std::pair<std::string, int64_t>> model_actions;
  int64_t trace_peak_reserved = 0;
  int64_t model_peak_reserved = 0;
  int64_t trace_peak_allocated = 0;
  int64_t model_peak_allocated = 0;
  // Expandable segments: each segment_map/segment_unmap as (offset in its segment, size).
  std::vector<std::pair<int64_t, int64_t>> trace_map_offsets;
  std::vector<std::pair<int64_t, int64_t>> model_map_offsets;
  int64_t trace_retries = 0;
  int64_t model_retries = 0;
  bool trace_oom = false;
  bool model_oom = false;
  bool model_oom_at_trace_oom = false;
  std::vector<AllocatorEvent> events;  // the trace's requests, for find_oom_boundary
  AllocatorConfig config;
};

// Where each segment_map/segment_unmap falls inside its expandable segment (whose addresses are
// the driver's, or the model's bump addresses): a map that starts neither inside a segment's mapped
// extent nor at its end starts a new segment (a new segment is mapped from its base).
class MapOffsets {
 public:
  void add(int64_t addr, int64_t size) {
    auto it = std::find_if(extent_.begin(), extent_.end(),
                           [addr](const std::pair<int64_t, int64_t>& e) { return addr >= e.first && addr <= e.second; });
    if (it == extent_.end()) it = extent_.insert(extent_.end(), {addr, addr});
    it->second = std::max(it->second, addr + size);
    out.emplace_back(addr - it->first, size);
  }
  std::vector<std::pair<int64_t, int64_t>> out;

 private:
  std::vector<std::pair<int64_t, int64_t>> extent_;  // (base, end of the highest mapped page)
};

std::string trace_path(const std::string& name) {
  return std::string(MEMPLAN_BUILD_DIR) + "/tests/data/gpu/traces/trace-" + name + ".json";
}

// Replays one recording. Segments that existed before recording began are seeded (see the
// traces' README): from the final snapshot where there is one (their blocks allocated at the end
// and not by the trace were allocated all along), else one empty 2 MiB small segment per 2 MiB
// range the trace allocates in without creating it. With `real_addresses`, new segments get the
// trace's cudaMalloc addresses in order (the driver's choice, not the allocator's: it only
// decides ties between equal-size free blocks).
TraceOutcome replay_trace(const std::string& name, bool real_addresses) {
  std::ifstream in(trace_path(name));
  REQUIRE_MESSAGE(in.good(), "missing " << trace_path(name));
  const nlohmann::json d = nlohmann::json::parse(in);
  TraceOutcome o;
  o.name = name;
  const auto& stats = d.at("stats");
  o.trace_peak_reserved = stats.at("reserved_bytes.all.peak").get<int64_t>();
  o.trace_peak_allocated = stats.at("allocated_bytes.all.peak").get<int64_t>();
  o.trace_retries = stats.at("num_alloc_retries").get<int64_t>();
  // record_trace.py writes "default" where PYTORCH_CUDA_ALLOC_CONF was not set.
  if (d.contains("alloc_conf") && !d.at("alloc_conf").is_null() && d.at("alloc_conf") != "default") {
    o.config = parse_alloc_conf(d.at("alloc_conf").get<std::string>());
  }
  if (d.contains("fraction") && !d.at("fraction").is_null()) {
    o.config.capacity = static_cast<int64_t>(d.at("fraction").get<double>() * kH200Total);
  }

  struct Ev {
    std::string action;
    int64_t addr, size;
  };
  std::vector<Ev> evs;
  for (const auto& e : d.at("events")) {
    CHECK(e.at(3).get<int64_t>() == 0);  // one stream in these recordings
    // An oom event's address is null (the recorder puts cudaMemGetInfo's free bytes there).
    const int64_t addr = e.at(1).is_null() ? 0 : e.at(1).get<int64_t>();
    evs.push_back({e.at(0).get<std::string>(), addr, e.at(2).get<int64_t>()});
  }
  std::deque<int64_t> addresses;
  std::vector<std::pair<int64_t, int64_t>> created;  // segments the trace makes
  std::map<int64_t, int64_t> live_at_end;            // addr -> size of trace allocs never freed
  auto in_created = [&created](int64_t addr) {
    for (const auto& [base, size] : created) {
      if (addr >= base && addr < base + size) return true;
    }
    return false;
  };
  MapOffsets trace_maps;
  for (const auto& e : evs) {
    if (e.action.rfind("segment_", 0) == 0) o.trace_actions.emplace_back(e.action, e.size);
    if (e.action == "segment_map" || e.action == "segment_unmap") trace_maps.add(e.addr, e.size);
    // Expandable segments map pages into one reserved range: the first map of a range is where
    // the segment was made (its address space starts there).
    if (e.action == "segment_map" && !in_created(e.addr)) created.emplace_back(e.addr, int64_t{1} << 40);
    if (e.action == "segment_alloc") {
      addresses.push_back(e.addr);
      created.emplace_back(e.addr, e.size);
    }
    if (e.action == "alloc") live_at_end[e.addr] = e.size;
    if (e.action == "free_completed") live_at_end.erase(e.addr);
    if (e.action == "oom") o.trace_oom = true;
  }

  CachingAllocatorModel m(o.config);
  int64_t fallback = int64_t{1} << 50;
  if (real_addresses) {
    m.address_source = [&addresses, &fallback](int64_t bytes) {
      if (addresses.empty()) {
        fallback += bytes;
        return fallback - bytes;
      }
      const int64_t a = addresses.front();
      addresses.pop_front();
      return a;
    };
  }
  if (d.contains("segments")) {
    for (const auto& s : d.at("segments")) {
      const int64_t base = s.at(0).get<int64_t>();
      if (in_created(base)) continue;
      std::vector<std::pair<int64_t, int64_t>> live;
      int64_t off = 0;
      for (const auto& blk : s.at(5)) {
        const int64_t size = blk.at(0).get<int64_t>();
        if (blk.at(1).get<std::string>() == "active_allocated" && !live_at_end.count(base + off)) {
          live.emplace_back(off, size);
        }
        off += size;
      }
      m.seed_segment(base, s.at(1).get<int64_t>(), s.at(4).get<std::string>() == "small", 0, live);
    }
  } else {
    std::set<int64_t> bases;
    for (const auto& e : evs) {
      if (e.action == "alloc" && !in_created(e.addr)) bases.insert(e.addr / (2 * MiB) * (2 * MiB));
    }
    for (const int64_t base : bases) {
      m.seed_segment(base, 2 * MiB, true, 0, {});
    }
  }

  std::map<int64_t, int64_t> handles;  // trace address -> model handle
  int64_t next_id = 0;
  std::map<int64_t, int64_t> ids;      // trace address -> event id
  for (const auto& e : evs) {
    if (e.action == "alloc") {
      const int64_t h = m.malloc(e.size);
      o.events.push_back({AllocatorEvent::alloc, next_id, e.size});
      ids[e.addr] = next_id++;
      if (h == CachingAllocatorModel::kOutOfMemory) {
        o.model_oom = true;
        break;
      }
      handles[e.addr] = h;
    } else if (e.action == "free_completed") {
      o.events.push_back({AllocatorEvent::free, ids.at(e.addr)});
      m.free(handles.at(e.addr));
      handles.erase(e.addr);
    } else if (e.action == "oom") {
      o.events.push_back({AllocatorEvent::alloc, next_id++, e.size});
      o.model_oom = m.malloc(e.size) == CachingAllocatorModel::kOutOfMemory;
      o.model_oom_at_trace_oom = o.model_oom;
      break;
    }
  }
  static const char* const kActionNames[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap"};
  MapOffsets model_maps;
  for (const auto& a : m.segment_actions()) {
    o.model_actions.emplace_back(kActionNames[a.kind], a.bytes);
    if (a.kind == SegmentAction::segment_map || a.kind == SegmentAction::segment_unmap) model_maps.add(a.address, a.bytes);
  }
  o.trace_map_offsets = std::move(trace_maps.out);
  o.model_map_offsets = std::move(model_maps.out);
  o.model_peak_reserved = m.stats().reserved_bytes.peak;
  o.model_peak_allocated = m.stats().allocated_bytes.peak;
  o.model_retries = m.stats().num_alloc_retries;
  return o;
}

// "" when the two action lists agree, else where they first differ.
std::string first_mismatch(const TraceOutcome& o) {
  const size_t n = std::min(o.trace_actions.size(), o.model_actions.size());
  for (size_t i = 0; i < n; ++i) {
    if (o.trace_actions[i] != o.model_actions[i]) {
      return "action " + std::to_string(i) + ": trace " + o.trace_actions[i].first + " " +
             std::to_string(o.trace_actions[i].second) + ", model " + o.model_actions[i].first + " " +
             std::to_string(o.model_actions[i].second);
    }
  }
  if (o.trace_actions.size() != o.model_actions.size()) {
    return "trace has " + std::to_string(o.trace_actions.size()) + " segment actions, model " +
           std::to_string(o.model_actions.size());
  }
  return "";
}

const std::vector<std::string> kTraces = {
    "l-qwen05-amp-gc",           "l-gpt2-amp",
    "l-llama1b-bf16-gc-16k",     "l-qwen3-1.7b-bf16-gc",
    "l-qwen05-amp-gc-cap11GiB-b1", "l-qwen05-amp-gc-cap11GiB-b2",
    "l-gpt2-amp-cap11GiB-b6",    "l-gpt2-amp-cap11GiB-b7",
    // Non-default PYTORCH_CUDA_ALLOC_CONF (the file's alloc_conf), fresh processes.
    "l-gpt2-amp-expandable_segments_True", "l-qwen05-amp-gc-expandable_segments_True",
    "l-gpt2-amp-max_split_size_mb_128", "l-gpt2-amp-roundup_power2_divisions_4",
    "l-gpt2-amp-garbage_collection_threshold_0_6_max_split_size_mb_256",
    // PEFT LoRA and torch.compile'd loss (tools/gpu/session-knobs.sh, a later session).
    "k-llama1b-bf16-lora-gc", "k-llama1b-bf16-lora-gc-bf16ad", "k-llama1b-bf16-lora", "k-qwen05-amp-lora-gc",
    "k-llama1b-bf16-ce-own", "k-llama1b-bf16-ce-compiled",
    // Held out from the LoRA replay's development (tools/gpu/session-holdout.sh).
    "h-llama1b-amp-lora-qv-gc", "h-qwen05-bf16-lora-gc-expandable_segments_True"};

}  // namespace

TEST_CASE("allocator traces: the model makes the H200's segments, in order, and its reserved peak") {
  for (const auto& name : kTraces) {
    CAPTURE(name);
    const TraceOutcome o = replay_trace(name, true);
    const std::string mismatch = first_mismatch(o);
    MESSAGE(name << ": " << o.trace_actions.size() << " segment actions, "
                 << (mismatch.empty() ? "all equal" : "first mismatch at " + mismatch) << "; peak reserved trace "
                 << o.trace_peak_reserved << " model " << o.model_peak_reserved << "; peak allocated trace "
                 << o.trace_peak_allocated << " model " << o.model_peak_allocated << "; retries trace "
                 << o.trace_retries << " model " << o.model_retries << "; oom trace " << o.trace_oom << " model "
                 << o.model_oom);
    CHECK(mismatch == "");
    CHECK(o.model_map_offsets == o.trace_map_offsets);
    CHECK(o.model_peak_reserved == o.trace_peak_reserved);
    CHECK(o.model_peak_allocated == o.trace_peak_allocated);
    CHECK(o.model_oom == o.trace_oom);
    CHECK(o.model_oom_at_trace_oom == o.trace_oom);
    CHECK(o.model_retries == o.trace_retries);
  }
}

TEST_CASE("allocator traces: with the model's own addresses the segments still match") {
  // Addresses only break ties between equal-size cached blocks (BlockComparatorSize); the bump
  // addresses keep the trace's order of creation but not its layout.
  for (const auto& name : kTraces) {
    CAPTURE(name);
    const TraceOutcome o = replay_trace(name, false);
    const std::string mismatch = first_mismatch(o);
    MESSAGE(name << " (bump addresses): " << (mismatch.empty() ? "all equal" : "first mismatch at " + mismatch)
                 << "; peak reserved trace " << o.trace_peak_reserved << " model " << o.model_peak_reserved);
  }
}

TEST_CASE("allocator traces: the out-of-memory boundary separates the runs that fit 11 GiB from those that did not") {
  // find_oom_boundary replays the trace's requests from an empty allocator (the pre-existing
  // empty 2 MiB small segment is then made on the first small request instead) under a fraction
  // cap, bisecting in 2 MiB steps.
  const std::vector<std::pair<std::string, bool>> runs = {{"l-qwen05-amp-gc-cap11GiB-b1", true},
                                                          {"l-qwen05-amp-gc-cap11GiB-b2", false},
                                                          {"l-gpt2-amp-cap11GiB-b6", true},
                                                          {"l-gpt2-amp-cap11GiB-b7", false}};
  for (const auto& run : runs) {
    const std::string& name = run.first;
    const bool ran = run.second;  // what the H200 did under the cap
    CAPTURE(name);
    const TraceOutcome o = replay_trace(name, true);
    AllocatorConfig unlimited = o.config;
    unlimited.capacity = 0;
    const int64_t boundary = find_oom_boundary(o.events, unlimited);
    const ReplayResult free_run = replay(o.events, unlimited);
    MESSAGE(name << ": boundary " << boundary << " B (" << static_cast<double>(boundary) / GiB << " GiB), cap "
                 << o.config.capacity << ", uncapped peak reserved " << free_run.peak_reserved);
    if (ran) {
      CHECK(boundary <= o.config.capacity);
    } else {
      CHECK(boundary > o.config.capacity);
    }
    CHECK(boundary <= free_run.peak_reserved);
    // The boundary runs and 2 MiB less does not.
    AllocatorConfig at = o.config;
    at.capacity = boundary;
    CHECK(replay(o.events, at).ran);
    at.capacity = boundary - 2 * MiB;
    CHECK_FALSE(replay(o.events, at).ran);
  }
}
