// The lean replay engine (allocator_fast.h). Each step is the CachingAllocatorModel step of the
// same name in allocator.cpp, for the settings covered (no expandable segments, max_split_size or
// garbage collection, one stream); the differences are only in how the state is kept:
// - a pool's cached blocks are indexed by size: the distinct sizes in a sorted vector, and per
//   size the blocks' addresses, highest first, so that best fit (the smallest size that fits,
//   then the lowest address, as c10's BlockComparatorSize orders them) is a binary search over a
//   few dozen sizes and a pop from the back. A step's replay holds a few hundred cached blocks of
//   a few dozen sizes at a time; the model's std::set of them cost most of its time.
// - blocks carry only what these rules read (no requested bytes, GC stamps or mapping state).
#include "estimator/allocator_fast.h"

#include <algorithm>
#include <memory>

#include "estimator/error.h"

namespace memplan::fast_replay {

namespace {

struct Block {
  int64_t ptr = 0;
  int64_t size = 0;
  int32_t prev = -1;  // the neighbours in the segment, by address (-1: the segment's end)
  int32_t next = -1;
  bool small = false;
  bool allocated = false;
};

// The cached blocks of one pool.
class SizeIndex {
  // The first of sizes_ not below `size`: a pool holds a few dozen sizes at a time, where a scan
  // beats a binary search's unpredictable branches.
  std::vector<int64_t>::iterator first_not_below(int64_t size) {
    if (sizes_.size() > 32) return std::lower_bound(sizes_.begin(), sizes_.end(), size);
    auto it = sizes_.begin();
    while (it != sizes_.end() && *it < size) ++it;
    return it;
  }

 public:
  // The cached block with the smallest size >= `size` (then the lowest address), taken out of the
  // index; -1 when there is none.
  int32_t take_best_fit(int64_t size) {
    const auto it = first_not_below(size);
    if (it == sizes_.end()) return -1;
    const size_t i = static_cast<size_t>(it - sizes_.begin());
    Bucket& b = buckets_[static_cast<size_t>(bucket_of_[i])];
    const int32_t id = b.entries.back().id;
    b.entries.pop_back();
    if (b.entries.empty()) drop(i);
    return id;
  }
  void insert(const Block& x, int32_t id) {
    const auto it = first_not_below(x.size);
    const size_t i = static_cast<size_t>(it - sizes_.begin());
    int32_t bi;
    if (it != sizes_.end() && *it == x.size) {
      bi = bucket_of_[i];
    } else {
      if (spare_.empty()) {
        bi = static_cast<int32_t>(buckets_.size());
        buckets_.emplace_back();
      } else {
        bi = spare_.back();
        spare_.pop_back();
      }
      sizes_.insert(it, x.size);
      bucket_of_.insert(bucket_of_.begin() + static_cast<std::ptrdiff_t>(i), bi);
    }
    std::vector<Entry>& e = buckets_[static_cast<size_t>(bi)].entries;
    // Highest address first: the best fit is at the back.
    const auto at = std::lower_bound(e.begin(), e.end(), x.ptr, [](const Entry& a, int64_t p) { return a.ptr > p; });
    e.insert(at, Entry{x.ptr, id});
  }
  // REQUIRES: the block is in the index.
  void erase(const Block& x) {
    const auto it = first_not_below(x.size);
    MEMPLAN_CHECK(it != sizes_.end() && *it == x.size, "fast replay: erasing a block that is not cached");
    const size_t i = static_cast<size_t>(it - sizes_.begin());
    std::vector<Entry>& e = buckets_[static_cast<size_t>(bucket_of_[i])].entries;
    const auto at = std::lower_bound(e.begin(), e.end(), x.ptr, [](const Entry& a, int64_t p) { return a.ptr > p; });
    MEMPLAN_CHECK(at != e.end() && at->ptr == x.ptr, "fast replay: erasing a block that is not cached");
    e.erase(at);
    if (e.empty()) drop(i);
  }
  // Every cached block's id (release_cached_blocks walks them all).
  void ids(std::vector<int32_t>& out) const {
    for (const int32_t bi : bucket_of_)
      for (const Entry& x : buckets_[static_cast<size_t>(bi)].entries) out.push_back(x.id);
  }

