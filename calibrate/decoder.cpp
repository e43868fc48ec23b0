// The decoder the harness trains: built from a TrainingSetup, computing what HF transformers'
// eager code computes, op for op, so the measured memory is what users of that code get:
//   GPT-2 style (fused c_attn and the bool mask buffer): GPT2Model/GPT2Attention._attn/GPT2MLP with Conv1D (addmm),
//     split + permuted heads, / sqrt(d) by a 0-dim tensor, torch.where on a bool causal buffer,
//     softmax without dtype, dropout, HF NewGELU or F.gelu, tied lm_head.
//   Llama style (everything else): LlamaRMSNorm (or LayerNorm), RoPE with cos/sin in the model
//     dtype, repeat_kv copies for GQA, softmax(dtype=fp32).to(query.dtype), the 4-D causal mask
//     in the model dtype, SwiGLU (or a plain MLP), Mixtral's loop-over-experts MoE block.
//   Architecture features (ModelSpec fields, not model types): parallel attention + MLP off one
//     norm (PhiDecoderLayer), partial RoPE with the rot/pass split held as PhiAttention's locals,
//     Gemma-2's sandwich norms, (x * (1 + w)) fp32 RMSNorm, embedding normalizer, attention and
//     final-logit soft-capping and its two masks (causal, sliding window), multi-head latent
//     attention (DeepseekV3Attention with rope_interleave), DeepSeek-V3's MoE (fp32 sigmoid router
//     with group-limited top-k, fp32 combine, shared experts), an LM-head bias.
//   Loss: HF ForCausalLMLoss (logits.float(), labels padded with -100 and shifted, cross_entropy).
// Where it differs from HF: no KV cache (use_cache=False, as in training recipes); the MoE
// capacity factor caps each expert at ceil(cf * K * N / E) tokens (HF Mixtral is dropless);
// checkpointing is a reentrant autograd Function like torch.utils.checkpoint(use_reentrant=True).
#include <cmath>
#include <limits>

#include "calibrate/torch_internal.h"
#include "estimator/model.h"

namespace memplan::calibrate {

using torch::Tensor;
using torch::indexing::None;
using torch::indexing::Slice;

// ---- autocast ---------------------------------------------------------------------------------

bool AutocastGuard::enabled(c10::DeviceType d) {
#if MEMPLAN_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(d);
#else
  return d == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}
c10::ScalarType AutocastGuard::dtype(c10::DeviceType d) {
#if MEMPLAN_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(d);
#else
  return d == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}
static void set_autocast(c10::DeviceType d, bool on, c10::ScalarType dt) {
#if MEMPLAN_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(d, on);
  at::autocast::set_autocast_dtype(d, dt);
#else
  if (d == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(on);
    at::autocast::set_autocast_gpu_dtype(dt);
  } else {
    at::autocast::set_cpu_enabled(on);
    at::autocast::set_autocast_cpu_dtype(dt);
  }
#endif
}
AutocastGuard::AutocastGuard(c10::DeviceType d, c10::ScalarType dt)
    : dev_(d), prev_on_(enabled(d)), prev_dt_(dtype(d)) {
  set_autocast(d, true, dt);
  at::autocast::increment_nesting();
}
AutocastGuard::~AutocastGuard() {
  // Leaving the outermost autocast drops the cached half weight copies (Python __exit__).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(dev_, prev_on_, prev_dt_);
}

namespace {

// ---- activation checkpointing ----------------------------------------------------------------

// A layer as a function of its input and the shared tensors (mask, cos, sin).
using LayerFn = std::function<Tensor(const Tensor& x)>;

// torchtitan's per-op selective checkpointing (torchtitan/models/llama3/infra/parallelize.py,
// _apply_ac_to_transformer_block with ac_mode "selective" and selective_ac_option "op" @ v0.2.2,
// the policy of its activation_checkpoint.py L100-131): inside a checkpointed block every other
// matmul's output, the 1st, 3rd, ..., counted apart in the forward and in the recomputation, is
// kept from the forward (CheckpointPolicy.MUST_SAVE) and handed back instead of recomputed;
// everything else is recomputed. The harness applies it to its Linear layers (the block's
// aten.mm calls); SDPA's outputs, also on torchtitan's save list, are not cached here, so the
// per-op cases run eager attention (its bmm calls are recomputed, as torchtitan's are).
struct PerOpPolicy {
  bool recompute = false;
  int64_t mm_count = 0;
  std::vector<Tensor> kept;  // the saved matmul outputs, in forward order
  size_t next = 0;           // the next one the recomputation takes
};
thread_local PerOpPolicy* tls_per_op = nullptr;

// A kept matmul output put back into the recomputed graph: no kernel runs and no storage is
// made (the output is a view of the kept tensor); backward is aten::mm's (x and W saved).
struct KeptLinear : public torch::autograd::Function<KeptLinear> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor x, Tensor w, Tensor kept) {
    ctx->save_for_backward({x, w});
    return kept;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor& w = saved[1];
    const Tensor g = grad_out[0].reshape({-1, w.size(0)});
    Tensor gx = x.requires_grad() ? g.mm(w).view(x.sizes()) : Tensor();
    Tensor gw = w.requires_grad() ? g.t().mm(x.reshape({-1, w.size(1)})) : Tensor();
    return {gx, gw, Tensor()};
  }
};

struct CheckpointState {
  LayerFn fn;
  bool per_op = false;
  PerOpPolicy policy;
  torch::Tensor cpu_rng;
  c10::optional<c10::Device> cuda_dev;
  torch::Tensor cuda_rng;
  bool ac_cpu = false, ac_cuda = false;
  c10::ScalarType ac_cpu_dt = c10::kBFloat16, ac_cuda_dt = c10::kHalf;
};

