// _memplan_torch: the CPU counting allocator (calibrate/cpu_counter.h) for the Python monitor.
// Built only against the LibTorch that the Python interpreter's torch package loads, so that
// c10::SetCPUAllocator reaches the allocator that torch's tensors use. No torch header here.
#include <pybind11/pybind11.h>

#include "calibrate/cpu_counter.h"

namespace counter = memplan::calibrate::cpu_counter;

PYBIND11_MODULE(_memplan_torch, m) {
  m.doc() = "memplan's CPU counting allocator: exact bytes of live CPU tensors, with a peak";
  m.def("install", &counter::install, "Make the counting allocator torch's CPU allocator (tensors made before are not counted)");
  m.def("uninstall", &counter::uninstall, "Put torch's default CPU allocator back");
  m.def("installed", &counter::installed);
  m.def("current_bytes", &counter::current_bytes, "Bytes of counted CPU tensors alive now");
  m.def("peak_bytes", &counter::peak_bytes, "Largest current_bytes() since the last reset_peak()");
  m.def("reset_peak", &counter::reset_peak, "Peak := current");
  m.def("allocations", &counter::allocations, "Counted allocations so far");
}
