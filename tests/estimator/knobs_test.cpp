// The runtime knobs in the estimate (issue 18): each moves exactly the bytes its mechanism says,
// in the phases it says, and the sharded runtimes keep the invariants of DESIGN.md (never more
// per GPU with more GPUs).
#include <doctest/doctest.h>

#include "estimator/estimate.h"
#include "estimator/graph.h"
#include "estimator/layers.h"
#include "tests/estimator/specs.h"

using namespace memplan;

namespace {

TrainingSetup base() {
  TrainingSetup s;
  s.model = testing::llama2_7b();
  s.model.num_layers = 4;  // small enough to run many variants
  s.precision = Precision::bf16;
  s.batch.micro_batch = 2;
  s.batch.seq_len = 512;
  s.attention = AttentionImpl::sdpa;
  s.device.kind = DeviceKind::cuda;
  s.device.capacity_bytes = int64_t{80} << 30;
  s.device.cuda_context_bytes = 1 << 28;
  s.device.cublas_workspace_bytes = 1 << 23;
  return s;
}

// A phase's tensors (its total without the allocator's overhead: the setups compared here differ in
// whether the allocation replay covers them, estimator/sequence.h).
int64_t phase(const MemoryBreakdown& e, Phase p) { return e.at(p).total() - e.at(p)[Term::allocator_overhead]; }
int64_t term(const MemoryBreakdown& e, Phase p, Term t) { return e.at(p)[t]; }

}  // namespace

TEST_CASE("a loop that keeps its outputs: the logits through every phase, the KV cache through forward and the step") {
  const TrainingSetup s = base();
  TrainingSetup k = s;
  k.runtime.keep_logits = true;
  const MemoryBreakdown a = estimate(s), b = estimate(k);
  const int64_t logits = logits_bytes(s);
  CHECK(logits == 2 * 512 * 32000 * 2);
  for (Phase p : {Phase::forward, Phase::backward, Phase::optimizer_step}) {
    CAPTURE(phase_name(p));
    CHECK(phase(b, p) - phase(a, p) == doctest::Approx(static_cast<double>(logits)).epsilon(0.06));  // allocator share moves too
    CHECK(term(b, p, Term::logits_and_loss) - term(a, p, Term::logits_and_loss) == logits);
  }
  TrainingSetup c = k;
  c.runtime.keep_cache = true;
  const MemoryBreakdown cc = estimate(c);
  const int64_t cache = 2 * 4 * 2 * 512 * 32 * 128 * 2;  // 2 x L x b x s x k x d x 2 B
  CHECK(term(cc, Phase::forward, Term::activations) - term(b, Phase::forward, Term::activations) == cache);
  CHECK(term(cc, Phase::optimizer_step, Term::activations) - term(b, Phase::optimizer_step, Term::activations) == cache);
}

TEST_CASE("Lightning zeroes after the next forward: last step's gradients in the forward only") {
  const TrainingSetup s = base();
  TrainingSetup l = s;
  l.runtime.zero_grad_after_forward = true;
  const MemoryBreakdown a = estimate(s), b = estimate(l);
  const int64_t grads = term(a, Phase::optimizer_step, Term::gradients);
  CHECK(grads > 0);
  CHECK(term(b, Phase::forward, Term::gradients) - term(a, Phase::forward, Term::gradients) == grads);
  CHECK(term(b, Phase::backward, Term::gradients) == term(a, Phase::backward, Term::gradients));
}

TEST_CASE("optimizer in backward: no gradients or step temporaries left for the step; refused with accumulation") {
  TrainingSetup s = base();
  s.runtime.optimizer_impl = OptimizerImpl::for_loop;
  TrainingSetup o = s;
  o.runtime.optimizer_in_backward = true;
  const MemoryBreakdown a = estimate(s), b = estimate(o);
  CHECK(term(b, Phase::optimizer_step, Term::gradients) == 0);
  CHECK(term(b, Phase::optimizer_step, Term::transient) == 0);
  CHECK(phase(b, Phase::optimizer_step) < phase(a, Phase::optimizer_step));
  CHECK(term(b, Phase::backward, Term::gradients) <= term(a, Phase::backward, Term::gradients));
  o.batch.grad_accum = 4;
  const auto problems = validate(o);
  REQUIRE_FALSE(problems.empty());
  CHECK(problems[0].field == "runtime.optimizer_in_backward");
}

