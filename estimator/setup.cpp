// Spellings of the setup's enumerations (command line, YAML, JSON) and the bytes-per-element
// tables of the precision regimes. Parsing is case-insensitive and treats '_' like '-'.
#include "estimator/setup.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace memplan {
namespace {

std::string canon(std::string s) {
  for (char& c : s) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

template <class E>
using Table = std::vector<std::pair<const char*, E>>;

template <class E>
std::optional<E> lookup(const Table<E>& t, const std::string& s) {
  const std::string c = canon(s);
  for (const auto& [name, v] : t)
    if (c == name) return v;
  return std::nullopt;
}

template <class E>
const char* name_of(const Table<E>& t, E v) {
  for (const auto& [name, e] : t)
    if (e == v) return name;
  return "?";
}

// The first spelling of each value is the canonical one (used in output).
const Table<Precision> kPrecision = {
    {"fp32", Precision::fp32},           {"amp-fp16", Precision::amp_fp16},
    {"amp-bf16", Precision::amp_bf16},   {"bf16", Precision::bf16},
    {"fp16", Precision::fp16},           {"mixed-fp16", Precision::mixed_fp16},
    {"mixed-bf16", Precision::mixed_bf16}, {"float32", Precision::fp32},
    {"32", Precision::fp32},             {"32-true", Precision::fp32},
    {"bf16-true", Precision::bf16},      {"16-true", Precision::fp16},
    {"bf16-mixed", Precision::amp_bf16}, {"16-mixed", Precision::amp_fp16},
    {"amp", Precision::amp_bf16},
};
const Table<OptimizerKind> kOptimizer = {
    {"adamw", OptimizerKind::adamw},
    {"adam", OptimizerKind::adam},
    {"sgd", OptimizerKind::sgd},
    {"sgd-momentum", OptimizerKind::sgd_momentum},
    {"adafactor", OptimizerKind::adafactor},
    {"adafactor-momentum", OptimizerKind::adafactor_momentum},
    {"adamw-8bit", OptimizerKind::adamw_8bit},
    {"lion", OptimizerKind::lion},
    {"paged-adamw", OptimizerKind::paged_adamw},
    {"paged-adamw-8bit", OptimizerKind::paged_adamw_8bit},
    // HF TrainingArguments.optim spellings
    {"adamw-torch", OptimizerKind::adamw},
    {"adamw-torch-fused", OptimizerKind::adamw},
    {"adamw-hf", OptimizerKind::adamw},
    {"adamw-bnb-8bit", OptimizerKind::adamw_8bit},
    {"adam8bit", OptimizerKind::adamw_8bit},
    {"adamw8bit", OptimizerKind::adamw_8bit},
    {"paged-adamw-32bit", OptimizerKind::paged_adamw},
    {"lion-32bit", OptimizerKind::lion},
    {"momentum", OptimizerKind::sgd_momentum},
};
const Table<OptimizerImpl> kOptimizerImpl = {
    {"auto", OptimizerImpl::automatic},
    {"for-loop", OptimizerImpl::for_loop},
    {"foreach", OptimizerImpl::foreach},
    {"fused", OptimizerImpl::fused},
};
const Table<Framework> kFramework = {
    {"hf-trainer", Framework::hf_trainer}, {"custom", Framework::custom},         {"lightning", Framework::lightning},
    {"torchtune", Framework::torchtune},   {"torchtitan", Framework::torchtitan}, {"litgpt", Framework::litgpt},
    {"deepspeed", Framework::deepspeed},   {"megatron", Framework::megatron},
    {"hf", Framework::hf_trainer},         {"trainer", Framework::hf_trainer},    {"trl", Framework::hf_trainer},
    {"axolotl", Framework::hf_trainer},    {"accelerate", Framework::custom},     {"nanogpt", Framework::custom},
    {"pytorch-lightning", Framework::lightning}, {"nemo", Framework::megatron},   {"megatron-lm", Framework::megatron},
};
const Table<FsdpMode> kFsdp = {
    {"none", FsdpMode::none},         {"full", FsdpMode::full_shard},         {"shard-grad-op", FsdpMode::shard_grad_op},
    {"hybrid", FsdpMode::hybrid_shard}, {"no-shard", FsdpMode::no_shard},     {"full-shard", FsdpMode::full_shard},
    {"hybrid-shard", FsdpMode::hybrid_shard}, {"off", FsdpMode::none},        {"false", FsdpMode::none},
};
const Table<AttentionImpl> kAttention = {
    {"eager", AttentionImpl::eager},     {"sdpa", AttentionImpl::sdpa},
    {"flash", AttentionImpl::flash},     {"flash-attention-2", AttentionImpl::flash},
    {"flash-attn", AttentionImpl::flash}, {"math", AttentionImpl::eager},
};
const Table<Offload> kOffload = {
    {"none", Offload::none},
    {"optimizer", Offload::optimizer},
    {"optimizer+params", Offload::optimizer_and_params},
    {"cpu", Offload::optimizer},
    {"params", Offload::params},
};
const Table<FinetuneMode> kFinetune = {
    {"full", FinetuneMode::full}, {"lora", FinetuneMode::lora}, {"qlora", FinetuneMode::qlora}};
const Table<BaseQuant> kBaseQuant = {{"none", BaseQuant::none}, {"nf4", BaseQuant::nf4}, {"int8", BaseQuant::int8}};
const Table<DeviceKind> kDevice = {{"cuda", DeviceKind::cuda}, {"cpu", DeviceKind::cpu}};
const Table<NormKind> kNorm = {{"layer-norm", NormKind::layer_norm}, {"rms-norm", NormKind::rms_norm}};
const Table<Activation> kActivation = {
    {"gelu", Activation::gelu},
    {"gelu-pytorch-tanh", Activation::gelu_tanh},
    {"gelu-new", Activation::gelu_new},
    {"silu", Activation::silu},
    {"relu", Activation::relu},
    {"swish", Activation::silu},
    {"gelu-fast", Activation::gelu_new},
    {"gelu-python", Activation::gelu},
    {"gelu-tanh", Activation::gelu_tanh},
    {"gelu-accurate", Activation::gelu_new},
};
const Table<PositionKind> kPositions = {
    {"learned", PositionKind::learned}, {"rotary", PositionKind::rotary}, {"alibi", PositionKind::alibi}, {"none", PositionKind::none}};
const Table<Support> kSupport = {{"yes", Support::yes}, {"partial", Support::partial}, {"no", Support::no},
                                 {"true", Support::yes}, {"false", Support::no}};
const Table<HeadKind> kHead = {{"causal-lm", HeadKind::causal_lm},
                               {"masked-lm", HeadKind::masked_lm},
                               {"sequence-classification", HeadKind::sequence_classification}};

template <class E>
std::vector<std::string> canonical_names(const Table<E>& t) {
  std::vector<std::string> out;
  std::vector<E> seen;
  for (const auto& [name, v] : t)
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) {
      seen.push_back(v);
      out.emplace_back(name);
    }
  return out;
}

}  // namespace