Tensor generator_state(c10::Device d) {
  auto gen = at::globalContext().defaultGenerator(d);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
void set_generator_state(c10::Device d, const Tensor& s) {
  auto gen = at::globalContext().defaultGenerator(d);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(s);
}

// Liger-Kernel's fused linear cross-entropy (LigerFusedLinearCrossEntropyFunction,
// src/liger_kernel/ops/fused_linear_cross_entropy.py @ v0.5.10 L37-122), with its memory
// behaviour: the logits are never materialised whole. Forward walks the N rows in chunks of
// next_power_of_2(ceil(N / ceil(V / h))); each chunk's logits (chunk x V, the input's dtype) are
// upcast (`logits_chunk.float()`), turned into their gradient in place (Liger's Triton kernel
// works row by row; here one row at a time) and cast back to the input's dtype; then
// grad_input[chunk] = grad_logits @ W is written into a zeros_like(input) and grad_weight
// (zeros_like(W), when W trains) accumulates grad_logits^T @ x.
// Both are saved; backward hands them over (scaled only when the incoming gradient is not 1).
// Not under autocast: Liger's grad_weight update then casts the chunk's gradient to fp32 too.
struct FusedLinearCrossEntropy : public torch::autograd::Function<FusedLinearCrossEntropy> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor x, Tensor w, Tensor target) {
    const int64_t N = x.size(0), h = x.size(1), V = w.size(0);
    const int64_t inc = (V + h - 1) / h;
    int64_t chunk = 1;
    while (chunk < (N + inc - 1) / inc) chunk *= 2;
    chunk = std::min(chunk, N);
    const bool weight_grad = w.requires_grad();
    Tensor grad_input = torch::zeros_like(x);
    Tensor grad_weight = weight_grad ? torch::zeros_like(w) : Tensor();
    Tensor loss_1d = torch::zeros({N}, x.options().dtype(torch::kFloat));
    const int64_t counted = target.ne(-100).sum().item<int64_t>();
    const double scale = counted > 0 ? 1.0 / static_cast<double>(counted) : 0.0;
    for (int64_t start = 0; start < N; start += chunk) {
      const int64_t rows = std::min(chunk, N - start);
      const Tensor xc = x.narrow(0, start, rows);
      Tensor logits = torch::mm(xc, w.t()).to(torch::kFloat);  // chunk x V, upcast for the kernel
      const Tensor tc = target.narrow(0, start, rows);
      for (int64_t r = 0; r < rows; ++r) {  // the cross-entropy kernel, one row at a time
        Tensor row = logits[r];
        const int64_t y = tc[r].item<int64_t>();
        if (y == -100) {
          row.zero_();
          continue;
        }
        const Tensor lse = row.logsumexp(0);  // the chunk is fp32 already
        loss_1d[start + r] = (lse - row[y]) * scale;
        Tensor g = (row - lse).exp_();
        g[y] -= 1.0;
        row.copy_(g.mul_(scale));
      }
      logits = logits.to(x.scalar_type());
      grad_input.narrow(0, start, rows).copy_(torch::mm(logits, w));
      if (weight_grad) grad_weight.addmm_(logits.t(), xc);
    }
    const Tensor loss = loss_1d.sum();
    ctx->save_for_backward({grad_input, grad_weight});
    return loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    Tensor gi = saved[0], gw = saved[1];
    saved.clear();
    if (grad_out[0].item<double>() != 1.0) {  // Liger's element_mul_kernel: in place
      gi.mul_(grad_out[0]);
      if (gw.defined()) gw.mul_(grad_out[0]);
    }
    return {gi, gw, Tensor()};
  }
};

// torch.utils.checkpoint(use_reentrant=True) in C++ (docs/libtorch-notes.md §5): forward without grad,
// saving only the input and the parameters; backward restores the RNG and autocast state,
// recomputes with grad and runs an inner backward that accumulates the parameters' .grad.
struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, Tensor x, torch::TensorList params,
                        int64_t state_ptr) {
    auto* st = reinterpret_cast<CheckpointState*>(state_ptr);
    st->cpu_rng = generator_state(c10::Device(c10::kCPU));
    if (x.is_cuda()) {
      st->cuda_dev = x.device();
      st->cuda_rng = generator_state(x.device());
    }
    st->ac_cpu = AutocastGuard::enabled(c10::DeviceType::CPU);
    st->ac_cpu_dt = AutocastGuard::dtype(c10::DeviceType::CPU);
    st->ac_cuda = AutocastGuard::enabled(c10::DeviceType::CUDA);
    st->ac_cuda_dt = AutocastGuard::dtype(c10::DeviceType::CUDA);
    ctx->save_for_backward({x});
    ctx->saved_data["state"] = state_ptr;
    ctx->saved_data["n_params"] = static_cast<int64_t>(params.size());
    torch::NoGradGuard no_grad;
    if (!st->per_op) return st->fn(x);
    tls_per_op = &st->policy;
    Tensor out = st->fn(x);
    tls_per_op = nullptr;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    std::unique_ptr<CheckpointState> st(reinterpret_cast<CheckpointState*>(ctx->saved_data["state"].toInt()));
    const auto saved = ctx->get_saved_variables();
    Tensor x = saved[0].detach().requires_grad_(saved[0].requires_grad());
    const Tensor cpu_now = generator_state(c10::Device(c10::kCPU));
    set_generator_state(c10::Device(c10::kCPU), st->cpu_rng);
    Tensor cuda_now;
    if (st->cuda_dev) {
      cuda_now = generator_state(*st->cuda_dev);
      set_generator_state(*st->cuda_dev, st->cuda_rng);
    }
    Tensor out;
    {
      torch::AutoGradMode enable(true);
      std::unique_ptr<AutocastGuard> g1, g2;
      if (st->ac_cpu) g1 = std::make_unique<AutocastGuard>(c10::DeviceType::CPU, st->ac_cpu_dt);
      if (st->ac_cuda) g2 = std::make_unique<AutocastGuard>(c10::DeviceType::CUDA, st->ac_cuda_dt);
      if (st->per_op) {
        st->policy.recompute = true;
        st->policy.mm_count = 0;
        tls_per_op = &st->policy;
      }
      out = st->fn(x);
      tls_per_op = nullptr;
    }
    set_generator_state(c10::Device(c10::kCPU), cpu_now);
    if (st->cuda_dev) set_generator_state(*st->cuda_dev, cuda_now);
    torch::autograd::backward({out}, {grad_out[0]});
    out = Tensor();
    torch::autograd::variable_list grads;
    grads.push_back(x.requires_grad() ? x.grad() : Tensor());
    const int64_t np = ctx->saved_data["n_params"].toInt();
    for (int64_t i = 0; i < np; ++i) grads.emplace_back();  // accumulated into .grad already
    grads.emplace_back();                                    // state_ptr
    return grads;
  }
};

Tensor checkpoint(LayerFn fn, const Tensor& x, const std::vector<Tensor>& params, bool per_op) {
  auto* st = new CheckpointState();
  st->fn = std::move(fn);
  st->per_op = per_op;
  // Parameters are passed so the node exists even when x needs no grad (docs/libtorch-notes.md §5.1).
  return CheckpointFunction::apply(x, torch::TensorList(params), reinterpret_cast<int64_t>(st));
}

// ---- parameters and ops ---------------------------------------------------------------------

// torch.finfo(dtype).min for the dtypes the harness builds (bf16, fp16, else fp32).
double finfo_min(c10::ScalarType t) {
  if (t == torch::kBFloat16) return -3.3895313892515355e38;
  if (t == torch::kHalf) return -65504.0;
  return static_cast<double>(std::numeric_limits<float>::lowest());
}

// The parameters' dtype: 16-bit for the pure half regimes (no fp32 master copy), fp32 otherwise
// (autocast casts per op).
c10::ScalarType weight_dtype(Precision p) {
  if (p == Precision::bf16) return torch::kBFloat16;
  if (p == Precision::fp16) return torch::kHalf;
  return torch::kFloat;
}

// Parameters of the model. `trainable` is decided per tensor (LoRA freezes the base; --freeze-
// layers freezes whole layers); only trainable ones reach the optimizer.
struct Params {
  std::vector<Tensor> all;        // trainable (frozen ones live only in their module)
  torch::Device device;
  c10::ScalarType dtype;
  double std = 0.02;  // HF initializer_range
  bool trainable = true;  // for the tensors made next

  Tensor make(std::vector<int64_t> shape, bool ones = false, bool zero = false, c10::optional<c10::ScalarType> as = c10::nullopt) {
    Tensor t;
    const auto dt = as ? *as : dtype;
    {
      torch::NoGradGuard ng;
      auto o = torch::TensorOptions().device(device).dtype(torch::kFloat);
      t = ones ? torch::ones(shape, o) : zero ? torch::zeros(shape, o) : torch::randn(shape, o).mul_(std);
      if (dt != torch::kFloat) t = t.to(dt);
    }
    if (trainable) {
      t.requires_grad_(true);
      all.push_back(t);
    }
    return t;
  }
};