TEST_CASE("start-up buffers: DeepSpeed BF16_Optimizer's fp32 gradients, Megatron's fp32 main gradients") {
  TrainingSetup s = base();
  s.precision = Precision::mixed_bf16;
  const int64_t trainable = count_parameters(s).trainable;
  TrainingSetup ds = s;
  ds.runtime.framework = Framework::deepspeed;
  CHECK(term(estimate(ds), Phase::forward, Term::gradients) - term(estimate(s), Phase::forward, Term::gradients) == 4 * trainable);
  TrainingSetup mg = s;
  mg.runtime.framework = Framework::megatron;
  const MemoryBreakdown m = estimate(mg);
  for (Phase p : {Phase::forward, Phase::backward, Phase::optimizer_step}) CHECK(term(m, p, Term::gradients) >= 4 * trainable);
  CHECK(term(m, Phase::forward, Term::gradients) == 4 * trainable);
}

TEST_CASE("activation offload: the GPU keeps about one layer's saved tensors; the rest is a host term") {
  TrainingSetup s = base();
  s.checkpointing.mode = CheckpointMode::full;
  s.model.num_layers = 16;
  TrainingSetup o = s;
  o.runtime.activation_offload = true;
  const MemoryBreakdown a = estimate(s), b = estimate(o);
  CHECK(term(b, Phase::forward, Term::activations) < term(a, Phase::forward, Term::activations));
  int64_t host = 0;
  for (const auto& h : b.host)
    if (h.name == "offloaded_activations") host = h.bytes;
  const int64_t layer_input = 2 * 512 * 4096 * 2;  // full checkpointing saves each layer's input
  CHECK(host == 16 * layer_input);
  // What left the GPU is what the host holds, less the one layer in flight.
  CHECK(term(a, Phase::forward, Term::activations) - term(b, Phase::forward, Term::activations) == 15 * layer_input);
}

TEST_CASE("FSDP: per-GPU model states shrink with the shard group and never grow with more GPUs") {
  TrainingSetup s = base();
  s.model.num_layers = 8;
  s.precision = Precision::mixed_bf16;
  s.parallel.fsdp = FsdpMode::full_shard;
  int64_t last_peak = INT64_MAX, last_states = INT64_MAX;
  for (int64_t g : {1, 2, 4, 8, 16, 64}) {
    s.parallel.num_gpus = g;
    const MemoryBreakdown e = estimate(s);
    CAPTURE(g);
    for (Term t : {Term::weights, Term::master_weights, Term::optimizer_states, Term::gradients, Term::comm_buffers})
      for (Phase p : {Phase::forward, Phase::backward, Phase::optimizer_step}) CHECK(e.at(p)[t] >= 0);
    const int64_t states = term(e, Phase::optimizer_step, Term::optimizer_states) + term(e, Phase::optimizer_step, Term::master_weights);
    CHECK(states <= last_states);
    CHECK(e.peak_bytes() <= last_peak);
    last_states = states;
    last_peak = e.peak_bytes();
  }
  // Mixed policy: fp32 shards are the master copy (4 B) and Adam's 8 B, over 8 ranks.
  s.parallel.num_gpus = 8;
  const int64_t trainable = count_parameters(s).trainable;
  const MemoryBreakdown e8 = estimate(s);
  CHECK(term(e8, Phase::optimizer_step, Term::master_weights) == (4 * trainable + 7) / 8);
  CHECK(term(e8, Phase::optimizer_step, Term::optimizer_states) == (8 * trainable + 7) / 8);
  CHECK(term(e8, Phase::optimizer_step, Term::comm_buffers) == 0);  // nothing gathered in the step
  CHECK(term(e8, Phase::forward, Term::comm_buffers) > 0);          // gathered blocks in flight
  // SHARD_GRAD_OP keeps every gathered block until its backward; hybrid over 8-GPU nodes at 16
  // GPUs shards like 8 GPUs.
  TrainingSetup sgo = s;
  sgo.parallel.fsdp = FsdpMode::shard_grad_op;
  CHECK(estimate(sgo).peak_bytes() > e8.peak_bytes());
  TrainingSetup hyb = s;
  hyb.parallel.fsdp = FsdpMode::hybrid_shard;
  hyb.parallel.num_gpus = 16;
  hyb.parallel.gpus_per_node = 8;
  CHECK(term(estimate(hyb), Phase::optimizer_step, Term::optimizer_states) == term(e8, Phase::optimizer_step, Term::optimizer_states));
}