const char* to_string(Precision p) { return name_of(kPrecision, p); }
const char* to_string(OptimizerKind o) { return name_of(kOptimizer, o); }
const char* to_string(OptimizerImpl o) { return name_of(kOptimizerImpl, o); }
const char* to_string(AttentionImpl a) { return name_of(kAttention, a); }
const char* to_string(Offload o) { return name_of(kOffload, o); }
const char* to_string(FinetuneMode f) { return name_of(kFinetune, f); }
const char* to_string(BaseQuant q) { return name_of(kBaseQuant, q); }
const char* to_string(DeviceKind d) { return name_of(kDevice, d); }
const char* to_string(NormKind n) { return name_of(kNorm, n); }
const char* to_string(Activation a) { return name_of(kActivation, a); }
const char* to_string(PositionKind p) { return name_of(kPositions, p); }
const char* to_string(HeadKind h) { return name_of(kHead, h); }

std::string to_string(const Checkpointing& c) {
  switch (c.mode) {
    case CheckpointMode::none: return "none";
    case CheckpointMode::selective: return "selective";
    case CheckpointMode::selective_op: return "selective-op";
    case CheckpointMode::full: return "full";
    case CheckpointMode::every: return "every:" + std::to_string(c.every_k);
    case CheckpointMode::layers: {
      std::string out = "layers:";
      for (size_t i = 0; i < c.layers.size(); ++i) out += (i ? "," : "") + std::to_string(c.layers[i]);
      return out;
    }
  }
  return "?";
}

