// TrainingSetup: the one input every memplan module speaks. A plain aggregate with documented
// defaults (leveldb's Options style). profiles/ builds it from files and flags, estimator/ turns
// it into a MemoryBreakdown, planner/ varies it, calibrate/ measures it.
// Nothing here computes memory; see estimator/estimate.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memplan {

// ---------------------------------------------------------------------------------------------
// Model architecture
// ---------------------------------------------------------------------------------------------

enum class NormKind { layer_norm, rms_norm };

// The MLP activation as the modelling code computes it; it decides what autograd saves.
enum class Activation {
  gelu,       // F.gelu exact: saves its input
  gelu_tanh,  // F.gelu(approximate="tanh") (HF "gelu_pytorch_tanh"): saves its input
  gelu_new,   // HF NewGELUActivation, a composite of pow/tanh/mul: saves 4 full tensors
  silu,       // F.silu: saves its input
  relu,       // F.relu: saves its output
};

enum class PositionKind { learned, rotary, none };

// What sits on top of the final hidden states.
enum class HeadKind {
  causal_lm,                // *ForCausalLM: vocabulary logits + shifted cross-entropy
  masked_lm,                // *ForMaskedLM: vocabulary logits + cross-entropy
  sequence_classification,  // *ForSequenceClassification: num_labels logits
};

struct ModelSpec {
  std::string name;        // preset name or file the model came from
  std::string model_type;  // HF model_type ("gpt2", "llama", "mixtral", "bert", ...)
  std::string hf_repo;     // HF repository id when known ("meta-llama/Llama-2-7b-hf")
  HeadKind head = HeadKind::causal_lm;

  int64_t hidden_size = 0;          // h
  int64_t num_layers = 0;           // L
  int64_t num_attention_heads = 0;  // a
  int64_t num_key_value_heads = 0;  // k (== a for multi-head attention, < a for GQA)
  int64_t head_dim = 0;             // d (h / a unless the config says otherwise)
  int64_t intermediate_size = 0;    // f, dense MLP width
  int64_t vocab_size = 0;           // V
  int64_t max_position_embeddings = 0;  // learned position table rows
  int64_t num_labels = 2;               // sequence-classification head width
  int64_t type_vocab_size = 0;          // BERT token-type table rows (0: none)

  NormKind norm = NormKind::layer_norm;
  Activation activation = Activation::gelu;
  bool gated_mlp = false;  // SwiGLU/GeGLU: gate, up and down matrices
  PositionKind positions = PositionKind::learned;
  bool tie_word_embeddings = true;
  bool qkv_bias = true;   // biases on q, k, v projections
  bool o_bias = true;     // bias on the attention output projection
  bool mlp_bias = true;   // biases on MLP matrices
  bool norm_bias = true;  // LayerNorm has a bias; RMSNorm never does
  bool final_norm = true;
  bool bert_style = false;  // post-LN encoder with embedding LayerNorm, pooler, MLM transform

  double attention_dropout = 0.0;  // dropout on attention probabilities
  double hidden_dropout = 0.0;     // residual dropout after attention and MLP
  double embedding_dropout = 0.0;  // dropout after the embeddings

  // Mixture of experts (num_experts == 0: dense).
  int64_t num_experts = 0;                      // E
  int64_t experts_per_token = 0;                // K_top
  int64_t moe_intermediate_size = 0;            // f_e (0: intermediate_size)
  int64_t num_shared_experts = 0;               // always-on experts (Qwen2-MoE, DeepSeek)
  int64_t shared_expert_intermediate_size = 0;  // width of all shared experts together
  bool shared_expert_gate = false;              // Qwen2-MoE sigmoid gate on the shared expert
  bool norm_topk_prob = true;                   // renormalise the top-k weights (Mixtral: yes)
  double capacity_factor = 0.0;                 // 0: dropless (HF); > 0: per-expert capacity
  int64_t moe_layer_frequency = 1;              // every n-th layer is MoE (decoder_sparse_step)
  int64_t first_dense_layers = 0;               // leading dense layers (first_k_dense_replace)

  // True when layer i (0-based) uses the MoE block.
  bool is_moe_layer(int64_t i) const {
    if (num_experts <= 0 || i < first_dense_layers) return false;
    return moe_layer_frequency <= 1 || (i + 1) % moe_layer_frequency == 0;
  }
  int64_t expert_width() const { return moe_intermediate_size > 0 ? moe_intermediate_size : intermediate_size; }
};

// ---------------------------------------------------------------------------------------------
// Training configuration
// ---------------------------------------------------------------------------------------------

