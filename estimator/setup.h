// TrainingSetup: the one input every memplan module speaks. A plain aggregate with documented
// defaults (leveldb's Options style). profiles/ builds it from files and flags, estimator/ turns
// it into a MemoryBreakdown, planner/ varies it, calibrate/ measures it.
// Nothing here computes memory; see estimator/estimate.h.
#pragma once

#include "estimator/checked.h"

#include <cstdint>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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

enum class PositionKind {
  learned,  // a position table added to the embeddings (GPT-2, BERT)
  rotary,   // RoPE on q and k
  alibi,    // ALiBi: a per-head linear bias added to the attention scores (MPT)
  none,
};

// How eager attention masks the scores; it decides a tensor of the forward and an op per layer.
enum class MaskKind {
  additive,     // 4-D (b, 1, s, s) mask built per forward in the model dtype, added (Llama lineage)
  bool_buffer,  // per-layer tril bool buffer (P x P), torch.where on the scores (GPT2Attention)
  padding,      // encoders: no causal mask, the (b, 1, 1, s) padding mask is added (BERT)
  bool_4d,      // 4-D (b, 1, s, s) bool mask built per forward, masked_fill on the scores (MPT)
};

// Normalisation of q and k inside attention.
enum class QkNorm {
  none,
  per_head,             // RMSNorm over each head's d, one d-vector shared by the heads (Qwen3, Gemma-3)
  full_width,           // RMSNorm over the whole q (a*d) and k (k*d) projections (OLMo-2)
  per_head_layer_norm,  // a LayerNorm without bias per head, weights (heads, d) (StableLM qk_layernorm, Cohere)
  l2,                   // L2 normalisation without weights (Llama-4 use_qk_norm)
};

// How the router turns logits into the top-k routing weights.
enum class RouterKind {
  softmax_topk,  // softmax over the experts, then top-k (Mixtral, Qwen-MoE, DeepSeek-V1/V2)
  topk_softmax,  // top-k of the logits, then softmax over those k (GPT-OSS, Granite-MoE)
  sigmoid,       // sigmoid scores, group-limited top-k, gathered weights (DeepSeek-V3)
  topk_sigmoid,  // top-k of the logits scattered into -inf, then sigmoid (Llama-4)
};

// How the routed experts run in training.
enum class MoeImpl {
  loop,         // one expert at a time over the tokens routed to it (Mixtral, Qwen, DeepSeek, GPT-OSS)
  all_experts,  // every expert on every token, weighted by a score that is 0 off the top-k (Llama-4)
};

// What sits on top of the final hidden states.
enum class HeadKind {
  causal_lm,                // *ForCausalLM: vocabulary logits + shifted cross-entropy
  masked_lm,                // *ForMaskedLM: vocabulary logits + cross-entropy
  sequence_classification,  // *ForSequenceClassification: num_labels logits
};

// The weights of a pre-quantized checkpoint (config.json quantization_config), as transformers
// loads them: they stay quantized, so only adapters can train on them.
struct WeightQuant {
  std::string method;         // quant_method: bitsandbytes, gptq, awq, compressed-tensors, fp8, mxfp4 ("": none)
  double bits = 0;            // stored bits per quantized weight, scales and zero points included
  bool experts_only = false;  // only the routed experts are quantized (GPT-OSS mxfp4)
  bool any() const { return bits > 0; }
};

struct ModelSpec {
  std::string name;        // preset name or file the model came from
  std::string model_type;  // HF model_type ("gpt2", "llama", "mixtral", "bert", ...)
  std::string hf_repo;     // HF repository id when known ("meta-llama/Llama-2-7b-hf")
  // The dtype the checkpoint is stored in (config.json torch_dtype, transformers 5's dtype):
  // "bfloat16", "float16", "float32"; "" unknown. transformers >= 5 loads it as is by default.
  std::string checkpoint_dtype;
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

