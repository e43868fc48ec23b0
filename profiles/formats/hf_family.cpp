// Shared pieces of the HF Trainer family's readers (hf_family.h): optimizer names, attention,
// LoRA targets, FSDP words and DeepSpeed configs with their "auto" values.
#include "profiles/formats/hf_family.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

namespace memplan::profiles::detail::hf {
namespace fs = std::filesystem;

Where keyed(const Node& n, const std::string& text) {
  Where w = n.where;
  w.key = text.empty() ? n.path : text;
  return w;
}

void note(ReadState& st, const std::string& field, const Node& n, const std::string& text) {
  st.out.origin.set(field, keyed(n, text));
}

void warn_unread_memory_keys(const Node& root, ReadState& st, const std::vector<std::string>& known, const char* tool) {
  if (root.kind != Node::Kind::map) return;
  // Words that name a memory setting in these tools' vocabularies.
  static const char* const kMarkers[] = {"deepspeed", "fsdp",      "zero_stage", "offload", "quantiz",  "load_in_",
                                         "checkpointing", "micro_batch", "train_batch", "seq_len", "sequence_len",
                                         "max_seq", "dtype",     "precision", "lora_r",  "attention"};
  for (const auto& [key, value] : root.entries) {
    if (std::find(known.begin(), known.end(), key) != known.end() || near_miss(key, known)) continue;
    const std::string l = lower(key);
    const bool memory = std::any_of(std::begin(kMarkers), std::end(kMarkers),
                                    [&](const char* m) { return l.find(m) != std::string::npos; });
    if (!memory) continue;
    st.out.warnings.push_back({value.where, fmt::format("unknown key '{}': memplan does not read it, and its name says it may "
                                                        "change memory", key),
                               fmt::format("check its spelling against {}'s documentation; the estimate is made without it",
                                           tool)});
  }
}

void check_keys(const Node& root, ReadState& st, const std::vector<std::string>& known, const char* tool) {
  KeyTable<ReadState> table;
  for (const std::string& k : known) table.push_back({{k}, [](const Node&, ReadState&) {}});
  read_section(root, {&table}, st, &st.out.warnings);
  warn_unread_memory_keys(root, st, known, tool);
}

void read_training_args_batch(const Node& root, ReadState& st) {
  TrainingSetup& s = st.s();
  if (const Node* n = root.find("per_device_train_batch_size")) {
    s.batch.micro_batch = positive(*n, "per_device_train_batch_size is the number of sequences per GPU per forward");
    note(st, memplan::path(Count::micro_batch), *n);
  } else {
    s.batch.micro_batch = 8;
    note_default(st, memplan::path(Count::micro_batch), fmt::format("TrainingArguments default per_device_train_batch_size=8 ({})", kTrainingArgs));
  }
  if (const Node* n = root.find("gradient_accumulation_steps")) {
    s.batch.grad_accum = positive(*n, "gradient_accumulation_steps counts micro-batches per optimizer step");
    note(st, memplan::path(Count::grad_accum), *n);
  } else {
    s.batch.grad_accum = 1;
    note_default(st, memplan::path(Count::grad_accum), fmt::format("TrainingArguments default gradient_accumulation_steps=1 ({})", kTrainingArgs));
  }
}

void read_training_args_loader(const Node& root, ReadState& st) {
  TrainingSetup& s = st.s();
  if (const Node* n = root.find("auto_find_batch_size"); n && flag(*n, kHfArgsBoolHint))
    st.unmodelled(*n, "the Trainer halves the batch after an out-of-memory error; the estimate uses per_device_train_batch_size as given");
  if (const Node* n = root.find("dataloader_num_workers")) {
    s.data.num_workers = as_int(*n);
    note(st, memplan::path(Setting::num_workers), *n);
  }
  if (const Node* n = root.find("dataloader_pin_memory")) {
    s.data.pin_memory = flag(*n, kHfArgsBoolHint);
    note(st, memplan::path(Setting::pin_memory), *n);
  } else {
    s.data.pin_memory = true;  // TrainingArguments default dataloader_pin_memory=True
    note_default(st, memplan::path(Setting::pin_memory), fmt::format("TrainingArguments default dataloader_pin_memory=True ({})", kTrainingArgs));
  }
  if (const Node* n = root.find("dataloader_prefetch_factor")) {
    s.data.prefetch_factor = as_int(*n);
    note(st, memplan::path(Setting::prefetch_factor), *n);
  }
}

void note_default(ReadState& st, const std::string& field, const std::string& text) {
  st.out.origin.fields.erase(field);
  st.out.origin.defaults[field] = text;
}

void default_overlap_comm(ReadState& st) {
  st.s().parallel.overlap_comm = st.s().parallel.zero_stage == 3;
  note_default(st, memplan::path(Setting::overlap_comm),
               "DeepSpeed default: overlap_comm = (stage == 3) (deepspeed/runtime/zero/config.py @ v0.16.4 L134, L351-353)");
}

void use_model(ReadState& st, const Node& n) {
  const std::string name = as_text(n);
  try {
    st.use_model(name, n);
  } catch (const InputError& e) {
    st.out.model_error = e;
  }
}

bool flag(const Node& n, const std::string& hint) {
  if (n.kind == Node::Kind::scalar && !n.quoted) {
    const std::string t = lower(n.text);
    if (t == "true" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "no" || t == "off") return false;
  }
  const std::string got = n.kind == Node::Kind::scalar ? fmt::format("'{}'{}", n.text, n.quoted ? ", a quoted string" : "")
                          : n.kind == Node::Kind::list ? "a list" : "a mapping";
  throw InputError(n.where, fmt::format("{} must be true or false (got {})", n.path, got), hint);
}

int64_t positive(const Node& n, const std::string& hint) {
  try {
    // YAML 1.1 (PyYAML, which these tools read with) allows digit separators: 500_000.
    Node plain = n;
    if (n.kind == Node::Kind::scalar && !n.quoted && n.text.find('_') != std::string::npos &&
        n.text.find_first_not_of("0123456789_") == std::string::npos && n.text[0] != '_') {
      plain.text.erase(std::remove(plain.text.begin(), plain.text.end(), '_'), plain.text.end());
    }
    const int64_t v = as_count(plain);
    if (v >= 1) return v;
  } catch (const InputError&) {
  }
  const std::string got = n.kind == Node::Kind::scalar ? fmt::format("'{}'{}", n.text, n.quoted ? ", a quoted string" : "")
                          : n.kind == Node::Kind::list ? "a list" : "a mapping";
  throw InputError(n.where, fmt::format("{} must be a positive integer (got {})", n.path, got), hint);
}

// ---- optimizers ------------------------------------------------------------------------------------

namespace {

struct OptimizerRow {
  const char* name;
  bool axolotl_only;
  Optimizer o;
};

constexpr const char* kNot = nullptr;

// transformers OptimizerNames (training_args.py @ fd798335) and how Trainer.get_optimizer_cls_and_kwargs
// builds each; Axolotl's CustomSupportedOptimizers (src/axolotl/utils/schemas/enums.py @ v0.18.0).
const std::vector<OptimizerRow>& optimizer_rows() {
  using K = OptimizerKind;
  using I = OptimizerImpl;
  static const std::vector<OptimizerRow> rows = {
      {"adamw_torch", false, {K::adamw, I::automatic, "", kNot}},  // torch.optim.AdamW, foreach on CUDA
      {"adamw_torch_fused", false, {K::adamw, I::fused, "", kNot}},
      {"adamw_apex_fused", false, {K::adamw, I::fused, "", kNot}},
      {"adamw_hf", false, {K::adamw, I::for_loop, "", kNot}},  // transformers' own AdamW (4.x): one tensor at a time
      {"adamw_anyprecision", false, {K::adamw, std::nullopt, "torchdistx AnyPrecisionAdamW with its fp32 states", kNot}},
      {"stable_adamw", false, {K::adamw, std::nullopt, "torch-optimi StableAdamW: AdamW's two states", kNot}},
      {"adamw_torch_xla", false, {K::adamw, std::nullopt, "", "it runs on XLA devices (TPU), not on CUDA"}},
      {"adamw_torch_npu_fused", false, {K::adamw, std::nullopt, "", "it runs on Ascend NPUs, not on CUDA"}},
      {"adafactor", false, {K::adafactor, std::nullopt, "", kNot}},
      {"adamw_torch_8bit", false, {K::adamw_8bit, std::nullopt, "torchao AdamW8bit: two 8-bit states", kNot}},
      {"adamw_bnb_8bit", false, {K::adamw_8bit, std::nullopt, "", kNot}},
      {"adamw_8bit", false, {K::adamw_8bit, std::nullopt, "", kNot}},  // alias of adamw_bnb_8bit
      {"paged_adamw_32bit", false, {K::paged_adamw, std::nullopt, "", kNot}},
      {"paged_adamw", false, {K::paged_adamw, std::nullopt, "", kNot}},
      {"paged_adamw_8bit", false, {K::paged_adamw_8bit, std::nullopt, "", kNot}},
      {"lion_32bit", false, {K::lion, std::nullopt, "", kNot}},
      {"paged_lion_32bit", false, {K::lion, std::nullopt, "bitsandbytes paged Lion: one state, counted as resident", kNot}},
      {"sgd", false, {K::sgd, std::nullopt, "", kNot}},
      {"adagrad", false, {K::sgd_momentum, std::nullopt, "Adagrad keeps one state (sum): counted as sgd-momentum", kNot}},
      {"rmsprop", false, {K::sgd_momentum, std::nullopt, "RMSprop keeps one state (square_avg): counted as sgd-momentum", kNot}},
      {"rmsprop_bnb", false, {K::sgd_momentum, std::nullopt, "bitsandbytes RMSprop keeps one state: counted as sgd-momentum", kNot}},
      {"rmsprop_bnb_32bit", false,
       {K::sgd_momentum, std::nullopt, "bitsandbytes RMSprop keeps one state: counted as sgd-momentum", kNot}},
      {"schedule_free_adamw", false, {K::adamw, std::nullopt, "schedule-free AdamW keeps two states (z, exp_avg_sq)", kNot}},
      {"schedule_free_radam", false, {K::adamw, std::nullopt, "schedule-free RAdam keeps two states (z, exp_avg_sq)", kNot}},
      {"schedule_free_sgd", false, {K::sgd_momentum, std::nullopt, "schedule-free SGD keeps one state (z)", kNot}},
      {"adamw_torch_4bit", false, {K::adamw, std::nullopt, "", "torchao keeps 4-bit states; the estimate counts AdamW's two full states"}},
      {"ademamix", false, {K::adamw, std::nullopt, "", "AdEMAMix keeps three states; the estimate counts AdamW's two"}},
      {"ademamix_8bit", false, {K::adamw, std::nullopt, "", "8-bit AdEMAMix keeps three 8-bit states; the estimate counts AdamW's two full states"}},
      {"paged_ademamix_32bit", false, {K::adamw, std::nullopt, "", "paged AdEMAMix keeps three states; the estimate counts AdamW's two"}},
      {"paged_ademamix_8bit", false, {K::adamw, std::nullopt, "", "paged 8-bit AdEMAMix keeps three 8-bit states; the estimate counts AdamW's two full states"}},
      {"lion_8bit", false, {K::adamw, std::nullopt, "", "8-bit Lion keeps one 8-bit state; the estimate counts AdamW's two full states"}},
      {"paged_lion_8bit", false, {K::adamw, std::nullopt, "", "paged 8-bit Lion keeps one 8-bit state; the estimate counts AdamW's two full states"}},
      {"rmsprop_bnb_8bit", false, {K::adamw, std::nullopt, "", "8-bit RMSprop keeps one 8-bit state; the estimate counts AdamW's two full states"}},
      {"galore_adamw", false, {K::adamw, std::nullopt, "", "GaLore keeps low-rank projected states; the estimate counts AdamW's full states"}},
      {"galore_adamw_8bit", false, {K::adamw, std::nullopt, "", "GaLore keeps low-rank projected states; the estimate counts AdamW's full states"}},
      {"galore_adafactor", false, {K::adamw, std::nullopt, "", "GaLore keeps low-rank projected states; the estimate counts AdamW's full states"}},
      {"galore_adamw_layerwise", false, {K::adamw, std::nullopt, "", "layerwise GaLore steps in backward with low-rank states; the estimate counts AdamW's full states"}},
      {"galore_adamw_8bit_layerwise", false, {K::adamw, std::nullopt, "", "layerwise GaLore steps in backward with low-rank states; the estimate counts AdamW's full states"}},
      {"galore_adafactor_layerwise", false, {K::adamw, std::nullopt, "", "layerwise GaLore steps in backward with low-rank states; the estimate counts AdamW's full states"}},
      {"apollo_adamw", false, {K::adamw, std::nullopt, "", "APOLLO keeps low-rank auxiliary states; the estimate counts AdamW's full states"}},
      {"apollo_adamw_layerwise", false, {K::adamw, std::nullopt, "", "layerwise APOLLO steps in backward; the estimate counts AdamW's full states"}},
      {"lomo", false, {K::adamw, std::nullopt, "", "LOMO fuses the update into backward and keeps no gradients or states; the estimate counts AdamW (an over-estimate)"}},
      {"adalomo", false, {K::adamw, std::nullopt, "", "AdaLomo fuses the update into backward; the estimate counts AdamW (an over-estimate)"}},
      {"grokadamw", false, {K::adamw, std::nullopt, "", "GrokAdamW keeps three states (m, v, a gradient EMA); the estimate counts AdamW's two"}},
      // Axolotl's own.
      {"optimi_adamw", true, {K::adamw, std::nullopt, "torch-optimi AdamW: AdamW's two states", kNot}},
      {"adopt_adamw", true, {K::adamw, std::nullopt, "ADOPT keeps AdamW's two states", kNot}},
      {"ao_adamw_8bit", true, {K::adamw_8bit, std::nullopt, "torchao AdamW8bit: two 8-bit states", kNot}},
      {"ao_adamw_4bit", true, {K::adamw, std::nullopt, "", "torchao keeps 4-bit states; the estimate counts AdamW's two full states"}},
      {"ao_adamw_fp8", true, {K::adamw, std::nullopt, "", "torchao keeps fp8 states; the estimate counts AdamW's two full states"}},
      {"came_pytorch", true, {K::adamw, std::nullopt, "", "CAME keeps factored states; the estimate counts AdamW's two full states"}},
      {"muon", true, {K::adamw, std::nullopt, "", "Muon keeps one momentum state for 2-D weights and AdamW's for the rest; the estimate counts AdamW for all"}},
      {"dion", true, {K::adamw, std::nullopt, "", "Dion keeps low-rank states; the estimate counts AdamW's full states"}},
      {"sinkgd", true, {K::adamw, std::nullopt, "", "SinkGD keeps no moment states; the estimate counts AdamW's (an over-estimate)"}},
      {"flash_adamw", true, {K::adamw, std::nullopt, "", "FlashOptim AdamW keeps compressed states; the estimate counts AdamW's full states"}},
      {"flash_adam", true, {K::adamw, std::nullopt, "", "FlashOptim Adam keeps compressed states; the estimate counts AdamW's full states"}},
      {"flash_sgd", true, {K::adamw, std::nullopt, "", "FlashOptim SGD keeps at most a compressed momentum; the estimate counts AdamW's states"}},
      {"flash_sgdw", true, {K::adamw, std::nullopt, "", "FlashOptim SGDW keeps at most a compressed momentum; the estimate counts AdamW's states"}},
      {"flash_lion", true, {K::adamw, std::nullopt, "", "FlashOptim Lion keeps one compressed state; the estimate counts AdamW's states"}},
      {"q_galore_adamw8bit", true, {K::adamw, std::nullopt, "", "Q-GaLore keeps quantized low-rank states; the estimate counts AdamW's full states"}},
  };
  return rows;
}

}  // namespace

std::optional<Optimizer> find_optimizer(const std::string& name, bool axolotl) {
  const std::string l = lower(name);
  for (const OptimizerRow& r : optimizer_rows())
    if (l == r.name && (axolotl || !r.axolotl_only)) return r.o;
  return std::nullopt;
}

std::vector<std::string> optimizer_names(bool axolotl) {
  std::vector<std::string> out;
  for (const OptimizerRow& r : optimizer_rows())
    if (axolotl || !r.axolotl_only) out.emplace_back(r.name);
  return out;
}

void read_optimizer(const Node& n, ReadState& st, bool axolotl, const Node* optim_args) {
  const std::string name = as_text(n);
  const auto o = find_optimizer(name, axolotl);
  if (!o) {
    const auto near = nearest(lower(name), optimizer_names(axolotl));
    throw InputError(n.where, fmt::format("unknown optimizer '{}'", name),
                     near.empty() ? fmt::format("{} names optimizers as transformers' OptimizerNames does (adamw_torch, "
                                                "adamw_torch_fused, adamw_bnb_8bit, paged_adamw_8bit, adafactor, sgd, ...)",
                                                axolotl ? "Axolotl" : "TrainingArguments")
                                  : fmt::format("did you mean {}?", fmt::join(near, ", ")));
  }
  if (o->unmodelled) {
    st.unmodelled(n, o->unmodelled);
    return;  // AdamW stays
  }
  OptimizerKind kind = o->kind;
  std::string text = o->counted_as;
  // optim_args "momentum=0.9": torch.optim.SGD keeps a momentum buffer.
  if (kind == OptimizerKind::sgd && optim_args && optim_args->kind == Node::Kind::scalar) {
    std::stringstream ss(optim_args->text);
    for (std::string kv; std::getline(ss, kv, ',');) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) continue;
      std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
      k.erase(0, k.find_first_not_of(" \t"));
      k.erase(k.find_last_not_of(" \t") + 1);
      if (k == "momentum" && std::strtod(v.c_str(), nullptr) > 0) {
        kind = OptimizerKind::sgd_momentum;
        text = "sgd with optim_args momentum > 0";
      }
    }
  }
  st.s().optimizer = kind;
  note(st, memplan::path(Choice::optimizer), n, text.empty() ? "" : fmt::format("{}: {}", n.path, text));
  if (o->impl) {
    st.s().runtime.optimizer_impl = *o->impl;
    note(st, memplan::path(Choice::optimizer_impl), n);
  }
}

