// The process's allocation sequence from the segment simulation (see sequence.h).
//
// Each segment (embedding, each layer kind, head and loss) is simulated once with a SimRecord;
// its forward and backward events are then laid out per instance in the step's order, with the
// segment's keys mapped to process-wide tensor ids: a segment's input is the previous one's
// output, its input's gradient the previous one's output gradient. The ledger below keeps which
// ids are alive, so an allocation of a live id (the input, which the previous segment made) and a
// free of a dead one (an output the next segment already freed) record nothing.
#include "estimator/sequence.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "estimator/error.h"
#include "estimator/graph.h"
#include "estimator/layers.h"
#include "estimator/model.h"

namespace memplan {

std::string sequence_not_modelled(const TrainingSetup& s) {
  if (s.device.kind != DeviceKind::cuda) return "not a CUDA device (no caching allocator)";
  if (s.parallel.num_gpus != 1 || s.parallel.tensor_parallel != 1 || s.parallel.pipeline_parallel != 1 ||
      s.parallel.expert_parallel != 1)
    return "several GPUs (communication buffers and sharding are not in the sequence)";
  if (s.parallel.zero_stage != 0 || s.parallel.fsdp != FsdpMode::none || s.parallel.offload != Offload::none)
    return "ZeRO, FSDP or offload";
  if (s.finetune.mode != FinetuneMode::full) return "LoRA/QLoRA fine-tuning";
  switch (s.precision) {
    case Precision::fp32: case Precision::amp_bf16: case Precision::amp_fp16: case Precision::bf16: case Precision::fp16: break;
    default: return "DeepSpeed/Megatron mixed precision";
  }
  switch (s.optimizer) {
    case OptimizerKind::adamw: case OptimizerKind::adam: case OptimizerKind::sgd: case OptimizerKind::sgd_momentum: break;
    default: return "optimizer other than AdamW/Adam/SGD";
  }
  const Runtime& r = s.runtime;
  if (r.framework == Framework::deepspeed || r.framework == Framework::megatron) return "DeepSpeed/Megatron runtime";
  if (r.keep_logits || r.keep_cache || !r.zero_grad_set_to_none || r.zero_grad_after_forward || r.optimizer_in_backward ||
      r.activation_offload || r.compile || r.fp8)
    return "a loop other than the HF Trainer's (kept logits, zero_grad, optimizer in backward, offload, compile, fp8)";
  if (!r.torch_at_least(2, 0)) return "torch 1.x";
  if (s.model.num_layers < 1) return "no layers";
  return "";
}

AllocatorConfig allocator_config(const TrainingSetup& s) {
  AllocatorConfig c;
  c.expandable_segments = s.runtime.expandable_segments;
  return c;
}

namespace {

// Which tensors are alive, process-wide, and the events so far.
class Ledger {
 public:
  explicit Ledger(size_t expected_events) {
    events.reserve(expected_events);
    live_.reserve(expected_events / 4 + 64);
  }
  std::vector<AllocatorEvent> events;
  void alloc(int64_t id, int64_t bytes) {
    if (bytes <= 0 || !live_.emplace(id, bytes).second) return;
    live_bytes_ += bytes;
    peak_ = std::max(peak_, live_bytes_);
    AllocatorEvent e;
    e.kind = AllocatorEvent::alloc;
    e.id = id;
    e.bytes = bytes;
    events.push_back(e);
  }
  void free(int64_t id) {
    auto it = live_.find(id);
    if (it == live_.end()) return;
    live_bytes_ -= it->second;
    live_.erase(it);
    AllocatorEvent e;
    e.kind = AllocatorEvent::free;
    e.id = id;
    events.push_back(e);
  }
  bool live(int64_t id) const { return live_.count(id) > 0; }
  int64_t bytes(int64_t id) const {
    auto it = live_.find(id);
    return it == live_.end() ? 0 : it->second;
  }
  int64_t fresh() { return next_++; }
  // The most bytes alive since the last reset_peak().
  int64_t peak() const { return peak_; }
  void reset_peak() { peak_ = live_bytes_; }

