// Which files `memplan check` looks at: named files, and directories walked for configs; and a
// quick look at a file's top level to tell a training config from the other YAML/JSON a
// repository holds (workflows, hooks, catalogs, calibration profiles).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <optional>

#include "profiles/formats.h"
#include "profiles/profiles.h"
#include "profiles/reader.h"

namespace memplan::profiles {
namespace fs = std::filesystem;

namespace {
bool config_extension(const fs::path& p) {
  const std::string e = detail::lower(p.extension().string());
  return e == ".yaml" || e == ".yml" || e == ".json" || e == ".toml";  // .toml: torchtitan job configs
}

}  // namespace

// Named files as given; directories walked recursively in sorted order, hidden entries (.git,
// .github, dotfiles) left out.
std::vector<ConfigFile> find_config_files(const std::vector<std::string>& paths) {
  std::vector<ConfigFile> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      out.push_back({p, true});
      continue;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec) && config_extension(it->path()))
        found.push_back(it->path().lexically_normal().generic_string());
    }
    std::sort(found.begin(), found.end());
    for (std::string& f : found) out.push_back({std::move(f), false});
  }
  return out;
}

// Why a file is not a training config, from a quick look at its top level; nullopt when it may
// be one. A file that does not read or parse may be a broken config: the reader reports it. The
// look goes through the readers (parse_json, parse_yaml), so it is bounded like them.
std::optional<std::string> not_a_training_config(const std::string& path) {
  using detail::Node;
  const std::string ext = detail::lower(fs::path(path).extension().string());
  Node root;
  try {
    const std::string text = detail::read_text_file(path);
    root = ext == ".json"   ? detail::parse_json(text, path)
           : ext == ".toml" ? detail::parse_toml(text, path)
                            : detail::parse_yaml(text, path);
  } catch (const InputError&) {
    return std::nullopt;
  }
  auto has = [&](const Node& n, const char* key) {
    return std::any_of(n.entries.begin(), n.entries.end(), [&](const auto& e) { return e.first == key; });
  };
  const bool map = root.kind == Node::Kind::map;
  // The tools' own training configs, by the keys their readers detect them from: an HF
  // TrainingArguments/TRL file, an Axolotl or a LLaMA-Factory file is checked (its reader says when it names no
  // model), an accelerate launcher config is not a whole job.
  if (map && ext != ".toml") {
    const auto format = detail::detect_format(root, ext == ".json", false);
    const auto has_any = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return root.find(k) != nullptr; });
    };
    if (format == detail::ConfigFormat::axolotl || format == detail::ConfigFormat::llamafactory) return std::nullopt;
    if (format == detail::ConfigFormat::hf_trainer &&
        has_any({"model_name_or_path", "per_device_train_batch_size", "use_peft", "gradient_checkpointing_kwargs"}))
      return std::nullopt;
    if (format == detail::ConfigFormat::accelerate)
      return "accelerate launcher config without a model (memplan estimate --config FILE --model NAME estimates it)";
  }
  if (ext == ".json") {
    if (map && has(root, "model_type"))
      return "Hugging Face model config.json without a training setup (memplan estimate --model FILE estimates it)";
    if (map && (has(root, "zero_optimization") || has(root, "train_micro_batch_size_per_gpu") || has(root, "train_batch_size")))
      return "DeepSpeed config without a model (memplan estimate --config FILE --model NAME estimates it)";
    return "JSON that is neither a DeepSpeed config nor a Hugging Face config.json";
  }
  if (ext == ".toml") {
    // torchtitan's job configs name the model in a [model] table (name, flavor); other TOML in a
    // repository (pyproject.toml, ...) does not.
    const Node* model = root.find("model");
    if (model && model->kind == Node::Kind::map) return std::nullopt;
    return "TOML without a [model] table (not a torchtitan job config)";
  }
  if (root.kind == Node::Kind::null) return "empty file";
  if (root.kind == Node::Kind::list) {
    const Node* first = root.items.empty() ? nullptr : &root.items.front();
    if (first && first->kind == Node::Kind::map && first->find("id") && first->find("entry")) return "pre-commit hook definitions";
    return "a list, not a mapping of settings";
  }
  if (!map) return "not a mapping of settings";
  const Node* schema = root.find("schema");
  const std::string s = schema && schema->kind == Node::Kind::scalar ? schema->text : "";
  if (s.rfind("memplan.calibration", 0) == 0) return "memplan calibration profile (pass it with --calibration)";
  if (s.rfind("memplan.gpus", 0) == 0) return "GPU catalog";
  if (has(root, "jobs")) return "CI workflow (jobs:)";
  if (has(root, "repos")) return "pre-commit configuration (repos:)";
  // LitGPT names its model with checkpoint_dir; Lightning and NeMo configs hold a trainer: (their
  // readers say when the model is missing).
  if (!has(root, "model") && !has(root, "checkpoint_dir") && !has(root, "trainer")) return "no model: key";
  return std::nullopt;
}

}  // namespace memplan::profiles
