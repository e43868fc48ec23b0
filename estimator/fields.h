// The registry of setup fields: each knob of TrainingSetup that is a yes/no switch, a count, a
// choice of names, a number, a list of names, a size or a library release, declared once with everything the layers above
// need to speak it -- its setup path (provenance, `sources` JSON, validation problems), its flag and
// the flag's help, its YAML keys and aliases, its default and the source of that default, and the
// words that name it (the runtime line's for a switch, `memplan check`'s for a count).
//
// Switches: the flag parser (api/flags.cpp), the flags-to-setup step (profiles/build.cpp), the
// memplan YAML reader (profiles/config.cpp), the `runtime` and `sources` JSON (api/documents.cpp),
// the runtime line, the memplan YAML writer (planner/emit.cpp), `memplan check`'s comparison
// (planner/check.cpp) and the Python keywords (the flags, python/memplan) iterate this table; the
// format readers and the rule sets name a switch by its enumerator, so a misspelt path does not
// compile. Adding a switch is one enumerator, one row and its formula.
//
// Counts (micro-batch, sequence length, accumulation, GPUs, parallel degrees, the ZeRO stage, LoRA
// rank, frozen layers): iterated by the same places; `memplan check` names each by its row. Numbers
// (the LoRA scale and dropout, the memory thresholds): the flags, the reader, the JSON and the
// writers (the lora: writers name each row). Choices (precision, optimizer, checkpointing,
// attention, offload, the fine-tuning method, the adapters' dtype, and the runtime's framework,
// optimizer kernel, FSDP sharding and loss): the flags, the reader (those read by their key; the
// section's own handlers read the training's), the JSON, the writers, `memplan check` and the
// completions. Lists (the LoRA targets): the flags, the reader, the JSON, the writers and `memplan
// check`. Sizes (the card's memory, the allocator cap, the node's RAM): the flags, their keys, the
// sources JSON and every path; each is applied by its own rule (profiles/build.cpp). Releases
// (torch, transformers): the flags, the reader, the runtime JSON, the writer, `memplan check` and
// the Python keywords filled from the interpreter. The target (the card's preset, the device kind,
// the calibration): the flags, the hardware: key, the paths; each applied by its own rule. Settings
// (what a file states and no flag does: DeepSpeed's buckets and overlap, the DataLoader's workers,
// modules_to_save, the CUDA context...): the reader's key tables, the format readers, the rules,
// validate() and the memplan YAML writer name each by its row. The model's fields (ModelSpec's members, at the end):
// families.yaml, the readers, validate() and `memplan check` name each by its member. The base's
// quantization is none of these: the method and a file's load_in_8bit set it (derived).
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "estimator/setup.h"

namespace memplan {

enum class Switch {
  loss_upcast,
  keep_logits,
  keep_cache,
  zero_grad_set_to_none,
  zero_grad_after_forward,
  liger,
  optimizer_in_backward,
  activation_offload,
  compile,
  compile_loss,
  fsdp_no_sync,
  fp8,
  fp8_recompute_weight,
  expandable_segments,
  double_quant,
  sequence_parallel,
  reference_model,
  count  // sentinel: the number of switches
};
constexpr size_t kSwitchCount = static_cast<size_t>(Switch::count);

struct SwitchField {
  Switch id;
  // The setup path: "runtime.liger". Its first part is the YAML section the switch is read in
  // (runtime:, lora:/finetune:/peft:, training: or the top level for parallel.*), its last part the
  // switch's own key there, which the memplan YAML writer uses.
  const char* path;
  const char* flag;                   // "--liger" (and its negation "--no-liger")
  const char* help;                   // the flag's help
  std::array<const char*, 3> aliases; // more YAML keys in the same section (nullptr: none)
  bool (*get)(const TrainingSetup&);
  void (*set)(TrainingSetup&, bool);
  const char* default_source;         // where TrainingSetup's default comes from
  const char* shown;                  // the runtime line's words when on (nullptr: not listed)
  // Whether the switch changes anything for this setup (fsdp_no_sync only under FSDP with
  // accumulation); nullptr: always. The runtime line lists a switch only when it is in effect.
  bool (*in_effect)(const TrainingSetup&);