 private:
  struct Entry {
    int64_t ptr;
    int32_t id;
  };
  struct Bucket {
    std::vector<Entry> entries;
  };
  void drop(size_t i) {  // the size at sizes_[i] has no cached block left
    spare_.push_back(bucket_of_[i]);
    sizes_.erase(sizes_.begin() + static_cast<std::ptrdiff_t>(i));
    bucket_of_.erase(bucket_of_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  std::vector<int64_t> sizes_;     // distinct sizes with cached blocks, ascending
  std::vector<int32_t> bucket_of_;  // per entry of sizes_: its bucket
  std::vector<Bucket> buckets_;     // kept when emptied (spare_), with their capacity
  std::vector<int32_t> spare_;
};

class Engine;

// The replays capped at other capacities, forked from an uncapped one: each equals the uncapped
// replay until the first new segment that takes reserved memory past its capacity, where the engine
// and the live blocks are copied, just before that event, for the capped replay to go on from.
struct Forks {
  struct Fork {
    int64_t capacity = 0;
    size_t at = 0;                   // the event the copy was made before
    std::unique_ptr<Engine> engine;  // null until the uncapped replay gets there
    std::vector<int32_t> live;
  };
  std::vector<Fork> forks;
  size_t event = 0;                         // the event being replayed
  const std::vector<int32_t>* live = nullptr;  // its live blocks
  void check(const Engine& e, int64_t reserved, int64_t bytes);
};

class Engine {
 public:
  explicit Engine(const AllocatorConfig& config)
      : config_(config), plain_rounding_(config.roundup_power2_divisions.empty()), capacity_(config.capacity) {}
  Engine(const Engine&) = default;
  // A copy for a fork, capped at `capacity`.
  Engine(const Engine& e, int64_t capacity) : Engine(e) {
    capacity_ = capacity;
    forks_ = nullptr;
  }
  void watch(Forks* f) { forks_ = f; }

  // CachingAllocatorModel::malloc_block: the block's id, or -1 for out of memory.
  int32_t malloc(int64_t bytes) {
    MEMPLAN_CHECK(bytes >= 0, "allocator model: negative allocation");
    // round_request; without rounding divisions (PyTorch's default) the next multiple of 512.
    const int64_t size = plain_rounding_ ? std::max(kAllocMinBlockSize, (bytes + kAllocMinBlockSize - 1) / kAllocMinBlockSize * kAllocMinBlockSize)
                                         : round_request(bytes, config_);
    const bool small = size <= kAllocSmallSize;
    SizeIndex& pool = small ? small_ : large_;
    int32_t id = pool.take_best_fit(size);  // get_free_block
    if (id < 0) {
      const int64_t segment = CachingAllocatorModel::allocation_size(size);
      // alloc_block; release_available_cached_blocks does nothing without max_split_size; then
      // release_cached_blocks (large pool, then small) and one counted retry.
      id = new_segment(segment, small);
      if (id < 0) {
        release_cached(large_);
        release_cached(small_);
        ++retries_;
        id = new_segment(segment, small);
        if (id < 0) return -1;
      }
    }
    // alloc_found_block with should_split: the front of the block is handed out, the rest cached.
    Block& x = blocks_[static_cast<size_t>(id)];
    const int64_t remaining = x.size - size;
    if (small ? remaining >= kAllocMinBlockSize : remaining > kAllocSmallSize) {
      const int32_t rest = id;
      id = new_block();
      Block& r = blocks_[static_cast<size_t>(rest)];
      Block& a = blocks_[static_cast<size_t>(id)];
      a.ptr = r.ptr;
      a.size = size;
      a.small = small;
      a.prev = r.prev;
      if (a.prev >= 0) blocks_[static_cast<size_t>(a.prev)].next = id;
      a.next = rest;
      r.prev = id;
      r.ptr += size;
      r.size -= size;
      pool.insert(r, rest);
    }
    Block& a = blocks_[static_cast<size_t>(id)];
    a.allocated = true;
    allocated_ += a.size;
    allocated_peak_ = std::max(allocated_peak_, allocated_);
    return id;
  }

  // CachingAllocatorModel::free_block: merge with free neighbours, then cache.
  void free(int32_t id) {
    Block& x = blocks_[static_cast<size_t>(id)];
    x.allocated = false;
    allocated_ -= x.size;
    SizeIndex& pool = x.small ? small_ : large_;
    const int32_t prev = x.prev;
    if (prev >= 0 && !blocks_[static_cast<size_t>(prev)].allocated) {
      Block& p = blocks_[static_cast<size_t>(prev)];
      pool.erase(p);
      x.ptr = p.ptr;
      x.size += p.size;
      x.prev = p.prev;
      if (x.prev >= 0) blocks_[static_cast<size_t>(x.prev)].next = id;
      delete_block(prev);
    }
    const int32_t next = x.next;
    if (next >= 0 && !blocks_[static_cast<size_t>(next)].allocated) {
      Block& n = blocks_[static_cast<size_t>(next)];
      pool.erase(n);
      x.size += n.size;
      x.next = n.next;
      if (x.next >= 0) blocks_[static_cast<size_t>(x.next)].prev = id;
      delete_block(next);
    }
    pool.insert(x, id);
  }

  void reset_peaks() {
    reserved_peak_ = reserved_;
    allocated_peak_ = allocated_;
  }
  int64_t reserved_peak() const { return reserved_peak_; }
  int64_t allocated_peak() const { return allocated_peak_; }
  int64_t retries() const { return retries_; }

 private:
  int32_t new_block() {
    if (!free_ids_.empty()) {
      const int32_t id = free_ids_.back();
      free_ids_.pop_back();
      blocks_[static_cast<size_t>(id)] = Block{};
      return id;
    }
    blocks_.emplace_back();
    return static_cast<int32_t>(blocks_.size() - 1);
  }
  void delete_block(int32_t id) { free_ids_.push_back(id); }

  // alloc_block: a new segment unless it takes reserved memory past the capacity (either kind of
  // capacity refuses the same segments when there are no expandable segments).
  int32_t new_segment(int64_t bytes, bool small) {
    if (forks_) forks_->check(*this, reserved_, bytes);
    if (capacity_ > 0 && reserved_ + bytes > capacity_) return -1;
    const int32_t id = new_block();
    Block& b = blocks_[static_cast<size_t>(id)];
    b.ptr = next_address_;  // Impl::bump: segment sizes are already multiples of 2 MiB
    next_address_ += (bytes + kAllocRoundLarge - 1) / kAllocRoundLarge * kAllocRoundLarge;
    b.size = bytes;
    b.small = small;
    reserved_ += bytes;
    reserved_peak_ = std::max(reserved_peak_, reserved_);
    return id;
  }

  // release_blocks: every cached block that is a whole segment goes back (cudaFree).
  void release_cached(SizeIndex& pool) {
    scratch_.clear();
    pool.ids(scratch_);
    for (const int32_t id : scratch_) {
      const Block& b = blocks_[static_cast<size_t>(id)];
      if (b.prev >= 0 || b.next >= 0) continue;
      pool.erase(b);
      reserved_ -= b.size;
      delete_block(id);
    }
  }

  AllocatorConfig config_;  // round_request's settings
  bool plain_rounding_;     // no roundup_power2_divisions
  int64_t capacity_;
  Forks* forks_ = nullptr;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_ids_;
  std::vector<int32_t> scratch_;
  SizeIndex small_, large_;
  int64_t next_address_ = int64_t{1} << 40;  // Impl::next_address's start
  int64_t reserved_ = 0, reserved_peak_ = 0, allocated_ = 0, allocated_peak_ = 0, retries_ = 0;
};

void Forks::check(const Engine& e, int64_t reserved, int64_t bytes) {
  for (Fork& f : forks)
    if (!f.engine && reserved + bytes > f.capacity) {
      f.engine = std::make_unique<Engine>(e, f.capacity);
      f.at = event;
      f.live = *live;
    }
}

// The replay loop from event `from` on (`live`: slot -> block): false when an event is on a stream
// other than 0.
bool drive(Engine& engine, std::vector<int32_t>& live, const std::vector<AllocatorEvent>& events, const std::vector<int32_t>& slot,
           size_t from, int64_t reset_peaks_at, Forks* forks, ReplayResult& r) {
  for (size_t i = from; i < events.size(); ++i) {
    if (static_cast<int64_t>(i) == reset_peaks_at) engine.reset_peaks();
    const AllocatorEvent& e = events[i];
    if (e.stream != 0) return false;
    int32_t& block = live[static_cast<size_t>(slot[i])];
    if (e.kind == AllocatorEvent::alloc) {
      if (forks) forks->event = i;
      const int32_t b = engine.malloc(e.bytes);
      if (b < 0) {
        r.ran = false;
        r.oom_event = static_cast<int64_t>(i);
        break;
      }
      block = b;
    } else {
      MEMPLAN_CHECK(block >= 0, "allocator replay: free of an id that is not allocated");
      engine.free(block);
      block = -1;
    }
  }
  r.peak_reserved = engine.reserved_peak();
  r.peak_allocated = engine.allocated_peak();
  r.num_alloc_retries = engine.retries();
  return true;
}

}  // namespace

bool covers(const AllocatorConfig& c) {
  return !c.expandable_segments && c.max_split_size == kAllocUnlimited && c.gc_threshold == 0.0 && c.capacity >= 0;
}

bool run(const std::vector<AllocatorEvent>& events, const std::vector<int32_t>& slot, size_t slots, const AllocatorConfig& config,
         int64_t reset_peaks_at, ReplayResult& out) {
  MEMPLAN_CHECK(covers(config), "fast replay: settings it does not cover");
  Engine engine(config);
  std::vector<int32_t> live(slots, -1);  // slot -> block
  ReplayResult r;
  if (!drive(engine, live, events, slot, 0, reset_peaks_at, nullptr, r)) return false;
  out = std::move(r);
  return true;
}

bool run_with_caps(const std::vector<AllocatorEvent>& events, const std::vector<int32_t>& slot, size_t slots, const AllocatorConfig& config,
                   int64_t reset_peaks_at, const std::vector<int64_t>& capacities, ReplayResult& out, std::vector<ReplayResult>& capped,
                   bool first_that_runs) {
  MEMPLAN_CHECK(covers(config) && config.capacity == 0, "fast replay: settings it does not cover");
  Engine engine(config);
  std::vector<int32_t> live(slots, -1);
  Forks forks;
  for (int64_t c : capacities) {
    MEMPLAN_CHECK(c > 0, "fast replay: a fork's capacity is positive");
    forks.forks.push_back({c, 0, nullptr, {}});
  }
  forks.live = &live;
  engine.watch(&forks);
  ReplayResult r;
  if (!drive(engine, live, events, slot, 0, reset_peaks_at, &forks, r)) return false;
  std::vector<ReplayResult> results;
  for (Forks::Fork& f : forks.forks) {
    ReplayResult c;
    if (!f.engine) {  // never past its capacity: the capped replay is the uncapped one
      c = r;
    } else if (!drive(*f.engine, f.live, events, slot, f.at, reset_peaks_at, nullptr, c)) {
      return false;
    }
    results.push_back(std::move(c));
    if (first_that_runs && results.back().ran) break;
  }
  out = std::move(r);
  capped = std::move(results);
  return true;
}

}  // namespace memplan::fast_replay
