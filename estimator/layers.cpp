// Per-op table of a training step: each function below is one op of the HF modelling code, with
// what it allocates, what autograd saves and what its backward allocates. The segment builders
// at the bottom compose them in the order the modelling code calls them.
//
// Legend (docs/autograd-saved.md §0):
//   b micro-batch, s sequence, N = b*s tokens, h hidden, a query heads, k KV heads, d head dim,
//   f MLP width, V vocabulary, E experts, K top-k, r LoRA rank.
//   e  bytes per element of the model dtype (4 fp32 and AMP, 2 pure/mixed 16-bit)
//   c  bytes of autocast's lower-precision dtype (2)
// Citations: [DY n] = tools/autograd/derivatives.yaml line n at v2.6.0; [DY13 n] at v1.13.1;
// HF code by class/function as in docs/autograd-saved.md.
//
// Device and version differences that change bytes (all checked on Debian's LibTorch 1.13.1 CPU
// or read from source, see docs/autograd-saved.md §2):
//   dropout   CUDA: native_dropout saves a bool mask (1 B/elem); CPU: x.mul(noise) saves the
//             noise in x's dtype [Dropout.cpp:47-74].
//   LayerNorm mean/rstd: fp32 on CUDA; the input dtype on CPU 1.13.
//   RMSNorm   1.13's mean saves x^2 (fp32) [DY13 1056]; 2.x saves nothing.
//   autocast  CUDA runs softmax/log_softmax/pow/rsqrt/layer_norm in fp32; LibTorch 1.13's CPU
//             autocast only lowers matmuls (softmax stays bf16: measured).
#include "estimator/layers.h"

#include <algorithm>
#include <cmath>

#include "estimator/attention_kernel.h"
#include "estimator/model.h"

namespace memplan {

using sim::Cat;
using sim::Op;
using sim::Segment;

namespace {

constexpr int64_t kInt64 = 8;
constexpr int64_t kFp32 = 4;

// A tensor of the segment being built: id, element count and bytes per element.
struct T {
  int id = -1;
  int64_t n = 0;   // elements
  int64_t dt = 4;  // bytes per element
  int64_t bytes() const { return n * dt; }
};

// Builds one segment with the dtype policy of the setup's precision, device and torch version.
class Net {
 public:
  Net(const TrainingSetup& s, Segment& seg) : s_(s), g_(seg) {
    const Precision p = s.precision;
    cuda_ = s.device.kind == DeviceKind::cuda;
    ac_ = is_autocast(p);
    e_ = weight_bytes_per_param(p) == 4 ? 4 : 2;
    gb_ = grad_bytes_per_param(p);
    torch2_ = s.runtime.torch_at_least(2, 0);
    // Fused norm and SwiGLU kernels: Liger's, or what torch.compile's partitioner keeps (the
    // saved set of both: the norm's input and its rstd, the gate and up outputs).
    fused_ = s.runtime.liger || s.runtime.compile;
    sac_ = s.checkpointing.mode == CheckpointMode::selective_op;
  }

  const TrainingSetup& s_;
  Segment& g_;
  bool cuda_ = true, ac_ = false, torch2_ = true;
  bool fused_ = false;   // fused RMSNorm / SwiGLU (Liger kernels or torch.compile)
  bool sac_ = false;     // torchtitan's per-op selective checkpointing policy
  int mm_count_ = 0;     // matmuls of this segment so far (the per-op policy keeps every other one)
  int64_t e_ = 4, gb_ = 4;
  static constexpr int64_t c_ = 2;  // autocast half dtype bytes
  Cat cat_ = Cat::activation;       // category of new tensors

  T input(int64_t n, int64_t dt) { return {g_.input(n * dt, cat_), n, dt}; }
  void hold(T t) { if (t.id >= 0) g_.hold(t.id); }

  T make(Op o, int64_t n, int64_t dt) {
    o.out_bytes = n * dt;
    o.out_cat = cat_;
    return {g_.op(std::move(o)), n, dt};
  }

  // ---- elementary ops ---------------------------------------------------------------------

  // _to_copy: nothing saved; backward casts the gradient back [DY 458].
  T cast(T x, int64_t dt, const char* name = "_to_copy") {
    if (x.dt == dt) return x;
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.grad_to = {x.id};
    o.grad_bytes = {x.bytes()};
    return make(std::move(o), x.n, dt);
  }
  // view/reshape/transpose/permute/split: aliases, gradient passes through.
  T view(T x, const char* name = "view", int64_t n = -1) {
    Op o;
    o.name = name;
    o.alias_of = x.id;
    if (n >= 0) o.view_bytes = n * x.dt;
    o.reads = {x.id};
    o.grad_to = {x.id};
    o.grad_passthrough = true;
    return {g_.op(std::move(o)), n >= 0 ? n : x.n, x.dt};
  }
  // A slice view with fewer elements (chunk of a fused projection).
  T slice(T x, int64_t n, const char* name) { return view(x, name, n); }
  // clone / contiguous / matmul's reshape copy: nothing saved, gradient passes through.
  T copy(T x, const char* name) {
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.grad_to = {x.id};
    o.grad_passthrough = true;
    return make(std::move(o), x.n, x.dt);
  }
  // repeat_kv / expand+reshape to more heads: a copy; backward sums the repeats (new grad).
  // With a single KV head the reshape only merges a size-1 dim with the stride-0 repeat dim,
  // so it stays a view of the input (measured on 1.13: no copy).
  T expand_copy(T x, int64_t n_out, const char* name, bool view_only = false) {
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.grad_to = {x.id};
    o.grad_bytes = {x.bytes()};
    if (view_only) {
      o.alias_of = x.id;
      o.view_bytes = n_out * x.dt;
      return {g_.op(std::move(o)), n_out, x.dt};
    }
    return make(std::move(o), n_out, x.dt);
  }
  // Mixed dtypes on CPU: TensorIterator casts an input of another dtype to the common dtype
  // first (a copy for the kernel's duration); CUDA kernels cast while loading (no copy).
  int64_t promoted_copies(std::initializer_list<T> in, int64_t out_dt) const {
    if (cuda_) return 0;
    int64_t bytes = 0;
    for (const T& t : in)
      if (t.dt < out_dt) bytes += t.n * out_dt;
    return bytes;
  }

  // a + b: saves nothing [DY 229]; AddBackward hands the same gradient to both inputs unless
  // a dtype differs (the engine casts it then).
  T add(T a, T b, const char* name = "add") {
    Op o;
    o.name = name;
    o.reads = {a.id, b.id};
    const int64_t dt = std::max(a.dt, b.dt);
    const int64_t n = std::max(a.n, b.n);
    o.fwd_scratch = promoted_copies({a, b}, dt);
    if (a.dt == b.dt && a.n == b.n) {
      o.grad_to = {a.id, b.id};
      o.grad_passthrough = true;
    } else {
      // AddBackward0 hands `grad` itself to both inputs; the engine's validate_outputs casts it
      // where an input's dtype differs (a new tensor) and sum_to reduces a broadcast one, so an
      // input of the output's dtype and size gets the output's gradient itself
      // (torch/csrc/autograd/engine.cpp validate_outputs).
      o.grad_to = {a.id, b.id};
      o.grad_bytes = {a.bytes(), b.bytes()};
      for (const T& t : {a, b})
        if (t.dt == dt && t.n == n) o.grad_share.push_back(t.id);
    }
    return make(std::move(o), n, dt);
  }
  // x * y (both tensors): saves y if x needs grad and x if y needs grad [DY 1212].
  T mul(T x, T y, const char* name = "mul") {
    Op o;
    o.name = name;
    o.reads = {x.id, y.id};
    o.saves_if = {{y.id, x.id}, {x.id, y.id}};
    o.grad_to = {x.id, y.id};
    o.grad_bytes = {x.bytes(), y.bytes()};
    o.fwd_scratch = promoted_copies({x, y}, std::max(x.dt, y.dt));
    return make(std::move(o), std::max(x.n, y.n), std::max(x.dt, y.dt));
  }
  // x * python_float / x / python_float: a 0-dim tensor is saved, nothing else [DY 1212, 588].
  // With `out_dt` wider than x (x + a wider tensor the graph does not track: the causal mask,
  // cos/sin), the CPU promotes x first.
  T scale(T x, const char* name = "mul(scalar)", int64_t out_dt = 0) {
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.grad_to = {x.id};
    o.grad_bytes = {x.bytes()};
    if (out_dt) o.fwd_scratch = promoted_copies({x}, out_dt);
    return make(std::move(o), x.n, out_dt ? out_dt : x.dt);
  }
  // Elementwise op saving its input (gelu, silu, pow) [DY 2119, 2095, 1375].
  T unary_saving_input(T x, const char* name, int64_t out_dt = 0) {
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.saves = {x.id};
    o.grad_to = {x.id};
    return make(std::move(o), x.n, out_dt ? out_dt : x.dt);
  }
  // Elementwise op saving its output (tanh, relu, rsqrt) [DY 1750, 1479].
  T unary_saving_output(T x, const char* name) {
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.save_output = true;
    o.grad_to = {x.id};
    return make(std::move(o), x.n, x.dt);
  }
  // An op that saves nothing and passes a new gradient (neg, cat pieces, where).
  T plain(T x, const char* name, int64_t n_out = -1) {
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.grad_to = {x.id};
    return make(std::move(o), n_out < 0 ? x.n : n_out, x.dt);
  }

  // F.dropout(p) in training. p == 0 returns the input [Dropout.cpp:117-130].
  T dropout(T x, double p, const char* name = "dropout") {
    if (p <= 0) return x;
    if (cuda_) {
      Op o;  // native_dropout: saves the bool mask only [DY 619]
      o.name = name;
      o.reads = {x.id};
      o.saved_aux_bytes = x.n;  // bool mask, 1 B/elem
      o.grad_to = {x.id};
      return make(std::move(o), x.n, x.dt);
    }
    // CPU: noise = empty_like(x).bernoulli_(1-p).div_(1-p); x.mul(noise) saves the noise.
    Op noise;
    noise.name = "dropout noise";
    noise.reads = {x.id};
    const T nz = make(std::move(noise), x.n, x.dt);
    Op o;
    o.name = name;
    o.reads = {x.id, nz.id};
    o.saves_if = {{nz.id, x.id}};
    o.grad_to = {x.id};
    return make(std::move(o), x.n, x.dt);
  }

  // softmax(x, dim, dtype): a half input asked for fp32 is first copied with toType(fp32) (a
  // forward temporary; its backward casts the gradient back), then _softmax saves its output
  // [DY 2196]. CUDA fp16 uses _softmax(half_to_float=True) instead: no copy
  // (SoftMax.cpp:443-455).
  T softmax(T x, int64_t out_dt, const char* name = "softmax") {
    const bool half_to_float = cuda_ && x.dt == 2 && out_dt == kFp32 &&
                               (s_.precision == Precision::amp_fp16 || s_.precision == Precision::fp16);
    if (out_dt != x.dt && !half_to_float) x = cast(x, out_dt, "softmax toType(fp32)");
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.save_output = true;
    o.grad_to = {x.id};
    o.grad_bytes = {x.bytes()};
    return make(std::move(o), x.n, out_dt);
  }

  // bmm(A, B): saves A if B needs grad, B if A needs grad [DY 378].
  T bmm(T a, T b, int64_t n_out, const char* name) {
    Op o;
    o.name = name;
    o.gemm = true;
    o.reads = {a.id, b.id};
    o.saves_if = {{a.id, b.id}, {b.id, a.id}};
    o.grad_to = {a.id, b.id};
    return make(std::move(o), n_out, a.dt);
  }

  // ---- normalisation ------------------------------------------------------------------------

  // nn.LayerNorm -> native_layer_norm: saves input, mean, rstd [DY 1255]. Under CUDA autocast it
  // runs in fp32 (a half input is cast first). `params` is the weight count when it is not the
  // width (a per-head LayerNorm of (heads, d)); biases follow model.norm_bias.
  T layer_norm(T x, int64_t width, bool trainable, const char* name = "layer_norm", int64_t params = -1, bool bias = true) {
    if (s_.model.norm_fp32_manual) return layer_norm_fp32(x, width, trainable, name, params);
    if (ac_ && cuda_) x = cast(x, kFp32);
    const int64_t rows = x.n / width;
    const int64_t stat = cuda_ ? kFp32 : (torch2_ ? std::max<int64_t>(x.dt, e_) : x.dt);
    Op o;
    o.name = name;
    o.reads = {x.id};
    o.saves = {x.id};
    o.saved_aux_bytes = 2 * rows * stat;
    o.grad_to = {x.id};
    o.param_grad_bytes = (bias && s_.model.norm_bias ? 2 : 1) * (params >= 0 ? params : width) * gb_;
    if (bias && s_.model.norm_bias) o.param_grad_parts = {o.param_grad_bytes / 2, o.param_grad_bytes / 2};  // weight, bias
    o.params_trainable = trainable;
    return make(std::move(o), x.n, x.dt);
  }

