// The inputs of a run on the H200 of tests/data/gpu (`--gpu h200 --device cuda --framework
// hf-trainer --torch-version 2.11 --transformers-version 5.17`): shared by the suites that
// re-estimate those runs.
#pragma once

#include <cstdint>
#include <string>

#include "profiles/profiles.h"

namespace memplan::testing {

inline profiles::SetupInputs h200_inputs(const std::string& model, int64_t batch, int64_t seq, const std::string& precision,
                                         const std::string& checkpointing) {
  profiles::SetupInputs si;
  si.model = model;
  si.gpu = "h200";
  si.device = "cuda";
  si.choice_flag(Choice::framework) = "hf-trainer";
  si.version_flag(Version::torch) = "2.11";
  si.version_flag(Version::transformers) = "5.17";  // shared/gpu/h200-env.txt
  si.count_flag(Count::micro_batch) = batch;
  si.count_flag(Count::seq_len) = seq;
  si.choice_flag(Choice::precision) = precision;
  si.choice_flag(Choice::checkpointing) = checkpointing;
  return si;
}

}  // namespace memplan::testing
