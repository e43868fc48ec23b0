// The caching-allocator model (allocator.h). Each function follows the DeviceCachingAllocator
// member of the same name in c10/cuda/CUDACachingAllocator.cpp; the comments cite the function
// and the tag. Rules as at v2.6.0 (line numbers in shared/reference/libtorch-notes.md §1; the
// function bodies were read in a main-branch copy of that file, pytorch/pytorch@001074d, which
// predates only max_non_split_rounding), plus the expandable-block skips of pytorch/pytorch#134338.
// PyTorch 2.11 behaves the same on the eight recorded traces (tests/estimator/allocator_test.cpp).
// Blocks live in an arena addressed by index; the pools are ordered sets of (stream, size, address)
// keys naming them, as c10's BlockPool std::sets are.
#include "estimator/allocator.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "estimator/allocator_fast.h"
#include "estimator/error.h"

namespace memplan {

void AllocatorStat::add(int64_t v) {
  current += v;
  peak = std::max(peak, current);
}

namespace {

// One block: a piece of a segment, allocated or free (a cached block), or for expandable segments
// possibly an unmapped stretch of reserved address space (Block in CUDACachingAllocator.cpp).
struct Block {
  int64_t ptr = 0;
  int64_t size = 0;
  int64_t requested = 0;
  int stream = 0;
  bool small = false;
  bool allocated = false;
  bool mapped = true;
  bool in_use = true;  // arena slot holds a block
  int prev = -1;
  int next = -1;
  int expandable = -1;      // index of the expandable segment, or -1
  int64_t gc_count_base = 0;  // pool's get_free_block calls when the block was cached
};

// Expandable segment: a stretch of address space mapped in pages (2 MiB for the small pool,
// 20 MiB for the large one: ExpandableSegment, Note [Expandable Segments], v2.6.0).
struct ExpandableSegment {
  int64_t base = 0;
  int64_t page = 0;
  std::vector<char> mapped;  // per page
  int64_t pages() const { return static_cast<int64_t>(mapped.size()); }
};

// Address space reserved per expandable segment. Upstream reserves 1 1/8 of the device's memory;
// the size only matters as "more than the capacity", so a fixed 1 TiB (rounded to pages) stands in.
constexpr int64_t kExpandableAddressSpace = int64_t{1} << 40;

int floor_log2(uint64_t v) { return 63 - __builtin_clzll(v); }

// Memory for the pools' set nodes: one free list per size (std::set asks for one node at a time,
// all of a size), carved from 16 KiB chunks that go back when the model does. A replay inserts and
// erases a node on most mallocs and frees; operator new for each cost more than the lookups.
class NodeArena {
 public:
  NodeArena() = default;
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;
  void* allocate(size_t bytes) {
    const size_t c = size_class(bytes);
    if (c >= kClasses) return ::operator new(bytes);
    if (FreeNode* n = free_[c]) {
      free_[c] = n->next;
      return n;
    }
    const size_t size = (c + 1) * kAlign;
    if (chunks_.empty() || used_ + size > kChunk) {
      chunks_.emplace_back(new Chunk);  // not value-initialised: no need to zero it
      used_ = 0;
    }
    void* p = chunks_.back()->bytes + used_;
    used_ += size;
    return p;
  }
  void deallocate(void* p, size_t bytes) {
    const size_t c = size_class(bytes);
    if (c >= kClasses) return ::operator delete(p);
    free_[c] = new (p) FreeNode{free_[c]};
  }

 private:
  static constexpr size_t kAlign = alignof(std::max_align_t);
  static constexpr size_t kClasses = 16;  // nodes up to 16 * kAlign bytes; larger ones from operator new
  static constexpr size_t kChunk = 16 << 10;
  struct FreeNode {
    FreeNode* next;
  };
  struct Chunk {
    alignas(std::max_align_t) unsigned char bytes[kChunk];
  };
  static size_t size_class(size_t bytes) { return (std::max(bytes, sizeof(FreeNode)) + kAlign - 1) / kAlign - 1; }
  FreeNode* free_[kClasses] = {};
  std::vector<std::unique_ptr<Chunk>> chunks_;
  size_t used_ = 0;
};

template <class T>
struct ArenaAllocator {
  using value_type = T;
  NodeArena* arena;
  explicit ArenaAllocator(NodeArena* a) : arena(a) {}
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>& o) : arena(o.arena) {}  // NOLINT: rebinding converts implicitly
  T* allocate(size_t n) { return static_cast<T*>(arena->allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { arena->deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const ArenaAllocator<U>& o) const { return arena == o.arena; }
  template <class U>
  bool operator!=(const ArenaAllocator<U>& o) const { return arena != o.arena; }
};

// The blocks of one pool set in the order of c10's comparator: BlockComparatorSize (stream, size,
// address) when kBySize, else BlockComparatorAddress (stream, address). The set holds copies of
// the blocks' keys, so a lookup compares values instead of fetching each block from the arena, and
// its nodes come from the model's NodeArena. As with c10's
// std::set, a block's size, address or stream change only while it is out of the set.
template <bool kBySize>
class BlockSet {
 public:
  struct Key {
    int stream;
    int id;
    int64_t size;
    int64_t ptr;
  };
  struct Less {
    bool operator()(const Key& l, const Key& r) const {
      if (l.stream != r.stream) return l.stream < r.stream;
      if (kBySize && l.size != r.size) return l.size < r.size;
      return l.ptr < r.ptr;
    }
  };
  using Set = std::set<Key, Less, ArenaAllocator<Key>>;
  using const_iterator = typename Set::const_iterator;

  explicit BlockSet(NodeArena* nodes) : keys_(Less{}, ArenaAllocator<Key>(nodes)) {}
  static Key key(const Block& b, int id) { return Key{b.stream, id, b.size, b.ptr}; }

  const_iterator begin() const { return keys_.begin(); }
  const_iterator end() const { return keys_.end(); }
  // The first block not ordered before (stream, size, ptr) (size ignored when ordered by address).
  const_iterator lower_bound(int stream, int64_t size, int64_t ptr) const { return keys_.lower_bound(Key{stream, -1, size, ptr}); }
  // False (and nothing inserted) when a block with the same key is in the set.
  bool insert(const Block& b, int id) { return keys_.insert(key(b, id)).second; }
  // Erases the block with the key of `b` (std::set::erase(key)); nothing when there is none.
  void erase(const Block& b, int id) { keys_.erase(key(b, id)); }
  const_iterator erase(const_iterator it) { return keys_.erase(it); }

 private:
  Set keys_;
};

}  // namespace

struct CachingAllocatorModel::Impl {
  NodeArena set_nodes;  // the pools' set nodes (declared before the pools, which give them back)
  std::vector<Block> blocks;
  std::vector<int> free_slots;