  // Architecture features: the modelling code's quirks as data. profiles/families.yaml and the config
  // readers set them once; the estimator and the harness read them, never model_type.
  bool fused_qkv = false;          // one q|k|v linear, then split (GPT-2 c_attn, GPT-NeoX, Phi-3)
  bool fused_gate_up = false;      // one gate|up linear, then chunk (Phi-3 gate_up_proj)
  bool parallel_residual = false;  // x + attn(ln1 x) + mlp(ln2 x) (GPT-NeoX use_parallel_residual)
  double rotary_fraction = 1.0;    // share of the head dim that RoPE rotates (GPT-NeoX rotary_pct)
  bool post_norms = false;         // a norm on the attention and MLP outputs before each residual add (Gemma-2)
  QkNorm qk_norm = QkNorm::none;   // q/k normalisation (Qwen3)
  double attn_softcap = 0.0;       // attention logits: cap * tanh(x / cap) (Gemma-2 attn_logit_softcapping; 0: none)
  double final_softcap = 0.0;      // LM logits soft-capping (Gemma-2 final_logit_softcapping; 0: none)
  bool scale_embeddings = false;   // embeddings * sqrt(h) (Gemma's normalizer)
  MaskKind causal_mask = MaskKind::additive;
  bool softmax_fp32 = true;        // eager softmax(dtype=float32).to(q.dtype) (Llama lineage); GPT-2/BERT
                                   // take the autocast policy's dtype
  bool attn_weights_held_by_layer = true;  // LlamaDecoderLayer keeps attn_weights until it returns;
                                           // GPT2Attention drops them when the attention call returns
  bool parallel_shared_norm = false;  // parallel residual off one norm: x + attn(ln x) + mlp(ln x)
                                      // (Phi, Falcon-7B, Cohere, StableLM use_parallel_residual)
  bool pre_norms = true;              // a norm on each sublayer's input (OLMo-2 has only the post norms)
  bool norm_weight_fp32 = false;      // RMSNorm multiplies its weight in fp32, then casts (Gemma, OLMo-2,
                                      // GPT-OSS); Llama casts first
  bool norm_fp32_manual = false;      // LayerNorm written out in fp32 ops (CohereLayerNorm), not F.layer_norm
  bool rope_fp32 = false;             // q and k upcast to fp32 for RoPE and cast back (Cohere)
  bool lm_head_bias = false;          // the LM head has a bias (Phi)
  double logit_scale = 1.0;           // logits multiplied by a constant (Cohere logit_scale, Granite 1/logits_scaling)
  double residual_multiplier = 1.0;   // sublayer outputs scaled before each residual add (Granite)
  bool attention_sinks = false;       // a learned per-head sink logit joined to the scores (GPT-OSS)
  int64_t sliding_window = 0;         // tokens a sliding-window layer attends to (0: none)
  int64_t global_attention_every = 0; // with a window: every n-th layer attends globally (Gemma-2 2,
                                      // Gemma-3 6, OLMo-3 4, GPT-OSS 2); 0: every layer slides (Mistral)

  // Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2); kv_lora_rank == 0: none.
  int64_t q_lora_rank = 0;        // q through a rank-r bottleneck with a norm (0: one q_proj)
  int64_t kv_lora_rank = 0;       // compressed key/value width
  int64_t qk_rope_head_dim = 0;   // rotated part of each q/k head
  int64_t qk_nope_head_dim = 0;   // unrotated part of each q/k head
  int64_t v_head_dim = 0;         // value head width
  bool mla() const { return kv_lora_rank > 0; }
  int64_t qk_head_dim() const { return mla() ? qk_rope_head_dim + qk_nope_head_dim : head_dim; }
  int64_t attn_out_dim() const { return mla() ? v_head_dim : head_dim; }  // per head, into o_proj

  double attention_dropout = 0.0;  // dropout on attention probabilities
  double hidden_dropout = 0.0;     // residual dropout after attention and MLP
  double embedding_dropout = 0.0;  // dropout after the embeddings