  std::string section() const;  // "runtime", "finetune", "parallel"
  std::string key() const;      // "liger"
  std::string negation() const; // "--no-liger"
};

// Every switch, in enumerator order (row i has id == Switch(i); checked at start-up).
const std::array<SwitchField, kSwitchCount>& switch_fields();
const SwitchField& field(Switch id);
inline const char* path(Switch id) { return field(id).path; }

// ---- counts ------------------------------------------------------------------------------------

enum class Count {
  num_gpus,
  micro_batch,
  seq_len,
  grad_accum,
  tensor_parallel,
  pipeline_parallel,
  expert_parallel,
  zero_stage,
  gpus_per_node,
  lora_rank,
  freeze_layers,
  count  // sentinel: the number of counts
};
constexpr size_t kCountCount = static_cast<size_t>(Count::count);

// How a config file's value is read (profiles/reader.h): any whole number, its range left to
// validate() (`whole`: as_field_count, "a positive integer"; `integer`: as_int, "an integer"; `stage`:
// an integer, refused at the key beyond the member's int with validate()'s words), or refused at the
// key below 1 (`at_least_one`: as_count).
enum class CountRead { whole, integer, stage, at_least_one };

struct CountField {
  Count id;
  // The setup path, the spelling of the member: "batch.micro_batch". It is also the count's place
  // in the `setup` JSON (setup.batch.micro_batch) and in `sources`.
  const char* path;
  const char* flag;   // "--micro-batch"
  const char* help;   // the flag's help
  const char* group;  // the flag's help group (nullptr: the commands' options)
  // The memplan YAML section whose table reads it ("training": also at the top level and under
  // policy:; "data", "hardware", "finetune": also lora:/peft:) and its keys there, the first the
  // one the memplan YAML writer uses (nullptr: no more).
  const char* section;
  std::array<const char*, 5> keys;
  CountRead read;
  const char* words;  // `memplan check`'s name for it: "micro-batch"
  int64_t (*get)(const TrainingSetup&);
  void (*set)(TrainingSetup&, int64_t);
  const char* default_source;  // where TrainingSetup's default comes from
  // Whether the `setup` JSON shows it for this setup (the LoRA rank only with adapters); nullptr:
  // always.
  bool (*shown)(const TrainingSetup&);

  std::string json_section() const;  // "batch" (the path's first part)
  std::string json_key() const;      // "micro_batch" (its last part)
};

// Every count, in enumerator order (row i has id == Count(i); checked at start-up).
const std::array<CountField, kCountCount>& count_fields();
const CountField& field(Count id);
inline const char* path(Count id) { return field(id).path; }
// The count whose setup path is `p`, if any.
const CountField* count_at(const std::string& p);

// ---- choices -----------------------------------------------------------------------------------

// A setting that is one name of a fixed set, stated by one flag. The runtime's (framework,
// optimizer kernel, FSDP sharding, the loss) and the adapters' dtype are read under one key of a
// memplan YAML section; the training's (precision, optimizer, checkpointing, attention, offload,
// the fine-tuning method) are stated several ways by a file (bf16: true, torch_dtype,
// mixed_precision, a DeepSpeed section, a peft: section...), so the memplan YAML reader's own
// handlers read them (profiles/config.cpp; the precision, checkpointing and method as facts
// resolved together). Every format reader names them by their path here.
enum class Choice {
  precision,
  optimizer,
  checkpointing,
  attention,
  offload,
  finetune,
  adapter_dtype,
  framework,
  optimizer_impl,
  fsdp,
  loss,
  count  // sentinel: the number of choices
};
constexpr size_t kChoiceCount = static_cast<size_t>(Choice::count);

// How the memplan YAML reader reads it: under its key alone (`key`: with_fields, profiles/config.cpp),
// or by its section's own handlers (`handlers`: a file states it several ways).
enum class ChoiceRead { key, handlers };

struct ChoiceField {
  Choice id;
  // The member's spelling: "runtime.optimizer_impl", "precision", "parallel.offload" (its place in
  // the setup JSON and in `sources` too).
  const char* path;
  const char* flag;       // "--optimizer-impl"
  const char* type_name;  // the flag's value in the help: "IMPL"
  const char* help;
  const char* what;       // the refusal's words: "unknown <what> 'x'" ("optimizer implementation")
  // A memplan YAML section that states it ("runtime", "training", "finetune"; lora: and peft: are
  // finetune:'s spellings) and its key there, the one the memplan YAML writer uses. Read by that key
  // alone (ChoiceRead::key: the runtime's, the loss, the adapters' dtype) or by the section's own
  // handlers (ChoiceRead::handlers: profiles/config.cpp), as the other keys that state it are (bf16:
  // true, torch_dtype, offload_optimizer, ...); a writer may state those elsewhere (attention under
  // model:, the offload in a deepspeed: block).
  const char* section;
  const char* key;
  ChoiceRead read;
  std::vector<std::string> (*names)();           // the names it takes, for the refusal's hint
  // Values standing for the names that are forms, not values (checkpointing's every:K ->
  // every:2, every:4); nullptr: none.
  std::array<const char*, 2> instances;
  // The refusal's hint when the names alone do not say enough (the loss's forms); nullptr:
  // "expected one of: <names>".
  const char* hint;
  std::string (*get)(const TrainingSetup&);      // the name of the setup's value
  bool (*set)(TrainingSetup&, const std::string&);  // false: not one of its names (nothing set)
  const char* default_source;
  // Whether the `setup` JSON shows it for this setup (the adapters' dtype only with adapters);
  // nullptr: always.
  bool (*shown)(const TrainingSetup&);

