// The bundled data: where it lives, the GPU catalog (gpus.yaml), model presets (models/*.json)
// and name resolution with did-you-mean for both. Data files are checked as strictly as user
// files: a broken or misspelt entry is an InputError at its line.
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

namespace {

// With only a capacity (--gpu-memory, no preset) the card is unknown: plan with the largest
// family context in gpus.yaml short of Blackwell (512 MiB: Hopper, AMD) and PyTorch 2.x's default
// cuBLAS workspace (":4096:2:16:8" = 8,519,680 B), so an unknown card is not under-estimated.
constexpr int64_t kGenericContextBytes = 536'870'912;
constexpr int64_t kGenericWorkspaceBytes = 8'519'680;

// "RTX 3090", "rtx_3090" and "Rtx-3090" all read "rtx-3090".
std::string normalise(const std::string& name) {
  std::string out;
  for (char c : lower(name)) {
    if (c == ' ' || c == '_') c = '-';
    if (c == '-' && (out.empty() || out.back() == '-')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

// Preset names nearest to `word` over names and aliases, each preset once, best first.
struct Named {
  std::string name;
  std::vector<std::string> aliases;
};
std::vector<std::string> suggest_among(const std::string& word, const std::vector<Named>& presets) {
  std::vector<std::string> spellings, owners;
  for (const auto& p : presets) {
    spellings.push_back(normalise(p.name));
    owners.push_back(p.name);
    for (const auto& a : p.aliases) {
      spellings.push_back(normalise(a));
      owners.push_back(p.name);
    }
  }
  std::vector<std::string> out;
  for (const auto& hit : nearest(normalise(word), spellings, spellings.size())) {
    const auto i = static_cast<size_t>(std::find(spellings.begin(), spellings.end(), hit) - spellings.begin());
    if (std::find(out.begin(), out.end(), owners[i]) == out.end()) out.push_back(owners[i]);
    if (out.size() == 3) break;
  }
  return out;
}

std::string did_you_mean(const std::vector<std::string>& suggestions, const char* lister, const char* otherwise) {
  if (suggestions.empty()) return fmt::format("{} lists the presets; {}", lister, otherwise);
  return fmt::format("did you mean '{}'? ({} lists the presets)", suggestions.front(), lister);
}

// ---- gpus.yaml --------------------------------------------------------------------------------

using detail::as_bool;
using detail::as_int;
using detail::as_number;
using detail::as_text;

const detail::KeyTable<GpuFamily>& family_keys() {
  static const detail::KeyTable<GpuFamily> t = {
      {{"name"}, [](const Node& n, GpuFamily& f) { f.name = as_text(n); }},
      {{"cuda_context_bytes"}, [](const Node& n, GpuFamily& f) { f.cuda_context_bytes = as_int(n); }},
      {{"cublas_workspace_bytes"}, [](const Node& n, GpuFamily& f) { f.cublas_workspace_bytes = as_int(n); }},
      {{"source"}, [](const Node& n, GpuFamily& f) { f.source = as_text(n); }},
  };
  return t;
}

const detail::KeyTable<GpuProfile>& gpu_keys() {
  static const detail::KeyTable<GpuProfile> t = {
      {{"name"}, [](const Node& n, GpuProfile& g) { g.name = lower(as_text(n)); }},
      {{"aliases"}, [](const Node& n, GpuProfile& g) { g.aliases = detail::as_text_list(n); }},
      {{"vendor"}, [](const Node& n, GpuProfile& g) { g.vendor = as_text(n); }},
      {{"family"}, [](const Node& n, GpuProfile& g) { g.family = as_text(n); }},
      {{"memory_bytes"}, [](const Node& n, GpuProfile& g) { g.memory_bytes = as_int(n); }},
      {{"unified_memory"}, [](const Node& n, GpuProfile& g) { g.unified_memory = as_bool(n); }},
      {{"usable_fraction"}, [](const Node& n, GpuProfile& g) { g.usable_fraction = as_number(n); }},
      {{"compute_capability"}, [](const Node& n, GpuProfile& g) { g.compute_capability = as_text(n); }},
      {{"bf16"}, [](const Node& n, GpuProfile& g) { g.bf16 = as_bool(n); }},
      {{"fp8"}, [](const Node& n, GpuProfile& g) { g.fp8 = as_bool(n); }},
      {{"peak_bf16_flops"}, [](const Node& n, GpuProfile& g) { g.peak_bf16_flops = as_number(n); }},
      {{"memory_bandwidth_bytes_per_s"}, [](const Node& n, GpuProfile& g) { g.memory_bandwidth_bytes_per_s = as_number(n); }},
      {{"interconnect_bytes_per_s"}, [](const Node& n, GpuProfile& g) { g.interconnect_bytes_per_s = as_number(n); }},
      {{"source"}, [](const Node& n, GpuProfile& g) { g.source = as_text(n); }},
  };
  return t;
}

const Node& need_list(const Node& root, const char* key) {
  const Node* n = root.find(key);
  if (!n) throw InputError(root.where, fmt::format("missing '{}'", key));
  if (n->kind != Node::Kind::list) detail::type_error(*n, "a list");
  return *n;
}

GpuProfile read_gpu(const Node& item, const GpuCatalog& catalog) {
  GpuProfile g;
  detail::read_section(item, {&gpu_keys()}, g, nullptr);
  const char* missing = g.name.empty() ? "name" : g.vendor.empty() ? "vendor" : g.family.empty() ? "family" : nullptr;
  if (missing) throw InputError(item.where, fmt::format("GPU entry without '{}'", missing));
  if (g.memory_bytes <= 0) throw InputError(item.where, fmt::format("GPU '{}' needs memory_bytes above 0", g.name));
  if (!(g.usable_fraction > 0 && g.usable_fraction <= 1))
    throw InputError(item.where, fmt::format("GPU '{}': usable_fraction must be in (0, 1]", g.name));
  if (!catalog.family(g.family))
    throw InputError(item.find("family")->where, fmt::format("GPU '{}' names unknown family '{}'", g.name, g.family));
  return g;
}

}  // namespace

// ---- data directory -----------------------------------------------------------------------------

std::string data_dir() {
  if (const char* env = std::getenv("MEMPLAN_DATA_DIR"); env && *env) return env;
  std::error_code ec;
#ifdef MEMPLAN_SOURCE_DATA_DIR
  if (fs::exists(fs::path(MEMPLAN_SOURCE_DATA_DIR) / "gpus.yaml", ec)) return MEMPLAN_SOURCE_DATA_DIR;
#endif
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "profiles";
  return (exe.parent_path() / ".." / "profiles").lexically_normal().string();
}

// ---- GPUs ---------------------------------------------------------------------------------------

int64_t GpuProfile::usable_bytes() const {
  return static_cast<int64_t>(std::llround(static_cast<double>(memory_bytes) * usable_fraction));
}

const GpuProfile* GpuCatalog::find(const std::string& name) const {
  const std::string want = normalise(name);
  for (const auto& g : gpus) {
    if (normalise(g.name) == want) return &g;
    for (const auto& a : g.aliases)
      if (normalise(a) == want) return &g;
  }
  return nullptr;
}

const GpuFamily* GpuCatalog::family(const std::string& name) const {
  for (const auto& f : families)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> GpuCatalog::suggest(const std::string& name) const {
  std::vector<Named> named;
  for (const auto& g : gpus) named.push_back({g.name, g.aliases});
  return suggest_among(name, named);
}

GpuCatalog load_gpu_catalog(const std::string& path) {
  const Node root = detail::parse_yaml(detail::read_text_file(path), path);
  if (root.kind != Node::Kind::map) detail::not_a_map(root);
  const Node* schema = root.find("schema");
  if (!schema || as_text(*schema) != "memplan.gpus/v1")
    throw InputError(schema ? schema->where : Where::at_file(path), "expected 'schema: memplan.gpus/v1'",
                     "this file is not a memplan GPU catalog, or a newer one");
  GpuCatalog c;
  for (const Node& item : need_list(root, "families").items) {
    GpuFamily f;
    detail::read_section(item, {&family_keys()}, f, nullptr);
    if (f.name.empty()) throw InputError(item.where, "family entry without 'name'");
    c.families.push_back(f);
  }
  for (const Node& item : need_list(root, "gpus").items) {
    GpuProfile g = read_gpu(item, c);
    if (c.find(g.name)) throw InputError(item.where, fmt::format("GPU '{}' is listed twice", g.name));
    c.gpus.push_back(std::move(g));
  }
  return c;
}

const GpuCatalog& gpu_catalog() {
  static const GpuCatalog catalog = load_gpu_catalog((fs::path(data_dir()) / "gpus.yaml").string());
  return catalog;
}

void apply_gpu(TrainingSetup& s, const GpuProfile& g, const GpuCatalog& catalog) {
  DeviceSpec& d = s.device;
  d.name = g.name;
  d.kind = DeviceKind::cuda;  // Apple unified memory is accounted like a GPU with a usable share
  d.family = g.family;
  d.capacity_bytes = g.usable_bytes();
  const GpuFamily* f = catalog.family(g.family);
  d.cuda_context_bytes = f ? f->cuda_context_bytes : kGenericContextBytes;
  d.cublas_workspace_bytes = f ? f->cublas_workspace_bytes : kGenericWorkspaceBytes;
  d.bf16 = g.bf16;
  d.peak_flops = g.peak_bf16_flops;
  d.interconnect_bytes_per_s = g.interconnect_bytes_per_s;
  s.runtime.allocator_rounding = true;
}

// ---- models -------------------------------------------------------------------------------------

namespace {
// The bundled presets with their parsed config.json, read once per process like gpu_catalog().
struct ScannedPreset {
  ModelPreset preset;
  Node root;
};

const std::vector<ScannedPreset>& scanned_presets() {
  static const std::vector<ScannedPreset> scanned = [] {
    std::vector<ScannedPreset> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fs::path(data_dir()) / "models", ec)) {
      if (entry.path().extension() != ".json") continue;
      const std::string path = fs::absolute(entry.path()).string();
      Node root = detail::parse_json(detail::read_text_file(path), path);
      const Node* repo = root.find("_name_or_path");
      out.push_back({{entry.path().stem().string(), repo ? as_text(*repo) : "", path}, std::move(root)});
    }
    std::sort(out.begin(), out.end(), [](const ScannedPreset& a, const ScannedPreset& b) { return a.preset.name < b.preset.name; });
    return out;
  }();
  return scanned;
}
}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = [] {
    std::vector<ModelPreset> out;
    for (const ScannedPreset& s : scanned_presets()) out.push_back(s.preset);
    return out;
  }();
  return presets;
}

ModelSpec load_model(const std::string& name_or_path, const Where& origin, std::vector<Warning>* warnings) {
  detail::ReadModel m = detail::resolve_model(name_or_path, origin);
  if (warnings) warnings->insert(warnings->end(), m.warnings.begin(), m.warnings.end());
  return m.spec;
}

namespace detail {

ReadModel resolve_model(const std::string& name, const Where& origin) {
  const char* kTakes = "--model takes a preset name, a config.json or a directory holding one";
  std::error_code ec;
  if (fs::is_directory(name, ec)) {
    const fs::path config = fs::path(name) / "config.json";
    if (!fs::is_regular_file(config, ec)) throw InputError(origin, fmt::format("no config.json in '{}'", name), kTakes);
    return read_hf_config_file(config.string());
  }
  if (fs::is_regular_file(name, ec)) return read_hf_config_file(name);
  for (const auto& [p, root] : scanned_presets())
    if (lower(name) == lower(p.name) || (!p.hf_repo.empty() && lower(name) == lower(p.hf_repo))) {
      ReadModel m = read_hf_config(root, p.path, p.name);
      m.origin = Provenance{};  // a preset's fields come from its name, not from lines of a bundled file
      return m;
    }
  // A Hub id: a preset of the same architecture (its -Instruct/-chat/-it variants), else the
  // Hugging Face cache, memplan's cache or the Hub (profiles/hub.h).
  if (hub::is_repo_id(name)) {
    const std::string key = hub::variant_key(name);
    for (const auto& [p, root] : scanned_presets())
      if (!p.hf_repo.empty() && hub::variant_key(p.hf_repo) == key) {
        ReadModel m = read_hf_config(root, p.path, p.name);
        m.origin = Provenance{};
        return m;
      }
    return resolve_hub_model(name, origin);
  }
  if (detail::ends_with(lower(name), ".json"))
    throw InputError(origin, fmt::format("cannot find '{}'", name), kTakes);
  std::vector<Named> named;
  for (const auto& p : model_presets()) named.push_back({p.name, {p.hf_repo}});
  throw InputError(origin, fmt::format("unknown model '{}'", name),
                   did_you_mean(suggest_among(name, named), "memplan models",
                                "--model also takes a config.json or a model directory"));
}

void set_model_origin(Provenance& origin, const Where& where) {
  for (auto it = origin.fields.begin(); it != origin.fields.end();)
    it = it->first.rfind("model.", 0) == 0 ? origin.fields.erase(it) : std::next(it);
  for (const char* f : {"model.hidden_size", "model.num_layers", "model.num_attention_heads", "model.num_key_value_heads",
                        "model.head_dim", "model.intermediate_size", "model.vocab_size", "model.num_experts",
                        "model.num_experts_per_token", "model.capacity_factor", "model.attention_dropout",
                        "model.hidden_dropout", "model.embedding_dropout"})
    origin.set(f, where);
}

DeviceSpec gpu_device(const std::optional<std::string>& gpu, const Where& gpu_where, std::optional<int64_t> capacity) {
  TrainingSetup s;
  if (gpu) {
    const GpuCatalog& catalog = gpu_catalog();
    const GpuProfile* g = catalog.find(*gpu);
    if (!g)
      throw InputError(gpu_where, fmt::format("unknown GPU '{}'", *gpu),
                       did_you_mean(catalog.suggest(*gpu), "memplan gpus", "--gpu-memory 24GiB sets a capacity directly"));
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