const char* to_string(Framework f) { return name_of(kFramework, f); }
const char* to_string(FsdpMode f) { return name_of(kFsdp, f); }
const char* to_string(Support s) { return name_of(kSupport, s); }
const char* to_string(Feature f) {
  switch (f) {
    case Feature::bf16: return "bf16";
    case Feature::flash_attention: return "flash attention";
    case Feature::sdpa_fused: return "fused SDPA kernels";
    case Feature::bitsandbytes: return "bitsandbytes";
    case Feature::deepspeed: return "DeepSpeed";
    case Feature::deepspeed_offload: return "DeepSpeed offload";
    case Feature::multi_gpu: return "multi-GPU";
    case Feature::kCount: break;
  }
  return "?";
}
std::optional<Support> parse_support(const std::string& s) { return lookup(kSupport, s); }
std::string to_string(const Runtime& r, LossImpl l) {
  switch (l) {
    case LossImpl::standard: return "standard";
    case LossImpl::fused_linear: return "fused-linear";
    case LossImpl::vocab_parallel: return "vocab-parallel";
    case LossImpl::chunked:
      return r.loss_chunk_tokens > 0 ? "chunked:" + std::to_string(r.loss_chunk_tokens) + "t"
                                     : "chunked:" + std::to_string(r.loss_chunks);
  }
  return "?";
}
std::optional<Framework> parse_framework(const std::string& s) { return lookup(kFramework, s); }
std::optional<FsdpMode> parse_fsdp(const std::string& s) { return lookup(kFsdp, s); }

std::optional<std::pair<int, int>> parse_version(const std::string& s) {
  int major = -1, minor = -1;
  size_t i = 0;
  auto number = [&](int& out) {
    const size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) && i - start < 3) out = (out < 0 ? 0 : out * 10) + (s[i++] - '0');
    return i > start;
  };
  if (!number(major) || i >= s.size() || s[i++] != '.' || !number(minor)) return std::nullopt;
  if (i < s.size()) {  // an optional .PATCH (digits) and nothing else
    int patch = -1;
    if (s[i++] != '.' || !number(patch) || i != s.size()) return std::nullopt;
  }
  if (major < 1) return std::nullopt;
  return std::make_pair(major, minor);
}

bool parse_loss(const std::string& s, Runtime* r) {
  const std::string c = canon(s);
  auto digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 9 && std::all_of(t.begin(), t.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
  };
  if (c == "standard" || c == "cross-entropy" || c == "ce") {
    r->loss = LossImpl::standard;
    return true;
  }
  if (c == "fused-linear" || c == "fused-linear-cross-entropy" || c == "flce" || c == "cut-cross-entropy" || c == "cce") {
    r->loss = LossImpl::fused_linear;
    return true;
  }
  if (c == "vocab-parallel" || c == "vocab-parallel-cross-entropy" || c == "megatron") {
    r->loss = LossImpl::vocab_parallel;
    return true;
  }
  if (c == "chunked") {
    r->loss = LossImpl::chunked;
    r->loss_chunks = 8;
    r->loss_chunk_tokens = 0;
    return true;
  }
  if (c.rfind("chunked:", 0) != 0) return false;
  std::string n = c.substr(8);
  const bool tokens = !n.empty() && n.back() == 't';
  if (tokens) n.pop_back();
  if (!digits(n) || std::stoll(n) < 1) return false;
  r->loss = LossImpl::chunked;
  r->loss_chunks = tokens ? 8 : std::stoll(n);
  r->loss_chunk_tokens = tokens ? std::stoll(n) : 0;
  return true;
}

std::optional<Precision> parse_precision(const std::string& s) { return lookup(kPrecision, s); }
std::optional<OptimizerKind> parse_optimizer(const std::string& s) { return lookup(kOptimizer, s); }
std::optional<OptimizerImpl> parse_optimizer_impl(const std::string& s) { return lookup(kOptimizerImpl, s); }
std::optional<AttentionImpl> parse_attention(const std::string& s) { return lookup(kAttention, s); }
std::optional<Offload> parse_offload(const std::string& s) { return lookup(kOffload, s); }
std::optional<FinetuneMode> parse_finetune(const std::string& s) { return lookup(kFinetune, s); }
std::optional<Activation> parse_activation(const std::string& s) { return lookup(kActivation, s); }

