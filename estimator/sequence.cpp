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
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
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
  // The allocator model is pinned against torch 2.x's caching allocator (the H200 traces, 2.11);
  // 1.x's differs (no expandable segments or garbage collection threshold, its own oversize and
  // release paths), and the published torch 1.10 runs are 10-15% over the 2.x model's reserved.
  if (!s.runtime.torch_at_least(2, 0)) return "torch 1.x (the allocator model is torch 2.x's caching allocator)";
  return step_sequence_not_modelled(s);
}

std::string step_sequence_not_modelled(const TrainingSetup& s) {
  if (s.parallel.num_gpus != 1 || s.parallel.tensor_parallel != 1 || s.parallel.pipeline_parallel != 1 ||
      s.parallel.expert_parallel != 1)
    return "several GPUs (communication buffers and sharding are not in the sequence)";
  if (s.parallel.zero_stage != 0 || s.parallel.fsdp != FsdpMode::none || s.parallel.offload != Offload::none)
    return "ZeRO, FSDP or offload";
  if (s.parallel.ddp) return "DDP on one GPU (its buckets are not in the sequence)";
  // LoRA as PEFT builds it (adapters on the base layers' linears; modules_to_save's trained copies
  // of untied embeddings and head beside the frozen originals); QLoRA's quantized base, a
  // classification head and adapters on MoE layers are not in the sequence.
  if (s.finetune.mode == FinetuneMode::qlora || base_quantized(s)) return "QLoRA or a quantized base (bitsandbytes, a pre-quantized checkpoint)";
  if (s.finetune.mode == FinetuneMode::lora) {
    if ((s.finetune.train_embeddings || s.finetune.train_head) && s.model.tie_word_embeddings)
      return "LoRA with modules_to_save on tied embeddings";
    if (s.model.head == HeadKind::sequence_classification) return "LoRA on a classification head";
    if (s.model.num_experts > 0) return "LoRA on a mixture-of-experts model";
  }
  switch (s.precision) {
    case Precision::fp32: case Precision::amp_bf16: case Precision::amp_fp16: case Precision::bf16: case Precision::fp16: break;
    default: return "DeepSpeed/Megatron mixed precision";
  }
  switch (s.optimizer) {
    case OptimizerKind::adamw: case OptimizerKind::adam: case OptimizerKind::sgd: case OptimizerKind::sgd_momentum: break;
    case OptimizerKind::adafactor: case OptimizerKind::adafactor_momentum:
      // The sequence holds one tensor for a layer's `count` expert linears (their stacked
      // parameter where transformers groups them); Adafactor's per-tensor temporaries would be
      // those of the stack.
      if (s.model.num_experts > 0) return "Adafactor on a mixture-of-experts model";
      if (s.runtime.optimizer_impl == OptimizerImpl::foreach || s.runtime.optimizer_impl == OptimizerImpl::fused)
        return "Adafactor with a foreach or fused step (transformers' Adafactor loops over the parameters)";
      break;
    default: return "optimizer other than AdamW/Adam/SGD/Adafactor (8-bit, paged, Lion)";
  }
  const Runtime& r = s.runtime;
  if (r.framework == Framework::deepspeed || r.framework == Framework::megatron) return "DeepSpeed/Megatron runtime";
  // Loops other than the HF Trainer's that are in the sequence: kept logits (freed after the next
  // forward), zero_grad(set_to_none=False) (gradients made once, added into after), gradients
  // zeroed after the next forward (Lightning).
  if (r.keep_cache) return "a loop that keeps the KV cache (use_cache outputs)";
  if (r.optimizer_in_backward || r.activation_offload || r.compile || r.fp8)
    return "a loop other than the HF Trainer's (optimizer in backward, activation offload, compile, fp8)";
  // Its no-grad forward frees each layer's outputs as it goes: events the records do not hold.
  if (r.reference_model) return "a DPO reference model";
  if (s.model.num_layers < 1) return "no layers";
  return "";
}

AllocatorConfig allocator_config(const TrainingSetup& s) {
  AllocatorConfig c;
  c.expandable_segments = s.runtime.expandable_segments;
  return c;
}

namespace {

// A segment record with its keys numbered 0, 1, ... (compile()): the unroll names each tensor of
// an instance by the instance's first id plus that number, so which tensors are alive is a vector
// lookup rather than a hash of the record's sparse keys.
struct CompiledEvent {
  int32_t local = 0;
  bool alloc = true;
  bool kept = false;  // a free of a tensor the loop keeps (SimRecord::kept): it waits
  int64_t bytes = 0;
};
struct CompiledRecord {
  std::vector<CompiledEvent> forward, backward;
  std::vector<int32_t> autocast_frees, param_grads;
  int32_t input = -1, output = -1, output_grad = -1, input_grad = -1;  // the record's keys (-1: none)
  int32_t locals = 0;                                                  // keys numbered
  int64_t forward_gemm = -1, backward_gemm = -1;
};

CompiledRecord compile(const sim::SimRecord& r) {
  CompiledRecord c;
  std::unordered_map<int64_t, int32_t> local;
  auto num = [&](int64_t key) { return local.emplace(key, static_cast<int32_t>(local.size())).first->second; };
  if (r.input_key >= 0) c.input = num(r.input_key);
  if (r.output_key >= 0) c.output = num(r.output_key);
  if (r.output_grad_key >= 0) c.output_grad = num(r.output_grad_key);
  if (r.input_grad_key >= 0) c.input_grad = num(r.input_grad_key);
  for (const auto& [evs, out] : {std::pair{&r.forward, &c.forward}, std::pair{&r.backward, &c.backward}}) {
    out->reserve(evs->size());
    for (const sim::SimEvent& e : *evs)
      out->push_back({num(e.key), e.alloc, !e.alloc && std::find(r.kept.begin(), r.kept.end(), e.key) != r.kept.end(), e.bytes});
  }
  for (int64_t k : r.autocast_frees) c.autocast_frees.push_back(num(k));
  for (int64_t k : r.param_grads) c.param_grads.push_back(num(k));
  c.locals = static_cast<int32_t>(local.size());
  c.forward_gemm = r.forward_gemm;
  c.backward_gemm = r.backward_gemm;
  return c;
}

// Which tensors are alive, process-wide, and the events so far. Tensors are named by dense ids
// (1, 2, ...: an instance's range, or one fresh()); the events name each tensor by a slot (0, 1,
// ...; a freed tensor's slot goes to the next new one), so that the replay can keep its live
// blocks in a vector.
class Ledger {
 public:
  explicit Ledger(size_t expected_events) {
    events.reserve(expected_events);
    slot_.reserve(expected_events / 2 + 64);
    bytes_.reserve(expected_events / 2 + 64);
  }
  std::vector<AllocatorEvent> events;
  // `n` new ids in a row: the first.
  int64_t reserve(int64_t n) {
    const int64_t first = static_cast<int64_t>(slot_.size());
    slot_.resize(slot_.size() + static_cast<size_t>(n), -1);
    bytes_.resize(slot_.size(), 0);
    return first;
  }
  int64_t fresh() { return reserve(1); }
  int64_t ids() const { return static_cast<int64_t>(slot_.size()); }
  void alloc(int64_t id, int64_t bytes) {
    MEMPLAN_CHECK(id > 0 && id < static_cast<int64_t>(slot_.size()), "allocation sequence: a tensor id out of range");
    int32_t& slot = slot_[static_cast<size_t>(id)];
    if (bytes <= 0 || slot >= 0) return;
    if (free_slots_.empty()) {
      slot = next_slot_++;
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
    }
    bytes_[static_cast<size_t>(id)] = bytes;
    live_bytes_ += bytes;
    peak_ = std::max(peak_, live_bytes_);
    process_peak_ = std::max(process_peak_, live_bytes_);
    push(AllocatorEvent::alloc, slot, bytes);
  }
  void free(int64_t id) {
    int32_t& slot = slot_[static_cast<size_t>(id)];
    if (slot < 0) return;
    live_bytes_ -= bytes_[static_cast<size_t>(id)];
    push(AllocatorEvent::free, slot, 0);
    free_slots_.push_back(slot);
    slot = -1;
  }
  bool live(int64_t id) const { return slot_[static_cast<size_t>(id)] >= 0; }
  int64_t bytes(int64_t id) const { return live(id) ? bytes_[static_cast<size_t>(id)] : 0; }
  // The most bytes alive since the last reset_peak(), and over the whole process.
  int64_t peak() const { return peak_; }
  int64_t process_peak() const { return process_peak_; }
  void reset_peak() { peak_ = live_bytes_; }