TEST_CASE("expandable segments: the allocator term keeps only the rounding") {
  TrainingSetup s = base();
  TrainingSetup x = s;
  x.runtime.expandable_segments = true;
  const MemoryBreakdown a = estimate(s), b = estimate(x);
  CHECK(term(b, Phase::backward, Term::allocator_overhead) < term(a, Phase::backward, Term::allocator_overhead));
  CHECK(term(b, Phase::backward, Term::activations) == term(a, Phase::backward, Term::activations));
}

TEST_CASE("bad runtime settings are refused with the field they come from") {
  auto first = [](const TrainingSetup& s) { const auto p = validate(s); return p.empty() ? std::string() : p[0].field + ": " + p[0].message; };
  TrainingSetup s = base();
  s.checkpointing.mode = CheckpointMode::layers;
  s.checkpointing.layers = {0, 2, 4};
  CHECK(first(s) == "checkpointing: layers: names layer 4, but the model has 4 layers (0 to 3)");
  s = base();
  s.runtime.fp8 = true;
  s.device.name = "a100-80gb";
  s.device.family = "ampere";
  CHECK(first(s) == "runtime.fp8: a100-80gb has no fp8 tensor cores");
  s.device.fp8 = true;
  CHECK(first(s).empty());
  s = base();
  s.parallel.fsdp = FsdpMode::full_shard;
  s.parallel.zero_stage = 3;
  CHECK(first(s) == "parallel.fsdp: FSDP and DeepSpeed ZeRO-3 both shard the model; a job runs one of them");
}

TEST_CASE("per-op selective checkpointing keeps the input, every other matmul's output and SDPA's per layer") {
  TrainingSetup s = base();
  s.attention = AttentionImpl::flash;
  TrainingSetup full = s, sac = s;
  full.checkpointing.mode = CheckpointMode::full;
  sac.checkpointing.mode = CheckpointMode::selective_op;
  const int64_t a = term(estimate(full), Phase::forward, Term::activations);
  const int64_t b = term(estimate(sac), Phase::forward, Term::activations);
  // Llama: q_proj (kept), k_proj, v_proj (kept), o_proj, gate_proj (kept), up_proj, down_proj
  // (kept), and the attention output with its fp32 logsumexp; N = 1024 tokens, bf16.
  const int64_t N = 1024, h = 4096, kv = 32 * 128, f = 11008;
  const int64_t lse = 2 * 32 * 512 * 4;
  const int64_t kept = N * h * 2 /*q*/ + N * kv * 2 /*v*/ + N * f * 2 /*gate*/ + N * h * 2 /*down*/ + N * h * 2 /*attn out*/ + lse;
  CHECK(b - a == 4 * kept);
  CHECK(b < term(estimate(s), Phase::forward, Term::activations));
}

