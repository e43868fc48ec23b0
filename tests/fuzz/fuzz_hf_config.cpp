// libFuzzer target: Hugging Face config.json (the reader behind --model FILE and model presets),
// then, when the model is valid, a checked estimate of a default setup on it.
#include "profiles/detail.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  using namespace memplan;
  try {
    const profiles::detail::ReadModel m =
        profiles::detail::read_hf_config(profiles::detail::parse_json(text, "config.json"), "config.json", "fuzz");
    TrainingSetup s;
    s.model = m.spec;
    s.batch.seq_len = 256;
    if (validate(s).empty()) fuzz::check_estimate(s, nullptr);
  } catch (const InputError&) {
  }
  return 0;
}
