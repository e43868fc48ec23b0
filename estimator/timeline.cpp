// The step's activation timeline: segment profiles (graph.h) cached per distinct layer kind, walked
// forward and backward into the peaks compose() adds the model states to (estimate.h Timeline).
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
#include "estimator/states.h"

namespace memplan {

namespace {

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


}  // namespace

using namespace est;

int64_t micro_batches_in_flight(const TrainingSetup& s) {
  // Pipeline 1F1B: the first stage holds activations of up to pp micro-batches in flight.
  return s.parallel.pipeline_parallel > 1 ? std::min(s.parallel.pipeline_parallel, s.batch.grad_accum) : 1;
}

double step_temps_per_grad_byte(const TrainingSetup& s, const ParamSummary& ps) {
  if (!s.runtime.optimizer_in_backward) return 0;
  // Each parameter is stepped right after its gradient is made, and the gradient dropped: the
  // step's temporaries, scaled from the largest parameter's to each op's gradient.
  const int64_t largest = ps.counts.largest_trainable;
  const int64_t gb = trained_bytes(s, ps, grad_bytes_per_param(s.precision));
  if (largest <= 0 || gb <= 0) return 0;
  return static_cast<double>(optimizer_cost(s, ps, false).per_param_transient) / static_cast<double>(largest * gb);
}

Timeline activation_timeline(const TrainingSetup& s, bool with_rows) {
  Timeline out;
  TrainingSetup rs = s;
  rs.model = rank_model(s);
  const ModelSpec& m = rs.model;
  const bool grads_persist = gradients_persist(s);

  sim::SimOptions so;
  so.grads_persist = grads_persist;
  if (s.runtime.optimizer_in_backward) {
    so.step_temps_per_grad_byte = step_temps_per_grad_byte(s, summarize_parameters(s));
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
      if (with_rows && !key.ckpt) {
        // One table per layer variant, named after its first layer.
        const std::string label = fmt::format("{} layer {}{}{}", key.moe ? "MoE" : "dense", i, key.frozen ? " (frozen)" : "",
                                              key.input_rg ? "" : " (its input needs no gradient)");
        for (const auto& row : seg.saved_rows())
          out.saved_per_layer.push_back({label, row.op, row.bytes,
                                         row.cat == sim::Cat::loss ? "loss" : row.cat == sim::Cat::weight_copy ? "weight_copy" : "activation"});
      }
    }
    layer[i] = &it->second;
  }
  const sim::Segment head_seg = head_segment(rs);
  // The head's input needs a gradient only once something below it trains (as a layer's).
  sim::SimOptions ho = so;
  ho.input_requires_grad = input_rg;
  const sim::Profile head = head_seg.simulate(ho);
  if (with_rows)
    for (const auto& row : head_seg.saved_rows())
      out.saved_per_layer.push_back({head_seg.name(), row.op, row.bytes, row.cat == sim::Cat::loss ? "loss" : "activation"});

  const SharedTensors shared = shared_tensors(rs);
  const bool offload = s.runtime.activation_offload;
  bool any_ckpt = false;
  for (int64_t i = 0; i < m.num_layers; ++i) any_ckpt = any_ckpt || s.checkpointing.layer_checkpointed(i);
  const int64_t in_flight = micro_batches_in_flight(s);
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
    Bytes end = bh;  // the forward's end: what the layers and the head keep
    put(bh, head.forward.bytes);
    consider(out.forward, fl, bh, {-2, &head.forward.where});
    if (s.runtime.reference_model) {
      // The reference model's forward under no_grad (DPOTrainer._compute_loss @ v1.9.0
      // L1370-1380) once the policy's has ended, its log-probs taken the same way: the larger of
      // its layers' peak (each layer as a no-grad, checkpoint-style forward, with the model-level
      // mask and cos/sin and the layer's input) and its head (its logits, and one row's
      // log-softmax at a time: TRL's selective_log_softmax loops over rows, trl/trainer/utils.py
      // @ v1.9.0 L506-518).
      put(end, head.retained);
      int64_t layers_peak = 0;
      std::map<LayerKey, int64_t> seen;
      for (int64_t i = 0; i < m.num_layers; ++i) {
        const LayerKey key{m.is_moe_layer(i), true, true, false};
        if (seen.count(key)) continue;
        sim::SimOptions lo = so;
        lo.checkpointed = true;
        lo.input_requires_grad = false;
        lo.record = nullptr;
        const sim::Profile p = layer_segment(rs, key.moe, i).simulate(lo);
        seen[key] = sim::total(p.forward.bytes);
        layers_peak = std::max(layers_peak, seen[key]);
      }
      layers_peak += shared.whole_step_bytes + shared.forward_bytes + shared.embeds_bytes;
      const int64_t logits = logits_bytes(rs);
      const int64_t head_peak = logits + (rs.batch.micro_batch > 0 ? logits / rs.batch.micro_batch : 0);
      out.reference_forward.phase = Phase::forward;
      out.reference_forward.bytes = end;
      if (head_peak >= layers_peak) {
        out.reference_forward.bytes[T(Term::logits_and_loss)] += head_peak;
        out.reference_forward.at = "reference model forward (no_grad): its logits and one row's log-softmax, beside the policy's outputs";
      } else {
        out.reference_forward.bytes[T(Term::transient)] += layers_peak;
        out.reference_forward.at = "reference model forward (no_grad): a layer, beside the policy's saved tensors";
      }
    }
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

}  // namespace memplan
