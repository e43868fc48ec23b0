// Architectures the training tools name in their own words (a torchtune builder, a torchtitan
// flavor, a LitGPT config name): each row maps the name to the memplan preset with the same
// architecture, or to the dimensions the tool builds, written as the Hugging Face config.json of
// that architecture so profiles' HF reader derives its quirks once. The tables live beside their
// readers (profiles/formats/<tool>.cpp), each row cited.
#pragma once

#include <string>
#include <vector>

#include "profiles/formats.h"

namespace memplan::profiles::detail {

struct ToolModel {
  const char* name;     // the tool's name for it ("llama3_2.llama3_2_1b", "llama3/8B", "Llama-3.2-1B")
  const char* hf_repo;  // the checkpoint it loads ("" none)
  const char* preset;   // a memplan preset with this architecture ("" none: `config` below)
  const char* config;   // else the architecture as an HF config.json (JSON text)
};

// The row called `name` (exact match), or an InputError at `where`: "unknown <what> 'x'", with
// the nearest names of `table` as the hint (or `lister` when none is near).
const ToolModel& find_tool_model(const std::vector<ToolModel>& table, const std::string& name, const char* what,
                                 const Where& where, const std::string& lister);

// The model of a row, with hf_repo set from it. A row's config that memplan cannot read is an
// internal error (the tables are memplan's own data).
ModelSpec tool_model_spec(const ToolModel& row);

// Makes `spec` the setup's model, named by the key `n` (every model field points at it).
void use_tool_model(ReadState& st, const ModelSpec& spec, const Node& n);

// Checkpointing of one layer in every k, as torchtune's and torchtitan's checkpoint wrappers count:
// the layers whose 1-based count is a multiple of k (torchtune/training/activations.py @ v0.6.1
// L30-60; _apply_layer_sac, torchtitan/distributed/activation_checkpoint.py @ v0.2.2 L27-49).
// memplan's every:k wraps layers 0, k, 2k, ...: the same number of layers when k divides
// `layers`, so that is used; otherwise the exact list. k <= 1 is full.
Checkpointing one_layer_in(int64_t k, int64_t layers);

}  // namespace memplan::profiles::detail
