// libFuzzer target: every config format through load_config_text, the one entry point commands
// use; the first byte picks the file name (and so the format detection: by extension, or by
// content for a name without one), so readers added to load_config are fuzzed here too.
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kNames[] = {"/nonexistent/fuzz/train.yaml", "/nonexistent/fuzz/train.yml",
                                 "/nonexistent/fuzz/config.json", "/nonexistent/fuzz/train",
                                 "/nonexistent/fuzz/ds_config.json", "/nonexistent/fuzz/train.toml"};
  if (size == 0) return 0;
  const std::string path = kNames[data[0] % (sizeof kNames / sizeof kNames[0])];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const memplan::profiles::LoadedConfig cfg = memplan::profiles::load_config_text(text, path, path);
    memplan::fuzz::estimate_config(cfg, path);
  } catch (const memplan::InputError&) {
  }
  return 0;
}