  // CohereLayerNorm (modeling_cohere.py): x.to(fp32); mean; (x - mean).pow(2).mean(); a second
  // (x - mean) times rsqrt(var + eps); weight.to(fp32) * that; .to(input dtype). No bias.
  T layer_norm_fp32(T x, int64_t width, bool trainable, const char* name, int64_t params) {
    const int64_t rows = x.n / width;
    const T x32 = cast(x, kFp32, "layernorm .to(fp32)");
    Op mean;
    mean.name = "layernorm mean";
    mean.reads = {x32.id};
    mean.grad_to = {x32.id};
    mean.grad_bytes = {x32.bytes()};
    const T mu = make(std::move(mean), rows, kFp32);
    const T d1 = add(x32, mu, "layernorm x - mean");
    const T sq = unary_saving_input(d1, "layernorm pow(2)");
    Op var;
    var.name = "layernorm var mean";
    var.reads = {sq.id};
    if (!torch2_) var.saves = {sq.id};  // 1.13 saves the input of mean.dim [DY13 1056]
    var.grad_to = {sq.id};
    var.grad_bytes = {sq.bytes()};
    const T v = make(std::move(var), rows, kFp32);
    const T rs = unary_saving_output(plain(v, "layernorm + eps"), "layernorm rsqrt");
    const T d2 = add(x32, mu, "layernorm x - mean (again)");
    const T xn = mul(d2, rs, "layernorm (x-mean)*rsqrt");
    Op w;
    w.name = name;
    w.reads = {xn.id};
    w.saves_if = {{xn.id, Op::kParams}};
    w.grad_to = {xn.id};
    w.param_grad_bytes = (params >= 0 ? params : width) * gb_;
    w.params_trainable = trainable;
    const T y = make(std::move(w), x.n, kFp32);
    return cast(y, x.dt, "layernorm .to(dtype)");
  }

  // HF LlamaRMSNorm: x.to(fp32); var = x.pow(2).mean(-1); x * rsqrt(var + eps); .to(dtype);
  // weight * x. Gemma-3/OLMo-2/GPT-OSS multiply the weight in fp32 first and cast the product
  // (model.norm_weight_fp32). `weight` false: Llama-4's L2 norm (no weight, .type_as(x)).
  T rms_norm(T x, int64_t width, bool trainable, const char* name = "rms_norm", bool weight = true) {
    const int64_t rows = x.n / width;
    if (fused_ && weight) return fused_rms_norm(x, width, trainable, name);
    T x32 = cast(x, kFp32, "rmsnorm .to(fp32)");
    T sq = unary_saving_input(x32, "rmsnorm pow(2)");  // saves x32 [DY 1375]
    Op mean;
    mean.name = "rmsnorm mean";
    mean.reads = {sq.id};
    if (!torch2_) mean.saves = {sq.id};  // 1.13 saves the input of mean.dim [DY13 1056]
    mean.grad_to = {sq.id};
    mean.grad_bytes = {sq.bytes()};
    const T var = make(std::move(mean), rows, kFp32);
    const T var_eps = plain(var, "rmsnorm + eps");
    const T rs = unary_saving_output(var_eps, "rmsnorm rsqrt");  // [DY 1479]
    const T xn = mul(x32, rs, "rmsnorm x*rsqrt");
    if (!weight) return cast(xn, x.dt, "l2norm .type_as(x)");
    if (s_.model.norm_weight_fp32) {
      // (weight * x) in fp32: saves the fp32 x for the weight's gradient, then casts.
      Op w;
      w.name = name;
      w.reads = {xn.id};
      w.saves_if = {{xn.id, Op::kParams}};
      w.grad_to = {xn.id};
      w.param_grad_bytes = width * gb_;
      w.params_trainable = trainable;
      const T y = make(std::move(w), x.n, kFp32);
      hold(xn);  // the local `hidden_states` (Gemma-3's `output`) until the product is made
      return cast(y, x.dt, "rmsnorm .to(dtype)");
    }
    const T xc = cast(xn, x.dt, "rmsnorm .to(dtype)");  // .to(input_dtype)
    // weight * x: saves x for the weight's gradient [DY 1212]; the weight is a parameter.
    Op w;
    w.name = name;
    w.reads = {xc.id};
    w.saves_if = {{xc.id, Op::kParams}};
    w.grad_to = {xc.id};
    w.param_grad_bytes = width * gb_;
    w.params_trainable = trainable;
    const int64_t wdt = std::max(xc.dt, e_);  // promotes with the weight's dtype
    const T y = make(std::move(w), x.n, wdt);
    // The normalised fp32 x is the local `hidden_states`, alive until forward returns: past the
    // weight's product (the H200's recordings free it there).
    hold(xn);
    return y;
  }

  // Liger's LigerRMSNormFunction (src/liger_kernel/ops/rms_norm.py @ v0.5.10 L333-344): one
  // kernel that saves its input in its own dtype and rstd (fp32, one per row); backward writes
  // dX into dY's buffer (in place). torch.compile's partitioner keeps the same two for a
  // compiled block (it recomputes the fp32 copy and the normalised tensor).
  T fused_rms_norm(T x, int64_t width, bool trainable, const char* name) {
    Op o;
    o.name = s_.runtime.liger ? "liger rms_norm" : "compiled rms_norm";
    o.reads = {x.id};
    o.saves = {x.id};
    o.saved_aux_bytes = x.n / width * kFp32;
    o.grad_to = {x.id};
    o.grad_share = {x.id};
    o.param_grad_bytes = width * gb_;
    o.params_trainable = trainable;
    return make(std::move(o), x.n, std::max(x.dt, s_.model.norm_weight_fp32 ? x.dt : e_));
  }

  T norm(T x, int64_t width, bool trainable, const char* name) {
    return s_.model.norm == NormKind::rms_norm ? rms_norm(x, width, trainable, name)
                                               : layer_norm(x, width, trainable, name);
  }

  // torch.cat((a, b), -1): saves nothing; backward slices the gradient into both inputs.
  T cat2(T a, T b, const char* name) {
    Op o;
    o.name = name;
    o.reads = {a.id, b.id};
    o.grad_to = {a.id, b.id};
    o.grad_bytes = {a.bytes(), b.bytes()};
    return make(std::move(o), a.n + b.n, std::max(a.dt, b.dt));
  }

  // ---- linear layers ------------------------------------------------------------------------

  // Linear (F.linear / HF Conv1D addmm): under autocast the input is cast (a copy per call: the
  // cast cache only holds weights) and the weight's cached half copy is saved [autocast_mode.cpp
  // cached_cast]. mm saves the input if the weight trains, the weight if the input needs grad
  // [DY 1203]. Backward allocates the input's gradient and the weight's (half, then fp32 under
  // autocast). LoRA adds A and B (PEFT lora.Linear.forward).
  T linear(T x, const Linear& lin, int64_t layer, const char* name) {
    const int64_t rows = x.n / (lin.in * lin.count);  // per instance (count > 1: a batched (E, rows, in) bmm)
    const bool trainable = base_trainable(s_, lin.role, layer);
    if (quantized_base(lin.role)) return quantized_linear(x, lin, rows, name);
    T xin = ac_ ? cast(x, c_, "autocast cast input") : x;
    const int64_t wn = lin.in * lin.out * lin.count;
    Op o;
    o.name = name;
    o.gemm = true;
    o.reads = {xin.id};
    o.saves_if = {{xin.id, Op::kParams}};
    if (ac_) {
      // The cached half weight copy lives as a separate storage saved for the input's gradient.
      Op wc;
      wc.name = "autocast weight copy";
      wc.uncached = !trainable;
      const Cat keep = cat_;
      cat_ = Cat::weight_copy;
      const T w = make(std::move(wc), wn, c_);
      cat_ = keep;
      o.reads.push_back(w.id);
      o.saves_if.push_back({w.id, xin.id});
      o.bwd_scratch = trainable ? wn * c_ : 0;  // half weight grad before the fp32 cast
    }
    o.grad_to = {xin.id};
    o.grad_bytes = {xin.bytes()};
    o.param_grad_bytes = (wn + (lin.bias ? lin.out * lin.count : 0)) * gb_;
    if (lin.bias) o.param_grad_parts = {wn * gb_, lin.out * lin.count * gb_};  // weight, bias
    o.params_trainable = trainable;
    // torchao Float8Linear (float8_linear.py @ v0.10.0 L61-79, L326-352): the high-precision input
    // is saved as before, plus the weight cast to float8 and transposed (1 B/param, its scale is
    // a scalar) for the input's gradient. torchtitan leaves the output head out (filter_fqns).
    // With force_recompute_fp8_weight_in_bwd (float8_linear.py @ v0.10.0: the weight is cast again
    // in backward) nothing of the weight is saved; the cast is a backward temporary.
    if (s_.runtime.fp8 && fp8_role(lin.role)) {
      if (s_.runtime.fp8_recompute_weight) o.bwd_scratch += wn;
      else o.saved_aux_bytes += wn;
    }
    // The per-op policy keeps every other matmul's output (torchtitan activation_checkpoint.py
    // @ v0.2.2 L100-131: "except every second mm").
    if (sac_) o.sac_save = mm_count_++ % 2 == 0;
    const int64_t out_dt = ac_ ? c_ : std::max(x.dt, e_ == 4 ? x.dt : e_);
    T y = make(std::move(o), rows * lin.out * lin.count, out_dt);
    if (lora_on(s_, lin.role)) y = lora(x, y, lin, rows);
    return y;
  }

  // bitsandbytes Linear4bit / Linear8bitLt: x.to(compute_dtype); matmul_4bit dequantizes the
  // weight into a temporary (forward, and again in backward) and saves its input and the packed
  // weight; out.to(input dtype). No autocast weight copy. LoRA adapters sit on top as usual.
  T quantized_linear(T x, const Linear& lin, int64_t rows, const char* name) {
    const int64_t compute = c_;  // bnb_4bit_compute_dtype: bf16/fp16 in QLoRA recipes
    const T xin = cast(x, compute, "bnb x.to(compute_dtype)");
    Op o;
    o.name = name;
    o.gemm = true;  // on the dequantized weight
    o.reads = {xin.id};
    o.saves_if = {{xin.id, xin.id}};  // MatMul4Bit keeps A when it needs an input gradient
    o.grad_to = {xin.id};
    o.grad_bytes = {xin.bytes()};
    o.params_trainable = false;
    o.fwd_scratch = lin.in * lin.out * lin.count * compute;
    o.bwd_scratch = lin.in * lin.out * lin.count * compute;
    T y = make(std::move(o), rows * lin.out * lin.count, compute);
    y = cast(y, x.dt, "bnb out.to(input dtype)");
    if (lora_on(s_, lin.role)) y = lora(x, y, lin, rows);
    return y;
  }

  static bool fp8_role(Role r) {
    return r != Role::lm_head && r != Role::router && r != Role::pooler && r != Role::classifier && r != Role::shared_expert_gate;
  }

  bool quantized_base(Role r) const {
    return role_quantized(s_, r);
  }

  // PEFT LoRA: result + lora_B(lora_A(dropout(x.to(A.dtype)))) * scaling. Adapters are fp32
  // (PEFT autocast_adapter_dtype), so a 16-bit input is cast up first; in the model's dtype
  // (finetune.adapter_fp32 false: torchtune, LitGPT) it is not.
  T lora(T x, T y, const Linear& lin, int64_t rows) {
    const int64_t r = s_.finetune.lora_rank;
    const int64_t adt = adapter_bytes(s_);
    const T xc = ac_ ? cast(x, c_, "autocast cast input") : cast(x, adt, "lora x.to(fp32)");
    const T xa = dropout(xc, s_.finetune.lora_dropout, "lora dropout");
    Linear a{lin.role, lin.in, r, false, lin.count};
    Linear b{lin.role, r, lin.out, false, lin.count};
    const T ha = adapter(xa, a, rows, "lora_A");
    const T hb = adapter(ha, b, rows, "lora_B");
    const T sc = scale(hb, "lora scaling");
    const T sum = add(y, sc, "lora add");
    const T out = cast(sum, y.dt, "lora result.to(dtype)");  // back to the base layer's output dtype
    // PEFT rebinds x to its cast (`x = self._cast_input_dtype(x, lora_A.weight.dtype)`, peft
    // tuners/lora/layer.py Linear.forward @ v0.17.0), so the copy lives until forward returns,
    // past the result's cast: the H200's recordings free it last (tests/data/gpu/h200-knobs/).
    // Autocast's cast is a temporary of lora_A's F.linear instead. The module's input itself is
    // the caller's argument, alive until the module returns (the down projection's input too).
    if (!ac_) hold(xc);
    hold(x);
    return out;
  }
  T adapter(T x, const Linear& lin, int64_t rows, const char* name) {
    Op o;
    o.name = name;
    o.gemm = true;
    o.reads = {x.id};
    o.saves = {x.id};
    o.grad_to = {x.id};
    o.param_grad_bytes = lin.in * lin.out * lin.count * adapter_bytes(s_);
    o.params_trainable = true;
    return make(std::move(o), rows * lin.out * lin.count, ac_ ? c_ : x.dt);
  }

  // ---- activations ---------------------------------------------------------------------------

