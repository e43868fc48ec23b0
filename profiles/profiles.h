// Where TrainingSetups come from: the bundled GPU and model presets (data files under
// profiles/), HF config.json files, memplan YAML in the memory guides' dialects, DeepSpeed
// ds_config.json, calibration profiles, and command-line flags. Every reader reports bad input
// as InputError with file:line:col and a hint; near-miss keys become Warnings ("did you mean").
// No memory arithmetic lives here.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "estimator/error.h"
#include "estimator/estimate.h"
#include "estimator/fields.h"
#include "estimator/setup.h"

namespace memplan::profiles {

// ---- bundled data -----------------------------------------------------------------------------

// The folder holding gpus.yaml, families.yaml and models/: $MEMPLAN_DATA_DIR if set; else
// <executable dir>/../share/memplan (an installed memplan); else the source tree's profiles/
// (a build tree). InputError (exit 2) naming the places looked in when none has gpus.yaml.
std::string data_dir();

// ---- model families (families.yaml) ----------------------------------------------------------

// The HF model_types memplan models, in families.yaml's order (wrappers such as gemma3 and llama4
// are read through the text model of their text_config).
const std::vector<std::string>& supported_model_types();
// The architecture of an HF model_type (norm, activation, biases, tying, head, quirks; no sizes)
// as families.yaml gives it from the family's transformers Config defaults and modelling code.
// nullopt for an unsupported type. The config readers and the measurement harness's models start
// here. Loaded once from data_dir()/families.yaml; InputError at its line if the file is broken.
std::optional<ModelSpec> family_defaults(const std::string& model_type);
// Whether Liger-Kernel patches the family's model_type (families.yaml's `liger: true`, from
// MODEL_TYPE_TO_APPLY_LIGER_FN, src/liger_kernel/transformers/monkey_patch.py @ v0.5.10); false for
// a type with no entry.
bool liger_patches(const std::string& model_type);

// Every ModelSpec field by its member's name (families.yaml's keys) with its value in `m` as text
// ("rms_norm", "0.25", "true"), in the struct's order.
std::vector<std::pair<std::string, std::string>> model_fields_text(const ModelSpec& m);

struct GpuFamily {
  std::string name;
  int64_t cuda_context_bytes = 0;
  int64_t cublas_workspace_bytes = 0;
  std::string source;
  // What the family's software stack runs (flash attention, bitsandbytes, DeepSpeed, NCCL, ...),
  // with a reason for each feature it does not fully run and the citations; shared by its cards.
  std::shared_ptr<const Capabilities> caps;
};

struct GpuProfile {
  std::string name;                  // preset name, lower case
  std::vector<std::string> aliases;  // other spellings (torch.cuda.get_device_name())
  std::string vendor;                // nvidia | amd | apple
  std::string family;
  int64_t memory_bytes = 0;          // total device memory
  // Where memory_bytes comes from: "measured" (memplan's harness on the card), "printed" (a byte
  // total a tool printed), "printed-mib" (a MiB total x 2^20), "nominal" (the marketed size); ""
  // when the catalog does not say (a user's catalog).
  std::string memory_basis;
  bool unified_memory = false;
  double usable_fraction = 1.0;      // share a training job can use (Apple unified memory)
  std::string compute_capability;
  bool bf16 = true;
  bool fp8 = false;
  double peak_bf16_flops = 0;
  double memory_bandwidth_bytes_per_s = 0;
  double interconnect_bytes_per_s = 0;
  std::string source;
  int64_t usable_bytes() const;      // memory_bytes * usable_fraction
};

// The GPU presets of gpus.yaml. Loading splits the file into its entries (families and GPUs) and
// indexes their names and aliases off their lines; an entry is parsed and checked the first time
// it is asked for, so a command that names one card parses one GPU and one family. Thread-safe.
class GpuCatalog {
 public:
  GpuCatalog();
  GpuCatalog(GpuCatalog&&) noexcept;
  GpuCatalog& operator=(GpuCatalog&&) noexcept;
  ~GpuCatalog();

