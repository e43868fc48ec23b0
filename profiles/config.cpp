// Training configs -> LoadedConfig: memplan YAML in every dialect of the memory guides (sectioned like Ava's
// model/training/data/deepspeed/memory, flat like GSA's and Gearhead's, NeMo's policy:), DeepSpeed
// ds_config.json, and a bare HF config.json. Each section is a table of known keys (with the
// aliases the memory guides use); facts that several keys can state (precision, checkpointing,
// fine-tuning mode) are collected while reading and resolved once the whole file is read.
#include <climits>
#include <filesystem>
#include <cstdio>
#include <set>

#include "profiles/detail.h"
#include "profiles/formats.h"
#include "profiles/hub.h"

namespace memplan::profiles {
namespace fs = std::filesystem;

Where Provenance::of(const std::string& field) const {
  const auto it = fields.find(field);
  return it == fields.end() ? Where{} : it->second;
}

std::string Provenance::text_of(const std::string& field) const {
  if (const auto it = fields.find(field); it != fields.end()) return it->second.key;
  const auto d = defaults.find(field);
  return d == defaults.end() ? "" : d->second;
}

void Provenance::set_text(const std::string& field, const std::string& text) {
  if (const auto it = fields.find(field); it != fields.end()) it->second.key = text;
  else defaults[field] = text;
}

namespace detail {

// The module names PEFT's modules_to_save takes for them: Llama's, GPT-2's and GPT-NeoX's
// embeddings; the causal LM head, the sequence-classification head (score) and BERT's classifier.
std::optional<Setting> saved_module(const std::string& module) {
  if (module == "embed_tokens" || module == "wte" || module == "embed_in") return Setting::train_embeddings;
  if (module == "lm_head" || module == "score" || module == "classifier") return Setting::train_head;
  return std::nullopt;
}

namespace {

template <class T>
struct Fact {
  T value;
  Where where;
};

// A key's position with its dotted path, for provenance ("cfg.yaml:7:3 (training.micro_batch_size)").
Where keyed(const Node& n) {
  Where w = n.where;
  w.key = n.path;
  return w;
}

struct ConfigState {
  std::string path;  // the name messages give the file: as the user gave it, or "REV:path"
  fs::path file;     // the file on disk: an inline model is named after it
  fs::path dir;      // the folder relative paths resolve against: the file's, or that of the
                     // DeepSpeed file being read (deepspeed: FILE)
  std::vector<std::string> reading;  // the files being read, outermost first (cycles, depth)
  LoadedConfig out;

  // Facts several keys may state; resolve() turns them into setup fields.
  std::optional<Fact<std::string>> precision;        // precision: (memplan or dtype names)
  std::optional<Fact<std::string>> mixed_precision;  // mixed_precision: fp16|bf16|true|false
  std::optional<Fact<bool>> bf16, fp16;              // HF TrainingArguments flags (autocast)
  std::optional<Fact<std::string>> torch_dtype;      // HF/TRL model loading dtype (16-bit weights)
  std::optional<Fact<Checkpointing>> checkpointing;
  std::optional<Fact<int64_t>> checkpoint_every;     // NeMo: one checkpointed layer in K
  std::optional<Fact<bool>> use_deepspeed;
  std::optional<Fact<FinetuneMode>> method;
  std::optional<Where> adapters;                     // a lora: section or LoRA keys were given
  std::optional<Where> load_in_4bit, load_in_8bit;
  std::set<std::string> model_given;                 // model.* fields the file sets inline
  std::vector<std::string> auto_keys;                // DeepSpeed "auto" values left to defaults
  std::vector<Where> auto_where;                     // their positions
  Where first_auto;
  const Node* autotp = nullptr;                      // DeepSpeed tensor_parallel.autotp_size, when read

