// What `memplan watch` reads while a training command runs: each GPU's memory in use through the
// vendor's management library, loaded with dlopen only when asked (NVML: libnvidia-ml.so.1; AMD:
// ROCm SMI, librocm_smi64.so.1), or, on a machine without a GPU, the resident memory of a
// process tree from /proc. Nothing here is linked against a vendor library, and nothing here
// estimates memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace memplan::watch {

// One device's (or the process tree's) memory at one moment.
struct DeviceReading {
  int index = 0;             // NVML / ROCm SMI index; 0 for the process tree
  std::string name;          // "NVIDIA H100 80GB HBM3", "process tree"
  int64_t used_bytes = 0;    // device-wide memory in use (every process), or the tree's RSS
  int64_t total_bytes = 0;   // device memory, or host memory (the cgroup's limit when lower)
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string source() const = 0;  // "nvml" | "rocm-smi" | "process"
  // What `used_bytes` counts, in words (which figure a user compares with the estimate's).
  virtual std::string measures() const = 0;
  // Reads every device. Throws std::runtime_error when the library fails mid-run.
  virtual std::vector<DeviceReading> read() = 0;
};

// NVML through dlopen ($MEMPLAN_NVML_LIBRARY, else libnvidia-ml.so.1): the GPUs that
// CUDA_VISIBLE_DEVICES names (indices or UUIDs), else all. nullptr with `why` set when the library
// is missing, fails to initialise or sees no GPU.
std::unique_ptr<Sampler> open_nvml(std::string* why);
// ROCm SMI through dlopen ($MEMPLAN_ROCM_SMI_LIBRARY, else librocm_smi64.so.1, librocm_smi64.so,
// /opt/rocm/lib/librocm_smi64.so.1). nullptr with `why` when unavailable.
std::unique_ptr<Sampler> open_rocm_smi(std::string* why);
// The resident memory (RSS, /proc/PID/statm) of `root` and all its descendants, summed; pages
// shared between them count once per process. Capacity: MemTotal, or the cgroup's memory limit.
std::unique_ptr<Sampler> open_process_tree(int root_pid);

// Host memory available to this process: MemTotal from /proc/meminfo, or the cgroup (v2
// memory.max, v1 memory.limit_in_bytes) limit when that is lower.
int64_t host_capacity_bytes();
// Every descendant of `root` (and root) now, from /proc/*/stat.
std::vector<int> process_tree(int root);

}  // namespace memplan::watch
