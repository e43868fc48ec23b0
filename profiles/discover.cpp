// Which files `memplan check` looks at: named files, and directories walked for configs; and a
// quick look at a file's top level to tell a training config from the other YAML/JSON a
// repository holds (workflows, hooks, catalogs, calibration profiles).
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

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
// be one. A file that does not parse may be a broken config: the reader reports it.
std::optional<std::string> not_a_training_config(const std::string& path) {
  const std::string ext = detail::lower(fs::path(path).extension().string());
  if (ext == ".json") {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    if (j.is_object() && j.contains("model_type"))
      return "Hugging Face model config.json without a training setup (memplan estimate --model FILE estimates it)";
    if (j.is_object() &&
        (j.contains("zero_optimization") || j.contains("train_micro_batch_size_per_gpu") || j.contains("train_batch_size")))
      return "DeepSpeed config without a model (memplan estimate --config FILE --model NAME estimates it)";
    return "JSON that is neither a DeepSpeed config nor a Hugging Face config.json";
  }
  if (ext == ".toml") {
    // torchtitan's job configs name the model in a [model] table (name, flavor); other TOML in a
    // repository (pyproject.toml, ...) does not. A file that does not parse is left to the reader.
    try {
      const detail::Node t = detail::parse_toml(detail::read_text_file(path), path);
      const detail::Node* model = t.find("model");
      if (model && model->kind == detail::Node::Kind::map) return std::nullopt;
      return "TOML without a [model] table (not a torchtitan job config)";
    } catch (const InputError&) {
      return std::nullopt;
    }
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (root.IsNull()) return "empty file";
  if (root.IsSequence()) {
    if (root.size() > 0 && root[0].IsMap() && root[0]["id"] && root[0]["entry"]) return "pre-commit hook definitions";
    return "a list, not a mapping of settings";
  }
  if (!root.IsMap()) return "not a mapping of settings";
  auto text = [&](const char* key) {
    try {
      return root[key] && root[key].IsScalar() ? root[key].as<std::string>() : std::string();
    } catch (const std::exception&) {
      return std::string();
    }
  };
  const std::string schema = text("schema");
  if (schema.rfind("memplan.calibration", 0) == 0) return "memplan calibration profile (pass it with --calibration)";
  if (schema.rfind("memplan.gpus", 0) == 0) return "GPU catalog";
  if (root["jobs"]) return "CI workflow (jobs:)";
  if (root["repos"]) return "pre-commit configuration (repos:)";
  // LitGPT names its model with checkpoint_dir; Lightning and NeMo configs hold a trainer: (their
  // readers say when the model is missing).
  if (!root["model"] && !root["checkpoint_dir"] && !root["trainer"]) return "no model: key";
  return std::nullopt;
}

}  // namespace memplan::profiles