// ---- attention ---------------------------------------------------------------------------------------

void read_attention(const Node& n, ReadState& st) {
  const std::string v = lower(as_text(n));
  auto set = [&](AttentionImpl a) {
    st.s().attention = a;
    note(st, memplan::path(Choice::attention), n);
  };
  if (v == "eager") return set(AttentionImpl::eager);
  if (v == "sdpa") return set(AttentionImpl::sdpa);
  // flash_attention_2/3 and the hub kernels (kernels-community/flash-attn, vllm-flash-attn3).
  if (v == "flash_attention_2" || v == "flash_attention_3" || (v.find('/') != std::string::npos && v.find("flash") != std::string::npos))
    return set(AttentionImpl::flash);
  if (v == "flex_attention" || v == "sage" || v == "xformers" || v == "fp8" || v.rfind("paged", 0) == 0 ||
      v.find('/') != std::string::npos)
    return st.unmodelled(n, "the estimate counts SDPA's saved tensors for it");
  throw InputError(n.where, fmt::format("unknown attn_implementation '{}'", as_text(n)),
                   "transformers accepts eager, sdpa, flash_attention_2, flash_attention_3, flex_attention or a hub "
                   "kernel (kernels-community/flash-attn)");
}

// ---- LoRA ------------------------------------------------------------------------------------------------

