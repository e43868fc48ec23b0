// The training-config formats memplan reads (internal to profiles/): which format a file is in,
// from the keys it carries (or --format), and the small state every format reader fills. Each
// tool's reader lives in profiles/formats/<tool>.cpp and reads the file as that tool reads it,
// with the defaults it applies (cited there); a key that changes memory but is not modelled
// becomes a warning naming the key and why, never silence.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "profiles/detail.h"

namespace memplan::profiles::detail {

enum class ConfigFormat {
  memplan_yaml,    // memplan's own YAML and the memory guides' dialects (config.cpp)
  deepspeed_json,  // DeepSpeed ds_config.json (config.cpp)
  hf_config,       // Hugging Face config.json: a model, no training setup (config.cpp)
  hf_trainer,      // HF TrainingArguments / TRL / alignment-handbook YAML or JSON
  axolotl,         // Axolotl YAML
  llamafactory,    // LLaMA-Factory YAML (llamafactory-cli train)
  torchtune,       // torchtune recipe YAML
  torchtitan,      // torchtitan TOML
  litgpt,          // LitGPT YAML
  lightning,       // LightningCLI YAML
  accelerate,      // accelerate config file
  nemo,            // NeMo / Megatron YAML (trainer: + model: with Megatron keys)
};
const char* format_name(ConfigFormat f);  // "memplan-yaml", "hf-trainer", "torchtune", ...
std::optional<ConfigFormat> parse_format(const std::string& name);
std::vector<std::string> format_names();
const char* format_title(ConfigFormat f);  // "HF TrainingArguments/TRL config", for the header

// The format of a parsed file from the keys it carries; nullopt when nothing says.
std::optional<ConfigFormat> detect_format(const Node& root, bool json, bool toml);

// What every format reader fills: the LoadedConfig, provenance with the key that set a value,
// and warnings for keys it cannot model.
struct ReadState {
  std::string path;            // the file as messages name it
  std::filesystem::path file;  // on disk: relative paths inside resolve against its folder
  std::string text;            // the file's text (for what a parser drops: comments)
  LoadedConfig out;

  TrainingSetup& s() { return out.setup; }
  // Sets `slot` and notes `field` as coming from key `n`.
  template <class T, class V>
  void set(const std::string& field, T& slot, V value, const Node& n) {
    slot = static_cast<T>(value);
    note(field, n);
  }
  // Sets a switch of the registry (estimator/fields.h) and notes it as coming from key `n`.
  void set(Switch id, bool value, const Node& n) {
    memplan::field(id).set(s(), value);
    note(memplan::path(id), n);
  }
  void note(const std::string& field, const Node& n);
  // A memory-relevant key memplan does not model: "<key>: <value> is not modelled yet: <why>".
  void unmodelled(const Node& n, const std::string& why, const std::string& hint = "");
  // A model named by the file (a preset, HF id, config.json path or directory).
  void use_model(const std::string& name, const Node& n);
  // A path the file names, relative to the file's folder.
  std::filesystem::path beside(const std::string& relative) const;
  // A value the file leaves to the launcher or the data: warned about unless a flag sets `field`.
  void defer(const std::string& field, const Where& where, const std::string& message, const std::string& hint);
  // A value a rule set (the tool's default, cited), not a key of the file.
  void by_default(const std::string& field, const std::string& source) { out.origin.defaults[field] = source; }
};

// A config file's format readers. `root` is the parsed file (YAML, JSON or TOML as a Node tree).
using FormatReader = void (*)(const Node& root, ReadState& st);
// The readers in profiles/formats/ (one file per tool).
void read_torchtune(const Node& root, ReadState& st);
void read_torchtitan(const Node& root, ReadState& st);
void read_litgpt(const Node& root, ReadState& st);
void read_lightning(const Node& root, ReadState& st);
void read_nemo(const Node& root, ReadState& st);
// The tools' names for a model (profiles::tool_model).
std::optional<ToolModelRef> torchtune_model_for(const ModelSpec& m);
std::optional<ToolModelRef> litgpt_model_for(const ModelSpec& m);
// The reader of a format, or nullptr when it is one of config.cpp's own (memplan, DeepSpeed, HF).
FormatReader format_reader(ConfigFormat f);

// The readers of profiles/formats/: HF TrainingArguments / TRL, Axolotl, accelerate.
void read_hf_trainer_config(const Node& root, ReadState& st);
void read_axolotl_config(const Node& root, ReadState& st);
void read_llamafactory_config(const Node& root, ReadState& st);
void read_accelerate_config(const Node& root, ReadState& st);

// TOML into the same Node tree (toml++), with positions; InputError at the syntax error.
Node parse_toml(const std::string& text, const std::string& path);

}  // namespace memplan::profiles::detail
