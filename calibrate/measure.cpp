// Runs real training steps and records peak memory per phase: on CPU through a counting
// allocator installed with c10::SetCPUAllocator, on CUDA from the caching allocator's stats plus
// cudaMemGetInfo. Setups the harness cannot run are refused before anything is allocated; a
// model too large for the device is run at 1-3 layers and extrapolated per layer.
#include "calibrate/measure.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <fmt/format.h>
// fmt 10+ (the one LibTorch 2.x bundles in its include folder) declares fmt::join in ranges.h.
#if __has_include(<fmt/ranges.h>)
#include <fmt/ranges.h>
#endif

#include "calibrate/cpu_counter.h"
#include "calibrate/torch_internal.h"
#include "estimator/error.h"
#include "estimator/estimate.h"

#ifdef MEMPLAN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace memplan::calibrate {

std::string torch_version() { return fmt::format("{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR); }

bool cuda_available() {
#ifdef MEMPLAN_WITH_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

bool cpu_supports_bf16() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return line.find("avx512_bf16") != std::string::npos || line.find("amx_bf16") != std::string::npos;
  return false;
}

namespace {

// ---- CPU probe ----------------------------------------------------------------------------------

// One probe interface for both devices.
class Probe {
 public:
  virtual ~Probe() = default;
  virtual void reset_peak() = 0;
  virtual int64_t current() = 0;
  virtual int64_t peak() = 0;
  virtual int64_t peak_reserved() { return 0; }
  virtual int64_t reserved() { return 0; }
  virtual int64_t device_used() { return 0; }
};

class CpuProbe : public Probe {
 public:
  CpuProbe() { cpu_counter::install(); }
  ~CpuProbe() override { cpu_counter::uninstall(); }
  void reset_peak() override { cpu_counter::reset_peak(); }
  int64_t current() override { return cpu_counter::current_bytes(); }
  int64_t peak() override { return cpu_counter::peak_bytes(); }
};

#ifdef MEMPLAN_WITH_CUDA
// Caching-allocator stats (index 0 = StatType::AGGREGATE; docs/libtorch-notes.md §3.2) and
// cudaMemGetInfo for what lives outside the allocator.
class CudaProbe : public Probe {
  // Named, not `auto`: a deduced member cannot be called above its definition (GCC 13 refuses).
  using Stats = decltype(c10::cuda::CUDACachingAllocator::getDeviceStats(0));
  Stats stats() { return c10::cuda::CUDACachingAllocator::getDeviceStats(dev_); }

 public:
  explicit CudaProbe(int dev) : dev_(dev) {}
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(dev_); }
  int64_t current() override { return stats().allocated_bytes[0].current; }
  int64_t peak() override { return stats().allocated_bytes[0].peak; }
  int64_t peak_reserved() override { return stats().reserved_bytes[0].peak; }
  int64_t reserved() override { return stats().reserved_bytes[0].current; }
  int64_t device_used() override {
    c10::cuda::CUDAGuard g(static_cast<c10::DeviceIndex>(dev_));
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
    return static_cast<int64_t>(total_b - free_b);
  }

 private:
  int dev_;
};
#endif

#ifdef MEMPLAN_WITH_CUDA
// cudaMemGetInfo's free bytes on the device, after creating its context (what a run can take).
int64_t cuda_free_bytes(const std::string& device) {
  const torch::Device dev(device);
  (void)torch::empty({1}, torch::TensorOptions().device(dev));
  c10::cuda::CUDACachingAllocator::emptyCache();
  c10::cuda::CUDAGuard g(static_cast<c10::DeviceIndex>(dev.has_index() ? dev.index() : 0));
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return 0;
  return static_cast<int64_t>(free_b);
}
#endif

int64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 8LL << 30;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      return "cpu (" + (p == std::string::npos ? line : line.substr(p + 2)) + ")";
    }
  return "cpu";
}