// A PEFT LoRA adapter on a linear: result + lora_B(lora_A(dropout(x.to(A.dtype)))) * scaling,
// then .to(result's dtype) (peft/tuners/lora/layer.py Linear.forward). Adapters are fp32
// (PEFT autocast_adapter_dtype), or in the model's dtype with finetune.adapter_fp32 false
// (torchtune, LitGPT), and trainable; B starts at zero as in PEFT.
struct Lora {
  Tensor a, b;
  double scaling = 1.0, dropout = 0.0;
  bool on() const { return a.defined(); }
  void make(Params& p, int64_t in, int64_t out, const Finetune& f) {
    const bool was = p.trainable;
    p.trainable = true;
    const c10::ScalarType dt = f.adapter_fp32 ? torch::kFloat : p.dtype;
    a = p.make({f.lora_rank, in}, false, false, dt);
    b = p.make({out, f.lora_rank}, false, true, dt);
    p.trainable = was;
    scaling = f.lora_alpha / static_cast<double>(f.lora_rank);
    dropout = f.lora_dropout;
  }
  Tensor apply(const Tensor& x, Tensor result) const {
    const auto result_dtype = result.scalar_type();
    Tensor h = x.to(a.scalar_type());
    if (dropout > 0) h = torch::dropout(h, dropout, true);
    h = torch::linear(h, a);
    h = torch::linear(h, b);
    h = h * scaling;
    result = result + h;
    h = Tensor();
    return result.to(result_dtype);
  }
};

// HF Conv1D: addmm(bias, x.view(-1, in), weight) with weight (in, out).
struct Conv1D {
  Tensor w, b;
  Lora lora;
  Conv1D(Params& p, int64_t in, int64_t out) : w(p.make({in, out})), b(p.make({out}, false, true)) {}
  Tensor operator()(const Tensor& x) const {
    auto size = x.sizes().vec();
    size.back() = w.size(1);
    Tensor y = torch::addmm(b, x.view({-1, x.size(-1)}), w).view(size);
    return lora.on() ? lora.apply(x, y) : y;
  }
};

// nn.Linear: weight (out, in), optional bias.
struct Linear {
  Tensor w, b;
  Lora lora;
  Linear() = default;
  Linear(Params& p, int64_t in, int64_t out, bool bias) : w(p.make({out, in})) {
    if (bias) b = p.make({out}, false, true);
  }
  Tensor operator()(const Tensor& x) const {
    if (PerOpPolicy* pol = tls_per_op; pol && ++pol->mm_count % 2 == 1) {  // kept by the per-op policy
      if (!pol->recompute) {
        pol->kept.push_back(torch::linear(x, w, b));
        return pol->kept.back();
      }
      Tensor kept = std::move(pol->kept.at(pol->next++));  // the policy's cache lets go of it here
      return KeptLinear::apply(x, w, kept);
    }
    Tensor y = torch::linear(x, w, b);
    return lora.on() ? lora.apply(x, y) : y;
  }
};

struct Norm {
  bool rms = false;
  bool fp32_weight = false;  // GemmaRMSNorm: (x * (1 + w.float())).type_as(x)
  Tensor w, b;
  double eps = 1e-5;
  Norm() = default;
  Norm(Params& p, int64_t h, bool rms_norm, bool bias, bool weight_fp32 = false)
      : rms(rms_norm), fp32_weight(weight_fp32), w(p.make({h}, true)) {
    if (!rms && bias) b = p.make({h}, false, true);
  }
  bool on() const { return w.defined(); }
  Tensor operator()(const Tensor& x) const {
    if (!rms) return torch::layer_norm(x, {x.size(-1)}, w, b, eps);
    // LlamaRMSNorm.forward, one statement per line as HF writes it.
    const auto in_dtype = x.scalar_type();
    Tensor hs = x.to(torch::kFloat);
    Tensor var = hs.pow(2).mean(-1, /*keepdim=*/true);
    hs = hs * torch::rsqrt(var + eps);
    if (fp32_weight) {  // GemmaRMSNorm.forward: output * (1.0 + self.weight.float()), then type_as(x)
      Tensor out = hs * (1.0 + w.to(torch::kFloat));
      hs = Tensor();
      return out.to(in_dtype);
    }
    return w * hs.to(in_dtype);
  }
};

// HF NewGELUActivation ("gelu_new"):
//   0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))
// Python frees each intermediate as soon as the next op has used it and evaluates 0.5 * input
// first; C++ would keep a whole expression's temporaries to the end of the statement, so the
// chain is spelled out to give the same lifetimes.
Tensor gelu_new(const Tensor& x) {
  const Tensor half = 0.5 * x;
  Tensor t = torch::pow(x, 3.0);
  t = 0.044715 * t;
  t = x + t;
  t = std::sqrt(2.0 / M_PI) * t;
  t = torch::tanh(t);
  t = 1.0 + t;
  return half * t;
}
Tensor activation(const ModelSpec& m, const Tensor& x) {
  switch (m.activation) {
    case Activation::gelu: return torch::gelu(x);
    case Activation::gelu_tanh: return torch::gelu(x, "tanh");
    case Activation::gelu_new: return gelu_new(x);
    case Activation::silu: return torch::silu(x);
    case Activation::relu: return torch::relu(x);
  }
  return x;
}

struct Mlp {
  bool gated = false;
  Linear gate, up, down;
  Mlp() = default;
  Mlp(Params& p, const ModelSpec& m, int64_t width, bool bias, const TrainingSetup& s, bool expert) : gated(m.gated_mlp) {
    if (gated) gate = Linear(p, m.hidden_size, width, bias);
    up = Linear(p, m.hidden_size, width, bias);
    down = Linear(p, width, m.hidden_size, bias);
    auto adapt = [&](Linear& l, Role r, int64_t in, int64_t out) { if (lora_on(s, r)) l.lora.make(p, in, out, s.finetune); };
    if (gated) adapt(gate, expert ? Role::expert_gate : Role::gate, m.hidden_size, width);
    adapt(up, expert ? Role::expert_up : (gated ? Role::up : Role::fc_in), m.hidden_size, width);
    adapt(down, expert ? Role::expert_down : Role::down, width, m.hidden_size);
  }
  // LlamaMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)), intermediates freed as Python does.
  Tensor operator()(const ModelSpec& m, const Tensor& x) const {
    if (!gated) {
      Tensor t = up(x);
      t = activation(m, t);
      return down(t);
    }
    Tensor t = gate(x);
    t = activation(m, t);
    Tensor u = up(x);
    t = t * u;
    u = Tensor();
    return down(t);
  }
};

// Tensors built once per forward and shared by all layers.
struct Shared {
  Tensor mask;      // Llama: (b, 1, s, s) additive causal mask in the model dtype
  Tensor sliding;   // the sliding-window mask, when sliding and global layers mix (Gemma-2)
  Tensor cos, sin;  // (1, 1, s, d) in the model dtype
};

