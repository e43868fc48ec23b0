// Output flags, formatting and the document writer shared by the subcommands.
#include "cli/common.h"

#include "estimator/text.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <ostream>

#include "estimator/attention_kernel.h"

namespace memplan::cli {

void add_output_flags(CLI::App& app, OutputFlags& o) {
  auto* j = app.add_flag("--json", o.json, "print the versioned JSON document");
  app.add_flag("--yaml", o.yaml, "print the document as YAML")->excludes(j);
}

std::string gib(int64_t bytes) { return text::gib(bytes); }

namespace {
void to_yaml(YAML::Emitter& y, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      y << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        y << YAML::Key << it.key() << YAML::Value;
        to_yaml(y, it.value());
      }
      y << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      y << YAML::BeginSeq;
      for (const auto& v : j) to_yaml(y, v);
      y << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: y << j.get<std::string>(); break;
    case nlohmann::json::value_t::boolean: y << j.get<bool>(); break;
    case nlohmann::json::value_t::number_integer: y << j.get<int64_t>(); break;
    case nlohmann::json::value_t::number_unsigned: y << j.get<uint64_t>(); break;
    case nlohmann::json::value_t::number_float: y << j.get<double>(); break;
    default: y << YAML::Null;
  }
}
}  // namespace

void emit(std::ostream& out, const nlohmann::json& doc, Format f) {
  if (f == Format::yaml) {
    YAML::Emitter y;
    to_yaml(y, doc);
    out << y.c_str() << "\n";
  } else {
    // A path or name that is not UTF-8 (a file name is bytes) is written as U+FFFD, not refused.
    out << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

void print_warnings(std::ostream& err, const std::vector<Warning>& w) {
  for (const Warning& x : w) err << x.render() << "\n";
}

}  // namespace memplan::cli