  WeightQuant quantized;            // a pre-quantized checkpoint's linear weights

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
  RouterKind router = RouterKind::softmax_topk;
  bool router_bias = false;                     // the router linear has a bias (GPT-OSS)
  bool router_fp32 = false;                     // router logits from fp32 copies of x and W (DeepSeek-V3)
  double routed_scaling_factor = 1.0;           // routing weights scaled (DeepSeek-V3 2.5, Kimi-K2 2.827)
  int64_t expert_groups = 1;                    // DeepSeek-V3 n_group: experts routed group-limited
  int64_t topk_groups = 1;                      // DeepSeek-V3 topk_group
  MoeImpl moe_impl = MoeImpl::loop;
  bool moe_fp32_combine = false;                // weighted expert outputs summed in fp32 (DeepSeek-V2/V3)
  bool fused_expert_gate_up = false;            // one (h, 2 f_e) gate|up matrix per expert (GPT-OSS, Llama-4, Granite)
  bool expert_bias = false;                     // biases on the expert matrices (GPT-OSS)
  bool clamped_swiglu = false;                  // GPT-OSS experts: clamp, gate*sigmoid(1.702 gate), (up + 1)
  // transformers >= 5 keeps this family's routed experts as stacked (E, ...) parameters behind
  // @use_experts_implementation (integrations/moe.py) and, with torch >= 2.9, runs them through
  // torch._grouped_mm (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3, GPT-OSS); see grouped_mm_experts().
  bool stacked_experts_v5 = false;

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
  none,          // every activation saved
  selective,     // attention core (scores, softmax, dropout) recomputed (Korthikanti et al. 2022;
                 // Megatron --recompute-granularity selective)
  selective_op,  // torchtitan's per-op policy: every layer keeps its matmul outputs except every
                 // second one and its SDPA outputs, and recomputes the rest in backward
  every,         // one layer in every K is checkpointed (K = every_k); every:1 == full
  layers,        // an explicit list of checkpointed layers (NeMo's checkpoint_layers)
  full,          // every layer checkpointed: only its input is saved
};

struct Checkpointing {
  CheckpointMode mode = CheckpointMode::none;
  int64_t every_k = 1;          // used with CheckpointMode::every
  std::vector<int64_t> layers;  // used with CheckpointMode::layers: 0-based, ascending, unique

  // True when layer i is wrapped in a checkpoint (full recompute, or the per-op policy).
  bool layer_checkpointed(int64_t i) const {
    if (mode == CheckpointMode::full || mode == CheckpointMode::selective_op) return true;
    if (mode == CheckpointMode::every) return every_k <= 1 || i % every_k == 0;
    if (mode == CheckpointMode::layers) return std::binary_search(layers.begin(), layers.end(), i);
    return false;
  }
};

enum class AttentionImpl {
  eager,  // HF eager: materialises the s x s scores and probabilities
  sdpa,   // torch scaled_dot_product_attention (backend chosen by device, dtype, mask, dropout)
  flash,  // flash-attn kernels: saves only the logsumexp besides q, k, v, out
};

// What lives on the host: the optimizer (its states, the fp32 master weights, the gradient
// partitions and the step: DeepSpeed offload_optimizer, ZeRO-Offload), the 16-bit parameter
// partitions (offload_param, ZeRO-3 only), or both. DeepSpeed takes each alone: with
// offload_param only, the master weights, states and gradients stay on the GPU (stage3.py
// @ 007cca6a DeepSpeedZeroOptimizer_Stage3.__init__: `self.device = ... current_device_name()
// if not self.offload_optimizer else cpu`, the device of the fp32 partitions). FSDP's CPUOffload
// moves everything (optimizer_and_params).
enum class Offload { none, optimizer, optimizer_and_params, params };
inline bool offloads_optimizer(Offload o) { return o == Offload::optimizer || o == Offload::optimizer_and_params; }
inline bool offloads_params(Offload o) { return o == Offload::params || o == Offload::optimizer_and_params; }
// Both offloads (a config's offload_optimizer and offload_param, read one at a time).
inline Offload offload_union(Offload a, Offload b) {
  const bool opt = offloads_optimizer(a) || offloads_optimizer(b), par = offloads_params(a) || offloads_params(b);
  return opt && par ? Offload::optimizer_and_params : opt ? Offload::optimizer : par ? Offload::params : Offload::none;
}

// PyTorch FSDP sharding (FSDP1 ShardingStrategy; FSDP2 fully_shard with reshard_after_forward).
enum class FsdpMode {
  none,
  full_shard,     // parameters, gradients and optimizer states sharded; a block's parameters are
                  // gathered for its forward and again for its backward (FSDP2 reshard_after_forward)
  shard_grad_op,  // as full_shard, but gathered parameters stay from forward to backward (ZeRO-2-like)
  hybrid_shard,   // full_shard within a node, replicated across nodes
  no_shard,       // DDP-like: everything replicated
};