TEST_CASE("chunked and fused-linear cross-entropy shrink the loss's bytes; fused never makes logits") {
  TrainingSetup s = base();
  s.model.vocab_size = 128256;
  s.batch.micro_batch = 4;
  s.batch.seq_len = 4096;  // N = 16,384 tokens: the logits (N x V) dwarf the head's weight (V x h)
  TrainingSetup c = s, f = s;
  c.runtime.loss = LossImpl::chunked;
  c.runtime.loss_chunks = 8;
  f.runtime.loss = LossImpl::fused_linear;
  const sim::Profile hs = head_segment(s).simulate({}), hc = head_segment(c).simulate({}), hf = head_segment(f).simulate({});
  const double NV = 16384.0 * 128256.0;
  // Standard, at its log_softmax: bf16 logits 2NV + their fp32 copy 4NV + fp32 log-probs 4NV.
  // Chunked, at the last chunk's: the bf16 chunks 2NV + every chunk's log-probs 4NV + one fp32
  // chunk copy 4NV/8. The difference is 4NV x 7/8.
  CHECK(static_cast<double>(hs.forward.total() - hc.forward.total()) == doctest::Approx(4 * NV * 7 / 8).epsilon(0.001));
  CHECK(hc.backward.total() < hs.backward.total());
  // Fused: no logits at all; what it holds is the input's and the weight's gradients.
  CHECK(hf.forward.total() < 2 * NV);
  CHECK(hf.backward.total() < hc.backward.total());
  // LitGPT's 128-token chunks: 32 chunks, no upcast.
  TrainingSetup l = c;
  l.runtime.loss_chunk_tokens = 128;
  l.runtime.loss_upcast = false;
  CHECK(head_segment(l).simulate({}).forward.total() < hc.forward.total());
}

TEST_CASE("Megatron's vocab-parallel cross-entropy: one fp32 copy that becomes the softmax and the gradient") {
  TrainingSetup s = base();  // pure bf16: bf16 logits
  s.model.vocab_size = 128256;
  s.batch.micro_batch = 4;
  s.batch.seq_len = 4096;
  TrainingSetup v = s;
  v.runtime.loss = LossImpl::vocab_parallel;
  const sim::Profile hs = head_segment(s).simulate({}), hv = head_segment(v).simulate({});
  const double NV = 16384.0 * 128256.0;
  // Forward: HF keeps bf16 logits 2NV + fp32 copy 4NV + fp32 log-probs 4NV; Megatron the bf16
  // logits and the one fp32 copy (6NV): 4NV less.
  CHECK(static_cast<double>(hs.forward.total() - hv.forward.total()) == doctest::Approx(4 * NV).epsilon(0.001));
  // Backward: the saved fp32 softmax turned into the gradient (4NV) and its bf16 cast (2NV).
  CHECK(static_cast<double>(hv.backward.total()) >= 6 * NV);
  CHECK(static_cast<double>(hv.backward.total()) < 6 * NV + 2.0 * 4096 * 128256 * 2);  // + the head's weight and its gradient
  CHECK(hv.backward.total() < hs.backward.total());
}

TEST_CASE("chunked pieces are cut as split(n) and chunk(k) cut the sequence: a longer sequence never needs less") {
  // LitGPT's split(517) of 518 tokens is 517 + 1, not two halves of 259 (the fuzzer found the
  // peak falling from 517 to 518 tokens when the pieces were N/k each).
  TrainingSetup s = base();
  s.model.vocab_size = 50257;
  s.batch.micro_batch = 1;
  s.runtime.loss = LossImpl::chunked;
  s.runtime.loss_chunk_tokens = 517;
  s.runtime.keep_logits = true;
  int64_t last = 0;
  for (int64_t seq : {512, 517, 518, 600, 1034, 1035}) {
    CAPTURE(seq);
    s.batch.seq_len = seq;
    const int64_t peak = estimate(s).peak_bytes();
    CHECK(peak >= last);
    last = peak;
  }
  // torch.chunk(8) of 100 tokens: pieces of 13 (seven of them) and 9; the largest piece sets
  // the loss's fp32 copy, so 8 chunks of 100 tokens need what ceil(100/8) = 13-token pieces need.
  TrainingSetup c = base();
  c.model.vocab_size = 50257;
  c.batch.seq_len = 100;
  c.runtime.loss = LossImpl::chunked;
  c.runtime.loss_chunks = 8;
  TrainingSetup t = c;
  t.runtime.loss_chunks = 0;
  t.runtime.loss_chunk_tokens = 13;
  CHECK(head_segment(c).simulate({}).forward.total() == head_segment(t).simulate({}).forward.total());
}

