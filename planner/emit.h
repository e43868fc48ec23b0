// Config emitters: a plan written as the files people paste. memplan YAML (estimate reads it back
// to the same numbers), a training-script config (model/training/data/output sections, as the
// training scripts of memory guides read them), DeepSpeed ds_config.json
// (with a "memplan" block DeepSpeed ignores, holding what it cannot express), HF
// TrainingArguments YAML, and Lightning Trainer arguments. Each file opens with a comment:
// model, GPU, estimated peak, headroom, memplan version.
#pragma once

#include <string>
#include <vector>

#include "estimator/setup.h"

namespace memplan::planner {

enum class EmitFormat { memplan, train_config, deepspeed, hf, lightning, axolotl, accelerate };
bool parse_emit_format(const std::string& s, EmitFormat* out);
std::vector<std::string> emit_format_names();  // "memplan", "train-config", ...

// How the model is referred to in an emitted file.
struct ModelRef {
  enum class Kind { preset, file, inline_spec } kind = Kind::preset;
  std::string value;  // preset name, or the config.json path (absolute)
};

struct EmitContext {
  TrainingSetup setup;     // the plan's setup
  ModelRef model;
  std::string gpu;         // preset name ("" with a bare capacity)
  int64_t global_batch = 0;
  double budget = 0.90;    // the tier fraction, written as memory.target_utilization
  int64_t peak_bytes = 0;
  double tokens_per_s = 0;  // modelled
};

// The file text for a format.
std::string emit(const EmitContext& c, EmitFormat f);

// The re-check command an emitted file's header states ("# Re-check: memplan estimate --config
// THIS_FILE ..."), with THIS_FILE replaced by `file`; empty when the header states none.
std::string recheck_from_header(const std::string& text, const std::string& file);

// Suggested file name for a format ("memplan-plan.yaml", "ds_config.json", ...).
std::string default_file_name(EmitFormat f);

}  // namespace memplan::planner