  // Values it takes, each reading back as itself: its names that are values, then the instances
  // (what the shell completions offer and the round-trip tests try).
  std::vector<std::string> samples() const;
  std::string refusal_hint() const;  // `hint`, else "expected one of: <names>"
  bool runtime() const;               // stated under runtime: (its flag in the Runtime group)
  std::string json_section() const;  // "runtime", "parallel"; "" for a top-level path ("precision")
  std::string json_key() const;      // "optimizer_impl", "offload", "precision"
};

// Every choice, in enumerator order (row i has id == Choice(i); checked at start-up).
const std::array<ChoiceField, kChoiceCount>& choice_fields();
const ChoiceField& field(Choice id);
inline const char* path(Choice id) { return field(id).path; }

// ---- numbers -----------------------------------------------------------------------------------

// A real number of the setup: the LoRA scale and dropout, the memory thresholds.
enum class Number {
  lora_alpha,
  lora_dropout,
  target,
  warning,
  critical,
  emergency,
  count  // sentinel: the number of numbers
};
constexpr size_t kNumberCount = static_cast<size_t>(Number::count);

// How a config file's value is read (profiles/reader.h, profiles/config.cpp): any number, its
// range left to validate() (`number`), or a fraction in (0, 1] refused at the key (`fraction`).
enum class NumberRead { number, fraction };

struct NumberField {
  Number id;
  // The setup path, the spelling of the member: "finetune.lora_alpha", "thresholds.target" (its
  // place in the setup JSON and in `sources`).
  const char* path;
  const char* flag;       // "--lora-alpha"; nullptr: none (the thresholds: a plan writes its budget's)
  const char* type_name;  // the flag's value in the help: "A"
  const char* help;
  // The memplan YAML section whose table reads it ("finetune": also lora:/peft:; "memory": under
  // training: or at the top) and its keys there, the first the one the memplan YAML writer uses.
  const char* section;
  std::array<const char*, 2> keys;
  NumberRead read;
  double (*get)(const TrainingSetup&);
  void (*set)(TrainingSetup&, double);
  const char* default_source;
  // Whether the `setup` JSON shows it for this setup (the LoRA numbers only with adapters); nullptr:
  // always.
  bool (*shown)(const TrainingSetup&);