  // BlockComparatorSize / BlockComparatorAddress (v2.6.0): stream, then size, then address.
  struct Pool {
    BlockSet<true> cached;     // BlockPool::blocks
    BlockSet<false> unmapped;  // BlockPool::unmapped
    bool small;
    int64_t get_free_block_calls = 0;
    Pool(NodeArena* nodes, bool is_small) : cached(nodes), unmapped(nodes), small(is_small) {}
  };
  Pool small_pool{&set_nodes, true};
  Pool large_pool{&set_nodes, false};
  std::unordered_map<int64_t, int> active;  // handle (address) -> block
  std::vector<ExpandableSegment> expandable;
  int64_t reserved = 0;  // total_allocated_memory
  int64_t next_address = int64_t{1} << 40;

  Pool& pool_of(const Block& b) { return b.small ? small_pool : large_pool; }
  int new_block(int64_t ptr, int64_t size, int stream, bool small) {
    Block nb;
    nb.ptr = ptr;
    nb.size = size;
    nb.stream = stream;
    nb.small = small;
    if (!free_slots.empty()) {
      const int id = free_slots.back();
      free_slots.pop_back();
      blocks[id] = nb;
      return id;
    }
    blocks.push_back(nb);
    return static_cast<int>(blocks.size()) - 1;
  }
  void delete_block(int id) {
    blocks[id].in_use = false;
    free_slots.push_back(id);
  }
  bool is_split(int id) const { return blocks[id].prev >= 0 || blocks[id].next >= 0; }
  int64_t bump(int64_t bytes) {
    const int64_t at = next_address;
    next_address += (bytes + kAllocRoundLarge - 1) / kAllocRoundLarge * kAllocRoundLarge;
    return at;
  }
  // BlockPool::insert_into_blocks: caching a block stamps its GC age base.
  void cache(int id) {
    Pool& p = pool_of(blocks[id]);
    blocks[id].gc_count_base = p.get_free_block_calls;
    const bool inserted = p.cached.insert(blocks[id], id);
    MEMPLAN_CHECK(inserted, "allocator model: block cached twice");
  }
};

namespace {
using Impl = CachingAllocatorModel::Impl;
}

CachingAllocatorModel::CachingAllocatorModel(AllocatorConfig config) : impl_(new Impl), config_(std::move(config)) {
  MEMPLAN_CHECK(config_.capacity >= 0, "allocator model: negative capacity");
  MEMPLAN_CHECK(config_.max_split_size > 0, "allocator model: max_split_size must be positive");
}

CachingAllocatorModel::~CachingAllocatorModel() { delete impl_; }

// round_size and roundup_power2_next_division (CUDACachingAllocator.cpp, v2.6.0; inline
// get_round_size in c10/core/CachingDeviceAllocator.h on later main): below 512 B -> 512 B; with
// d > 1 divisions for the size's interval and size > 512 * d, the next of d equal steps between
// the two surrounding powers of two; otherwise the next multiple of 512.
int64_t CachingAllocatorModel::round_size(int64_t bytes) const { return round_request(bytes, config_); }

int64_t round_request(int64_t bytes, const AllocatorConfig& config) {
  if (bytes < kAllocMinBlockSize) return kAllocMinBlockSize;
  const auto& table = config.roundup_power2_divisions;
  int64_t divisions = 0;
  if (table.size() == 1) {
    divisions = table[0];
  } else if (!table.empty()) {
    // CUDAAllocatorConfig::roundup_power2_divisions(size): intervals start at 1 MiB (2^20).
    const int log_size = floor_log2(static_cast<uint64_t>(bytes));
    size_t index = log_size > 20 ? static_cast<size_t>(log_size - 20) : 0;
    index = std::min<size_t>(index, 15);
    divisions = index < table.size() ? table[index] : 0;
  }
  if (divisions > 1 && bytes > kAllocMinBlockSize * divisions) {
    const auto u = static_cast<uint64_t>(bytes);
    if ((u & (u - 1)) == 0) return bytes;
    const uint64_t floor = uint64_t{1} << floor_log2(u);
    const uint64_t step = floor >> floor_log2(static_cast<uint64_t>(divisions));
    if (step == 0) return static_cast<int64_t>(floor << 1);
    const uint64_t down = u & ~(step - 1);
    return static_cast<int64_t>(down == u ? u : down + step);
  }
  return (bytes + kAllocMinBlockSize - 1) / kAllocMinBlockSize * kAllocMinBlockSize;
}

// get_allocation_size (v2.6.0): small -> 2 MiB segment; < 10 MiB -> 20 MiB; else 2 MiB multiple.
int64_t CachingAllocatorModel::allocation_size(int64_t rounded_bytes) {
  if (rounded_bytes <= kAllocSmallSize) return kAllocSmallBuffer;
  if (rounded_bytes < kAllocMinLargeAlloc) return kAllocLargeBuffer;
  return (rounded_bytes + kAllocRoundLarge - 1) / kAllocRoundLarge * kAllocRoundLarge;
}

namespace {

struct Request {
  int64_t size = 0;        // rounded
  int64_t alloc_size = 0;  // segment size on a miss
  int stream = 0;
  bool small = false;
  int block = -1;  // the block found or made
};

// The allocator's private steps, as free functions over the model's state.
struct Ops {
  Impl& m;
  const AllocatorConfig& cfg;
  AllocatorStats& st;
  std::vector<SegmentAction>& actions;
  const std::function<int64_t(int64_t)>& address_source;