// Precision regimes are kept apart on purpose (DESIGN.md "Precision regimes"):
//   fp32        everything fp32
//   amp_fp16/bf16  torch.autocast: fp32 params, grads and optimizer states; half activations where
//                  the autocast policy casts; the autocast cache of half weight copies in forward
//   bf16/fp16   pure 16-bit ("bf16-true"): params, grads, states and activations 16-bit
//   mixed_fp16/bf16  DeepSpeed/Megatron: 16-bit params and grads, fp32 master weights and states
enum class Precision { fp32, amp_fp16, amp_bf16, bf16, fp16, mixed_fp16, mixed_bf16 };

enum class OptimizerKind {
  adamw, adam, sgd, sgd_momentum,
  adafactor,           // HF Adafactor, beta1=None (its default): factored second moment only
  adafactor_momentum,  // HF Adafactor with beta1 set: plus a full first moment
  adamw_8bit, lion, paged_adamw, paged_adamw_8bit
};

// How the optimizer step is implemented; it decides the step's temporaries.
enum class OptimizerImpl {
  automatic,  // PyTorch's default for the device: foreach on CUDA, for-loop on CPU
  for_loop,   // one parameter at a time (LibTorch C++, torch 1.13 default)
  foreach,    // multi-tensor (torch 2.x default on CUDA)
  fused,      // fused kernel (no parameter-sized temporaries)
};

enum class CheckpointMode {
  none,       // every activation saved
  selective,  // attention core (scores, softmax, dropout) recomputed (Korthikanti et al. 2022)
  every,      // one layer in every K is checkpointed (K = every_k); every:1 == full
  full,       // every layer checkpointed: only its input is saved
};

struct Checkpointing {
  CheckpointMode mode = CheckpointMode::none;
  int64_t every_k = 1;  // used with CheckpointMode::every

  // True when layer i is wrapped in a checkpoint.
  bool layer_checkpointed(int64_t i) const {
    if (mode == CheckpointMode::full) return true;
    if (mode == CheckpointMode::every) return every_k <= 1 || i % every_k == 0;
    return false;
  }
};

enum class AttentionImpl {
  eager,  // HF eager: materialises the s x s scores and probabilities
  sdpa,   // torch scaled_dot_product_attention (backend chosen by device, dtype, mask, dropout)
  flash,  // flash-attn kernels: saves only the logsumexp besides q, k, v, out
};

enum class Offload { none, optimizer, optimizer_and_params };

struct Parallelism {
  int64_t num_gpus = 1;           // world size
  int64_t tensor_parallel = 1;    // Megatron-style tensor parallel degree
  int64_t pipeline_parallel = 1;  // pipeline stages
  int64_t expert_parallel = 1;    // experts sharded over this many ranks
  int zero_stage = 0;             // DeepSpeed ZeRO stage 0-3
  Offload offload = Offload::none;
  // DeepSpeed bucket sizes in elements (DeepSpeed defaults; HF "auto" picks h^2 for reduce).
  int64_t reduce_bucket_elems = 500'000'000;
  int64_t allgather_bucket_elems = 500'000'000;
  int64_t stage3_prefetch_bucket_elems = 50'000'000;
  int64_t stage3_max_live_parameters = 1'000'000'000;
  bool overlap_comm = false;        // DeepSpeed double-buffers the reduce bucket when true
  bool ddp_bucket_view = false;     // DDP gradient_as_bucket_view (saves one gradient copy)

  int64_t data_parallel() const {
    const int64_t mp = tensor_parallel * pipeline_parallel;
    return mp > 0 && num_gpus % mp == 0 ? num_gpus / mp : 1;
  }
};

enum class FinetuneMode { full, lora, qlora };
enum class BaseQuant { none, nf4, int8 };

struct Finetune {
  FinetuneMode mode = FinetuneMode::full;
  int64_t lora_rank = 8;            // PEFT LoraConfig default r = 8
  double lora_alpha = 8.0;          // PEFT default lora_alpha = 8
  double lora_dropout = 0.0;
  std::vector<std::string> lora_targets;  // q,k,v,o,gate,up,down; empty: the PEFT default for the model
  bool train_embeddings = false;    // modules_to_save embed_tokens
  bool train_head = false;          // modules_to_save lm_head / classifier
  int64_t freeze_layers = 0;        // full fine-tuning with the first N layers frozen
  BaseQuant base_quant = BaseQuant::none;  // qlora: nf4; lora on 8-bit base: int8
  bool double_quant = true;         // QLoRA double quantization of the block scales
};

struct Batch {
  int64_t micro_batch = 1;  // b, sequences per GPU per forward
  int64_t seq_len = 512;    // s
  int64_t grad_accum = 1;   // micro-batches per optimizer step
};

// The memory target: a GPU preset, an explicit capacity, or the host CPU.
enum class DeviceKind { cuda, cpu };