Tensor rotate_half(const Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  const Tensor x1 = x.index({"...", Slice(None, half)});
  const Tensor x2 = x.index({"...", Slice(half, None)});
  const Tensor neg = -x2;
  return torch::cat({neg, x1}, -1);
}

// apply_rotary_pos_emb: (q * cos) + (rotate_half(q) * sin), with Python's lifetimes.
Tensor apply_rope(const Tensor& q, const Shared& sh) {
  const Tensor a = q * sh.cos;
  Tensor r = rotate_half(q);
  r = r * sh.sin;
  return a + r;
}

// HF repeat_kv: (b, k, s, d) -> (b, k * n_rep, s, d) via expand + reshape (a copy).
Tensor repeat_kv(const Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const auto b = x.size(0), k = x.size(1), s = x.size(2), d = x.size(3);
  return x.index({Slice(), Slice(), None, Slice(), Slice()}).expand({b, k, n_rep, s, d}).reshape({b, k * n_rep, s, d});
}

class Model : public Decoder {
 public:
  Model(const TrainingSetup& s, const torch::Device& dev)
      : s_(s), m_(s.model), p_{{}, dev, weight_dtype(s.precision)} {
    const int64_t h = m_.hidden_size, V = m_.vocab_size;
    gpt2_ = m_.fused_qkv && m_.causal_mask == MaskKind::bool_buffer;  // GPT-2's block: Conv1D c_attn, bool mask buffer
    const bool lora = s.finetune.mode != FinetuneMode::full;
    // PEFT's modules_to_save (LoRA with the embeddings or the head trained): the module it copied
    // stays, frozen, beside the trained copy (ModulesToSaveWrapper.update); tied embeddings aside.
    const bool peft_copies = lora && !m_.tie_word_embeddings;
    if (peft_copies && s.finetune.train_embeddings) {
      p_.trainable = false;
      wte_original_ = p_.make({V, h});
    }
    p_.trainable = embeddings_trainable(s);
    wte_ = p_.make({V, h});
    if (m_.positions == PositionKind::learned) wpe_ = p_.make({m_.max_position_embeddings, h});
    const bool rms = m_.norm == NormKind::rms_norm;
    auto adapt = [&](Lora& lo, Role r, int64_t in, int64_t out) { if (lora_on(s, r)) lo.make(p_, in, out, s.finetune); };
    for (int64_t i = 0; i < m_.num_layers; ++i) {
      p_.trainable = !lora && !layer_frozen(s, i);
      Layer l;
      const bool fp32w = m_.norm_weight_fp32;
      if (m_.pre_norms) l.ln1 = Norm(p_, h, rms, m_.norm_bias, fp32w);
      if (m_.pre_norms && !m_.parallel_shared_norm) l.ln2 = Norm(p_, h, rms, m_.norm_bias, fp32w);
      if (m_.post_norms) {
        l.ln_post_attn = Norm(p_, h, rms, m_.norm_bias, fp32w);
        l.ln_post_ff = Norm(p_, h, rms, m_.norm_bias, fp32w);
      }
      // Gemma-2 layer_types: sliding on even layers, global every global_attention_every-th.
      l.sliding = m_.sliding_window > 0 && m_.global_attention_every > 0 && (i + 1) % m_.global_attention_every != 0;
      const int64_t a = m_.num_attention_heads, k = m_.num_key_value_heads, d = m_.head_dim;
      if (gpt2_) {
        l.c_attn = std::make_unique<Conv1D>(p_, h, (a + 2 * k) * d);
        l.c_proj = std::make_unique<Conv1D>(p_, a * d, h);
        l.c_fc = std::make_unique<Conv1D>(p_, h, m_.intermediate_size);
        l.c_mlp_proj = std::make_unique<Conv1D>(p_, m_.intermediate_size, h);
        adapt(l.c_attn->lora, Role::qkv, h, (a + 2 * k) * d);
        adapt(l.c_proj->lora, Role::o, a * d, h);
        adapt(l.c_fc->lora, Role::fc_in, h, m_.intermediate_size);
        adapt(l.c_mlp_proj->lora, Role::down, m_.intermediate_size, h);
        // GPT2Attention.bias: tril bool (1, 1, P, P), a non-persistent buffer.
        l.causal = torch::tril(torch::ones({m_.max_position_embeddings, m_.max_position_embeddings},
                                           torch::TensorOptions().dtype(torch::kBool).device(dev)))
                       .view({1, 1, m_.max_position_embeddings, m_.max_position_embeddings});
      } else if (m_.mla()) {
        // DeepseekV3Attention.__init__
        const int64_t qd = m_.qk_head_dim();
        if (m_.q_lora_rank > 0) {
          l.q_a = Linear(p_, h, m_.q_lora_rank, m_.qkv_bias);
          l.q_a_norm = Norm(p_, m_.q_lora_rank, true, false);
          l.q_b = Linear(p_, m_.q_lora_rank, a * qd, false);
        } else {
          l.q = Linear(p_, h, a * qd, false);
        }
        l.kv_a = Linear(p_, h, m_.kv_lora_rank + m_.qk_rope_head_dim, m_.qkv_bias);
        l.kv_a_norm = Norm(p_, m_.kv_lora_rank, true, false);
        l.kv_b = Linear(p_, m_.kv_lora_rank, a * (m_.qk_nope_head_dim + m_.v_head_dim), false);
        l.o = Linear(p_, a * m_.v_head_dim, h, m_.o_bias);
      } else {
        l.q = Linear(p_, h, a * d, m_.qkv_bias);
        l.k = Linear(p_, h, k * d, m_.qkv_bias);
        l.v = Linear(p_, h, k * d, m_.qkv_bias);
        l.o = Linear(p_, a * d, h, m_.o_bias);
        adapt(l.q.lora, Role::q, h, a * d);
        adapt(l.k.lora, Role::k, h, k * d);
        adapt(l.v.lora, Role::v, h, k * d);
        adapt(l.o.lora, Role::o, a * d, h);
        // Qwen3Attention/Gemma3Attention.__init__: q_norm, k_norm over head_dim, after o_proj;
        // Olmo2Attention.__init__: over the projections' full width (heads x head_dim).
        if (m_.qk_norm == QkNorm::per_head) {
          l.q_norm = Norm(p_, d, true, false, fp32w);
          l.k_norm = Norm(p_, d, true, false, fp32w);
        } else if (m_.qk_norm == QkNorm::full_width) {
          l.q_norm = Norm(p_, a * d, true, false, fp32w);
          l.k_norm = Norm(p_, k * d, true, false, fp32w);
        }
      }
      if (!gpt2_) {
        l.moe = m_.is_moe_layer(i);
        if (l.moe) {
          l.router = Linear(p_, h, m_.num_experts, false);
          for (int64_t e = 0; e < m_.num_experts; ++e) l.experts.emplace_back(p_, m_, m_.expert_width(), false, s, true);
          if (m_.num_shared_experts > 0 || m_.shared_expert_intermediate_size > 0) {
            const int64_t fs = m_.shared_expert_intermediate_size > 0 ? m_.shared_expert_intermediate_size
                                                                      : m_.num_shared_experts * m_.expert_width();
            l.shared = Mlp(p_, m_, fs, false, s, false);
          }
          if (m_.router == RouterKind::sigmoid)
            l.score_bias = torch::zeros({m_.num_experts}, torch::TensorOptions().dtype(torch::kFloat).device(dev));
        } else {
          l.mlp = Mlp(p_, m_, m_.intermediate_size, m_.mlp_bias, s, false);
        }
      }
      layers_.push_back(std::move(l));
    }
    p_.trainable = !lora;
    if (m_.final_norm) ln_f_ = Norm(p_, h, rms, m_.norm_bias, m_.norm_weight_fp32);
    if (peft_copies && s.finetune.train_head) {
      p_.trainable = false;
      lm_head_original_ = p_.make({V, h});
    }
    p_.trainable = head_trainable(s);
    if (!m_.tie_word_embeddings) lm_head_ = p_.make({V, h});
    if (m_.lm_head_bias) lm_head_b_ = p_.make({V}, false, true);
    if (m_.positions == PositionKind::rotary || m_.mla()) {
      // LlamaRotaryEmbedding.inv_freq (a buffer, fp32) over the rotated width: int(d * partial_rotary_factor),
      // MLA's qk_rope_head_dim.
      const int64_t d = m_.mla() ? m_.qk_rope_head_dim
                                 : static_cast<int64_t>(static_cast<double>(m_.head_dim) * m_.rotary_fraction);
      inv_freq_ = 1.0 / torch::pow(10000.0, torch::arange(0, d, 2, torch::TensorOptions().dtype(torch::kFloat).device(dev)) / d);
    }
  }

