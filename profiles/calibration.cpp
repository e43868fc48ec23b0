// Calibration profiles (memplan.calibration/v1 YAML): what `memplan calibrate` measured on one
// device. memplan writes these files itself, so reading is strict: an unknown or out-of-range
// correction is an error at its line, never silently ignored. Writing is atomic.
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

int64_t bytes_or_unset(const Node& n) {  // -1: not measured, keep the family default
  const int64_t v = detail::as_int(n);
  if (v < -1 || v > (int64_t{1} << 40)) detail::type_error(n, "a byte count up to 1 TiB (or -1 for none)");
  return v;
}
double positive_scale(const Node& n) {
  const double v = detail::as_number(n);
  if (!(v > 0 && v <= 100)) detail::type_error(n, "a multiplier in (0, 100]");
  return v;
}

const detail::KeyTable<Calibration>& correction_keys() {
  static const detail::KeyTable<Calibration> t = {
      {{"cuda_context_bytes"}, [](const Node& n, Calibration& c) { c.cuda_context_bytes = bytes_or_unset(n); }},
      {{"workspace_bytes"}, [](const Node& n, Calibration& c) { c.workspace_bytes = bytes_or_unset(n); }},
      {{"activation_scale"}, [](const Node& n, Calibration& c) { c.activation_scale = positive_scale(n); }},
      {{"model_state_scale"}, [](const Node& n, Calibration& c) { c.model_state_scale = positive_scale(n); }},
      {{"overhead_fraction"}, [](const Node& n, Calibration& c) {
         c.overhead_fraction = detail::as_number(n);
         if (!(c.overhead_fraction == -1 || (c.overhead_fraction >= 0 && c.overhead_fraction < 1)))
           detail::type_error(n, "a fraction in [0, 1) (or -1 for none)");
       }},
      {{"overhead_bytes"}, [](const Node& n, Calibration& c) {
         // A fitted constant correction: it may be negative when the model over-counts a little.
         // Bounded at 1 TiB either way; the allocator_overhead term itself never goes below 0.
         c.overhead_bytes = detail::as_int(n);
         if (c.overhead_bytes < -(int64_t{1} << 40) || c.overhead_bytes > (int64_t{1} << 40))
           detail::type_error(n, "a byte count within 1 TiB either way", "memplan calibrate writes a few MiB here");
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

}  // namespace

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