  TrainingSetup& s() { return out.setup; }
  template <class T, class V>
  void set(const char* field, T& slot, V value, const Node& n) {
    slot = static_cast<T>(value);
    note(field, n);
  }
  // A switch of the registry (estimator/fields.h).
  void set(Switch id, bool value, const Node& n) {
    memplan::field(id).set(s(), value);
    note(memplan::path(id), n);
  }
  // Records that `field` came from key `n` (its position and dotted path).
  void note(const std::string& field, const Node& n) { out.origin.set(field, keyed(n)); }
  template <class T, class V>
  void set_model(T ModelSpec::*member, V value, const Node& n) {
    set(memplan::path(member), s().model.*member, value, n);
    model_given.insert(memplan::path(member));
  }
};

using Table = KeyTable<ConfigState>;

// ---- facts ------------------------------------------------------------------------------------

int specificity(const Checkpointing& c) {
  return c.mode == CheckpointMode::none ? 0 : c.mode == CheckpointMode::full ? 1 : 2;
}
// Several keys switch checkpointing (gradient_checkpointing, activation_checkpointing, DeepSpeed's):
// any of them on means on, and a named mode (selective, every:K) beats a plain true.
void note_checkpointing(ConfigState& st, const Checkpointing& c, const Node& n) {
  if (!st.checkpointing || specificity(c) >= specificity(st.checkpointing->value))
    st.checkpointing = Fact<Checkpointing>{c, keyed(n)};
}
void note_checkpointing_flag(const Node& n, ConfigState& st) {
  Checkpointing c;
  if (as_bool(n)) c.mode = CheckpointMode::full;
  note_checkpointing(st, c, n);
}
// checkpoint_layers: [0, 4, 8] or "0,4,8": these (0-based) layers checkpointed, the others not.
void note_checkpoint_layers(const Node& n, ConfigState& st) {
  std::vector<std::string> items;
  if (n.kind == Node::Kind::list)
    for (const Node& i : n.items) items.push_back(std::to_string(as_int(i)));
  else
    items = as_text_list(n);
  const auto c = parse_checkpointing("layers:" + fmt::format("{}", fmt::join(items, ",")));
  if (!c || c->layers.empty())
    throw InputError(n.where, fmt::format("{} must list layer indices (0-based), e.g. [0, 4, 8]", n.path),
                     "the layers whose activations are recomputed in backward");
  note_checkpointing(st, *c, n);
}

void note_checkpointing_mode(const Node& n, ConfigState& st) {
  note_checkpointing(st, as_choice<Checkpointing>(n, field(Choice::checkpointing).what, parse_checkpointing,
                                                  {"none", "full", "selective", "every:K", "true", "false"}),
                     n);
}

// Offload only grows: any key asking for it turns it on.
void raise_offload(ConfigState& st, Offload o, const Node& n) {
  const Offload both = offload_union(st.s().parallel.offload, o);
  if (both != st.s().parallel.offload) st.set(memplan::path(Choice::offload), st.s().parallel.offload, both, n);
}

void set_attention(const Node& n, ConfigState& st) {
  st.set(memplan::path(Choice::attention), st.s().attention, as_choice<AttentionImpl>(n, field(Choice::attention).what, parse_attention, attention_names()), n);
}

void set_flash(const Node& n, ConfigState& st) {
  if (as_bool(n)) st.set(memplan::path(Choice::attention), st.s().attention, AttentionImpl::flash, n);
}

void set_optimizer(const Node& n, ConfigState& st) {
  const Node* v = &n;
  if (n.kind == Node::Kind::map) {  // optimizer: {name: adamw, lr: ...} / DeepSpeed {type: AdamW}
    v = n.find("name") ? n.find("name") : n.find("type");
    if (!v) return;
  }
  st.set(memplan::path(Choice::optimizer), st.s().optimizer, as_choice<OptimizerKind>(*v, field(Choice::optimizer).what, parse_optimizer, optimizer_names()), *v);
}

// DeepSpeed's optimizer block: DeepSpeed builds its FusedAdam for Adam/AdamW, or torch.optim's own
// with params.torch_adam (deepspeed/runtime/engine.py _configure_basic_optimizer: torch.optim.AdamW,
// which steps with its foreach kernels on CUDA).
void set_ds_optimizer(const Node& n, ConfigState& st) {
  set_optimizer(n, st);
  if (n.kind != Node::Kind::map) return;
  const Node* params = n.find("params");
  const Node* torch_adam = params && params->kind == Node::Kind::map ? params->find("torch_adam") : nullptr;
  if (torch_adam && as_bool(*torch_adam))
    st.set(memplan::path(Choice::optimizer_impl), st.s().runtime.optimizer_impl, OptimizerImpl::foreach, *torch_adam);
}

void set_global_batch(const Node& n, ConfigState& st) {
  st.set(path(Setting::global_batch), st.out.global_batch, as_count(n), n);
}

// parallel.zero_stage is an int; a value beyond it is reported here with the wording validate() uses.
int as_zero_stage(const Node& n) {
  const int64_t stage = as_int(n);
  if (stage < INT_MIN || stage > INT_MAX) {  // validate() would see a wrapped int: its words here
    const Problem p = *zero_stage_problem(stage);
    throw InputError(n.where, fmt::format("{}: {}", p.field, p.message), p.hint);
  }
  return static_cast<int>(stage);
}

// ---- key factories: one row per key in the tables below ---------------------------------------

// A switch of the registry (estimator/fields.h) under its key and aliases.
Key<ConfigState> switch_key(Switch id) {
  const SwitchField& f = field(id);
  std::vector<std::string> names = {f.key()};
  for (const char* a : f.aliases)
    if (a) names.emplace_back(a);
  return {std::move(names), [id](const Node& n, ConfigState& st) { st.set(id, as_bool(n), n); }};
}
// A count of the registry under its keys, read as the row says (estimator/fields.h CountRead).
Key<ConfigState> count_key(Count id) {
  const CountField& f = field(id);
  std::vector<std::string> names;
  for (const char* k : f.keys)
    if (k) names.emplace_back(k);
  return {std::move(names), [id](const Node& n, ConfigState& st) {
            const CountField& c = field(id);
            const int64_t v = c.read == CountRead::whole     ? as_field_count(n)
                              : c.read == CountRead::integer ? as_int(n)
                              : c.read == CountRead::stage   ? as_zero_stage(n)
                                                             : as_count(n);
            c.set(st.s(), v);
            st.note(c.path, n);
            if (id == Count::lora_rank) st.adapters = n.where;  // a rank says adapters are trained (LoRA unless stated)
          }};
}
// A choice of the registry under its key: one of its names, else "unknown <what> 'x'" at the value.
Key<ConfigState> choice_key(Choice id) {
  return {{field(id).key}, [id](const Node& n, ConfigState& st) {
            const ChoiceField& c = field(id);
            const std::string v = as_text(n);
            if (!c.set(st.s(), v))
              throw InputError(n.where, fmt::format("unknown {} '{}'", c.what, clip(v)), c.refusal_hint());
            st.note(c.path, n);
          }};
}
double as_fraction(const Node& n) {
  const double v = as_number(n);
  if (!(v > 0 && v <= 1)) type_error(n, "a fraction in (0, 1]");
  return v;
}
// A number of the registry under its keys: any number (validate() bounds it) or a fraction in (0, 1].
Key<ConfigState> number_key(Number id) {
  std::vector<std::string> names;
  for (const char* k : field(id).keys)
    if (k) names.emplace_back(k);
  return {std::move(names), [id](const Node& n, ConfigState& st) {
            const NumberField& f = field(id);
            f.set(st.s(), f.read == NumberRead::fraction ? as_fraction(n) : as_number(n));
            st.note(f.path, n);
          }};
}
// A list of the registry under its keys: a YAML list or "a,b,c". The LoRA targets say adapters are
// trained (LoRA unless stated).
Key<ConfigState> list_key(List id) {
  std::vector<std::string> names;
  for (const char* k : field(id).keys)
    if (k) names.emplace_back(k);
  return {std::move(names), [id](const Node& n, ConfigState& st) {
            const ListField& f = field(id);
            f.set(st.s(), as_text_list(n));
            st.note(f.path, n);
            if (id == List::lora_targets) st.adapters = n.where;
          }};
}
// A release of the registry under its keys: "2.6", "5.17.0"; refused at the value naming the key's path.
Key<ConfigState> version_key(Version id) {
  std::vector<std::string> names;
  for (const char* k : field(id).keys) names.emplace_back(k);
  return {std::move(names), [id](const Node& n, ConfigState& st) {
            const VersionField& f = field(id);
            const auto [major, minor] = read_version(f, as_text(n), n.where, f.path);
            f.set(st.s(), major, minor);
            st.note(f.path, n);
            // torch 1.x's Optimizer.zero_grad() defaults to set_to_none=False (gradients stay allocated).
            if (id == Version::torch && !st.out.origin.fields.count(path(Switch::zero_grad_set_to_none)))
              st.s().runtime.zero_grad_set_to_none = major >= 2;
          }};
}

// The settings read by their keys in file section `section` (estimator/fields.h: "training", "data",
// "zero_optimization"), in row order: a whole number (as_int, its range left to validate()) or a
// yes/no, noted at the key.
Table setting_keys(const char* section) {
  Table t;
  for (const SettingField& f : setting_fields()) {
    if (!f.section || std::string(f.section) != section) continue;
    std::vector<std::string> names;
    for (const char* k : f.keys)
      if (k) names.emplace_back(k);
    t.push_back({std::move(names), [id = f.id](const Node& n, ConfigState& st) {
                   const SettingField& row = field(id);
                   if (row.whole) st.set(row.path, row.whole(st.s()), as_int(n), n);
                   else st.set(row.path, row.yes_no(st.s()), as_bool(n), n);
                 }});
  }
  return t;
}

// `t` with the registry's counts, choices, numbers, lists and settings read in memplan YAML section `section` ("training",
// "data", "hardware", "finetune"; "runtime" also its versions), its switches of setup section `switches` ("runtime": runtime.*;
// nullptr: none) and the `more` switches of other sections a dialect puts here.
Table with_fields(Table t, const char* section, std::initializer_list<Switch> more = {}, const char* switches = nullptr) {
  for (const CountField& f : count_fields())
    if (std::string(f.section) == section) t.push_back(count_key(f.id));
  for (const ChoiceField& f : choice_fields())
    if (f.read == ChoiceRead::key && std::string(f.section) == section) t.push_back(choice_key(f.id));  // else: own handlers
  for (const NumberField& f : number_fields())
    if (std::string(f.section) == section) t.push_back(number_key(f.id));
  for (const ListField& f : list_fields())
    if (std::string(f.section) == section) t.push_back(list_key(f.id));
  if (std::string(section) == "runtime")
    for (const VersionField& f : version_fields()) t.push_back(version_key(f.id));
  if (switches)
    for (const SwitchField& f : switch_fields())
      if (f.section() == switches) t.push_back(switch_key(f.id));
  for (Switch id : more) t.push_back(switch_key(id));
  for (Key<ConfigState>& k : setting_keys(section)) t.push_back(std::move(k));
  return t;
}

// A key read with `read` into the setup field setup.*outer.*inner, noted as `field`.
template <class Outer, class T, class Read>
Key<ConfigState> setup_key(std::vector<std::string> names, const char* field, Outer TrainingSetup::*outer,
                           T Outer::*inner, Read read) {
  return {std::move(names), [=](const Node& n, ConfigState& st) { st.set(field, st.s().*outer.*inner, read(n), n); }};
}
// A key read into a model field set inline (it overrides a preset's value).
template <class T, class Read>
Key<ConfigState> model_key(std::vector<std::string> names, T ModelSpec::*member, Read read) {
  return {std::move(names), [=](const Node& n, ConfigState& st) { st.set_model(member, read(n), n); }};
}
// A key stating one of the facts resolved after the whole file is read.
template <class T, class Read>
Key<ConfigState> fact_key(std::vector<std::string> names, std::optional<Fact<T>> ConfigState::*fact, Read read) {
  return {std::move(names), [=](const Node& n, ConfigState& st) { st.*fact = Fact<T>{read(n), keyed(n)}; }};
}
// A switch that, when true, asks for at least `what` offload.
Key<ConfigState> offload_switch(std::vector<std::string> names, Offload what) {
  return {std::move(names), [=](const Node& n, ConfigState& st) { if (as_bool(n)) raise_offload(st, what, n); }};
}
// Keys of the guides' dialects that set the training loop, not its memory: read past quietly.
const std::vector<std::string>& neutral_keys() {
  static const std::vector<std::string> k = {
      "learning_rate", "lr", "min_lr", "weight_decay", "warmup_steps", "warmup_ratio", "warmup_iters", "lr_scheduler_type",
      "lr_scheduler", "scheduler", "adam_beta1", "adam_beta2", "adam_epsilon", "betas", "eps", "max_grad_norm",
      "gradient_clipping", "grad_clip", "num_train_epochs", "epochs", "num_epochs", "max_steps", "max_iters", "seed",
      "logging_steps", "log_interval", "save_steps", "save_strategy", "save_total_limit", "eval_steps", "eval_strategy",
      "evaluation_strategy", "eval_interval", "output_dir", "run_name", "report_to", "wandb", "logging", "log_level",
      "hub_model_id", "push_to_hub", "dataset", "datasets", "dataset_name", "dataset_path", "tokenizer", "name",
      "description", "notes", "comment", "version", "label_smoothing", "dropout", "loss_scaling", "model_parallel",
      "persistent_workers"};
  return k;
}

// memplan's own YAML: every key of a section that none of its tables reads is said (the estimate is
// made without it), unless read_section already named the key it is one typo from, or it is one of
// the loop's settings that hold no memory (neutral_keys). Other formats' readers warn only about
// near misses and keys named like memory settings: their files carry the whole tool's vocabulary.
void read_own(const Node& n, std::initializer_list<const Table*> tables, ConfigState& st) {
  read_section(n, tables, st, &st.out.warnings);
  if (n.kind != Node::Kind::map) return;
  std::vector<std::string> known;
  for (const Table* t : tables)
    for (const auto& k : *t) known.insert(known.end(), k.names.begin(), k.names.end());
  const std::vector<std::string>& neutral = neutral_keys();
  constexpr size_t kSaid = 20;  // each said; past these, one warning counts the rest
  size_t checked = 0, said = 0, more = 0;
  const Node* first_more = nullptr;
  for (const auto& [key, value] : n.entries) {
    if (std::find(known.begin(), known.end(), key) != known.end() || std::find(neutral.begin(), neutral.end(), key) != neutral.end())
      continue;
    if (checked++ >= kMaxNearMissChecks) {
      ++more;
      continue;
    }
    if (near_miss(key, known)) continue;  // read_section's "did you mean"
    if (said == kSaid) {
      if (!more++) first_more = &value;
      continue;
    }
    ++said;
    std::vector<std::string> shown(known.begin(), known.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(known.size(), 12)));
    st.out.warnings.push_back({value.where, fmt::format("unknown key '{}': memplan does not read it; the estimate is made without it", clip(key)),
                               fmt::format("keys read here: {}{}", fmt::join(shown, ", "), known.size() > shown.size() ? ", ..." : "")});
  }
  if (more > 0)
    st.out.warnings.push_back({first_more ? first_more->where : n.where,
                               fmt::format("{} more keys here that memplan does not read", more), "the estimate is made without them"});
}

// A subsection read with its own table.
Key<ConfigState> section(std::vector<std::string> names, const Table& (*table)()) {
  return {std::move(names), [=](const Node& n, ConfigState& st) { read_own(n, {&table()}, st); }};
}

// Counts whose zero has no meaning validate() could report (checkpoint_every: K).
int64_t as_positive(const Node& n) {
  const int64_t v = as_count(n);
  if (v < 1) type_error(n, "a positive integer");
  return v;
}

// ---- tables -----------------------------------------------------------------------------------

void read_model(const Node& n, ConfigState& st);
void resolve(ConfigState& st);
void read_deepspeed_file(const Node& n, ConfigState& st);
void use_model(ConfigState& st, const ReadModel& m, const Where& named_at);
void use_named_model(ConfigState& st, const std::string& name, const Where& at);

const Table& model_keys() {
  static const Table t = {
      {{"preset", "hf_config", "name", "model_type"}, [](const Node&, ConfigState&) {}},  // read first, in read_model
      model_key({"hidden_size", "d_model"}, &ModelSpec::hidden_size, as_field_count),
      model_key({"num_layers", "num_hidden_layers", "n_layers", "n_layer"}, &ModelSpec::num_layers,
                as_field_count),
      model_key({"num_attention_heads", "num_heads", "n_heads", "n_head", "attention_heads"}, &ModelSpec::num_attention_heads, as_field_count),
      model_key({"num_key_value_heads", "num_kv_heads"}, &ModelSpec::num_key_value_heads,
                as_field_count),
      model_key({"head_dim", "attention_head_dim"}, &ModelSpec::head_dim, as_field_count),
      model_key({"intermediate_size", "d_ffn", "ffn_hidden_size", "n_inner"}, &ModelSpec::intermediate_size, as_field_count),
      model_key({"vocab_size"}, &ModelSpec::vocab_size, as_field_count),
      model_key({"max_position_embeddings"}, &ModelSpec::max_position_embeddings, as_field_count),
      model_key({"num_experts", "num_local_experts"}, &ModelSpec::num_experts, as_int),
      model_key({"num_experts_per_token", "num_experts_per_tok", "experts_per_token", "top_k"}, &ModelSpec::experts_per_token, as_field_count),
      model_key({"capacity_factor", "expert_capacity_factor"}, &ModelSpec::capacity_factor, as_number),
      model_key({"moe_intermediate_size"}, &ModelSpec::moe_intermediate_size, as_field_count),
      model_key({"num_shared_experts"}, &ModelSpec::num_shared_experts, as_int),
      model_key({"activation", "hidden_act"}, &ModelSpec::activation, as_activation),
      model_key({"gated_mlp"}, &ModelSpec::gated_mlp, as_bool),
      model_key({"tie_word_embeddings"}, &ModelSpec::tie_word_embeddings, as_bool),
      model_key({"attention_dropout"}, &ModelSpec::attention_dropout, as_number),
      model_key({"hidden_dropout"}, &ModelSpec::hidden_dropout, as_number),
      {{"dropout"}, [](const Node& n, ConfigState& st) {
         const double p = as_number(n);
         st.set_model(&ModelSpec::attention_dropout, p, n);
         st.set_model(&ModelSpec::hidden_dropout, p, n);
         st.set_model(&ModelSpec::embedding_dropout, p, n);
       }},
      {{"norm"}, [](const Node& n, ConfigState& st) {
         const std::string v = lower(as_text(n));
         if (v != "layer_norm" && v != "layernorm" && v != "rms_norm" && v != "rmsnorm")
           throw InputError(n.where, fmt::format("unknown norm '{}'", as_text(n)), "expected one of: layer_norm, rms_norm");
         const bool rms = v.rfind("rms", 0) == 0;
         st.set_model(&ModelSpec::norm, rms ? NormKind::rms_norm : NormKind::layer_norm, n);
         st.s().model.norm_bias = !rms;  // RMSNorm never has a bias
       }},
      {{"use_flash_attention"}, set_flash},
      {{field(Choice::attention).key, "attention_type", "attn_implementation"}, set_attention},
      {{"deepspeed_activation_checkpointing"}, note_checkpointing_flag},
  };
  return t;
}

const Table& training_keys() {
  static const Table t = with_fields({
      {{"global_batch_size"}, set_global_batch},
      // The training's choices (estimator/fields.h) under the keys the memplan YAML writer uses, with
      // the other ways a file states them (mixed_precision, bf16, torch_dtype, ...) resolved below.
      fact_key({field(Choice::precision).key}, &ConfigState::precision, as_text),
      fact_key({"mixed_precision"}, &ConfigState::mixed_precision, as_text),
      fact_key({"bf16"}, &ConfigState::bf16, as_bool),
      fact_key({"fp16"}, &ConfigState::fp16, as_bool),
      {{field(Choice::optimizer).key, "optim"}, set_optimizer},
      {{field(Choice::checkpointing).key}, note_checkpointing_mode},
      fact_key({"torch_dtype"}, &ConfigState::torch_dtype, as_text),
      // HF/TRL ModelConfig names the model by its hub id (memplan presets accept it as an alias).
      {{"model_name_or_path"}, [](const Node& n, ConfigState& st) { use_named_model(st, as_text(n), n.where); }},
      {{"activation_checkpointing"}, note_checkpointing_flag},
      // The NeMo RL memory guide's policy: keys. checkpoint_every, checkpoint_layers,
      // offload_optimizer and offload_activations are that guide's own: no release of NVIDIA/NeMo
      // (@ 8cfedd72), NeMo-RL (@ 54bec9d) or Megatron-LM (@ d98e8a64) has them, so they are read as
      // the guide means them (one layer in K checkpointed; these layers checkpointed; activations to
      // the host), wherever a memplan file puts them.
      fact_key({"checkpoint_every"}, &ConfigState::checkpoint_every, as_positive),
      {{"checkpoint_layers"}, note_checkpoint_layers},
      offload_switch({"offload_optimizer"}, Offload::optimizer),
      {{field(Choice::offload).key}, [](const Node& n, ConfigState& st) {
         const Offload o = as_choice<Offload>(n, field(Choice::offload).what, parse_offload, offload_names());
         // `offload: none` states nothing offloaded: noted at its line unless another key offloads.
         if (o == Offload::none && !st.out.origin.fields.count(path(Choice::offload))) st.note(path(Choice::offload), n);
         raise_offload(st, o, n);
       }},
      {{"use_flash_attention"}, set_flash},
      {{field(Choice::attention).key, "attention_type", "attn_implementation"}, set_attention},
  }, "training", {Switch::activation_offload}, "parallel");
  return t;
}

const Table& data_keys() {
  static const Table t = with_fields({}, "data");
  return t;
}

const Table& hardware_keys() {
  static const Table t = with_fields({
      {{field(Target::gpu).key}, [](const Node& n, ConfigState& st) { st.set(memplan::path(Target::gpu), st.out.gpu, as_text(n), n); }},
      // The sizes of the registry (estimator/fields.h), each kept where its rule applies it
      // (profiles/build.cpp): the card's memory and the cap with the target, the RAM in the setup.
      {{field(Size::gpu_memory).key}, [](const Node& n, ConfigState& st) {
         const int64_t bytes = as_size(n);
         if (bytes <= 0) type_error(n, "a size above 0");
         st.set(path(Size::gpu_memory), st.out.gpu_memory, bytes, n);
       }},
      {{field(Size::allocator_cap).key}, [](const Node& n, ConfigState& st) {
         st.set(path(Size::allocator_cap), st.out.allocator_cap, as_text(n), n);
       }},
      {{field(Size::host_memory).key}, [](const Node& n, ConfigState& st) {
         const int64_t bytes = as_size(n);
         if (bytes <= 0) type_error(n, fmt::format("a size above 0 ({})", field(Size::host_memory).what));
         st.set(path(Size::host_memory), st.s().parallel.host_memory_bytes, bytes, n);
       }},
  }, "hardware");
  return t;
}

// Keys read only inside hardware:, never at the top level, where other files' `device:` means
// something else (a calibration profile's card, a torchtune recipe's).
const Table& hardware_section_keys() {
  static const Table t = {
      // The device kind, as --device takes it (profiles/build.cpp applies and checks it at this line).
      {{field(Target::device).key}, [](const Node& n, ConfigState& st) { st.set(memplan::path(Target::device), st.out.device, as_text(n), n); }},
  };
  return t;
}

const Table& deepspeed_keys() {  // the deepspeed: section of a memplan / Ava YAML
  static const Table t = {
      fact_key({"use_deepspeed", "enabled"}, &ConfigState::use_deepspeed, as_bool),
      setup_key({"zero_stage", "stage"}, memplan::path(Count::zero_stage), &TrainingSetup::parallel, &Parallelism::zero_stage,
                as_zero_stage),
      offload_switch({"cpu_offload", "nvme_offload", "offload_optimizer"}, Offload::optimizer),
      offload_switch({"offload_param"}, Offload::params),
      {{"activation_checkpointing"}, note_checkpointing_flag},
  };
  return t;
}

const Table& memory_keys() {  // the thresholds, from the registry
  static const Table t = with_fields({}, "memory");
  return t;
}

const Table& output_keys() {
  static const Table t = {{{"gradient_checkpointing"}, note_checkpointing_mode}};
  return t;
}

const Table& finetune_keys() {  // lora: / peft: / finetune:
  static const Table t = with_fields({
      fact_key({field(Choice::finetune).key, "type"}, &ConfigState::method, [](const Node& n) {
        return as_choice<FinetuneMode>(n, field(Choice::finetune).what, parse_finetune, finetune_names());
      }),
      {{"modules_to_save"}, [](const Node& n, ConfigState& st) {
         for (const auto& m : as_text_list(n))
           if (const std::optional<Setting> id = detail::saved_module(m)) st.set(path(*id), field(*id).yes_no(st.s()), true, n);
       }},
      {{"load_in_4bit"}, [](const Node& n, ConfigState& st) { if (as_bool(n)) st.load_in_4bit = n.where; }},
      // bitsandbytes BitsAndBytesConfig: double quantization of the NF4 block scales.
      {{"load_in_8bit"}, [](const Node& n, ConfigState& st) { if (as_bool(n)) st.load_in_8bit = n.where; }},
  }, "finetune", {}, "finetune");
  return t;
}

// Sections that may sit at the top or inside training:/policy:.
// runtime: what memplan cannot read from a config but the framework decides (torch version,
// HF's logits upcast, a loop holding its logits, zero_grad's set_to_none, the optimizer kernel).
const Table& runtime_keys() {
  static const Table t = with_fields({}, "runtime", {}, "runtime");
  return t;
}

const Table& nested_sections() {
  static const Table t = {
      section({"runtime"}, runtime_keys),
      {{"deepspeed"}, read_deepspeed_file},
      {{"memory"}, [](const Node& n, ConfigState& st) {
         // validate() reports the thresholds' order as one problem: point it at the section.
         st.out.origin.set(Setting::thresholds, n.where);
         read_own(n, {&memory_keys()}, st);
       }},
      {{"lora"}, [](const Node& n, ConfigState& st) {
         st.adapters = n.where;
         read_own(n, {&finetune_keys()}, st);
       }},
      section({"peft", "finetune", "fine_tuning"}, finetune_keys),
  };
  return t;
}

void read_training_like(const Node& n, ConfigState& st) {
  read_own(n, {&training_keys(), &data_keys(), &nested_sections()}, st);
}

const Table& root_sections() {
  static const Table t = {
      {{"model"}, read_model},
      {{"hardware"}, [](const Node& n, ConfigState& st) {
         read_own(n, {&hardware_keys(), &hardware_section_keys()}, st);
       }},
      {{"training", "policy"}, read_training_like},
      section({"data"}, data_keys),
      section({"output"}, output_keys),
  };
  return t;
}

// ---- DeepSpeed JSON ---------------------------------------------------------------------------

// offload_optimizer / offload_param: {"device": "cpu" | "nvme" | "none"}.
// A memplan YAML document's top level (also the "memplan" block of a DeepSpeed JSON).
void read_root(const Node& n, ConfigState& st) {
  read_own(n, {&root_sections(), &training_keys(), &data_keys(), &hardware_keys(), &nested_sections()}, st);
}

Key<ConfigState> ds_offload(const char* name, Offload what) {
  return {{name}, [=](const Node& section, ConfigState& st) {
            if (section.kind != Node::Kind::map) not_a_map(section);
            const Node* device = section.find("device");
            if (!device) return;
            const std::string d = lower(as_text(*device));
            if (const Node* pin = section.find("pin_memory"))
              st.set(path(Setting::offload_pin_memory), st.s().parallel.offload_pin_memory, as_bool(*pin), *pin);
            if (d == "cpu" || d == "nvme") raise_offload(st, what, *device);
            else if (d != "none")
              throw InputError(device->where, fmt::format("unknown offload device '{}'", as_text(*device)),
                               "expected one of: cpu, nvme, none");
          }};
}

// Keys of DeepSpeed's zero_optimization section that change memory in ways memplan does not
// model: a warning each, never dropped silently (deepspeed/runtime/zero/config.py @ v0.16.4).
// Keys whose effect is bounded and small (param_persistence_threshold at its default, the 16-bit
// gather at checkpoint save, round_robin_gradients, reduce_scatter) are not warned.
void warn_unmodelled_section_keys(const Node& section, const char* name, ConfigState& st) {
  struct Unmodelled {
    const char* key;
    const char* what;
  };
  static const Unmodelled kZero[] = {
      {"zero_quantized_weights", "ZeRO++ quantized weight all-gather: int8 copies of the gathered parameters"},
      {"zero_quantized_nontrainable_weights", "ZeRO++ int8 storage of frozen weights"},
      {"zero_quantized_gradients", "ZeRO++ quantized gradient reduce-scatter"},
      {"zero_hpz_partition_size", "ZeRO++ hierarchical partitioning: a secondary copy of the parameters per node"},
      {"mics_shard_size", "MiCS: states sharded over a smaller group than all ranks"},
      {"sub_group_size", "the optimizer steps sub-groups of the partition; memplan steps the whole partition"},
      {"offload_optimizer_ratio", "partial optimizer offload"},
  };
  const bool zero = std::string(name) == "zero_optimization";
  if (!zero) return;
  const Unmodelled* list = kZero;
  const size_t count = std::size(kZero);
  for (const auto& [key, value] : section.entries)
    for (size_t i = 0; i < count; ++i) {
      const Unmodelled& u = list[i];
      if (key != u.key) continue;
      // Off or at DeepSpeed's default: nothing to say.
      if (value.kind == Node::Kind::scalar) {
        const std::string v = lower(value.text);
        if (v == "false" || v == "0" || v == "none" || v == "null") break;
        if (key == "sub_group_size" || key == "zero_hpz_partition_size" || key == "mics_shard_size") {
          char* end = nullptr;
          const double d = std::strtod(value.text.c_str(), &end);
          if (end && *end == '\0' && ((key == "sub_group_size" && d >= 1e9) || (key != "sub_group_size" && d <= 1))) break;
        }
      }
      st.out.warnings.push_back({value.where, fmt::format("DeepSpeed's {}.{} changes memory and memplan does not model it ({})", name, key, u.what),
                                 "the estimate is made as if it were absent"});
    }
}

// DeepSpeed's bf16/fp16 sections mean its mixed precision: 16-bit params, fp32 master weights.
Key<ConfigState> ds_half(std::vector<std::string> names, const char* regime) {
  return {std::move(names), [=](const Node& section, ConfigState& st) {
            if (section.kind != Node::Kind::map) not_a_map(section);
            if (const Node* on = section.find("enabled"); on && as_bool(*on)) st.precision = Fact<std::string>{regime, on->where};
            // The low-precision master state (deepspeed/runtime/precision_config.py @ v0.18.3:
            // bf16_master_weights_and_grads, bf16_optimizer_states "only valid when
            // bf16_master_weights_and_grads is enabled"; fp16_master_weights_and_grads).
            const bool bf16 = std::string(regime) == "mixed-bf16";
            const Node* master = section.find(bf16 ? "bf16_master_weights_and_grads" : "fp16_master_weights_and_grads");
            if (master) st.set(path(Setting::half_master), st.s().parallel.half_master, as_bool(*master), *master);
            if (const Node* states = bf16 ? section.find("bf16_optimizer_states") : nullptr) {
              if (as_bool(*states) && !(master && as_bool(*master)))
                throw InputError(states->where, "bf16.bf16_optimizer_states needs bf16.bf16_master_weights_and_grads",
                                 "DeepSpeed keeps optimizer states in bf16 only with bf16 master weights: set "
                                 "bf16_master_weights_and_grads: true, or drop bf16_optimizer_states");
              st.set(path(Setting::half_optimizer_states), st.s().parallel.half_optimizer_states, as_bool(*states), *states);
            }
          }};
}

const Table& ds_zero_keys() {
  static const Table t = [] {
    Table all = {
        setup_key({"stage"}, memplan::path(Count::zero_stage), &TrainingSetup::parallel, &Parallelism::zero_stage, as_zero_stage),
        ds_offload("offload_optimizer", Offload::optimizer),
        ds_offload("offload_param", Offload::params),
        offload_switch({"cpu_offload"}, Offload::optimizer),  // the pre-0.3.17 spelling
    };
    // The buckets, overlap_comm and contiguous_gradients: the settings' rows (estimator/fields.h).
    for (Key<ConfigState>& k : setting_keys(kZeroSection)) all.push_back(std::move(k));
    return all;
  }();
  return t;
}

const Table& ds_root_keys() {
  static const Table t = {
      setup_key({"train_micro_batch_size_per_gpu"}, memplan::path(Count::micro_batch), &TrainingSetup::batch, &Batch::micro_batch,
                as_field_count),
      setup_key({"gradient_accumulation_steps"}, memplan::path(Count::grad_accum), &TrainingSetup::batch, &Batch::grad_accum, as_field_count),
      {{"train_batch_size"}, set_global_batch},
      {{"zero_optimization"},
       [](const Node& n, ConfigState& st) {
         read_section(n, {&ds_zero_keys()}, st, &st.out.warnings);
         warn_unmodelled_section_keys(n, "zero_optimization", st);
       }},
      ds_half({"bf16", "bfloat16"}, "mixed-bf16"),
      ds_half({"fp16"}, "mixed-fp16"),
      {{"optimizer"}, set_ds_optimizer},
      // AutoTP training (DeepSpeed >= 0.16.4, https://www.deepspeed.ai/tutorials/autotp-training/):
      // tensor_parallel.autotp_size shards every linear layer's weight over that many GPUs (column-
      // then row-wise, an all-reduce after each pair, no sequence parallelism), the rest of the
      // ranks data-parallel under ZeRO 0-2; memplan's tensor parallelism without
      // --sequence-parallel is that split.
      {{"tensor_parallel"},
       [](const Node& n, ConfigState& st) {
         if (n.kind != Node::Kind::map) type_error(n, "a mapping ({\"autotp_size\": N})");
         for (const auto& [key, value] : n.entries) {
           if (key == "autotp_size") {
             st.set(memplan::path(Count::tensor_parallel), st.out.setup.parallel.tensor_parallel, as_field_count(value), value);
             st.autotp = &value;
           } else if (key != "tp_overlap_comm" && key != "tp_grain_size" && key != "partition_config") {
             st.out.warnings.push_back({value.where, fmt::format("tensor_parallel.{} is not an AutoTP training key memplan knows", key),
                                        "AutoTP training reads autotp_size (https://www.deepspeed.ai/tutorials/autotp-training/); "
                                        "the estimate shards by autotp_size alone"});
           }
         }
       }},
      // What DeepSpeed cannot express (model, sequence, attention, checkpointing, target), in
      // memplan's YAML vocabulary; DeepSpeed ignores unknown top-level keys. memplan plan writes it.
      {{"memplan"}, read_root},
      {{"_comment"}, [](const Node&, ConfigState&) {}},
  };
  return t;
}

// AutoTP training runs with ZeRO stage 0, 1 or 2 (https://www.deepspeed.ai/tutorials/autotp-training/).
void check_autotp(const ConfigState& st) {
  if (st.autotp && st.out.setup.parallel.tensor_parallel > 1 && st.out.setup.parallel.zero_stage == 3)
    throw InputError(st.autotp->where, "tensor_parallel.autotp_size with ZeRO stage 3: DeepSpeed's AutoTP training runs with ZeRO 0, 1 or 2",
                     "use zero_optimization.stage 2 (or 1) with autotp_size, or drop tensor_parallel for ZeRO-3 "
                     "(https://www.deepspeed.ai/tutorials/autotp-training/)");
}

// Drops "auto" values (the HF Trainer integration fills them at run time), noting their paths.
void drop_auto(Node& n, ConfigState& st) {
  auto& e = n.entries;
  for (auto it = e.begin(); it != e.end();) {
    if (it->second.kind == Node::Kind::scalar && it->second.text == "auto") {
      if (st.auto_keys.empty()) st.first_auto = it->second.where;
      st.auto_keys.push_back(it->second.path);
      st.auto_where.push_back(keyed(it->second));
      it = e.erase(it);
    } else {
      drop_auto(it->second, st);
      ++it;
    }
  }
}

// Top-level keys DeepSpeed reads that change memory and memplan does not model, and keys that are
// not DeepSpeed's at all but name a memory setting (accelerate's zero_stage, offload_* at the top):
// warned, never dropped silently. DeepSpeed's key names: deepspeed/runtime/constants.py and
// deepspeed/runtime/config.py @ v0.16.4.
void warn_unread_deepspeed_keys(const Node& root, ConfigState& st) {
  static const char* const kUnmodelled[] = {"amp", "activation_checkpointing", "sparse_attention", "data_types",
                                            "communication_data_type", "torch_autocast", "compile", "hybrid_engine",
                                            "pipeline", "compression_training", "elasticity"};
  // DeepSpeed's own keys whose names look like memory settings but are not: the optimizer guards
  // and checkpoint saving.
  static const char* const kNeutral[] = {"zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "checkpoint",
                                         "load_universal_checkpoint", "use_node_local_storage", "dump_state",
                                         "memory_breakdown"};
  static const char* const kMarkers[] = {"zero", "stage", "offload", "micro_batch", "checkpoint", "precision", "dtype"};
  std::vector<std::string> known;
  for (const auto& k : ds_root_keys()) known.insert(known.end(), k.names.begin(), k.names.end());
  for (const auto& [key, value] : root.entries) {
    if (std::find(known.begin(), known.end(), key) != known.end() || near_miss(key, known)) continue;
    if (std::find(std::begin(kNeutral), std::end(kNeutral), key) != std::end(kNeutral)) continue;
    if (std::find(std::begin(kUnmodelled), std::end(kUnmodelled), key) != std::end(kUnmodelled)) {
      st.out.warnings.push_back({value.where, fmt::format("DeepSpeed's '{}' changes memory and memplan does not model it", key),
                                 "the estimate is made as if it were absent"});
      continue;
    }
    const std::string l = lower(key);
    if (std::any_of(std::begin(kMarkers), std::end(kMarkers), [&](const char* m) { return l.find(m) != std::string::npos; }))
      st.out.warnings.push_back({value.where, fmt::format("'{}' is not a DeepSpeed config key, and its name says it may change memory", key),
                                 "DeepSpeed ignores it; ZeRO settings go under zero_optimization (stage, offload_optimizer, "
                                 "offload_param)"});
  }
}

void read_deepspeed_json(Node root, ConfigState& st) {
  drop_auto(root, st);
  read_section(root, {&ds_root_keys()}, st, &st.out.warnings);
  check_autotp(st);
  warn_unread_deepspeed_keys(root, st);
  if (st.auto_keys.empty()) return;
  st.out.warnings.push_back({st.first_auto,
                             fmt::format("{} DeepSpeed value(s) are \"auto\" ({}); memplan keeps its defaults for them",
                                         st.auto_keys.size(), fmt::join(st.auto_keys, ", ")),
                             "the Hugging Face integration resolves \"auto\" at run time; pass --micro-batch, "
                             "--grad-accum or --precision to say what it will pick"});
}

}  // namespace

DeepSpeedConfig read_deepspeed_config(const Node& root, const std::string& path, const fs::path& file) {
  if (root.kind != Node::Kind::map) type_error(root, "a DeepSpeed config (a mapping of keys)");
  ConfigState st;
  st.path = path;
  st.file = file;
  Node copy = root;
  drop_auto(copy, st);
  read_section(copy, {&ds_root_keys()}, st, &st.out.warnings);
  check_autotp(st);
  warn_unread_deepspeed_keys(copy, st);
  resolve(st);
  DeepSpeedConfig d;
  d.cfg = std::move(st.out);
  for (size_t i = 0; i < st.auto_keys.size(); ++i) d.auto_values.emplace_back(st.auto_keys[i], st.auto_where[i]);
  return d;
}

namespace {

fs::path beside_config(const ConfigState& st, const std::string& relative) {
  const fs::path p(relative);
  return p.is_relative() ? (st.dir / p).lexically_normal() : p;
}

std::string identity(const fs::path& p) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}

// A file another file names (deepspeed: FILE, model.hf_config): its text, with every problem
// reading it (missing, a folder or FIFO, too large, already being read: a cycle) reported at the
// line that names it.
std::string read_reference(const ConfigState& st, const std::string& path, const Node& named_by, const char* hint) {
  const std::string id = identity(path);
  if (std::find(st.reading.begin(), st.reading.end(), id) != st.reading.end()) {
    std::vector<std::string> chain;
    for (const auto& r : st.reading) chain.push_back(fs::path(r).filename().string());
    chain.push_back(fs::path(id).filename().string());
    throw InputError(named_by.where,
                     fmt::format("{}: '{}' is a file already being read (a cycle: {})", named_by.path, clip(path, 200),
                                 fmt::join(chain, " -> ")),
                     "a config cannot include itself, directly or through another file");
  }
  if (static_cast<int>(st.reading.size()) > read_limits().max_references)
    throw InputError(named_by.where, fmt::format("{}: files name each other more than {} deep", named_by.path,
                                                 read_limits().max_references),
                     "a config names a DeepSpeed file or a config.json, which names no further files");
  try {
    return read_text_file(path, named_by.where);
  } catch (const InputError& e) {
    throw InputError(e.where(), fmt::format("{}: {}", named_by.path, e.message()), e.hint() + "; " + hint);
  }
}

// deepspeed: is a section of switches, or (HF TrainingArguments style) the path of a ds_config.json.
void read_deepspeed_file(const Node& n, ConfigState& st) {
  // HF TrainingArguments also takes the DeepSpeed config itself as a mapping.
  if (n.kind == Node::Kind::map && (n.find("zero_optimization") || n.find("train_micro_batch_size_per_gpu"))) {
    read_section(n, {&ds_root_keys()}, st, &st.out.warnings);
    return warn_unread_deepspeed_keys(n, st);
  }
  if (n.kind != Node::Kind::scalar) return read_section(n, {&deepspeed_keys()}, st, &st.out.warnings);
  const std::string path = beside_config(st, as_text(n)).string();
  const std::string text = read_reference(st, path, n, "deepspeed: names a ds_config.json");
  const fs::path outer_dir = st.dir;
  st.reading.push_back(identity(path));
  st.dir = fs::path(path).parent_path();
  read_deepspeed_json(parse_json(text, path), st);
  st.dir = outer_dir;
  st.reading.pop_back();
}

// ---- model ------------------------------------------------------------------------------------

// The model a key names; while --model replaces it (hub::NoFetchScope) one that cannot be read
// without the network is left to build_setup, which takes --model's.
void use_named_model(ConfigState& st, const std::string& name, const Where& at) {
  try {
    use_model(st, resolve_model(name, at), at);
  } catch (const InputError& e) {
    if (!hub::NoFetchScope::active()) throw;
    st.out.model_error = e;
  }
}

void use_model(ConfigState& st, const ReadModel& m, const Where& named_at) {
  st.s().model = m.spec;
  st.out.has_model = true;
  set_model_origin(st.out.origin, named_at);
  for (const auto& [field, where] : m.origin.fields) st.out.origin.set(field, where);  // positions inside a config.json
  st.out.warnings.insert(st.out.warnings.end(), m.warnings.begin(), m.warnings.end());
}

bool has_inline_sizes(const Node& n) {
  for (const auto& k : model_keys())
    if (k.names.front() == "hidden_size" || k.names.front() == "num_layers" || k.names.front() == "num_attention_heads")
      for (const auto& name : k.names)
        if (n.find(name)) return true;
  return false;
}

// Llama's MLP width rule (multiple_of 256 over 8h/3) for gated MLPs, 4h otherwise. Absurd widths
// are left to validation rather than overflowing here.
int64_t default_intermediate(const ModelSpec& m) {
  const int64_t h = m.hidden_size;
  if (h <= 0 || h > (int64_t{1} << 40)) return 0;
  if (!m.gated_mlp) return 4 * h;
  return 256 * ((8 * h / 3 + 255) / 256);
}

// Fields the file did not give follow the ones it did, the way the base model derived them.
void derive_model(ConfigState& st, const ModelSpec& base) {
  ModelSpec& m = st.s().model;
  Provenance& origin = st.out.origin;
  auto given = [&](const char* f) { return st.model_given.count(f) > 0; };
  if (!given(memplan::path(&ModelSpec::num_key_value_heads)) && base.num_key_value_heads == base.num_attention_heads) {
    m.num_key_value_heads = m.num_attention_heads;
    origin.set(memplan::path(&ModelSpec::num_key_value_heads), origin.of(memplan::path(&ModelSpec::num_attention_heads)));
  }
  if (!given(memplan::path(&ModelSpec::head_dim)) && m.num_attention_heads > 0 &&
      (base.head_dim == 0 || base.head_dim * base.num_attention_heads == base.hidden_size)) {
    m.head_dim = m.hidden_size / m.num_attention_heads;
    origin.set(memplan::path(&ModelSpec::head_dim), origin.of(memplan::path(&ModelSpec::num_attention_heads)));
  }
  if (!given(memplan::path(&ModelSpec::vocab_size)) && base.vocab_size == 0) m.vocab_size = 32000;  // Llama/Mistral's tokenizer
  if (!given(memplan::path(&ModelSpec::intermediate_size)) && base.intermediate_size == 0) {
    m.intermediate_size = default_intermediate(m);
    origin.set(memplan::path(&ModelSpec::intermediate_size), origin.of(memplan::path(&ModelSpec::hidden_size)));
  }
}

void read_model(const Node& n, ConfigState& st) {
  if (n.kind == Node::Kind::scalar) return use_named_model(st, as_text(n), n.where);
  if (n.kind != Node::Kind::map) type_error(n, "a preset name or a mapping");
  const Node* preset = n.find("preset");
  const Node* hf = n.find("hf_config");
  const Node* name = n.find("name");
  const Node* type = n.find("model_type");
  const bool sizes = has_inline_sizes(n);
  const bool from_scratch = !preset && !hf && sizes;
  if (preset) {
    use_named_model(st, as_text(*preset), preset->where);
  } else if (hf) {
    const std::string path = beside_config(st, as_text(*hf)).string();
    std::error_code ec;
    if (!fs::exists(path, ec))
      throw InputError(hf->where, fmt::format("model.hf_config: '{}' does not exist", clip(path, 200)),
                       "hf_config is relative to this file's folder; it names an HF config.json");
    const std::string text = read_reference(st, path, *hf, "hf_config names an HF config.json");
    use_model(st, read_hf_config(parse_json(text, path), path, config_model_name(path)), hf->where);
  } else if (name && !sizes) {
    use_named_model(st, as_text(*name), name->where);
  } else if (from_scratch) {
    st.s().model = family_defaults_or_throw(type ? as_text(*type) : "llama", type ? type->where : n.where);
    st.s().model.name = name ? as_text(*name) : st.file.stem().string();
    st.out.has_model = true;
  }
  const ModelSpec base = st.s().model;
  read_own(n, {&model_keys()}, st);
  if (!st.out.has_model) return;  // only setup-level keys here (use_flash_attention, ...)
  if (from_scratch)
    for (int64_t ModelSpec::*member : {&ModelSpec::hidden_size, &ModelSpec::num_layers, &ModelSpec::num_attention_heads})
      if (!st.model_given.count(memplan::path(member)))
        throw InputError(n.where, fmt::format("the inline model has no {}", memplan::field(member).name),
                         "an inline model needs hidden_size, num_layers and num_attention_heads; or name one with "
                         "model.preset (memplan models lists the presets) or model.hf_config");
  derive_model(st, base);
}

// ---- resolution -------------------------------------------------------------------------------

// Precision as training frameworks spell dtypes (NeMo's "bfloat16") or as memplan names regimes.
std::optional<Precision> precision_or_dtype(const std::string& s) {
  const std::string l = lower(s);
  if (l == "bfloat16") return Precision::bf16;
  if (l == "float16" || l == "half") return Precision::fp16;
  return parse_precision(s);
}

void resolve_precision(ConfigState& st) {
  auto use = [&](Precision p, const Where& w) {
    st.s().precision = p;
    st.out.origin.set(memplan::path(Choice::precision), w);
  };
  std::vector<std::string> names = precision_names();
  names.insert(names.end(), {"bfloat16", "float16", "float32"});
  std::optional<Precision> base;
  if (st.precision)
    base = parse_choice<Precision>(st.precision->value, field(Choice::precision).what, precision_or_dtype, names, st.precision->where);
  const bool regime = base && *base != Precision::fp32 && *base != Precision::bf16 && *base != Precision::fp16;
  if (st.mixed_precision && !regime) {
    const std::string m = lower(st.mixed_precision->value);
    const bool half_fp16 = base == Precision::fp16;
    if (m == "fp16" || m == "float16" || ((m == "true" || m == "yes" || m == "on") && half_fp16))
      return use(Precision::amp_fp16, st.mixed_precision->where);
    if (m == "bf16" || m == "bfloat16" || m == "true" || m == "yes" || m == "on")
      return use(Precision::amp_bf16, st.mixed_precision->where);
    if (m != "false" && m != "no" && m != "off" && m != "none" && m != "fp32")
      throw InputError(st.mixed_precision->where, fmt::format("unknown mixed_precision '{}'", st.mixed_precision->value),
                       "expected one of: fp16, bf16, true, false");
  }
  const bool bf16 = st.bf16 && st.bf16->value, fp16 = st.fp16 && st.fp16->value;
  if (bf16 && fp16) throw InputError(st.fp16->where, "bf16 and fp16 are both true", "set one of them");
  // A model loaded in bfloat16/float16 trains with 16-bit weights, gradients and optimizer
  // states whatever autocast does on top (torchtune/LitGPT "bf16-true").
  if (!regime && st.torch_dtype) {
    const auto p = precision_or_dtype(st.torch_dtype->value);
    if (p == Precision::bf16 || p == Precision::fp16) return use(*p, st.torch_dtype->where);
  }
  if (!regime && bf16) return use(Precision::amp_bf16, st.bf16->where);  // HF Trainer: autocast
  if (!regime && fp16) return use(Precision::amp_fp16, st.fp16->where);
  if (base) use(*base, st.precision->where);
}

void resolve_checkpointing(ConfigState& st) {
  // checkpoint_every yields to a named mode (selective, an explicit checkpoint_layers list).
  if (st.checkpoint_every && (!st.checkpointing || (st.checkpointing->value.mode != CheckpointMode::selective &&
                                                    st.checkpointing->value.mode != CheckpointMode::layers))) {
    Checkpointing c;
    c.every_k = st.checkpoint_every->value;
    c.mode = c.every_k == 1 ? CheckpointMode::full : CheckpointMode::every;
    st.checkpointing = Fact<Checkpointing>{c, st.checkpoint_every->where};
  }
  if (!st.checkpointing) return;
  st.s().checkpointing = st.checkpointing->value;
  st.out.origin.set(memplan::path(Choice::checkpointing), st.checkpointing->where);
}

void resolve_finetune(ConfigState& st) {
  Finetune& f = st.s().finetune;
  if (!st.method && !st.adapters && !st.load_in_4bit && !st.load_in_8bit) return;  // full fine-tuning
  const Where where = st.method ? st.method->where : st.load_in_4bit ? *st.load_in_4bit
                      : st.adapters ? *st.adapters : *st.load_in_8bit;
  f.mode = st.method ? st.method->value : FinetuneMode::lora;
  if (st.load_in_4bit && f.mode != FinetuneMode::full) f.mode = FinetuneMode::qlora;
  f.base_quant = f.mode == FinetuneMode::qlora ? BaseQuant::nf4
                 : f.mode == FinetuneMode::lora && st.load_in_8bit ? BaseQuant::int8 : BaseQuant::none;
  st.out.origin.set(memplan::path(Choice::finetune), where);
}

void resolve(ConfigState& st) {
  resolve_precision(st);
  resolve_checkpointing(st);
  resolve_finetune(st);
  if (st.use_deepspeed && !st.use_deepspeed->value) {  // a deepspeed: section switched off
    st.s().parallel.zero_stage = 0;
    st.s().parallel.offload = Offload::none;
    st.out.origin.set(memplan::path(Count::zero_stage), st.use_deepspeed->where);
    st.out.origin.set(memplan::path(Choice::offload), st.use_deepspeed->where);
  }
  // With DeepSpeed in charge, "bf16"/"fp16"/mixed_precision mean DeepSpeed's mixed precision
  // (16-bit parameters and gradients, fp32 master weights in the optimizer), which is what the HF
  // integration turns bf16=True into. An explicit memplan name (amp-bf16) is kept as written.
  const bool deepspeed = (st.use_deepspeed && st.use_deepspeed->value) || st.s().parallel.zero_stage > 0;
  const bool explicit_regime = st.precision && parse_precision(st.precision->value) &&
                               is_autocast(*parse_precision(st.precision->value));
  // A model loaded in bfloat16/float16 (torch_dtype) under DeepSpeed is DeepSpeed's mixed precision
  // too: its ZeRO optimizers keep fp32 master weights and states whatever the parameters' dtype
  // (deepspeed/runtime/zero/stage_1_and_2.py @ v0.16.4 L401, stage3.py @ v0.16.4 L902-903).
  const Precision p = st.s().precision;
  const bool half = p == Precision::bf16 || p == Precision::fp16 || (is_autocast(p) && !explicit_regime);
  if (deepspeed && half)
    st.s().precision = p == Precision::amp_bf16 || p == Precision::bf16 ? Precision::mixed_bf16 : Precision::mixed_fp16;
  if (st.out.gpu || st.out.gpu_memory)
    st.s().device = gpu_device(st.out.gpu, st.out.origin.of(Target::gpu), st.out.gpu_memory);
}

bool is_json(const std::string& path, const std::string& text) {
  const std::string ext = lower(fs::path(path).extension().string());
  if (ext == ".json") return true;
  if (ext == ".yaml" || ext == ".yml" || ext == ".toml") return false;
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

bool is_toml(const std::string& path) { return lower(fs::path(path).extension().string()) == ".toml"; }

void read_json_config(Node root, ConfigState& st) {
  if (root.kind != Node::Kind::map) type_error(root, "a JSON object");
  if (root.find("zero_optimization") || root.find("train_micro_batch_size_per_gpu") || root.find("train_batch_size")) {
    st.out.kind = "deepspeed";
    return read_deepspeed_json(std::move(root), st);
  }
  if (root.find("model_type")) {
    st.out.kind = "hf-config";
    return use_model(st, read_hf_config(root, st.path, config_model_name(st.file.string())), Where::at_file(st.path));
  }
  throw InputError(Where::at_file(st.path), "cannot tell what this JSON file configures",
                   fmt::format("memplan reads DeepSpeed ds_config.json (zero_optimization, train_micro_batch_size_per_gpu), "
                               "Hugging Face config.json (model_type) and HF TrainingArguments JSON; --format names one of: {}",
                               fmt::join(format_names(), ", ")));
}

}  // namespace
}  // namespace detail

