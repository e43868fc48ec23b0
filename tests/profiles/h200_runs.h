// The inputs of a run on the H200 of tests/data/gpu (`--gpu h200 --device cuda --framework
// hf-trainer --torch-version 2.11 --transformers-version 5.17`): shared by the suites that
// re-estimate those runs.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

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

// The inputs of one `case` of tests/data/gpu/h200-loops.jsonl (its preset, batch, sequence,
// weights/autocast, checkpointing, attention and optimizer as the data set's README lists them).
inline profiles::SetupInputs h200_loop_inputs(const nlohmann::json& c) {
  const std::string weights = c.value("weights", ""), autocast = c.value("autocast", "");
  profiles::SetupInputs si = h200_inputs(
      c.at("preset").get<std::string>(), c.at("batch").get<int64_t>(), c.at("seq").get<int64_t>(),
      weights == "bf16" ? "bf16" : autocast == "bf16" ? "amp-bf16" : autocast == "fp16" ? "amp-fp16" : "fp32",
      c.value("checkpointing", "none"));
  if (c.contains("attention")) si.choice_flag(Choice::attention) = c.at("attention").get<std::string>();
  if (c.contains("optimizer")) si.choice_flag(Choice::optimizer) = c.at("optimizer").get<std::string>();
  if (c.contains("optimizer_impl")) si.choice_flag(Choice::optimizer_impl) = c.at("optimizer_impl").get<std::string>();
  return si;
}

}  // namespace memplan::testing
