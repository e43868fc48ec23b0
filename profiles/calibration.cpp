// Calibration profiles (memplan.calibration/v1 YAML): what `memplan calibrate` measured on one
// device. memplan writes these files itself, so reading is strict: an unknown or out-of-range
// correction is an error at its line, never silently ignored. Writing is atomic. Also the saved
// measurements (`calibrate --json`) that `calibrate --from` re-fits.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <yaml-cpp/yaml.h>

#include "profiles/detail.h"
#include "profiles/files.h"

namespace memplan::profiles {
namespace fs = std::filesystem;
using detail::Node;

namespace {

constexpr const char* kSchema = "memplan.calibration/v1";

constexpr int64_t kTiB = int64_t{1} << 40;
constexpr const char* kRefit = "run memplan calibrate again (it writes these within bounds), or correct the hand edit";

int64_t bytes_or_unset(const Node& n) {  // -1: not measured, keep the family default
  const int64_t v = detail::as_int(n);
  if (v < -1 || v > kTiB) detail::type_error(n, "a byte count up to 1 TiB (or -1 for none)", kRefit);
  return v;
}
// Multipliers: calibrate fits none now (1 in what it writes); older profiles' within a factor of 4.
double plausible_scale(const Node& n) {
  const double v = detail::as_number(n);
  if (!(v >= Calibration::kMinScale && v <= Calibration::kMaxScale))
    detail::type_error(n, fmt::format("a multiplier in [{}, {}]", Calibration::kMinScale, Calibration::kMaxScale), kRefit);
  return v;
}

const detail::KeyTable<Calibration>& correction_keys() {
  static const detail::KeyTable<Calibration> t = {
      {{"cuda_context_bytes"}, [](const Node& n, Calibration& c) { c.cuda_context_bytes = bytes_or_unset(n); }},
      {{"workspace_bytes"}, [](const Node& n, Calibration& c) { c.workspace_bytes = bytes_or_unset(n); }},
      {{"activation_scale"}, [](const Node& n, Calibration& c) { c.activation_scale = plausible_scale(n); }},
      {{"model_state_scale"}, [](const Node& n, Calibration& c) { c.model_state_scale = plausible_scale(n); }},
      {{"overhead_fraction"}, [](const Node& n, Calibration& c) {
         c.overhead_fraction = detail::as_number(n);
         if (!(c.overhead_fraction == -1 || (c.overhead_fraction >= 0 && c.overhead_fraction < 1)))
           detail::type_error(n, "a fraction in [0, 1) (or -1 for none)", kRefit);
       }},
      {{"overhead_bytes"}, [](const Node& n, Calibration& c) {
         // Reserved minus allocated is never negative, and neither is the constant part of it.
         c.overhead_bytes = detail::as_int(n);
         if (c.overhead_bytes < 0 || c.overhead_bytes > kTiB) detail::type_error(n, "a byte count from 0 to 1 TiB", kRefit);
       }},
  };
  return t;
}

const detail::KeyTable<Calibration>& profile_keys() {
  static const detail::KeyTable<Calibration> t = {
      {{"schema"}, [](const Node&, Calibration&) {}},  // checked before reading
      {{"device"}, [](const Node& n, Calibration& c) { c.device = detail::as_text(n); }},
      {{"stamp"}, [](const Node& n, Calibration&) {  // provenance for people; only its shape is checked
         if (n.kind != Node::Kind::map) detail::not_a_map(n);
       }},
      {{"corrections"}, [](const Node& n, Calibration& c) { detail::read_section(n, {&correction_keys()}, c, nullptr); }},
  };
  return t;
}

const detail::KeyTable<SavedProbe>& saved_probe_keys() {
  auto bytes = [](int64_t SavedProbe::*field) {
    return [field](const Node& n, SavedProbe& p) {
      const int64_t v = detail::as_int(n);
      if (v < 0 || v > kTiB) detail::type_error(n, "a byte count from 0 to 1 TiB");
      p.*field = v;
    };
  };
  auto ignored = [](const Node&, SavedProbe&) {};  // the estimate and errors of the run that wrote it
  static const detail::KeyTable<SavedProbe> t = {
      {{"name"}, [](const Node& n, SavedProbe& p) { p.name = detail::as_text(n); p.where = n.where; }},
      {{"ok"}, [](const Node& n, SavedProbe& p) { p.ok = detail::as_bool(n); }},
      {{"note"}, ignored},
      {{"measured_bytes"}, bytes(&SavedProbe::measured_bytes)},
      {{"measured_allocated_bytes"}, bytes(&SavedProbe::measured_allocated_bytes)},
      {{"measured_reserved_bytes"}, bytes(&SavedProbe::measured_reserved_bytes)},
      {{"measured_context_bytes"}, bytes(&SavedProbe::measured_context_bytes)},
      {{"estimated"}, ignored}, {{"calibrated"}, ignored}, {{"held_out_bytes"}, ignored}, {{"error_before"}, ignored},
      {{"error_after"}, ignored}, {{"error_held_out"}, ignored}, {{"estimated_bytes"}, ignored}, {{"calibrated_bytes"}, ignored},
  };
  return t;
}

}  // namespace

bool calibration_applies(const Calibration& c, const DeviceSpec& d) {
  if (c.device.empty() || detail::lower(c.device) == detail::lower(d.name)) return true;
  const GpuProfile* g = gpu_catalog().find(c.device);
  return g && g->name == d.name;
}

DeviceSpec device_for_name(const std::string& device_name) {
  const GpuCatalog& catalog = gpu_catalog();
  if (const GpuProfile* g = catalog.find(device_name)) {
    TrainingSetup s;
    apply_gpu(s, *g, catalog);
    return s.device;
  }
  return detail::gpu_device(std::nullopt, Where{}, std::nullopt);
}

SavedCalibration load_saved_calibration(const std::string& path) {
  const Node root = detail::parse_json(detail::read_text_file(path), path);
  if (root.kind != Node::Kind::map) detail::not_a_map(root);
  const Node* schema = root.find("schema");
  const std::string hint = "memplan calibrate --json > FILE saves the measurements --from reads";
  if (!schema || detail::as_text(*schema) != "memplan.calibrate/v1")
    throw InputError(schema ? schema->where : Where::at_file(path, 1, 1), "expected \"schema\": \"memplan.calibrate/v1\"", hint);
  SavedCalibration out;
  out.path = path;
  const Node* stamp = root.find("stamp");
  if (!stamp) throw InputError(Where::at_file(path, 1, 1), "no \"stamp\" (the device the probes ran on)", hint);
  if (stamp->kind != Node::Kind::map) detail::not_a_map(*stamp);
  for (const auto& [k, v] : stamp->entries) out.stamp[k] = detail::as_text(v);
  for (const char* k : {"device_name", "libtorch"})
    if (out.stamp.count(k) == 0) throw InputError(stamp->where, fmt::format("stamp has no \"{}\"", k), hint);
  const Node* cuda = root.find("cuda");
  if (!cuda) throw InputError(Where::at_file(path, 1, 1), "no \"cuda\" (whether the probes ran on a GPU)", hint);
  out.cuda = detail::as_bool(*cuda);
  const Node* probes = root.find("probes");
  if (!probes || probes->kind != Node::Kind::list)
    throw InputError(probes ? probes->where : Where::at_file(path, 1, 1), "no \"probes\" list", hint);
  for (const Node& item : probes->items) {
    SavedProbe p;
    p.where = item.where;
    detail::read_section(item, {&saved_probe_keys()}, p, nullptr);
    if (p.name.empty()) throw InputError(item.where, "a probe without a \"name\"", hint);
    if (p.ok && p.measured_bytes <= 0) throw InputError(p.where, fmt::format("probe '{}' ran but has no measured_bytes", clip(p.name)), hint);
    out.probes.push_back(p);
  }
  return out;
}

Calibration load_calibration(const std::string& path) { return load_calibration_text(detail::read_text_file(path), path); }

Calibration load_calibration_text(const std::string& text, const std::string& path) {
  const Node root = detail::parse_yaml(text, path);
  const Node* schema = root.kind == Node::Kind::map ? root.find("schema") : nullptr;
  if (!schema || detail::as_text(*schema) != kSchema)
    throw InputError(schema ? schema->where : Where::at_file(path), fmt::format("expected 'schema: {}'", kSchema),
                     "memplan calibrate --out FILE writes calibration profiles");
  Calibration c;
  detail::read_section(root, {&profile_keys()}, c, nullptr);
  c.file = path;
  return c;
}

void save_calibration(const Calibration& c, const std::map<std::string, std::string>& stamp, const std::string& path,
                      bool force) {
  MEMPLAN_CHECK(std::isfinite(c.activation_scale) && std::isfinite(c.model_state_scale) && std::isfinite(c.overhead_fraction),
                "calibration corrections must be finite");
  // Doubles go out in fmt's shortest round-trip form so load(save(c)) == c exactly.
  auto number = [](double v) { return fmt::format("{}", v); };
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "schema" << YAML::Value << kSchema;
  e << YAML::Key << "device" << YAML::Value << c.device;
  e << YAML::Key << "stamp" << YAML::Value << YAML::BeginMap;
  for (const auto& [k, v] : stamp) e << YAML::Key << k << YAML::Value << YAML::DoubleQuoted << v;
  e << YAML::EndMap;
  e << YAML::Key << "corrections" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "cuda_context_bytes" << YAML::Value << static_cast<long long>(c.cuda_context_bytes);
  e << YAML::Key << "workspace_bytes" << YAML::Value << static_cast<long long>(c.workspace_bytes);
  e << YAML::Key << "activation_scale" << YAML::Value << number(c.activation_scale);
  e << YAML::Key << "model_state_scale" << YAML::Value << number(c.model_state_scale);
  e << YAML::Key << "overhead_fraction" << YAML::Value << number(c.overhead_fraction);
  e << YAML::Key << "overhead_bytes" << YAML::Value << static_cast<long long>(c.overhead_bytes);
  e << YAML::EndMap << YAML::EndMap;

  write_file_atomically(path, std::string("# memplan calibration profile (written by memplan calibrate)\n") + e.c_str() + "\n",
                        {force, Where::at_file(path), "the calibration profile"});
}

}  // namespace memplan::profiles
