// Composes the step's timeline from the model states and the segment profiles (graph.h):
//
//   forward:   static + batch + sum(retained of earlier segments) + own live of the running one
//   backward:  head first, then layers L-1..0, then the embedding; each segment's own live on top
//              of static + retained of the segments still waiting + gradients produced so far
//   optimizer: static + gradients + the optimizer's temporaries
//
// "static" is what lives through the whole step in steady state (step >= 2): weights, master
// weights, optimizer states (created lazily by the first step() [adam.py:164-185]), and the
// gradients too on micro-steps >= 2 of gradient accumulation (micro-step 1 starts with none:
// zero_grad(set_to_none=True), the 2.x default).
#include "estimator/estimate.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "estimator/attention_kernel.h"
#include "estimator/graph.h"
#include "estimator/layers.h"
#include "estimator/model.h"
#include "estimator/runtime.h"
#include "estimator/sequence.h"

namespace memplan {

// ---- names ---------------------------------------------------------------------------------

const char* term_name(Term t) {
  switch (t) {
    case Term::weights: return "weights";
    case Term::gradients: return "gradients";
    case Term::master_weights: return "master_weights";
    case Term::optimizer_states: return "optimizer_states";
    case Term::activations: return "activations";
    case Term::logits_and_loss: return "logits_and_loss";
    case Term::transient: return "transient";
    case Term::workspace: return "workspace";
    case Term::cuda_context: return "cuda_context";
    case Term::allocator_overhead: return "allocator_overhead";
    case Term::comm_buffers: return "comm_buffers";
  }
  return "?";
}
Term term_at(int i) { return static_cast<Term>(i); }

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::optimizer_step: return "optimizer_step";
  }
  return "?";
}

int64_t PhaseState::total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t = checked_add(t, b, "a phase's total bytes");
  return t;
}

const PhaseState& MemoryBreakdown::peak() const {
  size_t best = 0;
  for (size_t i = 1; i < phases.size(); ++i)
    if (phases[i].total() > phases[best].total()) best = i;
  return phases.at(best);
}
const PhaseState& MemoryBreakdown::at(Phase p) const {
  for (const auto& ph : phases)
    if (ph.phase == p) return ph;
  return phases.at(0);
}
int64_t MemoryBreakdown::host_bytes() const {
  int64_t t = 0;
  for (const auto& h : host) t = checked_add(t, h.bytes, "the host memory total");
  return t;
}
int64_t MemoryBreakdown::host_pinned_bytes() const {
  int64_t t = 0;
  for (const auto& h : host)
    if (h.pinned) t += h.bytes;
  return t;
}

HostVerdict judge_host(const MemoryBreakdown& b, const TrainingSetup& s) {
  HostVerdict v;
  v.per_gpu_bytes = b.host_bytes();
  v.pinned_per_gpu_bytes = b.host_pinned_bytes();
  v.ranks_per_node = s.parallel.ranks_per_node();
  v.per_node_bytes = v.per_gpu_bytes * v.ranks_per_node;
  v.capacity_bytes = s.parallel.host_memory_bytes;
  v.known = v.capacity_bytes > 0;
  if (v.known) {
    v.utilization = static_cast<double>(v.per_node_bytes) / static_cast<double>(v.capacity_bytes);
    v.fits = v.utilization <= s.thresholds.target;
  }
  return v;
}

int64_t target_bytes(const TrainingSetup& s) {
  return static_cast<int64_t>(s.thresholds.target * static_cast<double>(s.device.capacity_bytes));
}

Verdict judge(const MemoryBreakdown& b, const TrainingSetup& s) {
  Verdict v;
  const int64_t cap = s.device.capacity_bytes;
  if (cap <= 0) return v;
  v.known = true;
  const int64_t peak = b.verdict_bytes();
  v.utilization = static_cast<double>(peak) / static_cast<double>(cap);
  v.headroom_bytes = target_bytes(s) - peak;
  v.fits = peak <= target_bytes(s);
  v.runs = b.runs >= 0 ? b.runs == 1 : peak <= cap;
  if (!v.runs) v.fits = false;  // what does not run on the card cannot fit its target
  const Thresholds& t = s.thresholds;
  if (v.utilization > 1.0) v.status = "out_of_memory";
  else if (v.utilization >= t.emergency) v.status = "emergency";
  else if (v.utilization >= t.critical) v.status = "critical";
  else if (v.utilization >= t.warning) v.status = "warning";
  else if (v.utilization > t.target) v.status = "above_target";
  else v.status = "normal";
  return v;
}

// ---- validation --------------------------------------------------------------------------------

