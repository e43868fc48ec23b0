// A stand-in for the GPU management libraries memplan watch opens with dlopen, for machines
// without a GPU: the NVML entry points (nvml.h) and the ROCm SMI ones (rocm_smi.h) that
// watch/sampler.cpp looks up, reporting two devices whose used memory grows with each read.
// Loaded through MEMPLAN_NVML_LIBRARY / MEMPLAN_ROCM_SMI_LIBRARY by tests/watch/watch_test.cpp.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {

static const unsigned long long kTotal[2] = {24ULL << 30, 16ULL << 30};
static unsigned long long reads = 0;
// Device 0 starts at 18.5 GiB and grows by 64 MiB per read; device 1 stays at 1 GiB.
static unsigned long long used(unsigned int i) { return i == 0 ? (37ULL << 29) + (reads++) * (64ULL << 20) : 1ULL << 30; }

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int* n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** d) {
  if (i >= 2) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *d = (void*)(uintptr_t)(i + 1);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* d, nvmlMemory_t* m) {
  unsigned int i = (unsigned int)(uintptr_t)d - 1;
  m->total = kTotal[i];
  m->used = used(i);
  m->free = m->total - m->used;
  return 0;
}
// nvmlDeviceGetMemoryInfo_v2: the same devices with 512 MiB the driver reserves, which v1's used
// includes and v2's does not (device 1 answers with a version mismatch when FAKE_NVML_V2_MISMATCH
// is set, as an old driver would).
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
int nvmlDeviceGetMemoryInfo_v2(void* d, nvmlMemory_v2_t* m) {
  unsigned int i = (unsigned int)(uintptr_t)d - 1;
  if (m->version != (unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24))) return 25;  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  if (getenv("FAKE_NVML_V2_MISMATCH")) return 25;
  m->total = kTotal[i];
  m->reserved = 512ULL << 20;
  m->used = used(i) - m->reserved;
  m->free = m->total - m->reserved - m->used;
  return 0;
}
int nvmlDeviceGetName(void* d, char* name, unsigned int n) {
  strncpy(name, (uintptr_t)d == 1 ? "Fake GPU 24GB" : "Fake GPU 16GB", n);
  return 0;
}
const char* nvmlErrorString(int rc) { return rc == 0 ? "Success" : "Invalid Argument"; }

int rsmi_init(uint64_t flags) { (void)flags; return 0; }
int rsmi_shut_down(void) { return 0; }
int rsmi_num_monitor_devices(uint32_t* n) { *n = 2; return 0; }
int rsmi_dev_memory_total_get(uint32_t i, int type, uint64_t* total) { (void)type; if (i >= 2) return 1; *total = kTotal[i]; return 0; }
int rsmi_dev_memory_usage_get(uint32_t i, int type, uint64_t* u) { (void)type; if (i >= 2) return 1; *u = used(i); return 0; }
int rsmi_dev_name_get(uint32_t i, char* name, size_t n) { strncpy(name, i == 0 ? "Fake Instinct" : "Fake Radeon", n); return 0; }
}  // extern "C"
