// The runtime defaults of each training framework (--framework, runtime.framework): what its
// training loop keeps alive, how it computes the loss, which attention and optimizer
// implementation it runs, how it shards, and what it allocates at start-up. One table, each
// default with the upstream source (file @ version) it was read from; profiles/ applies it to
// the fields a config or flag did not set, and the estimate's header and JSON show each value
// with its source.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "estimator/setup.h"

namespace memplan {

// A setting a framework decided for a setup.
struct FrameworkDefault {
  std::string field;   // setup path: "attention", "runtime.keep_logits", "parallel.fsdp", ...
  std::string value;   // as printed ("sdpa", "true", "chunked:8")
  std::string source;  // "recipes/full_finetune_single_device.py @ v0.6.1 (del logits before backward)"
};

// The fields a framework can decide, in the order they are applied and reported.
const std::vector<std::string>& framework_fields();

// Sets, for every framework field where `is_set(field)` is false, the value s.runtime.framework
// gives it (some depend on the torch version, the GPU count or the device), and returns what it
// set with its source. Fields the user set are left alone, so each knob can still be changed
// on its own.
std::vector<FrameworkDefault> apply_framework_defaults(TrainingSetup& s, const std::function<bool(const std::string&)>& is_set);

// What the framework allocates outside the tensors of the step, for explain and the notes
// ("DeepSpeed BF16_Optimizer: fp32 gradient buffer of every parameter at start-up").
// Empty when nothing.
std::string framework_buffers_note(const TrainingSetup& s);

}  // namespace memplan
