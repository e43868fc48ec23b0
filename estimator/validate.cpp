// validate(): the problems that make a setup impossible or meaningless, each at the setup field it
// concerns (estimate.h).
#include "estimator/estimate.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "estimator/attention_kernel.h"
#include "estimator/fields.h"
#include "estimator/layers.h"
#include "estimator/model.h"
#include "estimator/runtime.h"

namespace memplan {

// ---- validation --------------------------------------------------------------------------------

std::optional<Problem> zero_stage_problem(int64_t stage) {
  if (stage >= 0 && stage <= 3) return std::nullopt;
  return Problem{memplan::path(Count::zero_stage), fmt::format("ZeRO stage must be 0, 1, 2 or 3 (got {})", stage),
                 "DeepSpeed ZeRO has stages 0 to 3"};
}

std::vector<Problem> validate(const TrainingSetup& s) {
  std::vector<Problem> p;
  const ModelSpec& m = s.model;
  auto positive = [&](const char* field, int64_t v, int64_t max) {
    if (v < 1) p.push_back({field, fmt::format("must be at least 1 (got {})", v), "a size or count: a whole number of 1 or more"});
    else if (v > max) p.push_back({field, fmt::format("is absurdly large ({}); the limit is {}", v, max), "check the units"});
  };
  positive(path(&ModelSpec::hidden_size), m.hidden_size, 1'000'000);
  positive(path(&ModelSpec::num_layers), m.num_layers, 10'000);
  positive(path(&ModelSpec::num_attention_heads), m.num_attention_heads, 100'000);
  positive(path(&ModelSpec::num_key_value_heads), m.num_key_value_heads, 100'000);
  positive(path(&ModelSpec::head_dim), m.head_dim, 100'000);
  positive(path(&ModelSpec::intermediate_size), m.intermediate_size > 0 ? m.intermediate_size : m.expert_width(), 10'000'000);
  positive(path(&ModelSpec::vocab_size), m.vocab_size, 100'000'000);
  positive(memplan::path(Count::micro_batch), s.batch.micro_batch, 1'000'000);
  positive(memplan::path(Count::seq_len), s.batch.seq_len, 100'000'000);
  positive(memplan::path(Count::grad_accum), s.batch.grad_accum, 1'000'000);
  positive(memplan::path(Count::num_gpus), s.parallel.num_gpus, 1'000'000);
  // Every other number, once, here: non-negative, within a physical bound, finite. Products of
  // these stay inside int64 (the largest tensors are bounded below); parallel degrees are
  // bounded before they are multiplied.
  auto range = [&](const char* field, int64_t v, int64_t lo, int64_t hi, const char* hint) {
    if (v < lo || v > hi) p.push_back({field, fmt::format("must be between {} and {} (got {})", lo, hi, v), hint});
  };
  positive(memplan::path(Count::tensor_parallel), s.parallel.tensor_parallel, 1'000'000);
  positive(memplan::path(Count::pipeline_parallel), s.parallel.pipeline_parallel, 1'000'000);
  positive(memplan::path(Count::expert_parallel), s.parallel.expert_parallel, 1'000'000);
  range(path(&ModelSpec::max_position_embeddings), m.max_position_embeddings, 0, 100'000'000,
        "the longest sequence the model's position table or mask covers (n_positions, max_position_embeddings)");
  range(path(&ModelSpec::num_labels), m.num_labels, 0, 100'000'000, "a classifier head has one output per label");
  range(path(&ModelSpec::moe_intermediate_size), m.moe_intermediate_size, 0, 10'000'000,
        "an expert's MLP width (moe_intermediate_size); 0 means intermediate_size");
  range(path(&ModelSpec::shared_expert_intermediate_size), m.shared_expert_intermediate_size, 0, 10'000'000,
        "the shared experts' MLP width (shared_expert_intermediate_size); 0 means none");
  range(path(&ModelSpec::num_shared_experts), m.num_shared_experts, 0, 100'000, "always-on experts, usually 0 to 2");
  range(path(&ModelSpec::moe_layer_frequency), m.moe_layer_frequency, 0, 10'000, "decoder_sparse_step: every n-th layer is MoE");
  range(path(&ModelSpec::first_dense_layers), m.first_dense_layers, 0, m.num_layers, "first_k_dense_replace: at most the layer count");
  range(path(&ModelSpec::type_vocab_size), m.type_vocab_size, 0, 100'000, "BERT's token types: usually 2");
  range(path(&ModelSpec::sliding_window), m.sliding_window, 0, 100'000'000, "attention window in tokens (0: none)");
  range(path(&ModelSpec::global_attention_every), m.global_attention_every, 0, 1'000'000, "every n-th layer attends globally (0: none)");
  range(path(&ModelSpec::q_lora_rank), m.q_lora_rank, 0, 1'000'000, "DeepSeek's compressed query width");
  range(path(&ModelSpec::kv_lora_rank), m.kv_lora_rank, 0, 1'000'000, "DeepSeek's compressed key/value width");
  range(path(&ModelSpec::qk_rope_head_dim), m.qk_rope_head_dim, 0, 100'000, "a head dimension");
  range(path(&ModelSpec::qk_nope_head_dim), m.qk_nope_head_dim, 0, 100'000, "a head dimension");
  range(path(&ModelSpec::v_head_dim), m.v_head_dim, 0, 100'000, "a head dimension");
  // Multi-head latent attention splits q and k into a rotary and a plain part and gives v its own
  // width (DeepseekV3Attention): the rotary part and v have at least one dimension.
  if (m.mla()) {
    for (const auto& [field, v] : {std::pair{path(&ModelSpec::qk_rope_head_dim), m.qk_rope_head_dim},
                                   std::pair{path(&ModelSpec::v_head_dim), m.v_head_dim}})
      if (v < 1)
        p.push_back({field, fmt::format("must be at least 1 with multi-head latent attention (got {})", v),
                     "kv_lora_rank is set: qk_rope_head_dim and v_head_dim are head widths (DeepSeek-V3: 64 and 128)"});
  }
  range(path(&ModelSpec::expert_groups), m.expert_groups, 0, 100'000, "DeepSeek-V3's n_group");
  range(path(&ModelSpec::topk_groups), m.topk_groups, 0, 100'000, "DeepSeek-V3's topk_group");
  range(memplan::path(Size::gpu_memory), s.device.capacity_bytes, 0, int64_t{1} << 50, "a GPU's memory in bytes, such as 80GiB");
  // The settings' bounds (DeepSpeed's buckets, the DataLoader's workers, every:K, the card's
  // overheads), each the row's.
  for (const SettingField& f : setting_fields())
    if (f.kind == SettingKind::whole && f.hint) range(f.path, f.get(s), f.lo, f.hi, f.hint);
  if (!(std::isfinite(s.finetune.lora_alpha) && s.finetune.lora_alpha > 0 && s.finetune.lora_alpha <= 1e6))
    p.push_back({path(Number::lora_alpha), fmt::format("must be a positive finite number up to 1e6 (got {})", s.finetune.lora_alpha),
                 "PEFT's lora_alpha is usually r or 2r, e.g. 16"});
  for (double ModelSpec::*member : {&ModelSpec::rotary_fraction, &ModelSpec::attn_softcap, &ModelSpec::final_softcap,
                                     &ModelSpec::logit_scale, &ModelSpec::residual_multiplier})
    if (const double v = m.*member; !(std::isfinite(v) && v >= 0 && v <= 1e6))
      p.push_back({path(member), fmt::format("must be a finite number between 0 and 1e6 (got {})", v), "check the model's config.json"});
  if (!(std::isfinite(m.capacity_factor) && std::isfinite(m.routed_scaling_factor) && m.routed_scaling_factor >= 0 &&
        m.routed_scaling_factor <= 1e6))
    p.push_back({path(&ModelSpec::routed_scaling_factor), "must be a finite number between 0 and 1e6", "DeepSeek-V3 uses 2.5"});
  if (!p.empty()) return p;
  // Layers that are not mixture-of-experts (decoder_sparse_step > 1, first_k_dense_replace) use
  // the dense MLP width.
  // BertLayer has no mixture-of-experts block (the estimator's BERT layer runs the dense MLP, and
  // the config reader keeps no expert keys for it).
  if (m.num_experts > 0 && m.bert_style)
    p.push_back({path(&ModelSpec::num_experts),
                 fmt::format("a BERT-style encoder has no mixture-of-experts block (got {} experts)", m.num_experts),
                 "set num_experts to 0 for this model"});
  if (m.intermediate_size < 0)
    p.push_back({path(&ModelSpec::intermediate_size), fmt::format("must not be negative (got {})", m.intermediate_size),
                 "the dense MLP width; 0 only for a model whose every layer is mixture-of-experts"});
  if (m.num_experts > 0 && (m.first_dense_layers > 0 || m.moe_layer_frequency > 1) && m.intermediate_size < 1)
    p.push_back({path(&ModelSpec::intermediate_size),
                 fmt::format("must be at least 1: the model has dense layers (first {} dense, every {} MoE) and their MLP "
                             "width is intermediate_size (got {})",
                             m.first_dense_layers, std::max<int64_t>(1, m.moe_layer_frequency), m.intermediate_size),
                 "set intermediate_size (the dense layers' MLP width) in the model's config"});
  {
    // GPT-2 registers a bool causal-mask buffer of n_positions^2 bytes in every layer.
    using LD = long double;
    const LD mask = static_cast<LD>(m.max_position_embeddings) * static_cast<LD>(m.max_position_embeddings) *
                    static_cast<LD>(m.num_layers);
    if (mask > static_cast<LD>(int64_t{1} << 62))
      p.push_back({path(&ModelSpec::max_position_embeddings),
                   fmt::format("is too large to estimate: the causal-mask buffers alone would be about {:.3g} bytes",
                               static_cast<double>(mask)),
                   "memplan counts bytes in 64-bit integers (up to 4.6e18); check n_positions"});
  }
  if (!p.empty()) return p;
  // Every byte count is an int64; refuse setups whose largest tensors could not be counted in
  // one (2^62 bytes leaves room for the sums). The products are formed in long double.
  {
    using LD = long double;
    const LD b = static_cast<LD>(s.batch.micro_batch), sq = static_cast<LD>(s.batch.seq_len);
    const LD scores = b * static_cast<LD>(m.num_attention_heads) * sq * sq * 8;  // s x s scores, fp32 + grads
    const LD logits = b * sq * static_cast<LD>(m.vocab_size) * 16;               // logits path, 16 B/elem
    const LD mlp = b * sq * static_cast<LD>(std::max(m.intermediate_size, m.expert_width())) *
                   static_cast<LD>(std::max<int64_t>(1, m.experts_per_token)) * 16;
    const LD params = static_cast<LD>(m.hidden_size) * static_cast<LD>(m.hidden_size) * 4 * static_cast<LD>(m.num_layers) *
                      static_cast<LD>(std::max<int64_t>(1, m.num_experts)) * 20;
    const LD limit = static_cast<LD>(int64_t{1} << 62);
    auto too_big = [&](const char* field, LD v, const char* what) {
      if (v > limit)
        p.push_back({field, fmt::format("is too large to estimate: {} alone would be about {:.3g} bytes", what, static_cast<double>(v)),
                     "memplan counts bytes in 64-bit integers (up to 4.6e18); check the sizes"});
    };
    too_big(memplan::path(Count::seq_len), scores, "the attention scores");
    too_big(memplan::path(Count::seq_len), logits, "the logits");
    too_big(memplan::path(Count::micro_batch), mlp, "the MLP activations");
    too_big(path(&ModelSpec::hidden_size), params, "the model states");
    if (!p.empty()) return p;
  }
  if (m.num_key_value_heads > m.num_attention_heads || m.num_attention_heads % m.num_key_value_heads != 0)
    p.push_back({path(&ModelSpec::num_key_value_heads),
                 fmt::format("{} key/value heads do not divide {} attention heads", m.num_key_value_heads, m.num_attention_heads),
                 "grouped-query attention needs num_attention_heads to be a multiple of num_key_value_heads"});
  // A head dimension derived as h / a (integer division) when a does not divide h.
  if (m.head_dim == m.hidden_size / std::max<int64_t>(1, m.num_attention_heads) && m.hidden_size % m.num_attention_heads != 0)
    p.push_back({path(&ModelSpec::num_attention_heads),
                 fmt::format("{} heads do not divide hidden size {}", m.num_attention_heads, m.hidden_size),
                 "set head_dim explicitly if the model uses a head dimension other than hidden/heads"});
  if (m.num_experts < 0) p.push_back({path(&ModelSpec::num_experts), "must not be negative", "0 for a dense model, else the routed experts per MoE layer"});
  if (m.num_experts > 0) {
    if (m.experts_per_token < 1)
      p.push_back({path(&ModelSpec::experts_per_token), "must be at least 1 for a mixture of experts", "Mixtral uses 2"});
    else if (m.experts_per_token > m.num_experts)
      p.push_back({path(&ModelSpec::experts_per_token),
                   fmt::format("top-{} routing needs at least {} experts (the model has {})", m.experts_per_token,
                               m.experts_per_token, m.num_experts),
                   "num_experts_per_token must not exceed num_experts"});
    if (m.num_experts > 100'000) p.push_back({path(&ModelSpec::num_experts), "is absurdly large", "the routed experts per MoE layer, at most 100000"});
  }
  if (m.capacity_factor < 0 || m.capacity_factor > 1000)
    p.push_back({path(&ModelSpec::capacity_factor), fmt::format("must be in [0, 1000] (got {})", m.capacity_factor),
                 "0 means dropless routing; 1.0-2.0 is usual"});
  if (auto zero = zero_stage_problem(s.parallel.zero_stage)) p.push_back(std::move(*zero));
  const int64_t mp = s.parallel.tensor_parallel * s.parallel.pipeline_parallel;
  if (s.parallel.tensor_parallel < 1 || s.parallel.pipeline_parallel < 1 || s.parallel.expert_parallel < 1)
    p.push_back({memplan::path(Count::tensor_parallel), "parallel degrees must be at least 1", "a parallel degree is a number of GPUs"});
  else if (s.parallel.num_gpus % mp != 0)
    p.push_back({memplan::path(Count::num_gpus),
                 fmt::format("{} GPUs cannot be split into tensor x pipeline = {} groups", s.parallel.num_gpus, mp),
                 "num_gpus must be a multiple of tensor_parallel * pipeline_parallel"});
  else if (s.parallel.tensor_parallel > 1 &&
           (m.num_attention_heads % s.parallel.tensor_parallel != 0))
    p.push_back({memplan::path(Count::tensor_parallel), "tensor parallel degree must divide the attention heads", "each tensor-parallel rank holds a whole number of heads"});
  // Expert parallelism groups ranks: Megatron asserts world % (expert TP x EP x PP) == 0
  // (megatron/core/parallel_state.py initialize_model_parallel), torchtitan that EP divides
  // dp_shard x cp (x tp) (torchtitan/distributed/parallel_dims.py _validate); either way EP divides
  // the GPU count.
  else if (s.parallel.expert_parallel > 1 && s.parallel.num_gpus % s.parallel.expert_parallel != 0)
    p.push_back({memplan::path(Count::expert_parallel),
                 fmt::format("{} GPUs cannot be split into expert-parallel groups of {}", s.parallel.num_gpus, s.parallel.expert_parallel),
                 "expert_parallel must divide num_gpus (--gpus): each expert-parallel group is that many GPUs"});
  const bool fsdp = s.parallel.fsdp != FsdpMode::none;
  if (offloads_params(s.parallel.offload) && s.parallel.zero_stage != 3 && !fsdp)
    p.push_back({path(Choice::offload), "parameter offload needs ZeRO stage 3 or FSDP", "use --zero 3 or --offload optimizer"});
  if (s.parallel.offload == Offload::params && fsdp)
    p.push_back({path(Choice::offload), "FSDP's CPU offload moves the parameters with their gradients and the optimizer step",
                 "use --offload optimizer+params with FSDP (parameters alone on the host is DeepSpeed ZeRO-3's offload_param)"});
  if (offloads_optimizer(s.parallel.offload) && s.parallel.zero_stage == 0 && !fsdp)
    p.push_back({path(Choice::offload), "optimizer offload needs ZeRO stage 1 or higher, or FSDP", "use --zero 2 --offload optimizer"});
  if (s.finetune.mode != FinetuneMode::full && (s.finetune.lora_rank < 1 || s.finetune.lora_rank > 100'000))
    p.push_back({memplan::path(Count::lora_rank), fmt::format("must be between 1 and 100000 (got {})", s.finetune.lora_rank), "PEFT's r, usually 8 to 64"});
  // Adapters on no module: PEFT refuses ("Target modules {...} not found in the base model",
  // peft/tuners/tuners_utils.py BaseTuner.inject_adapter, its ValueError); a plan of 0 trainable
  // parameters would only mislead.
  if (s.finetune.mode != FinetuneMode::full && m.num_layers > 0 && !s.finetune.lora_targets.empty()) {
    bool any = false;
    std::vector<std::string> names;
    for (const bool moe : {false, m.num_experts > 0})
      for (const Linear& lin : layer_linears(s, moe)) {
        any = any || lora_on(s, lin.role);
        const std::string n = role_name(lin.role);
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      }
    if (!any)
      p.push_back({path(List::lora_targets),
                   fmt::format("the LoRA targets ({}) match no linear layer of {}", fmt::join(s.finetune.lora_targets, ", "), m.name),
                   fmt::format("PEFT refuses it (target modules not found in the base model); this model's layers have: {} "
                               "(or all-linear)",
                               fmt::join(names, ", "))});
  }
  if (m.quantized.any() && s.finetune.mode == FinetuneMode::full)
    p.push_back({path(Choice::finetune),
                 fmt::format("'{}' is a pre-quantized checkpoint ({}, {:.3g} bits per weight): its weights cannot train, and "
                             "transformers' Trainer refuses to fine-tune a purely quantized model", m.name, m.quantized.method, m.quantized.bits),
                 "train adapters on it: --finetune lora (or qlora), or start from the unquantized checkpoint"});
  if (s.finetune.freeze_layers < 0 || s.finetune.freeze_layers > m.num_layers)
    p.push_back({memplan::path(Count::freeze_layers), fmt::format("must be between 0 and the {} layers", m.num_layers), "freeze_layers counts layers from the bottom"});
  auto frac = [&](const char* f, double v) {
    if (!(v >= 0 && v < 1)) p.push_back({f, fmt::format("must be in [0, 1) (got {})", v), "a dropout probability such as 0.1"});
  };
  frac(path(&ModelSpec::attention_dropout), m.attention_dropout);
  frac(path(Number::lora_dropout), s.finetune.lora_dropout);
  frac(path(&ModelSpec::hidden_dropout), m.hidden_dropout);
  frac(path(&ModelSpec::embedding_dropout), m.embedding_dropout);
  const Thresholds& t = s.thresholds;
  if (!(t.target > 0 && t.target <= t.warning && t.warning <= t.critical && t.critical <= t.emergency && t.emergency <= 1.0))
    p.push_back({memplan::path(Setting::thresholds), "thresholds must satisfy 0 < target <= warning <= critical <= emergency <= 1",
                 "the defaults are 0.90, 0.92, 0.95, 0.97"});
  if (s.device.capacity_bytes < 0) p.push_back({memplan::path(Size::gpu_memory), "must not be negative", "a GPU's memory, such as 80GiB"});
  // The runtime's knobs.
  const Runtime& r = s.runtime;
  if (s.checkpointing.mode == CheckpointMode::layers) {
    if (s.checkpointing.layers.empty())
      p.push_back({path(Choice::checkpointing), "layers: names no layer", "list the checkpointed layers, e.g. layers:0,4,8"});
    else if (s.checkpointing.layers.back() >= m.num_layers)
      p.push_back({path(Choice::checkpointing),
                   fmt::format("layers: names layer {}, but the model has {} layers (0 to {})", s.checkpointing.layers.back(),
                               m.num_layers, m.num_layers - 1),
                   "layer indices are 0-based"});
  }
  if (r.loss == LossImpl::chunked && (r.loss_chunks < 1 || r.loss_chunk_tokens < 0))
    p.push_back({memplan::path(Choice::loss), "a chunked loss needs at least one chunk", "e.g. --loss chunked:8"});
  if (r.optimizer_in_backward && s.batch.grad_accum > 1)
    p.push_back({path(Switch::optimizer_in_backward),
                 fmt::format("stepping the optimizer in backward cannot accumulate gradients (accumulation {})", s.batch.grad_accum),
                 "torchtune refuses it too (recipes/full_finetune_single_device.py @ v0.6.1 L147-156): use --grad-accum 1"});
  if (r.optimizer_in_backward && s.parallel.zero_stage > 0)
    p.push_back({path(Switch::optimizer_in_backward), "DeepSpeed's ZeRO steps its own optimizer; it cannot step in backward",
                 "drop --optimizer-in-backward or --zero"});
  if (r.fp8 && s.device.kind == DeviceKind::cuda && s.device.family != "generic" && !s.device.fp8)
    p.push_back({path(Switch::fp8), fmt::format("{} has no fp8 tensor cores", s.device.name),
                 "fp8 training needs Hopper, Ada, Blackwell or MI300 (memplan gpus lists fp8 support)"});
  if (s.parallel.fsdp != FsdpMode::none && s.parallel.zero_stage > 0)
    p.push_back({memplan::path(Choice::fsdp), fmt::format("FSDP and DeepSpeed ZeRO-{} both shard the model; a job runs one of them", s.parallel.zero_stage),
                 "drop --fsdp or --zero"});
  if (s.parallel.host_memory_bytes < 0) p.push_back({memplan::path(Size::host_memory), "must not be negative", ""});
  if (s.parallel.gpus_per_node < 1 || s.parallel.gpus_per_node > 1'000'000)
    p.push_back({memplan::path(Count::gpus_per_node), fmt::format("must be at least 1 (got {})", s.parallel.gpus_per_node), "GPUs per node, usually 8"});
  return p;
}

}  // namespace memplan