  std::vector<Tensor> parameters() override { return p_.all; }

  Tensor loss(const Tensor& ids, const Tensor& labels, std::vector<Tensor>* kept) override {
    // Labels padded with -100 and shifted (HF's ForCausalLMLoss; torchtune's datasets shift them
    // the same way), made after the forward as the loss makes them.
    auto shifted = [&] { return torch::constant_pad_nd(labels, {0, 1}, -100).index({Slice(), Slice(1, None)}).contiguous(); };
    namespace F = torch::nn::functional;
    if (s_.runtime.loss == LossImpl::chunked) {
      std::vector<Tensor> chunks = chunked_output(body(ids));
      return chunked_loss(chunks, shifted(), kept);
    }
    if (s_.runtime.loss == LossImpl::fused_linear) {
      // Liger's LigerForCausalLMLoss (src/liger_kernel/transformers/model/loss_utils.py @ v0.5.10):
      // the hidden states viewed as N x h, the labels padded and shifted, no logits returned.
      const Tensor x = body(ids);
      return FusedLinearCrossEntropy::apply(x.view({-1, x.size(-1)}), m_.tie_word_embeddings ? wte_ : lm_head_, shifted().view({-1}));
    }
    const Tensor logits = head(body(ids));
    if (kept) kept->push_back(logits);
    // ForCausalLMLoss: upcast, pad labels with -100, shift, flatten, cross-entropy.
    const int64_t V = logits.size(-1);
    const Tensor lf = logits.to(torch::kFloat);
    const Tensor shift = shifted();
    return F::cross_entropy(lf.view({-1, V}), shift.view({-1}), F::CrossEntropyFuncOptions().ignore_index(-100));
  }

 private:
  // torchtune's chunked output and CEWithChunkedOutputLoss (torchtune/modules/transformer.py
  // TransformerDecoder.chunked_output and modules/loss/ce_chunked_output_loss.py @ v0.6.1):
  // the final hidden states are split along the sequence into runtime.loss_chunks pieces
  // (hidden.chunk(k, dim=1)), or LitGPT's pieces of loss_chunk_tokens (litgpt/model.py
  // lm_head_chunk_size, hidden.split(n, dim=1) @ v0.5.7); the head runs on each and the model
  // returns the list; the loss then takes each chunk (torchtune: .float(), LitGPT: as is) through
  // a summed cross-entropy and divides by the number of labelled tokens.
  std::vector<Tensor> chunked_output(const Tensor& x) const {
    const auto& r = s_.runtime;
    std::vector<Tensor> chunks;
    for (const Tensor& p : r.loss_chunk_tokens > 0 ? x.split(r.loss_chunk_tokens, 1) : x.chunk(r.loss_chunks, 1))
      chunks.push_back(head(p));
    return chunks;
  }

  Tensor chunked_loss(std::vector<Tensor>& chunks, const Tensor& shift, std::vector<Tensor>* kept) const {
    namespace F = torch::nn::functional;
    const auto& r = s_.runtime;
    const std::vector<Tensor> label_chunks =
        r.loss_chunk_tokens > 0 ? shift.split(r.loss_chunk_tokens, 1) : shift.chunk(r.loss_chunks, 1);
    const int64_t V = m_.vocab_size;
    Tensor total;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const Tensor lg = chunks[i].reshape({-1, V});
      const Tensor lf = r.loss_upcast ? lg.to(torch::kFloat) : lg;
      const Tensor li = F::cross_entropy(lf, label_chunks[i].reshape({-1}),
                                         F::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
      total = total.defined() ? total + li : li;
    }
    if (kept) *kept = std::move(chunks);
    return total / shift.ne(-100).sum();
  }

  struct Layer {
    Norm ln1, ln2;
    Norm ln_post_attn, ln_post_ff;  // Gemma-2 sandwich norms
    std::unique_ptr<Conv1D> c_attn, c_proj, c_fc, c_mlp_proj;
    Tensor causal;
    Linear q, k, v, o;
    Linear q_a, q_b, kv_a, kv_b;  // multi-head latent attention
    Norm q_a_norm, kv_a_norm;
    Norm q_norm, k_norm;          // q/k normalisation (Qwen3, Gemma-3: per head; OLMo-2: full width)
    bool sliding = false;         // uses the sliding-window mask
    Mlp mlp;
    bool moe = false;
    Linear router;
    Tensor score_bias;            // DeepSeek-V3 e_score_correction_bias (a buffer)
    std::vector<Mlp> experts;
    Mlp shared;                   // shared experts (one MLP of their summed width)
    // The layer's trainable tensors (a checkpoint passes them so its node exists).
    std::vector<Tensor> params() const {
      std::vector<Tensor> out;
      auto add = [&](const Tensor& t) { if (t.defined() && t.requires_grad()) out.push_back(t); };
      auto add_lora = [&](const Lora& lo) { add(lo.a); add(lo.b); };
      for (const Norm* n : {&ln1, &ln2, &ln_post_attn, &ln_post_ff, &q_a_norm, &kv_a_norm, &q_norm, &k_norm}) {
        add(n->w);
        add(n->b);
      }
      for (const auto* c : {c_attn.get(), c_proj.get(), c_fc.get(), c_mlp_proj.get()})
        if (c) { add(c->w); add(c->b); add_lora(c->lora); }
      for (const Linear* l : {&q, &k, &v, &o, &q_a, &q_b, &kv_a, &kv_b, &router, &mlp.gate, &mlp.up, &mlp.down, &shared.gate,
                              &shared.up, &shared.down}) { add(l->w); add(l->b); add_lora(l->lora); }
      for (const Mlp& e : experts)
        for (const Linear* l : {&e.gate, &e.up, &e.down}) { add(l->w); add(l->b); add_lora(l->lora); }
      return out;
    }
  };

  // Training mode throughout (model.train()).
  Tensor dropout(const Tensor& x, double p) const { return p > 0 ? torch::dropout(x, p, /*train=*/true) : x; }