// Why the harness cannot run this setup, or "" when it can.
std::string unsupported(const TrainingSetup& s, const MeasureOptions& opt) {
  const ModelSpec& m = s.model;
  const bool cuda = is_cuda(opt.device);
  // The harness builds features, not model types (decoder.cpp): what it does not build is named.
  const bool gpt2_block = m.fused_qkv && m.causal_mask == MaskKind::bool_buffer;
  auto missing = [&](const char* feature) {
    return fmt::format("the harness does not build {} ({} needs it); it builds GPT-2 and Llama-lineage layers with "
                       "parallel residuals off one norm, partial RoPE, sandwich norms, soft-capping, multi-head latent "
                       "attention, q/k RMS norms (per head or full width), and Mixtral or DeepSeek-V3 MoE blocks", feature, m.model_type);
  };
  if (m.head != HeadKind::causal_lm || m.bert_style) return "only causal-LM heads are measured";
  if (gpt2_block && m.gated_mlp) return "a gated MLP in a gpt2-style model is not built";
  if (!gpt2_block) {
    if (m.fused_qkv) return missing("a fused q|k|v projection");
    if (m.fused_gate_up) return missing("a fused gate|up projection");
    if (m.parallel_residual && !m.parallel_shared_norm) return missing("a parallel residual with two norms");
    // OLMo-2 (Olmo2DecoderLayer): no input norms, a norm after the attention and after the MLP.
    if (!m.pre_norms && !m.post_norms) return missing("layers without norms");
    if (m.qk_norm != QkNorm::none && m.qk_norm != QkNorm::per_head && m.qk_norm != QkNorm::full_width)
      return missing("this q/k normalisation (per-head LayerNorm or L2)");
    if (m.qk_norm != QkNorm::none && m.mla()) return missing("q/k normalisation with latent attention");
    if (m.positions == PositionKind::alibi || m.positions == PositionKind::learned) return missing("ALiBi or learned positions");
    if (m.causal_mask != MaskKind::additive) return missing("a bool causal mask");
    if (!m.softmax_fp32) return missing("softmax in the hidden dtype");
    if (m.attention_sinks) return missing("attention sinks");
    if (m.norm_fp32_manual || m.rope_fp32) return missing("fp32 LayerNorm and RoPE ops");
    if (m.logit_scale != 1.0 || m.residual_multiplier != 1.0) return missing("logit or residual multipliers");
    if (m.mla() && s.attention != AttentionImpl::eager) return "multi-head latent attention is measured with --attention eager";
  }
  if (m.num_experts > 0) {
    const bool mixtral = m.router == RouterKind::softmax_topk && !m.moe_fp32_combine && m.num_shared_experts == 0 &&
                         m.shared_expert_intermediate_size == 0;
    const bool v3 = m.router == RouterKind::sigmoid && m.moe_fp32_combine && !m.shared_expert_gate;
    if ((!mixtral && !v3) || m.moe_impl != MoeImpl::loop || m.fused_expert_gate_up || m.expert_bias || m.clamped_swiglu ||
        m.router_bias)
      return missing("this mixture-of-experts block");
  }
  if (s.finetune.mode == FinetuneMode::qlora || s.finetune.base_quant != BaseQuant::none || s.model.quantized.any())
    return "QLoRA/8-bit bases need bitsandbytes on CUDA; the harness measures LoRA on a 16/32-bit base";
  if (s.parallel.num_gpus > 1 || s.parallel.zero_stage > 0 || s.parallel.offload != Offload::none ||
      s.parallel.tensor_parallel > 1 || s.parallel.pipeline_parallel > 1)
    return "measure runs one process on one device: ZeRO, offload and multi-GPU parallelism are estimated, not measured";
  switch (s.optimizer) {
    case OptimizerKind::adamw: case OptimizerKind::adam: case OptimizerKind::sgd: case OptimizerKind::sgd_momentum: break;
    case OptimizerKind::adafactor: case OptimizerKind::adafactor_momentum:
      if (s.runtime.optimizer_in_backward) return "Adafactor is measured stepped after backward (transformers' Adafactor, one optimizer)";
      if (s.runtime.optimizer_impl == OptimizerImpl::foreach || s.runtime.optimizer_impl == OptimizerImpl::fused)
        return "Adafactor has no foreach or fused step (transformers' loops over the parameters)";
      break;
    default:
      return fmt::format("optimizer {} is not measured (AdamW, Adam, SGD with or without momentum and HF's Adafactor are)",
                         to_string(s.optimizer));
  }
  switch (s.precision) {
    case Precision::fp32: break;
    case Precision::amp_bf16: case Precision::bf16:
      if (!cuda && !cpu_supports_bf16()) return "this CPU has no avx512_bf16: bf16 steps cannot run here";
      break;
    case Precision::amp_fp16: case Precision::fp16:
      if (!cuda) return "fp16 steps need CUDA (LibTorch's CPU autocast is bf16 only)";
      break;
    case Precision::mixed_fp16: case Precision::mixed_bf16:
      return "mixed-fp16/mixed-bf16 are DeepSpeed's regimes (fp32 master copies): measure amp-bf16 or bf16 instead";
  }
  if (s.checkpointing.mode == CheckpointMode::selective)
    return "selective checkpointing is not measured (the harness checkpoints whole layers, or per op: none, full, every:K, "
           "layers:I,J and selective-op are)";
  if (s.checkpointing.mode == CheckpointMode::selective_op) {
    if (s.attention != AttentionImpl::eager)
      return "the per-op policy is measured with eager attention (SDPA's kept outputs are estimated only)";
    if (is_autocast(s.precision)) return "the per-op policy is measured without autocast (fp32 or pure bf16)";
    const ModelSpec& m = s.model;
    if (s.finetune.mode != FinetuneMode::full || m.qkv_bias || m.o_bias || m.mlp_bias || m.num_experts > 0 || m.fused_qkv)
      return "the per-op policy is measured on a dense Llama-style block without biases or adapters";
  }
  // Runtime knobs the harness runs for real: the held logits of a custom loop, the chunked loss,
  // Liger's fused linear cross-entropy (without autocast). The others change kernels or the loop
  // in ways a LibTorch step here does not reproduce.
  {
    const Runtime& r = s.runtime;
    if (r.loss == LossImpl::vocab_parallel)
      return "Megatron's vocab-parallel cross-entropy is estimated, not measured: measure --loss standard";
    if (r.loss == LossImpl::fused_linear && is_autocast(s.precision))
      return "fused linear cross-entropy is measured without autocast (fp32 or pure bf16): under autocast it is estimated only";
    if (r.loss == LossImpl::fused_linear && (s.model.lm_head_bias || s.model.final_softcap > 0 || s.model.logit_scale != 1.0))
      return "fused linear cross-entropy is measured on a plain LM head (no bias, soft-capping or logit scale)";
    if (r.liger) return "Liger's kernels are Triton (CUDA): estimated, not measured";
    if (r.compile || r.compile_loss) return "torch.compile is not measured (the harness runs eager LibTorch): --compile and --compile-loss are estimated only";
    if (r.fp8) return "float8 linears need a GPU with fp8: estimated, not measured";
    if (r.activation_offload) return "activation offloading is not measured (saved tensors stay on the device in the harness)";
    if (r.optimizer_in_backward && r.optimizer_impl == OptimizerImpl::foreach)
      return "the optimizer step in backward is measured with the for-loop step (one parameter per optimizer)";
    if (r.optimizer_in_backward && (s.batch.grad_accum > 1 || !r.zero_grad_set_to_none))
      return "the optimizer step in backward drops each gradient: measure it without accumulation and with set_to_none";
    if (r.keep_cache) return "the harness returns no KV cache: measure without runtime.keep_cache";
    if (r.zero_grad_after_forward && r.optimizer_in_backward)
      return "the optimizer step in backward drops each gradient: measure it without runtime.zero_grad_after_forward";
    if (s.parallel.fsdp != FsdpMode::none) return "FSDP runs across ranks: estimated, not measured";
  }
  if (s.attention == AttentionImpl::flash) return "flash-attn is a CUDA extension: measure --attention sdpa or eager";
  if (s.attention != AttentionImpl::eager) {
    if (!MEMPLAN_TORCH_AT_LEAST(2, 0))
      return fmt::format("LibTorch {} has no public scaled_dot_product_attention (2.0+): measure --attention eager", torch_version());
    if (gpt2_block) return "SDPA is measured for Llama-style models only";
  }
  switch (s.runtime.optimizer_impl) {
    case OptimizerImpl::automatic: case OptimizerImpl::for_loop: break;
    case OptimizerImpl::foreach:
      if (!MEMPLAN_TORCH_AT_LEAST(2, 0))
        return fmt::format("the foreach step is torch 2.x's (_foreach_lerp_ is 2.0+); LibTorch {} runs for-loop", torch_version());
      if (s.optimizer != OptimizerKind::adamw && s.optimizer != OptimizerKind::adam)
        return "the foreach step is measured for AdamW and Adam (SGD's foreach step allocates like its for-loop)";
      break;
    case OptimizerImpl::fused:
      if (s.optimizer != OptimizerKind::adamw && s.optimizer != OptimizerKind::adam)
        return "the fused step is measured for AdamW and Adam (torch's _fused_adamw_/_fused_adam_)";
      if (!MEMPLAN_TORCH_AT_LEAST(2, 1))
        return fmt::format("the fused AdamW/Adam step is torch 2.1+'s (_fused_adamw_); LibTorch {} runs for-loop or foreach", torch_version());
      if (!cuda && !MEMPLAN_TORCH_AT_LEAST(2, 4))
        return fmt::format("the fused step runs on CPU from torch 2.4 (LibTorch {} has only the CUDA kernel): measure on CUDA", torch_version());
      break;
  }
#ifdef MEMPLAN_WITH_CUDA
  if (cuda && !cuda_available()) return "no GPU is visible (LibTorch found no CUDA device: check CUDA_VISIBLE_DEVICES and the driver)";
#else
  if (cuda) return "this memplan-measure was built without CUDA (its LibTorch has no CUDA): rebuild it against a CUDA LibTorch";
#endif
  return "";
}

}  // namespace

