// Config emitters: a plan written as the files people paste. memplan YAML (estimate reads it back
// to the same numbers), a training-script config (model/training/data/output sections, as the
// training scripts of memory guides read them), DeepSpeed ds_config.json
// (with a "memplan" block DeepSpeed ignores, holding what it cannot express), HF
// TrainingArguments YAML, and Lightning Trainer arguments. Each file opens with a comment:
// model, GPU, estimated peak, headroom, memplan version.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "estimator/setup.h"

namespace memplan::planner {

enum class EmitFormat { memplan, train_config, deepspeed, hf, lightning,
                        torchtune,  // planner/emit_torchtune.cpp
                        litgpt,     // planner/emit_litgpt.cpp
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
  int64_t global_batch = 0;
  double budget = 0.90;    // the tier fraction, written as memory.target_utilization
  int64_t peak_bytes = 0;
  double tokens_per_s = 0;  // modelled
};

// The file text for a format. InputError at --emit when the format cannot express the setup
// (torchtune has no DeepSpeed ZeRO, LitGPT's scripts fix checkpointing, ...).
std::string emit(const EmitContext& c, EmitFormat f);

// The training framework whose runtime a plan for format `f` should be made with (its
// defaults decide memory), or nullopt when the format does not decide it.
std::optional<Framework> emit_framework(EmitFormat f);

// The header every emitted file opens with, as "# " comment lines.
std::string comment_header(const EmitContext& c);

// The emitters of planner/emit_<tool>.cpp.
std::string emit_lightning(const EmitContext& c);
std::string emit_torchtune(const EmitContext& c);
std::string emit_litgpt(const EmitContext& c);

// Suggested file name for a format ("memplan-plan.yaml", "ds_config.json", ...).
std::string default_file_name(EmitFormat f);

}  // namespace memplan::planner
