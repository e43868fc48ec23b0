// What the tests of the HF Trainer family's readers share (formats_hf_test.cpp, formats_axolotl_test.cpp,
// formats_accelerate_test.cpp): the fixtures under tests/data/formats/, an offline Hugging Face cache for
// the community mirrors the tools' examples name, and short renderings of provenance and messages.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "profiles/profiles.h"
#include "tests/profiles/local_hub.h"

namespace memplan::testing {

inline const std::string kFormats = std::string(MEMPLAN_TEST_DATA) + "/formats/";

// Hub ids resolve through tests/data/formats/hf_cache, never the network.
struct FormatsEnv {
  EnvGuard env;
  FormatsEnv() {
    env.set("HF_HUB_CACHE", kFormats + "hf_cache");
    env.set("HF_HUB_OFFLINE", "1");
    env.unset("HUGGINGFACE_HUB_CACHE");
  }
};

// The setup a fixture builds into, with the extra flags a test gives.
inline profiles::BuiltSetup built(const std::string& file, const std::function<void(profiles::SetupInputs&)>& more = {}) {
  profiles::SetupInputs in;
  in.config = kFormats + file;
  in.gpu = "h100-80gb";
  if (more) more(in);
  return profiles::build_setup(in);
}

// "12:1 bf16" for a field the file set; "" when it did not.
inline std::string set_at(const profiles::Provenance& o, const std::string& field) {
  const auto it = o.fields.find(field);
  if (it == o.fields.end()) return "";
  return std::to_string(it->second.line) + ":" + std::to_string(it->second.col) + " " + it->second.key;
}
// The default's text for a field a rule set; "" otherwise.
inline std::string default_of(const profiles::Provenance& o, const std::string& field) {
  const auto it = o.defaults.find(field);
  return it == o.defaults.end() ? "" : it->second;
}
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The rendered error of a config, or "" when it reads.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.render();
  }
  return "";
}
inline std::string load_error(const std::string& text, const std::string& path) {
  return error_of([&] { profiles::load_config_text(text, path, path); });
}
inline std::string build_error(const std::string& text, const std::string& path, const std::string& model = "") {
  return error_of([&] {
    const profiles::LoadedConfig c = profiles::load_config_text(text, path, path);
    profiles::SetupInputs in;
    in.config = path;
    if (!model.empty()) in.model = model;
    profiles::build_setup(in, c);
  });
}
// Every warning of a config, rendered.
inline std::vector<std::string> warnings_of(const std::string& text, const std::string& path) {
  std::vector<std::string> out;
  for (const Warning& w : profiles::load_config_text(text, path, path).warnings) out.push_back(w.render());
  return out;
}

}  // namespace memplan::testing