 private:
  // Fills the new event field by field: an event made on the stack and copied in stalled the
  // copy's wide loads on the narrow stores (store forwarding), the unroll's hottest spot.
  void push(AllocatorEvent::Kind kind, int64_t slot, int64_t bytes) {
    AllocatorEvent& e = events.emplace_back();
    e.kind = kind;
    e.id = slot;
    e.bytes = bytes;
  }
  std::vector<int32_t> slot_{-1};  // id -> the events' id (slot) of the tensor, -1 when not alive; id 0 unused
  std::vector<int64_t> bytes_{0};  // id -> bytes while alive
  std::vector<int32_t> free_slots_;
  int32_t next_slot_ = 0;
  int64_t live_bytes_ = 0, peak_ = 0, process_peak_ = 0;
};

// One segment instance of one step: its record and its ids.
struct Instance {
  const CompiledRecord* rec = nullptr;
  int64_t base = 0;       // the instance's ids are base + local
  int64_t in_id = -1;     // the previous instance's output
  int64_t in_grad_id = -1;
  int64_t id(int32_t local) const {
    if (local == rec->input && in_id >= 0) return in_id;
    if (local == rec->input_grad && in_grad_id >= 0) return in_grad_id;
    return base + local;
  }
  int64_t out_id() const { return rec->output >= 0 ? base + rec->output : -1; }
  // The output's gradient; when the segment hands that same buffer down as its input's gradient
  // (the residual stream's gradient accumulated in place), it is the input's gradient too.
  int64_t out_grad_id() const { return rec->output_grad >= 0 ? id(rec->output_grad) : -1; }
};

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

// Adafactor's factored second moment of one parameter tensor: exp_avg_sq_row's and
// exp_avg_sq_col's elements (prod(shape[:-1]) and prod(shape[:-2]) x shape[-1]); both 0 for a
// vector, whose second moment is whole.
struct Factors {
  int64_t rows = 0, cols = 0;
};

// The parameter tensors in the order the model registers them (HF modules: embeddings, each
// layer's linears (weight, bias) then its norms, the final norm, an untied head), in bytes of
// one element each; the allocator sees one tensor per entry. `factors` (when given) gets each
// entry's Factors, from the shapes parameter_tensors() gives.
std::vector<int64_t> parameter_elements(const TrainingSetup& s, std::vector<Factors>* factors = nullptr) {
  const ModelSpec& m = s.model;
  std::vector<int64_t> out;
  std::vector<Factors> f;
  auto push = [&](int64_t elements, int64_t rows = 0, int64_t cols = 0) {
    out.push_back(elements);
    f.push_back(rows > 0 && cols > 0 ? Factors{rows, cols} : Factors{});
  };
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
        push(p.elements / 2);
        push(p.elements / 2);
      } else {
        push(p.elements, p.rows, p.cols);
      }
    }
  }
  const int64_t h = m.hidden_size;
  for (int64_t i = 0; i < m.num_layers; ++i) {
    for (const Linear& lin : layer_linears(s, m.is_moe_layer(i))) {
      // (out, in), or the experts' stacked (count, out, in): rows count x out, cols count x in.
      push(lin.in * lin.out * lin.count, lin.out * lin.count, lin.in * lin.count);
      if (lin.bias) push(lin.out * lin.count);
    }
    int64_t rest = layer_norm_params(m);
    while (rest >= h && h > 0) {
      push(h);
      rest -= h;
    }
    if (rest > 0) {  // q/k norms of head_dim each
      if (m.head_dim > 0 && rest % m.head_dim == 0) {
        for (int64_t k = 0; k < rest / m.head_dim; ++k) push(m.head_dim);
      } else {
        push(rest);
      }
    }
    if (m.attention_sinks) push(m.num_attention_heads);
  }
  for (const ParamTensor* p : named("norm")) {
    if (p->elements == 2 * h) {
      push(h);
      push(h);
    } else {
      push(p->elements);
    }
  }
  for (const char* prefix : {"lm_head", "cls.", "pooler", "score"})
    for (const ParamTensor* p : named(prefix)) {
      if (p->name == "cls.transform.LayerNorm") {
        push(h);
        push(h);
      } else {
        push(p->elements, p->rows, p->cols);
      }
    }
  if (factors) *factors = std::move(f);
  return out;
}

// LoRA's adapters in the order PEFT's inject_adapter makes them (named_modules: each layer's
// targeted linears in registration order, lora_A (r, in) then lora_B (out, r)), their elements
// and Factors.
std::vector<int64_t> adapter_elements(const TrainingSetup& s, std::vector<Factors>* factors = nullptr) {
  std::vector<int64_t> out;
  std::vector<Factors> f;
  const int64_t r = s.finetune.lora_rank;
  for (int64_t i = 0; i < s.model.num_layers; ++i)
    for (const Linear& lin : layer_linears(s, s.model.is_moe_layer(i)))
      if (lora_on(s, lin.role)) {
        out.push_back(r * lin.in * lin.count);
        out.push_back(lin.out * r * lin.count);
        f.push_back({r * lin.count, lin.in * lin.count});
        f.push_back({lin.out * lin.count, r * lin.count});
      }
  if (factors) *factors = std::move(f);
  return out;
}