std::vector<std::string> lora_targets(const Node& n) {
  std::vector<std::string> out;
  for (const std::string& t : as_text_list(n)) {
    std::string m = t;
    for (const char* suffix : {"_proj"})
      if (ends_with(m, suffix) && (m == "q_proj" || m == "k_proj" || m == "v_proj" || m == "o_proj" || m == "gate_proj" ||
                                   m == "up_proj" || m == "down_proj"))
        m = m.substr(0, m.size() - 5);
    if (lower(m) == "all-linear" || lower(m) == "all_linear") m = "all-linear";
    out.push_back(m);
  }
  return out;
}

void read_modules_to_save(const Node& n, ReadState& st) {
  for (const std::string& m : as_text_list(n))
    if (const std::optional<Setting> id = detail::saved_module(m)) {
      field(*id).yes_no(st.s()) = true;
      note(st, memplan::path(*id), n);
    }
}

// ---- FSDP ------------------------------------------------------------------------------------------------

std::optional<FsdpWords> fsdp_words(const Node& n) {
  FsdpWords w;
  w.where = keyed(n);
  std::vector<std::string> words;
  if (n.kind == Node::Kind::scalar && !n.quoted) {
    const std::string t = lower(n.text);
    if (t == "true") return w;  // fsdp=True -> [full_shard]
    if (t == "false" || t.empty()) return std::nullopt;
  }
  if (n.kind == Node::Kind::list) {
    for (const Node& item : n.items) words.push_back(lower(as_text(item)));
  } else {
    std::stringstream ss(as_text(n));
    for (std::string word; ss >> word;) words.push_back(lower(word));
  }
  if (words.empty()) return std::nullopt;
  bool full = false, grad_op = false, strategy = false;
  for (const std::string& word : words) {
    if (word == "full_shard") full = strategy = true, w.mode = FsdpMode::full_shard;
    else if (word == "shard_grad_op") grad_op = strategy = true, w.mode = FsdpMode::shard_grad_op;
    else if (word == "no_shard") strategy = true, w.mode = FsdpMode::no_shard;
    else if (word == "hybrid_shard") strategy = true, w.mode = FsdpMode::hybrid_shard;
    else if (word == "hybrid_shard_zero2") strategy = true, w.mode = FsdpMode::hybrid_shard, w.zero2_hybrid = true;
    else if (word == "offload") w.offload = true;
    else if (word == "auto_wrap") continue;
    else
      throw InputError(n.where, fmt::format("unknown fsdp option '{}'", word),
                       "TrainingArguments.fsdp takes full_shard, shard_grad_op, no_shard, hybrid_shard, hybrid_shard_zero2, "
                       "offload and auto_wrap (e.g. \"full_shard auto_wrap\")");
  }
  if (full && grad_op)
    throw InputError(n.where, "fsdp: full_shard is not compatible with shard_grad_op",
                     fmt::format("name one sharding strategy ({} _process_fsdp_args)", kTrainingArgs));
  if (!strategy && w.offload)
    throw InputError(n.where, "fsdp: offload needs a sharding strategy beside it",
                     "write \"full_shard offload\" or \"shard_grad_op offload\" (TrainingArguments refuses offload alone)");
  return w;
}