  Tensor body(const Tensor& ids) {  // embeddings, the layers and the final norm
    const int64_t b = ids.size(0), sq = ids.size(1);
    const auto dev = ids.device();
    // inputs_embeds (and GPT-2's position_embeds) are locals of the model's forward: they stay
    // alive through every layer until the model body returns.
    Tensor inputs_embeds = torch::embedding(wte_, ids);
    Tensor position_embeds;
    Tensor x = inputs_embeds;
    if (wpe_.defined()) {
      const Tensor pos = torch::arange(sq, torch::TensorOptions().dtype(torch::kLong).device(dev)).unsqueeze(0);
      position_embeds = torch::embedding(wpe_, pos);
      x = inputs_embeds + position_embeds;
    }
    // GemmaModel: hidden_states * normalizer, a 0-dim tensor of sqrt(h) in the hidden dtype.
    if (m_.scale_embeddings) x = x * torch::full({}, std::sqrt(static_cast<double>(m_.hidden_size)), x.options());
    x = dropout(x, m_.embedding_dropout);
    Shared sh;
    if (!gpt2_) {
      const auto mdt = x.scalar_type();
      // LlamaModel._update_causal_mask with an all-ones attention_mask: the (s, s) triangle of
      // finfo.min, expanded to (b, 1, s, s) and cloned. The sdpa path gets None instead when the
      // batch has no padding (AttentionMaskConverter._ignore_causal_mask_sdpa).
      if (s_.attention == AttentionImpl::eager || s_.runtime.sdpa_mask == SdpaMask::tensor) {
        Tensor tri = torch::full({sq, sq}, finfo_min(mdt), torch::TensorOptions().dtype(mdt).device(dev)).triu(1);
        sh.mask = tri.index({None, None}).expand({b, 1, sq, sq}).clone();
        if (m_.sliding_window > 0 && m_.global_attention_every > 0) {
          // create_sliding_window_causal_mask: also masks keys more than `window` behind.
          Tensor sw = torch::full({sq, sq}, finfo_min(mdt), torch::TensorOptions().dtype(mdt).device(dev)).tril(-m_.sliding_window);
          sw = sw + tri;
          sh.sliding = sw.index({None, None}).expand({b, 1, sq, sq}).clone();
        }
      }
      if (inv_freq_.defined()) {
        // LlamaRotaryEmbedding.forward with position_ids (1, s): cos/sin (1, s, d) in x.dtype.
        const Tensor pos = torch::arange(sq, torch::TensorOptions().dtype(torch::kFloat).device(dev));
        const Tensor freqs = torch::outer(pos, inv_freq_);
        const Tensor emb = torch::cat({freqs, freqs}, -1).unsqueeze(0);
        sh.cos = emb.cos().to(mdt).unsqueeze(1);
        sh.sin = emb.sin().to(mdt).unsqueeze(1);
      }
    }
    for (int64_t i = 0; i < m_.num_layers; ++i) {
      Layer& l = layers_[i];
      LayerFn fn = [this, &l, sh](const Tensor& in) { return gpt2_ ? gpt2_block(l, in) : llama_block(l, in, sh); };
      // The mask and cos/sin are inputs of HF's checkpointed layer call, so the reentrant
      // checkpoint keeps them until its backward; the closure holding them does the same.
      if (s_.checkpointing.layer_checkpointed(i))
        x = checkpoint(fn, x, l.params(), s_.checkpointing.mode == CheckpointMode::selective_op);
      else x = fn(x);
    }
    if (m_.final_norm) x = ln_f_(x);
    // The model body returns: its locals (mask, cos/sin, embeddings) go unless something saved them.
    sh = Shared();
    inputs_embeds = position_embeds = Tensor();
    return x;
  }

  // The LM head on the final hidden states (or a chunk of them).
  Tensor head(const Tensor& x) const {
    Tensor logits = torch::linear(x, m_.tie_word_embeddings ? wte_ : lm_head_, lm_head_b_);
    if (m_.final_softcap > 0) {  // Gemma2ForCausalLM: logits / cap -> tanh -> * cap
      logits = logits / m_.final_softcap;
      logits = torch::tanh(logits);
      logits = logits * m_.final_softcap;
    }
    return logits;
  }

  // GPT2Block.forward, GPT2Attention.forward/_attn, GPT2MLP.forward, statement by statement so
  // tensors live exactly as long as HF's Python variables hold them.
  Tensor gpt2_block(const Layer& l, const Tensor& x) const {
    Tensor residual = x;
    Tensor hs = l.ln1(x);
    Tensor attn_output = gpt2_attention(l, hs);
    hs = attn_output + residual;
    attn_output = Tensor();
    residual = hs;
    hs = l.ln2(hs);
    Tensor ff = (*l.c_fc)(hs);
    ff = activation(m_, ff);
    ff = (*l.c_mlp_proj)(ff);
    ff = dropout(ff, m_.hidden_dropout);
    hs = residual + ff;
    return hs;
  }

  Tensor gpt2_attention(const Layer& l, const Tensor& x) const {
    const int64_t b = x.size(0), sq = x.size(1), h = m_.hidden_size, a = m_.num_attention_heads, d = m_.head_dim;
    auto qkv = (*l.c_attn)(x).split(h, 2);
    auto split_heads = [&](const Tensor& t) { return t.view({b, sq, a, d}).permute({0, 2, 1, 3}); };
    const Tensor query = split_heads(qkv[0]), key = split_heads(qkv[1]), value = split_heads(qkv[2]);
    // _attn
    Tensor w = torch::matmul(query, key.transpose(-1, -2));
    w = w / torch::full({}, std::sqrt(static_cast<double>(d)), w.options());
    const Tensor causal = l.causal.index({Slice(), Slice(), Slice(0, sq), Slice(0, sq)});
    w = torch::where(causal, w, torch::full({}, finfo_min(w.scalar_type()), w.options()));
    w = torch::softmax(w, -1);
    w = w.to(value.scalar_type());
    w = dropout(w, m_.attention_dropout);
    Tensor o = torch::matmul(w, value);
    // _merge_heads, c_proj, resid_dropout (attn_weights stays referenced until forward returns)
    o = o.permute({0, 2, 1, 3}).contiguous().view({b, sq, a * d});
    o = (*l.c_proj)(o);
    o = dropout(o, m_.hidden_dropout);
    return o;
  }

  // LlamaDecoderLayer.forward; Gemma2DecoderLayer's sandwich norms; PhiDecoderLayer's parallel
  // attention and MLP off one norm.
  Tensor llama_block(const Layer& l, const Tensor& x, const Shared& sh) const {
    Tensor residual = x;
    Tensor hs = l.ln1.on() ? l.ln1(x) : x;
    Tensor self_attn_weights;
    if (m_.parallel_residual) {
      Tensor attn_outputs = attention(l, hs, sh, &self_attn_weights);
      attn_outputs = dropout(attn_outputs, m_.hidden_dropout);
      const Tensor h2 = m_.parallel_shared_norm ? hs : l.ln2(x);
      Tensor ff = l.moe ? moe(l, h2) : l.mlp(m_, h2);
      ff = dropout(ff, m_.hidden_dropout);
      // attn_outputs + feed_forward_hidden_states + residual: the locals live until the return.
      return (attn_outputs + ff) + residual;
    }
    hs = attention(l, hs, sh, &self_attn_weights);
    if (l.ln_post_attn.on()) hs = l.ln_post_attn(hs);
    hs = dropout(hs, m_.hidden_dropout);
    hs = residual + hs;
    residual = hs;
    if (l.ln2.on()) hs = l.ln2(hs);
    hs = l.moe ? moe(l, hs) : l.mlp(m_, hs);
    if (l.ln_post_ff.on()) hs = l.ln_post_ff(hs);
    hs = dropout(hs, m_.hidden_dropout);
    hs = residual + hs;
    return hs;
  }

