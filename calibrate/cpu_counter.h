// The CPU counting allocator: installed with c10::SetCPUAllocator, it counts the bytes of every
// CPU tensor (and oneDNN scratch buffer) allocated while it is installed, with a running peak.
// `memplan measure --device cpu` and the Python monitor (memplan._memplan_torch) both use it.
// This header is torch-free; cpu_counter.cpp is a torch translation unit.
#pragma once

#include <cstdint>

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

// MEMPLAN_TRACE_ALLOC=<bytes>: print every allocation and free at least that large to stderr
// (debugging a mismatch between an estimate and a measurement); -1 when unset.
int64_t trace_threshold();

}  // namespace memplan::calibrate::cpu_counter
