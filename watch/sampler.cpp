// Samplers for memplan watch. The vendor libraries are opened with dlopen(RTLD_LOCAL) and only
// the few entry points below are looked up; their signatures are those of nvml.h (CUDA toolkit)
// and rocm_smi.h (ROCm SMI library). Library and device failures become a `why`, never a crash.
#include "watch/sampler.h"

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace memplan::watch {
namespace {

// A dlopen'ed library, closed when dropped.
class Library {
 public:
  Library() = default;
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library() {
    if (handle_) ::dlclose(handle_);
  }
  // The first of `names` that opens; `why` gets dlerror() of the first one (the usual name).
  bool open(const std::vector<std::string>& names, std::string* why) {
    std::string first;
    for (const std::string& n : names) {
      handle_ = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_) return true;
      const char* e = ::dlerror();
      if (first.empty()) first = e ? e : n + ": cannot be loaded";
    }
    *why = first;
    return false;
  }
  template <typename F>
  F symbol(const char* name) const {
    return reinterpret_cast<F>(::dlsym(handle_, name));
  }

 private:
  void* handle_ = nullptr;
};

std::vector<std::string> library_names(const char* env, std::vector<std::string> defaults) {
  if (const char* v = std::getenv(env); v && *v) return {v};
  return defaults;
}

// ---- NVML ---------------------------------------------------------------------------------------

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
// nvmlMemory_v2_t (nvml.h, drivers R510+): `used` without the memory the driver reserves, which
// nvmlMemory_t's `used` includes; `total - reserved` and `used` are then the figures
// cudaMemGetInfo gives (on an H200, driver 580: NVML v1's used is about 0.6 GiB above them).
struct NvmlMemoryV2 {
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
// NVML_STRUCT_VERSION(Memory, 2): sizeof(nvmlMemory_v2_t) | (2 << 24).
constexpr unsigned int kNvmlMemoryV2 = static_cast<unsigned int>(sizeof(NvmlMemoryV2)) | (2u << 24);
using NvmlDevice = void*;  // nvmlDevice_t is an opaque pointer

class NvmlSampler final : public Sampler {
 public:
  using InitFn = int (*)();
  using ShutdownFn = int (*)();
  using CountFn = int (*)(unsigned int*);
  using ByIndexFn = int (*)(unsigned int, NvmlDevice*);
  using ByUuidFn = int (*)(const char*, NvmlDevice*);
  using MemoryFn = int (*)(NvmlDevice, NvmlMemory*);
  using MemoryV2Fn = int (*)(NvmlDevice, NvmlMemoryV2*);
  using NameFn = int (*)(NvmlDevice, char*, unsigned int);
  using ErrorFn = const char* (*)(int);

  bool open(std::string* why) {
    if (!lib_.open(library_names("MEMPLAN_NVML_LIBRARY", {"libnvidia-ml.so.1"}), why)) return false;
    auto init = lib_.symbol<InitFn>("nvmlInit_v2");
    shutdown_ = lib_.symbol<ShutdownFn>("nvmlShutdown");
    auto count = lib_.symbol<CountFn>("nvmlDeviceGetCount_v2");
    auto by_index = lib_.symbol<ByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
    auto by_uuid = lib_.symbol<ByUuidFn>("nvmlDeviceGetHandleByUUID");
    memory_ = lib_.symbol<MemoryFn>("nvmlDeviceGetMemoryInfo");
    memory_v2_ = lib_.symbol<MemoryV2Fn>("nvmlDeviceGetMemoryInfo_v2");
    auto name = lib_.symbol<NameFn>("nvmlDeviceGetName");
    error_ = lib_.symbol<ErrorFn>("nvmlErrorString");
    if (!init || !shutdown_ || !count || !by_index || !memory_) {
      *why = "libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetMemoryInfo";
      return false;
    }
    if (int rc = init(); rc != 0) {
      *why = fmt::format("nvmlInit failed: {}", text(rc));
      return false;
    }
    initialised_ = true;
    unsigned int n = 0;
    if (int rc = count(&n); rc != 0 || n == 0) {
      *why = rc != 0 ? fmt::format("nvmlDeviceGetCount failed: {}", text(rc)) : "NVML sees no GPU";
      return false;
    }
    // The GPUs the command will see: CUDA_VISIBLE_DEVICES (indices or UUIDs), else all of them.
    std::vector<std::string> wanted;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) wanted.push_back(item);
    } else {
      for (unsigned int i = 0; i < n; ++i) wanted.push_back(std::to_string(i));
    }
    for (const std::string& w : wanted) {
      NvmlDevice d = nullptr;
      const bool numeric = w.find_first_not_of("0123456789") == std::string::npos;
      // An index past any machine's GPUs (CUDA_VISIBLE_DEVICES=4294967296 made stoul throw: exit
      // 3) names none, as CUDA skips what it cannot use; nine digits at most reach NVML.
      if (numeric && w.size() > 9) continue;
      int rc = numeric ? by_index(static_cast<unsigned int>(std::stoul(w)), &d) : (by_uuid ? by_uuid(w.c_str(), &d) : -1);
      if (rc != 0) continue;  // CUDA skips what it cannot use too
      char buf[96] = {0};
      if (name) name(d, buf, sizeof buf);
      devices_.push_back({numeric ? std::stoi(w) : static_cast<int>(devices_.size()), buf[0] ? buf : "NVIDIA GPU", d});
    }
    if (devices_.empty()) {
      *why = fmt::format("NVML knows none of the GPUs CUDA_VISIBLE_DEVICES names ({})", std::getenv("CUDA_VISIBLE_DEVICES"));
      return false;
    }
    return true;
  }
  ~NvmlSampler() override {
    if (initialised_) shutdown_();
  }
  std::string source() const override { return "nvml"; }
  std::string measures() const override {
    return memory_v2_ ? "NVML's used memory without the driver's reserved part (nvmlDeviceGetMemoryInfo_v2): what "
                        "cudaMemGetInfo counts, the estimate's device figure"
                      : "NVML's used memory (nvmlDeviceGetMemoryInfo v1): it includes memory the driver reserves, about "
                        "0.5 GiB above cudaMemGetInfo's used and the estimate's device figure";
  }
  std::vector<DeviceReading> read() override {
    std::vector<DeviceReading> out;
    for (const Device& d : devices_) {
      if (memory_v2_) {
        NvmlMemoryV2 m{};
        m.version = kNvmlMemoryV2;
        if (int rc = memory_v2_(d.handle, &m); rc == 0) {
          out.push_back({d.index, d.name, static_cast<int64_t>(m.used), static_cast<int64_t>(m.total - m.reserved)});
          continue;
        }
        memory_v2_ = nullptr;  // a driver without the v2 struct: v1 from now on (measures() says so)
      }
      NvmlMemory m{};
      if (int rc = memory_(d.handle, &m); rc != 0)
        throw std::runtime_error(fmt::format("nvmlDeviceGetMemoryInfo({}) failed: {}", d.index, text(rc)));
      out.push_back({d.index, d.name, static_cast<int64_t>(m.used), static_cast<int64_t>(m.total)});
    }
    return out;
  }

 private:
  struct Device {
    int index;
    std::string name;
    NvmlDevice handle;
  };
  std::string text(int rc) const {
    const char* s = error_ ? error_(rc) : nullptr;
    return s ? fmt::format("{} (NVML error {})", s, rc) : fmt::format("NVML error {}", rc);
  }
  Library lib_;
  bool initialised_ = false;
  ShutdownFn shutdown_ = nullptr;
  MemoryFn memory_ = nullptr;
  MemoryV2Fn memory_v2_ = nullptr;
  ErrorFn error_ = nullptr;
  std::vector<Device> devices_;
};

