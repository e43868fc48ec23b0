// libFuzzer target: DeepSpeed ds_config.json (load_config_text with a .json name; a "memplan"
// block may name the model), then the setup (--model gpt2 when the file names none) and a
// checked estimate.
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "/nonexistent/fuzz/ds_config.json";
  try {
    const memplan::profiles::LoadedConfig cfg = memplan::profiles::load_config_text(text, path, path);
    memplan::fuzz::estimate_config(cfg, path);
  } catch (const memplan::InputError&) {
  }
  return 0;
}