std::optional<FsdpMode> fsdp_strategy(const std::string& text, bool* zero2_hybrid) {
  std::string t = lower(text);
  *zero2_hybrid = false;
  if (t == "1" || t == "full_shard") return FsdpMode::full_shard;
  if (t == "2" || t == "shard_grad_op") return FsdpMode::shard_grad_op;
  if (t == "3" || t == "no_shard") return FsdpMode::no_shard;
  if (t == "4" || t == "hybrid_shard") return FsdpMode::hybrid_shard;
  if (t == "5" || t == "hybrid_shard_zero2") {
    *zero2_hybrid = true;
    return FsdpMode::hybrid_shard;
  }
  return std::nullopt;
}

// The FSDP options the tools take under fsdp_config (without the fsdp_ prefix): accelerate's
// FullyShardedDataParallelPlugin and launch flags (src/accelerate/utils/dataclasses.py,
// src/accelerate/commands/launch.py @ v1.14.0), TrainingArguments' fsdp_config (min_num_params,
// xla_*) and Axolotl's FSDPConfig (src/axolotl/utils/schemas/fsdp.py @ v0.18.0).
const std::vector<std::string>& fsdp_option_names() {
  static const std::vector<std::string> k = {
      "version", "sharding_strategy", "reshard_after_forward", "backward_prefetch", "mixed_precision_policy",
      "auto_wrap_policy", "cpu_offload", "offload_params", "ignored_modules", "state_dict_type", "final_state_dict_type",
      "state_dict_config", "optim_state_dict_config", "limit_all_gathers", "use_orig_params", "param_init_fn",
      "sync_module_states", "forward_prefetch", "activation_checkpointing", "cpu_ram_efficient_loading",
      "cpu_offload_pin_memory", "transformer_cls_names_to_wrap", "transformer_layer_cls_to_wrap", "min_num_params", "xla",
      "xla_fsdp_settings", "xla_fsdp_grad_ckpt", "xla_fsdp_v2"};
  return k;
}