  std::string json_section() const;  // "finetune", "thresholds"
  std::string json_key() const;      // "lora_alpha", "target"
};

// Every number, in enumerator order (row i has id == Number(i); checked at start-up).
const std::array<NumberField, kNumberCount>& number_fields();
const NumberField& field(Number id);
inline const char* path(Number id) { return field(id).path; }

// ---- lists -------------------------------------------------------------------------------------

// A list of names: the modules LoRA adapts.
enum class List {
  lora_targets,
  count  // sentinel: the number of lists
};
constexpr size_t kListCount = static_cast<size_t>(List::count);

struct ListField {
  List id;
  const char* path;       // the member's spelling: "finetune.lora_targets" (its place in the setup JSON and sources)
  const char* flag;       // "--lora-targets", its value a comma list
  const char* type_name;  // the flag's value in the help: "LIST"
  const char* help;
  const char* words;      // `memplan check`'s name for it: "LoRA targets"
  // The memplan YAML section whose table reads it ("finetune": also lora:/peft:) and its keys there
  // (a YAML list or a comma list), the first the one the memplan YAML writers use.
  const char* section;
  std::array<const char*, 2> keys;
  std::vector<std::string> (*get)(const TrainingSetup&);
  void (*set)(TrainingSetup&, std::vector<std::string>);
  const char* default_source;
  // Whether the `setup` JSON shows it for this setup (the LoRA targets only with adapters);
  // nullptr: always.
  bool (*shown)(const TrainingSetup&);

  std::string json_section() const;  // "finetune"
  std::string json_key() const;      // "lora_targets"
};

// Every list, in enumerator order (row i has id == List(i); checked at start-up).
const std::array<ListField, kListCount>& list_fields();
const ListField& field(List id);
inline const char* path(List id) { return field(id).path; }

// ---- sizes -------------------------------------------------------------------------------------

// A byte count with its unit (12GiB, 512GB): the card's memory, the caching allocator's cap, the
// node's RAM. Each lands in its own place (the target card's capacity, which a --gpu flag replaces
// along with the file's gpu_memory; the cap, which may be a fraction of that card; the node's host
// RAM), so profiles/build.cpp applies each by its own rule; the row declares how it is spoken.
enum class Size {
  gpu_memory,
  allocator_cap,
  host_memory,
  count  // sentinel: the number of sizes
};
constexpr size_t kSizeCount = static_cast<size_t>(Size::count);

struct SizeField {
  Size id;
  // Its path in provenance, `sources` and validation problems: "hardware.gpu_memory",
  // "parallel.host_memory_bytes" (the setup member's spelling where it has one).
  const char* path;
  const char* flag;       // "--gpu-memory"
  const char* type_name;  // the flag's value in the help: "SIZE", "SIZE|FRACTION"
  const char* help;
  const char* key;        // its key in memplan YAML's hardware: section
  bool fraction;          // a bare number is a fraction of the card (set_per_process_memory_fraction)
  const char* what;       // what it is, for a refusal's hint: "the RAM of one node"
  const char* default_source;
};

// Every size, in enumerator order (row i has id == Size(i); checked at start-up).
const std::array<SizeField, kSizeCount>& size_fields();
const SizeField& field(Size id);
inline const char* path(Size id) { return field(id).path; }

// ---- the target ----------------------------------------------------------------------------------

// What the step runs on: the card's preset (its memory, its family's overheads and what its stack
// runs; a --gpu flag replaces the file's gpu and gpu_memory), the device kind whose memory behaviour
// is modelled, and the calibration profile measured on that card. Each is applied by its own rule
// (profiles/build.cpp); the row declares how it is spoken.
enum class Target {
  gpu,
  device,
  calibration,
  count  // sentinel: the number of targets
};
constexpr size_t kTargetCount = static_cast<size_t>(Target::count);

struct TargetField {
  Target id;
  const char* path;       // provenance, `sources` and `memplan check`: "hardware.gpu"; "device", "calibration"
  const char* flag;       // "--gpu"
  const char* type_name;  // the flag's value in the help: "PRESET"
  const char* help;
  const char* key;        // its key in memplan YAML's hardware: section (nullptr: a flag only)
  const char* default_source;
};

// Every target, in enumerator order (row i has id == Target(i); checked at start-up).
const std::array<TargetField, kTargetCount>& target_fields();
const TargetField& field(Target id);
inline const char* path(Target id) { return field(id).path; }

// ---- versions ----------------------------------------------------------------------------------

// A release of a library the job runs, major.minor: it decides what the library's code saves.
enum class Version {
  torch,
  transformers,
  count  // sentinel: the number of versions
};
constexpr size_t kVersionCount = static_cast<size_t>(Version::count);

struct VersionField {
  Version id;
  const char* path;  // the setup path: "runtime.torch_version" (its place in the runtime JSON and sources)
  const char* flag;  // "--torch-version"
  const char* help;
  // The library: its name in errors ("the torch version ...") and the Python module whose
  // __version__ a memplan.estimate() call fills it from.
  const char* library;
  std::array<const char*, 2> keys;  // its keys in memplan YAML's runtime: section, the first the writer's
  int max_major;                    // the largest major release it reads (torch 9); 0: any
  const char* examples;             // "2.6 or 1.13": the refusal's words
  const char* hint;                 // where the user finds the release
  std::pair<int, int> (*get)(const TrainingSetup&);
  void (*set)(TrainingSetup&, int major, int minor);
  const char* default_source;