LoadedConfig load_config(const std::string& path, const std::string& format) {
  return load_config_text(detail::read_text_file(path), path, path, format);
}

LoadedConfig load_config_text(const std::string& text, const std::string& shown_as, const std::string& path, const std::string& format) {
  using namespace detail;
  std::optional<ConfigFormat> forced;
  if (!format.empty()) {
    forced = parse_format(format);
    if (!forced)
      throw InputError(Where::at_flag("--format"), fmt::format("unknown config format '{}'", format),
                       fmt::format("expected one of: {}", fmt::join(format_names(), ", ")));
  }
  const bool toml = forced ? *forced == ConfigFormat::torchtitan : is_toml(path);
  const bool json = !toml && is_json(path, text);
  Node root = toml ? parse_toml(text, shown_as) : json ? parse_json(text, shown_as) : parse_yaml(text, shown_as);
  if (root.kind != Node::Kind::map)
    throw InputError(Where::at_file(shown_as), "expected a mapping of settings (model:, training:, ...)",
                     "see examples/ for the config files memplan reads");
  const std::optional<ConfigFormat> f = forced ? forced : detect_format(root, json, toml);
  if (f) {
    if (const FormatReader reader = format_reader(*f)) {
      ReadState rs;
      rs.path = shown_as;
      rs.file = path;
      rs.text = text;
      reader(root, rs);
      rs.out.kind = format_name(*f);
      if (rs.out.gpu || rs.out.gpu_memory)
        rs.s().device = gpu_device(rs.out.gpu, rs.out.origin.of(Target::gpu), rs.out.gpu_memory);
      return rs.out;
    }
  }
  ConfigState st;
  st.path = shown_as;
  st.file = path;
  st.dir = st.file.parent_path();
  st.reading.push_back(identity(path));
  if (json && f != ConfigFormat::memplan_yaml) {
    read_json_config(std::move(root), st);
  } else {
    st.out.kind = "memplan";
    read_root(root, st);
  }
  resolve(st);
  return st.out;
}

}  // namespace memplan::profiles