TrainingSetup harness_setup(const TrainingSetup& s, const MeasureOptions& opt) {
  TrainingSetup h = s;
  h.runtime.torch_major = TORCH_VERSION_MAJOR;
  h.runtime.torch_minor = TORCH_VERSION_MINOR;
  // LibTorch's optimizers loop over the parameters; foreach and fused are the harness's own steps.
  if (h.runtime.optimizer_impl != OptimizerImpl::foreach && h.runtime.optimizer_impl != OptimizerImpl::fused)
    h.runtime.optimizer_impl = OptimizerImpl::for_loop;
  // HF's loss upcasts the logits; the chunked loss does as the setup says (torchtune yes, LitGPT no).
  if (h.runtime.loss == LossImpl::standard) h.runtime.loss_upcast = true;
  if (is_cuda(opt.device)) {
    h.device.kind = DeviceKind::cuda;
  } else {
    h.device.kind = DeviceKind::cpu;
    h.runtime.allocator_rounding = false;
  }
  if (opt.layers > 0) h.model.num_layers = opt.layers;
  return h;
}

namespace {

struct RunOutcome {
  std::vector<StepSample> steps;
  int64_t weights = 0, states = 0, forward_end = 0, context = 0, device_used_peak = 0, peak_reserved = 0;
  int64_t context_init = 0;  // CUDA: outside the allocator right after init
  std::string oom;
  std::vector<cpu_counter::Event> events;  // MeasureOptions::record_events
  std::vector<size_t> step_begins;
};

// The lists both Adam kernels below work on: the parameters that have a gradient this step and
// their gradients, and the two moment states per parameter, created with zeros_like at the first
// step as _init_group does (torch/optim/adamw.py @ v2.6.0).
class AdamLists {
 protected:
  explicit AdamLists(std::vector<torch::Tensor> params) : params_(std::move(params)) {}