  std::vector<Block>& b() { return m.blocks; }
  bool set_fraction() const { return cfg.capacity_is_fraction && cfg.capacity > 0; }
  bool gc_enabled() const { return set_fraction() && cfg.gc_threshold > 0.0; }
  Impl::Pool& pool(bool small) { return small ? m.small_pool : m.large_pool; }

  // get_free_block (v2.6.0 …:2560-2627): the smallest cached block of this stream that fits
  // (lower_bound on stream, size, address); with expandable segments a block is judged by the size
  // it can grow to; oversize blocks only for oversize requests, and then only up to
  // request + max_non_split_rounding.
  bool get_free_block(Request& r) {
    Impl::Pool& p = pool(r.small);
    if (gc_enabled()) ++p.get_free_block_calls;
    auto it = p.cached.lower_bound(r.stream, r.size, 0);
    if (it == p.cached.end() || it->stream != r.stream) return false;
    if (b()[it->id].expandable >= 0) {
      if (cfg.expandable_segments) {
        auto expandable_size = [this](int id) {
          const Block& x = b()[id];
          return x.size + (x.next >= 0 && !b()[x.next].mapped ? b()[x.next].size : 0);
        };
        auto next = std::next(it);
        while (b()[it->id].expandable >= 0 && next != p.cached.end() && next->stream == r.stream &&
               expandable_size(next->id) < expandable_size(it->id)) {
          it = next++;
        }
      } else {
        do {
          ++it;
        } while (it != p.cached.end() && b()[it->id].expandable >= 0 && it->stream == r.stream);
        if (it == p.cached.end() || it->stream != r.stream) return false;
      }
    }
    const int64_t found = it->size;
    if (r.size < cfg.max_split_size && found >= cfg.max_split_size) return false;
    if (r.size >= cfg.max_split_size && found >= r.size + cfg.max_non_split_rounding) return false;
    r.block = it->id;
    p.cached.erase(it);
    return true;
  }

  // should_split (v2.6.0 …:2540-2548).
  bool should_split(int id, int64_t size) const {
    const Block& x = m.blocks[id];
    const int64_t remaining = x.size - size;
    if (x.small || cfg.expandable_segments) return remaining >= kAllocMinBlockSize;
    return size < cfg.max_split_size && remaining > kAllocSmallSize;
  }

  // try_merge_blocks (v2.6.0): absorbs a free neighbour with the same mapped state into dst.
  // REQUIRES: dst is in no pool set.
  int64_t try_merge(int dst, int src) {
    if (src < 0) return 0;
    Block& s = b()[src];
    if (s.allocated || s.mapped != b()[dst].mapped) return 0;
    Impl::Pool& p = m.pool_of(s);
    if (s.mapped) {
      p.cached.erase(s, src);
    } else {
      p.unmapped.erase(s, src);
    }
    Block& d = b()[dst];
    if (d.prev == src) {
      d.ptr = s.ptr;
      d.prev = s.prev;
      if (d.prev >= 0) b()[d.prev].next = dst;
    } else {
      d.next = s.next;
      if (d.next >= 0) b()[d.next].prev = dst;
    }
    const int64_t subsumed = s.size;
    d.size += subsumed;
    m.delete_block(src);
    return subsumed;
  }

  // free_block (v2.6.0): merge with free neighbours, then cache.
  void free_block(int id) {
    const int prev = b()[id].prev;
    const int next = b()[id].next;
    try_merge(id, prev);
    try_merge(id, next);
    m.cache(id);
  }

  void record(SegmentAction::Kind k, int64_t address, int64_t bytes, int stream) {
    actions.push_back(SegmentAction{k, address, bytes, stream});
  }

  // release_block (v2.6.0 …:3045-3069 area): cudaFree of a whole cached segment.
  void release_block(int id) {
    const Block x = b()[id];
    MEMPLAN_CHECK(x.expandable < 0 && x.prev < 0 && x.next < 0 && !x.allocated,
                  "allocator model: releasing a block that is not a whole free segment");
    pool(x.small).cached.erase(x, id);
    record(SegmentAction::segment_free, x.ptr, x.size, x.stream);
    m.reserved -= x.size;
    st.reserved_bytes.sub(x.size);
    st.segments.sub(1);
    ++st.num_device_free;
    m.delete_block(id);
  }

  // ExpandableSegment::map: maps the pages covering [ptr, ptr + size); all or nothing. Returns the
  // mapped range (its size 0 on failure: the device has no room, when the capacity stands for the
  // device's free memory).
  std::pair<int64_t, int64_t> es_map(int seg, int64_t ptr, int64_t size) {
    ExpandableSegment& e = m.expandable[seg];
    const int64_t begin = (ptr - e.base) / e.page;
    const int64_t end = std::min(e.pages(), (ptr + size - e.base + e.page - 1) / e.page);
    MEMPLAN_CHECK(e.base + begin * e.page == ptr, "allocator model: unaligned expandable map");
    const int64_t bytes = (end - begin) * e.page;
    if (bytes == 0) return {ptr, 0};
    if (!set_fraction() && cfg.capacity > 0 && m.reserved + bytes > cfg.capacity) return {ptr, 0};
    for (int64_t i = begin; i < end; ++i) {
      MEMPLAN_CHECK(!e.mapped[static_cast<size_t>(i)], "allocator model: page mapped twice");
      e.mapped[static_cast<size_t>(i)] = 1;
    }
    return {ptr, bytes};
  }

