// Pieces shared between the profiles/ source files and not part of its public interface: the
// HF config reader with field positions, model families' architecture defaults, and the device
// and validation glue that load_config and build_setup both use.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "estimator/fields.h"
#include "profiles/profiles.h"
#include "profiles/reader.h"

namespace memplan::profiles::detail {

// A model read from a file, with where each model.* field came from and any warnings.
struct ReadModel {
  ModelSpec spec;
  Provenance origin;
  std::vector<Warning> warnings;
};

// family_defaults() (profiles/families.yaml) for a model_type that must be supported: InputError at
// `where` otherwise (with the supported list).
ModelSpec family_defaults_or_throw(const std::string& model_type, const Where& where);

// The family `type` as a families.yaml of this text gives it (family_defaults() reads the bundled
// file once); InputError at the line of what is wrong in the text.
std::optional<ModelSpec> family_from_text(const std::string& text, const std::string& path, const std::string& type);

// How the HF reader (hf_config.cpp) reads a family's config.json: families.yaml's `hf:` block,
// merged down the entry's `like` chain (keys and defaults one by one, required and quirks whole).
struct HfKeys {
  // A ModelSpec field's name -> the config keys that state it, the first present winning; an empty
  // list: the family's config has no key for it (one its `like` has).
  std::map<std::string, std::vector<std::string>> keys;
  std::vector<std::string> required;       // fields a file must state, unless a default covers the key
  std::map<std::string, double> defaults;  // config key -> the transformers Config class's default
  std::vector<std::string> quirks;         // hf_config.cpp's named readers, run after the keys, in order
  std::string text_model;                  // a multimodal wrapper: the family of its text_config (not inherited)
};
struct Family {
  ModelSpec spec;  // family_defaults()
  HfKeys hf;
  bool liger = false;  // `liger: true` (profiles::liger_patches)
};
// The family a config.json's model_type is read as: its entry, or the entry that lists it in
// `aliases:` (Falcon's RefinedWeb), with spec.model_type the type asked for; nullopt when none.
std::optional<Family> hf_family(const std::string& model_type);
// The same from a families.yaml of this text (tests).
std::optional<Family> hf_family_from_text(const std::string& text, const std::string& path, const std::string& type);
// Whether hf_config.cpp has the quirk reader `name` (families.yaml's hf.quirks).
bool is_hf_quirk(const std::string& name);

// What memplan refuses to estimate (families.yaml's `refused:`): "model_type 'T' WHAT: WHY" for a
// config whose model_type is one of `types`, or that states a `when_true` key true or any
// `when_present` key.
struct Refusal {
  std::string what;  // "is an encoder-decoder model"
  std::string why;   // the feature memplan would need
  std::string hint;
  std::vector<std::string> types, when_true, when_present;
};
const std::vector<Refusal>& refused_families();
// The same from a families.yaml of this text (tests).
std::vector<Refusal> refused_from_text(const std::string& text, const std::string& path);

// What a PEFT modules_to_save entry trains beside the adapters: the embeddings (embed_tokens, wte,
// embed_in: Setting::train_embeddings) or the head (lm_head, score, classifier: Setting::
// train_head); nullopt: neither.
std::optional<Setting> saved_module(const std::string& module);

// An MLP activation by its HF name (hidden_act); InputError listing the known ones otherwise.
Activation as_activation(const Node& n);

// An HF config.json tree; `name` becomes ModelSpec::name. Validates the model.
ReadModel read_hf_config(const Node& root, const std::string& path, const std::string& name);
// The file at `path`; problems reading it are reported at `named_at` when given (the flag or
// line that named it).
ReadModel read_hf_config_file(const std::string& path, const Where& named_at = Where{});
// The model name a config file gives: its stem, or its folder for ".../name/config.json".
std::string config_model_name(const std::string& path);
// load_model with positions and warnings.
ReadModel resolve_model(const std::string& name_or_path, const Where& origin);
// A Hub id through the Hugging Face cache, memplan's cache or the Hub (profiles/hub.h); a cached
// file that does not parse is an error naming the model, with the file to delete.
ReadModel resolve_hub_model(const std::string& repo, const Where& origin);

// The model fields validate() checks, all pointed at one origin (a preset name, --model).
void set_model_origin(Provenance& origin, const Where& where);

// Throws InputError for the first problem validate() finds whose field starts with `prefix`
// ("" for all), at the position or flag the field came from (else at `fallback`).
void throw_first_problem(const TrainingSetup& s, const Provenance& origin, const std::string& prefix,
                         const Where& fallback);

// A release of the version registry's row `f` (estimator/fields.h), "2.6" or "5.17.0", as (major,
// minor); otherwise an InputError at `where`: "<subject> must look like <examples> (got 'x')" with
// the row's hint. `subject`: the key's path for a config, "the torch version" for a flag.
std::pair<int, int> read_version(const VersionField& f, const std::string& text, const Where& where, const std::string& subject);

// The device for a GPU preset and/or an explicit capacity (either may be absent). An unknown GPU
// is an InputError at `gpu_where` with the nearest presets as a hint.
DeviceSpec gpu_device(const std::optional<std::string>& gpu, const Where& gpu_where, std::optional<int64_t> capacity);

// A DeepSpeed config (a ds_config.json, or the same mapping inline in another tool's file) read
// as memplan's DeepSpeed reader reads it (config.cpp), except that its "auto" values are neither
// kept nor warned about: they are listed, with their dotted paths and positions, for the caller to
// fill the way its launcher does (the HF Trainer from TrainingArguments, accelerate from its config).
struct DeepSpeedConfig {
  LoadedConfig cfg;
  std::vector<std::pair<std::string, Where>> auto_values;  // ("zero_optimization.reduce_bucket_size", where)
};
DeepSpeedConfig read_deepspeed_config(const Node& root, const std::string& path, const std::filesystem::path& file);

// ---- names (names.cpp) ----

// "RTX 3090", "rtx_3090" and "Rtx-3090" all read "rtx-3090".
std::string normalise_name(const std::string& name);
// Preset names nearest to `word` over names and aliases, each preset once, best first (up to 3).
struct Named {
  std::string name;
  std::vector<std::string> aliases;
};
std::vector<std::string> suggest_among(const std::string& word, const std::vector<Named>& presets);
// "did you mean 'x'? (memplan gpus lists the presets)", or the lister and `otherwise`.
std::string did_you_mean(const std::vector<std::string>& suggestions, const char* lister, const char* otherwise);

// With only a capacity (--gpu-memory, no preset) the card is unknown: plan with the largest
// family context in gpus.yaml short of Blackwell (512 MiB: Hopper, AMD) and PyTorch 2.x's default
// cuBLAS workspace (":4096:2:16:8" = 8,519,680 B), so an unknown card is not under-estimated.
constexpr int64_t kGenericContextBytes = 536'870'912;
constexpr int64_t kGenericWorkspaceBytes = 8'519'680;

}  // namespace memplan::profiles::detail