  // Fills p and g; false when no parameter has a gradient. `first` runs once per parameter on the
  // first step, after its states are made (the fused kernel's step tensors).
  template <class First>
  bool gather(std::vector<torch::Tensor>& p, std::vector<torch::Tensor>& g, First first) {
    for (auto& t : params_)
      if (t.grad().defined()) {
        p.push_back(t);
        g.push_back(t.grad());
      }
    if (p.empty()) return false;
    if (exp_avg_.empty())
      for (const auto& t : p) {
        exp_avg_.push_back(torch::zeros_like(t, torch::MemoryFormat::Preserve));
        exp_avg_sq_.push_back(torch::zeros_like(t, torch::MemoryFormat::Preserve));
        first(t);
      }
    return true;
  }
  bool gather(std::vector<torch::Tensor>& p, std::vector<torch::Tensor>& g) {
    return gather(p, g, [](const torch::Tensor&) {});
  }

  std::vector<torch::Tensor> params_, exp_avg_, exp_avg_sq_;
};

// torch.optim.AdamW/Adam(foreach=True) of torch 2.x: _multi_tensor_adamw / _multi_tensor_adam
// (torch/optim/adamw.py, adam.py @ v2.6.0) for one device and dtype group, with the same list
// temporaries: states are created with zeros_like at the first step (_init_group), the update
// holds one sqrt(exp_avg_sq) list (+1 x the trainable parameters) and nothing else. Adam's
// weight_decay is 0 here, so its grads-plus-decay copy never exists.
class ForeachAdam : AdamLists {
 public:
  ForeachAdam(std::vector<torch::Tensor> params, double lr, double weight_decay)
      : AdamLists(std::move(params)), lr_(lr), wd_(weight_decay) {}

  void step() {
#if MEMPLAN_TORCH_AT_LEAST(2, 0)
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> p, g;
    if (!gather(p, g)) return;
    ++steps_;
    if (wd_ != 0) at::_foreach_mul_(p, 1 - lr_ * wd_);
    at::_foreach_lerp_(exp_avg_, g, 1 - kBeta1);
    at::_foreach_mul_(exp_avg_sq_, kBeta2);
    at::_foreach_addcmul_(exp_avg_sq_, g, g, 1 - kBeta2);
    g.clear();
    const double bc1 = 1 - std::pow(kBeta1, steps_), bc2 = 1 - std::pow(kBeta2, steps_);
    std::vector<torch::Tensor> denom = at::_foreach_sqrt(exp_avg_sq_);
    at::_foreach_div_(denom, std::sqrt(bc2));
    at::_foreach_add_(denom, kEps);
    at::_foreach_addcdiv_(p, exp_avg_, denom, -lr_ / bc1);
#endif
  }

 private:
  static constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
  double lr_, wd_;
  int steps_ = 0;
};

// torch.optim.AdamW/Adam(fused=True) of torch 2.x: _fused_adamw (torch/optim/adamw.py, adam.py
// @ v2.6.0) for one device and dtype group: the states are created at the first step with
// zeros_like, plus one float32 scalar step tensor per parameter on the parameter's device
// (_init_group: `torch.zeros((), dtype=_get_scalar_dtype(is_fused=True), device=p.device)`), and
// the update is one kernel over the lists (aten::_fused_adamw_) with no temporaries.
class FusedAdam : AdamLists {
 public:
  FusedAdam(std::vector<torch::Tensor> params, double lr, double weight_decay, bool decoupled)
      : AdamLists(std::move(params)), lr_(lr), wd_(weight_decay), decoupled_(decoupled) {}

  void step() {
#if MEMPLAN_TORCH_AT_LEAST(2, 1)
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> p, g;
    if (!gather(p, g, [&](const torch::Tensor& t) {
          steps_.push_back(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(t.device())));
        }))
      return;
    at::_foreach_add_(steps_, 1);  // torch._foreach_add_(device_state_steps, 1) before the kernel
    const std::vector<torch::Tensor> max_sq;  // amsgrad off
    if (decoupled_)
      at::_fused_adamw_(p, g, exp_avg_, exp_avg_sq_, max_sq, steps_, lr_, 0.9, 0.999, wd_, 1e-8, false, false);
    else
      at::_fused_adam_(p, g, exp_avg_, exp_avg_sq_, max_sq, steps_, lr_, 0.9, 0.999, wd_, 1e-8, false, false);
#endif
  }

 private:
  std::vector<torch::Tensor> steps_;
  double lr_, wd_;
  bool decoupled_;
};