  // ExpandableSegment::unmap: unmaps the whole pages inside [ptr, ptr + size).
  std::pair<int64_t, int64_t> es_unmap(int seg, int64_t ptr, int64_t size) {
    ExpandableSegment& e = m.expandable[seg];
    const int64_t begin = (ptr - e.base + e.page - 1) / e.page;
    const int64_t end = (ptr + size - e.base) / e.page;
    if (begin >= end) return {ptr, 0};
    for (int64_t i = begin; i < end; ++i) e.mapped[static_cast<size_t>(i)] = 0;
    return {e.base + begin * e.page, (end - begin) * e.page};
  }

  // find_expandable_block (v2.6.0): the lowest-address unmapped stretch of this stream (with the
  // free block just before it) that offers `size` bytes of free-or-unmapped space, else a new
  // segment whose whole address space is one unmapped block.
  int find_expandable_block(int stream, bool small, int64_t size) {
    Impl::Pool& p = pool(small);
    auto allocatable = [this](int id) { return id >= 0 && !b()[id].allocated; };
    auto has_room = [&](int id) {
      int64_t bytes = 0;
      while (bytes < size && allocatable(id)) {
        bytes += b()[id].size;
        id = b()[id].next;
      }
      return bytes >= size;
    };
    for (auto it = p.unmapped.lower_bound(stream, 0, INT64_MIN); it != p.unmapped.end() && it->stream == stream; ++it) {
      int c = it->id;
      if (allocatable(b()[c].prev)) c = b()[c].prev;
      if (has_room(c)) return c;
    }
    ExpandableSegment e;
    e.page = small ? kAllocSmallBuffer : kAllocLargeBuffer;
    const int64_t pages = (kExpandableAddressSpace + e.page - 1) / e.page;
    e.mapped.assign(static_cast<size_t>(pages), 0);
    e.base = m.bump(pages * e.page);
    m.expandable.push_back(std::move(e));
    const int c = m.new_block(m.expandable.back().base, pages * m.expandable.back().page, stream, small);
    b()[c].mapped = false;
    b()[c].expandable = static_cast<int>(m.expandable.size()) - 1;
    p.unmapped.insert(b()[c], c);
    return c;
  }

  // map_block (v2.6.0): maps the start of an unmapped block, leaves the rest unmapped after it,
  // merges the mapped part with a free neighbour and caches it.
  bool map_block(int id, int64_t size) {
    MEMPLAN_CHECK(!b()[id].mapped && size <= b()[id].size, "allocator model: map_block on a mapped block");
    const auto range = es_map(b()[id].expandable, b()[id].ptr, size);
    if (range.second == 0) return false;
    Impl::Pool& p = m.pool_of(b()[id]);
    p.unmapped.erase(b()[id], id);
    b()[id].mapped = true;
    if (range.second < b()[id].size) {
      const Block x = b()[id];
      const int rest = m.new_block(x.ptr + range.second, x.size - range.second, x.stream, x.small);
      b()[rest].mapped = false;
      b()[rest].expandable = x.expandable;
      b()[rest].prev = id;
      b()[rest].next = x.next;
      if (x.next >= 0) b()[x.next].prev = rest;
      b()[id].next = rest;
      p.unmapped.insert(b()[rest], rest);
      b()[id].size = range.second;
    }
    try_merge(id, b()[id].prev);
    try_merge(id, b()[id].next);
    m.cache(id);
    m.reserved += range.second;
    st.reserved_bytes.add(range.second);
    ++st.num_device_alloc;
    record(SegmentAction::segment_map, range.first, range.second, b()[id].stream);
    return true;
  }

  // try_allocate_expandable_block (v2.6.0): map pages until one free block of `size` exists.
  int try_allocate_expandable(int stream, bool small, int64_t size) {
    int c = find_expandable_block(stream, small, size);
    if (!b()[c].mapped && !map_block(c, std::min(b()[c].size, size))) return -1;
    while (b()[c].size < size) {
      const int64_t remaining = size - b()[c].size;
      const int nc = b()[c].next;
      if (!map_block(nc, std::min(remaining, b()[nc].size))) return -1;
      c = nc;
    }
    pool(small).cached.erase(b()[c], c);
    return c;
  }

  // alloc_block (v2.6.0 …:1221-1242 callers; the function itself): a retry is counted on entry;
  // a fraction cap refuses a segment that would take reserved memory past it; otherwise
  // cudaMalloc (or the expandable mapping) of alloc_size (of the rounded size for expandable).
  bool alloc_block(Request& r, bool is_retry) {
    if (is_retry) ++st.num_alloc_retries;
    const int64_t size = r.alloc_size;
    if (set_fraction() && m.reserved + size > cfg.capacity) return false;
    if (cfg.expandable_segments) {
      r.block = try_allocate_expandable(r.stream, r.small, r.size);
      return r.block >= 0;
    }
    if (!set_fraction() && cfg.capacity > 0 && m.reserved + size > cfg.capacity) return false;
    const int64_t address = address_source ? address_source(size) : m.bump(size);
    r.block = m.new_block(address, size, r.stream, r.small);
    m.reserved += size;
    st.reserved_bytes.add(size);
    st.segments.add(1);
    ++st.num_device_alloc;
    record(SegmentAction::segment_alloc, address, size, r.stream);
    return true;
  }

  // release_available_cached_blocks (v2.6.0; expandable blocks skipped as in
  // pytorch/pytorch#134338): with max_split_size set, free one cached
  // oversize block of at least max(request, max_split_size), else the largest oversize blocks
  // until that much is freed. Nothing to do without max_split_size.
  bool release_available_cached_blocks(const Request& r) {
    if (cfg.max_split_size == kAllocUnlimited) return false;
    Impl::Pool& p = pool(r.small);
    const int64_t target = std::max(r.size, cfg.max_split_size);
    auto it = p.cached.lower_bound(r.stream, target, 0);
    if (it == p.cached.end() || it->stream != r.stream || b()[it->id].expandable >= 0) {
      if (it == p.cached.begin()) return false;
      int64_t released = 0;
      --it;
      while (released < target && it->size >= cfg.max_split_size && it->stream == r.stream) {
        const int cur = it->id;
        const bool first = it == p.cached.begin();
        if (!first) --it;
        if (b()[cur].expandable < 0) {
          released += b()[cur].size;
          release_block(cur);
        }
        if (first) break;
      }
      return released >= target;
    }
    release_block(it->id);
    return true;
  }

