// LitGPT configs: fine-tuning (`litgpt finetune_lora|finetune_full --config FILE`) and pre-training
// (`litgpt pretrain --config FILE`: model_name instead of checkpoint_dir, litgpt/pretrain.py @
// v0.5.13 setup(): TrainArgs(global_batch_size=512, micro_batch_size=4), devices "auto", FSDP
// HYBRID_SHARD over several devices without activation checkpointing). Fine-tuning is read as the
// scripts of Lightning-AI/litgpt v0.5.13 read them: the YAML's keys are the arguments of the
// script's setup() (litgpt/finetune/lora.py and full.py @ v0.5.13) and an absent key takes that
// setup()'s default. The script is not in the file: LoRA keys (lora_*) or quantize mean
// finetune_lora, otherwise finetune_full. The model is checkpoint_dir's last folder, a LitGPT
// config name (Config.from_name, litgpt/config.py @ v0.5.13). LitGPT never ties lm_head to the
// embeddings and pads the vocabulary (padded_vocab_size).
#include <fmt/format.h>

#include <algorithm>

#include "profiles/formats/tool_models.h"

namespace memplan::profiles::detail {
namespace {

constexpr const char* kLora = "litgpt/finetune/lora.py @ v0.5.13";

struct LitConfig {
  ToolModel model;       // name = Config.name, hf_repo = hf_config org/name
  int64_t padded_vocab;  // Config.padded_vocab_size
};

#define LIT_LLAMA(h, L, a, kv, f, V, pos, type) \
  "{\"model_type\": \"" type "\", \"hidden_size\": " #h ", \"num_hidden_layers\": " #L ", \"num_attention_heads\": " #a \
  ", \"num_key_value_heads\": " #kv ", \"intermediate_size\": " #f ", \"vocab_size\": " #V \
  ", \"max_position_embeddings\": " #pos ", \"hidden_act\": \"silu\", \"tie_word_embeddings\": false}"

// litgpt/config.py @ v0.5.13 (the configs list, evaluated into Config objects): the configs
// whose architecture memplan has as a preset, and a few more as HF configs of their dimensions.
const std::vector<LitConfig>& configs() {
  static const std::vector<LitConfig> c = {
      {{"Llama-2-7b-hf", "meta-llama/Llama-2-7b-hf", "llama-2-7b", ""}, 32000},
      {{"Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-chat-hf", "llama-2-7b", ""}, 32000},
      {{"Llama-2-13b-hf", "meta-llama/Llama-2-13b-hf", "llama-2-13b", ""}, 32000},
      {{"Llama-2-13b-chat-hf", "meta-llama/Llama-2-13b-chat-hf", "llama-2-13b", ""}, 32000},
      {{"Llama-2-70b-hf", "meta-llama/Llama-2-70b-hf", "llama-2-70b", ""}, 32000},
      {{"Llama-2-70b-chat-hf", "meta-llama/Llama-2-70b-chat-hf", "llama-2-70b", ""}, 32000},
      {{"Llama-3-8B", "meta-llama/Meta-Llama-3-8B", "llama-3-8b", ""}, 128256},
      {{"Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b", ""}, 128256},
      {{"Llama-3-70B", "meta-llama/Meta-Llama-3-70B", "llama-3-70b", ""}, 128256},
      {{"Llama-3-70B-Instruct", "meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b", ""}, 128256},
      {{"Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B", "llama-3.1-8b", ""}, 128256},
      {{"Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b", ""}, 128256},
      {{"Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B", "llama-3.1-70b", ""}, 128256},
      {{"Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b", ""}, 128256},
      {{"Llama-3.1-405B", "meta-llama/Meta-Llama-3.1-405B", "llama-3.1-405b", ""}, 128256},
      {{"Llama-3.1-405B-Instruct", "meta-llama/Meta-Llama-3.1-405B-Instruct", "llama-3.1-405b", ""}, 128256},
      {{"Llama-3.2-1B", "meta-llama/Llama-3.2-1B", "llama-3.2-1b", ""}, 128256},
      {{"Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b", ""}, 128256},
      {{"Llama-3.2-3B", "meta-llama/Llama-3.2-3B", "llama-3.2-3b", ""}, 128256},
      {{"Llama-3.2-3B-Instruct", "meta-llama/Llama-3.2-3B-Instruct", "llama-3.2-3b", ""}, 128256},
      {{"Llama-3.3-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b", ""}, 128256},
      {{"R1-Distill-Llama-8B", "deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "llama-3.1-8b", ""}, 128256},
      {{"R1-Distill-Llama-70B", "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "llama-3.1-70b", ""}, 128256},
      {{"CodeLlama-7b-hf", "codellama/CodeLlama-7b-hf", "", LIT_LLAMA(4096, 32, 32, 32, 11008, 32016, 16384, "llama")}, 32016},
      {{"CodeLlama-13b-hf", "codellama/CodeLlama-13b-hf", "", LIT_LLAMA(5120, 40, 40, 40, 13824, 32016, 16384, "llama")},
       32016},
      {{"tiny-llama-1.1b", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "tinyllama-1.1b", ""}, 32000},
      {{"tiny-llama-1.1b-chat", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b", ""}, 32000},
      {{"Mistral-7B-v0.1", "mistralai/Mistral-7B-v0.1", "mistral-7b", ""}, 32000},
      {{"Mistral-7B-Instruct-v0.1", "mistralai/Mistral-7B-Instruct-v0.1", "mistral-7b", ""}, 32000},
      // v0.2 and v0.3 attend over the whole 32k block (no sliding window).
      {{"Mistral-7B-Instruct-v0.2", "mistralai/Mistral-7B-Instruct-v0.2", "",
        LIT_LLAMA(4096, 32, 32, 8, 14336, 32000, 32768, "mistral")},
       32000},
      {{"Mistral-7B-v0.3", "mistralai/Mistral-7B-v0.3", "", LIT_LLAMA(4096, 32, 32, 8, 14336, 32768, 32768, "mistral")}, 32768},
      {{"Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-Instruct-v0.3", "",
        LIT_LLAMA(4096, 32, 32, 8, 14336, 32768, 32768, "mistral")},
       32768},
      {{"Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b", ""}, 32000},
      {{"Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b", ""}, 32000},
      {{"Gemma-2b", "google/gemma-2b", "",
        "{\"model_type\": \"gemma\", \"hidden_size\": 2048, \"num_hidden_layers\": 18, \"num_attention_heads\": 8, "
        "\"num_key_value_heads\": 1, \"head_dim\": 256, \"intermediate_size\": 16384, \"vocab_size\": 256000, "
        "\"max_position_embeddings\": 8192, \"hidden_act\": \"gelu_pytorch_tanh\", \"tie_word_embeddings\": false}"},
       256000},
      {{"Gemma-7b", "google/gemma-7b", "gemma-7b", ""}, 256000},
      {{"Gemma-7b-it", "google/gemma-7b-it", "gemma-7b", ""}, 256000},
      {{"Gemma-2-2b", "google/gemma-2-2b", "gemma-2-2b", ""}, 256000},
      {{"Gemma-2-2b-it", "google/gemma-2-2b-it", "gemma-2-2b", ""}, 256000},
      {{"Gemma-3-1b-it", "google/gemma-3-1b-it", "gemma-3-1b", ""}, 262144},
      {{"Gemma-3-4b-it", "google/gemma-3-4b-it", "gemma-3-4b", ""}, 262144},
      {{"Gemma-3-12b-it", "google/gemma-3-12b-it", "gemma-3-12b", ""}, 262144},
      {{"Gemma-3-27b-it", "google/gemma-3-27b-it", "gemma-3-27b", ""}, 262144},
      // phi-1.5 and phi-2: parallel attention and MLP off one LayerNorm, partial rotary, biases.
      {{"phi-1_5", "microsoft/phi-1_5", "",
        "{\"model_type\": \"phi\", \"hidden_size\": 2048, \"num_hidden_layers\": 24, \"num_attention_heads\": 32, "
        "\"intermediate_size\": 8192, \"vocab_size\": 51200, \"max_position_embeddings\": 2048, "
        "\"partial_rotary_factor\": 0.5, \"hidden_act\": \"gelu_new\", \"tie_word_embeddings\": false}"},
       51200},
      {{"phi-2", "microsoft/phi-2", "",
        "{\"model_type\": \"phi\", \"hidden_size\": 2560, \"num_hidden_layers\": 32, \"num_attention_heads\": 32, "
        "\"intermediate_size\": 10240, \"vocab_size\": 51200, \"max_position_embeddings\": 2048, "
        "\"partial_rotary_factor\": 0.4, \"hidden_act\": \"gelu_new\", \"tie_word_embeddings\": false}"},
       51200},
      {{"Phi-3-mini-4k-instruct", "microsoft/Phi-3-mini-4k-instruct", "phi-3-mini", ""}, 32064},
      {{"Phi-3-mini-128k-instruct", "microsoft/Phi-3-mini-128k-instruct", "phi-3-mini", ""}, 32064},
      {{"Phi-3.5-mini-instruct", "microsoft/Phi-3.5-mini-instruct", "phi-3-mini", ""}, 32064},
      {{"phi-4", "microsoft/phi-4", "phi-4", ""}, 100352},
      {{"OLMo-2-1124-7B", "allenai/OLMo-2-1124-7B", "olmo-2-7b", ""}, 100352},
      {{"OLMo-2-1124-13B", "allenai/OLMo-2-1124-13B", "olmo-2-13b", ""}, 100352},
      {{"pythia-160m", "EleutherAI/pythia-160m", "pythia-160m", ""}, 50304},
      {{"pythia-1b", "EleutherAI/pythia-1b", "pythia-1b", ""}, 50304},
      {{"Qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B", "qwen2.5-0.5b", ""}, 151936},
      {{"Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "qwen2.5-0.5b", ""}, 151936},
      {{"Qwen2.5-1.5B", "Qwen/Qwen2.5-1.5B", "qwen2.5-1.5b", ""}, 151936},
      {{"Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "qwen2.5-1.5b", ""}, 151936},
      {{"Qwen2.5-3B", "Qwen/Qwen2.5-3B", "", LIT_LLAMA(2048, 36, 16, 2, 11008, 151936, 32768, "qwen2")}, 151936},
      {{"Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-3B-Instruct", "", LIT_LLAMA(2048, 36, 16, 2, 11008, 151936, 32768, "qwen2")}, 151936},
      {{"Qwen2.5-7B", "Qwen/Qwen2.5-7B", "qwen2.5-7b", ""}, 152064},
      {{"Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b", ""}, 152064},
      {{"Qwen2.5-14B", "Qwen/Qwen2.5-14B", "", LIT_LLAMA(5120, 48, 40, 8, 13824, 152064, 32768, "qwen2")}, 152064},
      {{"Qwen2.5-14B-Instruct", "Qwen/Qwen2.5-14B-Instruct", "", LIT_LLAMA(5120, 48, 40, 8, 13824, 152064, 32768, "qwen2")}, 152064},
      {{"Qwen2.5-32B", "Qwen/Qwen2.5-32B", "", LIT_LLAMA(5120, 64, 40, 8, 27648, 152064, 32768, "qwen2")}, 152064},
      {{"Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-32B-Instruct", "", LIT_LLAMA(5120, 64, 40, 8, 27648, 152064, 32768, "qwen2")}, 152064},
      {{"Qwen2.5-72B", "Qwen/Qwen2.5-72B", "", LIT_LLAMA(8192, 80, 64, 8, 29568, 152064, 32768, "qwen2")}, 152064},
      {{"Qwen2.5-72B-Instruct", "Qwen/Qwen2.5-72B-Instruct", "", LIT_LLAMA(8192, 80, 64, 8, 29568, 152064, 32768, "qwen2")}, 152064},
      {{"Qwen3-0.6B", "Qwen/Qwen3-0.6B", "qwen3-0.6b", ""}, 151936},
      {{"Qwen3-0.6B-Base", "Qwen/Qwen3-0.6B-Base", "qwen3-0.6b", ""}, 151936},
      {{"Qwen3-1.7B", "Qwen/Qwen3-1.7B", "qwen3-1.7b", ""}, 151936},
      {{"Qwen3-1.7B-Base", "Qwen/Qwen3-1.7B-Base", "qwen3-1.7b", ""}, 151936},
      {{"Qwen3-4B", "Qwen/Qwen3-4B", "qwen3-4b", ""}, 151936},
      {{"Qwen3-4B-Base", "Qwen/Qwen3-4B-Base", "qwen3-4b", ""}, 151936},
      {{"Qwen3-8B", "Qwen/Qwen3-8B", "qwen3-8b", ""}, 151936},
      {{"Qwen3-8B-Base", "Qwen/Qwen3-8B-Base", "qwen3-8b", ""}, 151936},
      {{"Qwen3-14B", "Qwen/Qwen3-14B", "qwen3-14b", ""}, 151936},
      {{"Qwen3-14B-Base", "Qwen/Qwen3-14B-Base", "qwen3-14b", ""}, 151936},
      {{"Qwen3-32B", "Qwen/Qwen3-32B", "qwen3-32b", ""}, 151936},
      {{"Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b", ""}, 151936},
      {{"Qwen3-30B-A3B-Base", "Qwen/Qwen3-30B-A3B-Base", "qwen3-30b-a3b", ""}, 151936},
      {{"Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b", ""}, 151936},
      {{"SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M", "smollm2-135m", ""}, 49152},
      {{"SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m", ""}, 49152},
      {{"SmolLM2-360M", "HuggingFaceTB/SmolLM2-360M", "smollm2-360m", ""}, 49152},
      {{"SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct", "smollm2-360m", ""}, 49152},
      {{"SmolLM2-1.7B", "HuggingFaceTB/SmolLM2-1.7B", "smollm2-1.7b", ""}, 49152},
      {{"SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-1.7B-Instruct", "smollm2-1.7b", ""}, 49152},
  };
  return c;
}
#undef LIT_LLAMA

// Config.from_name: a Config.name, or hf_config's name or org/name.
const LitConfig* find_config(const std::string& name) {
  for (const LitConfig& c : configs())
    if (name == c.model.name) return &c;
  for (const LitConfig& c : configs()) {
    const std::string repo = c.model.hf_repo;
    if (name == repo || name == repo.substr(repo.find('/') + 1)) return &c;
  }
  return nullptr;
}

// The model LitGPT builds for a config: untied, with its padded vocabulary.
ModelSpec litgpt_spec(const LitConfig& c) {
  ModelSpec m = tool_model_spec(c.model);
  // GPT.__init__ (litgpt/model.py @ v0.5.13): a separate lm_head of padded_vocab_size rows.
  m.tie_word_embeddings = false;
  m.vocab_size = c.padded_vocab;
  m.name = c.model.name;
  return m;
}

struct Lit {
  explicit Lit(ReadState& state) : st(state) {}
  ReadState& st;
  const LitConfig* config = nullptr;
  const Node* checkpoint_dir = nullptr;
  const Node* model_name = nullptr;  // pretrain.py: the model is built from its config name
  bool pretrain = false;
  const Node* precision = nullptr;
  const Node* quantize = nullptr;
  std::string quant;
  int64_t devices = 1, nodes = 1;
  bool devices_auto = false;
  const Node* devices_node = nullptr;
  const Node* nodes_node = nullptr;
  bool lora = false;  // the finetune_lora script (LoRA keys or quantize)
  const Node* lora_key = nullptr;
  bool q = true, k = false, v = true, proj = false, mlp = false;  // lora.py setup() defaults
  const Node* targets_node = nullptr;
  int64_t micro = 1, global = 16;  // lora.py / full.py setup(): TrainArgs(global_batch_size=16, micro_batch_size=1)
  const Node* micro_node = nullptr;
  const Node* global_node = nullptr;
  const Node* seq_node = nullptr;
  const Node* optimizer = nullptr;

  TrainingSetup& s() { return st.s(); }
};
using Table = KeyTable<Lit>;

void lora_key(const Node& n, Lit& t) {
  t.lora = true;
  if (!t.lora_key) t.lora_key = &n;
}
Key<Lit> target_key(const char* name, bool Lit::*slot) {
  return {{name}, [slot](const Node& n, Lit& t) {
            lora_key(n, t);
            t.*slot = as_bool(n);
            t.targets_node = &n;
          }};
}

const Table& train_keys() {  // TrainArgs (litgpt/args.py @ v0.5.13)
  static const Table k = {
      {{"micro_batch_size"}, [](const Node& n, Lit& t) {
         t.micro = as_count(n);
         if (t.micro < 1) type_error(n, "a positive integer");
         t.micro_node = &n;
       }},
      {{"global_batch_size"}, [](const Node& n, Lit& t) {
         t.global = as_count(n);
         if (t.global < 1) type_error(n, "a positive integer");
         t.global_node = &n;
       }},
      {{"max_seq_length"}, [](const Node& n, Lit& t) {
         t.seq_node = &n;
         t.st.set(memplan::path(Count::seq_len), t.s().batch.seq_len, as_count(n), n);
       }},
      {{"save_interval", "log_interval", "lr_warmup_steps", "lr_warmup_fraction", "epochs", "max_tokens", "max_steps",
        "tie_embeddings", "max_norm", "min_lr", "max_time"},
       [](const Node&, Lit&) {}},
  };
  return k;
}

void read_optimizer(const Node& n, Lit& t) {
  // A class name ("AdamW" = torch.optim.AdamW), a dotted path, or {class_path, init_args}.
  const Node* cls = n.kind == Node::Kind::map ? n.find("class_path") : &n;
  if (!cls) throw InputError(n.where, "optimizer: has no class_path", "e.g. optimizer: {class_path: torch.optim.AdamW}");
  const std::string path = as_text(*cls);
  const std::string name = path.substr(path.rfind('.') + 1);
  OptimizerKind o = OptimizerKind::adamw;
  if (name == "AdamW") o = OptimizerKind::adamw;
  else if (name == "Adam") o = OptimizerKind::adam;
  else if (name == "SGD") {
    const Node* args = n.kind == Node::Kind::map ? n.find("init_args") : nullptr;
    const Node* m = args ? args->find("momentum") : nullptr;
    o = m && as_number(*m) > 0 ? OptimizerKind::sgd_momentum : OptimizerKind::sgd;
  } else if (name == "AdamW8bit" || name == "Adam8bit") o = OptimizerKind::adamw_8bit;
  else if (name == "PagedAdamW8bit") o = OptimizerKind::paged_adamw_8bit;
  else if (name == "PagedAdamW" || name == "PagedAdamW32bit") o = OptimizerKind::paged_adamw;
  else if (name == "Lion") o = OptimizerKind::lion;
  else t.st.unmodelled(*cls, "an optimizer memplan does not know: estimated as AdamW (two states per parameter)");
  t.st.set(memplan::path(Choice::optimizer), t.s().optimizer, o, *cls);
  t.optimizer = cls;
  if (n.kind != Node::Kind::map) return;
  if (const Node* args = n.find("init_args")) {
    Runtime& r = t.s().runtime;
    if (const Node* fused = args->find("fused"); fused && as_bool(*fused))
      t.st.set(memplan::path(Choice::optimizer_impl), r.optimizer_impl, OptimizerImpl::fused, *fused);
    else if (const Node* fe = args->find("foreach"))
      t.st.set(memplan::path(Choice::optimizer_impl), r.optimizer_impl, as_bool(*fe) ? OptimizerImpl::foreach : OptimizerImpl::for_loop, *fe);
  }
}

int64_t devices_of(const Node& n, Lit& t) {
  // parse_devices (litgpt/utils.py @ v0.5.13): an int, -1 or "auto" = every visible GPU.
  if (n.kind == Node::Kind::scalar && (lower(n.text) == "auto" || n.text == "-1")) {
    t.devices_auto = true;
    return 1;
  }
  const int64_t d = as_int(n);
  if (d < 1) type_error(n, "a positive integer, -1 or \"auto\"");
  return as_count(n);
}

const Table& root_keys() {
  static const Table k = {
      {{"checkpoint_dir"}, [](const Node& n, Lit& t) { t.checkpoint_dir = &n; }},
      {{"model_name"}, [](const Node& n, Lit& t) { t.model_name = &n; }},
      {{"model_config"}, [](const Node& n, Lit&) {
         if (n.kind == Node::Kind::null) return;
         type_error(n, "nothing here (an inline LitGPT Config is not read: name the model with model_name, or pass --model)");
       }},
      {{"initial_checkpoint_dir", "tokenizer_dir"}, [](const Node&, Lit&) {}},
      {{"precision"}, [](const Node& n, Lit& t) { t.precision = &n; }},
      {{"quantize"}, [](const Node& n, Lit& t) {
         t.quant = as_text(n);
         t.quantize = &n;
         lora_key(n, t);
       }},
      {{"devices"}, [](const Node& n, Lit& t) {
         t.devices = devices_of(n, t);
         t.devices_node = &n;
       }},
      {{"num_nodes"}, [](const Node& n, Lit& t) {
         t.nodes = as_count(n);
         if (t.nodes < 1) type_error(n, "a positive integer");
         t.nodes_node = &n;
       }},
      {{"lora_r"}, [](const Node& n, Lit& t) {
         lora_key(n, t);
         t.st.set(memplan::path(Count::lora_rank), t.s().finetune.lora_rank, as_count(n), n);
       }},
      {{"lora_alpha"}, [](const Node& n, Lit& t) {
         lora_key(n, t);
         t.st.set(memplan::path(Number::lora_alpha), t.s().finetune.lora_alpha, as_number(n), n);
       }},
      {{"lora_dropout"}, [](const Node& n, Lit& t) {
         lora_key(n, t);
         t.st.set(memplan::path(Number::lora_dropout), t.s().finetune.lora_dropout, as_number(n), n);
       }},
      target_key("lora_query", &Lit::q),
      target_key("lora_key", &Lit::k),
      target_key("lora_value", &Lit::v),
      target_key("lora_projection", &Lit::proj),
      target_key("lora_mlp", &Lit::mlp),
      {{"lora_head"}, [](const Node& n, Lit& t) {
         lora_key(n, t);
         if (as_bool(n))
           t.st.unmodelled(n, "LoRA on lm_head is not a memplan LoRA target: the estimate keeps lm_head frozen without its "
                              "adapter (r x (hidden + padded vocabulary) parameters and their states)");
       }},
      {{"train"}, [](const Node& n, Lit& t) { read_section(n, {&train_keys()}, t, &t.st.out.warnings); }},
      {{"optimizer"}, read_optimizer},
      {{"out_dir", "resume", "data", "eval", "log", "logger_name", "seed", "access_token"}, [](const Node&, Lit&) {}},
  };
  return k;
}

// A model name that is no LitGPT config: `message` at `n`, with the nearest config names, else `hint`.
[[noreturn]] void unknown_config(const Node& n, const std::string& message, const std::string& name, const char* hint) {
  std::vector<std::string> names;
  for (const LitConfig& c : configs()) names.emplace_back(c.model.name);
  const std::vector<std::string> near = nearest(name, names);
  throw InputError(n.where, message,
                   near.empty() ? std::string(hint)
                                : fmt::format("did you mean '{}'? (LitGPT config names, litgpt/config.py @ v0.5.13; or pass --model)",
                                              fmt::join(near, "' or '")));
}

void resolve_model(Lit& t) {
  if (!t.checkpoint_dir && t.model_name) {  // pretrain.py: GPT(Config.from_name(model_name)), random weights
    const std::string name = as_text(*t.model_name);
    t.config = find_config(name);
    if (!t.config)
      unknown_config(*t.model_name, fmt::format("model_name '{}' is no LitGPT config memplan knows", name), name,
                     "a LitGPT config name (litgpt/config.py @ v0.5.13); pass --model PRESET|config.json for another architecture");
    use_tool_model(t.st, litgpt_spec(*t.config), *t.model_name);
    return;
  }
  if (!t.checkpoint_dir) {
    t.st.out.no_model = Warning{Where::at_file(t.st.path), "this LitGPT config has no checkpoint_dir",
                                "checkpoint_dir names the model (checkpoints/<org>/<name>), or pass --model"};
    return;
  }
  const std::string dir = as_text(*t.checkpoint_dir);
  std::string trimmed = dir;
  while (!trimmed.empty() && trimmed.back() == '/') trimmed.pop_back();
  const std::string name = trimmed.substr(trimmed.rfind('/') + 1);
  const size_t slash = trimmed.rfind('/');
  const std::string org_name = slash == std::string::npos || slash == 0
                                   ? name
                                   : trimmed.substr(trimmed.rfind('/', slash - 1) + 1);
  t.config = find_config(name);
  if (!t.config) t.config = find_config(org_name);
  if (!t.config)
    unknown_config(*t.checkpoint_dir, fmt::format("checkpoint_dir '{}' names no LitGPT config memplan knows ('{}')", dir, name), name,
                   "its last folder is a LitGPT config name (litgpt/config.py @ v0.5.13); pass --model PRESET|config.json for another "
                   "architecture");
  // LitGPT builds a separate lm_head of padded_vocab_size rows for every model (GPT.__init__,
  // litgpt/model.py @ v0.5.13; convert_hf_checkpoint copies a tied head into it).
  use_tool_model(t.st, litgpt_spec(*t.config), *t.checkpoint_dir);
}

void resolve_precision(Lit& t) {
  TrainingSetup& s = t.s();
  // precision = precision or get_default_supported_precision(training=True): bf16-mixed where
  // the GPU has bf16 (litgpt/utils.py @ v0.5.13).
  std::string p = "bf16-mixed";
  if (t.precision) p = as_text(*t.precision);
  Precision v;
  if (p == "bf16-true") v = Precision::bf16;
  else if (p == "bf16-mixed") v = Precision::amp_bf16;
  else if (p == "16-true") v = Precision::fp16;
  else if (p == "16-mixed") v = Precision::amp_fp16;
  else if (p == "32-true") v = Precision::fp32;
  else
    throw InputError(t.precision->where, fmt::format("unknown precision '{}'", p),
                     "expected one of: bf16-true, bf16-mixed, 16-true, 16-mixed, 32-true");
  if (t.precision) t.st.set(memplan::path(Choice::precision), s.precision, v, *t.precision);
  else {
    s.precision = v;
    t.st.by_default(memplan::path(Choice::precision), "LitGPT default: precision null -> get_default_supported_precision(training=True) = "
                                 "bf16-mixed on a GPU with bf16 (16-mixed without) (litgpt/utils.py @ v0.5.13)");
  }
  if (!t.quantize) return;
  if (is_autocast(v))
    throw InputError(t.quantize->where,
                     fmt::format("quantize: {} with precision {}{} fails in LitGPT: \"Quantization and mixed precision is not "
                                 "supported.\" ({} setup)",
                                 t.quant, p, t.precision ? "" : " (LitGPT's default when precision is null)", kLora),
                     "set precision: bf16-true (or 16-true, 32-true) with quantize");
}

void resolve_finetune(Lit& t) {
  TrainingSetup& s = t.s();
  Finetune& f = s.finetune;
  if (!t.lora) return;  // finetune_full
  f.mode = FinetuneMode::lora;
  const std::string src = fmt::format("LitGPT default: {} setup()", kLora);
  if (!t.st.out.origin.fields.count(memplan::path(Count::lora_rank))) t.st.by_default(memplan::path(Count::lora_rank), src + " lora_r=8");
  if (!t.st.out.origin.fields.count(memplan::path(Number::lora_alpha))) {
    f.lora_alpha = 16;
    t.st.by_default(memplan::path(Number::lora_alpha), src + " lora_alpha=16");
  }
  if (!t.st.out.origin.fields.count(memplan::path(Number::lora_dropout))) {
    f.lora_dropout = 0.05;
    t.st.by_default(memplan::path(Number::lora_dropout), src + " lora_dropout=0.05");
  }
  f.lora_targets.clear();
  if (t.q) f.lora_targets.push_back("q");
  if (t.k) f.lora_targets.push_back("k");
  if (t.v) f.lora_targets.push_back("v");
  if (t.proj) f.lora_targets.push_back("o");
  if (t.mlp) {
    // LLaMAMLP / GemmaMLP / LLaMAMoE: fc_1, fc_2, proj (gate, up, down); GptNeoxMLP: fc, proj (up, down).
    if (s.model.gated_mlp) f.lora_targets.push_back("gate");
    f.lora_targets.push_back("up");
    f.lora_targets.push_back("down");
  }
  if (f.lora_targets.empty())
    throw InputError((t.targets_node ? t.targets_node : t.lora_key)->where, "LoRA is on no layer (every lora_* switch is false)",
                     "set lora_query, lora_key, lora_value, lora_projection or lora_mlp");
  if (t.targets_node) t.st.note(memplan::path(List::lora_targets), *t.targets_node);
  else t.st.by_default(memplan::path(List::lora_targets), src + " lora_query=True, lora_value=True");
  t.st.note(memplan::path(Choice::finetune), *t.lora_key);
  if (!t.quantize) return;
  // BitsandbytesPrecision(mode, dtype) converts every nn.Linear (LitGPT passes no ignore_modules).
  f.mode = FinetuneMode::qlora;
  if (t.quant == "bnb.nf4" || t.quant == "bnb.fp4") {
    f.base_quant = BaseQuant::nf4;
    f.double_quant = false;
  } else if (t.quant == "bnb.nf4-dq" || t.quant == "bnb.fp4-dq") {
    f.base_quant = BaseQuant::nf4;
    f.double_quant = true;
  } else if (t.quant == "bnb.int8-training") {
    f.mode = FinetuneMode::lora;
    f.base_quant = BaseQuant::int8;
  } else {
    throw InputError(t.quantize->where, fmt::format("unknown quantize '{}'", t.quant),
                     fmt::format("expected one of: bnb.nf4, bnb.nf4-dq, bnb.fp4, bnb.fp4-dq, bnb.int8-training ({} setup)", kLora));
  }
  t.st.note(memplan::path(Choice::finetune), *t.quantize);
  t.st.note(kBaseQuantPath, *t.quantize);
  t.st.unmodelled(*t.quantize, "LitGPT quantizes lm_head too (BitsandbytesPrecision converts every nn.Linear); the estimate "
                               "keeps lm_head in 16 bits (an over-estimate of about 1.5 bytes x hidden x vocabulary)");
  // instantiate_bnb_optimizer (litgpt/utils.py @ v0.5.13): with quantize the optimizer is
  // bitsandbytes' PagedAdamW, whatever optimizer: says.
  t.st.set(memplan::path(Choice::optimizer), s.optimizer, OptimizerKind::paged_adamw, *t.quantize);
}

void resolve_parallel(Lit& t) {
  TrainingSetup& s = t.s();
  if (!t.devices_node)
    t.st.by_default(memplan::path(Count::num_gpus), t.pretrain ? "LitGPT default: devices=\"auto\" (pretrain.py setup()): every visible GPU"
                                                    : "LitGPT default: devices=1, num_nodes=1 (finetune setup())");
  const int64_t world = count_product({{t.devices, t.devices_node}, {t.nodes, t.nodes_node}}, kMaxGpus,
                                      "devices x num_nodes (the GPU count)", Where::at_file(t.st.path));
  s.parallel.num_gpus = world;
  if (t.devices_node) t.st.note(memplan::path(Count::num_gpus), *t.devices_node);
  if (t.nodes > 1) {
    t.st.set(memplan::path(Count::gpus_per_node), s.parallel.gpus_per_node, t.devices, t.nodes_node ? *t.nodes_node : *t.devices_node);
  }
  if (t.devices_auto)
    t.st.defer(memplan::path(Count::num_gpus), (t.devices_node ? t.devices_node : t.model_name)->where,
               "devices: auto/-1 uses every visible GPU (parse_devices, litgpt/utils.py @ v0.5.13): the count is not in the "
               "file; estimating 1 per node",
               "pass --gpus N (devices x num_nodes)");
  if (t.quantize && world > 1)
    throw InputError(t.quantize->where,
                     "quantize on several devices fails in LitGPT: \"Quantization is currently not supported for multi-GPU "
                     "training\"",
                     "set devices: 1 and num_nodes: 1 with quantize");
  // Several devices: FSDP with every Block checkpointed (lora.py parallelize_fn(activation_checkpointing=True);
  // full.py FSDPStrategy(activation_checkpointing_policy={Block}) @ v0.5.13); one device: neither.
  Checkpointing& c = s.checkpointing;
  if (t.pretrain) {
    c.mode = CheckpointMode::none;
    t.st.by_default(memplan::path(Choice::checkpointing), "LitGPT pretrain.py @ v0.5.13: FSDPStrategy(auto_wrap_policy={Block}, sharding_strategy=\"HYBRID_SHARD\") "
                                     "over several devices, no activation checkpointing on any count");
    if (t.nodes > 1) {
      s.parallel.fsdp = FsdpMode::hybrid_shard;
      t.st.by_default(memplan::path(Choice::fsdp), "LitGPT pretrain.py @ v0.5.13: sharding_strategy=\"HYBRID_SHARD\" (sharded within a node)");
    }
  } else {
    // Decided by the device count, which --gpus may still change (build_setup applies it).
    LoadedConfig::ByDeviceCount by;
    by.one.mode = CheckpointMode::none;
    by.several.mode = CheckpointMode::full;
    by.why_several = t.lora ? "LitGPT: several devices checkpoint every Block (litgpt/finetune/lora.py @ "
                              "v0.5.13 parallelize_fn(activation_checkpointing=True))"
                            : "LitGPT: several devices checkpoint every Block (litgpt/finetune/full.py @ "
                              "v0.5.13 FSDPStrategy(activation_checkpointing_policy={Block}))";
    by.why_one = "LitGPT: one device runs strategy \"auto\" without activation checkpointing "
                 "(litgpt/finetune/lora.py, full.py @ v0.5.13)";
    const bool several = world > 1 || t.devices_auto;
    c = several ? by.several : by.one;
    t.st.by_default(memplan::path(Choice::checkpointing), several ? by.why_several : by.why_one);
    t.st.out.checkpointing_by_devices = by;
  }
}

void resolve_batch(Lit& t) {
  TrainingSetup& s = t.s();
  const std::string src = t.pretrain ? "LitGPT default: pretrain.py setup() TrainArgs(global_batch_size=512, micro_batch_size=4) @ v0.5.13"
                                     : "LitGPT default: finetune setup() TrainArgs(global_batch_size=16, micro_batch_size=1) @ v0.5.13";
  if (t.micro_node) t.st.set(memplan::path(Count::micro_batch), s.batch.micro_batch, t.micro, *t.micro_node);
  else {
    s.batch.micro_batch = t.micro;
    t.st.by_default(memplan::path(Count::micro_batch), src);
  }
  // TrainArgs.gradient_accumulation_iters (litgpt/args.py @ v0.5.13):
  // (global_batch_size // (devices * num_nodes)) // micro_batch_size, which must be > 0.
  // Both divisors are bounded counts (num_gpus by resolve_parallel).
  const int64_t world = s.parallel.num_gpus;
  const int64_t accum = t.global / world / t.micro;
  if (accum < 1) {
    // At the key that decides it: the global batch, else the micro-batch, else the device count
    // (LitGPT's default global batch of 16 over more devices than that).
    const Node* at = t.global_node ? t.global_node : t.micro_node ? t.micro_node : t.devices_node ? t.devices_node : t.nodes_node;
    throw InputError(at ? at->where : Where::at_file(t.st.path),
                     fmt::format("train.global_batch_size {}{} over {} device(s) leaves less than one micro-batch of {} per step "
                                 "(LitGPT asserts gradient_accumulation_iters > 0)",
                                 t.global, t.global_node ? "" : " (LitGPT's default)", world, t.micro),
                     t.global_node ? "raise global_batch_size or lower micro_batch_size"
                                   : "set train.global_batch_size to a multiple of devices x num_nodes x micro_batch_size");
  }
  s.batch.grad_accum = accum;
  if (t.global_node) t.st.note(memplan::path(Count::grad_accum), *t.global_node);
  else t.st.by_default(memplan::path(Count::grad_accum), src);
  t.st.out.global_batch = t.global;
  if (t.seq_node) return;
  if (t.pretrain) {  // pretrain.py: model.max_seq_length = train.max_seq_length or the config's block_size
    s.batch.seq_len = s.model.max_position_embeddings;
    t.st.by_default(memplan::path(Count::seq_len), fmt::format("LitGPT pretrain.py @ v0.5.13: train.max_seq_length null trains at the model's block_size ({})",
                                                 s.model.max_position_embeddings));
    return;
  }
  const Where w = t.checkpoint_dir ? t.checkpoint_dir->where : Where::at_file(t.st.path);
  t.st.defer(memplan::path(Count::seq_len), w,
             fmt::format("train.max_seq_length is null: LitGPT trains at the longest sample of the dataset (capped by the "
                         "model's block_size, {}), so the sequence length depends on the data; estimating {} tokens",
                         s.model.max_position_embeddings, s.batch.seq_len),
             "pass --seq-len N (the longest sample), or set train.max_seq_length");
}

}  // namespace

std::optional<ToolModelRef> litgpt_model_for(const ModelSpec& m) {
  // A LitGPT config by name (what this reader made), else one over the preset `m` is, preferring
  // the config whose checkpoint is m's HF repository.
  const LitConfig* hit = find_config(m.name);
  if (hit && hit->model.name != m.name) hit = nullptr;
  if (!hit)
    for (const LitConfig& c : configs()) {
      if (c.model.preset[0] == '\0' || m.name != c.model.preset) continue;
      if (!hit || (m.hf_repo == c.model.hf_repo && m.hf_repo != hit->model.hf_repo)) hit = &c;
    }
  if (!hit) return std::nullopt;
  ToolModelRef r;
  r.name = std::string("checkpoints/") + hit->model.hf_repo;
  r.spec = litgpt_spec(*hit);
  return r;
}

void read_litgpt(const Node& root, ReadState& st) {
  Lit t(st);
  st.s().runtime.framework = Framework::litgpt;
  st.by_default(memplan::path(Choice::framework), "a LitGPT config (checkpoint_dir or model_name, train:)");
  read_section(root, {&root_keys()}, t, &st.out.warnings);
  t.pretrain = !t.checkpoint_dir && t.model_name;
  if (t.pretrain) {
    if (t.lora_key) throw InputError(t.lora_key->where, "LoRA keys in a pre-training config", "litgpt pretrain trains every weight; LoRA is litgpt finetune_lora's");
    if (!t.micro_node) t.micro = 4;
    if (!t.global_node) t.global = 512;
    if (!t.devices_node) t.devices_auto = true;  // pretrain.py setup(devices="auto"): every visible GPU
  }
  resolve_model(t);
  resolve_precision(t);
  resolve_finetune(t);
  resolve_parallel(t);
  resolve_batch(t);
  if (!t.optimizer && st.s().optimizer == OptimizerKind::adamw)
    st.by_default(memplan::path(Choice::optimizer), "LitGPT default: optimizer \"AdamW\" (torch.optim.AdamW) in finetune setup() @ v0.5.13");
}

}  // namespace memplan::profiles::detail