// transformers' Adafactor (src/transformers/optimization.py Adafactor.step @ 005edacb) as the HF
// Trainer builds it for optim="adafactor" (scale_parameter=False, relative_step=False, a fixed lr),
// statement by statement with LibTorch ops, so that every tensor it makes is made and freed where
// Python makes and frees it: the loop's locals `grad`, `p_data_fp32` and `update` stay bound until
// the next parameter rebinds them (members here), and an expression's temporaries go before its
// result is bound. beta1 set: the first moment too.
class HfAdafactor {
 public:
  HfAdafactor(std::vector<torch::Tensor> params, double lr, bool momentum) : params_(std::move(params)), lr_(lr), momentum_(momentum) {
    state_.resize(params_.size());
  }

  void step() {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      torch::Tensor& p = params_[i];
      if (!p.grad().defined()) continue;
      grad_ = p.grad();
      if (grad_.scalar_type() == torch::kHalf || grad_.scalar_type() == torch::kBFloat16) grad_ = grad_.to(torch::kFloat);
      State& st = state_[i];
      const bool factored = grad_.dim() >= 2;
      if (st.step == 0) {
        if (momentum_) st.exp_avg = torch::zeros_like(grad_);
        if (factored) {
          std::vector<int64_t> shape = grad_.sizes().vec();
          std::vector<int64_t> row(shape.begin(), shape.end() - 1);
          std::vector<int64_t> col(shape.begin(), shape.end() - 2);
          col.push_back(shape.back());
          st.row = torch::zeros(row).to(grad_);
          st.col = torch::zeros(col).to(grad_);
        } else {
          st.sq = torch::zeros_like(grad_);
        }
      }
      p_fp32_ = p;
      if (p.scalar_type() == torch::kHalf || p.scalar_type() == torch::kBFloat16) p_fp32_ = p_fp32_.to(torch::kFloat);
      st.step += 1;
      const double beta2t = 1.0 - std::pow(static_cast<double>(st.step), kDecayRate);
      {
        torch::Tensor u = grad_.pow(2) + kEps0;  // grad**2 is freed with the expression
        update_ = u;                             // the old update on the binding
      }
      if (factored) {
        st.row.mul_(beta2t).add_(update_.mean(-1), 1.0 - beta2t);
        st.col.mul_(beta2t).add_(update_.mean(-2), 1.0 - beta2t);
        update_ = approx_sq_grad(st.row, st.col);
        update_.mul_(grad_);
      } else {
        st.sq.mul_(beta2t).add_(update_, 1.0 - beta2t);
        update_ = st.sq.rsqrt().mul_(grad_);
      }
      update_.div_((rms(update_) / kClip).clamp_(1.0));
      update_.mul_(lr_);
      if (momentum_) {
        st.exp_avg.mul_(kBeta1).add_(update_, 1 - kBeta1);
        update_ = st.exp_avg;
      }
      p_fp32_.add_(-update_);
      if (p.scalar_type() == torch::kHalf || p.scalar_type() == torch::kBFloat16) p.copy_(p_fp32_);
    }
    // step() returns: its locals go.
    update_ = torch::Tensor();
    grad_ = torch::Tensor();
    p_fp32_ = torch::Tensor();
  }

 private:
  struct State {
    int64_t step = 0;
    torch::Tensor exp_avg, row, col, sq;
  };
  static torch::Tensor rms(const torch::Tensor& t) { return t.norm(2) / std::sqrt(static_cast<double>(t.numel())); }
  static torch::Tensor approx_sq_grad(const torch::Tensor& row, const torch::Tensor& col) {
    const torch::Tensor r_factor = (row / row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
    const torch::Tensor c_factor = col.unsqueeze(-2).rsqrt();
    return torch::mul(r_factor, c_factor);
  }
  static constexpr double kEps0 = 1e-30, kClip = 1.0, kDecayRate = -0.8, kBeta1 = 0.9;
  std::vector<torch::Tensor> params_;
  std::vector<State> state_;
  torch::Tensor grad_, p_fp32_, update_;
  double lr_;
  bool momentum_;
};

// Optimizer.zero_grad(set_to_none): LibTorch 2.x has the flag (default true, as Python 2.x);
// 1.13's zero_grad() only zeroes, so set_to_none is done by hand there (libtorch-notes §8).
void zero_grad(torch::optim::Optimizer* opt, std::vector<torch::Tensor> params, bool set_to_none) {
#if MEMPLAN_TORCH_AT_LEAST(2, 0)
  if (opt) {
    if (set_to_none) opt->zero_grad();  // the library's default
    else opt->zero_grad(false);
    return;
  }
#else
  if (opt && !set_to_none) {
    opt->zero_grad();
    return;
  }
#endif
  for (auto& p : params) {
    if (!p.mutable_grad().defined()) continue;
    if (set_to_none) {
      p.mutable_grad().reset();
    } else {
      p.mutable_grad().detach_();
      p.mutable_grad().zero_();
    }
  }
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainingSetup& s, std::vector<torch::Tensor> params) {
  switch (s.optimizer) {
    case OptimizerKind::adamw:
      return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(1e-4).weight_decay(0.01));
    case OptimizerKind::adam:
      return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-4));
    case OptimizerKind::sgd_momentum:
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1e-3).momentum(0.9));
    default:
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1e-3));
  }
}