  T activation(T x) {
    switch (s_.model.activation) {
      case Activation::gelu: case Activation::gelu_tanh: return unary_saving_input(x, "gelu");
      case Activation::silu: return unary_saving_input(x, "silu");
      case Activation::relu: return unary_saving_output(x, "relu");
      case Activation::gelu_new: return gelu_new(x);
    }
    return x;
  }
  // HF NewGELUActivation: 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))). Under CUDA autocast pow
  // runs in fp32, which promotes the rest (docs/autograd-saved.md §6).
  T gelu_new(T x) {
    const int64_t pdt = (ac_ && cuda_) ? kFp32 : x.dt;
    T xp = (pdt != x.dt) ? cast(x, pdt, "autocast pow cast") : x;
    const T p3 = unary_saving_input(xp, "gelu_new pow(x,3)");
    const T m1 = scale(p3, "gelu_new 0.044715*");
    const T s1 = add(x, m1, "gelu_new x+");
    const T m2 = scale(s1, "gelu_new c*");
    const T th = unary_saving_output(m2, "gelu_new tanh");
    const T one = plain(th, "gelu_new 1+");
    const T half = scale(x, "gelu_new 0.5*x");
    return mul(half, one, "gelu_new mul");
  }

  // ---- attention ------------------------------------------------------------------------------

  // RoPE on (rows, heads*d): q*cos + rotate_half(q)*sin. cos/sin are in the residual dtype
  // (HF casts them to x.dtype), so under autocast the fp32 cos promotes q to fp32. The muls save
  // only the shared cos/sin; neg and cat save nothing [DY 1280, 386].
  T rope(T q, int64_t cos_dt) {
    // Liger's LigerRopeFunction rotates q and k in place in the projections' memory and saves
    // only cos/sin (src/liger_kernel/ops/rope.py @ v0.5.10 L116-134): no new q/k storages.
    if (s_.runtime.liger) return view(q, "liger rope (in place)");
    const int64_t dt = std::max(q.dt, cos_dt);
    const T qc = scale(q, "rope q*cos", dt);
    const T neg = plain(q, "rope neg", q.n / 2);
    const T cat = plain(neg, "rope cat", q.n);
    const T qs = scale(cat, "rope *sin", dt);
    return add(qc, qs, "rope add");
  }

