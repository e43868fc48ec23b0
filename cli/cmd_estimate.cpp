// memplan estimate and memplan fit: flags -> setup -> estimate / planner::fit -> table or
// versioned JSON/YAML.
#include <fmt/format.h>

#include <optional>
#include <ostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "planner/fit.h"

namespace memplan::cli {
namespace {

void print_header(std::ostream& out, const char* verb, const profiles::BuiltSetup& b, const MemoryBreakdown& e) {
  const TrainingSetup& s = b.setup;
  out << fmt::format("memplan {}: {} ({} parameters, {} trainable)\n", verb, s.model.name, thousands(e.params.total),
                     thousands(e.params.trainable));
  if (!b.config_path.empty()) out << fmt::format("  config: {} (read as {})\n", b.config_path, b.config_format);
  out << "  " << describe(s) << "\n";
  out << "  " << describe_runtime(b) << "\n";
  if (s.device.capacity_bytes > 0)
    out << fmt::format("  device: {}, {}{}\n", s.device.name, gib(s.device.capacity_bytes),
                       e.calibrated ? fmt::format("; calibrated with {}", e.calibration)
                                    : (s.device.kind == DeviceKind::cuda ? "; uncalibrated (family defaults for context, workspace, allocator)" : ""));
  else
    out << "  device: capacity unknown (pass --gpu or --gpu-memory for a verdict)\n";
}

std::string verdict_line(const Verdict& v, const TrainingSetup& s, int64_t peak) {
  if (!v.known) return "verdict: unknown (no device capacity)";
  const int64_t target = target_bytes(s);
  if (v.fits)
    return fmt::format("verdict: fits: {} of {} ({}, status {}), {} headroom below the {} target", gib(peak),
                       gib(s.device.capacity_bytes), percent(v.utilization), v.status, gib(target - peak),
                       percent(s.thresholds.target));
  return fmt::format("verdict: does not fit: {} is {} of {} (status {}), {} over the {} target ({})", gib(peak),
                     percent(v.utilization), gib(s.device.capacity_bytes), v.status, gib(peak - target),
                     percent(s.thresholds.target), gib(target));
}

void print_table(std::ostream& out, const MemoryBreakdown& e) {
  const PhaseState& pk = e.peak();
  const int64_t total = pk.total();
  out << fmt::format("\n  {:<20} {:>11} {:>7}\n", "term (at the peak)", "size", "share");
  for (int i = 0; i < kNumTerms; ++i) {
    if (pk.bytes[i] == 0) continue;
    out << fmt::format("  {:<20} {:>11} {:>7}\n", term_name(term_at(i)), gib(pk.bytes[i]),
                       percent(static_cast<double>(pk.bytes[i]) / static_cast<double>(total)));
  }
  out << fmt::format("  {:<20} {:>11}   {} ({})\n", "peak", gib(total), phase_name(pk.phase), pk.at);
  std::string phases;
  for (const PhaseState& ph : e.phases)
    phases += fmt::format("{}{} {}{}", phases.empty() ? "" : ", ", phase_name(ph.phase), gib(ph.total()),
                          &ph == &pk ? " (peak)" : "");
  out << "  phases: " << phases << "\n";
  if (!e.host.empty()) {
    out << "  host memory: " << gib(e.host_bytes());
    for (const HostTerm& h : e.host) out << fmt::format("; {} {}", h.name, gib(h.bytes));
    out << "\n";
  }
  for (const std::string& n : e.notes) out << "  note: " << n << "\n";
}

int run_estimate(Io io, const profiles::SetupInputs& in, const OutputFlags& o) {
  const profiles::BuiltSetup b = profiles::build_setup(in);
  print_warnings(io.err, b.warnings);
  const MemoryBreakdown e = estimate(b.setup, calibration_of(b));
  const Verdict v = judge(e, b.setup);
  if (o.format() != Format::table) {
    emit(io.out, estimate_json(b, e), o.format());
  } else {
    print_header(io.out, "estimate", b, e);
    print_table(io.out, e);
    io.out << "  " << verdict_line(v, b.setup, e.peak_bytes()) << "\n";
    io.out << "  (memplan explain with the same flags shows each term's formula and source)\n";
  }
  return v.known && !v.fits ? kExitDoesNotFit : kExitOk;
}

nlohmann::json change_json(const planner::Change& c) {
  return {{"step", c.step}, {"flags", c.flags}, {"cost", c.cost}, {"peak_bytes", c.peak_bytes}, {"fits", c.fits}};
}

int run_fit(Io io, const profiles::SetupInputs& in, const OutputFlags& o) {
  const profiles::BuiltSetup b = profiles::build_setup(in);
  print_warnings(io.err, b.warnings);
  const TrainingSetup& s = b.setup;
  if (s.device.capacity_bytes <= 0)
    throw InputError(Where::at_flag("--gpu"), "fit needs a device capacity",
                     "pass --gpu PRESET (memplan gpus lists them) or --gpu-memory 12GiB");
  const Calibration* cal = calibration_of(b);
  const MemoryBreakdown e = estimate(s, cal);
  const planner::FitReport r = planner::fit(s, cal);
  if (o.format() != Format::table) {
    nlohmann::json doc = estimate_json(b, e);
    doc["schema"] = "memplan.fit/v1";
    doc["largest_micro_batch"] = r.largest_micro_batch;
    doc["largest_micro_batch_peak_bytes"] = r.largest_micro_batch_peak;
    for (const char* k : {"single", "cumulative", "other"}) doc[k] = nlohmann::json::array();
    for (const auto& c : r.single) doc["single"].push_back(change_json(c));
    for (const auto& c : r.cumulative) doc["cumulative"].push_back(change_json(c));
    for (const auto& c : r.other) doc["other"].push_back(change_json(c));
    emit(io.out, doc, o.format());
    return r.verdict.fits ? kExitOk : kExitDoesNotFit;
  }
  print_header(io.out, "fit", b, e);
  io.out << "  " << verdict_line(r.verdict, s, r.peak_bytes) << "\n";
  io.out << fmt::format("  peak at {} ({})\n", phase_name(e.peak_phase()), e.peak().at);
  if (r.largest_micro_batch > 0)
    io.out << fmt::format("  largest micro-batch that fits: {} ({})\n", r.largest_micro_batch, gib(r.largest_micro_batch_peak));
  else
    io.out << "  largest micro-batch that fits: none, even micro-batch 1 is over the target\n";
  if (r.verdict.fits) return kExitOk;
  io.out << "\n  each change alone, cheapest first (the usual OOM ladder):\n";
  for (const auto& c : r.single)
    io.out << fmt::format("    {:<50} {:>11}  {}  {}\n", c.flags, gib(c.peak_bytes), c.fits ? "fits     " : "not alone", c.cost);
  if (!r.cumulative.empty()) {
    const bool ok = r.cumulative.back().fits;
    io.out << (ok ? "\n  stacked in that order, this makes it fit:\n" : "\n  stacked in that order, it still does not fit:\n");
    for (const auto& c : r.cumulative) io.out << fmt::format("    + {:<48} {:>11}  {}\n", c.flags, gib(c.peak_bytes), c.fits ? "fits" : "");
  }
  if (!r.other.empty()) {
    io.out << "\n  outside the ladder:\n";
    for (const auto& c : r.other)
      io.out << fmt::format("    {:<50} {:>11}  {}  {}\n", c.flags, gib(c.peak_bytes), c.fits ? "fits     " : "not alone", c.cost);
  }
  return kExitDoesNotFit;
}

}  // namespace

Command register_estimate(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("estimate", "per-GPU peak memory of one training step, term by term");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto o = std::make_shared<OutputFlags>();
  add_setup_flags(*app, *in);
  add_output_flags(*app, *o);
  return {app, [io, in, o] { return run_estimate(io, *in, *o); }};
}

Command register_fit(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("fit", "does it fit; largest micro-batch; the cheapest change that makes it fit");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto o = std::make_shared<OutputFlags>();
  add_setup_flags(*app, *in);
  add_output_flags(*app, *o);
  return {app, [io, in, o] { return run_fit(io, *in, *o); }};
}

}  // namespace memplan::cli