// The optimizer stepped in backward (torchtune's optimizer_in_bwd, training/_activation_offloading
// aside: recipes/full_finetune_single_device.py @ v0.6.1 registers one optimizer per parameter
// and steps it from a post-accumulate-grad hook, then drops the gradient). LibTorch 1.13 has no
// post-accumulate-grad hook (Python's register_post_accumulate_grad_hook is 2.1+), so the hook
// goes where that one lives: a post hook on the parameter's AccumulateGrad node, which runs
// after .grad is written.
struct StepInBackward : torch::autograd::FunctionPostHook {
  StepInBackward(torch::optim::Optimizer* o, torch::Tensor p) : opt(o), param(std::move(p)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    opt->step();
    param.mutable_grad() = torch::Tensor();
    return outputs;
  }
  torch::optim::Optimizer* opt;
  torch::Tensor param;
};

RunOutcome run_steps(const TrainingSetup& s, const MeasureOptions& opt) {
  RunOutcome out;
  const bool cuda = is_cuda(opt.device);
  torch::Device dev = cuda ? torch::Device(opt.device) : torch::Device(torch::kCPU);
  std::unique_ptr<Probe> probe;
#ifdef MEMPLAN_WITH_CUDA
  if (cuda) {
    // Lazy-init the device, then read what lives outside the allocator (context, modules).
    (void)torch::empty({1}, torch::TensorOptions().device(dev));
    auto p = std::make_unique<CudaProbe>(dev.has_index() ? dev.index() : 0);
    c10::cuda::CUDACachingAllocator::emptyCache();
    out.context_init = p->device_used() - p->reserved();
    probe = std::move(p);
  }
#endif
  if (!cuda) probe = std::make_unique<CpuProbe>();
  auto say = [&](const std::string& line) { if (opt.progress) opt.progress(line); };
  torch::manual_seed(0);
  const int64_t base = probe->current();
  const bool recording = opt.record_events && !cuda;
  if (recording) cpu_counter::start_recording();
  struct StopRecording {  // also where a step throws
    bool on;
    ~StopRecording() {
      if (on) (void)cpu_counter::stop_recording();
    }
  } stop_recording_guard{recording};
  auto now = [&] { return probe->current() - base; };
  auto peak = [&] { return probe->peak() - base; };

  std::unique_ptr<Decoder> model = make_decoder(s, dev);
  out.weights = now();
  const bool foreach = s.runtime.optimizer_impl == OptimizerImpl::foreach;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<ForeachAdam> foreach_optimizer;
  const bool fused = s.runtime.optimizer_impl == OptimizerImpl::fused;
  std::unique_ptr<FusedAdam> fused_optimizer;
  const bool adafactor = s.optimizer == OptimizerKind::adafactor || s.optimizer == OptimizerKind::adafactor_momentum;
  std::unique_ptr<HfAdafactor> adafactor_optimizer;
  const bool adamw = s.optimizer == OptimizerKind::adamw;
  if (adafactor)
    adafactor_optimizer = std::make_unique<HfAdafactor>(model->parameters(), 1e-3, s.optimizer == OptimizerKind::adafactor_momentum);
  else if (foreach)
    foreach_optimizer = std::make_unique<ForeachAdam>(model->parameters(), 1e-4, adamw ? 0.01 : 0.0);
  else if (fused)
    fused_optimizer = std::make_unique<FusedAdam>(model->parameters(), 1e-4, adamw ? 0.01 : 0.0, adamw);
  else if (!s.runtime.optimizer_in_backward)
    optimizer = make_optimizer(s, model->parameters());
  // Optimizer in backward: one optimizer per trainable parameter, stepped by its hook. The
  // AccumulateGrad nodes are held here (a parameter keeps its accumulator only weakly).
  const bool in_backward = s.runtime.optimizer_in_backward;
  std::vector<std::unique_ptr<torch::optim::Optimizer>> per_param;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  if (in_backward)
    for (const torch::Tensor& p : model->parameters()) {
      if (!p.requires_grad()) continue;
      per_param.push_back(make_optimizer(s, {p}));
      accumulators.push_back(torch::autograd::impl::grad_accumulator(p));
      accumulators.back()->add_post_hook(std::make_unique<StepInBackward>(per_param.back().get(), p));
    }
  const int64_t b = s.batch.micro_batch, sq = s.batch.seq_len;
  const torch::Tensor ids = torch::randint(s.model.vocab_size, {b, sq}, torch::TensorOptions().dtype(torch::kLong).device(dev));
  const torch::Tensor labels = ids.clone();
  const bool amp = is_autocast(s.precision);
  std::vector<torch::Tensor> held_logits;  // runtime.keep_logits: alive through backward and the step
  const auto ac_dev = cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
  const auto ac_dt = s.precision == Precision::amp_fp16 ? torch::kHalf : torch::kBFloat16;
  try {
    for (int step = 1; step <= opt.steps; ++step) {
      StepSample ss;
      ss.step = step;
      if (recording) out.step_begins.push_back(cpu_counter::recorded_events());
      const auto t0 = std::chrono::steady_clock::now();
      auto sample = [&](Phase phase) {
        PhaseSample p;
        p.phase = phase;
        p.peak_bytes = peak();
        p.end_bytes = now();
        p.peak_reserved = probe->peak_reserved();
        p.device_used = probe->device_used();
        out.device_used_peak = std::max(out.device_used_peak, p.device_used);
        out.peak_reserved = std::max(out.peak_reserved, p.peak_reserved);
        for (PhaseSample& q : ss.phases)
          if (q.phase == phase) {  // a later micro-batch of the same step: keep the phase's peak
            q.peak_bytes = std::max(q.peak_bytes, p.peak_bytes);
            q.peak_reserved = std::max(q.peak_reserved, p.peak_reserved);
            q.device_used = std::max(q.device_used, p.device_used);
            q.end_bytes = p.end_bytes;
            return;
          }
        ss.phases.push_back(p);
      };
      // Every micro-batch of the accumulation step runs (HF Trainer's inner loop: forward, loss
      // divided by the accumulation steps, backward into the gradients the earlier micro-batches
      // left); a phase's sample is its peak over the micro-batches.
      const int64_t micro = s.batch.grad_accum;
      for (int64_t m = 1; m <= micro; ++m) {
        const std::string tag = micro > 1 ? fmt::format(", micro-batch {}/{}", m, micro) : "";
        say(fmt::format("step {}/{}: forward{}", step, opt.steps, tag));
        if (cpu_counter::trace_threshold() >= 0) std::fprintf(stderr, "== step %d forward\n", step);
        probe->reset_peak();
        torch::Tensor loss;
        {
          std::unique_ptr<AutocastGuard> guard;
          if (amp) guard = std::make_unique<AutocastGuard>(ac_dev, ac_dt);
          std::vector<torch::Tensor> logits;
          loss = model->loss(ids, labels, s.runtime.keep_logits ? &logits : nullptr);
          // A loop that keeps the forward's outputs (nanoGPT's `logits, loss = model(X, Y)`): the
          // previous step's logits go only when the new ones are bound, after the forward.
          if (s.runtime.keep_logits) held_logits = std::move(logits);
        }
        if (micro > 1) loss = loss / static_cast<double>(micro);
        // Lightning's closure (loops/optimization/automatic.py @ 2.5.1: training_step, then the
        // zero_grad of the first micro-batch to accumulate, then backward): the last step's
        // gradients live through this forward.
        if (s.runtime.zero_grad_after_forward && m == 1 && !in_backward)
          zero_grad(optimizer.get(), model->parameters(), s.runtime.zero_grad_set_to_none);
        sample(Phase::forward);
        out.forward_end = now();
        say(fmt::format("step {}/{}: backward{} (loss {:.3f})", step, opt.steps, tag, loss.item<double>()));
        probe->reset_peak();
        if (cpu_counter::trace_threshold() >= 0) std::fprintf(stderr, "== step %d backward\n", step);
        loss.backward();
        loss = torch::Tensor();
        sample(Phase::backward);
      }
      say(fmt::format("step {}/{}: optimizer step", step, opt.steps));
      const int64_t before_step = now();
      probe->reset_peak();
      if (adafactor) adafactor_optimizer->step();
      else if (foreach) foreach_optimizer->step();
      else if (fused) fused_optimizer->step();
      else if (!in_backward) optimizer->step();  // else stepped, and the gradients dropped, in backward
      sample(Phase::optimizer_step);
      if (step == 1) out.states = now() - before_step;
      if (!in_backward && !s.runtime.zero_grad_after_forward) zero_grad(optimizer.get(), model->parameters(), s.runtime.zero_grad_set_to_none);
      ss.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out.steps.push_back(ss);
    }
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    if (what.find("out of memory") == std::string::npos && what.find("OutOfMemory") == std::string::npos) throw;
    out.oom = what.substr(0, what.find('\n'));
  }
  if (recording) out.events = cpu_counter::stop_recording();
  // What lives outside the allocator once the steps ran (the context, cuBLAS/cuBLASLt handles,
  // cuDNN, loaded modules): cudaMemGetInfo's used minus the allocator's reserved, both now.
  if (cuda) out.context = std::max(out.context_init, probe->device_used() - probe->reserved());
  return out;
}

}  // namespace