// What the optimizer steps, in model.parameters() order, each tensor's elements, the bytes per
// element of its states, gradient and parameter (its own dtype), and Adafactor's factors: every
// parameter under full fine-tuning; under LoRA the adapters and modules_to_save's trained copies
// (the embeddings' first, the head's last: PEFT's copies keep the model's dtype, the adapters
// take adapter_bytes).
struct Stepped {
  int64_t elements = 0, state_bytes = 0, grad_bytes = 0, param_bytes = 0;
  Factors factors;
};
std::vector<Stepped> stepped_tensors(const TrainingSetup& s) {
  const int64_t wb = weight_bytes_per_param(s.precision);
  std::vector<Stepped> out;
  std::vector<Factors> f;
  if (s.finetune.mode != FinetuneMode::lora) {
    const std::vector<int64_t> params = parameter_elements(s, &f);
    for (size_t k = 0; k < params.size(); ++k)
      out.push_back({params[k], state_bytes_per_element(s.precision), grad_bytes_per_param(s.precision), wb, f[k]});
    return out;
  }
  // modules_to_save: the trained copies of the embeddings and the head (parameter_tensors' names;
  // the originals, frozen, are built with the model).
  const std::vector<ParamTensor> all = parameter_tensors(s);
  auto copy_of = [&](const char* name) -> int64_t {
    for (const ParamTensor& p : all)
      if (p.name == name && p.trainable) return p.elements;
    return 0;
  };
  const Factors vh{s.model.vocab_size, s.model.hidden_size};
  if (const int64_t e = s.finetune.train_embeddings ? copy_of("embed_tokens.weight") : 0) out.push_back({e, wb, wb, wb, vh});
  const int64_t ab = adapter_bytes(s);
  const std::vector<int64_t> adapters = adapter_elements(s, &f);
  for (size_t k = 0; k < adapters.size(); ++k) out.push_back({adapters[k], ab, ab, ab, f[k]});
  if (const int64_t e = s.finetune.train_head ? copy_of("lm_head.weight") : 0) out.push_back({e, wb, wb, wb, vh});
  return out;
}

// torch.optim's default: foreach on CUDA from 2.0 (_default_to_fused_or_foreach, torch/optim/
// optimizer.py @ v2.0.0: CUDA tensors only), the for-loop on CPU and in 1.x (adam.py @ v1.13.1:
// `if foreach is None: foreach = False`).
OptimizerImpl optimizer_impl(const TrainingSetup& s) {
  if (s.runtime.optimizer_impl != OptimizerImpl::automatic) return s.runtime.optimizer_impl;
  return s.runtime.torch_at_least(2, 0) && s.device.kind == DeviceKind::cuda ? OptimizerImpl::foreach : OptimizerImpl::for_loop;
}

// Everything the unroll reads: the segment records of each micro-step and the few numbers of the
// model build, the model-level tensors and the optimizer step. unroll() is given this and not the
// setup, so what it makes depends on nothing else (predict_reserved's memo is keyed by it).
struct SequencePlan {
  SequencePlan() = default;
  SequencePlan(SequencePlan&&) = default;  // a move keeps recs' elements where they are
  SequencePlan(const SequencePlan&) = delete;  // recs[].layer points into recs[].cache
  int steps = 1;
  int64_t L = 0;                  // layers
  // The records: [0] the first micro-step's (gradients made), [1] where there is one, a later
  // micro-step's (gradients added into: accumulation's micro-steps 2..N, and every micro-step
  // after the first step when zero_grad keeps the gradients).
  std::vector<Records> recs;
  int micro_steps = 1;            // unrolled per step: 1, or 2 with accumulation (the second stands for 2..N)
  bool grads_kept = false;        // zero_grad(set_to_none=False): the gradients stay, zeroed in place
  bool zero_grad_after_forward = false;  // Lightning: the last step's gradients freed after the next forward
  bool any_ckpt = false;          // some layer is checkpointed
  std::vector<int64_t> params;    // elements of each parameter tensor, in registration order
  int64_t weight_bytes = 0, state_bytes = 0, grad_bytes = 0;  // per element
  int64_t buffers = 0;            // model buffers (bytes)
  bool buffer_per_layer = false;  // one bool causal-mask buffer per layer
  bool inv_freq = false;          // RoPE's inv_freq buffer, of inv_freq_bytes
  int64_t inv_freq_bytes = 0;
  int64_t input_bytes = 0;        // input_ids
  // LoRA: each adapter's elements in the order PEFT's inject_adapter makes them (named_modules:
  // each layer's targeted linears in registration order, lora_A then lora_B), made in the base
  // layer's dtype (made_bytes) and, when PEFT's autocast_adapter_dtype upcasts 16-bit adapters,
  // cast to fp32 one by one afterwards (trained_bytes); the optimizer steps only these.
  std::vector<int64_t> adapters;
  int64_t adapter_made_bytes = 0, adapter_trained_bytes = 0;
  std::vector<Stepped> stepped;  // what the optimizer steps (stepped_tensors)
  SharedTensors shared;
  bool rotary = false;
  int64_t workspace = 0;          // cuBLAS workspace per handle
  OptimizerImpl impl = OptimizerImpl::foreach;
  OptimizerKind optimizer = OptimizerKind::adamw;
  size_t expected_events = 0;
  // Each record of recs (emb, head, the layer kinds) with its keys numbered (not fingerprinted: it
  // follows from the records).
  std::unordered_map<const sim::SimRecord*, CompiledRecord> compiled;
};