  // What a matmul operand becomes before bmm saves it: autocast casts it to the half dtype
  // (a copy that keeps the strides), then matmul copies it if the head-split layout cannot be
  // viewed as (b*a, s, d) [LinearAlgebra.cpp matmul, reshape].
  T mm_operand(T x, bool viewable, const char* name) {
    if (ac_) x = cast(x, c_, "autocast cast");
    return viewable ? x : copy(x, name);
  }
};

// Which attention computation runs (estimator/attention_kernel.h decides it, as torch's SDPA
// dispatch would): HF's eager path, a fused kernel that saves q, k, v, the output and an fp32
// logsumexp (SDPA's flash, mem-efficient and cuDNN kernels, torch's CPU flash, flash-attn), or
// SDPA's composite math path, which saves the s x s probabilities.
enum class AttnKernel { eager, fused, math };

AttnKernel kernel_of(const AttentionKernel& k) {
  switch (k.backend) {
    case AttnBackend::eager: return AttnKernel::eager;
    case AttnBackend::math: return AttnKernel::math;
    default: return AttnKernel::fused;
  }
}

// Tensors of the attention block that HF's Python variables keep alive after their last use:
// q/k/v (LlamaAttention.forward's locals, or the split views of GPT-2's c_attn output) and the
// attention weights (returned; GPT2Attention.forward holds them to its end, LlamaDecoderLayer to
// the end of the layer).
struct AttnHeld {
  std::vector<T> until_attention_end;
  T weights;
};

// q/k normalisation inside attention (model.qk_norm); `heads` is the head count of the tensor.
T qk_norm(Net& n, T x, int64_t heads, bool trainable, const char* name) {
  const ModelSpec& m = n.s_.model;
  const int64_t d = m.qk_head_dim();
  switch (m.qk_norm) {
    case QkNorm::none: return x;
    case QkNorm::per_head: return n.rms_norm(x, d, trainable, name);
    case QkNorm::full_width: return n.rms_norm(x, heads * d, trainable, name);
    case QkNorm::per_head_layer_norm: return n.layer_norm(x, d, trainable, name, heads * d, /*bias=*/false);
    case QkNorm::l2: return n.rms_norm(x, d, trainable, name, /*weight=*/false);
  }
  return x;
}

// RoPE on q or k, in fp32 when the model upcasts for it (Cohere). A partial rotary (`fraction` of
// the head) rotates x[..., :rot] and cats it with x[..., rot:] (PhiAttention, StableLmAttention);
// both parts stay referenced by the attention's locals until it returns.
T apply_rope(Net& n, T x, double fraction, AttnHeld* held = nullptr) {
  const ModelSpec& m = n.s_.model;
  const int64_t r = residual_bytes(n.s_);
  auto rotate = [&](T t) {
    if (!m.rope_fp32) return n.rope(t, r);
    const T t32 = n.cast(t, kFp32, "rope .float()");
    return n.cast(n.rope(t32, kFp32), t.dt, "rope .to(dtype)");
  };
  if (fraction >= 1.0) return rotate(x);
  const int64_t nr = static_cast<int64_t>(std::llround(static_cast<double>(x.n) * fraction));
  const T rot = rotate(n.slice(x, nr, "x[..., :rot]"));
  const T pass = n.slice(x, x.n - nr, "x[..., rot:]");
  if (held) {
    held->until_attention_end.push_back(rot);
    held->until_attention_end.push_back(pass);
  }
  return n.cat2(rot, pass, "cat(rot, pass)");
}

// Multi-head latent attention's projections (DeepseekV3Attention.forward): q through q_a ->
// q_a_layernorm -> q_b (or one q_proj), kv through kv_a_proj_with_mqa -> split -> kv_a_layernorm ->
// kv_b_proj -> split into k_pass and v; RoPE on the rope parts (q per head, k shared by the heads
// and expanded); q = cat(q_pass, q_rot), k = cat(k_pass, k_rot). The inputs and splits stay alive
// as the forward's locals.
void mla_qkv(Net& n, T x, int64_t layer, const std::vector<Linear>& lins, AttnHeld* held, T* q, T* k, T* v) {
  const TrainingSetup& s = n.s_;
  const ModelSpec& m = s.model;
  const int64_t N = s.batch.micro_batch * s.batch.seq_len, a = m.num_attention_heads;
  const bool train = s.finetune.mode == FinetuneMode::full && !layer_frozen(s, layer);
  auto find = [&](Role r) { return *std::find_if(lins.begin(), lins.end(), [&](const Linear& l) { return l.role == r; }); };
  T qs;
  if (m.q_lora_rank > 0) {
    const T qa = n.linear(x, find(Role::q_a), layer, "q_a_proj");
    const T qn = n.rms_norm(qa, m.q_lora_rank, train, "q_a_layernorm");
    qs = n.linear(qn, find(Role::q_b), layer, "q_b_proj");
  } else {
    qs = n.linear(x, find(Role::q), layer, "q_proj");
  }
  held->until_attention_end.push_back(qs);
  const T q_pass = n.slice(qs, N * a * m.qk_nope_head_dim, "split q_pass");
  T q_rot = n.slice(qs, N * a * m.qk_rope_head_dim, "split q_rot");
  const T ckv = n.linear(x, find(Role::kv_a), layer, "kv_a_proj_with_mqa");
  held->until_attention_end.push_back(ckv);
  const T k_c = n.slice(ckv, N * m.kv_lora_rank, "split k_pass");
  T k_rot = n.slice(ckv, N * m.qk_rope_head_dim, "split k_rot");
  const T kn = n.rms_norm(k_c, m.kv_lora_rank, train, "kv_a_layernorm");
  const T kvb = n.linear(kn, find(Role::kv_b), layer, "kv_b_proj");
  held->until_attention_end.push_back(kvb);
  const T k_pass = n.slice(kvb, N * a * m.qk_nope_head_dim, "split k_nope");
  *v = n.slice(kvb, N * a * m.v_head_dim, "split value");
  // rope_interleave (DeepseekV3Config default True): view -> transpose -> reshape copies q and k.
  q_rot = n.copy(q_rot, "rope interleave reshape q");
  k_rot = n.copy(k_rot, "rope interleave reshape k");
  q_rot = apply_rope(n, q_rot, 1.0);
  k_rot = apply_rope(n, k_rot, 1.0);
  const T k_exp = n.expand_copy(k_rot, N * a * m.qk_rope_head_dim, "k_rot.expand", /*view_only=*/true);
  held->until_attention_end.push_back(q_rot);  // q_rot and k_rot: the forward's locals
  held->until_attention_end.push_back(k_exp);
  *q = n.cat2(q_pass, q_rot, "cat(q_pass, q_rot)");
  *k = n.cat2(k_pass, k_exp, "cat(k_pass, k_rot)");
}

// SDPA's composite math path on torch 2.x (_scaled_dot_product_attention_math,
// aten/src/ATen/native/transformers/attention.cpp @ v2.6.0), what CPU runs for GQA and dropout
// and CUDA for fp32 with enable_gqa (estimator/attention_kernel.cpp).
// q, k, v come as HF passes them (after autocast's cast); k_contiguous when they are repeat_kv
// copies. Its locals (query_acc, key_acc, value_acc, query, the causal mask, key_expanded) live
// until it returns. Inside, autocast is off, so the matmuls run in the compute dtype.
T sdpa_math(Net& n, T q, T k, T v, bool k_contiguous) {
  const TrainingSetup& s = n.s_;
  const ModelSpec& m = s.model;
  const int64_t b = s.batch.micro_batch, sq = s.batch.seq_len, N = b * sq;
  const int64_t a = m.num_attention_heads, d = m.head_dim;
  const bool b1 = b == 1;
  const int64_t origin = q.dt;
  // 2.5+ keeps half q/k/v in fp32 unless allowFP16BF16ReductionMathSDP (off by default)
  // (pytorch/pytorch#135964).
  const int64_t c = origin == 2 && s.runtime.torch_at_least(2, 5) ? kFp32 : origin;
  std::vector<T> locals;
  const T qa = n.cast(q, c, "sdpa math q.to(fp32)");
  const T ka = n.cast(k, c, "sdpa math k.to(fp32)");
  const T va = n.cast(v, c, "sdpa math v.to(fp32)");
  const T query = n.scale(qa, "sdpa math q*sqrt(scale)");  // keeps q's (b, s, a, d) memory order
  locals = {qa, ka, va, query};
  if (s.runtime.sdpa_mask == SdpaMask::is_causal) {
    // ones({s, s}, bool).tril(), then where(mask, 0, -inf) in the compute dtype: no gradient.
    Op mk;
    mk.name = "sdpa math causal mask";
    mk.fwd_scratch = sq * sq;  // the bool triangle while the float mask is made
    locals.push_back(n.make(std::move(mk), sq * sq, c));
  }
  // GQA: key/value.repeat_interleave(a / k, -3): contiguous copies whose backward sums the
  // repeats (pre_process_group_query_attention_input).
  T ke = ka, ve = va;
  bool contiguous = k_contiguous;
  if (k.n < N * a * d) {
    ke = n.expand_copy(ka, N * a * d, "sdpa math repeat_interleave k");
    ve = n.expand_copy(va, N * a * d, "sdpa math repeat_interleave v");
    contiguous = true;
    locals.push_back(ke);
  }
  // key_expanded^T * sqrt(scale) keeps the key's memory order: bmm views it as (b*a, d, s) when
  // the key is contiguous (or b = 1), else matmul copies it; the query likewise.
  const T kt = n.scale(ke, "sdpa math k^T*sqrt(scale)");
  const T qc = b1 ? query : n.copy(query, "sdpa math matmul copy q");
  const T ktc = contiguous || b1 ? kt : n.copy(kt, "sdpa math matmul copy k^T");
  T sc = n.bmm(qc, ktc, b * a * sq * sq, "sdpa math bmm q k^T");  // + mask: add_ in place
  // _safe_softmax: softmax (its output, saved, is reused by where_out), isneginf (bool) and the
  // all-masked rows (bool) as temporaries [DY 2868].
  Op sm;
  sm.name = "sdpa math _safe_softmax";
  sm.reads = {sc.id};
  sm.save_output = true;
  sm.grad_to = {sc.id};
  sm.fwd_scratch = b * a * sq * sq + b * a * sq;
  T p = n.make(std::move(sm), sc.n, c);
  p = n.dropout(p, m.attention_dropout, "sdpa math dropout");
  const T vc = contiguous || b1 ? ve : n.copy(ve, "sdpa math matmul copy v");
  Op pv;  // bmm(p, v): saves both [DY 378]
  pv.name = "sdpa math bmm p v";
  pv.gemm = true;
  pv.reads = {p.id, vc.id};
  pv.saves_if = {{p.id, vc.id}, {vc.id, p.id}};
  pv.grad_to = {p.id, vc.id};
  // make_tuple(matmul(attn, v).to(origin), attn.to(origin)): the discarded second output is a
  // copy of the probabilities when the dtype changes, alive while the first is computed.
  const int64_t probs_copy = c != origin ? b * a * sq * sq * origin : 0;
  pv.fwd_scratch = probs_copy;
  T o = n.make(std::move(pv), N * a * d, c);
  if (c != origin) {
    Op back;
    back.name = "sdpa math out.to(dtype)";
    back.reads = {o.id};
    back.grad_to = {o.id};
    back.grad_bytes = {o.bytes()};
    back.fwd_scratch = probs_copy;
    o = n.make(std::move(back), o.n, origin);
  }
  for (const T& t : locals) n.hold(t);
  return o;
}

// The attention block of a decoder layer, from the normed input to the output projection.
T attention_block(Net& n, T x, int64_t layer, AttnHeld* held) {
  const TrainingSetup& s = n.s_;
  const ModelSpec& m = s.model;
  const int64_t b = s.batch.micro_batch, sq = s.batch.seq_len, N = b * sq;
  const int64_t a = m.num_attention_heads, kv = m.num_key_value_heads, d = m.head_dim;
  const int64_t qd = m.qk_head_dim(), vd = m.attn_out_dim();
  const auto lins = layer_linears(m, false);
  auto find = [&](Role r) { return *std::find_if(lins.begin(), lins.end(), [&](const Linear& l) { return l.role == r; }); };
  const bool train_norm = s.finetune.mode == FinetuneMode::full && !layer_frozen(s, layer);

  T q, k, v;
  if (m.mla()) {
    mla_qkv(n, x, layer, lins, held, &q, &k, &v);
  } else {
    if (m.fused_qkv) {
      const T qkv = n.linear(x, find(Role::qkv), layer, "qkv_proj");
      held->until_attention_end.push_back(qkv);
      q = n.slice(qkv, N * a * d, "split q");
      k = n.slice(qkv, N * kv * d, "split k");
      v = n.slice(qkv, N * kv * d, "split v");
    } else {
      q = n.linear(x, find(Role::q), layer, "q_proj");
      k = n.linear(x, find(Role::k), layer, "k_proj");
      v = n.linear(x, find(Role::v), layer, "v_proj");
    }
    const bool l2 = m.qk_norm == QkNorm::l2;  // Llama-4 normalises after RoPE
    if (has_qk_norm(m) && !l2) {
      q = qk_norm(n, q, a, train_norm, "q_norm");
      k = qk_norm(n, k, kv, train_norm, "k_norm");
    }
    if (m.positions == PositionKind::rotary) {
      q = apply_rope(n, q, m.rotary_fraction, held);
      k = apply_rope(n, k, m.rotary_fraction, held);
    }
    if (l2) {
      q = qk_norm(n, q, a, train_norm, "q l2 norm");
      k = qk_norm(n, k, kv, train_norm, "k l2 norm");
    }
  }
  for (T t : {q, k, v}) held->until_attention_end.push_back(t);

  const AttentionKernel choice = attention_kernel(s);
  const AttnKernel kernel = kernel_of(choice);
  // HF passes K/V at their own head count (enable_gqa) or repeat_kv copies (contiguous) of them.
  const bool repeat = kernel != AttnKernel::eager && !choice.enable_gqa && kv < a;
  const bool old_sdpa_copies = kernel == AttnKernel::fused && s.attention == AttentionImpl::sdpa && !s.runtime.transformers_at_least(4, 56);
  T o;
  if (kernel != AttnKernel::eager) {
    if (n.ac_) {  // scaled_dot_product_attention is in autocast's half list (CUDA and CPU)
      q = n.cast(q, Net::c_, "autocast cast q");
      k = n.cast(k, Net::c_, "autocast cast k");
      v = n.cast(v, Net::c_, "autocast cast v");
    }
    if (repeat) {
      k = n.expand_copy(k, N * a * qd, "repeat_kv k", kv == 1);
      v = n.expand_copy(v, N * a * vd, "repeat_kv v", kv == 1);
    }
    // Before 4.56 sdpa_attention_forward made q, k and v contiguous (b, a, s, d) copies, which the
    // kernel saves (the RoPE outputs and a fused qkv's slices are then freed with the
    // attention's locals); from 4.56 it passes the views (PR #40315).
    if (old_sdpa_copies) {
      q = n.copy(q, "query.contiguous()");
      k = n.copy(k, "key.contiguous()");
      v = n.copy(v, "value.contiguous()");
    }
  }
  // flash_attention_2 needs one head width: MLA pads v to the q/k width (F.pad, a copy).
  const bool pad_v = kernel == AttnKernel::fused && s.attention == AttentionImpl::flash && vd != qd;
  if (pad_v) v = n.plain(v, "F.pad(value)", N * a * qd);
  if (kernel == AttnKernel::math) {
    o = sdpa_math(n, q, k, v, repeat && kv > 1);
    o = n.copy(o, "transpose(1,2).contiguous()");
  } else if (kernel == AttnKernel::fused) {
    // SDPA flash / mem-efficient / cuDNN, flash-attn, or torch's CPU flash kernel: saves q, k, v,
    // out and the fp32 logsumexp [DY 2872-2882] (and, on CUDA, the philox seed and offset: two
    // int64 scalars, not counted); with GQA K/V stay at k heads (enable_gqa).
    Op op;
    op.name = "flash attention";
    op.sac_save = n.sac_;  // SDPA's outputs are on the per-op policy's save list
    op.reads = {q.id, k.id, v.id};
    op.saves = {q.id, k.id, v.id};
    op.save_output = true;
    op.grad_to = {q.id, k.id, v.id};
    op.grad_bytes = {q.bytes(), k.bytes(), v.bytes()};
    if (n.cuda_) {
      // logsumexp (b, a, s) fp32: mem-efficient pads it to 32 rows (kAlignLSE,
      // attention.cu:1262-1274); flash (flash_api.cpp mha_fwd softmax_lse) and cuDNN
      // (MHA.cpp run_cudnn_SDP_fprop: (b, a, s, 1)) do not.
      const bool padded = choice.backend == AttnBackend::mem_efficient;
      op.saved_aux_bytes = b * a * (padded ? (sq + 31) / 32 * 32 : sq) * kFp32;
      // Backward: dq accumulator in fp32, softmax_d, and K/V gradients at a heads before the GQA
      // reduction (flash_api.cpp:904-954).
      op.bwd_scratch = N * a * qd * kFp32 + b * a * sq * kFp32 + (kv < a && !repeat ? N * a * (qd + vd) * q.dt : 0);
    } else {
      // CPU flash (_scaled_dot_product_flash_attention_cpu, attention.cpp @ v2.6.0): output
      // empty_like(query), logsumexp (b, s, a) in the accumulate dtype (fp32 for fp32/bf16/fp16).
      // Backward: grad_q/k/v = zeros of q, k, v (_cpu_backward); grad_out.contiguous() is a view
      // here. The kernels' per-thread blocks (forward threads x (q_split x kv_split + q_split x d)
      // x 4 B, backward threads x 2 x q_split x kv_split x 4 B, q_split <= 256, kv_split <= 512;
      // cpu/FlashAttentionKernel.cpp @ v2.6.0) depend on the thread count and are not modelled.
      // With AMX (not capped by ONEDNN_MAX_CPU_ISA) the bf16 forward also packs K and V into
      // reordered copies (need_pack); not modelled either.
      op.saved_aux_bytes = b * a * sq * kFp32;
    }
    // A padded batch's mask tensor: autocast casts every floating argument of SDPA, the fp32
    // mask included, to a half copy per call, which the kernel saves (cached_cast only caches
    // weights; autocast_mode.cpp @ v2.6.0). Without autocast the shared mask itself is saved.
    if (s.attention == AttentionImpl::sdpa && s.runtime.sdpa_mask == SdpaMask::tensor && n.ac_ && residual_bytes(s) != Net::c_)
      op.saved_aux_bytes += b * sq * sq * Net::c_;
    o = n.make(std::move(op), N * a * (pad_v ? qd : vd), q.dt);
    if (pad_v) o = n.slice(o, N * a * vd, "attn_output[..., :v_head_dim]");
    // CUDA's flash kernel lays its output out like q: with the (b, a, s, d) copy of q (before
    // 4.56), transpose(1, 2).contiguous() copies it, and o_proj saves that second copy. A partial
    // rotary's torch.cat((q_rot, q_pass), -1) (apply_rotary_pos_emb, GPT-NeoX/Phi/StableLM) makes
    // q contiguous in (b, a, s, d) as well, so the flash and cuDNN outputs (laid out like q) are
    // copied the same way on every release: shared/gpu/h200-saved-tensors.txt, pythia-1b in fp16
    // autocast on torch 2.11, saves three (s, h) fp16 inputs per layer (query_key_value, dense,
    // dense_h_to_4h) beside the cuDNN output. The mem-efficient kernel allocates its output as
    // (b, s, a, d) whatever q's layout (attention.cu), so it is not copied.
    const bool heads_first_q = m.positions == PositionKind::rotary && m.rotary_fraction < 1.0 && !m.mla() &&
                               (choice.backend == AttnBackend::flash || choice.backend == AttnBackend::cudnn);
    if ((old_sdpa_copies || heads_first_q) && n.cuda_ && s.runtime.sdpa_mask != SdpaMask::tensor)
      o = n.copy(o, "attn_output.transpose(1,2).contiguous()");
    else
      o = n.view(o, "transpose(1,2)");  // (b, s, a, d) already: contiguous() is a no-op
  } else {
    // Eager attention (HF eager_attention_forward / GPT2Attention._attn / BertSelfAttention),
    // following the dtypes: under autocast the matmuls run in half, the fp32 mask promotes the
    // scores, Llama's softmax asks for fp32 and casts back to the query's dtype.
    const bool selective = s.checkpointing.mode == CheckpointMode::selective;
    const int64_t r = residual_bytes(s);
    const bool fp32_softmax = m.softmax_fp32;
    const int first_core = std::max({q.id, k.id, v.id}) + 1;  // the core starts after q, k, v
    // q keeps the (b, s, a, d) memory order of the projection: matmul copies it to (b*a, s, d),
    // except at b = 1, where merging the batch dim is a view (measured on 1.13: no copy, and bmm
    // saves views that keep the projection's storage alive). MLA's q and k are torch.cat outputs
    // in (b, a, s, d) order: viewable; its v is a strided slice of kv_b_proj's output: copied.
    const bool b1 = b == 1;
    const T qc = n.mm_operand(q, b1 || m.mla(), "matmul copy q");
    // k: repeat_kv makes a contiguous (b, a, s, d) copy whose transpose is viewable; without it
    // matmul copies k^T.
    // One KV head (MQA): repeat_kv is a view with a stride-0 head dim, which matmul can fold
    // into its batch only at b = 1; otherwise matmul copies it.
    const bool mqa = kv == 1 && a > 1 && !m.mla();
    T kc;
    if (kv < a) kc = n.mm_operand(n.expand_copy(k, N * a * qd, "repeat_kv k", mqa), !mqa || b1, "matmul copy k^T");
    else kc = n.mm_operand(k, b1 || m.mla(), "matmul copy k^T");
    T sc = n.bmm(qc, kc, b * a * sq * sq, "bmm q k^T");
    sc = n.scale(sc, fp32_softmax ? "* scaling" : "/ sqrt(d)");
    if (m.attn_softcap > 0) {  // attention logit soft-capping: tanh saves its output
      sc = n.scale(sc, "softcap /");
      sc = n.unary_saving_output(sc, "softcap tanh");
      sc = n.scale(sc, "softcap *");
    }
    if (m.positions == PositionKind::alibi) sc = n.scale(sc, "+ alibi position_bias");  // (1, a, 1, s) broadcast
    // Causal mask: GPT-2 torch.where with a mask value of the scores' dtype; MPT masked_fill with a
    // bool mask; Llama/BERT add the 4-D mask built in the model dtype, which promotes half scores
    // under autocast.
    if (m.causal_mask == MaskKind::bool_buffer) sc = n.plain(sc, "where(causal)");
    else if (m.causal_mask == MaskKind::bool_4d) sc = n.plain(sc, "masked_fill(causal)");
    else sc = n.scale(sc, "+ causal_mask", std::max(sc.dt, r));
    T p;
    if (m.attention_sinks) {
      // GPT-OSS eager_attention_forward: cat the per-head sink as one more column, subtract the
      // row max (max.dim saves its int64 indices), softmax in the scores' dtype, drop the sink
      // column (a view that keeps the (s + 1)-wide probabilities).
      const int64_t rows = b * a * sq;
      const T comb = n.plain(sc, "cat(scores, sinks)", rows * (sq + 1));
      Op mx;
      mx.name = "max(dim=-1)";
      mx.reads = {comb.id};
      mx.saved_aux_bytes = rows * kInt64;
      mx.grad_to = {comb.id};
      mx.grad_bytes = {comb.bytes()};
      const T rowmax = n.make(std::move(mx), rows, comb.dt);
      const T shifted = n.add(comb, rowmax, "- max");
      const T probs = n.softmax(shifted, shifted.dt);
      p = n.slice(probs, b * a * sq * sq, "probs[..., :-1]");
    } else {
      // softmax: Llama-style code asks for fp32; GPT-2/BERT follow the autocast policy (fp32 on
      // CUDA, unchanged by LibTorch 1.13's CPU autocast).
      const int64_t p_dt = fp32_softmax ? kFp32 : ((n.ac_ && n.cuda_) ? kFp32 : sc.dt);
      p = n.softmax(sc, p_dt);
      // .to(query.dtype) (Llama) / .type(value.dtype) (GPT-2)
      p = n.cast(p, fp32_softmax ? q.dt : v.dt, "probs .to(dtype)");
      // Llama's `attn_weights = softmax(attn_weights, dtype=fp32).to(query.dtype)` rebinds the
      // scores only when the whole statement is done: they live through the softmax's fp32 copy
      // and the cast back (GPT-2 rebinds after the softmax, a statement of its own).
      if (fp32_softmax) n.hold(sc);
    }
    p = n.dropout(p, m.attention_dropout, "attn dropout");
    held->weights = p;
    p = n.mm_operand(p, true, "");
    T vc;
    if (kv < a) vc = n.mm_operand(n.expand_copy(v, N * a * vd, "repeat_kv v", mqa), !mqa || b1, "matmul copy v");
    else vc = n.mm_operand(v, b1 && !m.mla(), "matmul copy v");
    o = n.bmm(p, vc, N * a * vd, "bmm p v");
    o = n.copy(o, "transpose(1,2).contiguous()");
    if (selective)  // the core, from the q copy through bmm(p, v), is recomputed in backward
      for (int id = first_core; id < o.id; ++id) n.g_.mark_recompute(id);
  }
  return n.linear(o, find(Role::o), layer, "o_proj");
}

// GPT-OSS expert activation (GptOssExperts.forward): gate = gate_up[..., ::2].clamp(max=7),
// up = gate_up[..., 1::2].clamp(-7, 7) (clamp saves its input), glu = gate * sigmoid(gate * 1.702),
// (up + 1) * glu.
T clamped_swiglu(Net& n, T gate, T up) {
  const T g = n.unary_saving_input(gate, "gate.clamp(max)");
  const T u = n.unary_saving_input(up, "up.clamp(min, max)");
  const T ga = n.scale(g, "gate * alpha");
  const T sg = n.unary_saving_output(ga, "sigmoid");
  const T glu = n.mul(g, sg, "gate * sigmoid");
  const T u1 = n.plain(u, "up + 1");
  return n.mul(u1, glu, "(up + 1) * glu");
}

// Dense MLP: fc_in -> act -> down, or SwiGLU/GeGLU: act(gate(x)) * up(x) -> down. Experts with a
// fused gate|up matrix (model.fused_expert_gate_up) split its output by chunk or, with the clamped
// SwiGLU, by even/odd columns.
// Liger's LigerSiLUMulFunction (src/liger_kernel/ops/swiglu.py @ v0.5.10 L106-114): silu(a) * b in
// one kernel that saves a and b and recomputes silu in backward; torch.compile keeps the same.
T fused_swiglu(Net& n, T g, T u) {
  Op o;
  o.name = n.s_.runtime.liger ? "liger swiglu" : "compiled silu*up";
  o.reads = {g.id, u.id};
  o.saves = {g.id, u.id};
  o.grad_to = {g.id, u.id};
  o.grad_bytes = {g.bytes(), u.bytes()};
  return n.make(std::move(o), g.n, std::max(g.dt, u.dt));
}

T mlp_block(Net& n, T x, int64_t layer, int64_t width, Role gate_r, Role up_r, Role down_r, int64_t count = 1) {
  const ModelSpec& m = n.s_.model;
  const int64_t h = m.hidden_size;
  const bool expert = gate_r == Role::expert_gate;
  if (m.gated_mlp) {
    T g, u;
    if ((m.fused_gate_up && gate_r == Role::gate) || (expert && m.fused_expert_gate_up)) {
      const Role r = expert ? Role::expert_gate_up : Role::gate_up;
      const bool bias = expert ? m.expert_bias : m.mlp_bias;
      const T gu = n.linear(x, Linear{r, h, 2 * width, bias, count}, layer, "gate_up_proj");
      g = n.slice(gu, gu.n / 2, "chunk gate");
      u = n.slice(gu, gu.n / 2, "chunk up");
    } else {
      g = n.linear(x, Linear{gate_r, h, width, m.mlp_bias && gate_r == Role::gate, count}, layer, "gate_proj");
      const bool fused = n.fused_ && !(expert && m.clamped_swiglu) && m.activation == Activation::silu;
      if (!expert && !fused) {
        // HF's gated MLPs evaluate act_fn(gate_proj(x)) before up_proj(x) (LlamaMLP.forward:
        // `down_proj(act_fn(gate_proj(x)) * up_proj(x))`, modeling_llama.py @ v4.57.1; Qwen2,
        // Mistral, Gemma alike), so the gate's output dies (no grad) or is saved before the up
        // projection is made.
        const T a = n.activation(g);
        u = n.linear(x, Linear{up_r, h, width, m.mlp_bias && up_r == Role::up, count}, layer, "up_proj");
        const T prod = n.mul(a, u, "act*up");
        const bool down_bias = m.mlp_bias && down_r == Role::down;
        return n.linear(prod, Linear{down_r, width, h, down_bias, count}, layer, "down_proj");
      }
      u = n.linear(x, Linear{up_r, h, width, m.mlp_bias && up_r == Role::up, count}, layer, "up_proj");
    }
    const bool fused = n.fused_ && !(expert && m.clamped_swiglu) && m.activation == Activation::silu;
    const T prod = expert && m.clamped_swiglu ? clamped_swiglu(n, g, u) : fused ? fused_swiglu(n, g, u) : n.mul(n.activation(g), u, "act*up");
    const bool down_bias = expert ? m.expert_bias : m.mlp_bias && down_r == Role::down;
    return n.linear(prod, Linear{down_r, width, h, down_bias, count}, layer, "down_proj");
  }
  const T f = n.linear(x, Linear{Role::fc_in, h, width, m.mlp_bias, count}, layer, "fc_in");
  const T act = n.activation(f);
  return n.linear(act, Linear{Role::down, width, h, m.mlp_bias, count}, layer, "fc_out");
}

// top-k of (N, E) values: new values, int64 indices saved [DY 1754].
T topk(Net& n, T x, int64_t N, int64_t K) {
  Op tk;
  tk.name = "topk";
  tk.reads = {x.id};
  tk.saved_aux_bytes = N * K * kInt64;
  tk.grad_to = {x.id};
  tk.grad_bytes = {x.bytes()};
  return n.make(std::move(tk), N * K, x.dt);
}

// routing_weights /= sum: the in-place div clones the old self and saves the sum [DY 588].
T renormalise(Net& n, T w, int64_t N, int64_t K) {
  const T sum = n.plain(w, "topk sum", N);
  Op dv;
  dv.name = "routing /= sum";
  dv.reads = {w.id, sum.id};
  dv.saves = {sum.id};
  dv.saved_aux_bytes = N * K * w.dt;  // original self clone
  dv.grad_to = {w.id, sum.id};
  return n.make(std::move(dv), N * K, w.dt);
}

// The router (model.router): the (N, K) routing weights, or Llama-4's (N, E) scores.
T router(Net& n, T x, int64_t layer, const Linear& lin) {
  const ModelSpec& m = n.s_.model;
  const int64_t N = n.s_.batch.micro_batch * n.s_.batch.seq_len;
  const int64_t E = m.num_experts, K = m.experts_per_token;
  // DeepSeek-V3: F.linear(x.float(), W.float()).
  const T xin = m.router_fp32 ? n.cast(x, kFp32, "router x.float()") : x;
  const T logits = n.linear(xin, lin, layer, "router");
  T w;
  switch (m.router) {
    case RouterKind::softmax_topk: {
      const T probs = n.softmax(logits, kFp32, "router softmax(fp32)");  // (N, E) fp32 saved
      w = topk(n, probs, N, K);
      if (m.norm_topk_prob) w = renormalise(n, w, N, K);
      break;
    }
    case RouterKind::topk_softmax: {  // GptOssTopKRouter / GraniteMoeTopKGating
      const T top = topk(n, logits, N, K);
      w = n.softmax(top, top.dt, "softmax(top-k)");
      break;
    }
    case RouterKind::sigmoid: {  // DeepseekV3TopkRouter: sigmoid, group-limited top-k (no grad), gather
      const T scores = n.unary_saving_output(logits, "router sigmoid");
      Op g;
      g.name = "scores.gather(topk_indices)";
      g.reads = {scores.id};
      g.saved_aux_bytes = N * K * kInt64;
      g.grad_to = {scores.id};
      g.grad_bytes = {scores.bytes()};
      w = n.make(std::move(g), N * K, scores.dt);
      if (m.norm_topk_prob) w = renormalise(n, w, N, K);
      if (m.routed_scaling_factor != 1.0) w = n.scale(w, "* routed_scaling_factor");
      break;
    }
    case RouterKind::topk_sigmoid: {  // Llama4Router: top-k scattered into -inf, sigmoid(float)
      const T top = topk(n, logits, N, K);
      Op sc;
      sc.name = "full_like(-inf).scatter_(top-k)";
      sc.reads = {top.id};
      sc.saved_aux_bytes = N * K * kInt64;
      sc.grad_to = {top.id};
      const T full = n.make(std::move(sc), N * E, top.dt);
      const T sig = n.unary_saving_output(n.cast(full, kFp32, "scores.float()"), "router sigmoid");
      w = n.cast(sig, logits.dt, "scores .to(dtype)");
      break;
    }
  }
  return w;
}

// Llama4TextMoe.forward: every expert runs on every token. routed_in = x.repeat(E, 1) *
// scores (0 off the top-k), bmm with the (E, h, 2 f) gate|up, act(gate) * up, bmm with down,
// summed over the experts, added in place to the shared expert's output.
T all_experts_block(Net& n, T x, T scores, int64_t layer) {
  const ModelSpec& m = n.s_.model;
  const int64_t N = n.s_.batch.micro_batch * n.s_.batch.seq_len, h = m.hidden_size;
  const int64_t E = m.num_experts, fe = m.expert_width();
  const T rep = n.expand_copy(x, E * N * h, "x.repeat(E, 1)");
  const T col = n.copy(scores, "scores.transpose(0, 1).reshape(-1, 1)");
  const T rin = n.mul(rep, col, "routed_in * scores");
  const T gu = n.linear(rin, Linear{Role::expert_gate_up, h, 2 * fe, false, E}, layer, "experts bmm gate_up");
  const T g = n.slice(gu, gu.n / 2, "chunk gate");
  const T u = n.slice(gu, gu.n / 2, "chunk up");
  const T prod = n.mul(u, n.activation(g), "up * act(gate)");
  const T out = n.linear(prod, Linear{Role::expert_down, fe, h, false, E}, layer, "experts bmm down");
  return n.plain(out, "sum over experts", N * h);
}

// transformers 5's grouped_mm experts (grouped_mm_experts_forward in
// src/transformers/integrations/moe.py, the form of the 5.16/5.17 releases: torch.sort of the
// expert ids, the expert-parallel sentinel mask, reshape+sum instead of index_add_), over the
// stacked parameters (MixtralExperts: gate_up_proj (E, 2 f_e, h), down_proj (E, h, f_e)).
// _grouped_mm is on neither of autocast's lists (moe.py `_grouped_mm` casts the input to the
// weight's dtype for that reason, pytorch/pytorch#174763), so under AMP the experts run and save
// in fp32: what shared/gpu/h200-saved-tensors.txt lists for l-moe-nano-amp (GroupedMmBackward0
// saving (S, h) and (S, f_e) float32). S = N*K routed rows. Per layer, with x in dtype x and
// weights in w (4 under AMP), the saved tensors are:
//   perm // K, perm, inv_perm     3 x S int64 (IndexBackward0 indices)
//   sentinel mask                 S bool (both masked_fill_)
//   selected rows                 S*h*w (grouped_mm gate_up self)
//   gate_up output                S*2f*w (silu saves gate, mul saves up: one storage)
//   act(gate)*up                  S*f*w (mul self, grouped_mm down self)
//   down output, sample weights   S*h*w, S*4 (the routing multiply)
//   offsets                       E int32
// Its backward: _grouped_mm saves self, mat2 and offs [derivatives.yaml _grouped_mm @ v2.11.0].
T grouped_linear(Net& n, T x, const Linear& lin, int64_t layer, T offs, const char* name) {
  const TrainingSetup& s = n.s_;
  const T xin = n.cast(x, n.e_, "input.to(weight.dtype)");
  const int64_t rows = xin.n / lin.in;
  Op o;
  o.name = name;
  o.reads = {xin.id, offs.id};
  o.saves_if = {{xin.id, Op::kParams}};  // self, for mat2's gradient
  o.saves = {offs.id};
  o.grad_to = {xin.id};
  o.grad_bytes = {xin.bytes()};
  o.param_grad_bytes = lin.in * lin.out * lin.count * n.gb_;  // (E, out, in) in the gradient dtype
  o.params_trainable = base_trainable(s, lin.role, layer);
  T y = n.make(std::move(o), rows * lin.out, n.e_);
  if (lin.bias) {
    // out + bias[expert_ids_g]: the gathered (S, out) bias rows (index saves the ids, a local
    // here); backward index_puts the bias gradient (E, out).
    Op b;
    b.name = "bias[expert_ids_g]";
    b.param_grad_bytes = lin.out * lin.count * n.gb_;
    b.params_trainable = base_trainable(s, lin.role, layer);
    const T bias = n.make(std::move(b), rows * lin.out, n.e_);
    y = n.add(y, bias, "+ bias");
  }
  return y;
}

// tensor.masked_fill_(mask, 0): in place; saves the mask; backward grad.masked_fill(mask, 0).
T masked_fill_(Net& n, T x, T mask, const char* name) {
  Op o;
  o.name = name;
  o.reads = {x.id, mask.id};
  o.alias_of = x.id;
  o.saves = {mask.id};
  o.grad_to = {x.id};
  o.grad_bytes = {x.bytes()};
  return T{n.g_.op(std::move(o)), x.n, x.dt};
}

// src[index] along rows (advanced indexing): a copy of `rows` rows; saves the int64 index;
// backward index_puts into zeros shaped like src.
T index_rows(Net& n, T src, T index, int64_t elems, const char* name) {
  Op o;
  o.name = name;
  o.reads = {src.id, index.id};
  o.saves = {index.id};
  o.grad_to = {src.id};
  o.grad_bytes = {src.bytes()};
  return n.make(std::move(o), elems, src.dt);
}

T grouped_experts(Net& n, T x, T w, int64_t layer) {
  const TrainingSetup& s = n.s_;
  const ModelSpec& m = s.model;
  const int64_t N = s.batch.micro_batch * s.batch.seq_len, h = m.hidden_size;
  const int64_t E = m.num_experts, K = m.experts_per_token, S = N * K;
  const auto lins = layer_linears(s, true);
  auto find = [&](Role r) { return *std::find_if(lins.begin(), lins.end(), [&](const Linear& l) { return l.role == r; }); };
  auto plain_int = [&](const char* name, std::vector<int> reads, int64_t elems, int64_t dt, int64_t scratch = 0) {
    Op o;
    o.name = name;
    o.reads = std::move(reads);
    o.fwd_scratch = scratch;
    return n.make(std::move(o), elems, dt);
  };
  // expert_ids_g, perm = torch.sort(top_k_index.reshape(-1)): (S) int64 each, no gradient.
  const T ids_g = plain_int("sort: expert_ids_g", {w.id}, S, kInt64);
  const T perm = plain_int("sort: perm", {w.id}, S, kInt64);
  // hidden_states[perm // num_top_k]: the (S, h) gather saves its (S) int64 index; backward
  // index_puts into zeros (N, h).
  const T tok = plain_int("perm // num_top_k", {perm.id}, S, kInt64);
  T xs = index_rows(n, x, tok, S * h, "hidden_states[perm // num_top_k]");
  // sample_weights[perm]: (S) routing weights; saves perm.
  const T sw = index_rows(n, w, perm, S, "sample_weights[perm]");
  // histc(expert_ids_g.int()) and cumsum(dtype=int32): the (E) offsets both grouped_mm save.
  const T offs = plain_int("histc/cumsum offsets", {ids_g.id}, E, 4, S * 4 + E * 4);
  // sentinel_mask = (expert_ids_g >= E).unsqueeze(-1): (S) bool, saved by both masked_fill_.
  const T mask = plain_int("sentinel_mask", {ids_g.id}, S, 1);
  xs = masked_fill_(n, xs, mask, "selected_hidden_states_g.masked_fill_");

  const T gu = grouped_linear(n, xs, find(Role::expert_gate_up), layer, offs, "grouped_mm gate_up");
  // _apply_gate: gate, up = chunk(2); act(gate) * up (GPT-OSS: its clamped gate on even/odd columns).
  const T g = n.slice(gu, gu.n / 2, "chunk gate");
  const T u = n.slice(gu, gu.n / 2, "chunk up");
  const bool fused = n.fused_ && !m.clamped_swiglu && m.activation == Activation::silu;
  const T act = m.clamped_swiglu ? clamped_swiglu(n, g, u) : fused ? fused_swiglu(n, g, u) : n.mul(n.activation(g), u, "act*up");
  const T y = grouped_linear(n, act, find(Role::expert_down), layer, offs, "grouped_mm down");
  // weighted_out = proj_out * sample_weights_g.unsqueeze(-1): saves both; then the post-mask.
  T wo = n.mul(y, sw, "proj_out * sample_weights_g");
  wo = masked_fill_(n, wo, mask, "weighted_out.masked_fill_");
  // inv_perm = empty_like(perm); inv_perm[perm] = arange(S) (a temporary).
  const T inv = plain_int("inv_perm", {perm.id}, S, kInt64, S * kInt64);
  // weighted_out[inv_perm]: saves inv_perm; backward index_puts into zeros (S, h).
  const T back = index_rows(n, wo, inv, S * h, "weighted_out[inv_perm]");
  // .view(N, K, h).sum(dim=1): saves nothing; its backward expands the gradient (a view).
  Op sum;
  sum.name = "view(N, K, h).sum(1)";
  sum.reads = {back.id};
  sum.grad_to = {back.id};
  sum.grad_passthrough = true;
  const T out = n.make(std::move(sum), N * h, back.dt);
  // The function's locals (expert_ids_g, perm, offsets, the mask, inv_perm, sample_weights_g)
  // live until it returns.
  for (const T& t : {ids_g, perm, offs, mask, inv, sw}) n.hold(t);
  return n.cast(out, x.dt, "final_hidden_states.to(dtype)");
}

// HF MixtralSparseMoeBlock (loop over experts) with optional shared experts (Qwen2-MoE,
// DeepSeek), DeepSeek-V3's fp32 combine and Llama-4's all-experts block. Tokens are assumed
// routed uniformly: expert i gets K*N/E tokens, capped at the capacity ceil(cf * K * N / E) when
// a capacity factor is set.
T moe_block(Net& n, T x, int64_t layer) {
  const TrainingSetup& s = n.s_;
  const ModelSpec& m = s.model;
  const int64_t N = s.batch.micro_batch * s.batch.seq_len, h = m.hidden_size;
  const int64_t E = m.num_experts, K = m.experts_per_token, fe = m.expert_width();
  const int64_t e = x.dt;
  const auto lins = layer_linears(m, true);
  auto find = [&](Role r) { return *std::find_if(lins.begin(), lins.end(), [&](const Linear& l) { return l.role == r; }); };

  T w = router(n, x, layer, find(Role::router));
  T acc;
  if (m.moe_impl == MoeImpl::all_experts) {
    acc = all_experts_block(n, x, w, layer);
  } else if (grouped_mm_experts(s)) {
    if (!m.moe_fp32_combine) w = n.cast(w, e, "routing .to(dtype)");
    acc = grouped_experts(n, x, w, layer);
  } else {
    if (!m.moe_fp32_combine) w = n.cast(w, e, "routing .to(dtype)");
    // expert_mask = one_hot(selected, E).permute(2, 1, 0): N*K*E int64, held through the loop.
    Op oh;
    oh.name = "one_hot";
    oh.reads = {w.id};
    const T expert_mask = n.make(std::move(oh), N * K * E, kInt64);

    const int64_t routed = K * N;
    int64_t cap = routed;  // per-expert cap
    if (m.capacity_factor > 0) cap = static_cast<int64_t>(std::ceil(m.capacity_factor * routed / static_cast<double>(E)));
    // final_hidden_states = zeros(N, h) (DeepSeek-V3: in the routing weights' fp32): becomes the
    // output (index_add_ into it).
    Op zeros;
    zeros.name = "final_hidden_states zeros";
    acc = n.make(std::move(zeros), N * h, m.moe_fp32_combine ? w.dt : e);
    T prev_x, prev_y;  // a loop iteration's locals live until the next iteration reassigns them
    for (int64_t i = 0; i < E; ++i) {
      int64_t ne = routed / E + (i < routed % E ? 1 : 0);
      ne = std::min(ne, cap);
      if (ne == 0) continue;
      // where(expert_mask[i]) -> (idx, top_x): 2*ne int64, saved by index and index_add_.
      Op wh;
      wh.name = "where(expert_mask)";
      wh.reads = {w.id};
      wh.saved_aux_bytes = 2 * ne * kInt64;
      n.make(std::move(wh), 0, 1);
      // hidden_states[None, top_x]: a copy of ne rows; backward scatters into zeros(N, h).
      Op gather;
      gather.name = "gather tokens";
      gather.reads = {x.id};
      gather.grad_to = {x.id};
      gather.grad_bytes = {N * h * x.dt};
      const T xi = n.make(std::move(gather), ne * h, x.dt);
      n.hold(prev_x);
      const T y = mlp_block(n, xi, layer, fe, Role::expert_gate, Role::expert_up, Role::expert_down);
      // routing_weights[top_x, idx, None]: ne values (index saves the indices).
      const T rw = n.plain(w, "routing weight column", ne);
      const T weighted = n.mul(y, rw, "expert_out * weight");
      n.hold(prev_y);
      prev_x = xi;
      prev_y = weighted;
      const T src = n.cast(weighted, acc.dt, ".to(dtype)");
      // final.index_add_(0, top_x, src): saves index and source [DY 853].
      Op ia;
      ia.name = "index_add_";
      ia.reads = {acc.id, src.id};
      ia.alias_of = acc.id;  // in place
      ia.saves = {src.id};
      ia.grad_to = {acc.id, src.id};
      ia.grad_share = {acc.id};
      ia.grad_bytes = {acc.bytes(), src.bytes()};
      acc = T{n.g_.op(std::move(ia)), acc.n, acc.dt};
    }
    n.hold(expert_mask);
    n.hold(prev_x);
    n.hold(prev_y);
    if (acc.dt != e) acc = n.cast(acc, e, "final_hidden_states.type(dtype)");
  }
  if (m.num_shared_experts > 0 || m.shared_expert_intermediate_size > 0) {
    const int64_t fs = m.shared_expert_intermediate_size > 0 ? m.shared_expert_intermediate_size
                                                             : m.num_shared_experts * fe;
    T sh = mlp_block(n, x, layer, fs, Role::shared_gate, Role::shared_up, Role::shared_down);
    if (m.shared_expert_gate) {
      const T gl = n.linear(x, find(Role::shared_expert_gate), layer, "shared_expert_gate");
      const T sg = n.unary_saving_output(gl, "sigmoid");
      sh = n.mul(sg, sh, "sigmoid * shared");
    }
    acc = n.add(acc, sh, "+ shared_expert");
  }
  return acc;
}

}  // namespace

// ---- model-level tensors -------------------------------------------------------------------

int64_t batch_input_bytes(const TrainingSetup& s) {
  return 2 * s.batch.micro_batch * s.batch.seq_len * kInt64;  // input_ids + labels
}

int64_t residual_bytes(const TrainingSetup& s) { return weight_bytes_per_param(s.precision) == 4 ? 4 : 2; }

// Sequence parallelism: the rows of the residual stream one rank holds (N / tp, rounded up).
static int64_t sp_degree(const TrainingSetup& s) {
  return s.parallel.sequence_parallel && s.parallel.tensor_parallel > 1 && !s.model.bert_style ? s.parallel.tensor_parallel : 1;
}
static int64_t sp_rows(const TrainingSetup& s, int64_t N) { return (N + sp_degree(s) - 1) / sp_degree(s); }
// Into a tensor-parallel region: the sequence shards all-gathered into the whole sequence (nothing
// saved; backward reduce-scatters the gradient back to the shard). Out of it: the partial sums of
// a row-parallel linear reduce-scattered to this rank's shard (backward all-gathers).
static T sp_gather(Net& n, T x, int64_t N, int64_t h) {
  return sp_degree(n.s_) > 1 ? n.plain(x, "sequence-parallel all-gather", N * h) : x;
}
static T sp_scatter(Net& n, T x, int64_t N, int64_t h) {
  return sp_degree(n.s_) > 1 ? n.plain(x, "sequence-parallel reduce-scatter", sp_rows(n.s_, N) * h) : x;
}

SharedTensors shared_tensors(const TrainingSetup& s) {
  SharedTensors t;
  const ModelSpec& m = s.model;
  const int64_t b = s.batch.micro_batch, sq = s.batch.seq_len;
  const int64_t e = residual_bytes(s);
  if (m.positions == PositionKind::rotary || m.mla()) {
    // cos, sin (b, s, r) in the model dtype, r the rotated width (int(d * partial_rotary_factor),
    // MLA's qk_rope_head_dim) as the rotary embedding's inv_freq is built for it.
    const int64_t r = m.mla() ? m.qk_rope_head_dim
                              : static_cast<int64_t>(static_cast<double>(m.head_dim) * m.rotary_fraction);
    t.whole_step_bytes += 2 * b * sq * r * e;
    t.what = "RoPE cos/sin 2*b*s*r*e";
  }
  if (s.attention == AttentionImpl::eager) {
    // 4-D causal mask (b, 1, s, s) in the model dtype, or MPT's bool one. Models mixing sliding
    // and global layers build both masks (causal_mask_mapping: create_causal_mask and
    // create_sliding_window_causal_mask, modeling_gemma2.py @ v4.57.1).
    const int64_t masks = m.sliding_window > 0 && m.global_attention_every > 0 ? 2 : 1;
    if (m.causal_mask == MaskKind::additive) t.forward_bytes += masks * b * sq * sq * e;
    if (m.causal_mask == MaskKind::bool_4d) t.forward_bytes += b * sq * sq;
  }
  if (m.positions == PositionKind::alibi) t.forward_bytes += m.num_attention_heads * sq * kFp32;  // alibi (a, 1, s) fp32
  // HF's sdpa path builds the mask only for a padded batch; the fused kernels save it as their
  // attn_mask/attn_bias, so it lives until the first layer's backward [DY 2872-2882]; the math
  // path adds it in place and saves nothing of it.
  const AttnKernel kernel = kernel_of(attention_kernel(s));
  if (kernel != AttnKernel::eager && s.attention == AttentionImpl::sdpa && s.runtime.sdpa_mask == SdpaMask::tensor &&
      m.causal_mask == MaskKind::additive) {
    // Under autocast the kernel saves its own half copy of the mask instead (attention_block).
    const bool saved = kernel == AttnKernel::fused && !(is_autocast(s.precision) && e != 2);
    if (saved) t.whole_step_bytes += b * sq * sq * e;
    else t.forward_bytes += b * sq * sq * e;
  }
  const int64_t ew = weight_bytes_per_param(s.precision);
  t.embeds_bytes = b * sq * m.hidden_size * ew;
  if (m.positions == PositionKind::learned) t.embeds_bytes += sq * m.hidden_size * ew;
  t.embeds_is_layer_input = m.positions != PositionKind::learned && m.embedding_dropout == 0 && !m.bert_style &&
                            m.type_vocab_size == 0 && !m.scale_embeddings;
  return t;
}

int64_t model_buffer_bytes(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  int64_t bytes = 0;
  // GPT2Attention registers bias = tril(ones(P, P)).bool() per layer (non-persistent buffer).
  if (m.causal_mask == MaskKind::bool_buffer) bytes += m.num_layers * m.max_position_embeddings * m.max_position_embeddings;
  // DeepseekV3TopkRouter registers e_score_correction_bias (E, fp32) per MoE layer.
  if (m.router == RouterKind::sigmoid)
    for (int64_t i = 0; i < m.num_layers; ++i)
      if (m.is_moe_layer(i)) bytes += m.num_experts * kFp32;
  return bytes;
}

int64_t logits_bytes(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  const int64_t width = m.head == HeadKind::sequence_classification ? m.num_labels : m.vocab_size;
  const int64_t dt = is_autocast(s.precision) ? 2 : weight_bytes_per_param(s.precision);
  return s.batch.micro_batch * (m.head == HeadKind::sequence_classification ? 1 : s.batch.seq_len) * width * dt;
}

bool head_shares_embedding(const TrainingSetup& s) {
  return s.model.tie_word_embeddings && s.model.head != HeadKind::sequence_classification;
}

// ---- segments --------------------------------------------------------------------------------

Segment embedding_segment(const TrainingSetup& s) {
  Segment seg("embedding");
  Net n(s, seg);
  const ModelSpec& m = s.model;
  const int64_t N = s.batch.micro_batch * s.batch.seq_len, h = m.hidden_size;
  const int64_t ew = weight_bytes_per_param(s.precision);
  const bool train = embeddings_trainable(s);
  // embedding(weight, ids): saves the indices (the batch's input_ids, counted as batch input).
  // Backward: embedding_dense_backward builds zeros(V, h) and index_adds [Embedding.cpp:112].
  // A tied head already holds the weight's .grad, so this one is a temporary added into it.
  Op tok;
  tok.name = "embed_tokens";
  tok.param_grad_bytes = head_shares_embedding(s) ? 0 : m.vocab_size * h * n.gb_;
  tok.bwd_scratch = head_shares_embedding(s) && train ? m.vocab_size * h * n.gb_ : 0;
  tok.params_trainable = train;
  tok.tied_params = head_shares_embedding(s);
  T x = n.make(std::move(tok), N * h, ew);
  if (m.positions == PositionKind::learned) {
    Op pos;  // wpe(position_ids) is (1, s, h), broadcast in the add
    pos.name = "embed_positions";
    pos.param_grad_bytes = m.max_position_embeddings * h * n.gb_;
    pos.params_trainable = train;
    const T p = n.make(std::move(pos), s.batch.seq_len * h, ew);
    x = n.add(x, p, "+ positions");
  }
  if (m.type_vocab_size > 0) {
    Op tt;
    tt.name = "token_type_embeddings";
    tt.param_grad_bytes = m.type_vocab_size * h * n.gb_;
    tt.params_trainable = train;
    const T t = n.make(std::move(tt), N * h, ew);
    x = n.add(x, t, "+ token types");
  }
  if (m.scale_embeddings) x = n.scale(x, "embeddings * scale");  // Gemma sqrt(h), Granite embedding_multiplier
  if (m.bert_style) x = n.layer_norm(x, h, train, "embeddings.LayerNorm");
  x = n.dropout(x, m.embedding_dropout, "embedding dropout");
  // Sequence parallelism: the row-parallel embedding's output is reduce-scattered to the rank's
  // shard of the sequence (torchtitan RowwiseParallel(output_layouts=Shard(1))).
  x = sp_scatter(n, x, N, h);
  seg.output(x.id);
  return seg;
}

Segment layer_segment(const TrainingSetup& s, bool moe, int64_t layer) {
  Segment seg(moe ? "moe layer" : "layer");
  Net n(s, seg);
  const ModelSpec& m = s.model;
  const int64_t N = s.batch.micro_batch * s.batch.seq_len, h = m.hidden_size;
  const bool train_norm = s.finetune.mode == FinetuneMode::full && !layer_frozen(s, layer);
  T x = n.input(sp_rows(s, N) * h, residual_bytes(s));

  if (m.bert_style) {
    // BertLayer (post-LN): attention -> dense -> dropout -> LN(x + .) -> intermediate -> gelu ->
    // output -> dropout -> LN(x + .).
    AttnHeld held;
    T att = attention_block(n, x, layer, &held);
    att = n.dropout(att, m.hidden_dropout, "hidden dropout");
    const T x2 = n.layer_norm(n.add(att, x, "+ residual"), h, train_norm, "attention.output.LayerNorm");
    T y = mlp_block(n, x2, layer, m.intermediate_size, Role::gate, Role::up, Role::down);
    y = n.dropout(y, m.hidden_dropout, "hidden dropout");
    const T out = n.layer_norm(n.add(y, x2, "+ residual"), h, train_norm, "output.LayerNorm");
    seg.output(out.id);
    return seg;
  }

  const bool sandwich = m.post_norms;
  const bool scaled = m.residual_multiplier != 1.0;  // Granite: residual + sublayer * multiplier
  // The MLP (or MoE block) on a normed shard: gathered in, reduce-scattered out under sequence
  // parallelism.
  auto mlp = [&](T in) {
    const T g = sp_gather(n, in, N, h);
    return sp_scatter(n, moe ? moe_block(n, g, layer) : mlp_block(n, g, layer, m.intermediate_size, Role::gate, Role::up, Role::down),
                      N, h);
  };
  T h1 = m.pre_norms ? n.norm(x, h, train_norm, "input_layernorm") : x;
  AttnHeld held;
  T att = sp_scatter(n, attention_block(n, sp_gather(n, h1, N, h), layer, &held), N, h);
  if (sandwich) att = n.norm(att, h, train_norm, "post_attention_layernorm");
  if (scaled) att = n.scale(att, "* residual_multiplier");
  att = n.dropout(att, m.hidden_dropout, "resid dropout");
  // Held to the end of the attention call: its argument and q/k/v (GPT-2 also its weights).
  n.hold(h1);
  for (T t : held.until_attention_end) n.hold(t);
  if (!m.attn_weights_held_by_layer && held.weights.id >= 0) n.hold(held.weights);
  T out;
  if (m.parallel_residual) {
    // Parallel residual: x + attn(ln1(x)) + mlp(ln2(x)) (GPT-NeoX), or one norm for both (Phi,
    // Falcon, Cohere: x + attn(ln(x)) + mlp(ln(x))).
    const T h2 = m.parallel_shared_norm ? h1 : n.norm(x, h, train_norm, "post_attention_layernorm");
    T y = mlp(h2);
    n.hold(h2);
    y = n.dropout(y, m.hidden_dropout, "resid dropout");
    out = n.add(n.add(y, att, "mlp + attn"), x, "+ residual");
    n.hold(y);  // attn_output and mlp_output are the layer's locals until it returns
    n.hold(att);
  } else {
    const T x2 = n.add(x, att, "+ residual");
    const T h2 = m.pre_norms ? n.norm(x2, h, train_norm, sandwich ? "pre_feedforward_layernorm" : "post_attention_layernorm") : x2;
    T y = mlp(h2);
    n.hold(h2);  // the MLP's argument
    if (sandwich) y = n.norm(y, h, train_norm, "post_feedforward_layernorm");
    if (scaled) y = n.scale(y, "* residual_multiplier");
    y = n.dropout(y, m.hidden_dropout, "resid dropout");
    out = n.add(x2, y, "+ residual");
  }
  // The caller's loop variable holds the layer input, and LlamaDecoderLayer its attn_weights,
  // until the layer returns.
  n.hold(x);
  if (m.attn_weights_held_by_layer && held.weights.id >= 0) n.hold(held.weights);
  seg.output(out.id);
  return seg;
}

// ---- losses other than HF's standard one ----------------------------------------------------

// A compiled cross-entropy over logits as the model returned them (runtime.compile_loss):
// torchtune's compile_loss (torchtune/training/_compile.py @ 1814feb17 L60-87, the per-chunk
// compute_cross_entropy = F.cross_entropy(logits.float(), ...)), torchtitan's compiled loss
// (torchtitan/components/loss.py BaseLoss._maybe_compile: F.cross_entropy(pred.float(), ...)) and
// HF Trainer's torch_compile (the model's forward computes its loss). AOTAutograd's min-cut
// partitioner saves the graph's input rather than the upcast copy or the log-probabilities (the
// cast, the subtraction and the exponential are cheap to recompute, torch/_functorch/partitioners.py
// min_cut_rematerialization_partition), plus the per-row logsumexp and the target; forward fuses the
// fp32 upcast into its two row reductions (no N x V buffer), and backward writes the logits'
// gradient in their own dtype from one pointwise kernel.
static T compiled_cross_entropy(Net& n, T logits, int64_t rows, const char* name) {
  const int64_t V = n.s_.model.vocab_size;
  Op ce;
  ce.name = name;
  ce.reads = {logits.id};
  ce.saves = {logits.id};
  ce.saved_aux_bytes = rows * (kFp32 + kInt64);  // logsumexp and the int64 target
  ce.grad_to = {logits.id};
  ce.grad_bytes = {rows * V * logits.dt};
  return n.make(std::move(ce), 1, kFp32);
}

// torchtune's CEWithChunkedOutputLoss (ce_chunked_output_loss.py @ v0.6.1) and LitGPT's chunked
// head + chunked_cross_entropy (litgpt/model.py, utils.py @ v0.5.7): the final hidden states are
// split into k chunks along the sequence (hidden.chunk(k, dim=1); LitGPT: 128-token pieces), the
// head runs on each chunk, and each chunk's logits are (torchtune: upcast, then)
// cross-entropied alone. The model computes every chunk's logits first and returns the list
// (torchtune TransformerDecoder.chunked_output, LitGPT GPT.forward with lm_head_chunk_size); the
// loss then walks it. The logit chunks stay alive until the loop drops the list; each
// log_softmax saves its chunk of log-probabilities; the fp32 copy is one chunk at a time.
// Backward follows autograd's order (latest node first): every chunk's cross-entropy backward
// runs before any head matmul's, so all chunks' logit gradients are alive together when the
// last chunk's head backward starts (measured in the CPU matrix: the interleaved order was 3%
// under); then the heads, last chunk first, and SplitBackward concatenates the hidden-state
// gradients. The head's weight gradient is made by the last chunk's backward and added into by
// the others (a temporary each).
void chunked_loss(Net& n, Segment& seg, T x, bool train_head) {
  const TrainingSetup& s = n.s_;
  const ModelSpec& m = s.model;
  const int64_t N = x.n / m.hidden_size, h = m.hidden_size, V = m.vocab_size;
  const Runtime& r = s.runtime;
  // The pieces along the sequence, as the frameworks cut it: LitGPT's hidden.split(n, dim=1)
  // gives n, n, ..., the remainder; torchtune's hidden.chunk(k, dim=1) gives ceil(s/k) each and a
  // smaller last one (and fewer than k pieces when ceil(s/k) x (k-1) already covers s). Each
  // piece holds micro-batch x its length rows.
  const int64_t seq = s.batch.seq_len, b = N / std::max<int64_t>(1, seq);
  const int64_t asked = std::clamp<int64_t>(r.loss_chunks, 1, seq);
  const int64_t piece = r.loss_chunk_tokens > 0 ? std::min(r.loss_chunk_tokens, seq) : (seq + asked - 1) / asked;
  const int64_t k = (seq + piece - 1) / piece;
  auto rows_of = [&](int64_t i) { return b * (i + 1 < k ? piece : seq - (k - 1) * piece); };
  const bool trainable = head_trainable(s);
  const int64_t wn = h * V;
  T w{};  // autocast's cached half copy of the head's weight: one, shared by every chunk
  if (n.ac_) {
    Op wc;
    wc.name = "autocast weight copy";
    wc.uncached = !trainable;
    const Cat keep = n.cat_;
    n.cat_ = Cat::weight_copy;
    w = n.make(std::move(wc), wn, Net::c_);
    n.cat_ = keep;
  }
  std::vector<int> losses;
  std::vector<T> chunks;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t rows = rows_of(i);
    Op sp;
    sp.name = "hidden.chunk";
    sp.alias_of = x.id;
    sp.view_bytes = rows * h * x.dt;
    sp.reads = {x.id};
    sp.grad_to = {x.id};
    sp.split_parts = static_cast<int>(k);
    const T xc{seg.op(std::move(sp)), rows * h, x.dt};
    const T xin = n.ac_ ? n.cast(xc, Net::c_, "autocast cast input") : xc;
    Op mm;
    mm.name = "lm_head (chunk)";
    mm.gemm = true;
    mm.reads = {xin.id};
    mm.saves_if = {{xin.id, Op::kParams}};
    if (n.ac_) {
      mm.reads.push_back(w.id);
      mm.saves_if.push_back({w.id, xin.id});
    }
    mm.grad_to = {xin.id};
    mm.grad_bytes = {xin.bytes()};
    // The last chunk's backward runs first; the others add into its gradient in the weight's
    // input buffer before AccumulateGrad runs once: each makes its contribution in the kernel,
    // and the addition happens after the node returns (its output gradient freed). LibTorch
    // 1.13 adds dense gradients out of place (old + new: the sum allocated beside both;
    // torch/csrc/autograd/input_buffer.cpp @ v1.13.0 accumulate, in place only for sparse),
    // later versions in place when the buffer owns its gradient (pytorch/pytorch#88339) -- but
    // the first gradient in it is the transposed view TBackward hands over, which it does not
    // own, so on 2.x too the first addition (the second chunk's) is out of place and the later
    // ones go into that sum. Under autocast the buffer is that of the cached half weight copy, in
    // its dtype. Measured in the CPU matrix on 1.13 and 2.6 (`llama gqa fp32 adamw chunked:8 b1`,
    // `llama mha amp-bf16 sgd chunked:4 b2`).
    if (i + 1 == k) {
      mm.param_grad_bytes = wn * n.gb_;
    } else if (trainable) {
      const int64_t g = wn * (n.ac_ ? Net::c_ : n.gb_);
      mm.bwd_scratch = g;
      mm.bwd_post_scratch = (r.torch_at_least(2, 0) && i + 2 != k ? 1 : 2) * g;
    }
    mm.params_trainable = trainable;
    const int64_t out_dt = n.ac_ ? Net::c_ : std::max(x.dt, n.e_ == 4 ? x.dt : n.e_);
    chunks.push_back(n.make(std::move(mm), rows * V, out_dt));
    if (r.keep_logits) seg.keep(chunks.back().id);  // LitGPT's model returns the list, which the loop keeps
  }
  // The loss then walks the returned list, chunk by chunk.
  for (int64_t i = 0; i < k; ++i) {
    const T lg = chunks[static_cast<size_t>(i)];
    const int64_t rows = lg.n / V;
    if (r.compile_loss) {
      losses.push_back(compiled_cross_entropy(n, lg, rows, "compiled cross_entropy (chunk)").id);
      continue;
    }
    T lf = r.loss_upcast ? n.cast(lg, kFp32, "chunk.float()") : lg;
    if (n.ac_ && lf.dt != kFp32) lf = n.cast(lf, kFp32, "autocast fp32 cast");
    Op ls;
    ls.name = "log_softmax (chunk)";
    ls.reads = {lf.id};
    ls.save_output = true;
    ls.grad_to = {lf.id};
    ls.grad_bytes = {rows * V * lf.dt};
    const T lp = n.make(std::move(ls), rows * V, lf.dt);
    Op nll;
    nll.name = "nll_loss (chunk)";
    nll.reads = {lp.id};
    nll.saved_aux_bytes = rows * kInt64;
    nll.grad_to = {lp.id};
    nll.grad_bytes = {lp.bytes()};
    losses.push_back(n.make(std::move(nll), 1, kFp32).id);
  }
  Op sum;
  sum.name = "sum of chunk losses";
  sum.reads = losses;
  sum.grad_to = losses;
  sum.grad_bytes.assign(losses.size(), kFp32);
  const T loss = n.make(std::move(sum), 1, kFp32);
  // The model returned the list of logit chunks: alive until the loss is computed (torchtune
  // then `del logits` before backward: recipes/full_finetune_single_device.py @ v0.6.1 L632-653).
  for (const T& c : chunks) n.hold(c);
  seg.output(loss.id);
  (void)train_head;
}