MeasureResult measure(const TrainingSetup& s, const MeasureOptions& opt) {
  if (opt.steps < 2) throw InputError(Where::at_flag("--steps"), "needs at least 2 steps", "step 1 creates the optimizer state; step 2 is the steady state");
  if (const std::string why = unsupported(s, opt); !why.empty())
    throw InputError(Where::at_flag("--device"), "cannot measure this setup: " + why);
  if (!is_cuda(opt.device) && opt.device != "cpu")
    throw InputError(Where::at_flag("--device"), fmt::format("unknown device '{}'", opt.device), "use cpu, cuda or cuda:N");
  // oneDNN must stay off AMX for bf16 on Debian's LibTorch (docs/libtorch-notes.md §4.3); set before
  // the first op.
  setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", 0);
  setenv("DNNL_MAX_CPU_ISA", "AVX512_CORE_BF16", 0);
  if (opt.threads > 0) torch::set_num_threads(opt.threads);

  MeasureResult r;
  r.libtorch = torch_version();
  r.device_name = is_cuda(opt.device) ? opt.device : cpu_name();
#ifdef MEMPLAN_WITH_CUDA
  if (is_cuda(opt.device)) {
    const torch::Device dev(opt.device);
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev.has_index() ? dev.index() : 0) == cudaSuccess) r.device_name = prop.name;
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    r.driver = fmt::format("driver {}.{}, runtime {}.{}", drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
  }