struct Parallelism {
  int64_t num_gpus = 1;           // world size
  int64_t tensor_parallel = 1;    // Megatron-style tensor parallel degree
  int64_t pipeline_parallel = 1;  // pipeline stages
  int64_t expert_parallel = 1;    // experts sharded over this many ranks
  // Sequence parallelism with tensor parallelism (Megatron --sequence-parallel, torchtitan's
  // SequenceParallel on the norms): the residual stream between the column- and row-parallel
  // linears -- norms, residual adds, dropouts, each layer's input -- holds 1/tensor_parallel of
  // the sequence; it is all-gathered into attention and the MLP and reduce-scattered out.
  bool sequence_parallel = false;
  int zero_stage = 0;             // DeepSpeed ZeRO stage 0-3
  Offload offload = Offload::none;
  // DeepSpeed bucket sizes in elements (DeepSpeed defaults; HF "auto" picks h^2 for reduce).
  int64_t reduce_bucket_elems = 500'000'000;
  int64_t allgather_bucket_elems = 500'000'000;
  int64_t stage3_prefetch_bucket_elems = 50'000'000;
  int64_t stage3_max_live_parameters = 1'000'000'000;
  bool overlap_comm = false;        // DeepSpeed double-buffers the reduce bucket when true
  bool contiguous_gradients = true; // ZeRO-1/2 copy gradients into reduce_bucket_size buffers (default true)
  bool offload_pin_memory = false;  // DeepSpeed offload_optimizer/offload_param pin_memory (default false)
  bool ddp_bucket_view = false;     // DDP gradient_as_bucket_view (saves one gradient copy)
  // torch's ZeroRedundancyOptimizer over DDP (torch/distributed/optim/zero_redundancy_optimizer.py):
  // each rank keeps the optimizer states of its share of the parameters (zero_stage stays 0).
  bool zero_redundancy_optimizer = false;
  // Wrapped in DistributedDataParallel on a world of one too (torchrun with one process,
  // Lightning's strategy "ddp" on one device); several data-parallel ranks always are.
  bool ddp = false;
  // DeepSpeed's low-precision master state (deepspeed/runtime/precision_config.py @ v0.18.3,
  // DeepSpeed PR #7700; ZeRO 1-3 only): bf16.bf16_master_weights_and_grads (fp16.
  // fp16_master_weights_and_grads) keeps the master partition and its gradient in 16 bits;
  // bf16.bf16_optimizer_states the optimizer states too.
  bool half_master = false;
  bool half_optimizer_states = false;
  FsdpMode fsdp = FsdpMode::none;   // PyTorch FSDP instead of DDP/DeepSpeed (zero_stage stays 0)
  // 1: FSDP1's FullyShardedDataParallel (FlatParameters); 2: FSDP2's fully_shard (per-parameter
  // DTensor shards); 0: the framework's (fsdp2_of()).
  int64_t fsdp_version = 0;
  int64_t gpus_per_node = 8;        // ranks per node (hybrid sharding; host memory per node)
  int64_t host_memory_bytes = 0;    // host RAM of one node (0: unknown); offload and data loading use it

  int64_t data_parallel() const {
    const int64_t mp = saturating_mul(tensor_parallel, pipeline_parallel);
    return mp > 0 && num_gpus % mp == 0 ? num_gpus / mp : 1;
  }
  // Ranks sharing one node's host memory: the GPUs of the job, at most gpus_per_node.
  int64_t ranks_per_node() const { return std::max<int64_t>(1, std::min(num_gpus, gpus_per_node)); }
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
  // LoRA adapters in fp32 (PEFT's autocast_adapter_dtype=True upcasts 16-bit adapters), or in the
  // model's dtype (torchtune builds them under set_default_dtype; LitGPT's bf16-true module).
  bool adapter_fp32 = true;
};

struct Batch {
  int64_t micro_batch = 1;  // b, sequences per GPU per forward
  int64_t seq_len = 512;    // s
  int64_t grad_accum = 1;   // micro-batches per optimizer step
};

// The memory target: a GPU preset, an explicit capacity, or the host CPU.
enum class DeviceKind { cuda, cpu };

// Whether a device's software stack runs a feature: yes; partial (a preview or experimental
// backend: memplan never recommends it and warns when a setup asks for it); no.
enum class Support { yes, partial, no };