SequencePlan plan_sequence(const TrainingSetup& s, int steps) {
  MEMPLAN_CHECK(step_sequence_not_modelled(s).empty(), "allocation_sequence: setup not modelled");
  MEMPLAN_CHECK(steps >= 1, "allocation_sequence: steps >= 1");
  const ModelSpec& m = s.model;
  const int64_t L = m.num_layers;
  SequencePlan plan;
  plan.steps = steps;
  plan.L = L;

  // Segment records, as activation_timeline simulates them: micro-step 1 keeps each parameter
  // gradient as it appears; with accumulation, later micro-steps add theirs into the resident
  // .grad (each contribution a temporary). Micro-steps 3..N repeat micro-step 2, so one of them
  // stands for all (the estimator's steady state is that micro-step too).
  const int micro_steps = s.batch.grad_accum > 1 ? 2 : 1;
  plan.micro_steps = micro_steps;
  plan.grads_kept = !s.runtime.zero_grad_set_to_none;
  plan.zero_grad_after_forward = s.runtime.zero_grad_after_forward;
  std::vector<Records>& recs = plan.recs;
  recs.resize(micro_steps > 1 || plan.grads_kept ? 2 : 1);
  bool& any_ckpt = plan.any_ckpt;
  for (int ms = 0; ms < static_cast<int>(recs.size()); ++ms) {
    Records& R = recs[ms];
    sim::SimOptions so;
    so.grads_persist = ms == 0;
    so.record = &R.emb;
    embedding_segment(s).simulate(so);
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
    // The head's input needs a gradient only once something below it trains (as a layer's).
    sim::SimOptions ho = so;
    ho.input_requires_grad = input_rg;
    ho.record = &R.head;
    head_segment(s).simulate(ho);
  }
  // The length of what follows: each micro-step replays every record; the build and the
  // optimizer add a few events per parameter tensor.
  size_t per_step = 0;
  for (int ms = 0; ms < micro_steps; ++ms) {
    const Records& R = recs[plan.grads_kept ? recs.size() - 1 : static_cast<size_t>(ms)];  // the longer record, kept gradients
    per_step += R.emb.forward.size() + R.emb.backward.size() + R.head.forward.size() + R.head.backward.size();
    for (const sim::SimRecord* r : R.layer) per_step += r->forward.size() + r->backward.size();
  }
  plan.stepped = stepped_tensors(s);
  plan.weight_bytes = weight_bytes_per_param(s.precision);
  if (s.finetune.mode == FinetuneMode::lora) {
    plan.params = parameter_elements(s);
    plan.adapters = adapter_elements(s);
    // peft tuners/tuners_utils.py _move_adapter_to_device_of_base_layer: a floating adapter
    // takes the base weight's device and dtype; then _cast_adapter_dtype (autocast_adapter_dtype
    // True) upcasts fp16/bf16 adapters to fp32 (PEFT 0.21; what the H200's LoRA traces show:
    // tests/data/gpu/h200-knobs/).
    plan.adapter_made_bytes = plan.weight_bytes;
    plan.adapter_trained_bytes = adapter_bytes(s);
  } else {
    for (const Stepped& t : plan.stepped) plan.params.push_back(t.elements);  // every parameter
  }
  const size_t trained = plan.stepped.size();
  const bool adafactor = s.optimizer == OptimizerKind::adafactor || s.optimizer == OptimizerKind::adafactor_momentum;
  plan.expected_events =
      static_cast<size_t>(steps) * (per_step + (adafactor ? 20 : 6) * trained) + plan.params.size() + 3 * plan.adapters.size();
  plan.buffers = model_buffer_bytes(s);
  plan.buffer_per_layer = m.causal_mask == MaskKind::bool_buffer && L > 0;
  plan.inv_freq = m.positions == PositionKind::rotary && m.head_dim > 0;
  plan.inv_freq_bytes = plan.inv_freq ? m.head_dim / 2 * 4 : 0;
  plan.input_bytes = batch_input_bytes(s) / 2;
  plan.shared = shared_tensors(s);
  plan.rotary = m.positions == PositionKind::rotary || m.mla();
  plan.workspace = s.device.kind == DeviceKind::cuda ? s.device.cublas_workspace_bytes : 0;  // cuBLAS's
  plan.impl = optimizer_impl(s);
  plan.optimizer = s.optimizer;
  plan.state_bytes = state_bytes_per_element(s.precision);
  plan.grad_bytes = grad_bytes_per_param(s.precision);

  for (const Records& R : plan.recs) {
    for (const sim::SimRecord* r : {&R.emb, &R.head}) plan.compiled.emplace(r, compile(*r));
    for (const auto& kv : R.cache) plan.compiled.emplace(&kv.second, compile(kv.second));
  }
  return plan;
}