#endif

  // Depth: full if the estimate fits the budget, else the largest of 1-3 layers that fit. The
  // budget is the device in hand's (cudaMemGetInfo's free memory once its context exists; the
  // host's available memory on CPU), not the card the setup names: 90% of it on CUDA, leaving room
  // for what the caching allocator holds beyond the tensors, 80% of the host's.
  const TrainingSetup full = harness_setup(s, opt);
  int64_t budget = host_available_bytes() * 8 / 10;
#ifdef MEMPLAN_WITH_CUDA
  if (is_cuda(opt.device)) budget = cuda_free_bytes(opt.device) * 9 / 10;
#endif
  // The context is already taken out of the free memory: compare what the step allocates.
  auto need = [](const MemoryBreakdown& e) { return e.peak_bytes() - e.peak()[Term::cuda_context]; };
  r.budget_bytes = budget;
  std::vector<int64_t> depths;
  if (opt.layers > 0 || need(estimate(full)) <= budget) {
    depths = {full.model.num_layers};
  } else {
    std::vector<int64_t> estimated;  // peak at 1, 2, 3 layers
    for (int64_t d = 1; d <= std::min<int64_t>(3, s.model.num_layers); ++d) {
      TrainingSetup t = full;
      t.model.num_layers = d;
      estimated.push_back(need(estimate(t)));
      if (estimated.back() <= budget) depths.push_back(d);
    }
    if (depths.size() < 2)
      throw InputError(Where::at_flag("--device"),
                       fmt::format("cannot measure {}: even {} layer(s) need an estimated {:.1f} GiB, over the {:.1f} GiB budget",
                                   s.model.name, depths.size() + 1, estimated[depths.size()] / 1073741824.0,
                                   budget / 1073741824.0),
                       "measure a smaller micro-batch or sequence, or on a device with more memory");
  }

  std::vector<RunOutcome> runs;
  for (int64_t d : depths) {
    TrainingSetup t = full;
    t.model.num_layers = d;
    if (opt.progress && depths.size() > 1) opt.progress(fmt::format("depth {} of {} layers (reduced; extrapolating)", d, s.model.num_layers));
    runs.push_back(run_steps(t, opt));
    if (!runs.back().oom.empty()) break;
  }
  const RunOutcome& last = runs.back();
  r.layers_measured = depths.back();
  r.weights_bytes = last.weights;
  r.states_bytes = last.states;
  r.forward_end_bytes = last.forward_end;
  r.steps = last.steps;
  r.context_bytes = last.context;
  r.context_init_bytes = last.context_init;
  r.device_used_peak = last.device_used_peak;
  r.peak_reserved = last.peak_reserved;
  r.oom = last.oom;
  r.events = last.events;
  r.step_begins = last.step_begins;
  if (!last.oom.empty()) r.notes.push_back("out of memory: " + last.oom);

  // Per-phase peaks (max over steps) at each depth, then per-layer extrapolation.
  std::vector<std::vector<int64_t>> peaks;  // per run, per Phase
  for (const RunOutcome& o : runs) {
    std::vector<int64_t> pk(kNumPhases, 0);
    for (const auto& st : o.steps)
      for (const auto& ph : st.phases) pk[static_cast<int>(ph.phase)] = std::max(pk[static_cast<int>(ph.phase)], ph.peak_bytes);
    peaks.push_back(std::move(pk));
  }
  r.phase_peaks = peaks.back();
  if (depths.size() > 1 && runs.size() == depths.size()) {
    r.extrapolated = true;
    r.depths = depths;
    // Least-squares line through (depth, peak) per phase, evaluated at the full depth.
    const double n = static_cast<double>(depths.size());
    for (int ph = 0; ph < kNumPhases; ++ph) {
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      for (size_t i = 0; i < depths.size(); ++i) {
        const double x = static_cast<double>(depths[i]), y = static_cast<double>(peaks[i][ph]);
        sx += x; sy += y; sxx += x * x; sxy += x * y;
      }
      const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
      const double icept = (sy - slope * sx) / n;
      r.phase_peaks[ph] = static_cast<int64_t>(icept + slope * static_cast<double>(s.model.num_layers));
    }
    r.notes.push_back(fmt::format("measured at {} layers and extrapolated per layer to {}", fmt::join(depths, ", "), s.model.num_layers));
    r.layers_measured = s.model.num_layers;
  }
  int best = 0;
  for (int i = 1; i < kNumPhases; ++i)
    if (r.phase_peaks[i] > r.phase_peaks[best]) best = i;
  r.peak_bytes = r.phase_peaks[best];
  r.peak_phase = static_cast<Phase>(best);
  return r;
}

}  // namespace memplan::calibrate
