// The segments of a training step, written as the ops the HF modelling code runs: the
// embeddings, one transformer layer (dense or MoE, decoder or BERT encoder), and the head with
// its loss. layers.cpp holds the per-op table (what each op saves, in which dtype, with the
// derivatives.yaml citation), so the formulas of the activation terms live in that one file.
#pragma once

#include <cstdint>
#include <string>

#include "estimator/graph.h"
#include "estimator/setup.h"

namespace memplan {

// Bytes of the data fed to a step: input ids and labels (int64), alive for the whole step.
int64_t batch_input_bytes(const TrainingSetup& s);

// Model-level tensors shared by all layers and alive from the embedding's forward to the first
// layer's backward (RoPE cos/sin, a mask tensor a fused SDPA kernel saves), and those alive only
// during forward (the eager 4-D causal mask) unless checkpointing saves them.
struct SharedTensors {
  int64_t whole_step_bytes = 0;  // cos/sin, SDPA's saved mask tensor
  int64_t forward_bytes = 0;     // causal mask
  // inputs_embeds (and GPT-2's position_embeds): locals of the model's forward, alive through
  // every layer. When inputs_embeds is itself layer 0's input, layer 0 already counts it.
  int64_t embeds_bytes = 0;
  bool embeds_is_layer_input = false;
  std::string what;
};
SharedTensors shared_tensors(const TrainingSetup& s);

// Model buffers that are neither parameters nor activations (GPT-2's causal-mask buffer).
int64_t model_buffer_bytes(const TrainingSetup& s);

// The dtype of the residual stream between layers (bytes per element).
int64_t residual_bytes(const TrainingSetup& s);

sim::Segment embedding_segment(const TrainingSetup& s);
// One transformer layer; `moe` selects the MoE block, `layer` decides frozen/LoRA state.
sim::Segment layer_segment(const TrainingSetup& s, bool moe, int64_t layer);
// Final norm, head and loss (with tied embeddings the head's weight gradient is the embedding's;
// see head_shares_embedding).
sim::Segment head_segment(const TrainingSetup& s);

// Bytes of the head's output logits (in the matmul's output dtype).
int64_t logits_bytes(const TrainingSetup& s);

// True when the LM head reuses the token-embedding matrix, so the embedding's backward adds
// into an existing .grad (a temporary of V x h).
bool head_shares_embedding(const TrainingSetup& s);

}  // namespace memplan