// The features whose support depends on the device (a GPU family's row in profiles/gpus.yaml).
enum class Feature {
  bf16,               // bf16 arithmetic (per card: DeviceSpec::bf16)
  flash_attention,    // flash-attn 2 kernels (attn_implementation="flash_attention_2")
  sdpa_fused,         // SDPA's flash or memory-efficient kernel (otherwise its math path)
  bitsandbytes,       // 8-bit and paged optimizers, 4-bit (QLoRA) and 8-bit base weights
  deepspeed,          // the DeepSpeed engine and its ZeRO stages
  deepspeed_offload,  // ZeRO-Offload (DeepSpeed's CPU Adam)
  multi_gpu,          // data parallelism over an NCCL-style collective backend (NCCL, RCCL)
  kCount
};

// What a device's stack can run, with the reason for each feature it cannot (or only partly) run.
// Filled from the GPU family by profiles::apply_gpu; shared between the setups made from one card.
struct Capabilities {
  std::string label;       // the architecture as people say it: "AMD RDNA2 (gfx103x)"
  std::string backend;     // cuda | rocm | mps | cpu
  std::string collective;  // nccl | rccl | none
  Support flash_attention = Support::yes;
  Support sdpa_fused = Support::yes;
  Support bitsandbytes = Support::yes;
  Support deepspeed = Support::yes;
  Support deepspeed_offload = Support::yes;
  Support multi_gpu = Support::yes;
  std::vector<std::string> why = std::vector<std::string>(static_cast<size_t>(Feature::kCount));  // by Feature
  std::string source;      // citations for the row
};

struct DeviceSpec {
  std::string name = "unspecified";  // preset name ("rtx-3090") or "cpu"
  DeviceKind kind = DeviceKind::cuda;
  std::string family;                // GPU family ("ampere"); decides default overheads
  int compute_capability = 0;        // CUDA major * 10 + minor (90: sm90, "9.0" in profiles/gpus.yaml); 0 unknown
  int64_t capacity_bytes = 0;        // usable device memory (0: unknown, no verdict); with an
                                     // allocator cap, the cap plus the context (profiles/build.cpp)
  // torch.cuda.set_per_process_memory_fraction: the most the caching allocator may reserve
  // (fraction x cudaMemGetInfo's total; CUDACachingAllocator.cpp allowed_memory_maximum). 0: none.
  int64_t allocator_cap_bytes = 0;
  double allocator_cap_fraction = 0;  // the cap as a fraction of the card, when given so (0: bytes)
  // The card's own memory where a cap set capacity_bytes (profiles::carry_allocator_cap; 0: the card
  // is unknown, capacity_bytes is the cap plus the context). card_bytes(): it under a cap, else
  // capacity_bytes.
  int64_t uncapped_bytes = 0;
  int64_t card_bytes() const { return allocator_cap_bytes > 0 ? uncapped_bytes : capacity_bytes; }
  int64_t cuda_context_bytes = 0;    // CUDA context + lazily loaded kernels (outside the allocator)
  int64_t cublas_workspace_bytes = 0;  // persistent cuBLAS workspace per handle and stream
  bool bf16 = true;
  bool fp8 = false;                  // fp8 tensor cores (Hopper, Ada, Blackwell, MI300)
  double peak_flops = 0;             // dense bf16 FLOP/s (planner)
  double interconnect_bytes_per_s = 0;
  // What the card's stack runs (flash attention, bitsandbytes, DeepSpeed, ...); null for a bare
  // capacity (--gpu-memory without a preset): nothing is ruled out then.
  std::shared_ptr<const Capabilities> caps;
};

// The training stack that runs the step. Each sets the runtime defaults it really has
// (estimator/runtime.cpp, cited there); every knob below can also be set on its own.
enum class Framework {
  hf_trainer,  // transformers Trainer (also TRL, Axolotl): outputs die inside compute_loss
  custom,      // a hand-written loop that keeps the forward's outputs (nanoGPT, llama2.c, accelerate examples)
  lightning,   // PyTorch Lightning: zero_grad runs after the next forward
  torchtune,   // torchtune recipes: chunked cross-entropy, logits deleted before backward
  torchtitan,  // torchtitan: FSDP2 with bf16 compute over fp32 shards, fused AdamW
  litgpt,      // LitGPT: the loop keeps the logits; chunked cross-entropy without upcast
  deepspeed,   // the DeepSpeed engine: gradient buffers allocated at start-up
  megatron,    // Megatron-LM / NeMo: fp32 main-gradient buffer allocated at start-up
};

