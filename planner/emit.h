// Config emitters: a plan written as the files people paste. memplan YAML (estimate reads it back
// to the same numbers), a training-script config (model/training/data/output sections, as the
// training scripts of memory guides read them), DeepSpeed ds_config.json
// (with a "memplan" block DeepSpeed ignores, holding what it cannot express), HF
// TrainingArguments YAML, and Lightning Trainer arguments. Each file opens with a comment:
// model, GPU, estimated peak, headroom, memplan version.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "estimator/fields.h"
#include "estimator/setup.h"
#include "estimator/text.h"
#include "planner/keep.h"

namespace memplan::planner {

// A registry row's flag with its value, as the re-check lines and fit's suggestions write it:
// flag_arg(Count::micro_batch, 4) is "--micro-batch 4" (estimator/fields.h names the flag, so a
// misspelt one does not compile). A switch as set: "--liger", or its negation "--no-liger".
template <class Id, class V>
std::string flag_arg(Id id, const V& value) {
  return fmt::format("{} {}", memplan::field(id).flag, text::shell_word(fmt::format("{}", value)));
}
inline std::string switch_arg(Switch id, bool on) { return on ? memplan::field(id).flag : memplan::field(id).negation(); }

enum class EmitFormat { memplan, train_config, deepspeed, hf, lightning,
                        torchtune,   // planner/emit_torchtune.cpp
                        litgpt,      // planner/emit_litgpt.cpp
                        axolotl,     // planner/emit_axolotl.cpp
                        accelerate,  // planner/emit_accelerate.cpp
                        llamafactory,  // planner/emit_llamafactory.cpp
};
bool parse_emit_format(const std::string& s, EmitFormat* out);
std::vector<std::string> emit_format_names();  // "memplan", "train-config", ...

// How the model is referred to in an emitted file.
struct ModelRef {
  enum class Kind { preset, file, inline_spec } kind = Kind::preset;
  std::string value;  // preset name, or the config.json path (absolute)
};

// The model in a training tool's own words (profiles::tool_model): torchtune's builder and
// tokenizer, LitGPT's checkpoint_dir. Empty when the format has none or does not need it.
struct ToolModelName {
  std::string name;       // "torchtune.models.llama3_2.llama3_2_1b", "checkpoints/meta-llama/Llama-3.2-1B"
  std::string tokenizer;  // torchtune: "torchtune.models.llama3.llama3_tokenizer"
  std::string checkpointer_type;  // torchtune: the FullModelHFCheckpointer model_type ("LLAMA3_2")
};

struct EmitContext {
  TrainingSetup setup;     // the plan's setup
  ModelRef model;
  ToolModelName tool;
  std::string gpu;         // preset name ("" with a bare capacity)
  std::string calibration;  // the calibration profile the plan applied, as given ("" none): re-checks name it
  int64_t global_batch = 0;
  double budget = 0.90;    // the tier fraction, written as memory.target_utilization
  int64_t peak_bytes = 0;
  double tokens_per_s = 0;  // modelled
  // The header will head the user's own file (plan keeping --config, planner/keep.h): no word on
  // the placeholders a fresh file holds (torchtune's tokenizer and checkpoint paths).
  bool users_file = false;
};

// The file text for a format. InputError at --emit when the format cannot express the setup
// (torchtune has no DeepSpeed ZeRO, LitGPT's scripts fix checkpointing, ...).
std::string emit(const EmitContext& c, EmitFormat f);

// The re-check command an emitted file's header states ("# Re-check: memplan estimate --config
// THIS_FILE ..."), with THIS_FILE replaced by `file`; empty when the header states none.
std::string recheck_from_header(const std::string& text, const std::string& file);

// The training framework whose runtime a plan for format `f` should be made with (its
// defaults decide memory), or nullopt when the format does not decide it.
std::optional<Framework> emit_framework(EmitFormat f);

// The header every emitted file opens with, as "# " comment lines.
std::string comment_header(const EmitContext& c);

// What a format cannot run, and what to change.
struct Refusal {
  std::string what, hint;
};
// What torchtune's v0.6.1 recipes have no key for in this setup (nullopt: nothing): the emitter
// refuses it, and can_express() keeps it out of a plan for --emit torchtune.
std::optional<Refusal> torchtune_refusal(const TrainingSetup& s);

// The emitters of planner/emit_<tool>.cpp.
std::string emit_lightning(const EmitContext& c);
std::string emit_torchtune(const EmitContext& c);
std::string emit_litgpt(const EmitContext& c);

// The format a config file read as `kind` (LoadedConfig::kind: "torchtune", "hf-trainer", ...)
// is written in by --emit, when memplan writes that format; nullopt otherwise. `plan --emit` for
// a --config already in that format keeps the user's file (planner/keep.h).
std::optional<EmitFormat> emit_format_of_config(const std::string& kind);
// How the tool's files may say what the emitter writes otherwise (HF's torch_dtype for dtype,
// LightningCLI's init_args), for keep_user_file.
KeyVocabulary emit_vocabulary(EmitFormat f);

// Suggested file name for a format ("memplan-plan.yaml", "ds_config.json", ...).
std::string default_file_name(EmitFormat f);

// The format's name as --emit spells it.
std::string emit_format_name(EmitFormat f);
// Whether the format can write a setup so that it reads back as the same setup; when not, `why`
// says what it cannot express ("HF TrainingArguments turns checkpointing on or off: no every:4").
// (planner/express.cpp; a format without a rule there can express everything.)
bool can_express(EmitFormat f, const TrainingSetup& s, std::string* why = nullptr);
// Whether the format has a key for DDP's gradient_as_bucket_view (planner/express.cpp); a plan for
// one that has none is made without it (planner/request.cpp).
bool states_bucket_view(EmitFormat f);
// Whether format f states torch's ZeroRedundancyOptimizer (parallel.zero_redundancy_optimizer).
bool states_zero_redundancy_optimizer(EmitFormat f);
// Whether an HF TrainingArguments / Axolotl file can state the setup's precision regime with its
// own keys (the emitters add a --precision re-check flag when not; plan never picks such a setup).
bool hf_writes_precision(const TrainingSetup& s);
bool axolotl_writes_precision(const TrainingSetup& s);
// LLaMA-Factory loads the base in its checkpoint's dtype and upcasts what trains to fp32 unless
// pure_bf16; DeepSpeed's mixed precision when it runs the step.
bool llamafactory_writes_precision(const TrainingSetup& s);
// The flags `memplan estimate --config FILE` needs beside the file to re-estimate it: what the
// format cannot carry (HF: the target; Lightning: all but its trainer arguments).
std::vector<std::string> recheck_flags(EmitFormat f, const EmitContext& c);
// The target as flags: "--gpu rtx-3090", "--device cpu", "--gpu-memory 24GiB" (stated_card_bytes),
// then "--allocator-cap 0.5" where the setup caps the caching allocator (the plan's capacity is the
// cap plus the context, never written as a card), "--host-memory 512GiB" where the node's RAM is
// stated (stated_host_bytes), and "--calibration FILE" where the plan applied one (no file format
// holds it).
std::vector<std::string> target_args(const EmitContext& c);
// The card's memory a file states: the card's own (none when unknown) for a card given by its
// memory, and beside a preset only where it differs from the preset's (--gpu rtx-3090 --gpu-memory 20GiB);
// for the CPU only where --gpu-memory replaced this machine's RAM.
int64_t stated_card_bytes(const EmitContext& c);
// The node's RAM a file states (offload plans are checked against it): the setup's where known,
// none for --device cpu's default, this machine's RAM.
int64_t stated_host_bytes(const EmitContext& c);
// The allocator cap as its flag and its hardware: key take it: a fraction as given ("0.5"), else a
// size with its unit ("11GiB"); "" without a cap.
std::string allocator_cap_text(const DeviceSpec& d);

}  // namespace memplan::planner