  // unmap_block (v2.6.0): unmaps the whole pages of a free expandable block; the partial pages at
  // either end stay mapped as free blocks.
  void unmap_block(int id) {
    const auto range = es_unmap(b()[id].expandable, b()[id].ptr, b()[id].size);
    if (range.second == 0) return;
    Impl::Pool& p = m.pool_of(b()[id]);
    p.cached.erase(b()[id], id);
    const Block x = b()[id];
    const int64_t before = range.first - x.ptr;
    if (before > 0) {
      const int bf = m.new_block(x.ptr, before, x.stream, x.small);
      b()[bf].expandable = x.expandable;
      b()[bf].prev = x.prev;
      b()[bf].next = id;
      if (x.prev >= 0) b()[x.prev].next = bf;
      b()[id].prev = bf;
      m.cache(bf);
    }
    const int64_t after = x.size - before - range.second;
    if (after > 0) {
      const int af = m.new_block(range.first + range.second, after, x.stream, x.small);
      b()[af].expandable = x.expandable;
      b()[af].prev = id;
      b()[af].next = x.next;
      if (x.next >= 0) b()[x.next].prev = af;
      b()[id].next = af;
      m.cache(af);
    }
    b()[id].ptr = range.first;
    b()[id].size = range.second;
    b()[id].mapped = false;
    try_merge(id, b()[id].prev);
    try_merge(id, b()[id].next);
    p.unmapped.insert(b()[id], id);
    m.reserved -= range.second;
    st.reserved_bytes.sub(range.second);
    ++st.num_device_free;
    record(SegmentAction::segment_unmap, range.first, range.second, x.stream);
  }

  // release_blocks (v2.6.0): every cached block that is a whole segment is cudaFree'd; free
  // expandable blocks give back their whole pages, and a segment left entirely unmapped goes.
  void release_blocks(bool small) {
    Impl::Pool& p = pool(small);
    std::vector<int> to_unmap;
    for (auto it = p.cached.begin(); it != p.cached.end();) {
      const int id = it->id;
      ++it;
      if (b()[id].expandable >= 0) {
        to_unmap.push_back(id);
      } else if (b()[id].prev < 0 && b()[id].next < 0) {
        release_block(id);
      }
    }
    for (const int id : to_unmap) {
      unmap_block(id);
      if (b()[id].prev < 0 && b()[id].next < 0 && !b()[id].mapped) {
        p.unmapped.erase(b()[id], id);
        m.delete_block(id);  // release_expandable_segment: the address space goes back
      }
    }
  }

  // release_cached_blocks (v2.6.0 …:2859-2876): large pool first, then small.
  bool release_cached_blocks() {
    release_blocks(false);
    release_blocks(true);
    return true;
  }

  // garbage_collect_cached_blocks (v2.6.0 …:2629-2691): above threshold * cap, free whole cached
  // large-pool segments whose age (get_free_block calls since cached) is at least the average,
  // recomputing the average each round, until reserved is back under the threshold.
  void garbage_collect() {
    const auto threshold = static_cast<int64_t>(cfg.gc_threshold * static_cast<double>(cfg.capacity));
    if (m.reserved <= threshold) return;
    const int64_t target = m.reserved - threshold;
    Impl::Pool& p = m.large_pool;
    auto age = [&](int id) { return p.get_free_block_calls - b()[id].gc_count_base; };
    auto freeable = [&](int id) { return !m.is_split(id) && b()[id].expandable < 0; };
    int64_t total_age = 0;
    int64_t count = 0;
    for (const auto& k : p.cached) {
      const int id = k.id;
      if (freeable(id)) {
        total_age += age(id);
        ++count;
      }
    }
    if (count == 0) return;
    int64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && count > 0) {
      const double age_threshold = static_cast<double>(total_age) / static_cast<double>(count);
      freed = false;
      for (auto it = p.cached.begin(); it != p.cached.end();) {
        const int id = it->id;
        ++it;
        if (freeable(id) && static_cast<double>(age(id)) >= age_threshold) {
          freed = true;
          reclaimed += b()[id].size;
          total_age -= age(id);
          --count;
          release_block(id);
        }
      }
    }
  }