  std::string json_key() const;                     // "torch_version"
  std::string text(const TrainingSetup& s) const;   // "2.6"
};

// Every version, in enumerator order (row i has id == Version(i); checked at start-up).
const std::array<VersionField, kVersionCount>& version_fields();
const VersionField& field(Version id);
inline const char* path(Version id) { return field(id).path; }

// ---- settings: what a file states and no flag does ----------------------------------------------

// A knob a config file states (a DeepSpeed bucket, the DataLoader's workers, DDP's bucket view) or a
// rule derives (modules_to_save trains the head; a preset sets the CUDA context), with no flag of its
// own. Its path names it in provenance, the readers' notes, the rules' defaults and validate()'s
// problems; every layer names it by its enumerator (path(Setting::overlap_comm)), so a misspelt path
// does not compile. The memplan YAML reader reads the rows that have a section by their keys there
// (profiles/config.cpp: training:, data:, a DeepSpeed zero_optimization:); the others are read by a
// section's own handlers (offload_optimizer.pin_memory, bf16.bf16_master_weights_and_grads,
// lora.modules_to_save), a format's reader or a rule, each naming the row. The memplan YAML and
// train-config writers (planner/emit.cpp) write each row that differs from its default where it
// takes effect (the ZeRO rows under ZeRO or offload, modules_to_save under adapters), where their
// reader reads it, so a plan's file reads back to the same setup (a device's rows come back with
// the card it names). Not in the `setup` or `sources` JSON.
enum class Setting {
  reduce_bucket_elems,
  allgather_bucket_elems,
  stage3_prefetch_bucket_elems,
  stage3_max_live_parameters,
  overlap_comm,
  contiguous_gradients,
  offload_pin_memory,
  half_master,
  half_optimizer_states,
  ddp_bucket_view,
  zero_redundancy_optimizer,
  ddp,
  fsdp_version,
  num_workers,
  prefetch_factor,
  pin_memory,
  global_batch,
  every_k,
  train_head,
  train_embeddings,
  cuda_context_bytes,
  cublas_workspace_bytes,
  thresholds,
  count  // sentinel: the number of settings
};
constexpr size_t kSettingCount = static_cast<size_t>(Setting::count);

// What the row is in a TrainingSetup: a whole number, a yes/no, or no member (a place a problem is
// reported at: the file's global batch, which the loaded config keeps; the memory: section, where
// the thresholds' order is one problem).
enum class SettingKind { whole, yes_no, place };

struct SettingField {
  Setting id;
  // The setup path, the member's spelling ("parallel.overlap_comm"; "hardware.cuda_context_bytes"
  // for the device's), or the place's ("batch.global_batch", "memory.target_utilization").
  const char* path;
  SettingKind kind;
  // The file section whose key table reads it ("training": a memplan YAML's, also at its top level
  // and under policy:; "data": also under training:; "zero_optimization": a DeepSpeed file's, also a
  // memplan file's deepspeed: block) and its keys there, the first the one the writers use (nullptr:
  // no more). section nullptr: read by handlers or rules.
  const char* section;
  std::array<const char*, 2> keys;
  int64_t& (*whole)(TrainingSetup&);  // the member (SettingKind::whole; nullptr otherwise)
  bool& (*yes_no)(TrainingSetup&);    // the member (SettingKind::yes_no; nullptr otherwise)
  int64_t (*get)(const TrainingSetup&);  // its value (a yes/no as 0 or 1; nullptr for a place)
  // validate()'s bounds for a whole number, with the problem's hint (hint nullptr: not bounded by
  // the row; every_k's floor is 1).
  int64_t lo, hi;
  const char* hint;
  const char* default_source;
};

// Every setting, in enumerator order (row i has id == Setting(i); checked at start-up).
const std::array<SettingField, kSettingCount>& setting_fields();
const SettingField& field(Setting id);
inline const char* path(Setting id) { return field(id).path; }
// Its first key in its section (the DeepSpeed writer's); a row read by handlers has none (logic_error).
const char* key(Setting id);
// The DeepSpeed section whose key table reads the ZeRO rows (a DeepSpeed JSON's, a memplan deepspeed: block's).
inline constexpr const char* kZeroSection = "zero_optimization";

// The base's quantization: derived (the fine-tuning method, a file's load_in_8bit/load_in_4bit,
// quantization_bit...), so it has no flag or key of its own; the readers note where they found it
// under this path.
inline constexpr const char* kBaseQuantPath = "finetune.base_quant";

// ---- the model's fields --------------------------------------------------------------------------

// ModelSpec's members by name: families.yaml sets them by it (profiles/families.cpp), and each has
// the path that provenance, validate()'s problems and `memplan check` use ("model.hidden_size").
// The readers name a field by its member (path(&ModelSpec::hidden_size)), so a misspelt field does
// not compile. A new member needs its row by hand (C++17 cannot list a struct's members): one
// without a row is a std::logic_error where path() first asks for it, and families.yaml cannot
// set it. The memplan YAML model: keys, the HF config keys and each tool's keys that set a field are
// the readers' own (profiles/config.cpp, profiles/hf_config.cpp, profiles/formats/).

// A member of an enum type, by the words that name its values (families.yaml's).
struct NamedMember {
  std::vector<std::string> names;
  std::function<std::string(const ModelSpec&)> get;          // the value's word ("?": none)
  std::function<bool(ModelSpec&, const std::string&)> set;   // false: not one of the words
  std::function<std::string(const ModelSpec&)> shown;        // the setup JSON's word (to_string) where it shows the field
};
using ModelMember = std::variant<bool ModelSpec::*, int64_t ModelSpec::*, double ModelSpec::*, std::string ModelSpec::*, NamedMember>;

struct ModelField {
  std::string name;  // the member's spelling, families.yaml's key: "hidden_size"
  std::string path;  // "model.hidden_size" ("model.num_experts_per_token" for experts_per_token)
  size_t offset;     // where the member lies in a ModelSpec (path() finds the row by it)
  ModelMember member;
  bool in_setup_json = false;  // the `setup` JSON's model section shows it, under `name`

  ModelField at(std::string p) &&;  // the row with another path
  ModelField shown() &&;            // the row, shown in the setup JSON
};

// Every field, in ModelSpec's order.
const std::vector<ModelField>& model_fields();
// The row of the member at `offset` (std::logic_error when there is none).
const ModelField& model_field_at(size_t offset);

template <class T>
size_t model_offset(T ModelSpec::*member) {
  static const ModelSpec probe{};
  return static_cast<size_t>(reinterpret_cast<const char*>(&(probe.*member)) - reinterpret_cast<const char*>(&probe));
}
template <class T>
const ModelField& field(T ModelSpec::*member) {
  return model_field_at(model_offset(member));
}
template <class T>
const char* path(T ModelSpec::*member) {
  return field(member).path.c_str();
}

}  // namespace memplan
