// Models named by their Hugging Face Hub id ("Qwen/Qwen2.5-7B-Instruct"): the local Hugging Face
// cache, memplan's own cache of fetched configs, and the Hub itself over HTTPS. libcurl is loaded
// with dlopen only when a fetch is needed, so the memplan binary does not link it (start-up time).
//
// Environment, as huggingface_hub reads it:
//   HF_HUB_CACHE (else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub or ~/.cache/huggingface/hub)
//   HF_ENDPOINT  the Hub's address (default https://huggingface.co)
//   HF_TOKEN     a token for gated or private models (else the file $HF_HOME/token)
//   HF_HUB_OFFLINE=1  never contact the Hub
// and memplan's: MEMPLAN_HUB_TIMEOUT (seconds for one fetch, default 30); fetched configs are kept
// under $XDG_CACHE_HOME/memplan/hub (else ~/.cache/memplan/hub).
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <utility>

#include "estimator/error.h"

namespace memplan::profiles::hub {

// "ORG/NAME" with the characters the Hub allows (letters, digits, '-', '_', '.'), no "..".
bool is_repo_id(const std::string& s);

// The id with its fine-tuning variant words dropped, lower case: "Qwen/Qwen2.5-7B-Instruct",
// "qwen/qwen2.5-7b" and "Qwen/Qwen2.5-7B" all give "qwen/qwen2.5-7b"; "-chat", "-it" and "-base"
// go too ("mistralai/Mistral-Nemo-Instruct-2407" = "mistralai/Mistral-Nemo-Base-2407"). Chat and
// instruction-tuned checkpoints keep their base model's architecture.
std::string variant_key(const std::string& repo);

// The Hugging Face hub cache folder (HF_HUB_CACHE, HF_HOME/hub, XDG or home default).
std::string hf_cache_dir();
// config.json of `repo` in the Hugging Face cache: the snapshot refs/main names, else the newest
// snapshot holding one. nullopt when the cache has none.
std::optional<std::string> hf_cache_config(const std::string& repo);

// memplan's cache of configs fetched from the Hub, and where `repo`'s config.json goes in it.
std::string memplan_cache_dir();
std::string cached_config_path(const std::string& repo);

// GET <HF_ENDPOINT>/<repo>/resolve/main/config.json with HF_TOKEN, checks that the answer is a
// JSON object and writes it atomically to cached_config_path(repo). InputError at `origin`, naming
// the model and the reason, when the Hub cannot be reached, times out, refuses (401/403: gated or
// private), has no such model (404), or answers something that is not a config.
std::string fetch_config(const std::string& repo, const Where& origin);

// `repo`'s config.json in the Hugging Face cache, else memplan's; nullopt when neither has it.
std::optional<std::string> cached_config(const std::string& repo);

// Where `repo`'s config.json is, in order: the Hugging Face cache, memplan's cache, the Hub
// (unless HF_HUB_OFFLINE). InputError at `origin` when none has it.
std::string locate_config(const std::string& repo, const Where& origin);

// While one lives (on this thread), a Hub id outside the caches is not fetched: the config file
// being read names a model that --model replaces (build_setup), so the file's id is not worth a
// network call; the readers keep the error for the case nothing replaces it.
class NoFetchScope {
 public:
  NoFetchScope();
  ~NoFetchScope();
  NoFetchScope(const NoFetchScope&) = delete;
  NoFetchScope& operator=(const NoFetchScope&) = delete;
  static bool active();
};

// While one lives (on this thread), a Hub id it maps is read as the model it is mapped to (a preset,
// config.json or model directory) instead of from the Hub: `memplan check --model ID=MODEL`, so CI
// checks the files that name an id offline. Ids compare case-insensitively.
class ModelMapScope {
 public:
  explicit ModelMapScope(std::vector<std::pair<std::string, std::string>> map);
  ~ModelMapScope();
  ModelMapScope(const ModelMapScope&) = delete;
  ModelMapScope& operator=(const ModelMapScope&) = delete;
  // The model `repo` is mapped to, or nullopt.
  static std::optional<std::string> lookup(const std::string& repo);

 private:
  std::vector<std::pair<std::string, std::string>> map_;
  const ModelMapScope* outer_;
};

}  // namespace memplan::profiles::hub
