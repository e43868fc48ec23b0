// libFuzzer target: calibration profiles (memplan.calibration/v1), then a checked estimate of a
// small setup with the profile applied.
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  using namespace memplan;
  try {
    const Calibration cal = profiles::load_calibration_text(text, "calibration.yaml");
    static const TrainingSetup base = [] {
      TrainingSetup s;
      s.model = profiles::load_model("gpt2", Where::at_flag("--model"));
      s.precision = Precision::amp_bf16;
      s.batch.micro_batch = 2;
      s.batch.seq_len = 256;
      s.device.capacity_bytes = int64_t{24} << 30;
      s.device.cuda_context_bytes = int64_t{512} << 20;
      s.device.cublas_workspace_bytes = int64_t{8} << 20;
      return s;
    }();
    fuzz::check_estimate(base, &cal);
  } catch (const InputError&) {
  }
  return 0;
}