TEST_CASE("Liger and compile: fused RMSNorm and SwiGLU save less; fp8 adds 1 B per block-linear parameter") {
  const TrainingSetup s = base();
  TrainingSetup l = s, c = s, f = s;
  l.runtime.liger = true;
  c.runtime.compile = true;
  f.runtime.fp8 = true;
  f.device.fp8 = true;
  const int64_t a = term(estimate(s), Phase::forward, Term::activations);
  CHECK(term(estimate(l), Phase::forward, Term::activations) < a);
  CHECK(term(estimate(c), Phase::forward, Term::activations) < a);
  // Liger's RMSNorm: its input (bf16) + rstd (fp32 per row) instead of HF's fp32 copy + the
  // normalised bf16 tensor + rsqrt; its SwiGLU drops silu's output (N x f x 2 B).
  const int64_t linears = 4 * (4 * 4096 * 4096 + 3 * 4096 * 11008);  // 4 layers of q,k,v,o + gate,up,down
  CHECK(term(estimate(f), Phase::forward, Term::activations) - a == linears);
}

TEST_CASE("fp8 with the weight recomputed in backward saves no float8 weight: the cast is a backward temporary") {
  TrainingSetup f = base();
  f.runtime.fp8 = true;
  f.device.fp8 = true;
  TrainingSetup r = f;
  r.runtime.fp8_recompute_weight = true;
  const int64_t linears = 4 * (4 * 4096 * 4096 + 3 * 4096 * 11008);
  CHECK(term(estimate(f), Phase::forward, Term::activations) - term(estimate(r), Phase::forward, Term::activations) == linears);
  TrainingSetup plain = base();
  CHECK(term(estimate(r), Phase::forward, Term::activations) == term(estimate(plain), Phase::forward, Term::activations));
}

TEST_CASE("a compiled loss saves the 16-bit logits and a logsumexp, not fp32 log-probabilities") {
  for (const char* loss : {"standard", "chunked:8"}) {
    CAPTURE(loss);
    TrainingSetup s = base();
    REQUIRE(parse_loss(loss, &s.runtime));
    TrainingSetup c = s;
    c.runtime.compile_loss = true;
    const MemoryBreakdown e = estimate(s), k = estimate(c);
    const int64_t N = 2 * 512, V = 32000;
    // Eager: the fp32 log-probabilities (N x V x 4 B) are saved for backward; compiled: the bf16
    // logits (N x V x 2 B, already alive as the model's output) and N x (4 + 8) B.
    const int64_t fwd_e = term(e, Phase::forward, Term::logits_and_loss), fwd_k = term(k, Phase::forward, Term::logits_and_loss);
    CHECK(fwd_k < fwd_e);
    CHECK(fwd_e - fwd_k >= N * V * 2);
    CHECK(k.peak_bytes() < e.peak_bytes());
  }
}

TEST_CASE("FSDP1 no_sync under accumulation keeps whole unsharded gradients; under LoRA the frozen block weights too") {
  TrainingSetup s = base();
  s.parallel.num_gpus = 4;
  s.parallel.fsdp = FsdpMode::full_shard;
  s.batch.grad_accum = 4;
  TrainingSetup n = s;
  n.runtime.fsdp_no_sync = true;
  const int64_t trainable = count_parameters(s).trainable;
  // Full fine-tuning: the gradients at rest are every parameter's (bf16), not a quarter of them.
  CHECK(term(estimate(s), Phase::forward, Term::gradients) == (2 * trainable + 3) / 4);
  CHECK(term(estimate(n), Phase::forward, Term::gradients) == 2 * trainable);
  // No accumulation: nothing changes.
  TrainingSetup one = n;
  one.batch.grad_accum = 1;
  TrainingSetup one_s = s;
  one_s.batch.grad_accum = 1;
  CHECK(estimate(one).peak_bytes() == estimate(one_s).peak_bytes());
  // LoRA: each block's FlatParameter gradient covers its frozen weights (use_orig_params=True).
  TrainingSetup l = n;
  l.finetune.mode = FinetuneMode::lora;
  const ParameterCounts pc = count_parameters(l);
  const int64_t block = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096;  // linears + two RMSNorms
  CHECK(term(estimate(l), Phase::forward, Term::gradients) == 4 * block * 2 + pc.adapter * 4);
  l.finetune.adapter_fp32 = false;
  CHECK(term(estimate(l), Phase::forward, Term::gradients) == 4 * block * 2 + pc.adapter * 2);
}

