// torchtune recipe configs (`tune run RECIPE --config FILE`), read as the recipes of
// pytorch/torchtune v0.6.1 read them (recipes/*.py @ v0.6.1: cfg.key is required, cfg.get(key,
// default) is not). The model is a builder (`model._component_`), the recipe and the GPU count
// are `tune run` arguments and never in the file; `dtype: bf16` is pure bf16 (the model is built
// under set_default_dtype, so weights, gradients and AdamW states are bf16; no autocast, no fp32
// master). Keys that do not change memory (paths, logging, lr) are ignored.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "profiles/formats/tool_models.h"

namespace memplan::profiles::detail {
namespace {

constexpr const char* kPrefix = "torchtune.models.";
constexpr const char* kLister = "torchtune's builders are listed in torchtune/models/*/_model_builders.py @ v0.6.1";

// Architectures of the config.json rows below (no memplan preset has them).
#define LLAMA(h, L, a, kv, f, V, pos) \
  "{\"model_type\": \"llama\", \"hidden_size\": " #h ", \"num_hidden_layers\": " #L ", \"num_attention_heads\": " #a \
  ", \"num_key_value_heads\": " #kv ", \"intermediate_size\": " #f ", \"vocab_size\": " #V \
  ", \"max_position_embeddings\": " #pos ", \"hidden_act\": \"silu\", \"tie_word_embeddings\": false}"
#define QWEN2(h, L, a, kv, f, V, tied) \
  "{\"model_type\": \"qwen2\", \"hidden_size\": " #h ", \"num_hidden_layers\": " #L ", \"num_attention_heads\": " #a \
  ", \"num_key_value_heads\": " #kv ", \"intermediate_size\": " #f ", \"vocab_size\": " #V \
  ", \"max_position_embeddings\": 32768, \"hidden_act\": \"silu\", \"tie_word_embeddings\": " #tied "}"

// A builder: the module and function under torchtune.models, whether lora_/qlora_ variants exist.
struct Builder {
  const char* module;  // "llama3_2"
  const char* fn;      // "llama3_2_1b"
  bool lora;
  bool qlora;
  ToolModel model;
  // A reward model (one-logit head) is a variant, never the builder of a plain LM.
  bool variant_only() const { return std::string(fn).find("reward") != std::string::npos; }
};

// torchtune/models/<module>/_model_builders.py @ v0.6.1 (qwen3 and smollm2 @ main bd2a0fc7, not in
// a release). Dimensions in the rows without a preset are the builder's arguments; the HF repo is
// the checkpoint the shipped configs download (`tune download ...` in recipes/configs/*).
const std::vector<Builder>& builders() {
  static const std::vector<Builder> b = {
      {"code_llama2", "code_llama2_7b", true, true,
       {"code_llama2_7b", "meta-llama/CodeLlama-7b-hf", "", LLAMA(4096, 32, 32, 32, 11008, 32016, 16384)}},
      {"code_llama2", "code_llama2_13b", true, true,
       {"code_llama2_13b", "meta-llama/CodeLlama-13b-hf", "", LLAMA(5120, 40, 40, 40, 13824, 32016, 16384)}},
      {"code_llama2", "code_llama2_70b", true, true,
       {"code_llama2_70b", "meta-llama/CodeLlama-70b-hf", "", LLAMA(8192, 80, 64, 8, 28672, 32016, 16384)}},
      {"gemma", "gemma_2b", true, true,
       {"gemma_2b", "google/gemma-2b", "",
        "{\"model_type\": \"gemma\", \"hidden_size\": 2048, \"num_hidden_layers\": 18, \"num_attention_heads\": 8, "
        "\"num_key_value_heads\": 1, \"head_dim\": 256, \"intermediate_size\": 16384, \"vocab_size\": 256000, "
        "\"max_position_embeddings\": 8192, \"hidden_act\": \"gelu_pytorch_tanh\", \"tie_word_embeddings\": true}"}},
      {"gemma", "gemma_7b", true, true, {"gemma_7b", "google/gemma-7b", "gemma-7b", ""}},
      {"gemma2", "gemma2_2b", true, true, {"gemma2_2b", "google/gemma-2-2b", "gemma-2-2b", ""}},
      {"gemma2", "gemma2_9b", true, true,
       {"gemma2_9b", "google/gemma-2-9b", "",
        "{\"model_type\": \"gemma2\", \"hidden_size\": 3584, \"num_hidden_layers\": 42, \"num_attention_heads\": 16, "
        "\"num_key_value_heads\": 8, \"head_dim\": 256, \"intermediate_size\": 14336, \"vocab_size\": 256000, "
        "\"max_position_embeddings\": 8192, \"hidden_activation\": \"gelu_pytorch_tanh\", \"sliding_window\": 4096, "
        "\"attn_logit_softcapping\": 50.0, \"final_logit_softcapping\": 30.0, \"tie_word_embeddings\": true}"}},
      {"gemma2", "gemma2_27b", true, true,
       {"gemma2_27b", "google/gemma-2-27b", "",
        "{\"model_type\": \"gemma2\", \"hidden_size\": 4608, \"num_hidden_layers\": 46, \"num_attention_heads\": 32, "
        "\"num_key_value_heads\": 16, \"head_dim\": 128, \"intermediate_size\": 36864, \"vocab_size\": 256000, "
        "\"max_position_embeddings\": 8192, \"hidden_activation\": \"gelu_pytorch_tanh\", \"sliding_window\": 4096, "
        "\"attn_logit_softcapping\": 50.0, \"final_logit_softcapping\": 30.0, \"tie_word_embeddings\": true}"}},
      {"llama2", "llama2_7b", true, true, {"llama2_7b", "meta-llama/Llama-2-7b-hf", "llama-2-7b", ""}},
      {"llama2", "llama2_13b", true, true, {"llama2_13b", "meta-llama/Llama-2-13b-hf", "llama-2-13b", ""}},
      {"llama2", "llama2_70b", true, true, {"llama2_70b", "meta-llama/Llama-2-70b-hf", "llama-2-70b", ""}},
      // Llama-2-7B body with a 1-logit classifier head (llama2_reward_7b, num_classes=1).
      {"llama2", "llama2_reward_7b", true, true,
       {"llama2_reward_7b", "", "",
        "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForSequenceClassification\"], \"num_labels\": 1, "
        "\"hidden_size\": 4096, \"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, "
        "\"intermediate_size\": 11008, \"vocab_size\": 32000, \"max_position_embeddings\": 4096, \"hidden_act\": \"silu\", "
        "\"tie_word_embeddings\": false}"}},
      {"llama3", "llama3_8b", true, true, {"llama3_8b", "meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b", ""}},
      {"llama3", "llama3_70b", true, true, {"llama3_70b", "meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b", ""}},
      {"llama3_1", "llama3_1_8b", true, true, {"llama3_1_8b", "meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", ""}},
      {"llama3_1", "llama3_1_70b", true, true, {"llama3_1_70b", "meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b", ""}},
      {"llama3_1", "llama3_1_405b", true, true,
       {"llama3_1_405b", "meta-llama/Llama-3.1-405B-Instruct", "llama-3.1-405b", ""}},
      {"llama3_2", "llama3_2_1b", true, true, {"llama3_2_1b", "meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b", ""}},
      {"llama3_2", "llama3_2_3b", true, true, {"llama3_2_3b", "meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b", ""}},
      // llama3_3_70b = llama3_1_70b (torchtune/models/llama3_3/_model_builders.py @ v0.6.1).
      {"llama3_3", "llama3_3_70b", true, true, {"llama3_3_70b", "meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b", ""}},
      {"mistral", "mistral_7b", true, true, {"mistral_7b", "mistralai/Mistral-7B-v0.1", "mistral-7b", ""}},
      {"mistral", "mistral_reward_7b", true, true,
       {"mistral_reward_7b", "", "",
        "{\"model_type\": \"mistral\", \"architectures\": [\"MistralForSequenceClassification\"], \"num_labels\": 1, "
        "\"hidden_size\": 4096, \"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, "
        "\"intermediate_size\": 14336, \"vocab_size\": 32000, \"max_position_embeddings\": 32768, \"hidden_act\": \"silu\", "
        "\"tie_word_embeddings\": false}"}},
      {"phi3", "phi3_mini", true, true, {"phi3_mini", "microsoft/Phi-3-mini-4k-instruct", "phi-3-mini", ""}},
      {"phi4", "phi4_14b", true, true, {"phi4_14b", "microsoft/phi-4", "phi-4", ""}},
      // Qwen2 and Qwen2.5 share these architectures (same widths, depths and vocabularies).
      {"qwen2", "qwen2_0_5b", true, false, {"qwen2_0_5b", "Qwen/Qwen2-0.5B-Instruct", "qwen2.5-0.5b", ""}},
      {"qwen2", "qwen2_1_5b", true, false, {"qwen2_1_5b", "Qwen/Qwen2-1.5B-Instruct", "qwen2.5-1.5b", ""}},
      {"qwen2", "qwen2_7b", true, false, {"qwen2_7b", "Qwen/Qwen2-7B-Instruct", "qwen2.5-7b", ""}},
      {"qwen2_5", "qwen2_5_0_5b", true, false, {"qwen2_5_0_5b", "Qwen/Qwen2.5-0.5B-Instruct", "qwen2.5-0.5b", ""}},
      {"qwen2_5", "qwen2_5_1_5b_base", true, false, {"qwen2_5_1_5b_base", "Qwen/Qwen2.5-1.5B", "qwen2.5-1.5b", ""}},
      {"qwen2_5", "qwen2_5_1_5b_instruct", true, false,
       {"qwen2_5_1_5b_instruct", "Qwen/Qwen2.5-1.5B-Instruct", "qwen2.5-1.5b", ""}},
      {"qwen2_5", "qwen2_5_3b", true, false,
       {"qwen2_5_3b", "Qwen/Qwen2.5-3B-Instruct", "", QWEN2(2048, 36, 16, 2, 11008, 151936, true)}},
      {"qwen2_5", "qwen2_5_7b_base", true, false, {"qwen2_5_7b_base", "Qwen/Qwen2.5-7B", "qwen2.5-7b", ""}},
      {"qwen2_5", "qwen2_5_7b_instruct", true, false,
       {"qwen2_5_7b_instruct", "Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b", ""}},
      {"qwen2_5", "qwen2_5_14b_base", true, false,
       {"qwen2_5_14b_base", "Qwen/Qwen2.5-14B", "", QWEN2(5120, 48, 40, 8, 13824, 152064, false)}},
      {"qwen2_5", "qwen2_5_14b_instruct", true, false,
       {"qwen2_5_14b_instruct", "Qwen/Qwen2.5-14B-Instruct", "", QWEN2(5120, 48, 40, 8, 13824, 152064, false)}},
      {"qwen2_5", "qwen2_5_32b_base", true, false,
       {"qwen2_5_32b_base", "Qwen/Qwen2.5-32B", "", QWEN2(5120, 64, 40, 8, 27648, 152064, false)}},
      {"qwen2_5", "qwen2_5_32b_instruct", true, false,
       {"qwen2_5_32b_instruct", "Qwen/Qwen2.5-32B-Instruct", "", QWEN2(5120, 64, 40, 8, 27648, 152064, false)}},
      {"qwen2_5", "qwen2_5_72b_base", true, false,
       {"qwen2_5_72b_base", "Qwen/Qwen2.5-72B", "", QWEN2(8192, 80, 64, 8, 29568, 152064, false)}},
      {"qwen2_5", "qwen2_5_72b_instruct", true, false,
       {"qwen2_5_72b_instruct", "Qwen/Qwen2.5-72B-Instruct", "", QWEN2(8192, 80, 64, 8, 29568, 152064, false)}},
      {"qwen3", "qwen3_0_6b_base", true, false, {"qwen3_0_6b_base", "Qwen/Qwen3-0.6B-Base", "qwen3-0.6b", ""}},
      {"qwen3", "qwen3_0_6b_instruct", true, false, {"qwen3_0_6b_instruct", "Qwen/Qwen3-0.6B", "qwen3-0.6b", ""}},
      {"qwen3", "qwen3_1_7b_base", true, false, {"qwen3_1_7b_base", "Qwen/Qwen3-1.7B-Base", "qwen3-1.7b", ""}},
      {"qwen3", "qwen3_1_7b_instruct", true, false, {"qwen3_1_7b_instruct", "Qwen/Qwen3-1.7B", "qwen3-1.7b", ""}},
      {"qwen3", "qwen3_4b_base", true, false, {"qwen3_4b_base", "Qwen/Qwen3-4B-Base", "qwen3-4b", ""}},
      {"qwen3", "qwen3_4b_instruct", true, false, {"qwen3_4b_instruct", "Qwen/Qwen3-4B", "qwen3-4b", ""}},
      {"qwen3", "qwen3_8b_base", true, false, {"qwen3_8b_base", "Qwen/Qwen3-8B-Base", "qwen3-8b", ""}},
      {"qwen3", "qwen3_8b_instruct", true, false, {"qwen3_8b_instruct", "Qwen/Qwen3-8B", "qwen3-8b", ""}},
      {"qwen3", "qwen3_14b_base", true, false, {"qwen3_14b_base", "Qwen/Qwen3-14B-Base", "qwen3-14b", ""}},
      {"qwen3", "qwen3_14b_instruct", true, false, {"qwen3_14b_instruct", "Qwen/Qwen3-14B", "qwen3-14b", ""}},
      {"qwen3", "qwen3_32b", true, false, {"qwen3_32b", "Qwen/Qwen3-32B", "qwen3-32b", ""}},
      {"smol", "smollm2_135m", false, false, {"smollm2_135m", "HuggingFaceTB/SmolLM2-135M", "smollm2-135m", ""}},
      {"smol", "smollm2_360m", false, false, {"smollm2_360m", "HuggingFaceTB/SmolLM2-360M", "smollm2-360m", ""}},
      {"smol", "smollm2_1_7b", false, false, {"smollm2_1_7b", "HuggingFaceTB/SmolLM2-1.7B", "smollm2-1.7b", ""}},
  };
  return b;
}
#undef LLAMA
#undef QWEN2

enum class Variant { full, lora, qlora };

struct BuilderHit {
  const Builder* builder;
  Variant variant;
};

// Every `_component_` spelling the table accepts, for "did you mean".
std::vector<std::string> component_names() {
  std::vector<std::string> out;
  for (const Builder& b : builders()) {
    const std::string base = std::string(kPrefix) + b.module + ".";
    out.push_back(base + b.fn);
    if (b.lora) out.push_back(base + "lora_" + b.fn);
    if (b.qlora) out.push_back(base + "qlora_" + b.fn);
  }
  return out;
}

BuilderHit find_builder(const Node& n) {
  const std::string c = as_text(n);
  for (const Builder& b : builders()) {
    const std::string base = std::string(kPrefix) + b.module + ".";
    if (c == base + b.fn) return {&b, Variant::full};
    if (b.lora && c == base + "lora_" + b.fn) return {&b, Variant::lora};
    if (b.qlora && c == base + "qlora_" + b.fn) return {&b, Variant::qlora};
  }
  // A builder the name begins (lora_qwen2_5_7b -> lora_qwen2_5_7b_base, _instruct), else the nearest.
  std::vector<std::string> near;
  for (const std::string& name : component_names())
    if (name.rfind(c + "_", 0) == 0 && near.size() < 3) near.push_back(name);
  if (near.empty()) near = nearest(c, component_names());
  if (c.rfind(kPrefix, 0) != 0)
    throw InputError(n.where, fmt::format("model._component_ '{}' is not a torchtune model builder", c),
                     fmt::format("torchtune builds models with torchtune.models.<family>.<builder>, e.g. "
                                 "torchtune.models.llama3_2.lora_llama3_2_1b ({})", kLister));
  throw InputError(n.where, fmt::format("unknown torchtune model builder '{}'", c),
                   near.empty() ? std::string(kLister)
                                : fmt::format("did you mean '{}'? ({})", fmt::join(near, "' or '"), kLister));
}

// What the recipe keys say, resolved once the whole file is read.
struct Tt {
  explicit Tt(ReadState& state) : st(state) {}
  ReadState& st;
  const Builder* builder = nullptr;
  Variant variant = Variant::full;
  const Node* component = nullptr;
  bool distributed = false;      // a key only the distributed recipes read
  const Node* distributed_key = nullptr;
  const Node* checkpointing = nullptr;  // enable_activation_checkpointing
  const Node* ac_mode = nullptr;
  const Node* ac_option = nullptr;
  const Node* activation_offload = nullptr;
  const Node* max_seq_len = nullptr;  // tokenizer.max_seq_len (null: absent)
  const Node* tokenizer = nullptr;
  const Node* packed = nullptr;       // dataset.packed: True
  bool lora_keys = false;
  const Node* first_lora_key = nullptr;
  bool attn_modules = false;
  std::vector<std::string> attn_targets, mlp_targets;
  const Node* fsdp_cpu_offload = nullptr;

