// The model states of one rank: weights, gradients, master weights, optimizer states and their
// temporaries, communication buffers and host terms, under each precision regime and sharding
// (DeepSpeed ZeRO, FSDP, Megatron's buffers); and the parameter summary compose() reads them from.
#include "estimator/states.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>

#include <fmt/format.h>

#include "estimator/estimate.h"
#include "estimator/layers.h"
#include "estimator/model.h"
#include "estimator/runtime.h"
#include "estimator/sequence.h"

namespace memplan {

// ---- model states ------------------------------------------------------------------------------

namespace est {  // what states.h declares; helpers used only here are static

// Megatron's DistributedDataParallel keeps fp32 main gradients in one buffer allocated at start-up
// (megatron/core/distributed/param_and_grad_buffer.py @ core_v0.13.0 L660-675): resident the whole run.
static bool megatron_grad_buffer(const TrainingSetup& s) { return s.runtime.framework == Framework::megatron; }

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


// DeepSpeed's low-precision master state (Parallelism::half_master, half_optimizer_states): ZeRO
// 1-3 under its mixed precision only (deepspeed/runtime/config.py @ v0.18.3 asserts the stage).
static bool half_master(const TrainingSetup& s) {
  return s.parallel.half_master && s.parallel.zero_stage >= 1 && master_bytes_per_param(s.precision) > 0;
}
static bool half_states(const TrainingSetup& s) { return half_master(s) && s.parallel.half_optimizer_states; }

// Bytes per element of the gradients and optimizer states when the adapters are all that trains
// (their own dtype), else those of the precision regime.
int64_t trained_bytes(const TrainingSetup& s, const ParamSummary& ps, int64_t regime_bytes) {
  return ps.counts.adapter == ps.counts.trainable && ps.counts.trainable > 0 ? adapter_bytes(s) : regime_bytes;
}

static OptimizerImpl resolve_impl(const TrainingSetup& s) {
  if (s.runtime.optimizer_impl != OptimizerImpl::automatic) return s.runtime.optimizer_impl;
  if (master_bytes_per_param(s.precision) > 0) return OptimizerImpl::fused;  // DeepSpeed FusedAdam
  if (s.device.kind == DeviceKind::cuda && s.runtime.torch_at_least(2, 0)) return OptimizerImpl::foreach;
  return OptimizerImpl::for_loop;
}

OptimizerCost optimizer_cost(const TrainingSetup& s, const ParamSummary& ps, bool text) {
  OptimizerCost c;
  // When only LoRA adapters train, the states take the adapters' dtype (fp32 under PEFT).
  const int64_t trainable = ps.counts.trainable, largest = ps.counts.largest_trainable;
  const int64_t regime_sb = half_states(s) ? 2 : state_bytes_per_element(s.precision);
  const int64_t sb = trained_bytes(s, ps, regime_sb);
  // The states' bytes of all trainable tensors: PEFT's fp32 adapters beside modules_to_save's
  // copies (the model's dtype) when both train, else trainable x sb.
  const int64_t adapters = ps.counts.adapter;
  const int64_t all_sb = adapters > 0 && adapters < trainable ? adapters * adapter_bytes(s) + (trainable - adapters) * regime_sb
                                                              : trainable * sb;
  const OptimizerImpl impl = resolve_impl(s);
  const bool v2 = s.runtime.torch_at_least(2, 0);
  auto per_param_loop = [&](int64_t temps, const char* what) {
    c.per_param_transient = impl == OptimizerImpl::fused ? 0 : (impl == OptimizerImpl::foreach ? (v2 ? 1 : 2) : temps) * largest * sb;
    switch (impl) {
      case OptimizerImpl::fused:
        c.transient = 0;
        if (text) c.transient_formula = "fused kernel: no parameter-sized temporaries";
        break;
      case OptimizerImpl::foreach:  // (with two dtypes the first group's list lives until the second's is made)
        c.transient = (v2 ? 1 : 2) * all_sb;
        if (text) c.transient_formula = fmt::format("foreach: {} x trainable params x {} B ({})", v2 ? 1 : 2, sb, what);
        break;
      default:
        c.transient = temps * largest * sb;
        if (text) c.transient_formula = fmt::format("for-loop: {} x largest tensor {} x {} B ({})", temps, largest, sb, what);
    }
  };
  switch (s.optimizer) {
    case OptimizerKind::adamw: case OptimizerKind::adam:
      c.states = 2 * all_sb;
      if (text) c.states_formula = fmt::format("2 moments x {} trainable params x {} B", trainable, sb);
      per_param_loop(2, "sqrt(exp_avg_sq) and its scaled copy");
      break;
    case OptimizerKind::paged_adamw: {
      // bitsandbytes' 32-bit PagedAdamW: Optimizer2State.init_state makes both states float32
      // whatever the parameter's dtype (optim_bits 32: get_state_buffer(p, dtype=torch.float32)),
      // and its step is one kernel per tensor (optimizer_update_32bit), no parameter-sized
      // temporaries (bitsandbytes/optim/optimizer.py @ 51294d90). Paged: see OptimizerCost::paged.
      const int64_t fp32 = 4;
      c.states = 2 * trainable * fp32;
      if (text) c.states_formula = fmt::format("2 moments x {} trainable params x 4 B (bitsandbytes keeps 32-bit states in fp32)", trainable);
      if (text) c.transient_formula = "bitsandbytes' fused 32-bit kernel: no parameter-sized temporaries";
      c.paged = true;
      break;
    }
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
      // HF transformers Adafactor (src/transformers/optimization.py Adafactor.step @ 005edacb):
      // exp_avg_sq_row/col for matrices (rows + cols), exp_avg_sq for vectors; beta1 adds exp_avg
      // (trainable elements). All fp32: a 16-bit gradient is upcast first (`grad = grad.float()`)
      // and the states are made `.to(grad)`. Per parameter the step holds grad**2 + eps and the
      // r x c approximation (or rsqrt of the second moment) while the previous parameter's `update`
      // is still bound, then -update; 16-bit gradients and parameters add their fp32 copies
      // (`grad.float()`, `p.float()`), alive through the parameter's update.
      const bool momentum = s.optimizer == OptimizerKind::adafactor_momentum;
      // (DeepSpeed's mixed precision steps the fp32 master copy with fp32 gradients: no copies.)
      const bool master = master_bytes_per_param(s.precision) > 0;
      const int64_t copies = master ? 0
                                    : (trained_bytes(s, ps, grad_bytes_per_param(s.precision)) != 4 ? 1 : 0) +
                                          (trained_bytes(s, ps, weight_bytes_per_param(s.precision)) != 4 ? 1 : 0);
      const int64_t temps = (momentum ? 2 : 3) + copies;  // with beta1 the previous `update` is exp_avg, a state
      c.states = (ps.factored + (momentum ? trainable : 0)) * 4;
      if (text)
        c.states_formula = momentum ? fmt::format("factored second moment sum(rows + cols) {} + first moment {} elements, x 4 B (fp32)",
                                                  ps.factored, trainable)
                                    : fmt::format("factored second moment: sum(rows + cols) = {} x 4 B (fp32; no first moment)", ps.factored);
      const char* held = momentum ? "" : " beside the last parameter's update";
      const char* upcast = copies ? ", with the fp32 copies of the 16-bit gradient and parameter" : "";
      // A bound: the largest tensor stepped right after one as large.
      c.transient = temps * largest * 4;
      if (text) c.transient_formula = fmt::format("grad^2 + eps and the r*c approximation{}{}: {} x largest tensor {} x 4 B", held, upcast, temps, largest);
      // One rank holding the whole model: the tensors in the order the step walks them, each one's
      // (2 + copies) beside the previous one's update.
      if (s.parallel.num_gpus == 1 && s.parallel.tensor_parallel == 1 && s.parallel.pipeline_parallel == 1) {
        int64_t worst = 0, prev = 0;
        for (int64_t e : stepped_parameter_elements(s)) {
          worst = std::max(worst, (2 + copies) * e + (momentum ? 0 : prev));
          prev = e;
        }
        if (worst > 0 && worst * 4 < c.transient) {
          c.transient = worst * 4;
          if (text)
            c.transient_formula = fmt::format("grad^2 + eps and the r*c approximation{}{}, tensor by tensor in the step's order: {} x 4 B",
                                              held, upcast, worst);
        }
      }
      c.per_param_transient = c.transient;
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


// FSDP2 (fully_shard, per parameter: torchtune and torchtitan apply it) rather than FSDP1's
// FullyShardedDataParallel wrapper with its FlatParameters (HF/accelerate, Lightning, LitGPT).
static bool fsdp2(const TrainingSetup& s) { return fsdp_version_of(s) == 2; }

// The ranks one FSDP shard group spans: all data-parallel ranks, or one node's with hybrid sharding.
static int64_t fsdp_group(const TrainingSetup& s) {
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
static States fsdp_states(const TrainingSetup& s, const TrainingSetup& rs, const ParamSummary& ps, bool text) {
  States st;
  const int64_t group = fsdp_group(s);
  // FSDP1 on a shard group of one runs NO_SHARD whatever strategy it was given ("FSDP is switching
  // to use NO_SHARD instead of ... since the world size is 1", torch/distributed/fsdp/_init_utils.py
  // _init_core_state @ v2.6.0); FSDP2 keeps its (whole) shards and reduce-scatters into them.
  // (With CPU offload the shards and gradients stay on the host as the strategy says.)
  const FsdpMode mode = group == 1 && !fsdp2(s) && s.parallel.offload == Offload::none ? FsdpMode::no_shard : s.parallel.fsdp;
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
  // FSDP1's FlatParameter gradient covers its whole unit, frozen weights included (use_orig_params
  // lets them share it), so under LoRA an unsharded gradient is every adapted block's, whole.
  const int64_t block = ps.layer_params + layer_norm_params(rs.model);
  const int64_t root = std::max<int64_t>(0, ps.counts.total - ps.counts.adapter - rs.model.num_layers * block);
  const int64_t flat_grads =
      adapters > 0 ? rs.model.num_layers * block * grad_b + adapters * ab + (trainable > adapters ? root * grad_b : 0) : grad_bytes;
  if (!sharded && !fsdp2(s)) st.grads_full = flat_grads;
  st.grads_partitioned = sharded && (group > 1 || offload || fsdp2(s));
  st.grads_static = st.grads_partitioned ? (offload ? 0 : part(grad_bytes)) : 0;
  // In flight: the running block and the prefetched one, gathered in the compute dtype, plus the
  // root unit (embeddings, final norm, head) which stays gathered from forward into backward.
  // SHARD_GRAD_OP keeps every gathered block until its backward. Backward adds a block's full
  // gradient before its reduce-scatter (and its fp32 cast under a mixed policy).
  // FSDP2's per-parameter sharding (torchtune, torchtitan: fully_shard) makes gradients for the
  // parameters that train only: under LoRA a block's adapters. FSDP1's FlatParameter gradient
  // covers the whole block, frozen weights included.
  const bool adapter_grads_only = adapters > 0 && fsdp2(s);
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
  } else if (mixed && compute_b != shard_b) {
    // NO_SHARD under a low-precision param_dtype: each unit computes on a compute-dtype copy of
    // its FlatParameter, made in its pre-forward (and pre-backward) and freed in post_reshard
    // ("for no-reshard strategy, we must free the low precision shard in post-reshard":
    // FlatParamHandle.pre_unshard/_use_low_precision_shard and post_reshard, torch/distributed/fsdp/
    // _flat_param.py @ v2.6.0): the running block's and the root unit's, which spans the forward.
    st.comm_fwd = block * compute_b + root * compute_b;
  }
  // FSDP1 no_sync() on the accumulating micro-steps (runtime.fsdp_no_sync): no reduce-scatter, so
  // each unit accumulates its whole unsharded FlatParameter gradient until the micro-step that
  // syncs (torch/distributed/fsdp/fully_sharded_data_parallel.py no_sync: "FSDP will accumulate
  // the full model gradients (instead of gradient shards)"). A FlatParameter's gradient covers all
  // of it, so under LoRA every block with an adapter keeps a gradient the size of the block, frozen
  // weights included (use_orig_params=True lets them share the FlatParameter); the root unit
  // (embeddings, final norm, head) only when one of its parameters trains.
  if (sharded && group > 1 && s.runtime.fsdp_no_sync && s.batch.grad_accum > 1 && !offload) {
    st.grads_no_sync = flat_grads;
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
                    : st.comm_fwd > 0 ? fmt::format("FSDP NO_SHARD{}: the running block's {} and the root unit's {} params as {} B "
                                                    "compute copies; gradients all-reduced in place",
                                                    s.parallel.fsdp != FsdpMode::no_shard ? " (FSDP1 on one rank)" : "", block, root,
                                                    compute_b)
                                      : "FSDP NO_SHARD: gradients all-reduced in place";
  return st;
}

// torch's ZeroRedundancyOptimizer partition: the parameters sorted by size, largest first, each
// given to the rank with the fewest elements so far, the lowest such rank on ties
// (ZeroRedundancyOptimizer._partition_parameters and _get_min_index, torch/distributed/optim/
// zero_redundancy_optimizer.py @ v1.13.0, unchanged in v2.6.0). Per rank: its elements and its
// largest tensor.
// `carried`: the most elements a Python for-loop Adam(W) holds in temporaries while stepping the
// share in its order (largest first): the previous tensor's `denom`, still bound to the loop's
// variable, beside the new one's sqrt and quotient (torch/optim/adamw.py _single_tensor_adamw @
// v1.13.0 and v2.6.0: `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)` rebinds it
// only after the new one is made), so max(prev + 2 x cur) over consecutive tensors.
struct Shards {
  std::vector<int64_t> elements, largest, carried;
};
static Shards zero_redundancy_shards(const std::vector<std::pair<int64_t, int64_t>>& sizes, int64_t world) {
  std::vector<std::pair<int64_t, int64_t>> sorted = sizes;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const std::vector<int64_t> zeros(static_cast<size_t>(world), 0);
  Shards sh{zeros, zeros, zeros};
  std::vector<int64_t> last = zeros;  // each share's latest tensor (0 before its first)
  // (elements so far, rank): the smallest first, the lowest rank among equals.
  std::priority_queue<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>, std::greater<>> fewest;
  for (int64_t r = 0; r < world; ++r) fewest.push({0, r});
  for (const auto& [elements, count] : sorted)
    for (int64_t i = 0; i < count; ++i) {
      const auto [so_far, r] = fewest.top();
      fewest.pop();
      sh.elements[static_cast<size_t>(r)] = so_far + elements;
      const size_t ri = static_cast<size_t>(r);
      sh.carried[ri] = std::max(sh.carried[ri], last[ri] + 2 * elements);
      last[ri] = elements;
      sh.largest[ri] = std::max(sh.largest[ri], elements);
      fewest.push({so_far + elements, r});
    }
  return sh;
}

// The optimizer states and step temporaries of each rank's share under ZeroRedundancyOptimizer
// (its local optimizer steps only the rank's parameters; the updated ones are broadcast in place
// from their owner, _sync_params, with parameters_as_bucket_view False, torch's default); the
// worst rank is the one with the most bytes in the step. Factored and 8-bit state sizes scale
// with the share's elements.
static void shard_optimizer_per_rank(const TrainingSetup& s, const ParamSummary& ps, int64_t world, States& st) {
  const Shards sh = zero_redundancy_shards(ps.trainable_sizes, world);
  const double total = static_cast<double>(std::max<int64_t>(1, ps.counts.trainable));
  ParamSummary part = ps;  // one copy, its counts set per rank
  for (int64_t r = 0; r < world; ++r) {
    const size_t ri = static_cast<size_t>(r);
    if (r > 0 && sh.elements[ri] == sh.elements[ri - 1] && sh.largest[ri] == sh.largest[ri - 1] && sh.carried[ri] == sh.carried[ri - 1]) {
      st.rank_elements.push_back(st.rank_elements.back());  // the same share as the rank before (ranks past the tensors hold none)
      st.rank_states.push_back(st.rank_states.back());
      st.rank_transient.push_back(st.rank_transient.back());
      continue;
    }
    const int64_t e = sh.elements[static_cast<size_t>(r)];
    const double f = static_cast<double>(e) / total;
    part.counts.trainable = e;
    part.counts.largest_trainable = sh.largest[static_cast<size_t>(r)];
    part.factored = std::llround(static_cast<double>(ps.factored) * f);
    part.big8 = std::llround(static_cast<double>(ps.big8) * f);
    part.small8 = std::llround(static_cast<double>(ps.small8) * f);
    const OptimizerCost oc = optimizer_cost(s, part, false);
    int64_t transient = oc.transient;
    const bool adam = s.optimizer == OptimizerKind::adamw || s.optimizer == OptimizerKind::adam;
    const int64_t largest = sh.largest[static_cast<size_t>(r)];
    // optimizer_cost's for-loop Adam(W): 2 x largest x state bytes; here what the loop carries.
    if (adam && resolve_impl(s) == OptimizerImpl::for_loop && largest > 0)
      transient = oc.transient / (2 * largest) * sh.carried[static_cast<size_t>(r)];
    st.rank_elements.push_back(e);
    st.rank_states.push_back(oc.paged ? 0 : oc.states);
    st.rank_transient.push_back(transient);
  }
  st.worst_rank = 0;
  for (int64_t r = 1; r < world; ++r)
    if (st.rank_states[r] + st.rank_transient[r] > st.rank_states[st.worst_rank] + st.rank_transient[st.worst_rank]) st.worst_rank = r;
  st.opt = st.rank_states[st.worst_rank];
  st.opt_transient = st.rank_transient[st.worst_rank];
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
  // reduces through them at any world size, one GPU included); DDP's wherever DDP wraps the model (ddp_wraps).
  const int64_t reduce = std::min(s.parallel.reduce_bucket_elems, trainable);
  if (megatron_grad_buffer(s)) {
    // Megatron's DDP all-reduces (or, with the distributed optimizer, reduce-scatters) the bucket
    // views of its contiguous fp32 gradient buffer in place: no copy beside the gradients
    // (megatron/core/distributed/param_and_grad_buffer.py @ d98e8a64 L708-732).
    if (text) st.comm_formula = "Megatron reduces in place inside its gradient buffer: no communication buffers";
  } else if (ddp_wraps(s)) {
    if (s.parallel.zero_redundancy_optimizer && !off_opt && dp > 1) {
      shard_optimizer_per_rank(s, ps, dp, st);
      if (text)
        st.oc.states_formula += fmt::format("; ZeroRedundancyOptimizer: rank {}'s share, {} of {} trainable params (parameters sorted by "
                                            "size, each to the rank with the fewest so far)",
                                            st.worst_rank, st.rank_elements[st.worst_rank], trainable);
    }
    st.comm_fwd = ddp_gradient_views(s) ? 0 : grad_bytes;
    if (text)
      st.comm_formula = ddp_gradient_views(s)
                            ? "DDP gradient_as_bucket_view: the buckets are the gradients' storage (counted as gradients, resident from the start)"
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

}  // namespace est

using namespace est;

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
    if (p.trainable) ps.trainable_sizes.emplace_back(p.elements, p.count);
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


bool gradients_partitioned(const TrainingSetup& s) {
  // ZeRO-2/3 reduce gradients bucket by bucket into the rank's partition, or with ZeRO-Offload
  // straight to host buffers (one GPU included). Without offload, one rank's "partition" is all
  // of them and DeepSpeed behaves like plain training. FSDP reduce-scatters each block's.
  if (s.parallel.fsdp != FsdpMode::none && s.parallel.fsdp != FsdpMode::no_shard)
    return fsdp_group(s) > 1 || s.parallel.offload != Offload::none || fsdp2(s);
  // DeepSpeed runs the same partitioned code on one GPU, where the partition is every gradient:
  // ZeRO-3 allocates it when the engine starts (stage3.py @ v0.16.4 L1027-1066), ZeRO-2 at the first
  // reduced bucket (stage_1_and_2.py @ v0.16.4 copy_grads_in_partition: grads_in_partition, the
  // partition's size, made when it is first None).
  return s.parallel.zero_stage >= 2;
}

// Gradients alive before backward starts (all of them, or the ZeRO partition): accumulation
// adds into them, zero_grad(set_to_none=False) keeps them between steps, Megatron's buffer is
// permanent. With the optimizer stepped in backward none survive the step.
bool gradients_resident(const TrainingSetup& s) {
  if (s.runtime.optimizer_in_backward) return false;
  return s.batch.grad_accum > 1 || !s.runtime.zero_grad_set_to_none || megatron_grad_buffer(s) || ddp_gradient_views(s);
}

// DistributedDataParallel with gradient_as_bucket_view=True: the Reducer allocates its buckets
// when it is built (Reducer::initialize_buckets) and, from the first backward on, each .grad is a
// view into them (Reducer::mark_variable_ready_dense: a fresh gradient is copied into its bucket
// view and .grad set to the view), so the gradients' storage lives from construction to the end
// whatever zero_grad does; backward's fresh gradients are temporaries, as under accumulation
// (torch/csrc/distributed/c10d/reducer.cpp @ v1.13.0). Measured per rank by tests/ranks.
bool ddp_gradient_views(const TrainingSetup& s) { return s.parallel.ddp_bucket_view && ddp_wraps(s); }

// torch's DistributedDataParallel holds the model: several data-parallel ranks without ZeRO, FSDP
// or Megatron's own DDP, or one process that says it is wrapped (parallel.ddp). Its Reducer builds
// the buckets on any world size, one included (measured by tests/ranks: a world of one holds the
// same buckets as two).
bool ddp_wraps(const TrainingSetup& s) {
  return (s.parallel.data_parallel() > 1 || s.parallel.ddp) && s.parallel.zero_stage == 0 && s.parallel.fsdp == FsdpMode::none &&
         !megatron_grad_buffer(s);
}

int64_t fsdp_version_of(const TrainingSetup& s) {
  if (s.parallel.fsdp_version > 0) return s.parallel.fsdp_version;
  return s.runtime.framework == Framework::torchtune || s.runtime.framework == Framework::torchtitan ? 2 : 1;
}

bool gradients_persist(const TrainingSetup& s) {
  // Micro-step 1 starts without gradients and keeps each as it appears; later micro-steps of
  // accumulation add into existing ones (temporaries); ZeRO-2/3 reduce and drop them in buckets.
  return !gradients_resident(s) && !gradients_partitioned(s);
}

}  // namespace memplan
