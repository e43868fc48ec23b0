// Parameters of a model, one line per tensor (llm.c's fill_in_parameter_sizes, as a list):
// embeddings, each layer's linears and norms, the head, and LoRA adapters. Parameter counts,
// the optimizer's per-parameter temporaries and the layer builders all read this list, so a
// dimension is written once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "estimator/setup.h"

namespace memplan {

// The role of a linear inside a layer; LoRA targets and autocast casts are decided per role.
enum class Role {
  q, k, v, qkv,           // attention projections (qkv: fused, as GPT-2 c_attn, NeoX, Phi-3)
  o,                      // attention output projection
  gate, up, gate_up,      // gated MLP (gate_up: fused, Phi-3)
  down,                   // MLP output (gated or not; GPT-2 mlp.c_proj)
  fc_in,                  // non-gated MLP input (GPT-2 c_fc, BERT intermediate)
  q_a, q_b, kv_a, kv_b,   // multi-head latent attention: q and kv down/up projections (DeepSeek-V2/V3)
  router,                 // MoE router (gate)
  expert_gate, expert_up, expert_down,  // per routed expert
  expert_gate_up,         // fused per-expert gate|up (GPT-OSS, Llama-4, Granite input_linear)
  shared_gate, shared_up, shared_down,  // shared experts (one fused width)
  shared_expert_gate,     // Qwen2-MoE sigmoid gate of the shared expert (h -> 1)
  lm_head, pooler, classifier, mlm_transform,
};
const char* role_name(Role r);

struct Linear {
  Role role;
  int64_t in = 0;     // input features
  int64_t out = 0;    // output features
  bool bias = false;
  int64_t count = 1;  // instances inside the layer (routed experts)
  int64_t weight_elems() const { return in * out; }
  int64_t elems() const { return (in * out + (bias ? out : 0)) * count; }
};

// The linears of one transformer layer (dense when moe == false).
std::vector<Linear> layer_linears(const ModelSpec& m, bool moe);
// transformers >= 5 with torch >= 2.9 runs a stacked-experts family (ModelSpec::stacked_experts_v5)
// through grouped_mm_experts_forward (integrations/moe.py): one _grouped_mm per projection over the
// (E, ...) parameters, in the weights' dtype (autocast does not touch _grouped_mm).
bool grouped_mm_experts(const TrainingSetup& s);
// The linears as the setup's transformers release registers them: with grouped_mm_experts(s) a
// gated family's experts are one stacked gate_up_proj (E, 2 f_e, h) and one down_proj (E, h, f_e)
// instead of E gate/up/down linears (MixtralExperts.__init__ in transformers 5).
std::vector<Linear> layer_linears(const TrainingSetup& s, bool moe);
// Norm parameters of one layer (weights and biases of every norm in it).
int64_t layer_norm_params(const ModelSpec& m);
// Number of hidden-width norms applied per layer (2 for most, 1 for a shared-norm parallel layer,
// 4 for Gemma-2/3's sandwich norms, 2 post norms for OLMo-2).
int64_t norms_per_layer(const ModelSpec& m);
bool has_qk_norm(const ModelSpec& m);  // q/k normalisation with or without weights
// Weights of the q and k norms of one layer (0 for none and for L2).
int64_t qk_norm_params(const ModelSpec& m);

// Where a parameter lives and whether it trains under the setup's fine-tuning mode.
enum class ParamGroup { embedding, attention, mlp, experts, router, norm, head, adapter };

struct ParamTensor {
  std::string name;       // HF-style name with * for the layer index
  int64_t elements = 0;   // per instance
  int64_t count = 1;      // instances (layers x experts)
  ParamGroup group = ParamGroup::attention;
  bool matmul = false;    // a matmul weight: autocast caches a half copy; quantized under QLoRA
  bool trainable = true;
  bool quantized = false; // stored as NF4/int8 (QLoRA / 8-bit base)
  int64_t rows = 0;       // matrix shape when 2-D (Adafactor factors its second moment)
  int64_t cols = 0;
  int64_t total() const { return elements * count; }
};

// Every parameter tensor of the model under the setup (LoRA adapters included).
std::vector<ParamTensor> parameter_tensors(const TrainingSetup& s);

struct ParameterCounts {
  int64_t total = 0;            // all parameters (adapters included)
  int64_t trainable = 0;
  int64_t frozen = 0;
  int64_t quantized = 0;        // frozen parameters stored in 4/8 bits
  int64_t embedding = 0;        // token, position and type embeddings
  int64_t matmul = 0;           // parameters used as matmul weights (autocast cache)
  int64_t trainable_matmul = 0;
  int64_t adapter = 0;          // LoRA A and B
  int64_t largest_trainable = 0;  // elements of the largest trainable tensor
  int64_t active_per_token = 0;   // parameters touched per token (MoE: top-k experts only)
  int64_t trainable_tensors = 0;  // number of trainable tensors (allocator rounding)
};
ParameterCounts count_parameters(const TrainingSetup& s);
// The same over a list parameter_tensors(s) already built.
ParameterCounts count_parameters(const TrainingSetup& s, const std::vector<ParamTensor>& tensors);
// Plain count for the architecture alone (no adapters), as model cards quote it.
int64_t count_model_parameters(const ModelSpec& m);


// Fine-tuning decisions shared by the parameter list and the layer builders.
bool layer_frozen(const TrainingSetup& s, int64_t layer);      // whole layer frozen
bool base_trainable(const TrainingSetup& s, Role r, int64_t layer);
bool lora_on(const TrainingSetup& s, Role r);                  // LoRA adapter on this linear
bool embeddings_trainable(const TrainingSetup& s);
bool head_trainable(const TrainingSetup& s);
// Bits per parameter of a quantized base weight (NF4 with/without double quant, int8).
double quantized_bits(const Finetune& f);
// The base weights adapters train on are stored quantized: a pre-quantized checkpoint
// (model.quantized) or QLoRA/8-bit loading (finetune.base_quant). The checkpoint's own
// quantization wins: bitsandbytes cannot re-quantize GPTQ/AWQ/FP8 weights.
bool base_quantized(const TrainingSetup& s);
double base_weight_bits(const TrainingSetup& s);
// Whether the linear of `role` is stored quantized under the setup.
bool role_quantized(const TrainingSetup& s, Role r);

}  // namespace memplan
