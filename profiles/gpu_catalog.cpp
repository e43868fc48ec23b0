// The GPU catalog (gpus.yaml): split into entries by lines, indexed by name and alias, each entry
// parsed with the strict reader the first time it is needed (a command that names one card parses
// one GPU and its family: yaml-cpp costs about a microsecond per byte, and the file is 60 KB of
// mostly sources). apply_gpu() turns a preset into the setup's device.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <unordered_map>

#include "profiles/detail.h"

namespace memplan::profiles {
namespace fs = std::filesystem;
using detail::lower;
using detail::Node;
using detail::normalise_name;

namespace {

using detail::as_bool;
using detail::as_int;
using detail::as_number;
using detail::as_text;

// A family entry as read: its fields and, being built, its capabilities.
struct FamilyRow {
  GpuFamily family;
  Capabilities caps;
};

// yes | partial | no (YAML's true/false too).
Support as_support(const Node& n) {
  const std::string v = lower(as_text(n));
  if (const auto s = parse_support(v)) return *s;
  throw InputError(n.where, fmt::format("expected yes, partial or no (got '{}')", as_text(n)),
                   "partial: a preview or experimental backend that memplan never recommends");
}

// A capability and its reason (`<key>_why`).
template <Support Capabilities::*Slot>
detail::Key<FamilyRow> capability(const char* key) {
  return {{key}, [](const Node& n, FamilyRow& r) { r.caps.*Slot = as_support(n); }};
}
detail::Key<FamilyRow> capability_why(std::string key, Feature f) {
  return {{std::move(key)}, [f](const Node& n, FamilyRow& r) { r.caps.why[static_cast<size_t>(f)] = as_text(n); }};
}

const detail::KeyTable<FamilyRow>& family_keys() {
  static const detail::KeyTable<FamilyRow> t = {
      {{"name"}, [](const Node& n, FamilyRow& f) { f.family.name = as_text(n); }},
      {{"cuda_context_bytes"}, [](const Node& n, FamilyRow& f) { f.family.cuda_context_bytes = as_int(n); }},
      {{"cublas_workspace_bytes"}, [](const Node& n, FamilyRow& f) { f.family.cublas_workspace_bytes = as_int(n); }},
      {{"source"}, [](const Node& n, FamilyRow& f) { f.family.source = as_text(n); }},
      {{"label"}, [](const Node& n, FamilyRow& f) { f.caps.label = as_text(n); }},
      {{"backend"}, [](const Node& n, FamilyRow& f) {
         f.caps.backend = lower(as_text(n));
         if (f.caps.backend != "cuda" && f.caps.backend != "rocm" && f.caps.backend != "mps")
           throw InputError(n.where, fmt::format("unknown backend '{}'", as_text(n)), "expected one of: cuda, rocm, mps");
       }},
      {{"multi_gpu"}, [](const Node& n, FamilyRow& f) {
         f.caps.collective = lower(as_text(n));
         if (f.caps.collective == "nccl" || f.caps.collective == "rccl") f.caps.multi_gpu = Support::yes;
         else if (f.caps.collective == "none") f.caps.multi_gpu = Support::no;
         else throw InputError(n.where, fmt::format("unknown collective backend '{}'", as_text(n)), "expected one of: nccl, rccl, none");
       }},
      capability<&Capabilities::flash_attention>("flash_attention"),
      capability<&Capabilities::sdpa_fused>("sdpa_fused"),
      capability<&Capabilities::bitsandbytes>("bitsandbytes"),
      capability<&Capabilities::deepspeed>("deepspeed"),
      capability<&Capabilities::deepspeed_offload>("deepspeed_offload"),
      capability_why("flash_attention_why", Feature::flash_attention),
      capability_why("sdpa_fused_why", Feature::sdpa_fused),
      capability_why("bitsandbytes_why", Feature::bitsandbytes),
      capability_why("deepspeed_why", Feature::deepspeed),
      capability_why("deepspeed_offload_why", Feature::deepspeed_offload),
      capability_why("multi_gpu_why", Feature::multi_gpu),
      {{"capability_source"}, [](const Node& n, FamilyRow& f) { f.caps.source = as_text(n); }},
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
      {{"memory_basis"}, [](const Node& n, GpuProfile& g) {
         g.memory_basis = as_text(n);
         if (g.memory_basis != "measured" && g.memory_basis != "printed" && g.memory_basis != "printed-mib" && g.memory_basis != "nominal")
           throw InputError(n.where, fmt::format("unknown memory_basis '{}'", g.memory_basis),
                            "memory_basis is measured, printed, printed-mib or nominal");
       }},
      {{"unified_memory"}, [](const Node& n, GpuProfile& g) { g.unified_memory = as_bool(n); }},
      {{"usable_fraction"}, [](const Node& n, GpuProfile& g) { g.usable_fraction = as_number(n); }},
      {{"compute_capability"}, [](const Node& n, GpuProfile& g) {
         // CUDA's "major.minor" (9.0, 12.1): a one- or two-digit major, a one-digit minor.
         const std::string cc = as_text(n);
         const size_t dot = cc.find('.');
         bool ok = dot != std::string::npos && dot >= 1 && dot <= 2 && dot + 2 == cc.size();
         for (size_t i = 0; ok && i < cc.size(); ++i) ok = i == dot || (cc[i] >= '0' && cc[i] <= '9');
         if (!ok)
           throw InputError(n.where, fmt::format("compute_capability must look like 9.0 or 12.1 (got '{}')", clip(cc)),
                            "CUDA's compute capability of the card, as nvidia-smi --query-gpu=compute_cap reports it");
         g.compute_capability = cc;
       }},
      {{"bf16"}, [](const Node& n, GpuProfile& g) { g.bf16 = as_bool(n); }},
      {{"fp8"}, [](const Node& n, GpuProfile& g) { g.fp8 = as_bool(n); }},
      {{"peak_bf16_flops"}, [](const Node& n, GpuProfile& g) { g.peak_bf16_flops = as_number(n); }},
      {{"memory_bandwidth_bytes_per_s"}, [](const Node& n, GpuProfile& g) { g.memory_bandwidth_bytes_per_s = as_number(n); }},
      {{"interconnect_bytes_per_s"}, [](const Node& n, GpuProfile& g) { g.interconnect_bytes_per_s = as_number(n); }},
      {{"source"}, [](const Node& n, GpuProfile& g) { g.source = as_text(n); }},
  };
  return t;
}

std::string trim_left(const std::string& v) {
  const auto i = v.find_first_not_of(' ');
  return i == std::string::npos ? "" : v.substr(i);
}

// The value of a one-line scalar ("rtx-3090", "\"x\"", with a trailing comment).
std::string scalar_text(std::string v) {
  v = trim_left(v);
  if (const auto hash = v.find(" #"); hash != std::string::npos && !v.empty() && v[0] != '"' && v[0] != '\'') v.resize(hash);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.pop_back();
  if (v.size() >= 2 && (v[0] == '"' || v[0] == '\'') && v.back() == v[0]) v = v.substr(1, v.size() - 2);
  return v;
}

// A one-line flow list ([a, "b c"]) as its items.
std::vector<std::string> flow_items(const std::string& v) {
  std::vector<std::string> out;
  const auto open = v.find('['), close = v.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return out;
  std::string cur;
  char quote = 0;
  for (size_t i = open + 1; i < close; ++i) {
    const char c = v[i];
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == ',') {
      out.push_back(scalar_text(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!scalar_text(cur).empty()) out.push_back(scalar_text(cur));
  return out;
}

}  // namespace

// One entry of a list section: its lines, the name and aliases read off them for the index, and
// the value once parsed (checked then against the index).
template <class T>
struct LazyEntry {
  int line = 0;  // the "  - " line
  std::string text;
  std::string name;
  std::vector<std::string> spellings;  // normalised name, then aliases
  std::once_flag once;
  std::optional<T> value;
};

struct GpuCatalog::Index {
  std::string path;
  std::vector<std::unique_ptr<LazyEntry<GpuFamily>>> families;
  std::vector<std::unique_ptr<LazyEntry<GpuProfile>>> gpus;
  std::once_flag all_once;
  std::vector<const GpuProfile*> all;

  // Parses entry `e` with `read` (positions restored to the file's) once.
  template <class T, class Read>
  const T& parsed(LazyEntry<T>& e, Read read) const {
    std::call_once(e.once, [&] {
      // Blank lines stand for the file above the entry: positions, syntax errors' too, are the file's.
      const Node root = detail::parse_yaml(std::string(static_cast<size_t>(e.line - 1), '\n') + e.text, path);
      if (root.kind != Node::Kind::list || root.items.size() != 1)
        throw InputError(Where::at_file(path, e.line), "expected one entry ('- name: ...') here", "see profiles/gpus.yaml for the catalog's form");
      e.value = read(root.items[0]);
    });
    return *e.value;
  }
  const GpuFamily& family(LazyEntry<GpuFamily>& e) const {
    return parsed(e, [&](const Node& item) {
      FamilyRow r;
      detail::read_section(item, {&family_keys()}, r, nullptr);
      if (r.family.name.empty()) throw InputError(item.where, "family entry without 'name'", "see profiles/gpus.yaml for the catalog's form");
      if (r.caps.backend.empty()) r.caps.backend = "cuda";
      if (r.caps.collective.empty()) r.caps.collective = r.caps.backend == "rocm" ? "rccl" : r.caps.backend == "mps" ? "none" : "nccl";
      if (r.caps.label.empty()) r.caps.label = r.family.name;
      r.family.caps = std::make_shared<const Capabilities>(std::move(r.caps));
      return r.family;
    });
  }
  const GpuProfile& gpu(LazyEntry<GpuProfile>& e, const GpuCatalog& catalog) const {
    return parsed(e, [&](const Node& item) {
      GpuProfile g;
      detail::read_section(item, {&gpu_keys()}, g, nullptr);
      const char* missing = g.name.empty() ? "name" : g.vendor.empty() ? "vendor" : g.family.empty() ? "family" : nullptr;
      if (missing) throw InputError(item.where, fmt::format("GPU entry without '{}'", missing), "see profiles/gpus.yaml for the catalog's form");
      if (g.memory_bytes <= 0) throw InputError(item.where, fmt::format("GPU '{}' needs memory_bytes above 0", g.name),
                                                         "memory_bytes is the GPU's memory in bytes");
      if (!(g.usable_fraction > 0 && g.usable_fraction <= 1))
        throw InputError(item.where, fmt::format("GPU '{}': usable_fraction must be in (0, 1]", g.name),
                         "the share of memory_bytes a job can use, such as 0.98");
      if (!catalog.family(g.family))
        throw InputError(item.find("family")->where, fmt::format("GPU '{}' names unknown family '{}'", g.name, g.family),
                         "families: lists the known families");
      std::vector<std::string> spellings = {normalise_name(g.name)};
      for (const auto& a : g.aliases) spellings.push_back(normalise_name(a));
      if (spellings != e.spellings)
        throw InputError(Where::at_file(path, e.line), fmt::format("GPU '{}': its name and aliases could not be indexed", g.name),
                         "write 'name: x' and 'aliases: [\"a\", \"b\"]' each on one line of the entry");
      return g;
    });
  }
};

GpuCatalog::GpuCatalog() : index_(std::make_unique<Index>()) {}
GpuCatalog::GpuCatalog(GpuCatalog&&) noexcept = default;
GpuCatalog& GpuCatalog::operator=(GpuCatalog&&) noexcept = default;
GpuCatalog::~GpuCatalog() = default;

size_t GpuCatalog::size() const { return index_->gpus.size(); }

const GpuProfile* GpuCatalog::find(const std::string& name) const {
  const std::string want = normalise_name(name);
  for (const auto& e : index_->gpus)
    for (const auto& sp : e->spellings)
      if (sp == want) return &index_->gpu(*e, *this);
  return nullptr;
}

const std::vector<const GpuProfile*>& GpuCatalog::all() const {
  std::call_once(index_->all_once, [&] {
    for (const auto& e : index_->gpus) index_->all.push_back(&index_->gpu(*e, *this));
  });
  return index_->all;
}

const GpuFamily* GpuCatalog::family(const std::string& name) const {
  for (const auto& e : index_->families)
    if (e->name == name) return &index_->family(*e);
  return nullptr;
}

std::vector<std::string> GpuCatalog::suggest(const std::string& name) const {
  std::vector<detail::Named> named;
  for (const auto& e : index_->gpus) named.push_back({e->name, {e->spellings.begin() + 1, e->spellings.end()}});
  return detail::suggest_among(name, named);
}

GpuCatalog parse_gpu_catalog(const std::string& text, const std::string& path) {
  // By lines: a top-level key starts a section; in `families:` and `gpus:`, "  - " starts an
  // entry. Only the rest (schema) is parsed now; whole-line comments there are blanked, keeping
  // line numbers.
  GpuCatalog c;
  GpuCatalog::Index& ix = *c.index_;
  ix.path = path;
  std::string head;
  std::string section;
  std::map<std::string, int> section_line;
  auto add_entry = [&](auto& list, int line) {
    list.push_back(std::make_unique<typename std::decay_t<decltype(list)>::value_type::element_type>());
    list.back()->line = line;
  };
  auto append = [&](auto& list, const std::string& l, int line) {
    if (l.rfind("  - ", 0) == 0) add_entry(list, line);
    if (!list.empty()) {
      list.back()->text += l + "\n";
      std::string key = l.rfind("  - ", 0) == 0 ? "    " + l.substr(4) : l;
      if (key.rfind("    name:", 0) == 0) list.back()->name = lower(scalar_text(key.substr(9)));
      if (key.rfind("    aliases:", 0) == 0)
        for (const auto& a : flow_items(key.substr(12))) list.back()->spellings.push_back(normalise_name(a));
    } else if (const auto first = l.find_first_not_of(" \t\r"); first != std::string::npos && l[first] != '#') {
      throw InputError(Where::at_file(path, line, static_cast<int>(first) + 1),
                       fmt::format("expected an entry ('  - name: ...') under '{}:'", section), "see profiles/gpus.yaml for the catalog's form");
    }
  };
  detail::for_each_line(text, [&](int line, const std::string& l) {
    if (!l.empty() && l[0] != ' ' && l[0] != '#' && l[0] != '\t' && l[0] != '\r') {
      const auto colon = l.find(':');
      section = l.substr(0, colon);
      if (section == "families" || section == "gpus") {
        if (section_line.count(section))
          throw InputError(Where::at_file(path, line, 1), fmt::format("'{}' appears twice", section),
                           fmt::format("the first is at line {}", section_line[section]));
        section_line[section] = line;
        if (colon == std::string::npos || !scalar_text(l.substr(colon + 1)).empty())
          throw InputError(Where::at_file(path, line, static_cast<int>(colon) + 2),
                           fmt::format("expected the entries of '{}' as a block list ('  - name: ...') on the lines below", section),
                           "see profiles/gpus.yaml for the catalog's form");
        head += "\n";
        return;
      }
    }
    if (section == "families") append(ix.families, l, line);
    else if (section == "gpus") append(ix.gpus, l, line);
    else {
      const auto first = l.find_first_not_of(' ');
      head += (first != std::string::npos && l[first] == '#' ? std::string() : l) + "\n";
    }
  });
  const Node root = detail::parse_yaml(head, path);
  if (root.kind != Node::Kind::map) detail::not_a_map(root);
  const Node* schema = root.find("schema");
  if (!schema || detail::as_text(*schema) != "memplan.gpus/v1")
    throw InputError(schema ? schema->where : Where::at_file(path), "expected 'schema: memplan.gpus/v1'",
                     "this file is not a memplan GPU catalog, or a newer one");
  for (const char* s : {"families", "gpus"})
    if (!section_line.count(s)) throw InputError(Where::at_file(path), fmt::format("missing '{}'", s), "see profiles/gpus.yaml for the catalog's form");
  // Every spelling (name or alias) names one entry: an alias equal to another entry's name or alias
  // would make one of them unreachable, whichever the lookup found first.
  auto check_names = [&](auto& list, const char* what) {
    std::unordered_map<std::string, size_t> owner;
    for (size_t i = 0; i < list.size(); ++i) {
      auto& e = *list[i];
      if (e.name.empty()) throw InputError(Where::at_file(path, e.line, 3), fmt::format("{} entry without 'name'", what), "see profiles/gpus.yaml for the catalog's form");
      e.spellings.insert(e.spellings.begin(), normalise_name(e.name));
      for (size_t k = 0; k < e.spellings.size(); ++k) {
        const auto [it, fresh] = owner.emplace(e.spellings[k], i);
        if (fresh || it->second == i) continue;
        const auto& first = *list[it->second];
        if (k == 0 && first.spellings[0] == e.spellings[0])
          throw InputError(Where::at_file(path, e.line, 3), fmt::format("{} '{}' is listed twice", what, e.name),
                           fmt::format("the first is at line {}", first.line));
        throw InputError(Where::at_file(path, e.line, 3),
                         fmt::format("{} '{}': '{}' also names {} '{}' (line {})", what, e.name, e.spellings[k], what, first.name, first.line),
                         "each name and alias may name one entry: drop or rename the alias");
      }
    }
  };
  check_names(ix.families, "family");
  check_names(ix.gpus, "GPU");
  return c;
}

GpuCatalog load_gpu_catalog(const std::string& path) { return parse_gpu_catalog(detail::read_text_file(path), path); }

const GpuCatalog& gpu_catalog() {
  static const GpuCatalog catalog = load_gpu_catalog((fs::path(data_dir()) / "gpus.yaml").string());
  return catalog;
}

int64_t GpuProfile::usable_bytes() const {
  return static_cast<int64_t>(std::llround(static_cast<double>(memory_bytes) * usable_fraction));
}

// "9.0" -> 90, "12.1" -> 121; 0 when absent or not "major.minor".
static int compute_capability_number(const std::string& cc) {
  const size_t dot = cc.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 2 != cc.size()) return 0;
  for (size_t i = 0; i < cc.size(); ++i)
    if (i != dot && (cc[i] < '0' || cc[i] > '9')) return 0;
  return std::stoi(cc.substr(0, dot)) * 10 + (cc[dot + 1] - '0');
}

void carry_allocator_cap(DeviceSpec& to, const DeviceSpec& from) {
  if (from.allocator_cap_bytes <= 0) return;
  const int64_t cap = from.allocator_cap_fraction > 0 && to.capacity_bytes > 0
                          ? std::max<int64_t>(1, static_cast<int64_t>(from.allocator_cap_fraction * static_cast<double>(to.capacity_bytes)))
                          : from.allocator_cap_bytes;
  to.allocator_cap_bytes = cap;
  to.allocator_cap_fraction = from.allocator_cap_fraction;
  to.uncapped_bytes = to.capacity_bytes;
  const int64_t with_context = cap + to.cuda_context_bytes;
  to.capacity_bytes = to.capacity_bytes > 0 ? std::min(to.capacity_bytes, with_context) : with_context;
}

void apply_gpu(TrainingSetup& s, const GpuProfile& g, const GpuCatalog& catalog) {
  DeviceSpec& d = s.device;
  d.name = g.name;
  d.kind = DeviceKind::cuda;  // Apple unified memory is accounted like a GPU with a usable share
  d.family = g.family;
  d.compute_capability = compute_capability_number(g.compute_capability);
  d.capacity_bytes = g.usable_bytes();
  const GpuFamily* f = catalog.family(g.family);
  d.cuda_context_bytes = f ? f->cuda_context_bytes : detail::kGenericContextBytes;
  d.cublas_workspace_bytes = f ? f->cublas_workspace_bytes : detail::kGenericWorkspaceBytes;
  d.caps = f ? f->caps : nullptr;
  d.bf16 = g.bf16;
  d.fp8 = g.fp8;
  d.peak_flops = g.peak_bf16_flops;
  d.interconnect_bytes_per_s = g.interconnect_bytes_per_s;
  s.runtime.allocator_rounding = true;
}

}  // namespace memplan::profiles
