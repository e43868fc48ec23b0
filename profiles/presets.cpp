// The bundled data: where it lives, the model presets (models/*.json) and model name resolution
// with did-you-mean; the GPU catalog is gpu_catalog.cpp. Data files are checked as strictly as
// user files: a broken or misspelt entry is an InputError at its line.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "profiles/detail.h"
#include "profiles/hub.h"

namespace memplan::profiles {
namespace fs = std::filesystem;
using detail::lower;
using detail::Node;

using detail::did_you_mean;
using detail::kGenericContextBytes;
using detail::kGenericWorkspaceBytes;
using detail::Named;
using detail::suggest_among;

// ---- data directory -----------------------------------------------------------------------------

std::string data_dir() {
  static const std::string dir = [] {
    if (const char* env = std::getenv("MEMPLAN_DATA_DIR"); env && *env) {
      std::error_code ec;
      if (!fs::is_regular_file(fs::path(env) / "gpus.yaml", ec))
        throw InputError(Where{}, fmt::format("MEMPLAN_DATA_DIR='{}' holds no gpus.yaml", env),
                         "point MEMPLAN_DATA_DIR at a folder with memplan's data (gpus.yaml, families.yaml, models/), or unset it");
      return std::string(env);
    }
    // Installed: <prefix>/bin/memplan reads <prefix>/share/memplan. In the build tree (the
    // executable under MEMPLAN_BUILD_DIR: memplan, its companion, the test programs) the source
    // tree's profiles/; never that from anywhere else.
    std::vector<std::string> tried;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) tried.push_back((exe.parent_path() / ".." / MEMPLAN_INSTALL_DATA_DIR).lexically_normal().string());
#if defined(MEMPLAN_SOURCE_DATA_DIR) && defined(MEMPLAN_BUILD_TREE)
    const std::string build = fs::path(MEMPLAN_BUILD_TREE).lexically_normal().string();
    if (!ec && exe.lexically_normal().string().rfind(build + "/", 0) == 0) tried.push_back(MEMPLAN_SOURCE_DATA_DIR);
#endif
    for (const auto& d : tried)
      if (fs::is_regular_file(fs::path(d) / "gpus.yaml", ec)) return d;
    throw InputError(Where{}, fmt::format("memplan cannot find its data files (gpus.yaml, families.yaml, models/); looked in {}", fmt::join(tried, ", ")),
                     "reinstall memplan (cmake --install), or set MEMPLAN_DATA_DIR to the folder holding gpus.yaml");
  }();
  return dir;
}

// ---- models -------------------------------------------------------------------------------------