 private:
  std::unordered_map<int64_t, int64_t> live_;  // id -> bytes of the tensors alive
  int64_t live_bytes_ = 0, peak_ = 0;
  int64_t next_ = 1;
};

// One segment instance of one step: its record and how its keys map to process ids.
struct Instance {
  const sim::SimRecord* rec = nullptr;
  int64_t base = 0;       // process ids of this instance are base + key
  int64_t in_id = -1;     // the previous instance's output
  int64_t in_grad_id = -1;
  int64_t id(int64_t key) const {
    if (key == rec->input_key && in_id >= 0) return in_id;
    if (key == rec->input_grad_key && in_grad_id >= 0) return in_grad_id;
    return base + key;
  }
  int64_t out_id() const { return rec->output_key >= 0 ? base + rec->output_key : -1; }
  // The output's gradient; when the segment hands that same buffer down as its input's gradient
  // (the residual stream's gradient accumulated in place), it is the input's gradient too.
  int64_t out_grad_id() const { return rec->output_grad_key >= 0 ? id(rec->output_grad_key) : -1; }
};

// Instance ids live in their own range above the ledger's fresh ids: keys stay below 2^43.
constexpr int64_t kInstanceShift = 44;

struct LayerKey {
  bool moe, ckpt, frozen, input_rg;
  bool operator<(const LayerKey& o) const {
    return std::tie(moe, ckpt, frozen, input_rg) < std::tie(o.moe, o.ckpt, o.frozen, o.input_rg);
  }
};

// The records of one micro-step: the embedding, each layer (one record per layer kind), the head.
struct Records {
  sim::SimRecord emb, head;
  std::map<LayerKey, sim::SimRecord> cache;
  std::vector<const sim::SimRecord*> layer;
};

// The parameter tensors in the order the model registers them (HF modules: embeddings, each
// layer's linears (weight, bias) then its norms, the final norm, an untied head), in bytes of
// one element each; the allocator sees one tensor per entry.
std::vector<int64_t> parameter_elements(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  std::vector<int64_t> out;
  std::vector<ParamTensor> all = parameter_tensors(s);
  // The non-layer tensors from the summary list (embeddings first, head last).
  auto named = [&](const std::string& prefix) {
    std::vector<const ParamTensor*> v;
    for (const ParamTensor& p : all)
      if (p.name.rfind(prefix, 0) == 0) v.push_back(&p);
    return v;
  };
  for (const ParamTensor& p : all) {
    if (p.name.rfind("layers.", 0) == 0) break;
    for (int64_t i = 0; i < p.count; ++i) {
      if (p.name == "embeddings.LayerNorm") {
        out.push_back(p.elements / 2);
        out.push_back(p.elements / 2);
      } else {
        out.push_back(p.elements);
      }
    }
  }
  const int64_t h = m.hidden_size;
  for (int64_t i = 0; i < m.num_layers; ++i) {
    for (const Linear& lin : layer_linears(s, m.is_moe_layer(i))) {
      out.push_back(lin.in * lin.out * lin.count);
      if (lin.bias) out.push_back(lin.out * lin.count);
    }
    int64_t rest = layer_norm_params(m);
    while (rest >= h && h > 0) {
      out.push_back(h);
      rest -= h;
    }
    if (rest > 0) {  // q/k norms of head_dim each
      if (m.head_dim > 0 && rest % m.head_dim == 0) {
        for (int64_t k = 0; k < rest / m.head_dim; ++k) out.push_back(m.head_dim);
      } else {
        out.push_back(rest);
      }
    }
    if (m.attention_sinks) out.push_back(m.num_attention_heads);
  }
  for (const ParamTensor* p : named("norm")) {
    if (p->elements == 2 * h) {
      out.push_back(h);
      out.push_back(h);
    } else {
      out.push_back(p->elements);
    }
  }
  for (const char* prefix : {"lm_head", "cls.", "pooler", "score"})
    for (const ParamTensor* p : named(prefix)) {
      if (p->name == "cls.transform.dense" || p->name == "pooler.dense") {
        out.push_back(h * h);
        out.push_back(h);
      } else if (p->name == "cls.transform.LayerNorm") {
        out.push_back(h);
        out.push_back(h);
      } else {
        out.push_back(p->elements);
      }
    }
  return out;
}

OptimizerImpl optimizer_impl(const TrainingSetup& s) {
  if (s.runtime.optimizer_impl != OptimizerImpl::automatic) return s.runtime.optimizer_impl;
  return OptimizerImpl::foreach;  // torch >= 2.0 on CUDA
}

}  // namespace

AllocationSequence allocation_sequence(const TrainingSetup& s, int steps, size_t max_events) {
  MEMPLAN_CHECK(sequence_not_modelled(s).empty(), "allocation_sequence: setup not modelled");
  MEMPLAN_CHECK(steps >= 1, "allocation_sequence: steps >= 1");
  const ModelSpec& m = s.model;
  const int64_t L = m.num_layers;
  AllocationSequence out;

  // Segment records, as activation_timeline simulates them: micro-step 1 keeps each parameter
  // gradient as it appears; with accumulation, later micro-steps add theirs into the resident
  // .grad (each contribution a temporary). Micro-steps 3..N repeat micro-step 2, so one of them
  // stands for all (the estimator's steady state is that micro-step too).
  const int micro_steps = s.batch.grad_accum > 1 ? 2 : 1;
  std::vector<Records> recs(micro_steps);
  bool any_ckpt = false;
  for (int ms = 0; ms < micro_steps; ++ms) {
    Records& R = recs[ms];
    sim::SimOptions so;
    so.grads_persist = ms == 0;
    so.record = &R.emb;
    embedding_segment(s).simulate(so);
    so.record = &R.head;
    head_segment(s).simulate(so);
    R.layer.resize(L);
    bool input_rg = embeddings_trainable(s);
    for (int64_t i = 0; i < L; ++i) {
      const LayerKey key{m.is_moe_layer(i), s.checkpointing.layer_checkpointed(i), layer_frozen(s, i), input_rg};
      input_rg = input_rg || !key.frozen;
      any_ckpt = any_ckpt || key.ckpt;
      auto it = R.cache.find(key);
      if (it == R.cache.end()) {
        sim::SimOptions lo = so;
        lo.checkpointed = key.ckpt;
        lo.per_op_policy = key.ckpt && s.checkpointing.mode == CheckpointMode::selective_op;
        lo.input_requires_grad = key.input_rg;
        it = R.cache.emplace(key, sim::SimRecord{}).first;
        lo.record = &it->second;
        layer_segment(s, key.moe, i).simulate(lo);
      }
      R.layer[i] = &it->second;
    }
  }
  // The length of what follows: each micro-step replays every record; the build and the
  // optimizer add a few events per parameter tensor.
  size_t per_step = 0;
  for (const Records& R : recs) {
    per_step += R.emb.forward.size() + R.emb.backward.size() + R.head.forward.size() + R.head.backward.size();
    for (const sim::SimRecord* r : R.layer) per_step += r->forward.size() + r->backward.size();
  }
  const std::vector<int64_t> params = parameter_elements(s);
  const size_t expected = static_cast<size_t>(steps) * (per_step + 6 * params.size()) + params.size();
  out.expected_events = expected;
  if (max_events > 0 && expected > max_events) return out;
  Ledger led(expected);

  // The model build: each parameter moved to the GPU in order, then the model's buffers.
  const int64_t wb = weight_bytes_per_param(s.precision);
  for (int64_t e : params) led.alloc(led.fresh(), e * wb);
  const int64_t buffers = model_buffer_bytes(s);
  if (buffers > 0) {
    if (m.causal_mask == MaskKind::bool_buffer && L > 0)
      for (int64_t i = 0; i < L; ++i) led.alloc(led.fresh(), buffers / L);
    else
      led.alloc(led.fresh(), buffers);
  }
  if (m.positions == PositionKind::rotary && m.head_dim > 0) led.alloc(led.fresh(), m.head_dim / 2 * 4);  // inv_freq
  // The batch: input_ids (labels is the same tensor in the loop), made once.
  led.alloc(led.fresh(), batch_input_bytes(s) / 2);

  const SharedTensors shared = shared_tensors(s);
  const bool rotary = m.positions == PositionKind::rotary || m.mla();
  const int64_t workspace = s.device.cublas_workspace_bytes;
  const OptimizerImpl impl = optimizer_impl(s);
  const int64_t sb = state_bytes_per_element(s.precision);
  const int64_t gb = grad_bytes_per_param(s.precision);
  int64_t instance_counter = 1;
  std::vector<int64_t> states;  // optimizer state ids (kept)

  for (int step = 0; step < steps; ++step) {
    if (step == steps - 1) {
      out.last_step_begin = led.events.size();
      led.reset_peak();
    }
    std::vector<int64_t> param_grads;  // .grad of every parameter, made by micro-step 1
    for (int ms = 0; ms < micro_steps; ++ms) {
    const Records& R = recs[ms];
    std::vector<Instance> inst(L + 2);    // 0: embedding, 1..L: layers, L+1: head
    for (int64_t k = 0; k < L + 2; ++k) {
      inst[k].rec = k == 0 ? &R.emb : k == L + 1 ? &R.head : R.layer[k - 1];
      inst[k].base = (instance_counter++) << kInstanceShift;
      if (k > 0) {
        inst[k].in_id = inst[k - 1].out_id();
        inst[k].in_grad_id = inst[k - 1].out_grad_id();
      }
    }
    std::vector<int64_t> autocast_frees;
    auto run_events = [&](const Instance& in, const std::vector<sim::SimEvent>& evs, const std::unordered_set<int64_t>* deferred,
                          std::vector<int64_t>* deferred_out) {
      for (const sim::SimEvent& e : evs) {
        const int64_t id = in.id(e.key);
        if (e.alloc) {
          led.alloc(id, e.bytes);
        } else if (deferred && deferred->count(id)) {
          deferred_out->push_back(id);
        } else {
          led.free(id);
        }
      }
    };
    auto forward = [&](int64_t k, const std::unordered_set<int64_t>* deferred, std::vector<int64_t>* deferred_out) {
      run_events(inst[k], inst[k].rec->forward, deferred, deferred_out);
      for (int64_t key : inst[k].rec->autocast_frees) autocast_frees.push_back(inst[k].id(key));
    };
    auto backward = [&](int64_t k) {
      run_events(inst[k], inst[k].rec->backward, nullptr, nullptr);
      for (int64_t key : inst[k].rec->param_grads) param_grads.push_back(inst[k].id(key));
    };

    // Forward.
    forward(0, nullptr, nullptr);
    // Model-level tensors: RoPE cos/sin, the causal mask, inputs_embeds held by the model's forward.
    std::vector<int64_t> whole_ids, fwd_ids;
    if (shared.whole_step_bytes > 0) {
      if (rotary && shared.whole_step_bytes % 2 == 0) {
        whole_ids = {led.fresh(), led.fresh()};
        for (int64_t id : whole_ids) led.alloc(id, shared.whole_step_bytes / 2);
      } else {
        whole_ids = {led.fresh()};
        led.alloc(whole_ids[0], shared.whole_step_bytes);
      }
    }
    if (shared.forward_bytes > 0) {
      fwd_ids = {led.fresh()};
      led.alloc(fwd_ids[0], shared.forward_bytes);
    }
    std::unordered_set<int64_t> pinned;  // frees deferred to the end of the layers' forward
    std::vector<int64_t> pinned_frees;
    int64_t embeds_id = -1;
    if (shared.embeds_is_layer_input) {
      if (inst[0].out_id() >= 0) pinned.insert(inst[0].out_id());
    } else if (shared.embeds_bytes > 0) {
      embeds_id = led.fresh();
      led.alloc(embeds_id, shared.embeds_bytes);
    }
    if (step == 0 && ms == 0 && workspace > 0) led.alloc(led.fresh(), workspace);  // the forward thread's cuBLAS handle
    for (int64_t k = 1; k <= L; ++k) forward(k, &pinned, &pinned_frees);
    for (int64_t id : pinned_frees) led.free(id);
    if (embeds_id >= 0) led.free(embeds_id);
    if (!any_ckpt)
      for (int64_t id : fwd_ids) led.free(id);
    forward(L + 1, nullptr, nullptr);
    for (int64_t id : autocast_frees) led.free(id);  // autocast exits with the model's forward

    // Backward.
    if (step == 0 && ms == 0 && workspace > 0) led.alloc(led.fresh(), workspace);  // the autograd thread's cuBLAS handle
    backward(L + 1);
    for (int64_t k = L; k >= 1; --k) {
      backward(k);
      if (k == 1) {
        for (int64_t id : whole_ids) led.free(id);
        for (int64_t id : fwd_ids) led.free(id);
      }
    }
    backward(0);
    // What the walk left alive (the loss, an input gradient nobody consumes) dies with the step.
    std::unordered_set<int64_t> grads(param_grads.begin(), param_grads.end());
    for (int64_t k = 0; k < L + 2; ++k) {
      const sim::SimRecord& r = *inst[k].rec;
      for (const auto* evs : {&r.forward, &r.backward})
        for (const sim::SimEvent& e : *evs) {
          const int64_t id = inst[k].id(e.key);
          if (e.alloc && led.live(id) && !grads.count(id)) {
            out.swept_bytes += step == steps - 1 ? led.bytes(id) : 0;
            if (std::getenv("MEMPLAN_TRACE_SEQ") && step == steps - 1)
              std::fprintf(stderr, "swept: instance %lld key %llx bytes %lld\n", static_cast<long long>(k),
                           static_cast<unsigned long long>(e.key), static_cast<long long>(led.bytes(id)));
            led.free(id);
          }
        }
    }
    }  // micro-steps

    // optimizer.step(). Gradients exist for every trainable parameter; their sizes are the
    // parameters' in the gradient dtype. States are created in _init_group before the update.
    std::vector<int64_t> trainable = params;  // full fine-tuning: every parameter trains
    switch (s.optimizer) {
      case OptimizerKind::adamw: case OptimizerKind::adam: {
        if (step == 0)
          for (int64_t e : trainable) {
            if (impl == OptimizerImpl::fused) {  // state['step'] on the device
              states.push_back(led.fresh());
              led.alloc(states.back(), 4);
            }
            for (int k = 0; k < 2; ++k) {
              states.push_back(led.fresh());
              led.alloc(states.back(), e * sb);
            }
          }
        if (impl == OptimizerImpl::foreach) {
          // _multi_tensor_adamw: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), one per parameter.
          std::vector<int64_t> tmp;
          for (int64_t e : trainable) {
            tmp.push_back(led.fresh());
            led.alloc(tmp.back(), e * sb);
          }
          for (int64_t id : tmp) led.free(id);
        } else if (impl == OptimizerImpl::for_loop) {
          // _single_tensor_adamw: (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps).
          for (int64_t e : trainable) {
            const int64_t a = led.fresh(), b = led.fresh();
            led.alloc(a, e * sb);
            led.alloc(b, e * sb);
            led.free(a);
            led.free(b);
          }
        }
        break;
      }
      case OptimizerKind::sgd_momentum:
        if (step == 0)
          for (int64_t e : trainable) {  // momentum_buffer = torch.clone(grad).detach()
            states.push_back(led.fresh());
            led.alloc(states.back(), e * gb);
          }
        break;
      default:
        break;
    }
    // zero_grad(set_to_none=True).
    for (int64_t id : param_grads) led.free(id);
  }
  out.peak_bytes = led.peak();
  out.events = std::move(led.events);
  return out;
}

ReservedPrediction predict_reserved(const TrainingSetup& s, bool boundary, size_t max_events, int64_t capacity, int steps) {
  ReservedPrediction p;
  p.why_not = sequence_not_modelled(s);
  if (!p.why_not.empty()) return p;
  const AllocationSequence seq = allocation_sequence(s, steps, max_events);
  if (seq.events.empty()) {
    p.why_not = fmt::format("about {} allocations to replay, more than the budget of {}", seq.expected_events, max_events);
    return p;
  }
  p.modelled = true;
  const AllocatorConfig cfg = allocator_config(s);
  const ReplayResult r = replay(seq.events, cfg, static_cast<int64_t>(seq.last_step_begin));
  p.peak_reserved = r.peak_reserved;
  p.peak_allocated = r.peak_allocated;
  p.peak_requested = seq.peak_bytes;
  if (boundary) p.oom_boundary = find_oom_boundary(seq.events, cfg);
  if (capacity > 0 && p.peak_reserved > capacity) {
    AllocatorConfig capped = cfg;
    capped.capacity = capacity;
    capped.capacity_is_fraction = false;  // the card's free memory: cudaMalloc fails beyond it
    p.runs_in_capacity = replay(seq.events, capped).ran ? 1 : 0;
  }
  return p;
}

}  // namespace memplan