// Fused linear cross-entropy (Liger's LigerFusedLinearCrossEntropyFunction,
// src/liger_kernel/ops/fused_linear_cross_entropy.py @ v0.5.10 L37-122; cut-cross-entropy is
// smaller still): the logits are never materialised. Forward walks the rows in chunks of
// next_power_of_2(ceil(N / ceil(V / h))) (one chunk's logits at a time, in the input dtype,
// turned into their gradient in place) and computes the gradients of the hidden states (N x h)
// and of the head's weight (V x h, when it trains) already, which it saves for backward.
void fused_linear_loss(Net& n, Segment& seg, T x, bool train_head) {
  const TrainingSetup& s = n.s_;
  const ModelSpec& m = s.model;
  const int64_t N = x.n / m.hidden_size, h = m.hidden_size, V = m.vocab_size;
  const int64_t dt = n.ac_ ? Net::c_ : x.dt;
  int64_t chunk = 1;
  const int64_t target = std::max<int64_t>(1, (N + (V + h - 1) / h - 1) / ((V + h - 1) / h));
  while (chunk < target) chunk *= 2;
  chunk = std::min(chunk, N);
  const bool trainable = head_trainable(s);
  T xin = n.ac_ ? n.cast(x, Net::c_, "autocast cast input") : x;
  Op f;
  f.name = "fused linear cross-entropy";
  f.reads = {xin.id};
  // grad_input (N x h) and grad_weight (V x h in the weight's dtype) computed in forward and kept.
  f.saved_aux_bytes = N * h * dt + (trainable ? V * h * n.gb_ : 0) + N * kInt64;
  // One chunk's logits, upcast for the kernel (`logits_chunk = logits_chunk.float()`, a copy
  // unless they are fp32 already), made into their gradient in place and cast back.
  f.fwd_scratch = chunk * V * dt + (dt != kFp32 ? chunk * V * kFp32 : 0);
  f.grad_to = {xin.id};
  f.grad_bytes = {xin.bytes()};
  f.params_trainable = trainable;
  // backward hands over the saved gradients: the weight's becomes .grad, the input's is scaled.
  f.param_grad_bytes = V * h * n.gb_;
  f.aux_holds_param_grad = true;
  seg.output(n.make(std::move(f), 1, kFp32).id);
  (void)train_head;
}