// How the loss is computed from the final hidden states.
enum class LossImpl {
  standard,      // full logits; HF upcasts them (logits.float()) before cross-entropy
  chunked,       // logits in chunks, each upcast and cross-entropied alone (torchtune
                 // CEWithChunkedOutputLoss, LitGPT chunked_cross_entropy)
  fused_linear,  // head and loss fused: logits never materialised (Liger FLCE, cut-cross-entropy)
  vocab_parallel,  // Megatron's VocabParallelCrossEntropy: one fp32 copy, softmax and gradient in place
};

// How HF's sdpa path masks attention (integrations/sdpa_attention.py, torch >= 2.0).
enum class SdpaMask {
  is_causal,  // no mask tensor and is_causal=True: HF's path for a batch without padding
  tensor,     // the 4-D additive mask (b, 1, s, s) as attn_mask, is_causal=False: HF's path for a
              // padded batch; K/V are repeated to every head (enable_gqa needs a None mask)
  none,       // no mask and is_causal=False: bidirectional (encoder-style) attention
};

// The framework whose memory behaviour is modelled. Saved-tensor details differ between LibTorch
// 1.13 and 2.x and between CPU and CUDA kernels (docs/autograd-saved.md).
struct Runtime {
  Framework framework = Framework::hf_trainer;
  // The releases, where neither a config, a flag nor the job's Python (the CLI's probe,
  // cli/python_env.h) says: today's stack, the releases of the H200 dev set the estimator is
  // checked against (torch 2.11.0+cu130, transformers 5.17.0: tests/data/gpu/h200-knobs/README.md).
  int torch_major = 2;
  int torch_minor = 11;
  // The transformers modelling code (its attention paths changed: repeat_kv before SDPA until
  // 4.54, `.contiguous()` copies of q/k/v and the attention output until 4.56).
  int transformers_major = 5;
  int transformers_minor = 17;
  OptimizerImpl optimizer_impl = OptimizerImpl::automatic;
  bool loss_upcast = true;          // HF >= 4.46 ForCausalLMLoss: logits.float() before cross-entropy
  LossImpl loss = LossImpl::standard;
  int64_t loss_chunks = 8;          // chunked: number of chunks (torchtune num_output_chunks)
  int64_t loss_chunk_tokens = 0;    // chunked: chunks of this many tokens instead (LitGPT: 128)
  // The training loop keeps the forward's logits (and its returned KV cache with keep_cache)
  // until the next forward returns: through backward, the optimizer step and the next forward.
  bool keep_logits = false;
  bool keep_cache = false;          // use_cache=True outputs kept by the loop (DynamicCache)
  // zero_grad(set_to_none=True) frees gradients between steps (torch >= 2.0's default); with
  // False (torch 1.x's default, HF Trainer before 2.0) they stay resident the whole step.
  bool zero_grad_set_to_none = true;
  bool zero_grad_after_forward = false;  // Lightning: last step's gradients live through the next forward
  bool liger = false;               // Liger's fused RMSNorm, SwiGLU and RoPE kernels
  bool optimizer_in_backward = false;  // each parameter stepped (and its gradient freed) in backward
  bool activation_offload = false;  // saved activations go to pinned host memory (torchtune, NeMo)
  bool compile = false;             // torch.compile per block (default partitioner)
  // The loss compiled as well (torchtune's training.compile compiles the loss's per-chunk
  // cross-entropy; torchtitan's compile the loss function; HF Trainer's torch_compile the model's
  // forward, its loss included): the partitioner saves the logits as they are (16-bit) and one
  // logsumexp per row, not the fp32 log-probabilities, and backward makes the logits' gradient in
  // their dtype in one kernel.
  bool compile_loss = false;
  // FSDP1's no_sync() around the accumulating micro-steps (Lightning Fabric's no_backward_sync,
  // LitGPT): each unit keeps its whole unsharded FlatParameter gradient -- frozen weights sharing a
  // unit with trainable ones included -- until the micro-step that syncs.
  bool fsdp_no_sync = false;
  bool fp8 = false;                 // float8 linears (torchao Float8Linear / Transformer Engine)
  // A frozen reference model beside the policy (TRL's DPOTrainer without PEFT or precomputed
  // reference log-probs, trl/trainer/dpo_trainer.py @ v1.9.0 L893-936): a second copy of the
  // weights, prepared as the policy is (sharded under ZeRO-3 and FSDP), and its forward under
  // no_grad after the policy's within compute_loss.
  bool reference_model = false;
  // torchao Float8LinearConfig.force_recompute_fp8_weight_in_bwd: the float8 weight is cast again
  // in backward instead of being saved (1 B/param less per block linear between forward and backward).
  bool fp8_recompute_weight = false;
  bool expandable_segments = false; // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  bool allocator_rounding = true;   // CUDA caching-allocator rounding (false on CPU)
  SdpaMask sdpa_mask = SdpaMask::is_causal;  // with attention sdpa