  TrainingSetup& s() { return st.s(); }
};
using Table = KeyTable<Tt>;

void lora_key(Tt& t, const Node& n) {
  t.lora_keys = true;
  if (!t.first_lora_key) t.first_lora_key = &n;
}

// Builder arguments of the lora_* builders (lora_llama3_2_1b(...) @ v0.6.1 and the same in every family).
const Table& builder_keys() {
  static const Table k = {
      {{"_component_"}, [](const Node&, Tt&) {}},
      {{"lora_attn_modules"}, [](const Node& n, Tt& t) {
         lora_key(t, n);
         t.attn_modules = true;
         t.attn_targets.clear();
         for (const Node& item : n.kind == Node::Kind::list ? n.items : std::vector<Node>{n}) {
           const std::string m = as_text(item);
           const char* to = m == "q_proj" ? "q" : m == "k_proj" ? "k" : m == "v_proj" ? "v" : m == "output_proj" ? "o" : nullptr;
           if (!to)
             throw InputError(item.where, fmt::format("unknown LoRA attention module '{}'", m),
                              "expected some of: q_proj, k_proj, v_proj, output_proj (LORA_ATTN_MODULES, "
                              "torchtune/modules/peft/_utils.py @ v0.6.1)");
           if (std::find(t.attn_targets.begin(), t.attn_targets.end(), to) == t.attn_targets.end()) t.attn_targets.push_back(to);
         }
         t.st.note(memplan::path(List::lora_targets), n);
       }},
      {{"apply_lora_to_mlp"}, [](const Node& n, Tt& t) {
         lora_key(t, n);
         t.mlp_targets.clear();
         if (as_bool(n)) t.mlp_targets = {"gate", "up", "down"};  // w1, w3, w2
         t.st.note(memplan::path(List::lora_targets), n);
       }},
      {{"apply_lora_to_output"}, [](const Node& n, Tt& t) {
         lora_key(t, n);
         if (!as_bool(n)) return;
         if (t.s().model.tie_word_embeddings)
           throw InputError(n.where, fmt::format("{} ties its output projection to the embeddings: torchtune cannot put LoRA on it",
                                                 t.builder->fn),
                            "drop apply_lora_to_output (the gemma, gemma2 and small qwen2 builders do not take it)");
         t.st.unmodelled(n, "LoRA on the output projection is not a memplan LoRA target: the estimate keeps lm_head frozen "
                            "without its adapter (r x (hidden + vocab) parameters and their states)");
       }},
      {{"lora_rank"}, [](const Node& n, Tt& t) {
         lora_key(t, n);
         t.st.set(memplan::path(Count::lora_rank), t.s().finetune.lora_rank, as_count(n), n);
       }},
      {{"lora_alpha"}, [](const Node& n, Tt& t) {
         lora_key(t, n);
         t.st.set(memplan::path(Number::lora_alpha), t.s().finetune.lora_alpha, as_number(n), n);
       }},
      {{"lora_dropout"}, [](const Node& n, Tt& t) {
         lora_key(t, n);
         t.st.set(memplan::path(Number::lora_dropout), t.s().finetune.lora_dropout, as_number(n), n);
       }},
      {{"use_dora"}, [](const Node& n, Tt& t) {
         lora_key(t, n);
         if (as_bool(n))
           t.st.unmodelled(n, "DoRA (DoRALinear: a magnitude vector and the weight norm per adapted layer) is estimated as "
                              "plain LoRA");
       }},
      {{"quantize_base"}, [](const Node& n, Tt& t) {
         lora_key(t, n);
         if (as_bool(n)) {
           t.variant = Variant::qlora;
           t.st.note(memplan::path(Choice::finetune), n);
         } else if (t.variant == Variant::qlora) {
           t.variant = Variant::lora;
           t.st.note(memplan::path(Choice::finetune), n);
         }
       }},
      {{"tie_word_embeddings"}, [](const Node& n, Tt& t) {
         t.st.set(memplan::path(&ModelSpec::tie_word_embeddings), t.s().model.tie_word_embeddings, as_bool(n), n);
       }},
  };
  return k;
}

void read_model(const Node& n, Tt& t) {
  if (n.kind != Node::Kind::map) type_error(n, "a mapping with a _component_ builder");
  const Node* c = n.find("_component_");
  if (!c)
    throw InputError(n.where, "model: has no _component_",
                     fmt::format("name the builder, e.g. _component_: torchtune.models.llama3_2.lora_llama3_2_1b ({})", kLister));
  const BuilderHit b = find_builder(*c);
  t.builder = b.builder;
  t.variant = b.variant;
  t.component = c;
  use_tool_model(t.st, tool_model_spec(b.builder->model), *c);
  if (b.variant != Variant::full) {
    // The lora_* builders' defaults (e.g. lora_llama3_2_1b(lora_attn_modules, apply_lora_to_mlp=False,
    // apply_lora_to_output=False, lora_rank=8, lora_alpha=16, lora_dropout=0.0, ...) @ v0.6.1).
    Finetune& f = t.s().finetune;
    f.lora_rank = 8;
    f.lora_alpha = 16;
    f.lora_dropout = 0.0;
    const std::string src = fmt::format("default of torchtune's lora_{}() (torchtune/models/{}/_model_builders.py @ v0.6.1)",
                                        b.builder->fn, b.builder->module);
    for (const char* f : {memplan::path(Count::lora_rank), memplan::path(Number::lora_alpha), memplan::path(Number::lora_dropout)}) t.st.by_default(f, src);
    t.st.note(memplan::path(Choice::finetune), *c);
  }
  read_section(n, {&builder_keys()}, t, &t.st.out.warnings);
  if (t.lora_keys && b.variant == Variant::full)
    throw InputError(t.first_lora_key->where,
                     fmt::format("{} takes no LoRA arguments: torchtune would raise a TypeError", as_text(*c)),
                     fmt::format("for LoRA name the lora_ builder: {}{}.lora_{}", kPrefix, b.builder->module, b.builder->fn));
  if (b.variant != Variant::full && !t.attn_modules)
    throw InputError(n.where, fmt::format("model.lora_attn_modules is missing: {} requires it", as_text(*c)),
                     "list the attention projections to adapt, e.g. lora_attn_modules: ['q_proj', 'v_proj']");
}

void set_optimizer(const Node& n, Tt& t) {
  if (n.kind != Node::Kind::map) type_error(n, "a mapping with a _component_ optimizer class");
  const Node* c = n.find("_component_");
  if (!c) throw InputError(n.where, "optimizer: has no _component_", "e.g. _component_: torch.optim.AdamW");
  const std::string cls = as_text(*c);
  const std::string name = cls.substr(cls.rfind('.') + 1);
  OptimizerKind& o = t.s().optimizer;
  if (name == "AdamW") o = OptimizerKind::adamw;  // torch.optim.AdamW, bitsandbytes.optim.AdamW (32-bit states)
  else if (name == "Adam") o = OptimizerKind::adam;
  else if (name == "SGD") {
    const Node* m = n.find("momentum");
    o = m && as_number(*m) > 0 ? OptimizerKind::sgd_momentum : OptimizerKind::sgd;
  } else if (name == "PagedAdamW" || name == "PagedAdamW32bit") o = OptimizerKind::paged_adamw;
  else if (name == "PagedAdamW8bit") o = OptimizerKind::paged_adamw_8bit;
  else if (name == "AdamW8bit" || name == "Adam8bit") o = OptimizerKind::adamw_8bit;
  else if (name == "AdamWFp8") o = OptimizerKind::adamw_8bit;  // torchao: 1-byte fp8 states, as 8-bit
  else if (name == "AdamW4bit") {
    o = OptimizerKind::adamw_8bit;
    t.st.unmodelled(*c, "torchao's 4-bit AdamW states are estimated as 8-bit states (an over-estimate of 1 byte per parameter)");
  } else if (name == "CPUOffloadOptimizer") {
    o = OptimizerKind::adamw;
    t.st.unmodelled(*c, "torchao's CPUOffloadOptimizer keeps the optimizer states and step on the CPU; the estimate keeps "
                        "AdamW states on the GPU");
  } else if (name == "Lion") o = OptimizerKind::lion;
  else {
    o = OptimizerKind::adamw;
    t.st.unmodelled(*c, "an optimizer memplan does not know: estimated as AdamW (two states per parameter)");
  }
  t.st.note(memplan::path(Choice::optimizer), *c);
  Runtime& r = t.s().runtime;
  if (const Node* fused = n.find("fused"); fused && as_bool(*fused)) {
    t.st.set(memplan::path(Choice::optimizer_impl), r.optimizer_impl, OptimizerImpl::fused, *fused);
  } else if (const Node* fe = n.find("foreach")) {
    t.st.set(memplan::path(Choice::optimizer_impl), r.optimizer_impl, as_bool(*fe) ? OptimizerImpl::foreach : OptimizerImpl::for_loop, *fe);
  }
}

void set_loss(const Node& n, Tt& t) {
  if (n.kind != Node::Kind::map) type_error(n, "a mapping with a _component_ loss class");
  const Node* c = n.find("_component_");
  if (!c) throw InputError(n.where, "loss: has no _component_", "e.g. _component_: torchtune.modules.loss.CEWithChunkedOutputLoss");
  const std::string cls = as_text(*c);
  const std::string name = cls.substr(cls.rfind('.') + 1);
  Runtime& r = t.s().runtime;
  int64_t chunks = 8;  // num_output_chunks=8 (CEWithChunkedOutputLoss / LinearCrossEntropyLoss __init__)
  if (const Node* k = n.find("num_output_chunks")) {
    chunks = as_count(*k);
    if (chunks < 1) type_error(*k, "a positive integer");
  }
  if (name == "CEWithChunkedOutputLoss") {
    // The model emits its logits in chunks, each upcast to fp32 inside the loss alone
    // (torchtune/modules/loss/ce_chunked_output_loss.py @ v0.6.1).
    r.loss = LossImpl::chunked;
    r.loss_chunks = chunks;
    r.loss_chunk_tokens = 0;
    r.loss_upcast = true;
  } else if (name == "LinearCrossEntropyLoss") {
    // The output projection runs inside the loss per chunk: no full logits (main @ 9c06c8bd).
    r.loss = LossImpl::fused_linear;
  } else if (name == "CrossEntropyLoss") {
    r.loss = LossImpl::standard;
  } else {
    t.st.unmodelled(*c, "a loss memplan does not know (knowledge-distillation losses hold a teacher's logits too): estimated "
                        "as torchtune's chunked cross-entropy");
    r.loss = LossImpl::chunked;
    r.loss_chunks = chunks;
  }
  t.st.note(memplan::path(Choice::loss), *c);
  t.st.note(path(Switch::loss_upcast), *c);
}

void distributed_key(const Node& n, Tt& t) {
  t.distributed = true;
  if (!t.distributed_key) t.distributed_key = &n;
}

const Table& root_keys() {
  static const Table k = {
      {{"model"}, [](const Node&, Tt&) {}},  // read first
      {{"tokenizer"}, [](const Node& n, Tt& t) {
         if (n.kind != Node::Kind::map) not_a_map(n);
         t.tokenizer = &n;
         t.max_seq_len = n.find("max_seq_len");
         if (t.max_seq_len) t.st.set(memplan::path(Count::seq_len), t.s().batch.seq_len, as_count(*t.max_seq_len), *t.max_seq_len);
       }},
      {{"dataset"}, [](const Node& n, Tt& t) {
         // One dataset, or a list of them (ConcatDataset): any packed one packs the batch.
         // (Not a range over `list ? n.items : std::vector<Node>{n}`: that copies the items into a
         // temporary, and t.packed pointed into it after the loop: ASan, heap-use-after-free.)
         auto look = [&t](const Node& d) {
           if (d.kind != Node::Kind::map) return;
           if (const Node* p = d.find("packed"); p && as_bool(*p)) t.packed = p;
         };
         if (n.kind == Node::Kind::list) {
           for (const Node& d : n.items) look(d);
         } else {
           look(n);
         }
       }},
      {{"batch_size"}, [](const Node& n, Tt& t) { t.st.set(memplan::path(Count::micro_batch), t.s().batch.micro_batch, as_count(n), n); }},
      {{"gradient_accumulation_steps"},
       [](const Node& n, Tt& t) { t.st.set(memplan::path(Count::grad_accum), t.s().batch.grad_accum, as_count(n), n); }},
      {{"dtype"}, [](const Node& n, Tt& t) {
         // training.get_dtype (torchtune/training/precision.py @ v0.6.1): PRECISION_STR_TO_DTYPE.
         const std::string d = lower(as_text(n));
         if (d == "bf16") t.st.set(memplan::path(Choice::precision), t.s().precision, Precision::bf16, n);
         else if (d == "fp32") t.st.set(memplan::path(Choice::precision), t.s().precision, Precision::fp32, n);
         else if (d == "fp16")
           throw InputError(n.where, "dtype: fp16 is refused by torchtune's recipes (\"full fp16 training is not supported "
                                     "with this recipe\", training.validate_expected_param_dtype @ v0.6.1)",
                            "use dtype: bf16, or fp32");
         else
           throw InputError(n.where, fmt::format("unknown dtype '{}'", as_text(n)), "expected one of: bf16, fp32");
       }},
      {{"optimizer"}, set_optimizer},
      {{"optimizer_in_bwd"}, [](const Node& n, Tt& t) {
         // Read by the full fine-tuning recipes only (the LoRA recipes have no such key).
         if (t.variant == Variant::full)
           t.st.set(Switch::optimizer_in_backward, as_bool(n), n);
       }},
      {{"device"}, [](const Node& n, Tt& t) {
         const std::string d = lower(as_text(n));
         if (d != "cuda")
           t.st.unmodelled(n, fmt::format("training on {} is not modelled: the estimate is for the GPU given with --gpu (--device "
                                          "cpu estimates host memory)",
                                          d));
       }},
      {{"loss"}, set_loss},
      {{"enable_activation_checkpointing"}, [](const Node& n, Tt& t) { t.checkpointing = &n; }},
      {{"enable_activation_offloading"}, [](const Node& n, Tt& t) {
         if (!as_bool(n)) return;
         t.activation_offload = &n;
         t.st.set(Switch::activation_offload, true, n);
       }},
      {{"ac_mode"}, [](const Node& n, Tt& t) { t.ac_mode = &n; }},
      {{"ac_option"}, [](const Node& n, Tt& t) { t.ac_option = &n; }},
      {{"compile"}, [](const Node& n, Tt& t) { t.st.set(Switch::compile, as_bool(n), n); }},
      {{"fsdp_cpu_offload"}, [](const Node& n, Tt& t) {
         distributed_key(n, t);
         if (as_bool(n)) t.fsdp_cpu_offload = &n;
       }},
      {{"fsdp_reshard_after_forward"}, [](const Node& n, Tt& t) {
         distributed_key(n, t);
         // False keeps each layer's gathered parameters from forward to backward (SHARD_GRAD_OP),
         // recipes/full_finetune_distributed.py @ v0.6.1 L53-55.
         if (!as_bool(n)) t.st.set(memplan::path(Choice::fsdp), t.s().parallel.fsdp, FsdpMode::shard_grad_op, n);
       }},
      // Shards the embeddings and output as FSDP units of their own: all-gather sizes only.
      {{"custom_sharded_layers"}, [](const Node& n, Tt& t) { distributed_key(n, t); }},
      {{"tensor_parallel_dim"}, [](const Node& n, Tt& t) {
         distributed_key(n, t);
         t.st.set(memplan::path(Count::tensor_parallel), t.s().parallel.tensor_parallel, as_count(n), n);
       }},
      {{"tensor_parallel_plan"}, [](const Node& n, Tt& t) { distributed_key(n, t); }},
      {{"data_parallel_shard_dim"}, [](const Node& n, Tt& t) { distributed_key(n, t); }},
      {{"data_parallel_replicate_dim"}, [](const Node& n, Tt& t) {
         distributed_key(n, t);
         if (as_int(n) > 1)
           t.st.unmodelled(n, "HSDP (replicated FSDP groups) is not modelled: the estimate shards over every data-parallel "
                              "rank (an under-estimate of the sharded states)");
       }},
      {{"context_parallel_dim"}, [](const Node& n, Tt& t) {
         distributed_key(n, t);
         if (as_int(n) > 1)
           t.st.unmodelled(n, "context parallelism is not modelled: the estimate holds the activations of the whole sequence "
                              "on each rank (an over-estimate)");
       }},
      // Known keys that do not change the training step's memory.
      {{"clip_grad_norm", "low_cpu_ram", "epochs", "max_steps_per_epoch", "seed", "shuffle", "output_dir",
        "checkpointer", "metric_logger", "profiler", "log_every_n_steps", "log_peak_memory_stats", "resume_from_checkpoint",
        "lr_scheduler", "save_adapter_weights_only", "activation_offloading_use_streams", "batch_size_val",
        "run_val_every_n_steps", "dataset_val", "collate_fn", "log_level", "cudnn_deterministic_mode"},
       [](const Node&, Tt&) {}},
  };
  return k;
}

void resolve_checkpointing(Tt& t) {
  Checkpointing& c = t.s().checkpointing;
  const bool full = t.checkpointing && as_bool(*t.checkpointing);
  if (full) {
    c.mode = CheckpointMode::full;
    t.st.note(memplan::path(Choice::checkpointing), *t.checkpointing);
  } else if (t.ac_mode) {
    // ac_mode/ac_option apply only when enable_activation_checkpointing is off
    // (recipes/full_finetune_distributed.py @ v0.6.1 L566-575).
    const std::string mode = lower(as_text(*t.ac_mode));
    if (mode == "full") {
      c.mode = CheckpointMode::full;
    } else if (mode == "selective") {
      if (!t.ac_option)
        throw InputError(t.ac_mode->where, "ac_mode: selective needs ac_option (checkpoint one layer in every ac_option)",
                         "e.g. ac_option: 2");
      const int64_t k = as_int(*t.ac_option);
      if (k < 0) type_error(*t.ac_option, "a positive integer");
      c = k == 0 ? one_layer_in(1, 0) : one_layer_in(k, t.s().model.num_layers);
    } else {
      throw InputError(t.ac_mode->where, fmt::format("unknown ac_mode '{}'", as_text(*t.ac_mode)), "expected one of: selective, full");
    }
    t.st.note(memplan::path(Choice::checkpointing), *t.ac_mode);
  } else {
    c.mode = CheckpointMode::none;
    if (t.checkpointing) t.st.note(memplan::path(Choice::checkpointing), *t.checkpointing);
    else t.st.by_default(memplan::path(Choice::checkpointing), "default of every torchtune recipe: cfg.get(\"enable_activation_checkpointing\", False) in every recipe @ v0.6.1");
  }
  if (t.activation_offload && !full)
    throw InputError(t.activation_offload->where,
                     "enable_activation_offloading needs enable_activation_checkpointing: true (torchtune raises "
                     "\"enable_activation_offloading should only be True when enable_activation_checkpointing is True\")",
                     "set enable_activation_checkpointing: true, or drop the offloading");
}

void resolve_sequence(Tt& t) {
  if (t.packed && !t.max_seq_len)
    throw InputError(t.packed->where, "dataset.packed needs tokenizer.max_seq_len (torchtune raises \"PackedDataset requires a "
                                      "max_seq_len to be set on the tokenizer\")",
                     "set tokenizer.max_seq_len: the packed length");
  if (t.max_seq_len) return;
  const Where w = t.tokenizer ? t.tokenizer->where : Where::at_file(t.st.path);
  t.st.defer(memplan::path(Count::seq_len), w,
             fmt::format("tokenizer.max_seq_len is null: torchtune pads each batch to its longest sample, so the sequence "
                         "length depends on the data; estimating {} tokens",
                         t.s().batch.seq_len),
             "pass --seq-len N (the longest sample you train on), or set tokenizer.max_seq_len");
}

// The GPU count is `tune run --nproc_per_node N` (and --nnodes), never a key. A config only the
// distributed recipes read, or named *distributed* / *multinode*, runs on several.
void resolve_gpus(Tt& t) {
  const std::string name = lower(t.st.file.filename().string());
  const bool named_distributed = name.find("distributed") != std::string::npos || name.find("multinode") != std::string::npos;
  const bool named_single = name.find("single_device") != std::string::npos;
  if (t.distributed || named_distributed) {
    const Where w = t.distributed_key ? t.distributed_key->where : Where::at_file(t.st.path);
    // The fewest GPUs the recipe runs on: one tensor-parallel group (tensor_parallel_dim), no
    // data parallelism (the distributed recipes build a (dp, tp) mesh of world / tp x tp).
    const int64_t tp = t.s().parallel.tensor_parallel;
    t.s().parallel.num_gpus = tp;
    t.st.defer(memplan::path(Count::num_gpus), w,
               fmt::format("the GPU count is not in a torchtune config (tune run --nproc_per_node N [--nnodes M] sets it) and this "
                           "one is for a distributed recipe; estimating {}",
                           tp > 1 ? fmt::format("{} GPUs (one tensor_parallel_dim group, no data parallelism)", tp) : std::string("1 GPU")),
               tp > 1 ? fmt::format("pass --gpus N (nproc_per_node x nnodes, a multiple of {}); several GPUs are sharded with FSDP2 "
                                    "as torchtune does", tp)
                      : "pass --gpus N (nproc_per_node x nnodes); several GPUs are sharded with FSDP2 as torchtune does");
  } else if (named_single) {
    t.st.by_default(memplan::path(Count::num_gpus), "a torchtune single-device recipe config (the file name): 1 GPU");
  }
  // FSDP2 CPUOffloadPolicy: parameters, gradients and the optimizer step on the CPU
  // (training.shard_model, torchtune/training/_distributed.py @ v0.6.1); it exists only with FSDP.
  if (t.fsdp_cpu_offload) {
    t.st.set(memplan::path(Choice::offload), t.s().parallel.offload, Offload::optimizer_and_params, *t.fsdp_cpu_offload);
    if (t.s().parallel.fsdp == FsdpMode::none) t.st.set(memplan::path(Choice::fsdp), t.s().parallel.fsdp, FsdpMode::full_shard, *t.fsdp_cpu_offload);
  }
}

// The tokenizer builder and FullModelHFCheckpointer model_type of each builder module
// (torchtune/models/<module>/__init__.py and recipes/configs/<module>/* @ v0.6.1): the first row
// whose module is the builder's, or its prefix where `prefix` is set (llama3, llama3_1, llama3_3).
struct ModuleFiles {
  const char* module;
  bool prefix;
  const char* tokenizer;
  const char* checkpointer;
};
constexpr ModuleFiles kModuleFiles[] = {
    {"llama3_2", false, "torchtune.models.llama3.llama3_tokenizer", "LLAMA3_2"},
    {"llama3", true, "torchtune.models.llama3.llama3_tokenizer", "LLAMA3"},
    {"llama2", false, "torchtune.models.llama2.llama2_tokenizer", "LLAMA2"},
    {"code_llama2", false, "torchtune.models.llama2.llama2_tokenizer", "LLAMA2"},
    {"mistral", false, "torchtune.models.mistral.mistral_tokenizer", "MISTRAL"},
    {"gemma", false, "torchtune.models.gemma.gemma_tokenizer", "GEMMA"},
    {"gemma2", false, "torchtune.models.gemma.gemma_tokenizer", "GEMMA2"},
    {"phi3", false, "torchtune.models.phi3.phi3_mini_tokenizer", "PHI3_MINI"},
    {"phi4", false, "torchtune.models.phi4.phi4_tokenizer", "PHI4"},
    {"qwen2", false, "torchtune.models.qwen2.qwen2_tokenizer", "QWEN2"},
    {"qwen2_5", false, "torchtune.models.qwen2_5.qwen2_5_tokenizer", "QWEN2"},
    {"qwen3", false, "torchtune.models.qwen3.qwen3_tokenizer", "QWEN3"},
};

std::pair<const char*, const char*> family_files(const std::string& module) {
  for (const ModuleFiles& f : kModuleFiles)
    if (f.prefix ? module.rfind(f.module, 0) == 0 : module == f.module) return {f.tokenizer, f.checkpointer};
  return {"", ""};
}

}  // namespace

std::optional<ToolModelRef> torchtune_model_for(const ModelSpec& m) {
  // The builder whose model is `m`: by the name the reader gave it (a preset or the builder's
  // own), preferring the one whose checkpoint is m's HF repository.
  const Builder* hit = nullptr;
  for (const Builder& b : builders()) {
    const bool named = m.name == (b.model.preset[0] != '\0' ? b.model.preset : b.model.name);
    if (!named || b.variant_only()) continue;
    if (!hit || (m.hf_repo == b.model.hf_repo && m.hf_repo != hit->model.hf_repo)) hit = &b;
  }
  if (!hit) return std::nullopt;
  ToolModelRef r;
  r.name = std::string(kPrefix) + hit->module + "." + hit->fn;
  std::tie(r.tokenizer, r.checkpointer_type) = family_files(hit->module);
  r.spec = tool_model_spec(hit->model);
  return r;
}

void read_torchtune(const Node& root, ReadState& st) {
  Tt t(st);
  TrainingSetup& s = st.s();
  s.runtime.framework = Framework::torchtune;
  st.by_default(memplan::path(Choice::framework), "a torchtune recipe config (its torchtune.* _component_ keys)");
  if (const Node* m = root.find("model")) read_model(*m, t);
  read_section(root, {&root_keys()}, t, &st.out.warnings);
  if (!t.builder) {
    st.out.no_model = Warning{Where::at_file(st.path), "this torchtune config has no model: _component_",
                              "name the builder (model: {_component_: torchtune.models.llama3_2.llama3_2_1b}) or pass --model"};
  }
  Finetune& f = s.finetune;
  if (t.builder && t.variant != Variant::full) {
    f.mode = t.variant == Variant::qlora ? FinetuneMode::qlora : FinetuneMode::lora;
    // QLoRA: the base linears become torchao NF4 tensors (block 64, double-quantized scales); the
    // output projection stays in dtype ("TODO: quantize_base is not applied to final output_proj",
    // torchtune/models/llama3/_component_builders.py @ v0.6.1), as memplan keeps lm_head 16-bit.
    f.base_quant = f.mode == FinetuneMode::qlora ? BaseQuant::nf4 : BaseQuant::none;
    f.double_quant = true;
    f.lora_targets = t.attn_targets;
    f.lora_targets.insert(f.lora_targets.end(), t.mlp_targets.begin(), t.mlp_targets.end());
    if (f.lora_targets.empty())
      throw InputError(root.find("model")->find("lora_attn_modules")->where, "model.lora_attn_modules names no module",
                       "list at least one of q_proj, k_proj, v_proj, output_proj, or set apply_lora_to_mlp: true");
  }
  if (!st.out.origin.fields.count(memplan::path(Choice::precision))) {
    st.defer(memplan::path(Choice::precision), Where::at_file(st.path), "dtype is not set (torchtune's recipes require it); estimating fp32",
             "set dtype: bf16 (what torchtune's configs use) or fp32");
    s.precision = Precision::fp32;
  }
  if (!st.out.origin.fields.count(memplan::path(Count::micro_batch)))
    st.defer(memplan::path(Count::micro_batch), Where::at_file(st.path), "batch_size is not set (torchtune's recipes require it); estimating 1",
             "set batch_size, or pass --micro-batch");
  resolve_checkpointing(t);
  resolve_sequence(t);
  resolve_gpus(t);
}

}  // namespace memplan::profiles::detail
