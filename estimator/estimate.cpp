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
#include "estimator/states.h"
#include "estimator/text.h"

namespace memplan {

using namespace est;

namespace {

// The allocator overhead's fragmentation share of the dynamic terms where nothing better is known:
// no calibration fitted one and the allocation-sequence replay (replay.cpp, which models
// CUDACachingAllocator.cpp itself) does not cover the setup and says why. A round assumption, not
// derived from the allocator; `memplan calibrate` fits the share of a device (overhead_fraction).
constexpr double kFallbackFragmentation = 0.05;

}  // namespace

MemoryBreakdown estimate(const TrainingSetup& s) { return estimate(s, nullptr); }

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


VerdictBound verdict_bound(const TrainingSetup& s, const Timeline& t, const Calibration* cal, const ParamSummary* summary) {
  const MemoryBreakdown b = compose(s, t, cal, /*with_text=*/false, summary, /*replay=*/false);
  VerdictBound v;
  v.host_bytes = b.host_bytes();
  if (!replay_may_apply(s, cal)) {  // the formula's overhead stands: this is the verdict
    v.lower = b.verdict_bytes();
    v.exact = true;
    v.runs = b.runs >= 0 ? b.runs : -1;
    return v;
  }
  // replay_allocator's verdict: max(tensors, reserved) + context, or context + the target's share
  // where the step runs there squeezed, which it is said to only when the tensors fit that share;
  // the formula's (where the replay declines a long sequence) has an overhead >= 0 on the tensors.
  const int64_t context = b.phases.front()[Term::cuda_context];
  int64_t tensors = 0;
  for (const PhaseState& ph : b.phases) tensors = std::max(tensors, ph.total() - ph[Term::cuda_context] - ph[Term::allocator_overhead]);
  v.lower = context + tensors;
  // Tensors and context beyond the card: neither the replay (the tensors outgrow the room it has)
  // nor the formula (the peak is over the card) says the step runs.
  if (s.device.capacity_bytes > 0 && v.lower > s.device.capacity_bytes) v.runs = 0;
  return v;
}

bool step_runs(const TrainingSetup& s, const Timeline& t, const Calibration* cal) {
  auto full = [&] { return judge(compose(s, t, cal, /*with_text=*/false, nullptr), s).runs; };
  if (!replay_may_apply(s, cal) || s.device.capacity_bytes <= 0) return full();
  const MemoryBreakdown b = compose(s, t, cal, /*with_text=*/false, nullptr, /*replay=*/false);
  const int64_t context = b.phases.front()[Term::cuda_context];
  int64_t tensors = 0;
  for (const PhaseState& ph : b.phases) tensors = std::max(tensors, ph.total() - ph[Term::cuda_context] - ph[Term::allocator_overhead]);
  const auto [room, target] = allocator_room(s, context);
  if (room <= 0) return full();
  if (tensors > room) return false;  // replay_allocator: the step is not said to run on the card
  // replay_allocator's runs_on_card: it runs in the target's share (where the tensors fit it), else
  // on the card; each is whether the replay capped there runs (within it uncapped, it runs capped).
  if (target > 0 && tensors <= target) {
    const ReservedPrediction in_share = predict_runs(s, kMaxReplayEvents, target, /*steps=*/2);
    if (!in_share.modelled) return full();
    if (in_share.runs_in_capacity == 1) return true;
    if (target >= room) return false;
  }
  const ReservedPrediction on_card = predict_runs(s, kMaxReplayEvents, room, /*steps=*/2);
  if (!on_card.modelled) return full();
  return on_card.runs_in_capacity == 1;
}

MemoryBreakdown compose(const TrainingSetup& s, const Timeline& t, const Calibration* cal, bool with_text,
                        const ParamSummary* summary, bool replay) {
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
  // TRL's DPO reference model: a second copy of the weights as the policy holds them (its dtype:
  // the same model_init_kwargs; prepare_deepspeed keeps ZeRO-3's partitioning and gives other
  // stages one whole copy, prepare_fsdp shards it as the policy: trl/trainer/dpo_trainer.py @
  // v1.9.0 L893-936, trl/models/utils.py @ v1.9.0 prepare_deepspeed/prepare_fsdp), alive the whole step.
  const int64_t reference = s.runtime.reference_model ? checked_add(st.weights, st.buffers, "the reference model") : 0;
  base[T(Term::weights)] += reference;
  PhaseState fwd = t.forward, bwd = t.backward, bwd_head = t.backward_head, ref_fwd = t.reference_forward;
  for (PhaseState* ph : {&fwd, &bwd, &bwd_head, &ref_fwd})
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
  // The reference model's forward (activation_timeline's reference_forward): after the policy's,
  // within compute_loss (DPOTrainer._compute_loss @ v1.9.0 L1329-1390).
  if (s.runtime.reference_model && ref_fwd.total() > fwd.total()) fwd = ref_fwd;
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
  const double frac = cal && cal->overhead_fraction >= 0 ? cal->overhead_fraction
                     : s.runtime.expandable_segments        ? 0.0
                                                            : kFallbackFragmentation;
  const int64_t copies = 1 + (reference > 0 ? 1 : 0) + (st.grads_full > 0 ? 1 : 0) + (st.master > 0 ? 1 : 0) +
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
  if (!st.rank_states.empty()) {
    // Another rank's phases differ from the worst rank's by its optimizer states (every phase)
    // and its step's temporaries (the step); the rest is the same on every rank.
    const int64_t w = st.worst_rank;
    bool differ = false;
    for (size_t r = 0; r < st.rank_states.size(); ++r) {
      const int64_t ds = st.rank_states[r] - st.rank_states[w], dt = st.rank_transient[r] - st.rank_transient[w];
      MemoryBreakdown::RankPeak rp;
      rp.rank = rp.last_rank = static_cast<int64_t>(r);
      rp.phase_bytes = {fwd.total() + ds, bwd.total() + ds, opt.total() + ds + dt};
      rp.peak_bytes = *std::max_element(rp.phase_bytes.begin(), rp.phase_bytes.end());
      if (!out.ranks.empty() && out.ranks.back().phase_bytes == rp.phase_bytes) out.ranks.back().last_rank = rp.rank;
      else out.ranks.push_back(rp);
      differ = differ || ds != 0 || dt != 0;
    }
    if (!differ) out.ranks.clear();
    out.worst_rank = w;
    out.worst_rank_why = fmt::format("ZeroRedundancyOptimizer's largest share: {} of {} trainable parameters",
                                     text::thousands(st.rank_elements[w]), text::thousands(st.trainable));
  }
  std::string replay_why_not;
  const bool replayed = replay && replay_allocator(s, cal, out, with_text, replay_why_not);
  out.allocator_replayed = replayed;
  if (!replayed && cuda) out.replay_why_not = replay_why_not;

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
  if (reference > 0) {
    tx[T(Term::weights)].formula += fmt::format("; + the DPO reference model, a frozen copy as the policy holds it, {} (its no-grad "
                                                "forward runs after the policy's)", human(reference));
    tx[T(Term::weights)].source += "; TRL DPOTrainer: trl/trainer/dpo_trainer.py @ v1.9.0 L893-936 (the reference made and prepared "
                                   "as the policy), L1329-1390 (its forward under no_grad after the policy's)";
  }
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
  // tests/ranks measures DDP and ZeroRedundancyOptimizer per rank on Gloo; torch 1.13's FSDP
  // does not run there (CPU), so its figures rest on the model alone.
  if (s.parallel.fsdp != FsdpMode::none && dp > 1)
    out.notes.push_back("FSDP: these per-rank figures are not checked against a multi-process run (tests/ranks measures DDP and "
                        "ZeroRedundancyOptimizer; torch 1.13's FSDP does not run on its CPU ranks)");
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
  if (s.runtime.reference_model)
    out.notes.push_back(std::string("DPO reference model: a frozen copy of the weights all step and its no-grad forward after the "
                                    "policy's (TRL DPOTrainer @ v1.9.0); precompute_ref_log_probs: true or PEFT adapters (the "
                                    "base is the reference) remove it") +
                        (s.parallel.zero_stage == 3 || s.parallel.fsdp != FsdpMode::none
                             ? "; sharded as the policy, its forward's gathered layers are not counted"
                             : ""));
  return out;
}

}  // namespace memplan
