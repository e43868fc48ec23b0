// libFuzzer target: the estimator over random setups. validate() must refuse what cannot be
// estimated; everything it accepts must estimate without undefined behaviour (UBSan aborts) and
// keep the invariants of fuzz_common.h: no negative term, totals the sums of their terms, the peak
// the largest phase, estimate_peak == estimate, the peak monotone in micro-batch and sequence.
#include "tests/fuzz/fuzz_common.h"

namespace {
// What load_calibration accepts (profiles/calibration.cpp).
bool calibration_ok(const memplan::Calibration& c) {
  return c.cuda_context_bytes >= -1 && c.workspace_bytes >= -1 && c.activation_scale >= 0.25 && c.activation_scale <= 4 &&
         c.model_state_scale >= 0.25 && c.model_state_scale <= 4 && c.overhead_bytes >= 0 &&
         (c.overhead_fraction == -1 || (c.overhead_fraction >= 0 && c.overhead_fraction < 1));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memplan;
  FuzzedDataProvider d(data, size);
  const TrainingSetup s = fuzz::random_setup(d);
  const bool with_cal = d.ConsumeBool();
  const Calibration cal = fuzz::random_calibration(d);
  if (!validate(s).empty()) return 0;
  if (with_cal && !calibration_ok(cal)) return 0;
  try {
    fuzz::check_estimate(s, with_cal ? &cal : nullptr);
    judge(estimate(s, with_cal ? &cal : nullptr), s);
    model_state_bytes(s);
  } catch (const InputError& e) {  // a sum too large to count, a calibration out of its bounds: refused with a hint
    if (e.hint().empty()) fuzz::fail("an InputError without a hint: " + e.message());
  }
  return 0;
}