// The events of a plan (see allocation_sequence).
AllocationSequence unroll(const SequencePlan& plan, size_t max_events) {
  AllocationSequence out;
  const size_t expected = plan.expected_events;
  out.expected_events = expected;
  if (max_events > 0 && expected > max_events) return out;
  const int steps = plan.steps;
  const int64_t L = plan.L;
  const int micro_steps = plan.micro_steps;
  const std::vector<Records>& recs = plan.recs;
  const bool any_ckpt = plan.any_ckpt;
  const std::vector<int64_t>& params = plan.params;
  Ledger led(expected);

  // The model build: each parameter moved to the GPU in order, then the model's buffers.
  const int64_t wb = plan.weight_bytes;
  for (int64_t e : params) led.alloc(led.fresh(), e * wb);
  const int64_t buffers = plan.buffers;
  if (buffers > 0) {
    if (plan.buffer_per_layer)
      for (int64_t i = 0; i < L; ++i) led.alloc(led.fresh(), buffers / L);
    else
      led.alloc(led.fresh(), buffers);
  }
  if (plan.inv_freq) led.alloc(led.fresh(), plan.inv_freq_bytes);  // inv_freq
  // get_peft_model on the model in place: the adapters, then their upcast.
  std::vector<int64_t> adapter_ids;
  for (int64_t e : plan.adapters) {
    adapter_ids.push_back(led.fresh());
    led.alloc(adapter_ids.back(), e * plan.adapter_made_bytes);
  }
  if (plan.adapter_trained_bytes != plan.adapter_made_bytes)
    for (size_t k = 0; k < plan.adapters.size(); ++k) {  // param.data = param.data.to(torch.float32)
      const int64_t id = led.fresh();
      led.alloc(id, plan.adapters[k] * plan.adapter_trained_bytes);
      led.free(adapter_ids[k]);
      adapter_ids[k] = id;
    }
  // The batch: input_ids (labels is the same tensor in the loop), made once.
  led.alloc(led.fresh(), plan.input_bytes);

  const SharedTensors& shared = plan.shared;
  const bool rotary = plan.rotary;
  const int64_t workspace = plan.workspace;
  const OptimizerImpl impl = plan.impl;
  // What the optimizer steps, each tensor in its dtype (plan.stepped).
  const std::vector<Stepped>& stepped = plan.stepped;
  std::vector<int64_t> states;  // optimizer state ids (kept)
  std::vector<char> stays;      // by id: a .grad of this step or a tensor the loop keeps (the sweep leaves those)
  std::vector<int64_t> held;    // the tensors the loop keeps from the last forward (its logits): freed after the next
  std::vector<int64_t> to_zero; // zero_grad_after_forward: the last step's gradients, freed after the next forward

  for (int step = 0; step < steps; ++step) {
    out.step_begins.push_back(led.events.size());
    if (step == steps - 1) {
      out.last_step_begin = led.events.size();
      led.reset_peak();
    }
    std::vector<int64_t> param_grads;  // .grad of every parameter, made by micro-step 1
    for (int ms = 0; ms < micro_steps; ++ms) {
    // Kept gradients: after the first step every micro-step adds into them.
    const Records& R = recs[plan.grads_kept && step > 0 ? recs.size() - 1 : static_cast<size_t>(ms)];
    std::vector<int64_t> held_now;  // this forward's kept tensors
    std::vector<Instance> inst(L + 2);    // 0: embedding, 1..L: layers, L+1: head
    for (int64_t k = 0; k < L + 2; ++k) {
      inst[k].rec = &plan.compiled.at(k == 0 ? &R.emb : k == L + 1 ? &R.head : R.layer[k - 1]);
      inst[k].base = led.reserve(inst[k].rec->locals);
      if (k > 0) {
        inst[k].in_id = inst[k - 1].out_id();
        inst[k].in_grad_id = inst[k - 1].out_grad_id();
      }
    }
    std::vector<int64_t> autocast_frees;
    // The cuBLAS workspace of each thread's handle is made by the first GEMM that thread runs, its
    // output already allocated: getCurrentCUDABlasHandle sets the handle's workspace from the
    // caching allocator, one per handle and stream, kept for the process (docs/libtorch-notes.md,
    // [2.6 aten/src/ATen/cuda/CublasHandlePool.cpp:86-114, 204-217]). The forward thread's first
    // GEMM is the rotary embedding's inv_freq @ position_ids where the model computes cos/sin
    // (HF's *RotaryEmbedding.forward), else the first layer's first projection; the autograd
    // thread's is in the head's backward (lm_head's input gradient, after the loss's): the
    // H200's recordings show both (tests/data/gpu/h200-knobs/README.md).
    bool fwd_workspace = step == 0 && ms == 0 && workspace > 0, bwd_workspace = fwd_workspace;
    auto make_workspace = [&](bool* pending) {  // once per thread: the first call that finds it pending
      if (!*pending) return;
      led.alloc(led.fresh(), workspace);
      *pending = false;
    };
    // `deferred` (>= 0): a tensor whose free waits in deferred_out.
    auto run_events = [&](const Instance& in, const std::vector<CompiledEvent>& evs, int64_t deferred, std::vector<int64_t>* deferred_out,
                          int64_t gemm_at, bool* pending) {
      for (size_t i = 0; i < evs.size(); ++i) {
        if (static_cast<int64_t>(i) == gemm_at) make_workspace(pending);
        const CompiledEvent& e = evs[i];
        const int64_t id = in.id(e.local);
        if (e.alloc) {
          led.alloc(id, e.bytes);
        } else if (e.kept) {
          if (led.live(id)) held_now.push_back(id);
        } else if (deferred_out && id == deferred) {
          deferred_out->push_back(id);
        } else {
          led.free(id);
        }
      }
      if (gemm_at == static_cast<int64_t>(evs.size())) make_workspace(pending);
    };
    auto forward = [&](int64_t k, int64_t deferred, std::vector<int64_t>* deferred_out) {
      run_events(inst[k], inst[k].rec->forward, deferred, deferred_out, inst[k].rec->forward_gemm, &fwd_workspace);
      for (int32_t local : inst[k].rec->autocast_frees) autocast_frees.push_back(inst[k].id(local));
    };
    auto backward = [&](int64_t k) {
      run_events(inst[k], inst[k].rec->backward, -1, nullptr, inst[k].rec->backward_gemm, &bwd_workspace);
      for (int32_t local : inst[k].rec->param_grads) param_grads.push_back(inst[k].id(local));
    };

    // Forward.
    forward(0, -1, nullptr);
    // Model-level tensors: RoPE cos/sin, the causal mask, inputs_embeds held by the model's forward.
    std::vector<int64_t> whole_ids, fwd_ids;
    // HF's model forward makes the causal mask (create_causal_mask) before the rotary embedding's
    // cos and sin (LlamaModel.forward, modeling_llama.py @ v4.57.1; its successors alike).
    if (shared.forward_bytes > 0) {
      fwd_ids.push_back(led.fresh());
      led.alloc(fwd_ids[0], shared.forward_bytes);
    }
    if (rotary) make_workspace(&fwd_workspace);  // inv_freq @ position_ids, before cos and sin
    if (shared.whole_step_bytes > 0) {
      if (rotary && shared.whole_step_bytes % 2 == 0) {
        whole_ids.push_back(led.fresh());  // push_back, not = {...}: GCC 12 warns (-Wnonnull) on that here
        whole_ids.push_back(led.fresh());
        for (int64_t id : whole_ids) led.alloc(id, shared.whole_step_bytes / 2);
      } else {
        whole_ids.push_back(led.fresh());
        led.alloc(whole_ids[0], shared.whole_step_bytes);
      }
    }
    int64_t pinned = -1;  // a free deferred to the end of the layers' forward
    std::vector<int64_t> pinned_frees;
    int64_t embeds_id = -1;
    if (shared.embeds_is_layer_input) {
      pinned = inst[0].out_id();
    } else if (shared.embeds_bytes > 0) {
      embeds_id = led.fresh();
      led.alloc(embeds_id, shared.embeds_bytes);
    }
    for (int64_t k = 1; k <= L; ++k) forward(k, pinned, &pinned_frees);
    for (int64_t id : pinned_frees) led.free(id);
    if (embeds_id >= 0) led.free(embeds_id);
    if (!any_ckpt)
      for (int64_t id : fwd_ids) led.free(id);
    forward(L + 1, -1, nullptr);
    make_workspace(&fwd_workspace);  // a forward without a GEMM mark: where it ends
    for (int64_t id : autocast_frees) led.free(id);  // autocast exits with the model's forward
    // The loop binds the new outputs: the last forward's go (nanoGPT's `logits, loss = model(X, Y)`).
    for (int64_t id : held) led.free(id);
    held.clear();
    // Lightning's closure: training_step, then zero_grad (set_to_none), then backward.
    if (ms == 0) {
      for (int64_t id : to_zero) led.free(id);
      to_zero.clear();
    }

    // Backward.
    backward(L + 1);
    for (int64_t k = L; k >= 1; --k) {
      backward(k);
      if (k == 1) {
        for (int64_t id : whole_ids) led.free(id);
        for (int64_t id : fwd_ids) led.free(id);
      }
    }
    backward(0);
    make_workspace(&bwd_workspace);
    // What the walk left alive (the loss, an input gradient nobody consumes) dies with the step.
    stays.resize(static_cast<size_t>(led.ids()), 0);
    for (int64_t id : param_grads) stays[static_cast<size_t>(id)] = 1;
    for (int64_t id : held_now) stays[static_cast<size_t>(id)] = 1;
    for (int64_t k = 0; k < L + 2; ++k) {
      const CompiledRecord& r = *inst[k].rec;
      for (const auto* evs : {&r.forward, &r.backward})
        for (const CompiledEvent& e : *evs) {
          const int64_t id = inst[k].id(e.local);
          if (e.alloc && led.live(id) && !stays[static_cast<size_t>(id)]) {
            out.swept_bytes += step == steps - 1 ? led.bytes(id) : 0;
            if (std::getenv("MEMPLAN_TRACE_SEQ") && step == steps - 1)
              std::fprintf(stderr, "swept: instance %lld key %d bytes %lld\n", static_cast<long long>(k), static_cast<int>(e.local),
                           static_cast<long long>(led.bytes(id)));
            led.free(id);
          }
        }
    }
    for (int64_t id : held_now) stays[static_cast<size_t>(id)] = 0;
    held = std::move(held_now);
    }  // micro-steps

    // optimizer.step(). Gradients exist for every trainable parameter; their sizes are the
    // parameters' in the gradient dtype. States are created in _init_group before the update.
    switch (plan.optimizer) {
      case OptimizerKind::adamw: case OptimizerKind::adam: {
        if (step == 0)
          for (const Stepped& t : stepped) {
            if (impl == OptimizerImpl::fused) {  // state['step'] on the device
              states.push_back(led.fresh());
              led.alloc(states.back(), 4);
            }
            for (int k = 0; k < 2; ++k) {
              states.push_back(led.fresh());
              led.alloc(states.back(), t.elements * t.state_bytes);
            }
          }
        if (impl == OptimizerImpl::foreach) {
          // _multi_tensor_adamw: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), one per
          // parameter, for each (device, dtype) group in turn (_group_tensors_by_device_and_dtype:
          // in the order the dtypes first appear); the loop's variable keeps a group's list until
          // the next group's is bound, the last one's until step() returns.
          std::vector<int64_t> dtypes;
          for (const Stepped& t : stepped)
            if (std::find(dtypes.begin(), dtypes.end(), t.state_bytes) == dtypes.end()) dtypes.push_back(t.state_bytes);
          std::vector<int64_t> held_list;
          for (int64_t dt : dtypes) {
            std::vector<int64_t> tmp;
            for (const Stepped& t : stepped)
              if (t.state_bytes == dt) {
                tmp.push_back(led.fresh());
                led.alloc(tmp.back(), t.elements * dt);
              }
            for (int64_t id : held_list) led.free(id);
            held_list = std::move(tmp);
          }
          for (int64_t id : held_list) led.free(id);
        } else if (impl == OptimizerImpl::for_loop) {
          // _single_tensor_adamw: (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps).
          for (const Stepped& t : stepped) {
            const int64_t a = led.fresh(), b = led.fresh();
            led.alloc(a, t.elements * t.state_bytes);
            led.alloc(b, t.elements * t.state_bytes);
            led.free(a);
            led.free(b);
          }
        }
        break;
      }
      case OptimizerKind::adafactor: case OptimizerKind::adafactor_momentum: {
        // transformers' Adafactor.step (src/transformers/optimization.py @ 005edacb), one parameter
        // at a time; its locals `grad`, `p_data_fp32` and `update` stay bound until the next
        // parameter rebinds them, and go when step() returns. Everything is fp32: a 16-bit gradient
        // or parameter is upcast into a copy, and the states are made `.to(grad)`.
        const bool momentum = plan.optimizer == OptimizerKind::adafactor_momentum;
        int64_t grad_copy = -1, p_copy = -1, update = -1;  // the locals' own tensors (-1: none, or not a temporary)
        auto make = [&](int64_t bytes) {
          const int64_t id = led.fresh();
          led.alloc(id, bytes);
          return id;
        };
        auto drop = [&](int64_t& id) {
          if (id >= 0) led.free(id);
          id = -1;
        };
        for (size_t k = 0; k < stepped.size(); ++k) {
          const int64_t n = stepped[k].elements * 4;
          const int64_t gb = stepped[k].grad_bytes, pb = stepped[k].param_bytes;
          const Factors f = stepped[k].factors;
          drop(grad_copy);  // grad = p.grad
          if (gb != 4) grad_copy = make(n);  // grad = grad.float()
          if (step == 0) {  // state initialization
            if (momentum) states.push_back(make(n));  // exp_avg = zeros_like(grad)
            if (f.rows > 0) {
              states.push_back(make(f.rows * 4));  // exp_avg_sq_row = zeros(shape[:-1]).to(grad)
              states.push_back(make(f.cols * 4));  // exp_avg_sq_col
            } else {
              states.push_back(make(n));  // exp_avg_sq = zeros_like(grad)
            }
          }
          drop(p_copy);  // p_data_fp32 = p
          if (pb != 4) p_copy = make(n);  // p_data_fp32 = p_data_fp32.float()
          // update = (grad**2) + eps[0]: grad**2 goes with the expression, the old update on the binding
          int64_t sq = make(n), u = make(n);
          drop(sq);
          drop(update);
          update = u;
          if (f.rows > 0) {
            int64_t m = make(f.rows * 4);  // exp_avg_sq_row.mul_(beta2t).add_(update.mean(dim=-1))
            drop(m);
            m = make(f.cols * 4);  // ... update.mean(dim=-2)
            drop(m);
            // _approx_sq_grad: r_factor = (row / row.mean(-1, keepdim)).rsqrt_().unsqueeze(-1),
            // c_factor = col.unsqueeze(-2).rsqrt(), torch.mul(r_factor, c_factor)
            int64_t rf = make(f.rows * 4), cf = make(f.cols * 4), approx = make(n);
            drop(rf);
            drop(cf);
            drop(update);
            update = approx;  // then update.mul_(grad), in place
          } else {
            const int64_t r = make(n);  // update = exp_avg_sq.rsqrt().mul_(grad)
            drop(update);
            update = r;
          }
          if (momentum) drop(update);  // update = exp_avg: a state
          int64_t neg = make(n);  // p_data_fp32.add_(-update)
          drop(neg);
        }
        drop(update);  // step() returns
        drop(grad_copy);
        drop(p_copy);
        break;
      }
      case OptimizerKind::sgd_momentum:
        if (step == 0)
          for (const Stepped& t : stepped) {  // momentum_buffer = torch.clone(grad).detach()
            states.push_back(led.fresh());
            led.alloc(states.back(), t.elements * t.grad_bytes);
          }
        break;
      default:
        break;
    }
    // zero_grad: set_to_none=True frees the gradients (Lightning's after the next forward); False
    // zeroes them in place.
    if (plan.zero_grad_after_forward && !plan.grads_kept) {
      to_zero = std::move(param_grads);
    } else if (!plan.grads_kept) {
      for (int64_t id : param_grads) led.free(id);
    }
  }
  out.peak_bytes = led.peak();
  out.process_peak_bytes = led.process_peak();
  out.events = std::move(led.events);
  return out;
}

}  // namespace

