// Shared by the subcommand handlers: the common setup flags, output format flags, byte
// formatting and the versioned JSON documents. Handlers do flags -> setup -> library -> render;
// arithmetic belongs in the libraries.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iosfwd>
#include <string>

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

// Registers the flags of DESIGN.md's common set on a subcommand.
void add_setup_flags(CLI::App& app, profiles::SetupInputs& in);
void add_output_flags(CLI::App& app, OutputFlags& o);

// "1.13 TiB", "21.59 GiB", "512.0 MiB", "0 B".
std::string gib(int64_t bytes);
std::string percent(double fraction);
using text::thousands;  // 1,235,814,400

// The estimate document (schema memplan.estimate/v1).
nlohmann::json estimate_json(const profiles::BuiltSetup& b, const MemoryBreakdown& e);
nlohmann::json setup_json(const TrainingSetup& s);
nlohmann::json verdict_json(const Verdict& v, const TrainingSetup& s);
// The host document: terms of one GPU rank (per_gpu, with `terms`/`total_bytes` kept at the top for
// v1 readers) and per node (ranks, total, capacity and verdict; null when the node's RAM is unknown).
nlohmann::json host_json(const MemoryBreakdown& e, const TrainingSetup& s);
// "host memory: 1.13 TiB per GPU (1.13 TiB pinned), 1.13 TiB per node (1 rank); node RAM unknown (...)".
std::string host_line(const MemoryBreakdown& e, const TrainingSetup& s);

// Writes a JSON document as JSON or YAML.
void emit(std::ostream& out, const nlohmann::json& doc, Format f);

// Prints warnings (near-miss keys) to err.
void print_warnings(std::ostream& err, const std::vector<Warning>& w);

// A one-line description of the setup ("amp-bf16, adamw, micro-batch 4 x 1024 tokens, ...").
std::string describe(const TrainingSetup& s);
// The runtime line: framework, torch version, loss, optimizer kernel and the knobs that are on,
// and which values the framework decided.
std::string describe_runtime(const profiles::BuiltSetup& b);
nlohmann::json runtime_json(const TrainingSetup& s);
// Where each setup value came from: "cfg.yaml:7:3 (training.micro_batch_size)", "--flag",
// "<framework> default: <upstream source>", or "memplan default".
nlohmann::json sources_json(const profiles::BuiltSetup& b);

}  // namespace memplan::cli
