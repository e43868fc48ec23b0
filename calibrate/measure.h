// Real training steps through LibTorch, measured. This header is torch-free so the companion's
// CLI (cli/cmd_measure.cpp) can call it; the implementation (measure.cpp, decoder.cpp) is the only
// code that includes torch. It exists only in builds with LibTorch (memplan-measure).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "calibrate/cpu_counter.h"
#include "estimator/breakdown.h"
#include "estimator/setup.h"

namespace memplan::calibrate {

std::string torch_version();   // "1.13" / "2.11", "" without LibTorch
bool cuda_available();         // built with CUDA and a device is visible
bool cpu_supports_bf16();      // avx512_bf16 (or amx) on this CPU, so bf16 CPU steps run
inline bool is_cuda(const std::string& device) { return device.rfind("cuda", 0) == 0; }  // cuda, cuda:N

struct MeasureOptions {
  std::string device = "cpu";  // cpu | cuda | cuda:N
  int steps = 2;               // >= 2: step 1 creates the optimizer state
  int threads = 0;             // CPU intra-op threads (0: LibTorch's default)
  int64_t layers = 0;          // measure at this depth (0: full depth, or reduced if too big)
  std::function<void(const std::string&)> progress;  // one line per event ("step 1/2 forward")
  // CPU: keep every allocation and free of the run, from the model build on (MeasureResult::events).
  bool record_events = false;
};

// Peak and resident bytes of one phase of one step. On CPU the counting allocator's bytes;
// on CUDA the caching allocator's allocated bytes, plus reserved and device-wide used.
struct PhaseSample {
  Phase phase = Phase::forward;
  int64_t peak_bytes = 0;     // peak during the phase (allocated)
  int64_t end_bytes = 0;      // live at the end of the phase
  int64_t peak_reserved = 0;  // CUDA: caching allocator reserved at peak
  int64_t device_used = 0;    // CUDA: total - free from cudaMemGetInfo after the phase
};

struct StepSample {
  int step = 0;
  std::vector<PhaseSample> phases;
  double seconds = 0;
};

struct MeasureResult {
  std::string device_name;        // "cpu (Intel Xeon ...)" / "NVIDIA H100 80GB HBM3"
  std::string libtorch;           // LibTorch version
  std::string driver;             // CUDA driver/runtime versions ("" on CPU)
  int64_t layers_measured = 0;    // depth actually run
  bool extrapolated = false;      // full-depth numbers extrapolated from reduced depth
  std::vector<int64_t> depths;    // depths run when extrapolated
  int64_t weights_bytes = 0;      // live after building the model
  int64_t states_bytes = 0;       // optimizer state created by step 1
  int64_t forward_end_bytes = 0;  // live after the last step's forward (activations kept)
  std::vector<StepSample> steps;
  // Run-level peaks (max over steps), full depth (extrapolated when reduced).
  int64_t peak_bytes = 0;
  Phase peak_phase = Phase::forward;
  int64_t peak_reserved = 0;      // CUDA
  int64_t context_bytes = 0;      // CUDA: outside the allocator after the steps (cudaMemGetInfo's used
                                  // minus reserved: context, cuBLAS/cuDNN handles, loaded modules)
  int64_t context_init_bytes = 0; // CUDA: the same right after the context was created
  int64_t budget_bytes = 0;       // the memory the depth was budgeted against (device free / host)
  int64_t device_used_peak = 0;   // CUDA: max total - free
  std::vector<int64_t> phase_peaks;  // per Phase, max over steps (index = Phase)
  std::string oom;                // the out-of-memory error that ended the run early, if one did
  std::vector<std::string> notes;
  // With record_events (CPU): the run's allocations and frees from the model build on, and where
  // in them each step begins (before its first forward).
  std::vector<cpu_counter::Event> events;
  std::vector<size_t> step_begins;
};

// Runs opt.steps real steps of the setup on the device and records the peaks.
// Throws InputError before allocating anything when the setup cannot be measured (unsupported
// combination, or a model that does not fit even at one layer); an out-of-memory during the
// run is reported in MeasureResult (`oom`, and a note), not as a crash.
MeasureResult measure(const TrainingSetup& s, const MeasureOptions& opt);

// The setup the harness will actually run (what it changes: the torch version it models, the
// optimizer implementation, reduced depth) so the estimate compared with it is like for like.
TrainingSetup harness_setup(const TrainingSetup& s, const MeasureOptions& opt);

}  // namespace memplan::calibrate