  // alloc_found_block (v2.6.0): split off the front of the block when should_split said so; the
  // remainder stays cached.
  int alloc_found_block(const Request& r, int64_t orig_size, bool split) {
    int id = r.block;
    if (split) {
      const int rest = id;
      id = m.new_block(b()[rest].ptr, r.size, r.stream, r.small);
      b()[id].expandable = b()[rest].expandable;
      b()[id].prev = b()[rest].prev;
      if (b()[id].prev >= 0) b()[b()[id].prev].next = id;
      b()[id].next = rest;
      b()[rest].prev = id;
      b()[rest].ptr += r.size;
      b()[rest].size -= r.size;
      m.cache(rest);
    }
    Block& x = b()[id];
    x.allocated = true;
    x.requested = orig_size;
    st.allocated_bytes.add(x.size);
    st.active_bytes.add(x.size);
    st.requested_bytes.add(orig_size);
    return id;
  }
};

}  // namespace

// malloc (v2.6.0 …:1185-1368): round, pick the pool, reuse a cached block; else GC (when set),
// a new segment, then freeing oversize cached blocks, then freeing every whole cached segment and
// one counted retry; then out of memory.
int64_t CachingAllocatorModel::malloc(int64_t bytes, int stream) {
  const int id = malloc_block(bytes, stream);
  if (id < 0) return kOutOfMemory;
  const int64_t handle = impl_->blocks[id].ptr;
  const bool inserted = impl_->active.emplace(handle, id).second;
  MEMPLAN_CHECK(inserted, "allocator model: two live blocks at one address");
  return handle;
}

int CachingAllocatorModel::malloc_block(int64_t bytes, int stream) {
  MEMPLAN_CHECK(bytes >= 0, "allocator model: negative allocation");
  Ops ops{*impl_, config_, stats_, actions_, address_source};
  Request r;
  r.size = round_size(bytes);
  r.small = r.size <= kAllocSmallSize;
  r.alloc_size = allocation_size(r.size);
  r.stream = stream;
  bool found = ops.get_free_block(r);
  if (!found) {
    if (ops.gc_enabled()) ops.garbage_collect();
    found = ops.alloc_block(r, false) || (ops.release_available_cached_blocks(r) && ops.alloc_block(r, false)) ||
            (ops.release_cached_blocks() && ops.alloc_block(r, true));
  }
  if (!found) {
    ++stats_.num_ooms;
    return -1;
  }
  return ops.alloc_found_block(r, bytes, ops.should_split(r.block, r.size));
}

// free -> free_block (v2.6.0): no cross-stream uses, so the free completes at once.
void CachingAllocatorModel::free(int64_t handle) {
  auto it = impl_->active.find(handle);
  MEMPLAN_CHECK(it != impl_->active.end(), "allocator model: free of an unknown handle");
  const int id = it->second;
  impl_->active.erase(it);
  free_block(id);
}

void CachingAllocatorModel::free_block(int id) {
  Block& x = impl_->blocks[id];
  x.allocated = false;
  stats_.allocated_bytes.sub(x.size);
  stats_.active_bytes.sub(x.size);
  stats_.requested_bytes.sub(x.requested);
  Ops ops{*impl_, config_, stats_, actions_, address_source};
  ops.free_block(id);
}

void CachingAllocatorModel::empty_cache() {
  Ops ops{*impl_, config_, stats_, actions_, address_source};
  ops.release_cached_blocks();
}

void CachingAllocatorModel::reset_peak_stats() {
  for (AllocatorStat* s : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.requested_bytes,
                           &stats_.active_bytes, &stats_.segments}) {
    s->peak = s->current;
  }
}

std::vector<int64_t> CachingAllocatorModel::seed_segment(int64_t address, int64_t bytes, bool small_pool, int stream,
                                                         const std::vector<std::pair<int64_t, int64_t>>& live_blocks) {
  MEMPLAN_CHECK(!config_.expandable_segments, "allocator model: seeding expandable segments is not modelled");
  MEMPLAN_CHECK(bytes > 0, "allocator model: empty seeded segment");
  Impl& m = *impl_;
  std::vector<int64_t> handles;
  std::vector<int> pieces;                 // in address order
  std::vector<bool> piece_live;
  int64_t cursor = 0;
  auto add_piece = [&](int64_t offset, int64_t size, bool live) {
    const int id = m.new_block(address + offset, size, stream, small_pool);
    if (!pieces.empty()) {
      m.blocks[id].prev = pieces.back();
      m.blocks[pieces.back()].next = id;
    }
    pieces.push_back(id);
    piece_live.push_back(live);
  };
  for (const auto& [offset, size] : live_blocks) {
    MEMPLAN_CHECK(offset >= cursor && size > 0 && offset + size <= bytes, "allocator model: bad seeded block");
    if (offset > cursor) add_piece(cursor, offset - cursor, false);
    add_piece(offset, size, true);
    cursor = offset + size;
  }
  if (cursor < bytes) add_piece(cursor, bytes - cursor, false);
  m.reserved += bytes;
  stats_.reserved_bytes.add(bytes);
  stats_.segments.add(1);
  for (size_t i = 0; i < pieces.size(); ++i) {
    Block& x = m.blocks[pieces[i]];
    if (piece_live[i]) {
      x.allocated = true;
      x.requested = x.size;
      m.active.emplace(x.ptr, pieces[i]);
      stats_.allocated_bytes.add(x.size);
      stats_.active_bytes.add(x.size);
      stats_.requested_bytes.add(x.size);
      handles.push_back(x.ptr);
    } else {
      m.cache(pieces[i]);
    }
  }
  return handles;
}

