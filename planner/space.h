// The search space fit and plan share: which precision regimes, attention kernels, checkpointing
// policies, optimizers, sharding/offload choices and fine-tuning modes may be tried for a setup,
// on its card (capabilities, estimator/capability.h), under its framework and the user's
// constraints; and, for everything left out, why. Nothing here estimates memory.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "estimator/setup.h"

namespace memplan::planner {

// How the model states are spread: DeepSpeed ZeRO (stage, offload), PyTorch FSDP, or neither
// (one GPU, or DDP).
struct Sharding {
  int zero = 0;
  Offload offload = Offload::none;
  FsdpMode fsdp = FsdpMode::none;
  bool deepspeed = false;  // the DeepSpeed engine runs the step (a ZeRO stage, or --framework deepspeed)

  bool operator==(const Sharding& o) const {
    return zero == o.zero && offload == o.offload && fsdp == o.fsdp && deepspeed == o.deepspeed;
  }
  // "ZeRO-2 + offload optimizer", "FSDP full", "DDP" / "one GPU".
  std::string describe(int64_t data_parallel) const;
  // The flags that ask for it: "--zero 2 --offload optimizer", "--fsdp full", "--zero 0".
  std::string flags() const;
};
Sharding sharding_of(const TrainingSetup& s);
void apply(TrainingSetup& s, const Sharding& sh);

// The precision regime a choice runs as under a sharding: the DeepSpeed engine runs bf16/fp16
// (autocast or pure) as its mixed precision (fp32 master weights and states); FSDP and DDP keep it.
Precision regime_under(Precision p, const Sharding& sh);

// An option left out of the search, and why ("flash attention: rx-6750-xt (AMD RDNA2 (gfx103x)):
// RDNA2 has no flash-attn kernel ...").
struct LeftOut {
  std::string option;
  std::string why;
};

struct SearchSpace {
  std::vector<Precision> precisions;          // as asked; regime_under() maps them per sharding
  std::vector<AttentionImpl> attentions;      // flash only where the card runs it (and half precision)
  std::vector<Checkpointing> checkpointings;
  std::vector<OptimizerKind> optimizers;      // bitsandbytes ones only where the card runs them
  std::vector<Sharding> shardings;
  std::vector<FinetuneMode> finetunes;        // fit adds LoRA/QLoRA ("changes what you train")
  // Liger's kernels off or on (runtime.liger, with its fused linear cross-entropy when turned on);
  // empty: the base's. fit and plan add them where liger_applies (plan: unless --liger/--no-liger fixed it).
  std::vector<bool> ligers;
  std::vector<LeftOut> left_out;
};

// What the user fixed or allowed. Unset lists: memplan's defaults for the card and framework.
struct Constraints {
  std::vector<Precision> precisions;          // allowed precision regimes (empty: by card)
  std::vector<OptimizerKind> optimizers;      // allowed optimizers (empty: the base's)
  std::vector<AttentionImpl> attentions;      // allowed (empty: eager, sdpa, flash where it runs)
  std::vector<Checkpointing> checkpointings;  // allowed (empty: none, selective, every:4, every:2, full)
  std::optional<int> zero;                    // --zero N: only that stage (0: no DeepSpeed)
  std::optional<Offload> offload;             // --offload: only that
  std::optional<FsdpMode> fsdp;               // --fsdp: only that mode (no DeepSpeed)
  bool no_deepspeed = false;                  // --no-deepspeed
  std::string liger_fixed_by;                 // the flag that fixes Liger as the base has it ("--no-liger"); empty: searched
  bool allow_offload = true;                  // --no-offload clears it
};

// The precisions memplan tries on a card: autocast, fp32 and (where the card has bf16) pure bf16;
// fp16 in place of bf16 on cards without bf16.
std::vector<Precision> default_precisions(const DeviceSpec& d);

// The plan's space for a base setup under constraints. InputError (at the flag) when the
// constraints contradict each other or leave nothing the card runs (--zero 3 --no-deepspeed;
// --optimizers adamw-8bit on Apple MPS).
SearchSpace plan_space(const TrainingSetup& base, const Constraints& c);

// Whether an optimizer runs under a sharding: bitsandbytes' 8-bit and paged optimizers step on the
// GPU, so no offload (DeepSpeed's offload steps with its own CPU Adam, deepspeed/ops/adam/cpu_adam.py
// @ v0.16.4; bitsandbytes README @ 0.47.0: no CPU 8-bit optimizers).
bool combinable(const Sharding& sh, OptimizerKind o, std::string* why = nullptr);

// Whether Liger's kernels (use_liger_kernel, Axolotl's Liger plugin, enable_liger_kernel) apply to
// the setup: a Trainer that applies them by model_type (the HF Trainer and the tools on it), a
// model type Liger patches (MODEL_TYPE_TO_APPLY_LIGER_FN, src/liger_kernel/transformers/
// monkey_patch.py @ v0.5.10) and a GPU (Triton kernels); `why` says which is missing.
bool liger_applies(const TrainingSetup& s, std::string* why);

// Whether the framework can run DeepSpeed's engine / FSDP, with the reason when it cannot.
bool framework_allows_deepspeed(const TrainingSetup& s, std::string* why);
bool framework_allows_fsdp(const TrainingSetup& s, std::string* why);

}  // namespace memplan::planner
