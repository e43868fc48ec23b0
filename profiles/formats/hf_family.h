// What the readers of tools built on the Hugging Face Trainer share (internal to profiles/): HF
// TrainingArguments / TRL (hf_trainer.cpp) and Axolotl (axolotl.cpp) name optimizers by
// OptimizerNames, attention by attn_implementation and LoRA targets by module name, shard with
// TrainingArguments' fsdp words, and pass DeepSpeed configs whose "auto" values the Trainer fills;
// accelerate's config (accelerate.cpp) describes the launch around such a script. Each fact carries
// the upstream source it was read in.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "profiles/formats.h"

namespace memplan::profiles::detail::hf {

// The TrainingArguments read (a transformers main commit of the 5.x line; the defaults cited from it
// hold since 4.32 unless a note says otherwise).
constexpr const char* kTrainingArgs = "transformers src/transformers/training_args.py @ fd798335";

// A key's position with text for provenance ("per_device_train_batch_size x 2 (DPO ...)").
Where keyed(const Node& n, const std::string& text = "");
// Records `field` as set by key `n`, with `text` in place of the key's path when given.
void note(ReadState& st, const std::string& field, const Node& n, const std::string& text = "");
// Records `field` as a tool default: "<source text>".
void note_default(ReadState& st, const std::string& field, const std::string& text);
// DeepSpeed's overlap_comm where a config does not set it: on at ZeRO stage 3 only
// (deepspeed/runtime/zero/config.py @ v0.16.4 L134, L351-353), noted as that default.
void default_overlap_comm(ReadState& st);
// A warning for each top-level key that is neither in `known` nor one typo away from it (read_section
// warns about those) but whose name says memory (deepspeed_config, fsdp_offload, max_seq_len, ...):
// such a key is never dropped silently. `tool` names the documentation to check ("Axolotl").
void warn_unread_memory_keys(const Node& root, ReadState& st, const std::vector<std::string>& known, const char* tool);
// Both checks of a flat config's top level against `known`: a "did you mean" for a key one typo
// away from one, and warn_unread_memory_keys for the rest. Reads nothing.
void check_keys(const Node& root, ReadState& st, const std::vector<std::string>& known, const char* tool);

// HfArgumentParser passes JSON and YAML values as they are: the hint of a flag that is not a bool.
constexpr const char* kHfArgsBoolHint = "write true or false (HfArgumentParser passes JSON and YAML values as they are: a string is "
                                        "not a flag)";
// What TrainingArguments itself reads in every tool that hands it the file (HF/TRL, LLaMA-Factory):
// the batch (per_device_train_batch_size 8, gradient_accumulation_steps 1 by default), and the
// DataLoader (dataloader_num_workers, dataloader_pin_memory True by default,
// dataloader_prefetch_factor) with auto_find_batch_size.
void read_training_args_batch(const Node& root, ReadState& st);
void read_training_args_loader(const Node& root, ReadState& st);

// The model a file names; when it cannot be resolved the error waits for build_setup, where
// --model may replace the model (a Hub mirror offline, a local path that only exists elsewhere).
void use_model(ReadState& st, const Node& n);

// Typed reads whose errors carry a hint in the tool's words.
bool flag(const Node& n, const std::string& hint);
int64_t positive(const Node& n, const std::string& hint);

// ---- optimizers --------------------------------------------------------------------------------

struct Optimizer {
  OptimizerKind kind = OptimizerKind::adamw;
  std::optional<OptimizerImpl> impl;  // set when the name fixes the kernel (adamw_torch_fused)
  const char* counted_as = "";        // how a near relative is counted ("" when it is exact)
  const char* unmodelled = nullptr;   // why memplan cannot model it; nullptr when it can
};
// A transformers OptimizerNames value (training_args.py), or with `axolotl` one of Axolotl's own
// (src/axolotl/utils/schemas/enums.py @ v0.18.0 CustomSupportedOptimizers); nullopt when unknown.
std::optional<Optimizer> find_optimizer(const std::string& name, bool axolotl);
std::vector<std::string> optimizer_names(bool axolotl);
// Reads `optim` (HF) or `optimizer` (Axolotl) into optimizer and runtime.optimizer_impl; an
// optimizer memplan cannot model is a warning and leaves AdamW. `optim_args` may turn SGD's
// momentum on ("momentum=0.9").
void read_optimizer(const Node& n, ReadState& st, bool axolotl, const Node* optim_args);

// ---- attention -----------------------------------------------------------------------------------

// attn_implementation as transformers names it: eager, sdpa, flash_attention_2/3 (or a hub kernel
// such as kernels-community/flash-attn); flex/paged/sage/xformers are warnings (estimated as sdpa).
void read_attention(const Node& n, ReadState& st);

// ---- LoRA ----------------------------------------------------------------------------------------

// lora_target_modules as memplan's target names (q_proj -> q, ..., down_proj -> down; all-linear
// and names memplan does not shorten kept as written).
std::vector<std::string> lora_targets(const Node& n);
// lora_modules_to_save: embed_tokens / lm_head become trainable.
void read_modules_to_save(const Node& n, ReadState& st);

// ---- FSDP ----------------------------------------------------------------------------------------

// TrainingArguments.fsdp (true, "full_shard auto_wrap offload", or a list of those words), as
// _process_fsdp_args reads it; nullopt for false / empty.
struct FsdpWords {
  FsdpMode mode = FsdpMode::full_shard;
  bool offload = false;
  bool zero2_hybrid = false;  // hybrid_shard_zero2: estimated as hybrid_shard
  Where where;
};
std::optional<FsdpWords> fsdp_words(const Node& n);
// An FSDP1 strategy name or number (accelerate FSDP_SHARDING_STRATEGY: FULL_SHARD = 1 ...
// HYBRID_SHARD_ZERO2 = 5), any case; nullopt when unknown.
std::optional<FsdpMode> fsdp_strategy(const std::string& text, bool* zero2_hybrid);
// fsdp_config as a mapping with the fsdp_ prefix stripped from its keys (a JSON path or JSON text
// is read first).
Node fsdp_config(const Node& n, ReadState& st);
// A "did you mean" warning for each key of an fsdp_config mapping one typo away from an FSDP
// option (fsdp_ofload_params); other keys are left alone.
void check_fsdp_option_names(const Node& cfg, ReadState& st);

// ---- DeepSpeed -----------------------------------------------------------------------------------

// What the launcher fills DeepSpeed's "auto" values from.
struct DeepSpeedFill {
  std::optional<int64_t> micro_batch;  // per_device_train_batch_size (none: the script decides)
  std::optional<int64_t> grad_accum;
  bool bf16 = false, fp16 = false;     // the launcher's mixed precision
  bool must_match = true;              // the HF Trainer refuses explicit values that differ
  std::string bf16_key = "bf16", fp16_key = "fp16";  // for mismatch messages
};
// What the DeepSpeed config decided.
struct DeepSpeedRead {
  std::optional<Precision> precision;  // mixed-bf16 / mixed-fp16 / fp32
  Where precision_where;
  std::string precision_text;          // provenance text for precision
  bool optimizer_block = false;        // DeepSpeed builds the optimizer itself
};
// The DeepSpeed config of a `deepspeed:` key: a path (relative to this file's folder, then the
// working directory), JSON text, or the mapping inline. Reads it into st (ZeRO stage, offload,
// buckets, DeepSpeed's optimizer, accumulation) and sets runtime.framework to deepspeed.
DeepSpeedRead read_deepspeed(const Node& value, ReadState& st, const DeepSpeedFill& fill);
// The same for a DeepSpeed config already parsed (accelerate's deepspeed_config_file).
DeepSpeedRead apply_deepspeed(const Node& root, const std::string& path, ReadState& st, const DeepSpeedFill& fill,
                              const Node& named_by);
// A file named by a config key: `relative` beside the config file, else in the working directory;
// InputError at `n` naming both places otherwise.
std::string find_beside(const Node& n, const std::string& relative, ReadState& st, const char* what, const std::string& hint);

// ---- accelerate (accelerate.cpp) ---------------------------------------------------------------------

// What an accelerate config says about the launch around a training script.
struct Launch {
  bool deepspeed = false;              // distributed_type: DEEPSPEED
  bool fsdp = false;                   // distributed_type: FSDP
  std::optional<DeepSpeedRead> ds;     // the DeepSpeed config accelerate hands the engine
  std::string mixed_precision;         // no | fp16 | bf16 | fp8 ("" when the file does not say)
  const Node* mixed_node = nullptr;
};
// Reads an accelerate config's launch into st: GPU count, DeepSpeed (ZeRO stage, offload, the
// config file) or FSDP (strategy, offload, activation checkpointing), torch.compile. With
// `trainer` (an HF Trainer script launched by it), DeepSpeed "auto" values are the Trainer's and
// must match; without, the mixed precision is accelerate's own.
Launch apply_accelerate(const Node& root, ReadState& st, const DeepSpeedFill* trainer);

}  // namespace memplan::profiles::detail::hf