namespace {

fs::path models_dir() { return fs::path(data_dir()) / "models"; }

// The repository id a bundled config.json names ("_name_or_path"), read off its text without
// parsing the file (the files are ours; presets_test checks this against the parsed value).
std::string repo_of(const std::string& text) {
  const auto key = text.find("\"_name_or_path\"");
  if (key == std::string::npos) return "";
  const auto open = text.find('"', text.find(':', key) + 1);
  const auto close = text.find('"', open + 1);
  return open == std::string::npos || close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

ModelPreset preset_at(const fs::path& file, const std::string& text) {
  return {file.stem().string(), repo_of(text), fs::absolute(file).string()};
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = [] {
    std::vector<ModelPreset> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(models_dir(), ec))
      if (entry.path().extension() == ".json") out.push_back(preset_at(entry.path(), detail::read_text_file(entry.path().string())));
    std::sort(out.begin(), out.end(), [](const ModelPreset& a, const ModelPreset& b) { return a.name < b.name; });
    return out;
  }();
  return presets;
}

std::optional<ModelPreset> find_model_preset(const std::string& name) {
  const std::string want = lower(name);
  if (want.empty() || want.find('/') == std::string::npos) {
    // A preset name is a file stem: one file to read.
    if (want.empty() || want.find('\\') != std::string::npos) return std::nullopt;
    const fs::path file = models_dir() / (want + ".json");
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return std::nullopt;
    return preset_at(file, detail::read_text_file(file.string()));
  }
  for (const ModelPreset& p : model_presets())
    if (!p.hf_repo.empty() && lower(p.hf_repo) == want) return p;
  return std::nullopt;
}

namespace {

const detail::KeyTable<ModelMirror>& mirror_keys() {
  using detail::as_text;
  static const detail::KeyTable<ModelMirror> t = {
      {{"id"}, [](const Node& n, ModelMirror& m) { m.id = as_text(n); }},
      {{"preset"}, [](const Node& n, ModelMirror& m) { m.preset = as_text(n); }},
      {{"upstream"}, [](const Node& n, ModelMirror& m) { m.upstream = as_text(n); }},
      {{"dtype"}, [](const Node& n, ModelMirror& m) {
         m.dtype = as_text(n);
         if (m.dtype != "float16" && m.dtype != "bfloat16" && m.dtype != "float32")
           throw InputError(n.where, fmt::format("unknown dtype '{}'", m.dtype), "a stored dtype is float16, bfloat16 or float32");
       }},
      {{"named_by"}, [](const Node& n, ModelMirror& m) { m.named_by = as_text(n); }},
  };
  return t;
}

}  // namespace

const std::vector<ModelMirror>& model_mirrors() {
  static const std::vector<ModelMirror> mirrors = [] {
    std::vector<ModelMirror> out;
    const fs::path file = models_dir() / "mirrors.yaml";
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return out;  // a data folder from before the table: no mirrors
    const std::string path = file.string();
    const Node root = detail::parse_yaml(detail::read_text_file(path), path);
    const char* kForm = "see the comment at the top of profiles/models/mirrors.yaml for its form";
    const Node* list = root.kind == Node::Kind::map ? root.find("mirrors") : nullptr;
    if (!list || list->kind != Node::Kind::list)
      throw InputError(Where::at_file(path, root.where.line), "expected 'mirrors:' holding a list", kForm);
    for (const Node& item : list->items) {
      ModelMirror m;
      detail::read_section(item, {&mirror_keys()}, m, nullptr);
      for (const auto& [value, key] : {std::pair{&m.id, "id"}, {&m.preset, "preset"}, {&m.upstream, "upstream"}, {&m.named_by, "named_by"}})
        if (value->empty()) throw InputError(item.where, fmt::format("mirror without '{}'", key), kForm);
      if (!hub::is_repo_id(m.id) || !hub::is_repo_id(m.upstream))
        throw InputError(item.where, fmt::format("'{}' -> '{}': a mirror and its upstream are Hub ids (ORG/NAME)", m.id, m.upstream), kForm);
      if (m.preset.find('/') != std::string::npos || !find_model_preset(m.preset))
        throw InputError(item.where, fmt::format("mirror '{}' names no preset '{}'", m.id, m.preset), "memplan models lists the presets");
      if (find_model_preset(m.id))
        throw InputError(item.where, fmt::format("'{}' is a preset's own repository, not a mirror", m.id), kForm);
      for (const ModelMirror& seen : out)
        if (lower(seen.id) == lower(m.id)) throw InputError(item.where, fmt::format("mirror '{}' is listed twice", m.id), kForm);
      out.push_back(std::move(m));
    }
    return out;
  }();
  return mirrors;
}

std::optional<ModelMirror> find_model_mirror(const std::string& id) {
  const std::string want = lower(id);
  for (const ModelMirror& m : model_mirrors())
    if (lower(m.id) == want) return m;
  return std::nullopt;
}

ModelSpec load_model(const std::string& name_or_path, const Where& origin, std::vector<Warning>* warnings) {
  detail::ReadModel m = detail::resolve_model(name_or_path, origin);
  if (warnings) warnings->insert(warnings->end(), m.warnings.begin(), m.warnings.end());
  return m.spec;
}

namespace detail {

namespace {

// A model name as its words say it: lower case, without the organisation, variant words (instruct,
// chat, it, base, hf), a release date (2507), a "meta" prefix or a quantization tag (bnb, 4bit,
// gptq, awq, ...). "NousResearch/Meta-Llama-3-8B" and "Qwen/Qwen3-4B-Instruct-2507" say llama-3-8b
// and qwen3-4b.
std::string model_words(const std::string& name) {
  std::string l = lower(name);
  if (const size_t slash = l.rfind('/'); slash != std::string::npos) l = l.substr(slash + 1);
  static const char* const kDrop[] = {"instruct", "chat", "it", "base", "hf", "bnb", "4bit", "8bit", "gptq", "awq",
                                      "fp8", "int4", "int8", "gguf", "unsloth", "dynamic"};
  std::vector<std::string> words;
  std::string w;
  auto flush = [&] {
    const bool date = w.size() == 4 && w.find_first_not_of("0123456789") == std::string::npos;
    const bool drop = date || std::find(std::begin(kDrop), std::end(kDrop), w) != std::end(kDrop) || (words.empty() && w == "meta");
    if (!w.empty() && !drop) words.push_back(w);
    w.clear();
  };
  for (char c : l) {
    if (c == '-' || c == '_') flush();
    else w += c;
  }
  flush();
  std::string out;
  for (const std::string& x : words) out += (out.empty() ? "" : "-") + x;
  return out;
}

// The preset whose name or repository says the same model as a Hub id memplan cannot read (not
// cached offline, unreachable): named in the error's hint, never used in its place.
std::optional<ModelPreset> preset_named_like(const std::string& repo) {
  const std::string want = model_words(repo);
  if (want.empty()) return std::nullopt;
  for (const ModelPreset& p : model_presets())
    if (model_words(p.name) == want || (!p.hf_repo.empty() && model_words(p.hf_repo) == want)) return p;
  return std::nullopt;
}

// `mirror` read as its preset, named `name` (the id as the file wrote it, which emitters write back).
// A bundled preset's config read under `name`; its fields come from the preset's name, not from
// lines of a bundled file, so no positions.
ReadModel read_preset(const ModelPreset& p, const std::string& name) {
  const Node root = detail::parse_json(detail::read_text_file(p.path), p.path);
  ReadModel m = read_hf_config(root, p.path, name);
  m.origin = Provenance{};
  return m;
}

// `warn`: say that the table was used (not when --model maps the id to this very preset).
ReadModel read_mirror(const ModelMirror& mirror, const std::string& name, const Where& origin, bool warn) {
  const auto p = find_model_preset(mirror.preset);
  if (!p) throw InternalError("mirror table names a missing preset: " + mirror.preset);  // model_mirrors() checked it
  ReadModel m = read_preset(*p, name);
  m.spec.hf_repo = name;
  if (!mirror.dtype.empty()) m.spec.checkpoint_dtype = mirror.dtype;
  // With --model replacing the file's model (NoFetchScope) the assumption is not used: no warning.
  if (warn && !hub::NoFetchScope::active())
    m.warnings.push_back(
        {origin,
         fmt::format("'{}' is not in the Hugging Face cache: read as memplan's preset {}, whose weights it re-uploads "
                     "from {}{} (profiles/models/mirrors.yaml)",
                     clip(name), p->name, mirror.upstream, mirror.dtype.empty() ? "" : fmt::format(", stored as {}", mirror.dtype)),
         fmt::format("to read the mirror's own file: huggingface-cli download {} config.json; to accept the preset without "
                     "this warning: memplan check --model {}={}",
                     name, name, p->name)});
  return m;
}

}  // namespace

ReadModel resolve_model(const std::string& name, const Where& origin) {
  const char* kTakes = "--model takes a preset name, a config.json or a directory holding one";
  std::error_code ec;
  if (fs::is_directory(name, ec)) {
    const fs::path config = fs::path(name) / "config.json";
    if (!fs::exists(config, ec)) throw InputError(origin, fmt::format("no config.json in '{}'", clip(name, 200)), kTakes);
    return read_hf_config_file(config.string(), origin);
  }
  if (fs::is_regular_file(name, ec)) return read_hf_config_file(name, origin);
  if (const std::string kind = special_file_kind(name); !kind.empty())
    throw InputError(origin, fmt::format("'{}' is {}, not a config.json", clip(name, 200), kind), kTakes);
  if (const auto p = find_model_preset(name)) return read_preset(*p, p->name);
  // A Hub id: a preset of the same architecture (its -Instruct/-chat/-it variants), else the
  // Hugging Face cache, memplan's cache or the Hub (profiles/hub.h).
  if (hub::is_repo_id(name)) {
    // Mapped by the caller (memplan check --model ID=MODEL): that model, no lookup of the id.
    if (const auto to = hub::ModelMapScope::lookup(name); to && lower(*to) != lower(name)) {
      // A mirror mapped to its own preset: the table's reading (the mirror's dtype too), accepted.
      if (const auto mirror = find_model_mirror(name); mirror && lower(*to) == lower(mirror->preset))
        return read_mirror(*mirror, name, origin, false);
      static thread_local int depth = 0;
      if (depth > 8) throw InputError(origin, fmt::format("--model mappings loop through '{}'", clip(name)), "map each id to a preset or a config.json");
      ++depth;
      struct Leave { ~Leave() { --depth; } } leave;
      return resolve_model(*to, origin);
    }
    const std::string key = hub::variant_key(name);
    for (const ModelPreset& p : model_presets())
      if (!p.hf_repo.empty() && hub::variant_key(p.hf_repo) == key) return read_preset(p, p.name);
    // A mirror of a preset's weights (models/mirrors.yaml) whose own config.json no cache holds:
    // the preset, said in a warning, before any network call.
    if (!hub::cached_config(name))
      if (const auto mirror = find_model_mirror(name)) return read_mirror(*mirror, name, origin, true);
    try {
      return resolve_hub_model(name, origin);
    } catch (const InputError& e) {
      const auto p = preset_named_like(name);
      if (!p) throw;
      throw InputError(e.where(), e.message(),
                       fmt::format("{}; or memplan's preset {}{}, the model this id's name says (check that it is the same "
                                   "architecture): --model {}",
                                   e.hint(), p->name, p->hf_repo.empty() ? "" : fmt::format(" ({})", p->hf_repo), p->name));
    }
  }
  if (detail::ends_with(lower(name), ".json"))
    throw InputError(origin, fmt::format("cannot find '{}'", clip(name, 200)), kTakes);
  std::vector<Named> named;
  for (const auto& p : model_presets()) named.push_back({p.name, {p.hf_repo}});
  throw InputError(origin, fmt::format("unknown model '{}'", clip(name)),
                   did_you_mean(suggest_among(name, named), "memplan models",
                                "--model also takes a config.json or a model directory"));
}

void set_model_origin(Provenance& origin, const Where& where) {
  for (auto it = origin.fields.begin(); it != origin.fields.end();)
    it = it->first.rfind("model.", 0) == 0 ? origin.fields.erase(it) : std::next(it);
  auto set = [&](auto... members) { (origin.set(memplan::path(members), where), ...); };
  set(&ModelSpec::hidden_size, &ModelSpec::num_layers, &ModelSpec::num_attention_heads, &ModelSpec::num_key_value_heads,
      &ModelSpec::head_dim, &ModelSpec::intermediate_size, &ModelSpec::vocab_size, &ModelSpec::num_experts,
      &ModelSpec::experts_per_token, &ModelSpec::capacity_factor, &ModelSpec::attention_dropout, &ModelSpec::hidden_dropout,
      &ModelSpec::embedding_dropout);
}

std::pair<int, int> read_version(const VersionField& f, const std::string& text, const Where& where, const std::string& subject) {
  const auto v = parse_version(text);
  if (!v || (f.max_major > 0 && v->first > f.max_major))
    throw InputError(where, fmt::format("{} must look like {} (got '{}')", subject, f.examples, clip(text)), f.hint);
  return *v;
}

DeviceSpec gpu_device(const std::optional<std::string>& gpu, const Where& gpu_where, std::optional<int64_t> capacity) {
  TrainingSetup s;
  if (gpu) {
    const GpuCatalog& catalog = gpu_catalog();
    const GpuProfile* g = catalog.find(*gpu);
    if (!g) {
      // A model name without its memory ("a100", "h100", "v100"): several cards answer to it, and
      // picking one would answer for a card the user may not have.
      const std::string l = lower(*gpu);
      std::vector<std::string> variants;
      if (!l.empty() && l.size() <= 64)
        for (const GpuProfile* p : catalog.all())
          if (lower(p->name).rfind(l + "-", 0) == 0) variants.push_back(p->name);
      if (variants.size() > 1)
        throw InputError(gpu_where, fmt::format("'{}' names {} GPUs: {}", clip(*gpu), variants.size(), fmt::join(variants, ", ")),
                         "name the one you have (its memory differs): memplan gpus lists them");
      throw InputError(gpu_where, fmt::format("unknown GPU '{}'", clip(*gpu)),
                       did_you_mean(catalog.suggest(*gpu), "memplan gpus", "--gpu-memory 24GiB sets a capacity directly"));
    }
    apply_gpu(s, *g, catalog);
  } else {
    // A bare capacity, or no target at all: a generic CUDA device with the generic overheads
    // (so estimates without a card still count a context and workspaces).
    s.device.name = capacity ? "custom" : "unspecified";
    s.device.family = "generic";
    s.device.cuda_context_bytes = kGenericContextBytes;
    s.device.cublas_workspace_bytes = kGenericWorkspaceBytes;
  }
  if (capacity) s.device.capacity_bytes = *capacity;
  return s.device;
}

}  // namespace detail
}  // namespace memplan::profiles