void check_fsdp_option_names(const Node& cfg, ReadState& st) {
  if (cfg.kind != Node::Kind::map) return;
  const std::vector<std::string>& known = fsdp_option_names();
  for (const auto& [key, value] : cfg.entries) {
    const bool prefixed = key.rfind("fsdp_", 0) == 0;
    const std::string bare = prefixed ? key.substr(5) : key;
    if (std::find(known.begin(), known.end(), bare) != known.end()) continue;
    if (const auto guess = near_miss(bare, known))
      st.out.warnings.push_back({value.where, fmt::format("unknown key '{}'", value.path.empty() ? key : value.path),
                                 fmt::format("did you mean '{}{}'?", prefixed ? "fsdp_" : "", *guess)});
  }
}

Node fsdp_config(const Node& n, ReadState& st) {
  Node cfg = n;
  if (n.kind == Node::Kind::scalar) {
    const std::string text = as_text(n);
    if (!text.empty() && text[0] == '{') {
      cfg = parse_json(text, st.path);
    } else {
      const std::string path = find_beside(n, text, st, "fsdp_config", "fsdp_config names a JSON file of FSDP options");
      cfg = parse_json(read_text_file(path), path);
    }
  }
  if (cfg.kind != Node::Kind::map) not_a_map(cfg);
  check_fsdp_option_names(cfg, st);
  for (auto& [key, value] : cfg.entries)
    if (key.rfind("fsdp_", 0) == 0 && key != "fsdp_version") key = key.substr(5);
  return cfg;
}