std::vector<int64_t> stepped_parameter_elements(const TrainingSetup& s) {
  std::vector<int64_t> out;
  for (const Stepped& t : stepped_tensors(s)) out.push_back(t.elements);
  return out;
}

AllocationSequence allocation_sequence(const TrainingSetup& s, int steps, size_t max_events) {
  return unroll(plan_sequence(s, steps), max_events);
}

namespace {

// predict_reserved's answers, remembered by everything they depend on: the sequence's plan (all
// that unroll() reads: the events follow from it), the allocator settings and the question (the
// uncapped peaks, the boundary, or whether a capacity runs). The planner and fit predict the same
// sequence many times (one model and batch on each card of the catalog, each group's micro-batch
// search: the catalog test makes 17,800 predictions of 2,382 sequences); a hit skips the unroll
// and the replay. The key is a 128-bit fingerprint of those inputs, two independent 64-bit hashes
// (a false match has odds of about n^2 / 2^129 for n keys seen). Bounded: past kMaxEntries the
// oldest entry goes. Locked: the Python module and the live monitor may estimate on threads.
class ReplayMemo {
 public:
  struct Key {
    uint64_t a = 0, b = 0;
    bool operator==(const Key& o) const { return a == o.a && b == o.b; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.a); }
  };
  // Two lanes over the same words: FNV-1a-style multiply-xor, and an xxHash64-style round.
  struct Fingerprint {
    uint64_t a = 0xcbf29ce484222325ull, b = 0x27d4eb2f165667c5ull;
    void add(uint64_t w) {
      a = (a ^ w) * 0x100000001b3ull;
      a ^= a >> 29;
      b += w * 0xc2b2ae3d27d4eb4full;
      b = (b << 31 | b >> 33) * 0x9e3779b185ebca87ull;
    }
    void add(const std::vector<int64_t>& v) {
      add(v.size());
      for (int64_t x : v) add(static_cast<uint64_t>(x));
    }
    // Every field of sim::SimRecord.
    void add(const sim::SimRecord& r) {
      for (const auto* evs : {&r.forward, &r.backward}) {
        add(evs->size());
        for (const sim::SimEvent& e : *evs) {
          add(e.alloc);
          add(static_cast<uint64_t>(e.key));
          add(static_cast<uint64_t>(e.bytes));
        }
      }
      add(r.autocast_frees);
      add(r.param_grads);
      add(r.kept);
      for (int64_t k : {r.input_key, r.output_key, r.output_grad_key, r.input_grad_key, r.forward_gemm, r.backward_gemm})
        add(static_cast<uint64_t>(k));
    }
    // Every field of SequencePlan (a field added there belongs here too): each distinct layer
    // record once, then which one each layer runs.
    void add(const SequencePlan& p) {
      add(static_cast<uint64_t>(p.steps));
      add(static_cast<uint64_t>(p.L));
      add(static_cast<uint64_t>(p.micro_steps));
      add(p.grads_kept);
      add(p.zero_grad_after_forward);
      add(p.recs.size());
      for (const Records& R : p.recs) {
        add(R.emb);
        add(R.head);
        std::vector<const sim::SimRecord*> kinds;
        for (const auto& kv : R.cache) {
          add(kv.second);
          kinds.push_back(&kv.second);
        }
        add(R.layer.size());
        for (const sim::SimRecord* r : R.layer) add(static_cast<uint64_t>(std::find(kinds.begin(), kinds.end(), r) - kinds.begin()));
      }
      add(p.any_ckpt);
      add(p.params);
      add(p.adapters);
      add(p.stepped.size());
      for (const Stepped& t : p.stepped)
        for (int64_t x : {t.elements, t.state_bytes, t.grad_bytes, t.param_bytes, t.factors.rows, t.factors.cols})
          add(static_cast<uint64_t>(x));
      for (int64_t x : {p.adapter_made_bytes, p.adapter_trained_bytes, p.weight_bytes, p.state_bytes, p.grad_bytes, p.buffers, p.inv_freq_bytes, p.input_bytes,
                        p.shared.whole_step_bytes, p.shared.forward_bytes, p.shared.embeds_bytes, p.workspace})
        add(static_cast<uint64_t>(x));
      for (bool b : {p.buffer_per_layer, p.inv_freq, p.shared.embeds_is_layer_input, p.rotary}) add(b);
      add(static_cast<uint64_t>(p.impl));
      add(static_cast<uint64_t>(p.optimizer));
      add(p.expected_events);
    }
    // Every field of AllocatorConfig (a field added there belongs here too).
    void add(const AllocatorConfig& c) {
      add(static_cast<uint64_t>(c.capacity));
      add(c.capacity_is_fraction);
      add(static_cast<uint64_t>(c.max_split_size));
      add(static_cast<uint64_t>(c.max_non_split_rounding));
      uint64_t gc = 0;
      static_assert(sizeof gc == sizeof c.gc_threshold);
      std::memcpy(&gc, &c.gc_threshold, sizeof gc);
      add(gc);
      add(c.expandable_segments);
      add(c.roundup_power2_divisions.size());
      for (int d : c.roundup_power2_divisions) add(static_cast<uint64_t>(static_cast<int64_t>(d)));
    }
    static uint64_t mix(uint64_t x) {  // splitmix64's finaliser
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
      return x ^ (x >> 31);
    }
    Key key() const { return Key{mix(a), mix(b ^ 0x5851f42d4c957f2dull)}; }
  };
  enum Question : uint64_t { kPeaks = 1, kBoundary = 2, kRunsIn = 3 };