  // PhiAttention's partial RoPE: q[..., :rot] rotated, cat with q[..., rot:]; the rot and pass
  // parts stay referenced by the forward's locals (`rot`, `pass`) until the attention returns.
  Tensor partial_rope(const Tensor& q, const Shared& sh, Tensor* rot, Tensor* pass) const {
    const int64_t r = sh.cos.size(-1);
    *rot = q.index({"...", Slice(None, r)});
    *pass = q.index({"...", Slice(r, None)});
    *rot = apply_rope(*rot, sh);
    return torch::cat({*rot, *pass}, -1);
  }

  // DeepseekV3Attention.forward (q_lora_rank, kv_lora_rank, rope_interleave) + eager attention.
  Tensor mla_attention(const Layer& l, const Tensor& x, const Shared& sh, Tensor* weights) const {
    const int64_t b = x.size(0), sq = x.size(1), a = m_.num_attention_heads;
    const int64_t nope = m_.qk_nope_head_dim, rope = m_.qk_rope_head_dim, vd = m_.v_head_dim;
    Tensor q_states;
    if (m_.q_lora_rank > 0) {
      Tensor t = l.q_a(x);
      Tensor tn = l.q_a_norm(t);
      t = Tensor();
      q_states = l.q_b(tn);
    } else {
      q_states = l.q(x);
    }
    q_states = q_states.view({b, sq, -1, nope + rope}).transpose(1, 2);
    auto qs = torch::split_with_sizes(q_states, {nope, rope}, -1);
    Tensor q_pass = qs[0], q_rot = qs[1];
    qs.clear();
    Tensor compressed_kv = l.kv_a(x);
    auto ks = torch::split_with_sizes(compressed_kv, {m_.kv_lora_rank, rope}, -1);
    Tensor k_pass = ks[0], k_rot = ks[1];
    ks.clear();
    {
      Tensor kn = l.kv_a_norm(k_pass);
      k_pass = l.kv_b(kn).view({b, sq, -1, nope + vd}).transpose(1, 2);
    }
    auto kv = torch::split_with_sizes(k_pass, {nope, vd}, -1);
    k_pass = kv[0];
    Tensor value_states = kv[1];
    kv.clear();
    k_rot = k_rot.view({b, 1, sq, rope});
    {
      // apply_rotary_pos_emb_interleave: view -> transpose -> reshape (a copy), then RoPE.
      Tensor qi = q_rot.view({b, a, sq, rope / 2, 2}).transpose(4, 3).reshape({b, a, sq, rope});
      Tensor ki = k_rot.view({b, 1, sq, rope / 2, 2}).transpose(4, 3).reshape({b, 1, sq, rope});
      Tensor qe = apply_rope(qi, sh);
      qi = Tensor();
      Tensor ke = apply_rope(ki, sh);
      ki = Tensor();
      q_rot = qe;
      k_rot = ke;
    }
    k_rot = k_rot.expand({b, a, sq, rope});
    Tensor query_states = torch::cat({q_pass, q_rot}, -1);
    Tensor key_states = torch::cat({k_pass, k_rot}, -1);
    Tensor w = torch::matmul(query_states, key_states.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(nope + rope)));
    w = w + sh.mask.index({Slice(), Slice(), Slice(), Slice(None, key_states.size(-2))});
    w = torch::softmax(w, -1, torch::kFloat).to(query_states.scalar_type());
    w = dropout(w, m_.attention_dropout);
    Tensor o = torch::matmul(w, value_states);
    o = o.transpose(1, 2).contiguous();
    *weights = w;
    o = o.reshape({b, sq, -1}).contiguous();
    return l.o(o);
  }

  // LlamaAttention.forward + eager_attention_forward
  Tensor attention(const Layer& l, const Tensor& x, const Shared& sh, Tensor* weights) const {
    if (m_.mla()) return mla_attention(l, x, sh, weights);
    const int64_t b = x.size(0), sq = x.size(1), a = m_.num_attention_heads, kv = m_.num_key_value_heads, d = m_.head_dim;
    Tensor q, k;
    if (m_.qk_norm == QkNorm::per_head) {
      // Qwen3Attention.forward: self.q_norm(self.q_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
      q = l.q_norm(l.q(x).view({b, sq, -1, d})).transpose(1, 2);
      k = l.k_norm(l.k(x).view({b, sq, -1, d})).transpose(1, 2);
    } else if (m_.qk_norm == QkNorm::full_width) {
      // Olmo2Attention.forward: self.q_norm(self.q_proj(hidden_states)), then view and transpose
      q = l.q_norm(l.q(x)).view({b, sq, -1, d}).transpose(1, 2);
      k = l.k_norm(l.k(x)).view({b, sq, -1, d}).transpose(1, 2);
    } else {
      q = l.q(x).view({b, sq, -1, d}).transpose(1, 2);
      k = l.k(x).view({b, sq, -1, d}).transpose(1, 2);
    }
    Tensor v = l.v(x).view({b, sq, -1, d}).transpose(1, 2);
    Tensor q_rot, q_pass, k_rot, k_pass;  // PhiAttention's locals (partial RoPE)
    if (sh.cos.defined() && sh.cos.size(-1) < d) {
      q = partial_rope(q, sh, &q_rot, &q_pass);
      k = partial_rope(k, sh, &k_rot, &k_pass);
    } else if (sh.cos.defined()) {
      q = apply_rope(q, sh);
      k = apply_rope(k, sh);
    }
    const Tensor& mask = l.sliding ? sh.sliding : sh.mask;
    Tensor o;
#if MEMPLAN_TORCH_AT_LEAST(2, 0)
    if (s_.attention != AttentionImpl::eager) o = sdpa(q, k, v, sh);
#endif
    if (!o.defined()) {
      // eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout)
      const Tensor key_states = repeat_kv(k, a / kv);
      const Tensor value_states = repeat_kv(v, a / kv);
      Tensor w = torch::matmul(q, key_states.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(d)));
      if (m_.attn_softcap > 0) {  // Gemma-2: attn_weights / softcap -> tanh -> * softcap
        w = w / m_.attn_softcap;
        w = torch::tanh(w);
        w = w * m_.attn_softcap;
      }
      w = w + mask.index({Slice(), Slice(), Slice(), Slice(None, key_states.size(-2))});
      w = torch::softmax(w, -1, torch::kFloat).to(q.scalar_type());
      w = dropout(w, m_.attention_dropout);
      o = torch::matmul(w, value_states);
      o = o.transpose(1, 2).contiguous();
      *weights = w;  // returned as attn_weights; LlamaDecoderLayer holds it until it returns
    }
    o = o.reshape({b, sq, -1}).contiguous();
    o = l.o(o);
    return o;  // q, k, v (held by LlamaAttention.forward's locals) go here
  }

  // DeepseekV3MoE.forward: DeepseekV3TopkRouter (fp32 linear, sigmoid, group-limited top-k without
  // grad, gathered and renormalised weights * routed_scaling_factor), moe() with an fp32
  // accumulator, + shared_experts(residuals).
  Tensor moe_v3(const Layer& l, const Tensor& x) const {
    const int64_t h = x.size(2), E = m_.num_experts, K = m_.experts_per_token;
    const int64_t G = std::max<int64_t>(1, m_.expert_groups);
    const Tensor residuals = x;
    Tensor hs = x.view({-1, h});
    Tensor topk_indices, topk_weights;
    {
      Tensor router_logits = torch::linear(hs.to(torch::kFloat), l.router.w.to(torch::kFloat));
      Tensor scores = router_logits.sigmoid();
      router_logits = Tensor();
      {
        torch::NoGradGuard ng;
        Tensor choice = scores.view({-1, E}) + l.score_bias.unsqueeze(0);
        Tensor group_scores = std::get<0>(choice.view({-1, G, E / G}).topk(std::min<int64_t>(2, E / G), -1)).sum(-1);
        Tensor group_idx = std::get<1>(torch::topk(group_scores, std::max<int64_t>(1, m_.topk_groups), -1, true, false));
        Tensor group_mask = torch::zeros_like(group_scores).scatter_(1, group_idx, 1);
        Tensor score_mask = group_mask.unsqueeze(-1).expand({-1, G, E / G}).reshape({-1, E});
        choice = choice.masked_fill(score_mask.to(torch::kBool).logical_not(), 0.0);
        topk_indices = std::get<1>(torch::topk(choice, K, -1, true, false));
      }
      topk_weights = scores.gather(1, topk_indices);
      if (m_.norm_topk_prob) {
        Tensor denominator = topk_weights.sum(-1, true) + 1e-20;
        topk_weights /= denominator;
      }
      topk_weights = topk_weights * m_.routed_scaling_factor;
    }
    Tensor out;
    {
      Tensor final_hs = torch::zeros_like(hs, topk_weights.scalar_type());
      const Tensor expert_mask = torch::one_hot(topk_indices, E).permute({2, 0, 1});
      Tensor token_indices, weight_indices, expert_weights, expert_input, expert_output, weighted_output;
      for (int64_t e = 0; e < E; ++e) {
        auto where = torch::where(expert_mask[e]);
        token_indices = where[0];
        weight_indices = where[1];
        where.clear();
        if (token_indices.numel() == 0) continue;
        expert_weights = topk_weights.index({token_indices, weight_indices});
        expert_input = hs.index({token_indices});
        expert_output = l.experts[e](m_, expert_input);
        weighted_output = expert_output * expert_weights.unsqueeze(-1);
        final_hs.index_add_(0, token_indices, weighted_output);
      }
      out = final_hs.to(hs.scalar_type()).view(x.sizes());
    }
    if (l.shared.down.w.defined()) out = out + l.shared(m_, residuals);
    return out;
  }