std::vector<Problem> validate(const TrainingSetup& s) {
  std::vector<Problem> p;
  const ModelSpec& m = s.model;
  auto positive = [&](const char* field, int64_t v, int64_t max) {
    if (v < 1) p.push_back({field, fmt::format("must be at least 1 (got {})", v), "a size or count: a whole number of 1 or more"});
    else if (v > max) p.push_back({field, fmt::format("is absurdly large ({}); the limit is {}", v, max), "check the units"});
  };
  positive("model.hidden_size", m.hidden_size, 1'000'000);
  positive("model.num_layers", m.num_layers, 10'000);
  positive("model.num_attention_heads", m.num_attention_heads, 100'000);
  positive("model.num_key_value_heads", m.num_key_value_heads, 100'000);
  positive("model.head_dim", m.head_dim, 100'000);
  positive("model.intermediate_size", m.intermediate_size > 0 ? m.intermediate_size : m.expert_width(), 10'000'000);
  positive("model.vocab_size", m.vocab_size, 100'000'000);
  positive("batch.micro_batch", s.batch.micro_batch, 1'000'000);
  positive("batch.seq_len", s.batch.seq_len, 100'000'000);
  positive("batch.grad_accum", s.batch.grad_accum, 1'000'000);
  positive("parallel.num_gpus", s.parallel.num_gpus, 1'000'000);
  // Every other number, once, here: non-negative, within a physical bound, finite. Products of
  // these stay inside int64 (the largest tensors are bounded below); parallel degrees are
  // bounded before they are multiplied.
  auto range = [&](const char* field, int64_t v, int64_t lo, int64_t hi, const char* hint) {
    if (v < lo || v > hi) p.push_back({field, fmt::format("must be between {} and {} (got {})", lo, hi, v), hint});
  };
  positive("parallel.tensor_parallel", s.parallel.tensor_parallel, 1'000'000);
  positive("parallel.pipeline_parallel", s.parallel.pipeline_parallel, 1'000'000);
  positive("parallel.expert_parallel", s.parallel.expert_parallel, 1'000'000);
  range("model.max_position_embeddings", m.max_position_embeddings, 0, 100'000'000,
        "the longest sequence the model's position table or mask covers (n_positions, max_position_embeddings)");
  range("model.num_labels", m.num_labels, 0, 100'000'000, "a classifier head has one output per label");
  range("model.moe_intermediate_size", m.moe_intermediate_size, 0, 10'000'000,
        "an expert's MLP width (moe_intermediate_size); 0 means intermediate_size");
  range("model.shared_expert_intermediate_size", m.shared_expert_intermediate_size, 0, 10'000'000,
        "the shared experts' MLP width (shared_expert_intermediate_size); 0 means none");
  range("model.num_shared_experts", m.num_shared_experts, 0, 100'000, "always-on experts, usually 0 to 2");
  range("model.moe_layer_frequency", m.moe_layer_frequency, 0, 10'000, "decoder_sparse_step: every n-th layer is MoE");
  range("model.first_dense_layers", m.first_dense_layers, 0, m.num_layers, "first_k_dense_replace: at most the layer count");
  range("model.type_vocab_size", m.type_vocab_size, 0, 100'000, "BERT's token types: usually 2");
  range("model.sliding_window", m.sliding_window, 0, 100'000'000, "attention window in tokens (0: none)");
  range("model.global_attention_every", m.global_attention_every, 0, 1'000'000, "every n-th layer attends globally (0: none)");
  range("model.q_lora_rank", m.q_lora_rank, 0, 1'000'000, "DeepSeek's compressed query width");
  range("model.kv_lora_rank", m.kv_lora_rank, 0, 1'000'000, "DeepSeek's compressed key/value width");
  range("model.qk_rope_head_dim", m.qk_rope_head_dim, 0, 100'000, "a head dimension");
  range("model.qk_nope_head_dim", m.qk_nope_head_dim, 0, 100'000, "a head dimension");
  range("model.v_head_dim", m.v_head_dim, 0, 100'000, "a head dimension");
  range("model.expert_groups", m.expert_groups, 0, 100'000, "DeepSeek-V3's n_group");
  range("model.topk_groups", m.topk_groups, 0, 100'000, "DeepSeek-V3's topk_group");
  const char* kBucketHint = "DeepSpeed bucket sizes count elements: 0 or more, e.g. 5e8";
  range("parallel.reduce_bucket_elems", s.parallel.reduce_bucket_elems, 0, 1'000'000'000'000, kBucketHint);
  range("parallel.allgather_bucket_elems", s.parallel.allgather_bucket_elems, 0, 1'000'000'000'000, kBucketHint);
  range("parallel.stage3_prefetch_bucket_elems", s.parallel.stage3_prefetch_bucket_elems, 0, 1'000'000'000'000, kBucketHint);
  range("parallel.stage3_max_live_parameters", s.parallel.stage3_max_live_parameters, 0, 10'000'000'000'000, kBucketHint);
  range("data.num_workers", s.data.num_workers, 0, 10'000, "DataLoader workers: 0 or more");
  range("data.prefetch_factor", s.data.prefetch_factor, 0, 10'000, "batches each DataLoader worker loads ahead: 0 or more (default 2)");
  range("checkpointing.every_k", s.checkpointing.every_k, 1, 1'000'000, "checkpoint one layer in K: K is at least 1");
  range("hardware.gpu_memory", s.device.capacity_bytes, 0, int64_t{1} << 50, "a GPU's memory in bytes, such as 80GiB");
  range("hardware.cuda_context_bytes", s.device.cuda_context_bytes, 0, int64_t{1} << 40,
        "the CUDA context's bytes: a few hundred MiB (memplan calibrate measures it)");
  range("hardware.cublas_workspace_bytes", s.device.cublas_workspace_bytes, 0, int64_t{1} << 40,
        "cuBLAS's workspace per handle: a few MiB");
  if (!(std::isfinite(s.finetune.lora_alpha) && s.finetune.lora_alpha > 0 && s.finetune.lora_alpha <= 1e6))
    p.push_back({"finetune.lora_alpha", fmt::format("must be a positive finite number up to 1e6 (got {})", s.finetune.lora_alpha),
                 "PEFT's lora_alpha is usually r or 2r, e.g. 16"});
  for (const auto& [field, v] : {std::pair<const char*, double>{"model.rotary_fraction", m.rotary_fraction},
                                 {"model.attn_softcap", m.attn_softcap}, {"model.final_softcap", m.final_softcap},
                                 {"model.logit_scale", m.logit_scale}, {"model.residual_multiplier", m.residual_multiplier}})
    if (!(std::isfinite(v) && v >= 0 && v <= 1e6))
      p.push_back({field, fmt::format("must be a finite number between 0 and 1e6 (got {})", v), "check the model's config.json"});
  if (!(std::isfinite(m.capacity_factor) && std::isfinite(m.routed_scaling_factor) && m.routed_scaling_factor >= 0 &&
        m.routed_scaling_factor <= 1e6))
    p.push_back({"model.routed_scaling_factor", "must be a finite number between 0 and 1e6", "DeepSeek-V3 uses 2.5"});
  if (!p.empty()) return p;
  // Layers that are not mixture-of-experts (decoder_sparse_step > 1, first_k_dense_replace) use
  // the dense MLP width.
  if (m.num_experts > 0 && (m.first_dense_layers > 0 || m.moe_layer_frequency > 1) && m.intermediate_size < 1)
    p.push_back({"model.intermediate_size",
                 fmt::format("must be at least 1: the model has dense layers (first {} dense, every {} MoE) and their MLP "
                             "width is intermediate_size (got {})",
                             m.first_dense_layers, std::max<int64_t>(1, m.moe_layer_frequency), m.intermediate_size),
                 "set intermediate_size (the dense layers' MLP width) in the model's config"});
  {
    // GPT-2 registers a bool causal-mask buffer of n_positions^2 bytes in every layer.
    using LD = long double;
    const LD mask = static_cast<LD>(m.max_position_embeddings) * static_cast<LD>(m.max_position_embeddings) *
                    static_cast<LD>(m.num_layers);
    if (mask > static_cast<LD>(int64_t{1} << 62))
      p.push_back({"model.max_position_embeddings",
                   fmt::format("is too large to estimate: the causal-mask buffers alone would be about {:.3g} bytes",
                               static_cast<double>(mask)),
                   "memplan counts bytes in 64-bit integers (up to 4.6e18); check n_positions"});
  }
  if (!p.empty()) return p;
  // Every byte count is an int64; refuse setups whose largest tensors could not be counted in
  // one (2^62 bytes leaves room for the sums). The products are formed in long double.
  {
    using LD = long double;
    const LD b = static_cast<LD>(s.batch.micro_batch), sq = static_cast<LD>(s.batch.seq_len);
    const LD scores = b * static_cast<LD>(m.num_attention_heads) * sq * sq * 8;  // s x s scores, fp32 + grads
    const LD logits = b * sq * static_cast<LD>(m.vocab_size) * 16;               // logits path, 16 B/elem
    const LD mlp = b * sq * static_cast<LD>(std::max(m.intermediate_size, m.expert_width())) *
                   static_cast<LD>(std::max<int64_t>(1, m.experts_per_token)) * 16;
    const LD params = static_cast<LD>(m.hidden_size) * static_cast<LD>(m.hidden_size) * 4 * static_cast<LD>(m.num_layers) *
                      static_cast<LD>(std::max<int64_t>(1, m.num_experts)) * 20;
    const LD limit = static_cast<LD>(int64_t{1} << 62);
    auto too_big = [&](const char* field, LD v, const char* what) {
      if (v > limit)
        p.push_back({field, fmt::format("is too large to estimate: {} alone would be about {:.3g} bytes", what, static_cast<double>(v)),
                     "memplan counts bytes in 64-bit integers (up to 4.6e18); check the sizes"});
    };
    too_big("batch.seq_len", scores, "the attention scores");
    too_big("batch.seq_len", logits, "the logits");
    too_big("batch.micro_batch", mlp, "the MLP activations");
    too_big("model.hidden_size", params, "the model states");
    if (!p.empty()) return p;
  }
  if (m.num_key_value_heads > m.num_attention_heads || m.num_attention_heads % m.num_key_value_heads != 0)
    p.push_back({"model.num_key_value_heads",
                 fmt::format("{} key/value heads do not divide {} attention heads", m.num_key_value_heads, m.num_attention_heads),
                 "grouped-query attention needs num_attention_heads to be a multiple of num_key_value_heads"});
  // A head dimension derived as h / a (integer division) when a does not divide h.
  if (m.head_dim == m.hidden_size / std::max<int64_t>(1, m.num_attention_heads) && m.hidden_size % m.num_attention_heads != 0)
    p.push_back({"model.num_attention_heads",
                 fmt::format("{} heads do not divide hidden size {}", m.num_attention_heads, m.hidden_size),
                 "set head_dim explicitly if the model uses a head dimension other than hidden/heads"});
  if (m.num_experts < 0) p.push_back({"model.num_experts", "must not be negative", "0 for a dense model, else the routed experts per MoE layer"});
  if (m.num_experts > 0) {
    if (m.experts_per_token < 1)
      p.push_back({"model.num_experts_per_token", "must be at least 1 for a mixture of experts", "Mixtral uses 2"});
    else if (m.experts_per_token > m.num_experts)
      p.push_back({"model.num_experts_per_token",
                   fmt::format("top-{} routing needs at least {} experts (the model has {})", m.experts_per_token,
                               m.experts_per_token, m.num_experts),
                   "num_experts_per_token must not exceed num_experts"});
    if (m.num_experts > 100'000) p.push_back({"model.num_experts", "is absurdly large", "the routed experts per MoE layer, at most 100000"});
  }
  if (m.capacity_factor < 0 || m.capacity_factor > 1000)
    p.push_back({"model.capacity_factor", fmt::format("must be in [0, 1000] (got {})", m.capacity_factor),
                 "0 means dropless routing; 1.0-2.0 is usual"});
  if (s.parallel.zero_stage < 0 || s.parallel.zero_stage > 3)
    p.push_back({"parallel.zero_stage", fmt::format("ZeRO stage must be 0, 1, 2 or 3 (got {})", s.parallel.zero_stage), "DeepSpeed ZeRO has stages 0 to 3"});
  const int64_t mp = s.parallel.tensor_parallel * s.parallel.pipeline_parallel;
  if (s.parallel.tensor_parallel < 1 || s.parallel.pipeline_parallel < 1 || s.parallel.expert_parallel < 1)
    p.push_back({"parallel.tensor_parallel", "parallel degrees must be at least 1", "a parallel degree is a number of GPUs"});
  else if (s.parallel.num_gpus % mp != 0)
    p.push_back({"parallel.num_gpus",
                 fmt::format("{} GPUs cannot be split into tensor x pipeline = {} groups", s.parallel.num_gpus, mp),
                 "num_gpus must be a multiple of tensor_parallel * pipeline_parallel"});
  else if (s.parallel.tensor_parallel > 1 &&
           (m.num_attention_heads % s.parallel.tensor_parallel != 0))
    p.push_back({"parallel.tensor_parallel", "tensor parallel degree must divide the attention heads", "each tensor-parallel rank holds a whole number of heads"});
  const bool fsdp = s.parallel.fsdp != FsdpMode::none;
  if (offloads_params(s.parallel.offload) && s.parallel.zero_stage != 3 && !fsdp)
    p.push_back({"parallel.offload", "parameter offload needs ZeRO stage 3 or FSDP", "use --zero 3 or --offload optimizer"});
  if (s.parallel.offload == Offload::params && fsdp)
    p.push_back({"parallel.offload", "FSDP's CPU offload moves the parameters with their gradients and the optimizer step",
                 "use --offload optimizer+params with FSDP (parameters alone on the host is DeepSpeed ZeRO-3's offload_param)"});
  if (offloads_optimizer(s.parallel.offload) && s.parallel.zero_stage == 0 && !fsdp)
    p.push_back({"parallel.offload", "optimizer offload needs ZeRO stage 1 or higher, or FSDP", "use --zero 2 --offload optimizer"});
  if (s.finetune.mode != FinetuneMode::full && (s.finetune.lora_rank < 1 || s.finetune.lora_rank > 100'000))
    p.push_back({"finetune.lora_rank", fmt::format("must be between 1 and 100000 (got {})", s.finetune.lora_rank), "PEFT's r, usually 8 to 64"});
  if (m.quantized.any() && s.finetune.mode == FinetuneMode::full)
    p.push_back({"finetune.mode",
                 fmt::format("'{}' is a pre-quantized checkpoint ({}, {:.3g} bits per weight): its weights cannot train, and "
                             "transformers' Trainer refuses to fine-tune a purely quantized model", m.name, m.quantized.method, m.quantized.bits),
                 "train adapters on it: --finetune lora (or qlora), or start from the unquantized checkpoint"});
  if (s.finetune.freeze_layers < 0 || s.finetune.freeze_layers > m.num_layers)
    p.push_back({"finetune.freeze_layers", fmt::format("must be between 0 and the {} layers", m.num_layers), "freeze_layers counts layers from the bottom"});
  auto frac = [&](const char* f, double v) {
    if (!(v >= 0 && v < 1)) p.push_back({f, fmt::format("must be in [0, 1) (got {})", v), "a dropout probability such as 0.1"});
  };
  frac("model.attention_dropout", m.attention_dropout);
  frac("finetune.lora_dropout", s.finetune.lora_dropout);
  frac("model.hidden_dropout", m.hidden_dropout);
  frac("model.embedding_dropout", m.embedding_dropout);
  const Thresholds& t = s.thresholds;
  if (!(t.target > 0 && t.target <= t.warning && t.warning <= t.critical && t.critical <= t.emergency && t.emergency <= 1.0))
    p.push_back({"memory.target_utilization", "thresholds must satisfy 0 < target <= warning <= critical <= emergency <= 1",
                 "the defaults are 0.90, 0.92, 0.95, 0.97"});
  if (s.device.capacity_bytes < 0) p.push_back({"hardware.gpu_memory", "must not be negative", "a GPU's memory, such as 80GiB"});
  // The runtime's knobs.
  const Runtime& r = s.runtime;
  if (s.checkpointing.mode == CheckpointMode::layers) {
    if (s.checkpointing.layers.empty())
      p.push_back({"checkpointing", "layers: names no layer", "list the checkpointed layers, e.g. layers:0,4,8"});
    else if (s.checkpointing.layers.back() >= m.num_layers)
      p.push_back({"checkpointing",
                   fmt::format("layers: names layer {}, but the model has {} layers (0 to {})", s.checkpointing.layers.back(),
                               m.num_layers, m.num_layers - 1),
                   "layer indices are 0-based"});
  }
  if (r.loss == LossImpl::chunked && (r.loss_chunks < 1 || r.loss_chunk_tokens < 0))
    p.push_back({"runtime.loss", "a chunked loss needs at least one chunk", "e.g. --loss chunked:8"});
  if (r.optimizer_in_backward && s.batch.grad_accum > 1)
    p.push_back({"runtime.optimizer_in_backward",
                 fmt::format("stepping the optimizer in backward cannot accumulate gradients (accumulation {})", s.batch.grad_accum),
                 "torchtune refuses it too (recipes/full_finetune_single_device.py @ v0.6.1 L147-156): use --grad-accum 1"});
  if (r.optimizer_in_backward && s.parallel.zero_stage > 0)
    p.push_back({"runtime.optimizer_in_backward", "DeepSpeed's ZeRO steps its own optimizer; it cannot step in backward",
                 "drop --optimizer-in-backward or --zero"});
  if (r.fp8 && s.device.kind == DeviceKind::cuda && s.device.family != "generic" && !s.device.fp8)
    p.push_back({"runtime.fp8", fmt::format("{} has no fp8 tensor cores", s.device.name),
                 "fp8 training needs Hopper, Ada, Blackwell or MI300 (memplan gpus lists fp8 support)"});
  if (s.parallel.fsdp != FsdpMode::none && s.parallel.zero_stage > 0)
    p.push_back({"parallel.fsdp", fmt::format("FSDP and DeepSpeed ZeRO-{} both shard the model; a job runs one of them", s.parallel.zero_stage),
                 "drop --fsdp or --zero"});
  if (s.parallel.host_memory_bytes < 0) p.push_back({"parallel.host_memory_bytes", "must not be negative", ""});
  if (s.parallel.gpus_per_node < 1 || s.parallel.gpus_per_node > 1'000'000)
    p.push_back({"parallel.gpus_per_node", fmt::format("must be at least 1 (got {})", s.parallel.gpus_per_node), "GPUs per node, usually 8"});
  return p;
}

// ---- model states ------------------------------------------------------------------------------

namespace {

// Megatron's DistributedDataParallel keeps fp32 main gradients in one buffer allocated at start-up
// (megatron/core/distributed/param_and_grad_buffer.py @ core_v0.13.0 L660-675): resident the whole run.
bool megatron_grad_buffer(const TrainingSetup& s) { return s.runtime.framework == Framework::megatron; }

// The KV cache an HF model returns with use_cache=True (DynamicCache): k after RoPE and v of every
// layer, (b, k, s, d) each, in the compute dtype.
int64_t kv_cache_bytes(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  const int64_t e = is_autocast(s.precision) ? 2 : weight_bytes_per_param(s.precision);
  return 2 * m.num_layers * s.batch.micro_batch * s.batch.seq_len * m.num_key_value_heads * m.head_dim * e;
}

// The DeepSpeed engine runs the step: a ZeRO stage was asked for, or the framework is DeepSpeed.
bool deepspeed_engine(const TrainingSetup& s) {
  return s.parallel.zero_stage > 0 || s.runtime.framework == Framework::deepspeed;
}

constexpr int64_t kMiB = 1 << 20;

// The model one rank holds: tensor parallelism shards heads, MLP width, vocabulary and experts
// (Megatron-style, no sequence parallelism); pipeline parallelism keeps ceil(L/pp) layers.
ModelSpec rank_model(const TrainingSetup& s) {
  ModelSpec m = s.model;
  const int64_t tp = s.parallel.tensor_parallel, pp = s.parallel.pipeline_parallel, ep = s.parallel.expert_parallel;
  if (tp > 1) {
    m.num_attention_heads = std::max<int64_t>(1, m.num_attention_heads / tp);
    m.num_key_value_heads = std::max<int64_t>(1, m.num_key_value_heads / tp);
    m.intermediate_size = std::max<int64_t>(1, m.intermediate_size / tp);
    m.moe_intermediate_size = m.moe_intermediate_size > 0 ? std::max<int64_t>(1, m.moe_intermediate_size / tp) : 0;
    m.shared_expert_intermediate_size /= tp;
    m.vocab_size = (m.vocab_size + tp - 1) / tp;
  }
  if (ep > 1 && m.num_experts > 0) m.num_experts = std::max<int64_t>(m.experts_per_token, m.num_experts / ep);
  if (pp > 1) m.num_layers = (m.num_layers + pp - 1) / pp;
  return m;
}

struct OptimizerCost {
  int64_t states = 0;     // bytes of optimizer states (whole trainable set)
  int64_t transient = 0;  // temporaries during step()
  int64_t per_param_transient = 0;  // the largest one-parameter step's temporaries (optimizer in backward)
  std::string states_formula;
  std::string transient_formula;
  bool paged = false;     // states live in host memory (paged optimizers)
};

// DeepSpeed's low-precision master state (Parallelism::half_master, half_optimizer_states): ZeRO
// 1-3 under its mixed precision only (deepspeed/runtime/config.py @ v0.18.3 asserts the stage).
bool half_master(const TrainingSetup& s) {
  return s.parallel.half_master && s.parallel.zero_stage >= 1 && master_bytes_per_param(s.precision) > 0;
}
bool half_states(const TrainingSetup& s) { return half_master(s) && s.parallel.half_optimizer_states; }

// Bytes per element of the gradients and optimizer states when the adapters are all that trains
// (their own dtype), else those of the precision regime.
int64_t trained_bytes(const TrainingSetup& s, const ParamSummary& ps, int64_t regime_bytes) {
  return ps.counts.adapter == ps.counts.trainable && ps.counts.trainable > 0 ? adapter_bytes(s) : regime_bytes;
}

OptimizerImpl resolve_impl(const TrainingSetup& s) {
  if (s.runtime.optimizer_impl != OptimizerImpl::automatic) return s.runtime.optimizer_impl;
  if (master_bytes_per_param(s.precision) > 0) return OptimizerImpl::fused;  // DeepSpeed FusedAdam
  if (s.device.kind == DeviceKind::cuda && s.runtime.torch_at_least(2, 0)) return OptimizerImpl::foreach;
  return OptimizerImpl::for_loop;
}

OptimizerCost optimizer_cost(const TrainingSetup& s, const ParamSummary& ps, bool text) {
  OptimizerCost c;
  // When only LoRA adapters train, the states take the adapters' dtype (fp32 under PEFT).
  const int64_t trainable = ps.counts.trainable, largest = ps.counts.largest_trainable;
  const int64_t sb = trained_bytes(s, ps, half_states(s) ? 2 : state_bytes_per_element(s.precision));
  const OptimizerImpl impl = resolve_impl(s);
  const bool v2 = s.runtime.torch_at_least(2, 0);
  auto per_param_loop = [&](int64_t temps, const char* what) {
    c.per_param_transient = impl == OptimizerImpl::fused ? 0 : (impl == OptimizerImpl::foreach ? (v2 ? 1 : 2) : temps) * largest * sb;
    switch (impl) {
      case OptimizerImpl::fused:
        c.transient = 0;
        if (text) c.transient_formula = "fused kernel: no parameter-sized temporaries";
        break;
      case OptimizerImpl::foreach:
        c.transient = (v2 ? 1 : 2) * trainable * sb;
        if (text) c.transient_formula = fmt::format("foreach: {} x trainable params x {} B ({})", v2 ? 1 : 2, sb, what);
        break;
      default:
        c.transient = temps * largest * sb;
        if (text) c.transient_formula = fmt::format("for-loop: {} x largest tensor {} x {} B ({})", temps, largest, sb, what);
    }
  };
  switch (s.optimizer) {
    case OptimizerKind::adamw: case OptimizerKind::adam: case OptimizerKind::paged_adamw:
      c.states = 2 * trainable * sb;
      if (text) c.states_formula = fmt::format("2 moments x {} trainable params x {} B", trainable, sb);
      per_param_loop(2, "sqrt(exp_avg_sq) and its scaled copy");
      c.paged = s.optimizer == OptimizerKind::paged_adamw;
      break;
    case OptimizerKind::sgd:
      if (text) c.states_formula = "plain SGD keeps no state";
      if (text) c.transient_formula = "in-place update";
      break;
    case OptimizerKind::sgd_momentum:
      c.states = trainable * sb;
      if (text) c.states_formula = fmt::format("momentum buffer: {} trainable params x {} B", trainable, sb);
      if (text) c.transient_formula = "in-place update";
      break;
    case OptimizerKind::lion:
      c.states = trainable * sb;
      c.transient = impl == OptimizerImpl::fused ? 0 : 2 * largest * sb;
      c.per_param_transient = c.transient;
      if (text) c.states_formula = fmt::format("exp_avg: {} trainable params x {} B", trainable, sb);
      if (text) c.transient_formula = fmt::format("exp_avg.clone() and the update: 2 x largest tensor {} x {} B", largest, sb);
      break;
    case OptimizerKind::adafactor: case OptimizerKind::adafactor_momentum: {
      // HF transformers Adafactor: exp_avg_sq_row/col for matrices (rows + cols), exp_avg_sq for
      // vectors, in the gradient's dtype; beta1 adds exp_avg (trainable elements).
      const bool momentum = s.optimizer == OptimizerKind::adafactor_momentum;
      c.states = (ps.factored + (momentum ? trainable : 0)) * sb;
      c.transient = 3 * largest * 4;
      c.per_param_transient = c.transient;
      if (text)
        c.states_formula = momentum ? fmt::format("factored second moment sum(rows + cols) {} + first moment {} elements, x {} B",
                                                  ps.factored, trainable, sb)
                                    : fmt::format("factored second moment: sum(rows + cols) = {} x {} B (no first moment)", ps.factored, sb);
      if (text) c.transient_formula = fmt::format("grad^2, the r*c approximation and the update: 3 x largest tensor {} x 4 B", largest);
      break;
    }
    case OptimizerKind::adamw_8bit: case OptimizerKind::paged_adamw_8bit: {
      // bitsandbytes: tensors >= 4096 elements keep two uint8 states with an fp32 absmax per
      // 256-element block; smaller ones keep fp32 states (min_8bit_size).
      const double per = 2.0 * (1.0 + 4.0 / 256.0);
      c.states = static_cast<int64_t>(std::llround(per * static_cast<double>(ps.big8))) + 8 * ps.small8;
      if (text) c.states_formula = fmt::format("2 x (1 B + 4 B/256) x {} params in 8-bit + 8 B x {} small params", ps.big8, ps.small8);
      if (text) c.transient_formula = "fused 8-bit kernel: no parameter-sized temporaries";
      c.paged = s.optimizer == OptimizerKind::paged_adamw_8bit;
      break;
    }
  }
  return c;
}

struct States {
  int64_t weights = 0, buffers = 0, grads_full = 0, grads_static = 0, master = 0, opt = 0, opt_transient = 0;
  int64_t comm_fwd = 0, comm_step = 0, step_extra = 0;
  int64_t comm_bwd_extra = 0;  // FSDP: a block's unsharded gradient before its reduce-scatter
  int64_t grads_no_sync = 0;   // FSDP1 no_sync: the unsharded gradients kept between accumulating micro-steps
  int64_t trainable = 0, large_tensors = 0;
  bool grads_partitioned = false;
  OptimizerCost oc;
  std::vector<HostTerm> host;
  std::string grads_formula, weights_formula, master_formula, comm_formula;
};

// The ranks one FSDP shard group spans: all data-parallel ranks, or one node's with hybrid sharding.
int64_t fsdp_group(const TrainingSetup& s) {
  const int64_t dp = s.parallel.data_parallel();
  switch (s.parallel.fsdp) {
    case FsdpMode::full_shard: case FsdpMode::shard_grad_op: return dp;
    case FsdpMode::hybrid_shard: return std::max<int64_t>(1, std::min(dp, s.parallel.gpus_per_node));
    default: return 1;
  }
}

// PyTorch FSDP (FSDP2 fully_shard per block, as torchtitan and torchtune apply it; FSDP1's
// strategies by name). Parameters, gradients and optimizer states are sharded over the shard
// group; a block's parameters are gathered (in the compute dtype) for its forward and again for
// its backward, the next block's prefetched meanwhile; gradients are reduce-scattered to shards.
// Under mixed-bf16/fp16 (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), torchtitan
// parallelize.py @ v0.2.2 L319-356) the sharded parameters are the fp32 master copy and gradient
// shards are fp32; pure bf16 (torchtune, no policy) keeps everything in bf16; fp32/AMP in fp32.
// CPU offload (FSDP CPUOffload) keeps shards, gradients and the step on the host.
States fsdp_states(const TrainingSetup& s, const TrainingSetup& rs, const ParamSummary& ps, bool text) {
  States st;
  const FsdpMode mode = s.parallel.fsdp;
  const int64_t group = fsdp_group(s);
  const bool sharded = mode != FsdpMode::no_shard;
  const bool mixed = master_bytes_per_param(s.precision) > 0;
  const int64_t trainable = ps.counts.trainable, adapters = ps.counts.adapter;
  const int64_t compute_b = is_autocast(s.precision) ? 4 : weight_bytes_per_param(s.precision);  // gathered dtype
  const int64_t shard_b = mixed ? 4 : weight_bytes_per_param(s.precision);                         // stored dtype
  const int64_t grad_b = mixed ? 4 : grad_bytes_per_param(s.precision);                             // reduce dtype
  const int64_t quantized = static_cast<int64_t>(std::llround(static_cast<double>(ps.counts.quantized) * base_weight_bits(s) / 8.0));
  const auto part = [&](int64_t bytes) { return sharded && group > 1 ? (bytes + group - 1) / group : bytes; };
  const bool offload = s.parallel.offload != Offload::none;
  st.trainable = trainable;
  st.buffers = model_buffer_bytes(rs);
  st.oc = optimizer_cost(s, ps, text);
  const int64_t ab = adapter_bytes(s);
  const int64_t stored = ps.plain * shard_b + adapters * ab + quantized;
  const int64_t grad_bytes = (trainable - adapters) * grad_b + adapters * ab;
  // Sharded fp32 parameters are the master copy under a mixed-precision policy.
  st.weights = offload ? 0 : mixed ? part(adapters * ab + quantized) : part(stored);
  st.master = offload || !mixed ? 0 : part(trainable * 4);
  st.opt = offload || st.oc.paged ? 0 : part(st.oc.states);
  st.opt_transient = offload ? 0 : (st.oc.transient + group - 1) / std::max<int64_t>(1, group);
  st.grads_full = grad_bytes;
  st.grads_partitioned = sharded && (group > 1 || offload);
  st.grads_static = st.grads_partitioned ? (offload ? 0 : part(grad_bytes)) : 0;
  // In flight: the running block and the prefetched one, gathered in the compute dtype, plus the
  // root unit (embeddings, final norm, head) which stays gathered from forward into backward.
  // SHARD_GRAD_OP keeps every gathered block until its backward. Backward adds a block's full
  // gradient before its reduce-scatter (and its fp32 cast under a mixed policy).
  const int64_t block = ps.layer_params + layer_norm_params(rs.model);
  const int64_t root = std::max<int64_t>(0, ps.counts.total - ps.counts.adapter - rs.model.num_layers * block);
  // FSDP2's per-parameter sharding (torchtune, torchtitan: fully_shard) makes gradients for the
  // parameters that train only: under LoRA a block's adapters. FSDP1's FlatParameter gradient
  // covers the whole block, frozen weights included.
  const bool adapter_grads_only =
      adapters > 0 && (s.runtime.framework == Framework::torchtune || s.runtime.framework == Framework::torchtitan);
  if (sharded) {
    const int64_t blocks = mode == FsdpMode::shard_grad_op ? rs.model.num_layers : 2;
    // float8 all-gather (torchao enable_fsdp_float8_all_gather, torchtitan's fp8 recipes): the
    // blocks' linear weights travel and stay gathered at 1 B/param.
    const int64_t block_b = s.runtime.fp8 ? 1 : compute_b;
    st.comm_fwd = blocks * block * block_b + root * compute_b;
    if (adapter_grads_only)
      st.comm_bwd_extra = (adapters + rs.model.num_layers - 1) / std::max<int64_t>(1, rs.model.num_layers) * ab;
    else
      st.comm_bwd_extra = block * (compute_b + (grad_b != compute_b ? grad_b : 0));
  }
  // FSDP1 no_sync() on the accumulating micro-steps (runtime.fsdp_no_sync): no reduce-scatter, so
  // each unit accumulates its whole unsharded FlatParameter gradient until the micro-step that
  // syncs (torch/distributed/fsdp/fully_sharded_data_parallel.py no_sync: "FSDP will accumulate
  // the full model gradients (instead of gradient shards)"). A FlatParameter's gradient covers all
  // of it, so under LoRA every block with an adapter keeps a gradient the size of the block, frozen
  // weights included (use_orig_params=True lets them share the FlatParameter); the root unit
  // (embeddings, final norm, head) only when one of its parameters trains.
  if (sharded && group > 1 && s.runtime.fsdp_no_sync && s.batch.grad_accum > 1 && !offload) {
    st.grads_no_sync = adapters > 0 ? rs.model.num_layers * block * grad_b + adapters * ab + (trainable > adapters ? root * grad_b : 0)
                                    : grad_bytes;
  }
  for (const auto& [elements, count] : ps.sizes)
    if (elements * compute_b >= 10 * kMiB) st.large_tensors += count;
  if (offload) {
    // FSDP2's CPUOffloadPolicy pins the shards by default (pin_memory=True).
    st.host.push_back({"offloaded_parameters", part(stored), "parameter shards on the host", "torch FSDP CPUOffload(offload_params=True)", true});
    st.host.push_back({"offloaded_gradients", part(grad_bytes), "gradient shards on the host", "torch FSDP CPUOffload: gradients to CPU", true});
    st.host.push_back({"offloaded_optimizer_states", part(st.oc.states), text ? st.oc.states_formula + " on the host" : "",
                       "torch FSDP CPUOffload: the optimizer steps on the CPU"});
  }
  if (!text) return st;
  const std::string over = sharded && group > 1 ? fmt::format(" / {} ranks (FSDP {})", group, to_string(mode)) : "";
  st.weights_formula = mixed ? fmt::format("none resident: the fp32 shards are the master copy; gathered blocks are in comm_buffers{}",
                                           adapters ? fmt::format(" (+ {} LoRA params x {} B)", adapters, ab) : "")
                             : fmt::format("{} params x {} B{}", ps.counts.total, shard_b, over);
  st.master_formula = mixed ? fmt::format("{} trainable x 4 B fp32 shards{}", trainable, over) : "none: the shards are the master copy";
  st.grads_formula = fmt::format("{} trainable x {} B{}", trainable, grad_b, st.grads_partitioned ? over : "");
  if (st.grads_no_sync > 0)
    st.grads_formula += fmt::format("; between accumulating micro-steps FSDP no_sync keeps the unsharded gradients: {}",
                                    adapters > 0 ? fmt::format("{} layers x {} params x {} B (frozen weights share the FlatParameter) + "
                                                               "{} LoRA params x {} B",
                                                               rs.model.num_layers, block, grad_b, adapters, ab)
                                                 : fmt::format("{} trainable x {} B", trainable, grad_b));
  const std::string backward = adapter_grads_only
                                   ? fmt::format("block's adapter gradients ({} B: FSDP2 makes none for frozen weights)", st.comm_bwd_extra)
                                   : fmt::format("block's gradient ({} B{})", compute_b,
                                                 grad_b != compute_b ? fmt::format(" + its {} B cast", grad_b) : "");
  st.comm_formula = sharded ? fmt::format("gathered parameters in flight: {} blocks of {} + root unit {} params x {} B; backward adds one {}",
                                          mode == FsdpMode::shard_grad_op ? "all" : "2", block, root, compute_b, backward)
                            : "FSDP NO_SHARD: gradients all-reduced in place";
  return st;
}

States model_states(const TrainingSetup& s, const TrainingSetup& rs, const ParamSummary& ps, bool text) {
  if (s.parallel.fsdp != FsdpMode::none) return fsdp_states(s, rs, ps, text);
  States st;
  const int64_t dp = s.parallel.data_parallel();
  const int zero = s.parallel.zero_stage;
  const int64_t gb = grad_bytes_per_param(s.precision), mb = half_master(s) ? 2 : master_bytes_per_param(s.precision);
  const int64_t wb = weight_bytes_per_param(s.precision);
  const int64_t trainable = ps.counts.trainable, adapters = ps.counts.adapter;
  st.trainable = trainable;
  // Adapters train in fp32 whatever the base precision; their grads are fp32. Quantized base
  // weights are stored at their bit width (QLoRA), adapters in fp32 (PEFT autocast_adapter_dtype).
  // Megatron accumulates into fp32 main gradients whatever the parameters' dtype.
  const int64_t ab = adapter_bytes(s);
  const int64_t grad_bytes = (trainable - adapters) * (megatron_grad_buffer(s) ? 4 : gb) + adapters * ab;
  const int64_t quantized = static_cast<int64_t>(std::llround(static_cast<double>(ps.counts.quantized) * base_weight_bits(s) / 8.0));
  const int64_t all_weights = ps.plain * wb + adapters * ab + quantized;
  st.buffers = model_buffer_bytes(rs);
  st.oc = optimizer_cost(s, ps, text);
  const auto part = [&](int64_t bytes, bool on) { return on && dp > 1 ? (bytes + dp - 1) / dp : bytes; };

  const bool off_opt = offloads_optimizer(s.parallel.offload);
  const bool off_par = offloads_params(s.parallel.offload);
  st.weights = off_par ? 0 : part(all_weights, zero >= 3);
  st.master = off_opt ? 0 : part(trainable * mb, zero >= 1);
  st.opt = (off_opt || st.oc.paged) ? 0 : part(st.oc.states, zero >= 1);
  // ZeRO-1/2/3 step the optimizer on the rank's flat fp32 partition, so its temporaries are per
  // partition too (stage_1_and_2.py @ v0.16.4 L401 builds single_partition_of_fp32_groups; stage3.py
  // @ v0.16.4 L902-903 fp32_partitioned_groups_flat; the wrapped optimizer steps only those).
  st.opt_transient = off_opt ? 0 : part(st.oc.transient, zero >= 1);
  st.grads_full = grad_bytes;
  st.grads_partitioned = gradients_partitioned(s);
  st.grads_static = st.grads_partitioned ? (off_opt ? 0 : part(grad_bytes, true)) : 0;
  // Mixed precision: the fp32 gradient of the rank's partition exists during the step (16-bit
  // with DeepSpeed's bf16_master_weights_and_grads).
  if (mb > 0 && !off_opt) st.step_extra = part(trainable * mb, zero >= 1);

  // Communication buffers. DeepSpeed's buckets exist whenever a ZeRO stage runs (its engine
  // reduces through them at any world size, one GPU included); DDP's only with several ranks.
  const int64_t reduce = std::min(s.parallel.reduce_bucket_elems, trainable);
  if (megatron_grad_buffer(s)) {
    // Megatron's DDP all-reduces (or, with the distributed optimizer, reduce-scatters) the bucket
    // views of its contiguous fp32 gradient buffer in place: no copy beside the gradients
    // (megatron/core/distributed/param_and_grad_buffer.py @ d98e8a64 L708-732).
    if (text) st.comm_formula = "Megatron reduces in place inside its gradient buffer: no communication buffers";
  } else if (dp > 1 && zero == 0) {
    st.comm_fwd = s.parallel.ddp_bucket_view ? 0 : grad_bytes;
    if (text)
      st.comm_formula = s.parallel.ddp_bucket_view
                            ? "DDP gradient_as_bucket_view: buckets alias the gradients"
                            : fmt::format("DDP buckets hold a copy of all gradients: {} B (gradient_as_bucket_view=False)", grad_bytes);
  } else if (zero >= 1 && zero <= 2) {
    // With contiguous_gradients (the default) backward allocates its reduce buffers at the full
    // reduce_bucket_size whatever the model's size: buf_0, and buf_1 with overlap_comm
    // (DeepSpeedZeroOptimizer.backward, deepspeed/runtime/zero/stage_1_and_2.py @ v0.9.5 L1881-1894).
    const int64_t ipg = s.parallel.contiguous_gradients ? s.parallel.reduce_bucket_elems : 0;
    const int64_t gather = std::min(s.parallel.allgather_bucket_elems, trainable);
    st.comm_fwd = ipg * gb * (s.parallel.overlap_comm ? 2 : 1);
    st.comm_step = gather * wb;
    if (text)
      st.comm_formula = s.parallel.contiguous_gradients
                            ? fmt::format("reduce buffers of reduce_bucket_size {} elems x {} B{}; all-gather bucket {} elems x {} B in the step",
                                          ipg, gb, s.parallel.overlap_comm ? " x 2 (overlap_comm)" : "", gather, wb)
                            : fmt::format("no reduce buffers (contiguous_gradients false); all-gather bucket {} elems x {} B in the step",
                                          gather, wb);
  } else if (zero == 3) {
    // Gathered parameters of the running layer and the next (prefetch) plus the reduce bucket.
    const int64_t live = std::min(s.parallel.stage3_max_live_parameters, 2 * ps.layer_params);
    const int64_t pre = std::min(s.parallel.stage3_prefetch_bucket_elems, ps.layer_params);
    st.comm_fwd = (live + pre) * wb + reduce * gb;
    if (text)
      st.comm_formula = fmt::format("gathered params of 2 layers {} + prefetch {} elems x {} B + reduce bucket {} x {} B", live,
                                    pre, wb, reduce, gb);
  } else if (text) {
    st.comm_formula = "single data-parallel rank: no communication buffers";
  }

  // Rounding: every tensor >= 10 MiB is rounded to 2 MiB (mean waste 1 MiB) by the caching
  // allocator [CUDACachingAllocator.cpp kRoundLarge].
  for (const auto& [elements, count] : ps.sizes)
    if (elements * wb >= 10 * kMiB) st.large_tensors += count;

  // Host memory.
  // The offload buffers are page-locked with pin_memory: true (DeepSpeed's default is false:
  // deepspeed/runtime/zero/offload_config.py @ v0.16.4 L45, L72).
  const bool pin = s.parallel.offload_pin_memory;
  if (off_opt) {
    st.host.push_back({"offloaded_optimizer_states", part(st.oc.states, true), text ? st.oc.states_formula + " on the host" : "",
                       "ZeRO-Offload (Ren et al. 2021): optimizer states in CPU memory", pin});
    if (mb > 0)
      st.host.push_back({"offloaded_master_weights", part(trainable * mb, true), text ? fmt::format("{} trainable x 4 B", trainable) : "",
                         "ZeRO-Offload keeps the fp32 master parameters on the CPU", pin});
    st.host.push_back({"offloaded_gradients", part(trainable * 4, true), text ? fmt::format("{} trainable x 4 B fp32", trainable) : "",
                       "ZeRO-Offload copies gradient partitions to fp32 CPU buffers", pin});
  }
  if (st.oc.paged)
    st.host.push_back({"paged_optimizer_states", st.oc.states, text ? st.oc.states_formula + " (paged to host)" : "",
                       "bitsandbytes paged optimizers: unified memory evicted to the host under pressure"});
  if (off_par)
    st.host.push_back({"offloaded_parameters", part(all_weights, true), "parameters / ranks on the host",
                       "ZeRO-Infinity / stage-3 offload_param", pin});
  if (!text) return st;

  st.weights_formula = quantized > 0
                           ? fmt::format("{} params: {} B/param, {} quantized at {:.3f} bits{}", ps.counts.total, wb,
                                         ps.counts.quantized, base_weight_bits(s),
                                         s.model.quantized.any() ? fmt::format(" (the checkpoint's {})", s.model.quantized.method) : "")
                           : fmt::format("{} params x {} B ({}){}", ps.counts.total, wb, to_string(s.precision),
                                         zero >= 3 && dp > 1 ? fmt::format(" / {} ranks (ZeRO-3)", dp) : "");
  if (adapters > 0) st.weights_formula += fmt::format(" + {} LoRA adapter params x {} B", adapters, ab);
  st.master_formula = mb ? fmt::format("{} trainable x {} B {} master{}", trainable, mb, mb == 2 ? "16-bit (bf16_master_weights_and_grads)" : "fp32",
                                       zero >= 1 && dp > 1 ? fmt::format(" / {} ranks", dp) : "")
                         : "none: the parameters are the master copy in this regime";
  st.grads_formula = st.grads_partitioned
                         ? fmt::format("{} trainable x {} B / {} ranks (ZeRO-{} partition)", trainable, gb, dp, zero)
                         : fmt::format("{} trainable x {} B", trainable, adapters ? ab : gb);
  return st;
}

// ---- segment profiles (cached per distinct layer kind) -------------------------------------

struct LayerKey {
  bool moe, ckpt, frozen, input_rg;
  bool operator<(const LayerKey& o) const {
    return std::tie(moe, ckpt, frozen, input_rg) < std::tie(o.moe, o.ckpt, o.frozen, o.input_rg);
  }
};

sim::CatBytes add(sim::CatBytes a, const sim::CatBytes& b) {
  for (int i = 0; i < sim::kNumCats; ++i) a[i] += b[i];
  return a;
}

int64_t cat(const sim::CatBytes& c, sim::Cat k) { return c[static_cast<int>(k)]; }

std::string human(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace

ParamSummary summarize_parameters(const TrainingSetup& s) {
  TrainingSetup rs = s;
  rs.model = rank_model(s);
  ParamSummary ps;
  const std::vector<ParamTensor> tensors = parameter_tensors(rs);
  for (const ParamTensor& p : tensors) {
    const int64_t n = p.total();
    if (!p.quantized && p.group != ParamGroup::adapter) ps.plain += n;
    if (p.trainable) {
      ps.factored += (p.rows > 0 && p.cols > 0 ? p.rows + p.cols : p.elements) * p.count;
      (p.elements >= 4096 ? ps.big8 : ps.small8) += n;
    }
    ps.sizes.emplace_back(p.elements, p.count);
  }
  for (const auto& l : layer_linears(rs.model, rs.model.num_experts > 0)) ps.layer_params += l.elems();
  ps.counts = count_parameters(rs, tensors);
  return ps;
}

int64_t first_step_optimizer_peak(const TrainingSetup& s, const MemoryBreakdown& steady) {
  // Step 1's step() creates each parameter's states just before updating it, in parameter
  // order (LibTorch and torch.optim's for-loop), so a large tensor updated early sees few
  // states around it. Only the for-loop implementation has per-parameter temporaries.
  TrainingSetup rs = s;
  rs.model = rank_model(s);
  const PhaseState& opt = steady.at(Phase::optimizer_step);
  const int64_t states = opt[Term::optimizer_states];
  const int64_t transient = opt[Term::transient];
  if (resolve_impl(s) != OptimizerImpl::for_loop || states == 0) return opt.total();
  const int64_t base = opt.total() - states - transient;
  const std::vector<ParamTensor> tensors = parameter_tensors(rs);
  const ParameterCounts c = count_parameters(rs, tensors);
  const double per_elem = c.trainable > 0 ? static_cast<double>(states) / static_cast<double>(c.trainable) : 0;
  const double temp_per_elem = c.largest_trainable > 0 ? static_cast<double>(transient) / static_cast<double>(c.largest_trainable) : 0;
  double created = 0, peak = 0;
  for (const ParamTensor& p : tensors) {
    if (!p.trainable) continue;
    for (int64_t i = 0; i < p.count; ++i) {
      created += per_elem * static_cast<double>(p.elements);
      peak = std::max(peak, created + temp_per_elem * static_cast<double>(p.elements));
    }
  }
  return base + static_cast<int64_t>(peak);
}

int64_t model_state_bytes(const TrainingSetup& s) {
  TrainingSetup rs = s;
  rs.model = rank_model(s);
  const States st = model_states(s, rs, summarize_parameters(s), false);
  return st.weights + (st.grads_partitioned ? st.grads_static : st.grads_full) + st.master + st.opt;
}

MemoryBreakdown estimate(const TrainingSetup& s) { return estimate(s, nullptr); }

bool gradients_partitioned(const TrainingSetup& s) {
  // ZeRO-2/3 reduce gradients bucket by bucket into the rank's partition, or with ZeRO-Offload
  // straight to host buffers (one GPU included). Without offload, one rank's "partition" is all
  // of them and DeepSpeed behaves like plain training. FSDP reduce-scatters each block's.
  if (s.parallel.fsdp != FsdpMode::none && s.parallel.fsdp != FsdpMode::no_shard)
    return fsdp_group(s) > 1 || s.parallel.offload != Offload::none;
  return s.parallel.zero_stage >= 2 && (s.parallel.data_parallel() > 1 || s.parallel.offload != Offload::none);
}

// Gradients alive before backward starts (all of them, or the ZeRO partition): accumulation
// adds into them, zero_grad(set_to_none=False) keeps them between steps, Megatron's buffer is
// permanent. With the optimizer stepped in backward none survive the step.
bool gradients_resident(const TrainingSetup& s) {
  if (s.runtime.optimizer_in_backward) return false;
  return s.batch.grad_accum > 1 || !s.runtime.zero_grad_set_to_none || megatron_grad_buffer(s);
}

bool gradients_persist(const TrainingSetup& s) {
  // Micro-step 1 starts without gradients and keeps each as it appears; later micro-steps of
  // accumulation add into existing ones (temporaries); ZeRO-2/3 reduce and drop them in buckets.
  return !gradients_resident(s) && !gradients_partitioned(s);
}

Timeline activation_timeline(const TrainingSetup& s) {
  Timeline out;
  TrainingSetup rs = s;
  rs.model = rank_model(s);
  const ModelSpec& m = rs.model;
  const bool grads_persist = gradients_persist(s);

  sim::SimOptions so;
  so.grads_persist = grads_persist;
  if (s.runtime.optimizer_in_backward) {
    // Each parameter is stepped right after its gradient is made, and the gradient dropped: the
    // step's temporaries, scaled from the largest parameter's to each op's gradient.
    const ParamSummary ps = summarize_parameters(s);
    const int64_t largest = ps.counts.largest_trainable;
    const int64_t gb = trained_bytes(s, ps, grad_bytes_per_param(s.precision));
    if (largest > 0 && gb > 0)
      so.step_temps_per_grad_byte = static_cast<double>(optimizer_cost(s, ps, false).per_param_transient) / static_cast<double>(largest * gb);
    so.grads_persist = false;
  }
  const sim::Segment emb_seg = embedding_segment(rs);
  const sim::Profile emb = emb_seg.simulate(so);
  // A layer's input needs a gradient once anything before it trains: the embeddings, or an
  // earlier layer (adapters, or a layer that is not frozen).
  bool input_rg = embeddings_trainable(rs);
  const bool adapters = rs.finetune.mode != FinetuneMode::full;
  std::map<LayerKey, sim::Profile> cache;
  std::vector<const sim::Profile*> layer(m.num_layers);
  for (int64_t i = 0; i < m.num_layers; ++i) {
    const LayerKey key{m.is_moe_layer(i), s.checkpointing.layer_checkpointed(i), layer_frozen(rs, i), input_rg};
    input_rg = input_rg || adapters || !key.frozen;
    auto it = cache.find(key);
    if (it == cache.end()) {
      sim::SimOptions lo = so;
      lo.checkpointed = key.ckpt;
      lo.per_op_policy = key.ckpt && s.checkpointing.mode == CheckpointMode::selective_op;
      lo.input_requires_grad = key.input_rg;
      const sim::Segment seg = layer_segment(rs, key.moe, i);
      it = cache.emplace(key, seg.simulate(lo)).first;
      // One table per layer variant, named after its first layer.
      const std::string label = fmt::format("{} layer {}{}{}", key.moe ? "MoE" : "dense", i, key.frozen ? " (frozen)" : "",
                                            key.input_rg ? "" : " (its input needs no gradient)");
      if (!key.ckpt)
        for (const auto& row : seg.saved_rows())
          out.saved_per_layer.push_back({label, row.op, row.bytes,
                                         row.cat == sim::Cat::loss ? "loss" : row.cat == sim::Cat::weight_copy ? "weight_copy" : "activation"});
    }
    layer[i] = &it->second;
  }
  const sim::Segment head_seg = head_segment(rs);
  const sim::Profile head = head_seg.simulate(so);
  for (const auto& row : head_seg.saved_rows())
    out.saved_per_layer.push_back({head_seg.name(), row.op, row.bytes, row.cat == sim::Cat::loss ? "loss" : "activation"});

  const SharedTensors shared = shared_tensors(rs);
  const bool offload = s.runtime.activation_offload;
  bool any_ckpt = false;
  for (int64_t i = 0; i < m.num_layers; ++i) any_ckpt = any_ckpt || s.checkpointing.layer_checkpointed(i);
  // Pipeline 1F1B: the first stage holds activations of up to pp micro-batches in flight.
  const int64_t in_flight = s.parallel.pipeline_parallel > 1 ? std::min(s.parallel.pipeline_parallel, s.batch.grad_accum) : 1;
  out.in_flight = in_flight;
  sim::CatBytes layers_only{};  // what one micro-batch's layers keep (pipeline: earlier micro-batches in flight)
  if (in_flight > 1)
    for (int64_t i = 0; i < m.num_layers; ++i) layers_only = add(layers_only, layer[i]->retained);

  // Only the dynamic bytes are walked: the static ones (model states, context) add the same
  // amount at every point of a phase, so they do not move its peak. The peak's label is made
  // once at the end from (segment, op).
  auto T = [](Term t) { return static_cast<int>(t); };
  using Bytes = std::array<int64_t, kNumTerms>;
  auto put = [&](Bytes& b, const sim::CatBytes& c, int64_t mult = 1) {
    b[T(Term::activations)] += mult * cat(c, sim::Cat::activation);
    b[T(Term::logits_and_loss)] += mult * cat(c, sim::Cat::loss);
    b[T(Term::weights)] += mult * cat(c, sim::Cat::weight_copy);
    b[T(Term::transient)] += mult * (cat(c, sim::Cat::act_grad) + cat(c, sim::Cat::scratch));
    b[T(Term::gradients)] += mult * cat(c, sim::Cat::param_grad);
  };
  auto total_of = [](const Bytes& b) {
    int64_t t = 0;
    for (int64_t v : b) t += v;
    return t;
  };
  struct Label { int64_t layer; const std::string* op; };  // layer -1: embedding, -2: head
  auto consider = [&](PhaseState& ph, Label& label, const Bytes& b, Label at) {
    if (label.op == nullptr || total_of(b) > ph.total()) {
      ph.bytes = b;
      label = at;
    }
  };
  auto label_text = [&](const Label& l) {
    const std::string where = l.layer == -1 ? "embedding" : l.layer == -2 ? "head"
                              : fmt::format("layer {}{}", l.layer, m.is_moe_layer(l.layer) ? " (moe)" : "");
    return where + ": " + (l.op ? *l.op : std::string("?"));
  };

  // Forward walk.
  out.forward.phase = Phase::forward;
  Label fl{};
  {
    Bytes b{};
    put(b, emb.forward.bytes);
    consider(out.forward, fl, b, {-1, &emb.forward.where});
    sim::CatBytes retained = emb.retained;
    const int64_t shared_live = shared.whole_step_bytes + shared.forward_bytes;
    int64_t autocast_cache = 0;  // weight copies of checkpointed layers, freed when autocast exits
    for (int64_t i = 0; i < m.num_layers; ++i) {
      Bytes bl{};
      put(bl, retained);
      bl[T(Term::activations)] += shared_live + (i > 0 || !shared.embeds_is_layer_input ? shared.embeds_bytes : 0);
      bl[T(Term::weights)] += autocast_cache;
      put(bl, layer[i]->forward.bytes);
      consider(out.forward, fl, bl, {i, &layer[i]->forward.where});
      // Offloaded: a layer's saved tensors leave for pinned host memory while the next layer
      // runs (torchtune OffloadActivations: a stash of in-flight tensors, its streams), so the GPU
      // holds the previous layer's only.
      retained = offload ? add(emb.retained, layer[i]->retained) : add(retained, layer[i]->retained);
      if (offload) out.offloaded_bytes += sim::total(layer[i]->retained);
      autocast_cache += layer[i]->forward_cache;
    }
    Bytes bh{};
    put(bh, retained);
    bh[T(Term::weights)] += autocast_cache;
    if (in_flight > 1) put(bh, layers_only, in_flight - 1);  // earlier micro-batches in flight
    bh[T(Term::activations)] += shared.whole_step_bytes + (any_ckpt ? shared.forward_bytes : 0);
    put(bh, head.forward.bytes);
    consider(out.forward, fl, bh, {-2, &head.forward.where});
  }

  // Backward walk: head, layers L-1..0, embedding.
  out.backward.phase = Phase::backward;
  Label bl{};
  {
    std::vector<sim::CatBytes> before(m.num_layers + 1);  // retained of embedding + layers < i
    before[0] = emb.retained;
    for (int64_t i = 0; i < m.num_layers; ++i) before[i + 1] = add(before[i], layer[i]->retained);
    // Offloaded: layer i's saved tensors come back for its backward (in p.backward) and layer
    // i-1's are prefetched; the rest stay on the host.
    if (offload)
      for (int64_t i = 1; i <= m.num_layers; ++i) before[i] = add(emb.retained, layer[i - 1]->retained);
    const int64_t shared_bwd = shared.whole_step_bytes + (any_ckpt ? shared.forward_bytes : 0);
    // Gradients produced so far stay (when they persist), unless each is stepped and freed by its
    // hook as soon as it is accumulated (optimizer in backward).
    const bool grads_accumulate = grads_persist && !s.runtime.optimizer_in_backward;
    int64_t grads = 0;
    auto stage = [&](const sim::Profile& p, const sim::CatBytes& waiting, int64_t idx) {
      Bytes b{};
      put(b, waiting);
      if (in_flight > 1) put(b, layers_only, in_flight - 1);
      // cos/sin and a checkpoint-held mask are released with layer 0's backward.
      if (idx != -1) b[T(Term::activations)] += shared_bwd;
      b[T(Term::gradients)] += grads;
      put(b, p.backward.bytes);
      consider(out.backward, bl, b, {idx, &p.backward.where});
      if (grads_accumulate) grads += p.param_grad_bytes;
    };
    // The head's backward (the loss spike) runs before any bucket of ZeRO-2/3 gradients is
    // reduced, so it is kept apart: compose() adds the gradient partition only after it.
    stage(head, before[m.num_layers], -2);
    // Optimizer in backward with a tied head: the shared weight's AccumulateGrad runs once, after
    // the embedding's backward adds its part, so the head's contribution waits in that node's
    // input buffer through every layer's backward (measured: `gpt2 amp-bf16 sgd-mom optim-in-bwd
    // full s512` in the CPU matrix).
    if (s.runtime.optimizer_in_backward && head_shares_embedding(rs) && head_trainable(rs))
      grads += m.vocab_size * m.hidden_size * grad_bytes_per_param(s.precision);
    out.backward_head = out.backward;
    const Label head_label = bl;
    out.backward = PhaseState{};
    out.backward.phase = Phase::backward;
    bl = Label{};
    for (int64_t i = m.num_layers - 1; i >= 0; --i) stage(*layer[i], before[i], i);
    stage(emb, sim::CatBytes{}, -1);
    out.backward_head.at = label_text(head_label);
  }
  out.forward.at = label_text(fl);
  out.backward.at = label_text(bl);
  return out;
}

MemoryBreakdown estimate(const TrainingSetup& s, const Calibration* cal) {
  return estimate(s, activation_timeline(s), cal);
}

int64_t estimate_peak(const TrainingSetup& s, const Timeline& t, const Calibration* cal, const ParamSummary* summary) {
  return compose(s, t, cal, /*with_text=*/false, summary).peak_bytes();
}

int64_t estimate_verdict_bytes(const TrainingSetup& s, const Timeline& t, const Calibration* cal, const ParamSummary* summary) {
  return compose(s, t, cal, /*with_text=*/false, summary).verdict_bytes();
}

MemoryBreakdown estimate(const TrainingSetup& s, const Timeline& t, const Calibration* cal) {
  return compose(s, t, cal, /*with_text=*/true, nullptr);
}

namespace {

// A calibration's corrections within the bounds its reader keeps (profiles/calibration.cpp):
// checked again here because the estimator is also handed calibrations built in code.
void check_calibration(const Calibration& c) {
  constexpr int64_t kTiB = int64_t{1} << 40;
  auto bad = [](const char* field, const std::string& why) {
    throw InputError(Where{}, fmt::format("calibration {}: {}", field, why),
                     "run memplan calibrate again, or keep hand edits within these bounds");
  };
  if (c.cuda_context_bytes < -1 || c.cuda_context_bytes > kTiB) bad("cuda_context_bytes", "must be -1 or 0 to 1 TiB");
  if (c.workspace_bytes < -1 || c.workspace_bytes > kTiB) bad("workspace_bytes", "must be -1 or 0 to 1 TiB");
  if (!(c.activation_scale >= 0.25 && c.activation_scale <= 4)) bad("activation_scale", "must be in [0.25, 4]");
  if (!(c.model_state_scale >= 0.25 && c.model_state_scale <= 4)) bad("model_state_scale", "must be in [0.25, 4]");
  if (!(c.overhead_fraction == -1 || (c.overhead_fraction >= 0 && c.overhead_fraction < 1)))
    bad("overhead_fraction", "must be in [0, 1) (or -1)");
  if (c.overhead_bytes < 0 || c.overhead_bytes > kTiB) bad("overhead_bytes", "must be 0 to 1 TiB");
}

}  // namespace

namespace {

// The longest allocation sequence compose() replays (a dense 48-layer model makes ~27,000 events
// in a few milliseconds; a model with a hundred experts per layer makes millions).
constexpr size_t kMaxReplayEvents = 250'000;

// On CUDA, the allocator's overhead from replaying the process's allocation sequence through the
// caching-allocator model (estimator/sequence.h): reserved at the peak minus the tensors there.
// Reserved only grows in a steady step, so the same bytes stand in every phase; the phase with
// the most tensors is then the peak and its total is reserved + context. Setups the sequence does
// not cover, and calibrations that fitted the overhead or scale the terms, keep the formula.
// Returns false (and changes nothing) where it does not apply; `why_not` says why when the
// sequence does not cover the setup.
bool replay_allocator(const TrainingSetup& s, const Calibration* cal, MemoryBreakdown& b, bool with_text, std::string& why_not) {
  if (s.device.kind != DeviceKind::cuda || !s.runtime.allocator_rounding) return false;
  if (cal && (cal->overhead_fraction >= 0 || cal->overhead_bytes != 0 || cal->activation_scale != 1.0 ||
              cal->model_state_scale != 1.0))
    return false;
  // The memory the allocator can get: the card's, less what lives outside it (the context); an
  // allocator cap (set_per_process_memory_fraction) is already in the card's capacity
  // (profiles/build.cpp: the cap plus the context), and bounds the allocator here too. `target`:
  // the allocator's share of the target (thresholds.target of the card, less the context).
  const int64_t context = b.phases.empty() ? 0 : b.phases.front()[Term::cuda_context];
  int64_t room = s.device.capacity_bytes > 0 ? std::max<int64_t>(0, s.device.capacity_bytes - context) : 0;
  if (room > 0 && s.device.allocator_cap_bytes > 0) room = std::min(room, s.device.allocator_cap_bytes);
  const int64_t target = room > 0 ? std::clamp<int64_t>(target_bytes(s) - context, 0, room) : 0;
  // Two steps: the second is the steady one (on the 15 H200 cases the third adds nothing). Where the
  // uncapped reserved memory is more than the allocator may hold, the allocator frees its cache and
  // retries before it fails (CUDACachingAllocator.cpp malloc: release_cached_blocks), so the step may
  // still run there: one more replay, capped, says whether it runs within the target, and where it
  // does not, one more whether it runs on the card at all.
  const ReservedPrediction p = predict_reserved(s, /*boundary=*/false, kMaxReplayEvents, /*capacity=*/target > 0 ? target : room,
                                                /*steps=*/2);
  if (!p.modelled) {
    why_not = p.why_not;
    return false;
  }
  const bool runs_in_target = target > 0 && (p.peak_reserved <= target || p.runs_in_capacity == 1);
  bool runs_on_card = room > 0 && (runs_in_target || p.peak_reserved <= room);
  if (room > 0 && !runs_on_card && target < room) {
    const ReservedPrediction q = predict_reserved(s, false, kMaxReplayEvents, room, 2);
    runs_on_card = q.modelled && q.runs_in_capacity == 1;
  }
  // What the card shows: the uncapped reserved memory, or the whole room where the step runs only
  // by squeezing the cache into it (the H200's 11 GiB-capped Qwen2.5-0.5B run reserved 11.68 of
  // 11.81 GB); a step that runs out keeps the uncapped figure, over the card.
  const bool squeezed = room > 0 && p.peak_reserved > room && runs_on_card;
  const int64_t reserved = squeezed ? room : p.peak_reserved;
  if (room > 0) {
    b.runs = runs_on_card ? 1 : 0;
    // Running within the target's share with the cache squeezed: the verdict holds that share.
    if (runs_in_target && p.peak_reserved > target) b.needed_bytes = context + target;
  }
  auto T = [](Term t) { return static_cast<int>(t); };
  auto tensors = [&](const PhaseState& ph) { return ph.total() - ph[Term::cuda_context] - ph[Term::allocator_overhead]; };
  int64_t allocated = 0;
  for (const PhaseState& ph : b.phases) allocated = std::max(allocated, tensors(ph));
  const int64_t overhead = std::max<int64_t>(0, reserved - allocated);
  for (PhaseState& ph : b.phases) ph.bytes[T(Term::allocator_overhead)] = overhead;
  if (!with_text) return true;
  const std::string within_target =
      b.needed_bytes >= 0 ? fmt::format("; capped at the target's {} (the allocator's share of {:.0f}% of the card) it still runs: "
                                        "the verdict holds that",
                                        human(target), 100 * s.thresholds.target)
                          : "";
  b.text[T(Term::allocator_overhead)] = {
      (squeezed ? fmt::format("caching-allocator replay of the process's allocations (model build, 3 steps): reserved {} would "
                             "exceed the {} the card leaves the allocator; replayed within it, the allocator frees its cache "
                             "and retries and the step runs with the card full: {} - tensors {} at the peak{}",
                             human(p.peak_reserved), human(room), human(room), human(allocated),
                             s.runtime.expandable_segments ? ", expandable segments" : "")
               : fmt::format("caching-allocator replay of the process's allocations (model build, 3 steps): reserved {} - tensors {} at "
                             "the peak{}",
                             human(p.peak_reserved), human(allocated), s.runtime.expandable_segments ? ", expandable segments" : "")) +
          within_target,
      "estimator/sequence.cpp (the segment walk's tensors in order) through estimator/allocator.cpp "
      "(CUDACachingAllocator.cpp: rounding, pools, splitting, best fit)"};
  return true;
}

}  // namespace

MemoryBreakdown compose(const TrainingSetup& s, const Timeline& t, const Calibration* cal, bool with_text,
                        const ParamSummary* summary) {
  if (cal) check_calibration(*cal);
  MemoryBreakdown out;
  TrainingSetup rs = s;  // the rank's view of the model
  rs.model = rank_model(s);
  const ParamSummary own = summary ? ParamSummary{} : summarize_parameters(s);
  const ParamSummary& ps = summary ? *summary : own;
  if (with_text) out.params = count_parameters(s);
  const States st = model_states(s, rs, ps, with_text);
  const ModelSpec& m = rs.model;
  const bool cuda = s.device.kind == DeviceKind::cuda;
  const int64_t dp = s.parallel.data_parallel();
  const bool accumulating = gradients_resident(s);  // accumulation, or grads kept by zero_grad
  const bool grads_persist = gradients_persist(s);
  const int64_t batch = batch_input_bytes(rs);
  const int64_t in_flight = t.in_flight;

  // CUDA overheads (per family; calibration replaces them).
  int64_t context = cuda ? s.device.cuda_context_bytes : 0;
  // Two cuBLAS handles hold a workspace each: the main thread's (forward) and the autograd
  // device thread's (backward) [CublasHandlePool.cpp: one workspace per handle and stream].
  int64_t workspace = cuda ? 2 * s.device.cublas_workspace_bytes : 0;
  if (cal && cal->cuda_context_bytes >= 0 && cuda) context = cal->cuda_context_bytes;
  if (cal && cal->workspace_bytes >= 0 && cuda) workspace = cal->workspace_bytes;

  // Static bytes during forward/backward (per term).
  std::array<int64_t, kNumTerms> base{};
  auto T = [](Term t) { return static_cast<int>(t); };
  base[T(Term::weights)] = st.weights + st.buffers;
  base[T(Term::master_weights)] = st.master;
  base[T(Term::optimizer_states)] = st.opt;
  // Gradients resident before backward starts: all of them between micro-steps of
  // accumulation, or the ZeRO-2/3 partition; without accumulation none (set_to_none), and the
  // ZeRO partition appears with the first reduced bucket, after the head's backward.
  const int64_t grads_at_rest = st.grads_partitioned ? st.grads_static : st.grads_full;
  const int64_t grads_kept = accumulating ? (st.grads_no_sync > 0 ? st.grads_no_sync : grads_at_rest) : 0;
  base[T(Term::gradients)] = grads_kept;
  // Buffers the DeepSpeed engine allocates at start-up: BF16_Optimizer's fp32 gradient buffer of
  // every parameter (bf16 without ZeRO; deepspeed/runtime/bf16_optimizer.py @ v0.16.4 L156-163) and
  // ZeRO-3's gradient partition (stage3.py @ v0.16.4 L1027-1066), both alive from the first forward.
  int64_t startup_grads = 0;
  if (deepspeed_engine(s) && s.parallel.zero_stage == 0 && s.precision == Precision::mixed_bf16) startup_grads = 4 * st.trainable;
  if (deepspeed_engine(s) && s.parallel.zero_stage == 3 && st.grads_partitioned && !accumulating) startup_grads = st.grads_static;
  base[T(Term::gradients)] += startup_grads;
  base[T(Term::comm_buffers)] = st.comm_fwd;
  base[T(Term::cuda_context)] = context;
  base[T(Term::workspace)] = workspace;
  base[T(Term::activations)] = batch;
  PhaseState fwd = t.forward, bwd = t.backward, bwd_head = t.backward_head;
  for (PhaseState* ph : {&fwd, &bwd, &bwd_head})
    for (int i = 0; i < kNumTerms; ++i) ph->bytes[i] += base[i];
  if (st.grads_partitioned && !accumulating && startup_grads != st.grads_static) bwd.bytes[T(Term::gradients)] += st.grads_static;
  for (PhaseState* ph : {&bwd, &bwd_head}) ph->bytes[T(Term::comm_buffers)] += st.comm_bwd_extra;
  // A loop that keeps the forward's outputs (custom loops, LitGPT): the previous step's logits
  // (and KV cache) live until the next forward returns, the new ones through backward and the step.
  const int64_t held_logits = s.runtime.keep_logits ? logits_bytes(rs) : 0;
  const int64_t held_cache = s.runtime.keep_logits && s.runtime.keep_cache ? kv_cache_bytes(rs) : 0;
  fwd.bytes[T(Term::logits_and_loss)] += held_logits;
  fwd.bytes[T(Term::activations)] += held_cache;
  for (PhaseState* ph : {&bwd, &bwd_head}) ph->bytes[T(Term::logits_and_loss)] += held_logits;
  // Lightning zeroes gradients after the next forward (its closure runs training_step first): the
  // last step's gradients are alive through the whole forward.
  if (s.runtime.zero_grad_after_forward && !accumulating) fwd.bytes[T(Term::gradients)] += grads_at_rest;
  // Optimizer in backward: each parameter's step runs in its gradient hook, with its temporaries,
  // right after the op that made the gradient (in the simulated backward: activation_timeline).
  if (bwd_head.total() > bwd.total()) bwd = bwd_head;

  // Optimizer step.
  PhaseState opt;
  opt.phase = Phase::optimizer_step;
  {
    auto b = base;
    b[T(Term::activations)] = held_cache;
    b[T(Term::logits_and_loss)] = held_logits;
    b[T(Term::gradients)] = grads_at_rest + (startup_grads != st.grads_static ? startup_grads : 0);
    // FSDP steps on its shards: nothing is gathered during the step.
    b[T(Term::comm_buffers)] = s.parallel.fsdp != FsdpMode::none ? 0 : std::max(st.comm_fwd, st.comm_step);
    b[T(Term::transient)] = st.opt_transient + st.step_extra;
    if (s.runtime.optimizer_in_backward) {  // stepped in backward: nothing left to do here
      b[T(Term::gradients)] = startup_grads;
      b[T(Term::transient)] = 0;
    }
    opt.bytes = b;
    opt.at = s.runtime.optimizer_in_backward ? "after backward (optimizer stepped in backward)" : "optimizer.step()";
  }

  // Allocator overhead on CUDA: 1 MiB mean rounding waste per large tensor of every model-state
  // copy, plus a fraction of the dynamic bytes for fragmentation (calibrate fits both).
  // expandable_segments maps pages into growing segments instead of carving fixed ones, so the
  // fragmentation share goes; the 2 MiB rounding of large tensors stays (torch docs/source/notes/
  // cuda.rst "expandable_segments" @ v2.6.0).
  const double frac = cal && cal->overhead_fraction >= 0 ? cal->overhead_fraction : s.runtime.expandable_segments ? 0.0 : 0.05;
  const int64_t copies = 1 + (st.grads_full > 0 ? 1 : 0) + (st.master > 0 ? 1 : 0) +
                         (s.optimizer == OptimizerKind::adamw || s.optimizer == OptimizerKind::adam ? 2 : 0);
  const int64_t rounding = cuda ? st.large_tensors * copies * kMiB : 0;
  for (PhaseState* ph : {&fwd, &bwd, &opt}) {
    auto& b = ph->bytes;
    if (cal) {
      for (Term t : kDynamicTerms)
        b[T(t)] = static_cast<int64_t>(std::llround(static_cast<double>(b[T(t)]) * cal->activation_scale));
      for (Term t : kModelStateTerms)
        b[T(t)] = static_cast<int64_t>(std::llround(static_cast<double>(b[T(t)]) * cal->model_state_scale));
    }
    if (cuda && s.runtime.allocator_rounding) {
      const int64_t dynamic = sum_of(b, kDynamicTerms);
      // The constant is >= 0 (check_calibration); the max guards calibrations built in code.
      b[T(Term::allocator_overhead)] = std::max<int64_t>(
          0, rounding + static_cast<int64_t>(frac * static_cast<double>(dynamic)) + (cal ? cal->overhead_bytes : 0));
    }
  }
  out.phases = {fwd, bwd, opt};
  std::string replay_why_not;
  const bool replayed = replay_allocator(s, cal, out, with_text, replay_why_not);
  out.allocator_replayed = replayed;

  // Host terms of this rank (a node holds one set per rank on it). Computed without the formula
  // text too: the planner checks offload plans against the node's RAM.
  out.host = st.host;
  if (t.offloaded_bytes > 0)
    out.host.push_back({"offloaded_activations", t.offloaded_bytes,
                        with_text ? fmt::format("saved tensors of {} layers in pinned host memory", m.num_layers) : "",
                        "torchtune/training/_activation_offloading.py @ v0.6.1 OffloadActivations (saved tensors >= 1 KiB to "
                        "pinned CPU memory, brought back per layer in backward)",
                        true});
  if (s.data.num_workers > 0) {
    // A language-model batch is input_ids, attention_mask and labels, int64 each (HF collators).
    // Each worker keeps up to prefetch_factor collated batches in shared memory (DataLoader:
    // "2 * num_workers batches prefetched across all workers", torch/utils/data/dataloader.py @
    // v2.6.0); default_collate stacks a worker's samples straight into a new shared-memory tensor
    // (torch/utils/data/_utils/collate.py @ v2.6.0 collate_tensor_fn), so while it collates the
    // next batch its samples and that batch coexist; pin_memory copies each batch into
    // page-locked memory in the main process (one being copied, one handed to the loop).
    const int64_t batch_b = s.batch.micro_batch * s.batch.seq_len * 3 * 8;
    const int64_t w = s.data.num_workers, pf = s.data.prefetch_factor;
    out.host.push_back({"dataloader_prefetch", w * pf * batch_b,
                        with_text ? fmt::format("{} workers x {} prefetch x {} x {} tokens x 24 B (input_ids, attention_mask, labels int64)",
                                                w, pf, s.batch.micro_batch, s.batch.seq_len)
                                  : "",
                        "torch/utils/data/dataloader.py @ v2.6.0 (prefetch_factor batches per worker); the memory guides' workers x "
                        "prefetch x batch x seq"});
    out.host.push_back({"dataloader_collate", w * batch_b,
                        with_text ? fmt::format("{} workers x one batch of samples being stacked ({} x {} tokens x 24 B)", w,
                                                s.batch.micro_batch, s.batch.seq_len)
                                  : "",
                        "torch/utils/data/_utils/collate.py @ v2.6.0 collate_tensor_fn (torch.stack into a shared-memory tensor)"});
    if (s.data.pin_memory)
      out.host.push_back({"pinned_batches", 2 * batch_b,
                          with_text ? fmt::format("2 batches of {} x {} tokens x 24 B in page-locked memory", s.batch.micro_batch,
                                                  s.batch.seq_len)
                                    : "",
                          "torch/utils/data/_utils/pin_memory.py @ v2.6.0 (the pin-memory thread copies each batch)", true});
  }
  if (!with_text) return out;
  out.saved_per_layer = t.saved_per_layer;

  // Formula text.
  auto& tx = out.text;
  const int64_t gb = grad_bytes_per_param(s.precision);
  tx[T(Term::weights)] = {st.weights_formula + (is_autocast(s.precision) ? "; + autocast half copies of matmul weights, 2 B each, from forward until their layer's backward" : "") +
                              (st.buffers ? fmt::format("; + model buffers {}", human(st.buffers)) : ""),
                          "parameter list in estimator/model.cpp; autocast cache: autocast_mode.cpp cached_cast"};
  tx[T(Term::gradients)] = {st.grads_formula + (grads_persist ? "; they appear layer by layer during backward (zero_grad set_to_none)"
                                                               : accumulating ? "; resident through later micro-steps of accumulation" : ""),
                            fmt::format("{} B/param gradient dtype; AccumulateGrad steals the first gradient (accumulate_grad.h)", gb)};
  tx[T(Term::master_weights)] = {st.master_formula, "ZeRO (Rajbhandari et al. 2020) K=12: 4 B master + 8 B Adam"};
  tx[T(Term::optimizer_states)] = {st.oc.states_formula + (s.parallel.zero_stage >= 1 && dp > 1 ? fmt::format(" / {} ranks (ZeRO-{})", dp, s.parallel.zero_stage) : ""),
                                   "torch.optim state_dict contents; bitsandbytes 8-bit: block-wise quantization (Dettmers et al. 2022)"};
  tx[T(Term::activations)] = {fmt::format("saved tensors per layer (see the per-layer table) x {} layers, checkpointing {}, attention {}; "
                                          "+ input ids and labels {}", m.num_layers, to_string(s.checkpointing), to_string(s.attention), human(batch)),
                              "per-op table in estimator/layers.cpp (docs/autograd-saved.md); Korthikanti et al. 2022 as oracle"};
  tx[T(Term::logits_and_loss)] = {fmt::format("logits N x V = {} x {}{}; log-softmax and its gradients in fp32", s.batch.micro_batch * s.batch.seq_len,
                                              m.vocab_size, s.runtime.loss_upcast ? " with the HF fp32 upcast" : ""),
                                  "HF ForCausalLMLoss; docs/autograd-saved.md §4 (backward peak 12-14 x b*s*V bytes)"};
  tx[T(Term::transient)] = {"activation gradients at the backward frontier and kernel temporaries; in the step: " + st.oc.transient_formula +
                                (st.step_extra ? fmt::format(" + fp32 gradient partition {}", human(st.step_extra)) : ""),
                            "autograd engine (engine.cpp); optimizer implementations (docs/libtorch-notes.md §8)"};
  tx[T(Term::workspace)] = {cuda ? fmt::format("2 cuBLAS handles (forward thread, autograd thread) x {}", human(s.device.cublas_workspace_bytes)) : "none on CPU",
                            "CublasHandlePool.cpp: CUBLAS_WORKSPACE_CONFIG default :4096:2:16:8, 32 MiB on sm90"};
  tx[T(Term::cuda_context)] = {cuda ? fmt::format("{} family default", s.device.family.empty() ? "generic" : s.device.family) : "none on CPU",
                               "docs/libtorch-notes.md §2.1 (lazy module loading); replaced by calibration"};
  if (!replayed)  // (else replay_allocator wrote it)
    tx[T(Term::allocator_overhead)] = {cuda ? fmt::format("1 MiB x {} large tensors x {} copies + {:.0f}% of activations, loss and transients",
                                                          st.large_tensors, copies, frac * 100)
                                            : "none on CPU (no caching allocator)",
                                       "CUDACachingAllocator.cpp: 2 MiB rounding above 10 MiB; fragmentation default until calibrated"};
  tx[T(Term::comm_buffers)] = {st.comm_formula, "DDP Reducer buckets; DeepSpeed reduce/allgather_bucket_size defaults 5e8"};
  if (cal) {
    out.calibrated = true;
    out.calibration = cal->file.empty() ? cal->device : cal->file;
  }

  // Notes: the approximations that apply here.
  if (m.num_experts > 0)
    out.notes.push_back("MoE: tokens are assumed routed uniformly across experts (router at initialisation)");
  if (s.parallel.tensor_parallel > 1)
    out.notes.push_back(s.parallel.sequence_parallel
                            ? "tensor parallel modelled Megatron-style with sequence parallelism: the residual stream holds 1/TP "
                              "of the sequence, all-gathered into attention and the MLP (whose inputs are saved whole)"
                            : "tensor parallel modelled Megatron-style without sequence parallelism (--sequence-parallel shards "
                              "the residual stream)");
  if (in_flight > 1)
    out.notes.push_back(fmt::format("pipeline 1F1B: the first stage holds {} micro-batches of activations", in_flight));
  if (!cuda) out.notes.push_back("CPU: no CUDA context, workspace or caching-allocator overhead");
  if (s.attention == AttentionImpl::sdpa) {  // the SDPA backend assumed (estimator/attention_kernel.cpp)
    const AttentionKernel ak = attention_kernel(s);
    out.notes.push_back(fmt::format("attention kernel: SDPA {} ({})", backend_name(ak.backend), ak.why));
  }
  if (!replay_why_not.empty())
    out.notes.push_back("allocator overhead from the percentage formula: the allocation replay does not cover this setup (" +
                        replay_why_not + ")");
  if (s.runtime.compile)
    out.notes.push_back("torch.compile: modelled as the default partitioner's saves for norms and SwiGLU (input and rstd; gate "
                        "and up); Inductor's buffer reuse, graph breaks and CUDA-graph pools are not modelled");
  if (s.runtime.fp8)
    out.notes.push_back("fp8: torchao Float8Linear saves each block linear's high-precision input and a float8 copy of its "
                        "weight (1 B/param); with compile the partitioner may save float8 inputs instead (not modelled)");
  if (const std::string fb = framework_buffers_note(s); !fb.empty()) out.notes.push_back(fb);
  return out;
}

}  // namespace memplan
