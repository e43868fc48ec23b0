// Shared by the libFuzzer targets (tests/fuzz/*.cpp): the invariants every estimate keeps, a
// training setup drawn from the fuzzer's bytes, and the path from a loaded config to a checked
// estimate. A broken invariant aborts with a message, which libFuzzer records as a crash; bad
// input must end in InputError, which the targets catch.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "estimator/estimate.h"
#include "estimator/model.h"
#include "tests/fuzz/setups.h"
#include "profiles/profiles.h"

namespace memplan::fuzz {

// A config as a command would use it: build_setup (validation included), then a checked
// estimate. InputError is the expected way out for bad input.
inline void estimate_config(const profiles::LoadedConfig& cfg, const std::string& path) {
  profiles::SetupInputs in;
  in.config = path;
  if (!cfg.has_model) in.model = "gpt2";
  const profiles::BuiltSetup b = profiles::build_setup(in, cfg);
  check_estimate(b.setup, b.calibration ? &*b.calibration : nullptr);
}

}  // namespace memplan::fuzz
