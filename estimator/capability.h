// What a device can run: the features whose support depends on the card (bf16, flash attention,
// fused SDPA, bitsandbytes, DeepSpeed and its offload, multi-GPU), read from the setup's
// DeviceSpec (profiles/gpus.yaml through profiles::apply_gpu). The planner offers only what the
// device supports; profiles turns what a setup asks for and the device lacks into warnings
// (errors under --strict). Nothing here computes memory.
#pragma once

#include <string>
#include <vector>

#include "estimator/estimate.h"
#include "estimator/setup.h"

namespace memplan {

// Support of `f` on device `d`; when it is not yes and `why` is given, the reason as a sentence
// naming the card ("rx-6750-xt (AMD RDNA2 (gfx103x)): RDNA2 has no flash-attn kernel: ...").
// A device without capability data (a bare capacity) supports everything but bf16 as recorded.
Support device_support(const DeviceSpec& d, Feature f, std::string* why = nullptr);

// True when the setup uses the feature (flash attention asked for, a bitsandbytes optimizer or
// quantized base, a ZeRO stage, ...).
bool setup_uses(const TrainingSetup& s, Feature f);

// One Problem per feature the setup uses that its device does not fully support. `field` is the
// setup path that asks for it (precision, attention, optimizer, finetune.mode,
// parallel.zero_stage, parallel.offload, parallel.num_gpus), `message` starts with the feature
// ("bf16: t4 (...) has no bf16 arithmetic"), `hint` says what runs instead.
std::vector<Problem> device_problems(const TrainingSetup& s);

}  // namespace memplan