TEST_CASE("LoRA adapters in the model's dtype: weights, gradients and AdamW states at 2 B, not 4 B") {
  TrainingSetup s = base();
  s.finetune.mode = FinetuneMode::lora;
  TrainingSetup m = s;
  m.finetune.adapter_fp32 = false;
  const int64_t adapters = count_parameters(s).adapter;
  REQUIRE(adapters > 0);
  const MemoryBreakdown a = estimate(s), b = estimate(m);
  CHECK(term(a, Phase::optimizer_step, Term::optimizer_states) == 8 * adapters);
  CHECK(term(b, Phase::optimizer_step, Term::optimizer_states) == 4 * adapters);
  CHECK(term(a, Phase::optimizer_step, Term::weights) - term(b, Phase::optimizer_step, Term::weights) == 2 * adapters);
  CHECK(term(a, Phase::optimizer_step, Term::gradients) - term(b, Phase::optimizer_step, Term::gradients) == 2 * adapters);
}

TEST_CASE("DeepSpeed's bf16 master weights and optimizer states halve the master copy, the states and the step's gradient") {
  TrainingSetup s = base();
  s.precision = Precision::mixed_bf16;
  s.runtime.framework = Framework::deepspeed;
  s.parallel.num_gpus = 4;
  s.parallel.zero_stage = 3;
  TrainingSetup h = s;
  h.parallel.half_master = true;
  TrainingSetup hs = h;
  hs.parallel.half_optimizer_states = true;
  const int64_t trainable = count_parameters(s).trainable;
  const MemoryBreakdown a = estimate(s), b = estimate(h), c = estimate(hs);
  CHECK(term(a, Phase::optimizer_step, Term::master_weights) == (4 * trainable + 3) / 4);
  CHECK(term(b, Phase::optimizer_step, Term::master_weights) == (2 * trainable + 3) / 4);
  CHECK(term(b, Phase::optimizer_step, Term::optimizer_states) == term(a, Phase::optimizer_step, Term::optimizer_states));
  CHECK(term(c, Phase::optimizer_step, Term::optimizer_states) == (4 * trainable + 3) / 4);
  CHECK(term(b, Phase::optimizer_step, Term::transient) < term(a, Phase::optimizer_step, Term::transient));
  // ZeRO stage 0 has no such option (DeepSpeed asserts a stage 1-3): the knob changes nothing.
  TrainingSetup z0 = h;
  z0.parallel.zero_stage = 0;
  TrainingSetup z0s = s;
  z0s.parallel.zero_stage = 0;
  CHECK(estimate(z0).peak_bytes() == estimate(z0s).peak_bytes());
}

TEST_CASE("sequence parallelism shards the residual stream over the tensor-parallel ranks; full checkpointing keeps 1/tp of each input") {
  TrainingSetup s = base();
  s.model.num_layers = 8;
  s.parallel.num_gpus = 8;
  s.parallel.tensor_parallel = 8;
  s.checkpointing.mode = CheckpointMode::full;
  TrainingSetup sp = s;
  sp.parallel.sequence_parallel = true;
  const MemoryBreakdown a = estimate(s), b = estimate(sp);
  // Between layers each checkpointed layer keeps its input: N x h x 2 B whole, N / 8 x h x 2 B sharded.
  const int64_t input = 2 * 512 * 4096 * 2;
  CHECK(term(a, Phase::forward, Term::activations) - term(b, Phase::forward, Term::activations) >= 8 * (input - input / 8) - input);
  CHECK(phase(b, Phase::backward) < phase(a, Phase::backward));
  // Without tensor parallelism the flag changes nothing.
  TrainingSetup one = base(), one_sp = base();
  one_sp.parallel.sequence_parallel = true;
  CHECK(estimate(one).peak_bytes() == estimate(one_sp).peak_bytes());
}