// ---- ROCm SMI -----------------------------------------------------------------------------------

constexpr int kRsmiMemTypeVram = 0;  // RSMI_MEM_TYPE_VRAM, the first rsmi_memory_type_t

class RocmSmiSampler final : public Sampler {
 public:
  using InitFn = int (*)(uint64_t);
  using ShutdownFn = int (*)();
  using CountFn = int (*)(uint32_t*);
  using MemoryFn = int (*)(uint32_t, int, uint64_t*);
  using NameFn = int (*)(uint32_t, char*, size_t);

  bool open(std::string* why) {
    if (!lib_.open(library_names("MEMPLAN_ROCM_SMI_LIBRARY",
                                 {"librocm_smi64.so.1", "librocm_smi64.so", "/opt/rocm/lib/librocm_smi64.so.1"}),
                   why))
      return false;
    auto init = lib_.symbol<InitFn>("rsmi_init");
    shutdown_ = lib_.symbol<ShutdownFn>("rsmi_shut_down");
    auto count = lib_.symbol<CountFn>("rsmi_num_monitor_devices");
    total_ = lib_.symbol<MemoryFn>("rsmi_dev_memory_total_get");
    used_ = lib_.symbol<MemoryFn>("rsmi_dev_memory_usage_get");
    auto name = lib_.symbol<NameFn>("rsmi_dev_name_get");
    if (!init || !shutdown_ || !count || !total_ || !used_) {
      *why = "the ROCm SMI library lacks rsmi_init, rsmi_num_monitor_devices or rsmi_dev_memory_{total,usage}_get";
      return false;
    }
    if (int rc = init(0); rc != 0) {
      *why = fmt::format("rsmi_init failed (ROCm SMI status {})", rc);
      return false;
    }
    initialised_ = true;
    uint32_t n = 0;
    if (int rc = count(&n); rc != 0 || n == 0) {
      *why = rc != 0 ? fmt::format("rsmi_num_monitor_devices failed (status {})", rc) : "ROCm SMI sees no GPU";
      return false;
    }
    for (uint32_t i = 0; i < n; ++i) {
      char buf[96] = {0};
      if (name) name(i, buf, sizeof buf);
      names_.push_back(buf[0] ? buf : "AMD GPU");
    }
    return true;
  }
  ~RocmSmiSampler() override {
    if (initialised_) shutdown_();
  }
  std::string source() const override { return "rocm-smi"; }
  std::string measures() const override { return "ROCm SMI's VRAM usage (every process on the device)"; }
  std::vector<DeviceReading> read() override {
    std::vector<DeviceReading> out;
    for (uint32_t i = 0; i < names_.size(); ++i) {
      uint64_t total = 0, used = 0;
      if (int rc = total_(i, kRsmiMemTypeVram, &total); rc != 0)
        throw std::runtime_error(fmt::format("rsmi_dev_memory_total_get({}) failed (status {})", i, rc));
      if (int rc = used_(i, kRsmiMemTypeVram, &used); rc != 0)
        throw std::runtime_error(fmt::format("rsmi_dev_memory_usage_get({}) failed (status {})", i, rc));
      out.push_back({static_cast<int>(i), names_[i], static_cast<int64_t>(used), static_cast<int64_t>(total)});
    }
    return out;
  }