std::optional<Checkpointing> parse_checkpointing(const std::string& s) {
  const std::string c = canon(s);
  Checkpointing out;
  if (c == "none" || c == "false" || c == "off" || c == "no") return out;
  if (c == "full" || c == "true" || c == "on" || c == "yes") {
    out.mode = CheckpointMode::full;
    return out;
  }
  if (c == "selective") {
    out.mode = CheckpointMode::selective;
    return out;
  }
  if (c == "selective-op" || c == "op") {
    out.mode = CheckpointMode::selective_op;
    return out;
  }
  if (c.rfind("layers:", 0) == 0) {
    // layers:0,4,8 (0-based, any order; duplicates folded). The model's depth is checked by validate().
    std::string item;
    for (const char ch : c.substr(7) + ",") {
      if (ch != ',') {
        item += ch;
        continue;
      }
      if (item.empty() || item.size() > 6 ||
          !std::all_of(item.begin(), item.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); }))
        return std::nullopt;
      out.layers.push_back(std::stoll(item));
      item.clear();
    }
    std::sort(out.layers.begin(), out.layers.end());
    out.layers.erase(std::unique(out.layers.begin(), out.layers.end()), out.layers.end());
    out.mode = CheckpointMode::layers;
    return out;
  }
  if (c.rfind("every:", 0) == 0 && c.size() > 6) {
    const std::string k = c.substr(6);
    if (!std::all_of(k.begin(), k.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }) ||
        k.size() > 6)
      return std::nullopt;
    out.every_k = std::stoll(k);
    if (out.every_k < 1) return std::nullopt;
    out.mode = out.every_k == 1 ? CheckpointMode::full : CheckpointMode::every;
    return out;
  }
  return std::nullopt;
}

std::vector<std::string> precision_names() { return canonical_names(kPrecision); }
std::vector<std::string> optimizer_names() { return canonical_names(kOptimizer); }
std::vector<std::string> attention_names() { return canonical_names(kAttention); }
std::vector<std::string> offload_names() { return canonical_names(kOffload); }
std::vector<std::string> finetune_names() { return canonical_names(kFinetune); }
std::vector<std::string> framework_names() { return canonical_names(kFramework); }
std::vector<std::string> fsdp_names() { return canonical_names(kFsdp); }
std::vector<std::string> optimizer_impl_names() { return canonical_names(kOptimizerImpl); }
std::vector<std::string> checkpointing_names() { return {"none", "full", "selective", "selective-op", "every:K", "layers:I,J,..."}; }
// "chunked" alone is chunked:8 (parse_loss): the names are the spellings to_string writes back.
std::vector<std::string> loss_names() { return {"standard", "chunked:N", "chunked:Nt", "fused-linear", "vocab-parallel"}; }
std::vector<std::string> adapter_dtype_names() { return {"fp32", "model"}; }

std::optional<bool> parse_adapter_fp32(const std::string& s) {
  if (s == "fp32" || s == "float32") return true;
  if (s == "model" || s == "bf16" || s == "bfloat16" || s == "fp16" || s == "float16") return false;
  return std::nullopt;
}

int64_t adapter_bytes(const TrainingSetup& s) { return s.finetune.adapter_fp32 ? 4 : weight_bytes_per_param(s.precision); }

int64_t weight_bytes_per_param(Precision p) {
  switch (p) {
    case Precision::fp32: case Precision::amp_fp16: case Precision::amp_bf16: return 4;
    default: return 2;
  }
}
int64_t grad_bytes_per_param(Precision p) { return weight_bytes_per_param(p); }
int64_t master_bytes_per_param(Precision p) {
  return p == Precision::mixed_fp16 || p == Precision::mixed_bf16 ? 4 : 0;
}
int64_t state_bytes_per_element(Precision p) {
  return p == Precision::bf16 || p == Precision::fp16 ? 2 : 4;
}
bool is_autocast(Precision p) { return p == Precision::amp_fp16 || p == Precision::amp_bf16; }

}  // namespace memplan
