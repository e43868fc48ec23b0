// Shared by the subcommand handlers: the output format flags, byte formatting and the document
// writer, with the setup flags and the versioned documents from api/ (shared with Python).
// Handlers do flags -> setup -> library -> render; arithmetic belongs in the libraries.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>

#include "api/documents.h"
#include "api/flags.h"
#include "estimator/text.h"
#include "estimator/breakdown.h"
#include "estimator/estimate.h"
#include "profiles/profiles.h"

namespace memplan::cli {

// Output format chosen with --json / --yaml (table otherwise).
enum class Format { table, json, yaml };

struct OutputFlags {
  bool json = false;
  bool yaml = false;
  Format format() const { return json ? Format::json : yaml ? Format::yaml : Format::table; }
};

// The --calibration profile of a built setup, or nullptr.
inline const Calibration* calibration_of(const profiles::BuiltSetup& b) { return b.calibration ? &*b.calibration : nullptr; }

// The setup flags (api/flags.h).
using api::add_setup_flags;
void add_output_flags(CLI::App& app, OutputFlags& o);

// "1.13 TiB", "21.59 GiB", "512.0 MiB", "0 B".
std::string gib(int64_t bytes);
using text::percent;
using text::thousands;  // 1,235,814,400

// The documents and one-line descriptions (api/documents.h).
using api::describe;
using api::describe_runtime;
using api::estimate_json;
using api::host_json;
using api::host_line;
using api::runtime_json;
using api::setup_json;
using api::sources_json;
using api::verdict_json;

// Writes a JSON document as JSON or YAML.
void emit(std::ostream& out, const nlohmann::json& doc, Format f);

// Prints warnings (near-miss keys) to err.
void print_warnings(std::ostream& err, const std::vector<Warning>& w);

}  // namespace memplan::cli