  bool torch_at_least(int major, int minor) const {
    return torch_major > major || (torch_major == major && torch_minor >= minor);
  }
  bool transformers_at_least(int major, int minor) const {
    return transformers_major > major || (transformers_major == major && transformers_minor >= minor);
  }
};

struct DataLoading {
  int64_t num_workers = 0;
  int64_t prefetch_factor = 2;
  bool pin_memory = false;
};

// Memory bands as fractions of device capacity (the defaults memory guides use: 0.90 / 0.92 / 0.95 / 0.97).
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
const char* to_string(Framework f);
const char* to_string(FsdpMode f);
const char* to_string(Support s);    // "yes", "partial", "no"
const char* to_string(Feature f);    // "bf16", "flash attention", "bitsandbytes", ...
std::string to_string(const Runtime& r, LossImpl l);  // "standard", "chunked:8", "chunked:128t", "fused-linear"
std::string to_string(const Checkpointing& c);  // "none", "full", "selective", "every:2"

std::optional<Precision> parse_precision(const std::string& s);
std::optional<OptimizerKind> parse_optimizer(const std::string& s);
std::optional<OptimizerImpl> parse_optimizer_impl(const std::string& s);
std::optional<AttentionImpl> parse_attention(const std::string& s);
std::optional<Offload> parse_offload(const std::string& s);
std::optional<FinetuneMode> parse_finetune(const std::string& s);
std::optional<Checkpointing> parse_checkpointing(const std::string& s);
std::optional<Activation> parse_activation(const std::string& hf_name);
std::optional<Framework> parse_framework(const std::string& s);
std::optional<FsdpMode> parse_fsdp(const std::string& s);
std::optional<Support> parse_support(const std::string& s);  // yes|true, partial, no|false
// "standard", "chunked" (8 chunks), "chunked:N" (N chunks), "chunked:Nt" (chunks of N tokens),
// "fused-linear", "vocab-parallel": sets runtime.loss and its chunking; false for an unknown spelling.
bool parse_loss(const std::string& s, Runtime* r);
// LoRA adapter dtype: "fp32" (float32) -> true; "model" (bf16, bfloat16, fp16, float16: the
// model's own) -> false; nullopt otherwise.
std::optional<bool> parse_adapter_fp32(const std::string& s);
// "2.6" / "1.13" / "4.52.4" -> (major, minor); nullopt unless MAJOR.MINOR[.PATCH] with small numbers.
std::optional<std::pair<int, int>> parse_version(const std::string& s);

// The accepted spellings, for error hints ("expected one of: fp32, amp-fp16, ...").
std::vector<std::string> precision_names();
std::vector<std::string> optimizer_names();
std::vector<std::string> attention_names();
std::vector<std::string> offload_names();
std::vector<std::string> finetune_names();
std::vector<std::string> framework_names();
std::vector<std::string> fsdp_names();
std::vector<std::string> optimizer_impl_names();
std::vector<std::string> checkpointing_names();  // none, full, selective, selective-op, every:K, layers:I,J,...
std::vector<std::string> loss_names();           // standard, chunked:N, chunked:Nt, fused-linear, vocab-parallel
std::vector<std::string> adapter_dtype_names();  // fp32, model

// Bytes per element of a LoRA adapter (its weight, gradient and optimizer states).
int64_t adapter_bytes(const TrainingSetup& s);

// Bytes per element of the weights, gradients and optimizer states under a precision regime.
int64_t weight_bytes_per_param(Precision p);
int64_t grad_bytes_per_param(Precision p);
int64_t master_bytes_per_param(Precision p);  // fp32 master copy (mixed_*), else 0
int64_t state_bytes_per_element(Precision p); // optimizer state dtype
bool is_autocast(Precision p);

}  // namespace memplan