  struct Answer {
    int64_t a = 0, b = 0, c = 0, d = 0;
  };

  // The key of `question` about the sequence (its plan's fingerprint) under `config`.
  static Key key(Fingerprint plan, const AllocatorConfig& config, Question question) {
    plan.add(config);
    plan.add(question);
    return plan.key();
  }
  bool find(const Key& k, Answer* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    *out = it->second;
    return true;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    order_.clear();
  }
  void put(const Key& k, const Answer& v) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!map_.emplace(k, v).second) return;
    order_.push_back(k);
    if (order_.size() > kMaxEntries) {
      map_.erase(order_.front());
      order_.pop_front();
    }
  }

 private:
  static constexpr size_t kMaxEntries = 16384;  // about 1.5 MiB
  std::mutex mu_;
  std::unordered_map<Key, Answer, KeyHash> map_;
  std::deque<Key> order_;
};

ReplayMemo& replay_memo() {
  static ReplayMemo memo;
  return memo;
}

}  // namespace

void forget_replays() { replay_memo().clear(); }

ReservedPrediction predict_runs(const TrainingSetup& s, size_t max_events, int64_t capacity, int steps) {
  MEMPLAN_CHECK(capacity > 0, "predict_runs: a capacity");
  ReservedPrediction p;
  p.why_not = sequence_not_modelled(s);
  if (!p.why_not.empty()) return p;
  const SequencePlan plan = plan_sequence(s, steps);
  if (max_events > 0 && plan.expected_events > max_events) {
    p.why_not = fmt::format("about {} allocations to replay, more than the budget of {}", plan.expected_events, max_events);
    return p;
  }
  p.modelled = true;
  const AllocatorConfig cfg = allocator_config(s);
  AllocatorConfig capped = cfg;  // the card's free memory: cudaMalloc fails beyond it
  capped.capacity = capacity;
  capped.capacity_is_fraction = false;
  ReplayMemo& memo = replay_memo();
  ReplayMemo::Fingerprint fp;
  fp.add(plan);
  const ReplayMemo::Key runs_in = ReplayMemo::key(fp, capped, ReplayMemo::kRunsIn);
  const ReplayMemo::Key peaks = ReplayMemo::key(fp, cfg, ReplayMemo::kPeaks);
  ReplayMemo::Answer v;
  if (memo.find(runs_in, &v)) {
    p.runs_in_capacity = static_cast<int>(v.a);
    return p;
  }
  if (memo.find(peaks, &v)) {  // the uncapped replay made: within the capacity, or tensors past it
    if (v.a <= capacity) return p.runs_in_capacity = 1, p;
    if (v.d > capacity) return p.runs_in_capacity = 0, p;
  }
  const AllocationSequence seq = unroll(plan, 0);
  bool runs = false;
  if (seq.process_peak_bytes <= capacity) {
    const int64_t reset = static_cast<int64_t>(seq.last_step_begin);
    const ReplayResult r = replay(seq.events, capped, reset, /*segment_actions=*/false);
    runs = r.ran;
    // No segment refused (no retry, no failure): this was the uncapped replay, event for event.
    if (r.ran && r.num_alloc_retries == 0) memo.put(peaks, {r.peak_reserved, r.peak_allocated, seq.peak_bytes, seq.process_peak_bytes});
  }
  memo.put(runs_in, {runs ? 1 : 0});
  p.runs_in_capacity = runs ? 1 : 0;
  return p;
}