struct DeviceSpec {
  std::string name = "unspecified";  // preset name ("rtx-3090") or "cpu"
  DeviceKind kind = DeviceKind::cuda;
  std::string family;                // GPU family ("ampere"); decides default overheads
  int64_t capacity_bytes = 0;        // usable device memory (0: unknown, no verdict)
  int64_t cuda_context_bytes = 0;    // CUDA context + lazily loaded kernels (outside the allocator)
  int64_t cublas_workspace_bytes = 0;  // persistent cuBLAS workspace per handle and stream
  bool bf16 = true;
  double peak_flops = 0;             // dense bf16 FLOP/s (planner)
  double interconnect_bytes_per_s = 0;
};

// How HF's sdpa path masks attention (integrations/sdpa_attention.py, torch >= 2.0).
enum class SdpaMask {
  is_causal,  // no mask tensor and is_causal=True: HF's path for a batch without padding
  tensor,     // the 4-D additive mask (b, 1, s, s) as attn_mask, is_causal=False: HF's path for a
              // padded batch; K/V are repeated to every head (enable_gqa needs a None mask)
  none,       // no mask and is_causal=False: bidirectional (encoder-style) attention
};

// The framework whose memory behaviour is modelled. Saved-tensor details differ between LibTorch
// 1.13 and 2.x and between CPU and CUDA kernels (reference/autograd-saved.md).
struct Runtime {
  int torch_major = 2;
  int torch_minor = 6;
  OptimizerImpl optimizer_impl = OptimizerImpl::automatic;
  bool loss_upcast = true;          // HF >= 4.46 ForCausalLMLoss: logits.float() before cross-entropy
  bool keep_logits = false;         // the training loop keeps the logits alive through backward
  // zero_grad(set_to_none=True) frees gradients between steps (torch >= 2.0's default); with
  // False (torch 1.x's default, HF Trainer before 2.0) they stay resident the whole step.
  bool zero_grad_set_to_none = true;
  bool allocator_rounding = true;   // CUDA caching-allocator rounding (false on CPU)
  SdpaMask sdpa_mask = SdpaMask::is_causal;  // with attention sdpa

  bool torch_at_least(int major, int minor) const {
    return torch_major > major || (torch_major == major && torch_minor >= minor);
  }
};

struct DataLoading {
  int64_t num_workers = 0;
  int64_t prefetch_factor = 2;
  bool pin_memory = false;
};

// Memory bands as fractions of device capacity (seed 002 defaults).
struct Thresholds {
  double target = 0.90;
  double warning = 0.92;
  double critical = 0.95;
  double emergency = 0.97;
};

struct TrainingSetup {
  ModelSpec model;
  Precision precision = Precision::fp32;
  OptimizerKind optimizer = OptimizerKind::adamw;
  Batch batch;
  Checkpointing checkpointing;
  AttentionImpl attention = AttentionImpl::eager;
  Parallelism parallel;
  Finetune finetune;
  DeviceSpec device;
  Runtime runtime;
  DataLoading data;
  Thresholds thresholds;
};

// ---------------------------------------------------------------------------------------------
// Names, as used on the command line, in YAML and in JSON. Each parse_* returns nullopt for an
// unknown spelling; callers turn that into a user-facing error with the accepted values.
// ---------------------------------------------------------------------------------------------

const char* to_string(Precision p);
const char* to_string(OptimizerKind o);
const char* to_string(OptimizerImpl o);
const char* to_string(AttentionImpl a);
const char* to_string(Offload o);
const char* to_string(FinetuneMode f);
const char* to_string(BaseQuant q);
const char* to_string(DeviceKind d);
const char* to_string(NormKind n);
const char* to_string(Activation a);
const char* to_string(PositionKind p);
const char* to_string(HeadKind h);
std::string to_string(const Checkpointing& c);  // "none", "full", "selective", "every:2"

std::optional<Precision> parse_precision(const std::string& s);
std::optional<OptimizerKind> parse_optimizer(const std::string& s);
std::optional<OptimizerImpl> parse_optimizer_impl(const std::string& s);
std::optional<AttentionImpl> parse_attention(const std::string& s);
std::optional<Offload> parse_offload(const std::string& s);
std::optional<FinetuneMode> parse_finetune(const std::string& s);
std::optional<Checkpointing> parse_checkpointing(const std::string& s);
std::optional<Activation> parse_activation(const std::string& hf_name);

// The accepted spellings, for error hints ("expected one of: fp32, amp-fp16, ...").
std::vector<std::string> precision_names();
std::vector<std::string> optimizer_names();
std::vector<std::string> attention_names();
std::vector<std::string> offload_names();
std::vector<std::string> finetune_names();

// Bytes per element of the weights, gradients and optimizer states under a precision regime.
int64_t weight_bytes_per_param(Precision p);
int64_t grad_bytes_per_param(Precision p);
int64_t master_bytes_per_param(Precision p);  // fp32 master copy (mixed_*), else 0
int64_t state_bytes_per_element(Precision p); // optimizer state dtype
bool is_autocast(Precision p);
bool is_half_activation(Precision p);  // activations computed in 16 bits (pure or mixed)

}  // namespace memplan