// ---- DeepSpeed -----------------------------------------------------------------------------------------

std::string find_beside(const Node& n, const std::string& relative, ReadState& st, const char* what, const std::string& hint) {
  std::error_code ec;
  const fs::path here = st.beside(relative);
  if (fs::is_regular_file(here, ec)) return here.lexically_normal().string();
  if (fs::path(relative).is_relative() && fs::is_regular_file(relative, ec)) return relative;
  throw InputError(n.where, fmt::format("{}: '{}' does not exist", what, relative),
                   fmt::format("{}; memplan looks for it beside this file ({}) and in the working directory", hint,
                               here.lexically_normal().string()));
}

namespace {

constexpr const char* kFill =
    "transformers src/transformers/integrations/deepspeed.py @ v4.46+ HfTrainerDeepSpeedConfig.trainer_config_process "
    "(fill_match: \"auto\" takes the TrainingArguments value)";

// The DeepSpeed "enabled" switch of a bf16/fp16 section: explicit, "auto", or the section absent.
enum class Toggle { absent, off, on, automatic };
Toggle half_switch(const Node& root, std::initializer_list<const char*> names, const Node** where) {
  for (const char* name : names) {
    const Node* section = root.find(name);
    if (!section) continue;
    *where = section;
    if (section->kind != Node::Kind::map) not_a_map(*section);
    const Node* on = section->find("enabled");
    if (!on) return Toggle::off;  // DeepSpeed's "enabled" defaults to false
    *where = on;
    if (on->kind == Node::Kind::scalar && on->text == "auto") return Toggle::automatic;
    return as_bool(*on) ? Toggle::on : Toggle::off;
  }
  return Toggle::absent;
}

void copy_field(ReadState& st, const LoadedConfig& from, const std::string& field) {
  if (const auto it = from.origin.fields.find(field); it != from.origin.fields.end()) st.out.origin.set(field, it->second);
}

}  // namespace