  // By name or alias, case-insensitive; nullptr when unknown. Throws InputError when that
  // entry of the file is broken.
  const GpuProfile* find(const std::string& name) const;
  // Every preset in file order (parses every entry).
  const std::vector<const GpuProfile*>& all() const;
  size_t size() const;
  // A family by name; nullptr when unknown.
  const GpuFamily* family(const std::string& name) const;
  // Up to 3 nearest names (edit distance / substring), for "did you mean".
  std::vector<std::string> suggest(const std::string& name) const;

  struct Index;  // gpu_catalog.cpp

 private:
  friend GpuCatalog parse_gpu_catalog(const std::string& text, const std::string& path);
  std::unique_ptr<Index> index_;
};
// Loaded once from data_dir()/gpus.yaml. Throws InputError if the file is broken.
const GpuCatalog& gpu_catalog();
GpuCatalog load_gpu_catalog(const std::string& path);
// The same from the file's text (`path` names it in messages).
GpuCatalog parse_gpu_catalog(const std::string& text, const std::string& path);

// Sets setup.device from a GPU profile (capacity = usable bytes, family defaults for context
// and cuBLAS workspace).
void apply_gpu(TrainingSetup& s, const GpuProfile& g, const GpuCatalog& catalog);
// The allocator cap of `from` (--allocator-cap: bytes, or a fraction of the card) on the card `to`
// (whose capacity is the card's own): the process may use the cap plus the context, the card's
// memory if less (kept as to.uncapped_bytes). Used wherever a setup's card is swapped for another
// (plan's cards and tables, memplan check's reverts).
void carry_allocator_cap(DeviceSpec& to, const DeviceSpec& from);

struct ModelPreset {
  std::string name;     // file stem under models/
  std::string hf_repo;  // _name_or_path of the config
  std::string path;     // absolute path of the config.json
};
const std::vector<ModelPreset>& model_presets();  // sorted by name (reads every preset's repo id)
// The bundled preset called `name` (its file stem, or its HF repository id), case-insensitive.
// A name reads one file; only a repository id looks at the others. nullopt when none.
std::optional<ModelPreset> find_model_preset(const std::string& name);

// A community re-upload of a preset's weights under another Hub id (models/mirrors.yaml): read as
// that preset, with a warning, when no cache holds the mirror's own config.json.
struct ModelMirror {
  std::string id;        // the mirror's Hub id
  std::string preset;    // the preset of the same weights
  std::string upstream;  // the repository the weights come from
  std::string dtype;     // the mirror's stored dtype where it differs from the preset's, else empty
  std::string named_by;  // a public file using the id as that model, at a commit
};
const std::vector<ModelMirror>& model_mirrors();  // in the file's order; InputError at a broken entry
// The mirror with Hub id `id` (ignoring case), or nullopt.
std::optional<ModelMirror> find_model_mirror(const std::string& id);

// A model by preset name, HF repository id alias, config.json path or directory holding one.
// `origin` says where the name came from (flag or YAML position) for errors. What the config
// could only approximate (e.g. Qwen-MoE mlp_only_layers) is appended to `warnings` when given.
// Unknown model_type, missing or wrong-typed fields are errors with the JSON position.
ModelSpec load_model(const std::string& name_or_path, const Where& origin, std::vector<Warning>* warnings = nullptr);

// ---- sizes -------------------------------------------------------------------------------------

// "12GiB", "12 GiB", "24GB" (decimal: 24e9), "80G" (GiB), "512MiB", "1.5TiB", "12884901888".
// nullopt when not a size. What memplan reads from a user goes through read_size().
std::optional<int64_t> parse_size(const std::string& text);

// A size as memplan reads it everywhere (the size flags, a config's hardware: sizes, plan --table,
// MEMPLAN_MAX_FILE_SIZE): a number with its unit, above 0. A bare number is refused with one hint,
// here as at every flag: "12" was read as 12 bytes (a card that fits nothing), and 12GB and 12GiB
// differ by 7%. `what` names the value in the message ("the GPU's memory"); the error is at `where`.
int64_t read_size(const std::string& text, const Where& where, const std::string& what);
// The refusal of a bare number (no unit), or nullopt when `text` is not one.
std::optional<InputError> bare_size_error(const std::string& text, const Where& where);

// ---- training configs ----------------------------------------------------------------------------

// Where each setup field was set, by setup path ("batch.micro_batch", "model.hidden_size"),
// so validation problems can point at the line or flag. The paths are validate()'s Problem
// fields, the registry's (estimator/fields.h: path(Choice::precision) is "precision",
// path(Target::gpu) "hardware.gpu", path(Setting::num_workers) "data.num_workers");
// path(Setting::thresholds) stands for the memory: section (validate()'s thresholds-order problem
// points there).
struct Provenance {
  std::map<std::string, Where> fields;
  // Fields a rule set rather than the file or a flag: the framework's defaults (with the upstream
  // source they were read from) and values one setting implies ("--liger: fused-linear loss").
  std::map<std::string, std::string> defaults;
  Where of(const std::string& field) const;  // empty Where when unknown
  void set(const std::string& field, const Where& w) { fields[field] = w; }
  bool given(const std::string& field) const { return fields.count(field) > 0 || defaults.count(field) > 0; }
  // The same for a row of the registry (estimator/fields.h), by its enumerator: Switch::liger,
  // Count::micro_batch, Choice::loss, Number::lora_alpha, List::lora_targets, Version::torch.
  template <class Id, class = std::enable_if_t<std::is_enum_v<Id>>>
  Where of(Id id) const { return of(std::string(path(id))); }
  template <class Id, class = std::enable_if_t<std::is_enum_v<Id>>>
  void set(Id id, const Where& w) { set(std::string(path(id)), w); }
  template <class Id, class = std::enable_if_t<std::is_enum_v<Id>>>
  bool given(Id id) const { return given(std::string(path(id))); }
  // The words that say where a field's value came from: the file key's text, else the default's
  // ("" when neither); set_text replaces them where they stand.
  std::string text_of(const std::string& field) const;
  void set_text(const std::string& field, const std::string& text);
};

// What a config file says. `origin` holds the setup paths the file set explicitly.
struct LoadedConfig {
  TrainingSetup setup;
  Provenance origin;
  std::vector<Warning> warnings;
  std::optional<int64_t> global_batch;       // training.global_batch_size / train_batch_size
  std::optional<std::string> gpu;            // hardware.gpu
  std::optional<std::string> device;         // hardware.device: cpu, cuda (a plan for --device cpu writes it)
  std::optional<int64_t> gpu_memory;         // hardware.gpu_memory
  std::optional<std::string> allocator_cap;  // hardware.allocator_cap: a size, or a fraction of the card
  bool has_model = false;                    // the file named a model (preset, hf_config, inline)
  // Without a model: why the file names none, at the place it would (a format reader's words,
  // e.g. a LightningCLI model: that is the user's module); build_setup reports it unless --model.
  std::optional<Warning> no_model;
  // What the file leaves to the launcher or to the data (torchtune's GPU count, a null
  // max_seq_len): each warning is reported, and refused by --strict, only when no flag sets
  // `field` ("parallel.num_gpus", "batch.seq_len", "batch.micro_batch").
  struct Deferred {
    std::string field;
    Warning warning;
  };
  std::vector<Deferred> deferred;
  std::string kind;                          // the format read: "memplan", "deepspeed", "hf-config",
                                             // "hf-trainer", "axolotl", "torchtune", ... (formats.h)
  // The 16-bit type follows the target GPU (Axolotl's bf16: auto): the bf16 regimes the reader set
  // become their fp16 counterparts when the setup is built for a GPU without bf16.
  bool precision_follows_device = false;
  // An HF TrainingArguments/TRL file that leaves the load dtype to from_pretrained's default: fp32
  // weights under autocast up to transformers 4.x, the checkpoint's own dtype from 5.0
  // (dtype="auto"); decided once the transformers version and the model are known.
  std::optional<Where> load_dtype_default;
  // A tool that loads the checkpoint's own dtype whatever the transformers version (LLaMA-Factory:
  // torch_dtype="auto") and trains a frozen base in it: a 16-bit checkpoint gives that 16-bit
  // precision, an fp32 one `if_fp32`; decided once the model is known (a --model may replace the
  // file's). `text` says why, `where` is the key the precision is noted at.
  struct CheckpointPrecision {
    Precision if_fp32 = Precision::fp32;
    Where where;
    std::string text;
  };
  std::optional<CheckpointPrecision> checkpoint_precision;
  // A checkpointing the tool decides by the GPU count, which a --gpus flag may change (LitGPT's
  // fine-tuning scripts checkpoint every Block over several devices, none on one): build_setup
  // applies `several` or `one` for the final count unless --checkpointing is given.
  struct ByDeviceCount {
    Checkpointing one, several;
    std::string why_one, why_several;
  };
  std::optional<ByDeviceCount> checkpointing_by_devices;
  // DeepSpeed bucket sizes written "auto", filled from the model's hidden size h once the model is
  // known (reduce_bucket_size h^2, stage3_prefetch_bucket_size 0.9 h^2), as the HF Trainer and
  // accelerate fill them; the position of the "auto".
  std::optional<Where> auto_reduce_bucket, auto_prefetch_bucket;
  // The file's model could not be resolved (an unknown name, a Hub id offline): raised when the
  // setup is built unless --model replaces it.
  std::optional<InputError> model_error;
};

// Reads a training config in any format memplan knows (memplan YAML in the guides' dialects,
// DeepSpeed JSON, HF config.json, HF TrainingArguments/TRL, Axolotl, torchtune, torchtitan TOML,
// LitGPT, LightningCLI, accelerate, NeMo), detected from the keys it carries unless `format`
// names one (--format). Relative paths inside resolve against the file's folder.
LoadedConfig load_config(const std::string& path, const std::string& format = "");
// The same for `text`, the content of the file at `path` at some other time (a git revision):
// messages name it `shown_as` ("HEAD~1:configs/train.yaml"); relative paths and an inline model's
// name come from `path`, as for the file now.
LoadedConfig load_config_text(const std::string& text, const std::string& shown_as, const std::string& path,
                              const std::string& format = "");
// The names --format accepts.
std::vector<std::string> config_format_names();

// ---- models in the training tools' own words (profiles/formats/) ------------------------------

// A model as a training tool names and builds it, for `plan --emit TOOL`.
struct ToolModelRef {
  std::string name;               // torchtune: the builder ("torchtune.models.llama3_2.llama3_2_1b");
                                  // LitGPT: checkpoint_dir ("checkpoints/meta-llama/Llama-3.2-1B")
  std::string tokenizer;          // torchtune: the tokenizer builder of the family
  std::string checkpointer_type;  // torchtune: FullModelHFCheckpointer's model_type ("LLAMA3_2")
  ModelSpec spec;                 // what the tool builds (LitGPT: lm_head untied, vocabulary padded)
};
// The tool's model of the same architecture as `m` (a preset or a model the tool's reader made);
// nullopt when `format` ("torchtune", "litgpt") has none or is another format.
std::optional<ToolModelRef> tool_model(const ModelSpec& m, const std::string& format);

// ---- finding configs (discover.cpp) and past versions (revision.cpp) ---------------------------

struct ConfigFile {
  std::string path;   // as shown and as given to the readers
  bool named = true;  // named on the command line (not found by walking a directory)
};
// Named files as given; directories walked recursively (sorted) for *.yaml, *.yml and *.json,
// hidden entries (.git, .github, dotfiles) left out.
std::vector<ConfigFile> find_config_files(const std::vector<std::string>& paths);
// Why a file is not a training config (a CI workflow, a GPU catalog, a config.json without a
// training setup ...), from a quick look at its top level; nullopt when it may be one. A file that
// does not parse may be a broken config: the reader reports it.
std::optional<std::string> not_a_training_config(const std::string& path);

// A file as it was at a git revision.
struct Revision {
  std::string shown_as;             // "HEAD~1:configs/train.yaml"
  std::optional<std::string> text;  // none when the file is not in that revision
  std::string note;                 // why there is no text ("new file: not in HEAD~1, no baseline")
};
// Reads `path` at `ref` through git (run without a shell). InputError when git cannot run, the
// file is outside a repository, or `ref` names no commit.
Revision read_at_revision(const std::string& path, const std::string& ref);

// ---- flags -> setup -----------------------------------------------------------------------------

// Everything the common command-line flags can say. Unset means "not given".
struct SetupInputs {
  std::optional<std::string> config;         // --config FILE
  std::optional<std::string> format;         // --format NAME (the config's format, else detected)
  bool strict = false;                       // --strict: a reader warning is an error (exit 2)
  std::optional<std::string> model;          // --model PRESET|FILE|DIR
  // The target (estimator/fields.h's Target rows).
  std::optional<std::string> gpu;            // --gpu PRESET
  std::optional<std::string> device;         // --device cpu|cuda|cuda:N
  std::optional<std::string> calibration;    // --calibration FILE
  std::optional<std::string>& target_flag(Target id) { return id == Target::gpu ? gpu : id == Target::device ? device : calibration; }
  const std::optional<std::string>& target_flag(Target id) const { return const_cast<SetupInputs*>(this)->target_flag(id); }
  // The yes/no switches (estimator/fields.h), by Switch: --liger / --no-liger and the rest.
  std::array<std::optional<bool>, kSwitchCount> switches;
  std::optional<bool>& switch_flag(Switch id) { return switches[static_cast<size_t>(id)]; }
  const std::optional<bool>& switch_flag(Switch id) const { return switches[static_cast<size_t>(id)]; }
  // The counts (estimator/fields.h), by Count: --gpus, --micro-batch, --seq-len and the rest.
  std::array<std::optional<int64_t>, kCountCount> counts;
  std::optional<int64_t>& count_flag(Count id) { return counts[static_cast<size_t>(id)]; }
  const std::optional<int64_t>& count_flag(Count id) const { return counts[static_cast<size_t>(id)]; }
  // The choices (estimator/fields.h), by Choice: --precision, --optimizer, --checkpointing,
  // --attention, --offload, --finetune, --adapter-dtype and the runtime's --framework,
  // --optimizer-impl, --fsdp, --loss.
  std::array<std::optional<std::string>, kChoiceCount> choices;
  std::optional<std::string>& choice_flag(Choice id) { return choices[static_cast<size_t>(id)]; }
  const std::optional<std::string>& choice_flag(Choice id) const { return choices[static_cast<size_t>(id)]; }
  // The sizes (estimator/fields.h), by Size, as written: --gpu-memory 12GiB, --allocator-cap 11GiB |
  // 0.5, --host-memory 512GiB.
  std::array<std::optional<std::string>, kSizeCount> sizes;
  std::optional<std::string>& size_flag(Size id) { return sizes[static_cast<size_t>(id)]; }
  const std::optional<std::string>& size_flag(Size id) const { return sizes[static_cast<size_t>(id)]; }
  // The lists (estimator/fields.h), by List: --lora-targets q,k,v,o | all-linear.
  std::array<std::optional<std::string>, kListCount> lists;
  std::optional<std::string>& list_flag(List id) { return lists[static_cast<size_t>(id)]; }
  const std::optional<std::string>& list_flag(List id) const { return lists[static_cast<size_t>(id)]; }
  // The numbers with a flag (estimator/fields.h), by Number: --lora-alpha, --lora-dropout.
  std::array<std::optional<double>, kNumberCount> numbers;
  std::optional<double>& number_flag(Number id) { return numbers[static_cast<size_t>(id)]; }
  const std::optional<double>& number_flag(Number id) const { return numbers[static_cast<size_t>(id)]; }
  // The releases (estimator/fields.h), by Version: --torch-version, --transformers-version.
  std::array<std::optional<std::string>, kVersionCount> versions;
  std::optional<std::string>& version_flag(Version id) { return versions[static_cast<size_t>(id)]; }
  const std::optional<std::string>& version_flag(Version id) const { return versions[static_cast<size_t>(id)]; }
  // The releases the job's own Python has installed (the CLI's probe, cli/python_env.h), for the
  // versions neither the config nor a flag states: `version` "2.11.0+cu130" with `source` the
  // words saying where it was read; an empty `version` says in `source` why none was found (the
  // default stands, and the header says so).
  struct EnvironmentRelease {
    std::string version;
    std::string source;
  };
  std::array<std::optional<EnvironmentRelease>, kVersionCount> environment;
};

struct BuiltSetup {
  TrainingSetup setup;
  Provenance origin;
  std::vector<Warning> warnings;
  std::optional<int64_t> global_batch;  // from the config file, if it said
  std::optional<Calibration> calibration;
  std::string config_path;              // the --config file, if any
  std::string config_format;            // the format it was read as ("torchtune"), if any
};

// Config file first, then flags on top (flags win). Validates the result with
// memplan::validate and throws InputError pointing at the file position or flag of the first
// problem. A missing model is an error ("--model or model: in the config").
BuiltSetup build_setup(const SetupInputs& in);
// The same with the config already loaded (`cfg`: what load_config gave for in.config, empty
// without one), for callers that read it first.
BuiltSetup build_setup(const SetupInputs& in, const LoadedConfig& cfg);
// This machine's RAM (/proc/meminfo MemTotal; 0 when unreadable): the capacity of --device cpu
// unless --gpu-memory says.
int64_t host_memory_bytes();

// ---- calibration profiles -------------------------------------------------------------------

// memplan.calibration/v1 YAML written by `memplan calibrate`.
Calibration load_calibration(const std::string& path);
// The same from the file's text (`path` names it in messages).
Calibration load_calibration_text(const std::string& text, const std::string& path);
// Writes atomically (write_file_atomically, files.h): never a half-written file; an existing file
// is replaced only with `force`.
void save_calibration(const Calibration& c, const std::map<std::string, std::string>& stamp,
                      const std::string& path, bool force = false);
// True when a profile measured on `c.device` (a preset name or the device's own name, such as
// "NVIDIA H200") belongs to `d`: the same preset, or a profile without a device.
bool calibration_applies(const Calibration& c, const DeviceSpec& d);

// The device a calibration's measurements came from, by the name the driver gives ("NVIDIA
// H200"): its GPU preset when the catalog knows the name, else a generic CUDA device.
DeviceSpec device_for_name(const std::string& device_name);

// A saved `memplan calibrate --json` document (memplan.calibrate/v1): what each probe of
// the series measured, so `calibrate --from FILE` can fit a profile without running anything.
struct SavedProbe {
  std::string name;
  Where where;        // the probe's "name" in the file
  bool ok = false;    // false: it did not run (out of memory, refused)
  int64_t measured_bytes = 0;            // device figure (CUDA) or counted peak (CPU)
  int64_t measured_allocated_bytes = 0;  // 0: not recorded (documents before the split)
  int64_t measured_reserved_bytes = 0;
  int64_t measured_context_bytes = 0;
};
struct SavedCalibration {
  std::string path;
  bool cuda = false;
  std::map<std::string, std::string> stamp;  // device_name, driver, libtorch, ... as measured
  std::vector<SavedProbe> probes;
};
// Strict, like a profile: the schema, a stamp with device_name and libtorch, a `cuda` flag, and
// per probe a name with byte counts in [0, 1 TiB]; InputError at file:line:col otherwise.
SavedCalibration load_saved_calibration(const std::string& path);

// ---- helpers shared by readers ---------------------------------------------------------------

// A string fit for a one-line message: control characters escaped, at most `max` bytes shown
// (longer ones end in "..."), UTF-8 sequences never cut. Names from files and flags go through it.
std::string clip(const std::string& s, size_t max = 60);

// Levenshtein distance (for did-you-mean).
int edit_distance(const std::string& a, const std::string& b);
// The closest candidates within a typo's distance, best first.
std::vector<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates, size_t max = 3);

}  // namespace memplan::profiles