std::vector<SegmentInfo> CachingAllocatorModel::snapshot() const {
  const Impl& m = *impl_;
  std::vector<SegmentInfo> out;
  for (size_t i = 0; i < m.blocks.size(); ++i) {
    const Block& head = m.blocks[i];
    if (!head.in_use || !head.mapped) continue;
    // A segment starts at a block with no mapped predecessor (expandable: one per mapped run).
    if (head.prev >= 0 && m.blocks[static_cast<size_t>(head.prev)].mapped) continue;
    SegmentInfo s;
    s.address = head.ptr;
    s.small_pool = head.small;
    s.expandable = head.expandable >= 0;
    s.stream = head.stream;
    for (int id = static_cast<int>(i); id >= 0 && m.blocks[static_cast<size_t>(id)].mapped;
         id = m.blocks[static_cast<size_t>(id)].next) {
      const Block& x = m.blocks[static_cast<size_t>(id)];
      s.bytes += x.size;
      if (x.allocated) s.allocated_bytes += x.size;
      s.blocks.emplace_back(x.size, x.allocated);
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return out;
}

namespace {

// ConfigTokenizer (c10/core/AllocatorConfig.h; lexArgs before 2.8): ',', ':', '[' and ']' are
// tokens of their own, spaces are dropped, everything else runs together into words.
std::vector<std::string> lex_alloc_conf(const std::string& conf) {
  std::vector<std::string> out;
  std::string word;
  for (const char c : conf) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) out.push_back(std::move(word));
      word.clear();
      out.emplace_back(1, c);
    } else if (c != ' ') {
      word += c;
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

struct AllocConfParser {
  const std::string& conf;
  std::vector<std::string> tok;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(Where::at_flag("PYTORCH_CUDA_ALLOC_CONF"), message + " (in '" + conf + "')",
                     "the format is key:value,key:value (c10/core/AllocatorConfig.cpp)");
  }
  const std::string& next(const std::string& what) {
    if (++i >= tok.size()) fail("expected " + what + " at the end");
    return tok[i];
  }
  void expect(const std::string& t, const std::string& key) {
    if (next("'" + t + "' after " + key) != t) fail("expected '" + t + "' after " + key + ", got '" + tok[i] + "'");
  }
  uint64_t integer(const std::string& key) {
    const std::string& v = next("a value for " + key);
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
      fail(key + ": expected a non-negative integer, got '" + v + "'");
    }
    return std::stoull(v);
  }
  bool boolean(const std::string& key) {
    const std::string& v = next("a value for " + key);
    if (v != "True" && v != "False") fail(key + ": expected True or False, got '" + v + "'");
    return v == "True";
  }
  static bool pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

  // parseMaxSplitSize / parseMaxNonSplitRoundingSize: MiB, at least kLargeBuffer (20 MiB).
  int64_t mib_at_least_20(const std::string& key) {
    const uint64_t v = integer(key);
    if (v < static_cast<uint64_t>(kAllocLargeBuffer >> 20)) {
      fail(key + " too small, must be >= " + std::to_string(kAllocLargeBuffer >> 20) + " (got " + std::to_string(v) + ")");
    }
    return static_cast<int64_t>(v) << 20;
  }

  // parseRoundUpPower2Divisions: one power of two for all 16 intervals, or a bracketed list of
  // size_mb:divisions (entry log2(size_mb); the first also fills the entries below it) with
  // `>:d` filling every entry after the last one named.
  std::vector<int> divisions(const std::string& key) {
    constexpr size_t kIntervals = 16;  // kRoundUpPowerOfTwoIntervals: 1 MiB .. 64 GiB
    std::vector<int> table(kIntervals, 0);
    if (next("a value for " + key) != "[") {
      --i;
      const uint64_t v = integer(key);
      if (!pow2(v)) fail(key + ": the divisions have to be a power of 2, got " + std::to_string(v));
      table.assign(kIntervals, static_cast<int>(v));
      return table;
    }
    bool first = true;
    size_t last_index = 0;
    while (next("']' closing " + key) != "]") {
      const std::string bound = tok[i];
      expect(":", key + " interval '" + bound + "'");
      const uint64_t v = integer(key);
      if (v != 0 && !pow2(v)) fail(key + ": divisions have to be 0 or a power of 2, got " + std::to_string(v));
      if (bound == ">") {
        for (size_t k = last_index + 1; k < kIntervals; ++k) table[k] = static_cast<int>(v);
      } else {
        if (bound.find_first_not_of("0123456789") != std::string::npos || bound.empty() || bound.size() > 18) {
          fail(key + ": interval '" + bound + "' is not a size in MiB or '>'");
        }
        const uint64_t b = std::stoull(bound);
        if (!pow2(b)) fail(key + ": the intervals have to be powers of 2, got " + bound);
        const size_t index = std::min<size_t>(static_cast<size_t>(floor_log2(b)), kIntervals - 1);
        if (first) {
          for (size_t k = 0; k < index; ++k) table[k] = static_cast<int>(v);
          first = false;
        }
        table[index] = static_cast<int>(v);
        last_index = index;
      }
      if (i + 1 < tok.size() && tok[i + 1] != "]") expect(",", key + " entry");
    }
    return table;
  }

  AllocatorConfig parse() {
    AllocatorConfig c;
    tok = lex_alloc_conf(conf);
    for (i = 0; i < tok.size(); ++i) {
      const std::string key = tok[i];
      static const std::set<std::string> kKeys = {
          "max_split_size_mb", "max_non_split_rounding_mb", "garbage_collection_threshold",
          "roundup_power2_divisions", "expandable_segments", "backend", "release_lock_on_cudamalloc",
          "pinned_use_cuda_host_register", "pinned_use_background_threads", "graph_capture_record_stream_reuse",
          "pinned_num_register_threads", "pinned_reserve_segment_size_mb"};
      if (kKeys.count(key) == 0) fail("unrecognized key '" + key + "'");
      expect(":", key);
      if (key == "max_split_size_mb") {
        c.max_split_size = mib_at_least_20(key);
      } else if (key == "max_non_split_rounding_mb") {
        c.max_non_split_rounding = mib_at_least_20(key);
      } else if (key == "garbage_collection_threshold") {
        const std::string& v = next("a value for " + key);
        size_t used = 0;
        double t = 0.0;
        try {
          t = std::stod(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != v.size() || !(t > 0.0 && t < 1.0)) fail(key + " must be a number in (0.0, 1.0), got '" + v + "'");
        c.gc_threshold = t;
      } else if (key == "roundup_power2_divisions") {
        c.roundup_power2_divisions = divisions(key);
      } else if (key == "expandable_segments") {
        c.expandable_segments = boolean(key);
      } else if (key == "backend") {
        const std::string& v = next("a value for backend");
        if (v == "cudaMallocAsync") fail("backend:cudaMallocAsync is a different allocator; memplan models only the native one");
        if (v != "native") fail("unknown allocator backend '" + v + "' (options are native and cudaMallocAsync)");
      } else if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
                 key == "pinned_use_background_threads" || key == "graph_capture_record_stream_reuse") {
        boolean(key);
      } else if (key == "pinned_num_register_threads") {
        if (!pow2(integer(key))) fail(key + " has to be a power of 2");
      } else if (key == "pinned_reserve_segment_size_mb") {
        if (integer(key) == 0) fail(key + " has to be greater than 0");
      }
      if (i + 1 < tok.size()) expect(",", key + "'s value");
    }
    return c;
  }
};

}  // namespace

AllocatorConfig parse_alloc_conf(const std::string& conf) {
  AllocConfParser p{conf, {}};
  return p.parse();
}