#if MEMPLAN_TORCH_AT_LEAST(2, 0)
  // HF sdpa_attention_forward (integrations/sdpa_attention.py): K/V go in at their own head count
  // with enable_gqa when torch >= 2.5 and there is no mask tensor (use_gqa_in_sdpa), else
  // repeat_kv copies them; is_causal when no mask is passed and the layer is causal. Which kernel
  // runs is torch's choice (on CPU: the flash kernel, or the math path for GQA or dropout).
  Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Shared& sh) const {
    const int64_t a = m_.num_attention_heads, kv = m_.num_key_value_heads;
    const SdpaMask mode = s_.runtime.sdpa_mask;
    const bool with_mask = mode == SdpaMask::tensor;
    const bool gqa = kv < a && !with_mask && MEMPLAN_TORCH_AT_LEAST(2, 5);
    const Tensor key = gqa ? k : repeat_kv(k, a / kv);
    const Tensor value = gqa ? v : repeat_kv(v, a / kv);
    c10::optional<Tensor> mask;
    if (with_mask) mask = sh.mask.index({Slice(), Slice(), Slice(), Slice(None, key.size(-2))});
    const bool causal = mode == SdpaMask::is_causal;
#if MEMPLAN_TORCH_AT_LEAST(2, 5)
    Tensor o = at::scaled_dot_product_attention(q, key, value, mask, m_.attention_dropout, causal, c10::nullopt, gqa);
#else
    Tensor o = at::scaled_dot_product_attention(q, key, value, mask, m_.attention_dropout, causal);
#endif
    return o.transpose(1, 2).contiguous();
  }
#endif

  // MixtralSparseMoeBlock.forward (loop over experts).
  Tensor moe(const Layer& l, const Tensor& x) const {
    if (m_.router == RouterKind::sigmoid) return moe_v3(l, x);
    const int64_t b = x.size(0), sq = x.size(1), h = x.size(2);
    const int64_t E = m_.num_experts, K = m_.experts_per_token;
    const Tensor hs = x.view({-1, h});
    const Tensor router_logits = l.router(hs);
    Tensor rw = torch::softmax(router_logits, 1, torch::kFloat);
    auto [top, selected] = torch::topk(rw, K, -1);
    rw = top;
    if (m_.norm_topk_prob) rw /= rw.sum(-1, true);
    rw = rw.to(hs.scalar_type());
    Tensor final_hs = torch::zeros({b * sq, h}, hs.options());
    const Tensor expert_mask = torch::one_hot(selected, E).permute({2, 1, 0});
    const int64_t cap = m_.capacity_factor > 0
                            ? static_cast<int64_t>(std::ceil(m_.capacity_factor * static_cast<double>(K * b * sq) / static_cast<double>(E)))
                            : std::numeric_limits<int64_t>::max();
    // Python keeps a loop iteration's locals alive until the next iteration reassigns them.
    Tensor idx, top_x, cur, y;
    for (int64_t e = 0; e < E; ++e) {
      auto where = torch::where(expert_mask[e]);
      idx = where[0];
      top_x = where[1];
      where.clear();
      if (top_x.numel() > cap) {  // capacity: drop the tokens beyond the expert's capacity
        idx = idx.index({Slice(0, cap)});
        top_x = top_x.index({Slice(0, cap)});
      }
      if (top_x.numel() == 0) continue;
      cur = hs.index({None, top_x}).reshape({-1, h});
      y = l.experts[e](m_, cur) * rw.index({top_x, idx, None});
      final_hs.index_add_(0, top_x, y.to(hs.scalar_type()));
    }
    return final_hs.reshape({b, sq, h});
  }

  const TrainingSetup s_;
  const ModelSpec m_;
  Params p_;
  bool gpt2_ = false;
  Tensor wte_, wpe_, lm_head_, lm_head_b_, inv_freq_;
  Tensor wte_original_, lm_head_original_;  // modules_to_save: the frozen modules PEFT copied
  std::vector<Layer> layers_;
  Norm ln_f_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const TrainingSetup& s, const torch::Device& device) {
  return std::make_unique<Model>(s, device);
}

}  // namespace memplan::calibrate
