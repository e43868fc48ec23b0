// The step-time model (see throughput.h). Its constants (named below, each with what it stands for)
// are round numbers, from datasheets and public utilisation reports where one is cited and stated
// as unmeasured where not, chosen to order configurations, not to predict a step's time.
#include "planner/throughput.h"

#include <algorithm>
#include <cmath>

#include "estimator/model.h"

namespace memplan::planner {
namespace {

// ---- the model's constants, each named with what it stands for ---------------------------------
// They order configurations; none is fitted to a measured step time.

// Peak 16-bit tensor FLOP/s of a card given by its memory only (--gpu-memory): a round 100 TFLOP/s,
// the order of an A10G/L4-class card (the catalog's cards carry their datasheet rate).
constexpr double kDefaultPeakFlops = 100e12;
// fp32 matmuls against the 16-bit tensor-core rate: PyTorch leaves TF32 off for matmuls by default
// (torch.backends.cuda.matmul.allow_tf32 = False since 1.12), and an A100 runs fp32 on CUDA cores at
// 19.5 TFLOP/s against 312 in bf16 (a sixteenth) or 156 in TF32 (an eighth). A round eighth is used:
// the order is what the search needs, and fp32 plans are rarely close to 16-bit ones.
constexpr double kFp32Slowdown = 8;
// The utilisation a large micro-step approaches (the FLOPs counted include recomputation, so it is
// the hardware-FLOPs rate): about half the peak with fused attention, as large dense training
// reports (PaLM 540B: 46.2% model-FLOPs, 57.8% hardware-FLOPs utilisation, Chowdhery et al. 2022;
// Megatron-LM on A100s: 52% of peak at the largest scale, Narayanan et al. 2021), less with eager
// attention (the s x s scores through HBM).
constexpr double kTopUtilisationFused = 0.50;
constexpr double kTopUtilisationEager = 0.40;
// Tokens per micro-step at which utilisation reaches half its top: small matmuls leave the GPU idle.
constexpr double kHalfUtilisationTokens = 1024;
// 4-bit base weights are dequantized before every matmul (bitsandbytes' NF4 path): a round 30% more
// compute time, not measured.
constexpr double kDequantizeSlowdown = 1.3;
// Host <-> device bytes/s, effective: PCIe 4.0 x16 carries 31.5 GB/s per direction (16 GT/s x 16
// lanes x 128/130), of which about 80% in practice.
constexpr double kPcieBytesPerS = 25e9;
// The link between GPUs when the catalog has no interconnect figure: as PCIe.
constexpr double kDefaultLinkBytesPerS = 25e9;
// HBM bytes/s the optimizer step streams at: the order of an A100 40GB (1,555 GB/s on its datasheet).
constexpr double kHbmBytesPerS = 1.5e12;
// The share of gradient communication not hidden behind backward: DDP and ZeRO-1/2 overlap their
// buckets with the backward that produces them; ZeRO-3's per-layer all-gathers sit on the forward's
// and backward's critical path more often.
constexpr double kExposedComm = 0.3;
constexpr double kExposedCommZero3 = 0.5;
// Parameters per second a CPU Adam step updates (DeepSpeed's vectorised CPU-Adam on a many-core
// host): a round figure, not measured.
constexpr double kCpuAdamParamsPerS = 1e9;

// Attention matmul FLOPs per token of one forward on one rank: QK^T and PV, 2 * 2 * s * a * d
// per layer; fused kernels skip the masked half of a causal square.
double attention_fwd_flops_per_token(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  const double heads = static_cast<double>(m.num_attention_heads) / static_cast<double>(s.parallel.tensor_parallel);
  const double layers = std::ceil(static_cast<double>(m.num_layers) / static_cast<double>(s.parallel.pipeline_parallel));
  const double f = 4.0 * static_cast<double>(s.batch.seq_len) * heads * static_cast<double>(m.head_dim) * layers;
  return s.attention == AttentionImpl::eager ? f : 0.5 * f;
}

double active_params(const ParamSummary& ps) {
  return static_cast<double>(ps.counts.active_per_token - ps.counts.adapter);
}

// Peak FLOP/s for the precision: tensor-core 16-bit rate, fp32 at an eighth of it (PyTorch
// leaves TF32 off for matmuls by default).
double peak_flops(const TrainingSetup& s) {
  const double p = s.device.peak_flops > 0 ? s.device.peak_flops : kDefaultPeakFlops;
  return s.precision == Precision::fp32 ? p / kFp32Slowdown : p;
}

// Utilisation grows with the tokens per micro-step: small matmuls leave the GPU idle.
double utilisation(const TrainingSetup& s) {
  const double tokens = static_cast<double>(s.batch.micro_batch * s.batch.seq_len);
  const double top = s.attention == AttentionImpl::eager ? kTopUtilisationEager : kTopUtilisationFused;
  return top * tokens / (tokens + kHalfUtilisationTokens);
}

double bytes_per_s_or(double v, double fallback) { return v > 0 ? v : fallback; }

}  // namespace

double train_flops_per_token(const TrainingSetup& s, const ParamSummary& ps) {
  const double n = active_params(ps);
  const double attn = attention_fwd_flops_per_token(s);
  if (s.finetune.mode != FinetuneMode::full) return 4 * n + 3 * attn;  // no frozen-weight gradients
  return 6 * n + 3 * attn;
}

double recompute_flops_per_token(const TrainingSetup& s, const ParamSummary& ps) {
  const double fwd = 2 * active_params(ps) + attention_fwd_flops_per_token(s);
  switch (s.checkpointing.mode) {
    case CheckpointMode::none: return 0;
    case CheckpointMode::selective: return attention_fwd_flops_per_token(s);  // the attention core only
    case CheckpointMode::full: return fwd;
    case CheckpointMode::every: return fwd / static_cast<double>(std::max<int64_t>(1, s.checkpointing.every_k));
    case CheckpointMode::selective_op: return fwd / 2;  // every other matmul recomputed
    case CheckpointMode::layers:
      return fwd * static_cast<double>(s.checkpointing.layers.size()) / static_cast<double>(std::max<int64_t>(1, s.model.num_layers));
  }
  return 0;
}


StepTime step_time(const TrainingSetup& s, const ParamSummary& ps) {
  StepTime t;
  const double tokens_per_micro = static_cast<double>(s.batch.micro_batch * s.batch.seq_len);
  const double micro_steps = static_cast<double>(s.batch.grad_accum);
  double flops_token = train_flops_per_token(s, ps) + recompute_flops_per_token(s, ps);
  if (base_quantized(s)) flops_token *= kDequantizeSlowdown;
  t.flops_per_step = flops_token * tokens_per_micro * micro_steps;
  t.utilisation = utilisation(s);
  t.compute_s = t.flops_per_step / (peak_flops(s) * t.utilisation);

  const int64_t dp = s.parallel.data_parallel();
  const double total_params = static_cast<double>(ps.counts.total);
  const double trainable = static_cast<double>(ps.counts.trainable);
  const double wb = static_cast<double>(weight_bytes_per_param(s.precision));
  const double gb = static_cast<double>(grad_bytes_per_param(s.precision));
  const double link = bytes_per_s_or(s.device.interconnect_bytes_per_s, kDefaultLinkBytesPerS);
  const double pcie = kPcieBytesPerS;
  const double hbm = kHbmBytesPerS;
  if (dp > 1) {
    const double frac = static_cast<double>(dp - 1) / static_cast<double>(dp);
    double bytes = 0, exposed = kExposedComm;
    switch (s.parallel.zero_stage) {
      case 0: case 1: bytes = 2 * frac * trainable * gb; break;               // all-reduce
      case 2: bytes = frac * trainable * gb + frac * total_params * wb; break;  // reduce-scatter + all-gather
      default:  // ZeRO-3: all-gather parameters in forward and backward of every micro-step
        bytes = micro_steps * 2 * frac * total_params * wb + frac * trainable * gb;
        exposed = kExposedCommZero3;
    }
    t.comm_s = exposed * bytes / link;
  }
  const double part = static_cast<double>(dp > 1 && s.parallel.zero_stage >= 1 ? dp : 1);
  if (s.parallel.offload != Offload::none) {
    // Gradients down (fp32), parameters up (16-bit) for the rank's partition, and the CPU Adam step.
    if (offloads_optimizer(s.parallel.offload))
      t.offload_s = trainable / part * (4 + wb) / pcie + trainable / part / kCpuAdamParamsPerS;
    // The parameter shards come up for each forward and backward.
    if (offloads_params(s.parallel.offload)) t.offload_s += micro_steps * 2 * total_params / part * wb / pcie;
  }
  if (!offloads_optimizer(s.parallel.offload)) {
    // Optimizer-state bytes read and written per trainable parameter.
    double state_b = 16;  // two fp32 moments
    switch (s.optimizer) {
      case OptimizerKind::sgd: state_b = 0; break;
      case OptimizerKind::sgd_momentum: case OptimizerKind::lion: state_b = 8; break;
      case OptimizerKind::adamw_8bit: case OptimizerKind::paged_adamw_8bit: state_b = 4; break;
      case OptimizerKind::adafactor: state_b = 1; break;
      default: break;
    }
    t.optimizer_s = trainable / part * (wb + gb + state_b) * 2 / hbm;
    // Paged optimizers keep their states in unified memory that pages to the host under pressure:
    // when it does, every step moves them over PCIe and back (the case memplan plans for).
    if (s.optimizer == OptimizerKind::paged_adamw || s.optimizer == OptimizerKind::paged_adamw_8bit)
      t.offload_s += trainable / part * (s.optimizer == OptimizerKind::paged_adamw ? 8.0 : 2.0) * 2 / pcie;
  }
  t.total_s = t.compute_s + t.comm_s + t.offload_s + t.optimizer_s;
  const double global_tokens = tokens_per_micro * micro_steps * static_cast<double>(dp);
  t.tokens_per_s = t.total_s > 0 ? global_tokens / t.total_s : 0;
  return t;
}

}  // namespace memplan::planner