ReservedPrediction predict_reserved(const TrainingSetup& s, bool boundary, size_t max_events, int64_t capacity, int steps,
                                    int64_t fallback) {
  ReservedPrediction p;
  p.why_not = sequence_not_modelled(s);
  if (!p.why_not.empty()) return p;
  const SequencePlan plan = plan_sequence(s, steps);
  if (max_events > 0 && plan.expected_events > max_events) {  // unroll() would make no events
    p.why_not = fmt::format("about {} allocations to replay, more than the budget of {}", plan.expected_events, max_events);
    return p;
  }
  p.modelled = true;
  const AllocatorConfig cfg = allocator_config(s);
  ReplayMemo& memo = replay_memo();
  ReplayMemo::Fingerprint fp;
  fp.add(plan);
  std::optional<AllocationSequence> unrolled;  // made on the first question the memo cannot answer
  auto seq = [&]() -> const AllocationSequence& {
    if (!unrolled) unrolled = unroll(plan, 0);
    return *unrolled;
  };
  ReplayMemo::Answer v;
  // The capacities asked about: the card's free memory, cudaMalloc fails beyond it.
  auto capped_at = [&](int64_t c) {
    AllocatorConfig a = cfg;
    a.capacity = c;
    a.capacity_is_fraction = false;
    return a;
  };
  const AllocatorConfig capped = capped_at(capacity), capped_fallback = capped_at(fallback);
  const ReplayMemo::Key runs_in = ReplayMemo::key(fp, capped, ReplayMemo::kRunsIn);
  const ReplayMemo::Key runs_in_fallback = ReplayMemo::key(fp, capped_fallback, ReplayMemo::kRunsIn);
  std::optional<bool> capped_ran, fallback_ran;  // the capped replays, where made beside the uncapped one
  const ReplayMemo::Key peaks = ReplayMemo::key(fp, cfg, ReplayMemo::kPeaks);
  if (!memo.find(peaks, &v)) {
    // The capped replays asked about go along: each is the uncapped one up to where it first needs
    // a segment past its capacity (replay_with_caps); the fallback's only where the first fails.
    ReplayMemo::Answer known;
    std::vector<int64_t> caps;
    if (capacity > 0 && !memo.find(runs_in, &known)) caps.push_back(capacity);
    const size_t fallback_at = caps.size();
    if (fallback > 0 && !memo.find(runs_in_fallback, &known)) caps.push_back(fallback);
    std::vector<ReplayResult> at;
    const int64_t reset = static_cast<int64_t>(seq().last_step_begin);
    const ReplayResult r = caps.empty() ? replay(seq().events, cfg, reset, /*segment_actions=*/false)
                                        : replay_with_caps(seq().events, cfg, reset, caps, at, /*first_that_runs=*/true);
    if (fallback_at == 1) capped_ran = at.at(0).ran;
    if (fallback > 0 && at.size() > fallback_at && caps.size() > fallback_at) fallback_ran = at[fallback_at].ran;
    v = {r.peak_reserved, r.peak_allocated, seq().peak_bytes, seq().process_peak_bytes};
    memo.put(peaks, v);
  }
  p.peak_reserved = v.a;
  p.peak_allocated = v.b;
  p.peak_requested = v.c;
  const int64_t process_peak = v.d;
  if (boundary) {
    const ReplayMemo::Key k = ReplayMemo::key(fp, cfg, ReplayMemo::kBoundary);
    if (!memo.find(k, &v)) {
      v = {find_oom_boundary(seq().events, cfg)};
      memo.put(k, v);
    }
    p.oom_boundary = v.a;
  }
  // Whether the process runs in capacity `c` (its capped config `at`, memo key `k`; `forked`: the
  // capped replay made beside the uncapped one). Where the live tensors alone (their own bytes,
  // then rounded as the allocator rounds them) outgrow the capacity, the capped replay runs out of
  // memory (peak_rounded_requests): not run; a replay made says so itself.
  auto runs_in_cap = [&](int64_t c, const AllocatorConfig& at, const ReplayMemo::Key& k, const std::optional<bool>& forked) {
    if (process_peak > c) return 0;
    if (!memo.find(k, &v)) {
      const bool runs = forked ? *forked : peak_rounded_requests(seq().events, at) <= c && replay(seq().events, at, -1, /*segment_actions=*/false).ran;
      v = {runs ? 1 : 0};
      memo.put(k, v);
    }
    return static_cast<int>(v.a);
  };
  if (capacity > 0 && p.peak_reserved > capacity) p.runs_in_capacity = runs_in_cap(capacity, capped, runs_in, capped_ran);
  // The fallback, where the step does not run in `capacity`.
  if (fallback > 0 && p.runs_in_capacity != 1 && p.peak_reserved > fallback)
    p.runs_in_fallback = runs_in_cap(fallback, capped_fallback, runs_in_fallback, fallback_ran);
  return p;
}

}  // namespace memplan
