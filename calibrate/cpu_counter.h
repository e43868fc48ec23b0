// The CPU counting allocator: installed with c10::SetCPUAllocator, it counts the bytes of every
// CPU tensor (and oneDNN scratch buffer) allocated while it is installed, with a running peak.
// `memplan measure --device cpu` and the Python monitor (memplan._memplan_torch) both use it.
// This header is torch-free; cpu_counter.cpp is a torch translation unit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memplan::calibrate::cpu_counter {

// Makes the counting allocator LibTorch's CPU allocator. Tensors allocated before keep their
// own deleters and are not counted; those allocated while it is installed are counted until
// they are freed, even after uninstall().
void install();
// Puts LibTorch's default CPU allocator back.
void uninstall();
bool installed();

int64_t current_bytes();  // bytes of counted allocations alive now
int64_t peak_bytes();     // largest current_bytes() since the last reset_peak()
void reset_peak();        // peak := current
int64_t allocations();    // counted allocations so far (not bytes)

// The allocation history while recording: each counted allocation and each free of a counted
// one, in the order they happened, a tensor named by a number (1, 2, ...: one per allocation,
// never reused, unlike the address) and its bytes. A free of an allocation made before
// start_recording() has id 0. What the allocation-sequence tests compare memplan's unrolled
// sequence with, event by event (tests/calibrate/sequence_events_test.cpp).
struct Event {
  bool alloc = true;
  int64_t id = 0;
  int64_t bytes = 0;
};
void start_recording();                // clears what an earlier recording left
std::vector<Event> stop_recording();   // the events since start_recording()
size_t recorded_events();              // how many so far (a mark inside the recording)

// MEMPLAN_TRACE_ALLOC=<bytes>: print every allocation and free at least that large to stderr
// (debugging a mismatch between an estimate and a measurement); -1 when unset.
int64_t trace_threshold();

}  // namespace memplan::calibrate::cpu_counter
