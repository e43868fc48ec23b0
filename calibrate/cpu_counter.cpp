// The counting allocator behind cpu_counter.h. data == context is required: oneDNN calls
// raw_allocate(), which asserts it (docs/libtorch-notes.md §4.1). The size sits in a 64-byte
// header in front of the data so the plain-function deleter can recover it.
#include "calibrate/cpu_counter.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/version.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define MEMPLAN_ALLOC_CONST
#define MEMPLAN_HAS_COPY_DATA 1
#else
#define MEMPLAN_ALLOC_CONST const
#define MEMPLAN_HAS_COPY_DATA 0
#endif

namespace memplan::calibrate::cpu_counter {
namespace {

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_count{0};
std::atomic<bool> g_installed{false};

// The recording (start_recording): events and the live allocations' ids by address, under a lock
// (oneDNN and autograd may allocate from other threads).
std::atomic<bool> g_recording{false};
std::mutex g_record_mu;
std::vector<Event> g_events;
std::unordered_map<const void*, int64_t> g_ids;
int64_t g_next_id = 1;

void record(bool alloc, const void* data, int64_t n) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_record_mu);
  if (!g_recording.load()) return;
  int64_t id = 0;
  if (alloc) {
    id = g_next_id++;
    g_ids[data] = id;
  } else if (auto it = g_ids.find(data); it != g_ids.end()) {
    id = it->second;
    g_ids.erase(it);
  }
  g_events.push_back({alloc, id, n});
}

struct CountingAllocator final : c10::Allocator {
  static constexpr size_t kHeader = 64;

  static void release(void* data) {
    if (!data) return;
    char* base = static_cast<char*>(data) - kHeader;
    const int64_t n = static_cast<int64_t>(*reinterpret_cast<size_t*>(base));
    const int64_t now = g_current.fetch_sub(n) - n;
    record(false, data, n);
    if (trace_threshold() >= 0 && n >= trace_threshold()) std::fprintf(stderr, "  free  %12lld -> %12lld\n", (long long)n, (long long)now);
    c10::free_cpu(base);
  }
  c10::DataPtr allocate(size_t n) MEMPLAN_ALLOC_CONST override {
    char* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    *reinterpret_cast<size_t*>(base) = n;
    const int64_t now = g_current.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    g_count.fetch_add(1);
    int64_t p = g_peak.load();
    while (now > p && !g_peak.compare_exchange_weak(p, now)) {
    }
    if (trace_threshold() >= 0 && static_cast<int64_t>(n) >= trace_threshold())
      std::fprintf(stderr, "  alloc %12zu -> %12lld\n", n, (long long)now);
    void* data = base + kHeader;
    record(true, data, static_cast<int64_t>(n));
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
#if MEMPLAN_HAS_COPY_DATA
  void copy_data(void* dst, const void* src, std::size_t n) const override { default_copy_data(dst, src, n); }
#endif
};

CountingAllocator& counter() {
  static CountingAllocator c;  // never destroyed before the tensors it allocated: static storage
  return c;
}

}  // namespace

void install() {
  c10::SetCPUAllocator(&counter(), /*priority=*/1);
  g_installed = true;
}

void uninstall() {
  c10::SetCPUAllocator(c10::GetDefaultCPUAllocator(), 1);
  g_installed = false;
}

bool installed() { return g_installed.load(); }
int64_t current_bytes() { return g_current.load(); }
int64_t peak_bytes() { return g_peak.load(); }
void reset_peak() { g_peak.store(g_current.load()); }
int64_t allocations() { return g_count.load(); }

void start_recording() {
  std::lock_guard<std::mutex> lock(g_record_mu);
  g_events.clear();
  g_ids.clear();
  g_next_id = 1;
  g_recording = true;
}

std::vector<Event> stop_recording() {
  std::lock_guard<std::mutex> lock(g_record_mu);
  g_recording = false;
  g_ids.clear();
  return std::move(g_events);
}

size_t recorded_events() {
  std::lock_guard<std::mutex> lock(g_record_mu);
  return g_events.size();
}

int64_t trace_threshold() {
  static const int64_t t = [] { const char* v = std::getenv("MEMPLAN_TRACE_ALLOC"); return v ? std::atoll(v) : -1; }();
  return t;
}

}  // namespace memplan::calibrate::cpu_counter