namespace {

// The events' ids as dense slots (0 .. slots - 1), so that a replay keeps the live blocks in a
// vector rather than a hash map; made once for all of find_oom_boundary's replays.
struct SlottedEvents {
  std::vector<int32_t> slot;  // per event
  size_t slots = 0;
};

SlottedEvents slot_events(const std::vector<AllocatorEvent>& events) {
  SlottedEvents out;
  out.slot.resize(events.size());
  int64_t lo = 0, hi = -1;
  for (const AllocatorEvent& e : events) {
    lo = std::min(lo, e.id);
    hi = std::max(hi, e.id);
  }
  // Ids that are already small non-negative integers (allocation_sequence's) are their own slots.
  if (lo >= 0 && hi < static_cast<int64_t>(2 * events.size() + 1024)) {
    for (size_t i = 0; i < events.size(); ++i) out.slot[i] = static_cast<int32_t>(events[i].id);
    out.slots = static_cast<size_t>(hi + 1);
    return out;
  }
  std::unordered_map<int64_t, int32_t> slots;  // id -> slot, in order of first appearance
  slots.reserve(events.size() / 2 + 16);
  for (size_t i = 0; i < events.size(); ++i)
    out.slot[i] = slots.emplace(events[i].id, static_cast<int32_t>(slots.size())).first->second;
  out.slots = slots.size();
  return out;
}

}  // namespace

// replay() over slotted events, through the model's block-index malloc and free.
struct ReplayDriver {
  static ReplayResult run(const std::vector<AllocatorEvent>& events, const SlottedEvents& slotted,
                          const AllocatorConfig& config, int64_t reset_peaks_at, bool with_actions) {
    CachingAllocatorModel model(config);
    std::vector<int> live(slotted.slots, -1);  // slot -> the model's block
    ReplayResult out;
    for (size_t i = 0; i < events.size(); ++i) {
      if (static_cast<int64_t>(i) == reset_peaks_at) model.reset_peak_stats();
      const AllocatorEvent& e = events[i];
      int& block = live[static_cast<size_t>(slotted.slot[i])];
      if (e.kind == AllocatorEvent::alloc) {
        const int b = model.malloc_block(e.bytes, e.stream);
        if (b < 0) {
          out.ran = false;
          out.oom_event = static_cast<int64_t>(i);
          break;
        }
        block = b;
      } else {
        MEMPLAN_CHECK(block >= 0, "allocator replay: free of an id that is not allocated");
        model.free_block(block);
        block = -1;
      }
    }
    out.peak_reserved = model.stats().reserved_bytes.peak;
    out.peak_allocated = model.stats().allocated_bytes.peak;
    out.num_alloc_retries = model.stats().num_alloc_retries;
    if (with_actions) out.segment_actions = std::move(model.actions_);
    return out;
  }
};

namespace {

// A replay without segment actions: the lean engine (allocator_fast.h) where it covers the
// settings and the events' streams, else the model.
ReplayResult replay_peaks(const std::vector<AllocatorEvent>& events, const SlottedEvents& slotted, const AllocatorConfig& config,
                          int64_t reset_peaks_at) {
  ReplayResult out;
  if (fast_replay::covers(config) && fast_replay::run(events, slotted.slot, slotted.slots, config, reset_peaks_at, out)) return out;
  return ReplayDriver::run(events, slotted, config, reset_peaks_at, /*with_actions=*/false);
}

}  // namespace

ReplayResult replay_with_caps(const std::vector<AllocatorEvent>& events, const AllocatorConfig& config, int64_t reset_peaks_at,
                              const std::vector<int64_t>& capacities, std::vector<ReplayResult>& capped, bool first_that_runs) {
  AllocatorConfig uncapped = config;
  uncapped.capacity = 0;
  const SlottedEvents slotted = slot_events(events);
  ReplayResult out;
  if (fast_replay::covers(uncapped) &&
      fast_replay::run_with_caps(events, slotted.slot, slotted.slots, uncapped, reset_peaks_at, capacities, out, capped, first_that_runs))
    return out;
  capped.clear();
  for (int64_t c : capacities) {
    AllocatorConfig at = uncapped;
    at.capacity = c;
    at.capacity_is_fraction = false;
    capped.push_back(ReplayDriver::run(events, slotted, at, reset_peaks_at, /*with_actions=*/false));
    if (first_that_runs && capped.back().ran) break;
  }
  return ReplayDriver::run(events, slotted, uncapped, reset_peaks_at, /*with_actions=*/false);
}

ReplayResult replay(const std::vector<AllocatorEvent>& events, const AllocatorConfig& config, int64_t reset_peaks_at,
                    bool segment_actions) {
  if (!segment_actions) return replay_peaks(events, slot_events(events), config, reset_peaks_at);
  return ReplayDriver::run(events, slot_events(events), config, reset_peaks_at, /*with_actions=*/true);
}

int64_t peak_rounded_requests(const std::vector<AllocatorEvent>& events, const AllocatorConfig& config) {
  const CachingAllocatorModel rounding(config);
  const SlottedEvents slotted = slot_events(events);
  std::vector<int64_t> live(slotted.slots, 0);  // slot -> rounded bytes
  int64_t now = 0, peak = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    int64_t& held = live[static_cast<size_t>(slotted.slot[i])];
    now -= held;
    held = events[i].kind == AllocatorEvent::alloc ? rounding.round_size(events[i].bytes) : 0;
    now += held;
    peak = std::max(peak, now);
  }
  return peak;
}

int64_t find_oom_boundary(const std::vector<AllocatorEvent>& events, const AllocatorConfig& config,
                          int64_t granularity) {
  MEMPLAN_CHECK(granularity > 0, "allocator model: boundary granularity must be positive");
  const SlottedEvents slotted = slot_events(events);
  auto runs = [&](const AllocatorConfig& c) { return replay_peaks(events, slotted, c, -1); };
  AllocatorConfig c = config;
  c.capacity = 0;
  const ReplayResult unlimited = runs(c);
  // With the capacity at the unlimited run's peak no segment is ever refused, so that run repeats.
  int64_t hi = (unlimited.peak_reserved + granularity - 1) / granularity;  // runs, in granules
  int64_t lo = 0;                                                         // 0 = unlimited: treated as failing
  if (hi == 0) return 0;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    c.capacity = mid * granularity;
    if (runs(c).ran) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi * granularity;
}

}  // namespace memplan
