// libFuzzer target: memplan YAML configs (load_config_text with a .yaml name), then the setup and
// a checked estimate when the config is valid. Every way out but InputError is a finding.
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string path = "/nonexistent/fuzz/config.yaml";
  try {
    const memplan::profiles::LoadedConfig cfg = memplan::profiles::load_config_text(text, path, path);
    memplan::fuzz::estimate_config(cfg, path);
  } catch (const memplan::InputError&) {
  }
  return 0;
}