Segment head_segment(const TrainingSetup& s) {
  Segment seg("head and loss");
  Net n(s, seg);
  seg.grad_category(Cat::loss);
  const ModelSpec& m = s.model;
  const int64_t b = s.batch.micro_batch, N = b * s.batch.seq_len, h = m.hidden_size, V = m.vocab_size;
  const bool train_head = head_trainable(s);
  T x = n.input(sp_rows(s, N) * h, residual_bytes(s));
  if (m.final_norm && !m.bert_style) x = n.norm(x, h, s.finetune.mode == FinetuneMode::full, "final norm");
  x = sp_gather(n, x, N, h);  // sequence parallelism: the whole sequence into the column-parallel head

  if (m.head == HeadKind::sequence_classification) {
    // Score on the pooled token (HF pools the last token; BERT the [CLS] through the pooler).
    const T pooled = n.plain(x, "pool token", b * h);
    T y = pooled;
    if (m.bert_style) {
      y = n.linear(y, Linear{Role::pooler, h, h, true}, 0, "pooler");
      y = n.unary_saving_output(y, "pooler tanh");
    }
    n.cat_ = Cat::loss;
    const T logits = n.linear(y, Linear{Role::classifier, h, m.num_labels, m.bert_style}, 0, "score");
    if (s.runtime.keep_logits) seg.keep(logits.id);
    const T lp = n.softmax(logits, logits.dt, "log_softmax");
    Op nll;
    nll.name = "nll_loss";
    nll.reads = {lp.id};
    nll.grad_to = {lp.id};
    const T loss = n.make(std::move(nll), 1, kFp32);
    seg.output(loss.id);
    return seg;
  }

  if (m.head == HeadKind::masked_lm) {
    x = n.linear(x, Linear{Role::mlm_transform, h, h, true}, 0, "cls.transform.dense");
    x = n.activation(x);
    x = n.layer_norm(x, h, train_head, "cls.transform.LayerNorm");
  }
  n.cat_ = Cat::loss;
  const LossImpl loss_impl = m.head == HeadKind::causal_lm && m.final_softcap == 0 && m.logit_scale == 1.0 ? s.runtime.loss
                                                                                                        : LossImpl::standard;
  if (loss_impl == LossImpl::fused_linear) return fused_linear_loss(n, seg, x, train_head), seg;
  if (loss_impl == LossImpl::chunked) return chunked_loss(n, seg, x, train_head), seg;
  // lm_head: (N, h) x (h, V). A tied head multiplies by the embedding matrix.
  Linear head{Role::lm_head, h, V, m.head == HeadKind::masked_lm || m.lm_head_bias};
  T logits = n.linear(x, head, 0, "lm_head");
  if (m.logit_scale != 1.0) logits = n.scale(logits, "logits * logit_scale");  // Cohere, Granite (1/logits_scaling)
  if (m.final_softcap > 0) {  // final_logit_softcapping: logits / cap -> tanh -> * cap
    logits = n.scale(logits, "softcap /");
    logits = n.unary_saving_output(logits, "softcap tanh");
    logits = n.scale(logits, "softcap *");
  }
  if (loss_impl == LossImpl::vocab_parallel) {
    // Megatron's _VocabParallelCrossEntropy (megatron/core/tensor_parallel/cross_entropy.py @
    // d98e8a64 L20-28, L43-71, L117-193), an autograd Function: it upcasts the logits once
    // (`.float()`, a copy unless fp32), subtracts the max, exponentiates and normalises in place and
    // saves that fp32 softmax with the int64 masked target and the bool target mask; the model's
    // logits die when the loss returns. Backward turns the saved softmax into the gradient in place
    // and returns it; autograd casts it to the logits' dtype (a new tensor beside it). With fp32
    // logits the softmax is the logits tensor itself and the returned gradient is that storage;
    // memplan then counts a second N x V x 4 B during the head's backward (an over-estimate).
    Op ce;
    ce.name = "vocab_parallel_cross_entropy";
    ce.reads = {logits.id};
    const bool copy = logits.dt != kFp32;
    ce.saved_aux_bytes = (copy ? N * V * kFp32 : 0) + N * kInt64 + N;
    if (!copy) ce.saves = {logits.id};
    ce.fwd_scratch = N * (3 * kFp32 + kInt64);  // logits_max, sum_exp_logits, predicted logits, arange
    ce.grad_to = {logits.id};
    ce.grad_bytes = {N * V * logits.dt};
    seg.output(n.make(std::move(ce), N, kFp32).id);
    return seg;
  }
  // HF >= 4.46 ForCausalLMLoss: logits.float() (a copy unless already fp32), then
  // cross_entropy = log_softmax (saves its fp32 output) + nll_loss (saves the int64 target).
  // BertForMaskedLM calls CrossEntropyLoss on the logits as they are.
  const bool upcast = s.runtime.loss_upcast && m.head == HeadKind::causal_lm;
  const T model_logits = logits;  // outputs.logits: alive until the model's forward returns
  if (s.runtime.keep_logits) seg.keep(model_logits.id);  // and past it where the loop keeps them
  if (s.runtime.compile_loss) {
    // torchtune's model upcasts its logits itself when the loss is not chunked
    // (torchtune/modules/transformer.py @ v0.4.0 TransformerDecoder.forward: output(h).float()),
    // outside the compiled loss, which then saves the fp32 copy; HF's ForCausalLMLoss and
    // torchtitan's cross_entropy_loss upcast inside it.
    T in = logits;
    if (upcast && s.runtime.framework == Framework::torchtune) in = n.cast(logits, kFp32, "output(h).float()");
    seg.output(compiled_cross_entropy(n, in, N, "compiled cross_entropy").id);
    return seg;
  }
  if (upcast) logits = n.cast(logits, kFp32, "logits.float()");
  // Autocast runs log_softmax in fp32 (CUDA policy; CPU's fp32 list has cross_entropy).
  if (n.ac_ && logits.dt != kFp32) logits = n.cast(logits, kFp32, "autocast fp32 cast");
  Op ls;
  ls.name = "log_softmax";
  ls.reads = {logits.id};
  ls.save_output = true;
  ls.grad_to = {logits.id};
  ls.grad_bytes = {N * V * logits.dt};
  const T lp = n.make(std::move(ls), N * V, logits.dt);
  // nll_loss: saves target (int64, N; the shifted labels are a contiguous copy) and
  // total_weight; backward allocates zeros like the log-probs [DY 2067].
  Op nll;
  nll.name = "nll_loss";
  nll.reads = {lp.id, model_logits.id};
  // The shifted labels (contiguous int64 copy) are saved; the padded labels are a temporary.
  nll.saved_aux_bytes = N * kInt64;
  nll.fwd_scratch = m.head == HeadKind::causal_lm ? b * (s.batch.seq_len + 1) * kInt64 : 0;
  nll.grad_to = {lp.id};
  nll.grad_bytes = {lp.bytes()};
  const T loss = n.make(std::move(nll), 1, kFp32);
  // An HF model computes the loss inside its forward and keeps the final hidden states (its
  // `hidden_states = outputs.last_hidden_state`) until it returns, past the loss
  // (LlamaForCausalLM.forward, modeling_llama.py @ v4.57.1; the H200's recordings free them
  // there). torchtune's, torchtitan's and LitGPT's models return logits; their loss runs after.
  const Framework fw = s.runtime.framework;
  if (fw != Framework::torchtune && fw != Framework::torchtitan && fw != Framework::litgpt) n.hold(x);
  seg.output(loss.id);
  return seg;
}

}  // namespace memplan
