// The measure report, apart from running anything: what `memplan measure` compares and prints,
// from a MeasureResult and the estimate of the setup the harness ran. Torch-free (it lives in the
// core library), so it is tested on recorded GPU results without a GPU.
//
// Three figures, each measured against its own estimate (DESIGN.md's accuracy bars):
//   allocated  the caching allocator's peak allocated bytes (the tensors), against the estimate's
//              tensors: every term but the context and the allocator's overhead;
//   reserved   its peak reserved bytes (segments cudaMalloc'd), against the tensors plus the
//              allocator's overhead;
//   device     reserved plus what lives outside the allocator (cudaMemGetInfo's used minus
//              reserved: context, cuBLAS/cuDNN handles, modules), against the whole estimate.
// On CPU only allocated exists. A run at reduced depth (extrapolated) compares allocated only:
// its reserved and device figures are of the shallower model.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/measure.h"
#include "estimator/estimate.h"

namespace memplan::cli {

// The estimate's tensors at a phase (what the allocator reports as allocated).
int64_t estimated_allocated(const PhaseState& ph);

struct MeasureFigure {
  std::string name;        // allocated | reserved | device
  int64_t measured = 0;
  int64_t estimated = 0;
  bool compared = false;   // false: measured only (reduced depth)
  double error = 0;        // (estimated - measured) / measured when compared
  std::string what;        // what the measured figure is, in words
};
std::vector<MeasureFigure> measure_figures(const calibrate::MeasureResult& r, const MemoryBreakdown& e, bool cuda);

// The memplan.measure/v1 document; `step_estimate(phase, step)` is the estimate's allocated bytes
// at that phase of that step (step 1 has no optimizer states before its step).
nlohmann::json measure_document(const TrainingSetup& hs, const calibrate::MeasureResult& r, const MemoryBreakdown& e,
                                bool cuda);
void print_measure(std::ostream& out, const TrainingSetup& hs, const calibrate::MeasureResult& r,
                   const nlohmann::json& doc);

}  // namespace memplan::cli