DeepSpeedRead apply_deepspeed(const Node& root, const std::string& path, ReadState& st, const DeepSpeedFill& fill,
                              const Node& named_by) {
  const DeepSpeedConfig d = read_deepspeed_config(root, path, st.file);
  const TrainingSetup& ds = d.cfg.setup;
  TrainingSetup& s = st.s();
  DeepSpeedRead r;
  // ZeRO and its buckets, as DeepSpeed reads them.
  s.parallel.zero_stage = ds.parallel.zero_stage;
  s.parallel.offload = ds.parallel.offload;
  copy_field(st, d.cfg, memplan::path(Count::zero_stage));
  copy_field(st, d.cfg, memplan::path(Choice::offload));
  // Its zero_optimization settings (the buckets, overlap_comm, contiguous_gradients: estimator/fields.h),
  // and where it states them, the offload's pin_memory and the bf16/fp16 sections' master state.
  for (const SettingField& f : setting_fields()) {
    const bool zero = f.section && std::string(f.section) == kZeroSection;
    const bool stated = f.id == Setting::offload_pin_memory || f.id == Setting::half_master || f.id == Setting::half_optimizer_states;
    if (!zero && !(stated && d.cfg.origin.fields.count(f.path))) continue;
    if (f.whole) f.whole(s) = f.get(ds);
    else f.yes_no(s) = f.get(ds) != 0;
    copy_field(st, d.cfg, f.path);
  }
  // AutoTP training's degree (tensor_parallel.autotp_size), which the HF Trainer passes through.
  if (d.cfg.origin.fields.count(memplan::path(Count::tensor_parallel))) {
    s.parallel.tensor_parallel = ds.parallel.tensor_parallel;
    copy_field(st, d.cfg, memplan::path(Count::tensor_parallel));
  }
  if (!d.cfg.origin.fields.count(memplan::path(Count::zero_stage))) note(st, memplan::path(Count::zero_stage), named_by, "DeepSpeed config without zero_optimization.stage: ZeRO stage 0");
  if (!d.cfg.origin.fields.count(memplan::path(Setting::overlap_comm))) default_overlap_comm(st);
  // DeepSpeed's own optimizer block: DeepSpeed builds it (FusedAdam for Adam/AdamW).
  if (d.cfg.origin.fields.count(memplan::path(Choice::optimizer))) {
    s.optimizer = ds.optimizer;
    copy_field(st, d.cfg, memplan::path(Choice::optimizer));
    r.optimizer_block = true;
    st.out.origin.fields.erase(memplan::path(Choice::optimizer_impl));
    if (d.cfg.origin.fields.count(memplan::path(Choice::optimizer_impl))) {  // torch_adam: torch.optim's AdamW, not FusedAdam
      s.runtime.optimizer_impl = ds.runtime.optimizer_impl;
      copy_field(st, d.cfg, memplan::path(Choice::optimizer_impl));
    }
  }
  // Micro-batch and accumulation: "auto" takes the launcher's value; an explicit one must match it.
  auto batch = [&](const char* field, int64_t Batch::*slot, const std::optional<int64_t>& theirs, const char* their_key) {
    const auto it = d.cfg.origin.fields.find(field);
    if (it == d.cfg.origin.fields.end()) return;
    const int64_t ours = ds.batch.*slot;
    if (theirs && fill.must_match && ours != *theirs)
      throw InputError(it->second,
                       fmt::format("{} is {} in the DeepSpeed config but {} is {}", it->second.key, ours, their_key, *theirs),
                       fmt::format("the HF Trainer refuses DeepSpeed values that differ from TrainingArguments ({}); write "
                                   "\"auto\" or the same value",
                                   kFill));
    if (!theirs) {
      s.batch.*slot = ours;
      st.out.origin.set(field, it->second);
    }
  };
  batch(memplan::path(Count::micro_batch), &Batch::micro_batch, fill.micro_batch, "per_device_train_batch_size");
  batch(memplan::path(Count::grad_accum), &Batch::grad_accum, fill.grad_accum, "gradient_accumulation_steps");
  // Precision: DeepSpeed's bf16/fp16 sections. "auto" takes the launcher's flag; an absent section
  // is added by accelerate when the launcher runs mixed precision (DeepSpeedPlugin.set_mixed_precision,
  // src/accelerate/utils/dataclasses.py @ v1.14.0 L1413-1440).
  const Node* bf_where = &named_by;
  const Node* fp_where = &named_by;
  const Toggle bf = half_switch(root, {"bf16", "bfloat16"}, &bf_where);
  const Toggle fp = half_switch(root, {"fp16"}, &fp_where);
  auto check = [&](Toggle sw, bool theirs, const Node* at, const std::string& their_key) {
    if (!fill.must_match || (sw != Toggle::on && sw != Toggle::off)) return;
    if ((sw == Toggle::on) != theirs)
      throw InputError(at->where,
                       fmt::format("{} is {} in the DeepSpeed config but {} is {}", at->path, sw == Toggle::on ? "true" : "false",
                                   their_key, theirs ? "true" : "false"),
                       fmt::format("the HF Trainer refuses DeepSpeed values that differ from TrainingArguments ({}); write "
                                   "\"auto\" or the same value",
                                   kFill));
  };
  check(bf, fill.bf16, bf_where, fill.bf16_key);
  check(fp, fill.fp16, fp_where, fill.fp16_key);
  const bool bf_on = bf == Toggle::on || ((bf == Toggle::automatic || bf == Toggle::absent) && fill.bf16);
  const bool fp_on = fp == Toggle::on || ((fp == Toggle::automatic || fp == Toggle::absent) && fill.fp16);
  if (bf_on && fp_on)
    throw InputError(fp_where->where, "the DeepSpeed config enables both bf16 and fp16",
                     "DeepSpeed trains in one 16-bit type: enable one of them");
  const Node* at = bf_on ? bf_where : fp_on ? fp_where : bf != Toggle::absent ? bf_where : fp_where;
  r.precision = bf_on ? Precision::mixed_bf16 : fp_on ? Precision::mixed_fp16 : Precision::fp32;
  r.precision_where = at->where;
  const bool from_launcher = (bf_on && bf != Toggle::on) || (fp_on && fp != Toggle::on);
  r.precision_text = from_launcher ? fmt::format("{} (DeepSpeed {} from {})", at->path, bf_on ? "bf16" : "fp16",
                                                 bf_on ? fill.bf16_key : fill.fp16_key)
                                   : at->path;
  // Bucket sizes left "auto" are filled from the hidden size when the setup is built.
  for (const auto& [key, where] : d.auto_values) {
    if (ends_with(key, "reduce_bucket_size")) st.out.auto_reduce_bucket = where;
    if (ends_with(key, "prefetch_bucket_size")) st.out.auto_prefetch_bucket = where;
  }
  st.out.warnings.insert(st.out.warnings.end(), d.cfg.warnings.begin(), d.cfg.warnings.end());
  s.runtime.framework = Framework::deepspeed;
  note(st, memplan::path(Choice::framework), named_by, fmt::format("{} (the DeepSpeed engine runs the step)", named_by.path));
  return r;
}

DeepSpeedRead read_deepspeed(const Node& value, ReadState& st, const DeepSpeedFill& fill) {
  if (value.kind == Node::Kind::map) return apply_deepspeed(value, st.path, st, fill, value);
  const std::string text = as_text(value);
  if (!text.empty() && text[0] == '{') return apply_deepspeed(parse_json(text, st.path), st.path, st, fill, value);
  const std::string path = find_beside(value, text, st, "deepspeed",
                                       "deepspeed names a DeepSpeed config JSON (the HF Trainer opens it relative to the "
                                       "working directory)");
  return apply_deepspeed(parse_json(read_text_file(path), path), path, st, fill, value);
}

}  // namespace memplan::profiles::detail::hf