 private:
  Library lib_;
  bool initialised_ = false;
  ShutdownFn shutdown_ = nullptr;
  MemoryFn total_ = nullptr, used_ = nullptr;
  std::vector<std::string> names_;
};

// ---- process tree -------------------------------------------------------------------------------

class ProcessSampler final : public Sampler {
 public:
  explicit ProcessSampler(int root) : root_(root), capacity_(host_capacity_bytes()), page_(::sysconf(_SC_PAGESIZE)) {}
  std::string source() const override { return "process"; }
  std::string measures() const override { return "the process tree's resident host memory (RSS), not GPU memory"; }
  std::vector<DeviceReading> read() override {
    int64_t rss = 0;
    for (int pid : process_tree(root_)) {
      std::ifstream in(fmt::format("/proc/{}/statm", pid));
      int64_t size = 0, resident = 0;
      if (in >> size >> resident) rss += resident * page_;  // a process that just ended reads as nothing
    }
    return {{0, "process tree", rss, capacity_}};
  }

 private:
  int root_;
  int64_t capacity_;
  int64_t page_;
};

}  // namespace

std::unique_ptr<Sampler> open_nvml(std::string* why) {
  auto s = std::make_unique<NvmlSampler>();
  if (!s->open(why)) return nullptr;
  return s;
}

std::unique_ptr<Sampler> open_rocm_smi(std::string* why) {
  auto s = std::make_unique<RocmSmiSampler>();
  if (!s->open(why)) return nullptr;
  return s;
}

std::unique_ptr<Sampler> open_process_tree(int root_pid) { return std::make_unique<ProcessSampler>(root_pid); }

int64_t host_capacity_bytes() {
  int64_t total = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    int64_t kb = 0;
    while (in >> key >> kb >> unit)
      if (key == "MemTotal:") {
        total = kb * 1024;
        break;
      }
  }
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text.find_first_not_of("0123456789") != std::string::npos) continue;  // "max": no limit
    const int64_t limit = std::strtoll(text.c_str(), nullptr, 10);
    if (limit > 0 && limit < total) total = limit;
  }
  return total;
}

std::vector<int> process_tree(int root) {
  std::map<int, std::vector<int>> children;
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream in(fmt::format("/proc/{}/stat", e->d_name));
      std::string line;
      if (!std::getline(in, line)) continue;
      // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
      const auto close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 1));
      std::string state;
      int ppid = 0;
      if (rest >> state >> ppid) children[ppid].push_back(std::atoi(e->d_name));
    }
    ::closedir(d);
  }
  std::vector<int> tree = {root};
  for (size_t i = 0; i < tree.size(); ++i)
    for (int c : children[tree[i]]) tree.push_back(c);
  return tree;
}

}  // namespace memplan::watch
