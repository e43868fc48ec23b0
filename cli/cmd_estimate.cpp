// memplan estimate and memplan fit: flags -> setup -> estimate / planner::fit -> table or
// versioned JSON/YAML.
#include <fmt/format.h>

#include <optional>
#include <ostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/python_env.h"
#include "planner/fit.h"

namespace memplan::cli {
namespace {

void print_header(std::ostream& out, const char* verb, const profiles::BuiltSetup& b, const MemoryBreakdown& e) {
  const TrainingSetup& s = b.setup;
  out << fmt::format("memplan {}: {} ({} parameters, {} trainable)\n", verb, s.model.name, thousands(e.params.total),
                     thousands(e.params.trainable));
  if (!b.config_path.empty()) out << fmt::format("  config: {} (read as {})\n", b.config_path, b.config_format);
  // Where the weights' dtype came from when from_pretrained's default decided it (issue 23: an HF
  // file without a dtype trains fp32 weights under transformers 4.x, the checkpoint's under 5).
  const std::string load = b.origin.text_of(memplan::path(Choice::precision));
  if (load.find("from_pretrained") != std::string::npos || load.find("dtype") != std::string::npos) out << fmt::format("  weights: {} ({})\n", to_string(s.precision), load);
  out << "  " << describe(s) << "\n";
  out << "  " << describe_runtime(b) << "\n";
  if (s.device.capacity_bytes > 0 && s.device.allocator_cap_bytes > 0)
    out << fmt::format("  device: {}, the caching allocator capped at {} (set_per_process_memory_fraction): {} with the "
                       "context outside it{}\n",
                       s.device.name, gib(s.device.allocator_cap_bytes), gib(s.device.capacity_bytes),
                       e.calibrated ? fmt::format("; calibrated with {}", e.calibration) : "");
  else if (s.device.capacity_bytes > 0)
    out << fmt::format("  device: {}, {}{}{}\n", s.device.name, gib(s.device.capacity_bytes),
                       b.origin.of(Size::gpu_memory).flag == field(Size::gpu_memory).flag && !b.origin.of(Size::gpu_memory).key.empty()
                           ? fmt::format(" ({})", b.origin.of(Size::gpu_memory).key)
                           : "",
                       e.calibrated ? fmt::format("; calibrated with {}", e.calibration)
                                    : (s.device.kind == DeviceKind::cuda ? "; uncalibrated (family defaults for context, workspace, allocator)" : ""));
  else
    out << "  device: capacity unknown (pass --gpu or --gpu-memory for a verdict)\n";
}

std::string verdict_words(const Verdict& v, const TrainingSetup& s, const MemoryBreakdown& e) {
  if (!v.known) return "verdict: unknown (no device capacity)";
  const int64_t target = target_bytes(s);
  const int64_t peak = e.verdict_bytes();
  if (peak < e.peak_bytes())  // the replay ran it in the target's share, the cache squeezed
    return fmt::format("verdict: fits: the allocator would cache up to {} with room, but the step runs within the {} "
                       "target ({}: a failed cudaMalloc frees its cached blocks and retries)",
                       gib(e.peak_bytes()), percent(s.thresholds.target), gib(target));
  if (v.fits)
    return fmt::format("verdict: fits: {} of {} ({}, status {}), {} headroom below the {} target", gib(peak),
                       gib(s.device.capacity_bytes), percent(v.utilization), v.status, gib(target - peak),
                       percent(s.thresholds.target));
  if (v.runs)  // within the card, not within the target's headroom
    return fmt::format("verdict: runs, above the {} target: {} is {} of {} (status {}), {} over the target ({}){}",
                       percent(s.thresholds.target), gib(peak), percent(v.utilization), gib(s.device.capacity_bytes), v.status,
                       gib(peak - target), gib(target),
                       e.allocator_replayed && peak >= s.device.capacity_bytes
                           ? "; only with the allocator's cache squeezed into the whole card (it frees its cache and retries)"
                           : "");
  return fmt::format("verdict: does not fit: {} is {} of {} (status {}), {} over the {} target ({})", gib(peak),
                     percent(v.utilization), gib(s.device.capacity_bytes), v.status, gib(peak - target),
                     percent(s.thresholds.target), gib(target));
}

// Where the ranks differ: whose figures these are (the worst rank's) and the least a rank needs.
std::string ranks_line(const MemoryBreakdown& e) {
  if (e.ranks.empty()) return "";
  int64_t least = e.ranks.front().peak_bytes;
  for (const auto& r : e.ranks) least = std::min(least, r.peak_bytes);
  return fmt::format("  ranks: the figures are rank {}'s, the worst of {} ({}); the least a rank needs is {} (--json lists each)\n",
                     e.worst_rank, e.ranks.back().last_rank + 1, e.worst_rank_why, gib(least));
}

std::string verdict_line(const Verdict& v, const TrainingSetup& s, const MemoryBreakdown& e) {
  // Where the replay does not run, the overhead in the figure is the percentage formula's guess:
  // the verdict says so itself, not only a note.
  const std::string guessed = e.replay_why_not.empty() ? "" : fmt::format("; allocator overhead guessed (percentage): {} is not replayed",
                                                                          e.replay_why_not);
  return verdict_words(v, s, e) + guessed;
}

void print_table(std::ostream& out, const MemoryBreakdown& e, const TrainingSetup& s) {
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
  out << ranks_line(e);
  if (s.device.kind == DeviceKind::cuda) {
    const int64_t allocated = e.allocated_peak_bytes();
    out << fmt::format("  on the GPU: allocated {} (tensors: torch.cuda.max_memory_allocated), reserved {} (+ the caching "
                       "allocator's overhead: max_memory_reserved), device {} (+ {} outside the allocator: cudaMemGetInfo's used)\n",
                       gib(allocated), gib(pk.reserved()), gib(total), gib(pk[Term::cuda_context]));
  }
  if (!e.host.empty() || s.parallel.host_memory_bytes > 0) {
    out << "  " << host_line(e, s) << "\n";
    for (const HostTerm& h : e.host) out << fmt::format("    {:<26} {:>11}{}\n", h.name, gib(h.bytes), h.pinned ? "  pinned" : "");
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
    print_table(io.out, e, b.setup);
    io.out << "  " << verdict_line(v, b.setup, e) << "\n";
    io.out << "  (memplan explain with the same flags shows each term's formula and source)\n";
  }
  return v.known && !v.fits ? kExitDoesNotFit : kExitOk;
}

void print_option(std::ostream& out, const planner::FitOption& o, const std::string& lead) {
  out << fmt::format("    {}{:<66} {:>11}  {:>4.0f}% speed\n", lead, o.flags, gib(o.peak_bytes), 100 * o.relative_speed);
  for (const auto& c : o.changes) out << fmt::format("        {}: {}\n", c.step, c.cost);
}

int run_fit(Io io, const profiles::SetupInputs& in, const OutputFlags& o) {
  const profiles::BuiltSetup b = profiles::build_setup(in);
  print_warnings(io.err, b.warnings);
  const TrainingSetup& s = b.setup;
  if (s.device.capacity_bytes <= 0)
    throw InputError(Where::at_flag(field(Target::gpu).flag), "fit needs a device capacity",
                     "pass --gpu PRESET (memplan gpus lists them) or --gpu-memory 12GiB");
  const Calibration* cal = calibration_of(b);
  const MemoryBreakdown e = estimate(s, cal);
  const planner::FitReport r = planner::fit(s, cal, api::fit_ask(in));
  const bool ok = r.verdict.fits && r.host.fits;
  if (o.format() != Format::table) {
    emit(io.out, api::fit_json(b, e, r), o.format());
    return ok ? kExitOk : kExitDoesNotFit;
  }
  print_header(io.out, "fit", b, e);
  io.out << "  " << verdict_line(r.verdict, s, e) << "\n";
  io.out << fmt::format("  peak at {} ({})\n", phase_name(e.peak_phase()), e.peak().at);
  io.out << ranks_line(e);
  if (!e.host.empty() || s.parallel.host_memory_bytes > 0) io.out << "  " << host_line(e, s) << "\n";
  if (r.largest_micro_batch > 0)
    io.out << fmt::format("  largest micro-batch that fits: {} ({})\n", r.largest_micro_batch, gib(r.largest_micro_batch_peak));
  else
    io.out << "  largest micro-batch that fits: none, even micro-batch 1 is over the target\n";
  if (r.verdict.known && r.largest_micro_batch_runs != r.largest_micro_batch)
    io.out << fmt::format("  largest micro-batch that runs at all (no headroom: {}): {}\n",
                          e.allocator_replayed ? "the allocator replay's out-of-memory boundary" : "the peak within the card",
                          r.largest_micro_batch_runs > 0 ? std::to_string(r.largest_micro_batch_runs) : "none");
  if (ok) return kExitOk;
  if (!r.single.empty()) {
    io.out << "\n  each change alone (the rest as given):\n";
    for (const auto& c : r.single)
      io.out << fmt::format("    {:<50} {:>11}  {}  {}\n", c.flags, gib(c.peak_bytes), c.fits ? "fits     " : "not alone", c.cost);
  }
  if (!r.options.empty()) {
    io.out << fmt::format("\n  what makes it fit, fastest first (modelled speed; {} combinations searched):\n", thousands(r.searched));
    for (size_t i = 0; i < r.options.size(); ++i) print_option(io.out, r.options[i], fmt::format("{}. ", i + 1));
  } else {
    io.out << fmt::format("\n  no combination that keeps the model and the sequence fits ({} searched)\n", thousands(r.searched));
  }
  if (r.fewest) {
    io.out << "\n  fewest changes that fit:\n";
    print_option(io.out, *r.fewest, "");
  }
  if (!r.training_changes.empty()) {
    io.out << "\n  changes what you train or what the model learns:\n";
    for (const auto& c : r.training_changes) print_option(io.out, c, "");
  }
  if (!r.left_out.empty()) {
    io.out << "\n  left out:\n";
    for (const auto& l : r.left_out) io.out << fmt::format("    {}: {}\n", l.option, l.why);
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
  return {app, [io, in, o] { return run_estimate(io, with_environment(*in), *o); }};
}

Command register_fit(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("fit", "does it fit; largest micro-batch; the cheapest change that makes it fit");
  auto in = std::make_shared<profiles::SetupInputs>();
  auto o = std::make_shared<OutputFlags>();
  add_setup_flags(*app, *in);
  add_output_flags(*app, *o);
  return {app, [io, in, o] { return run_fit(io, with_environment(*in), *o); }};
}

}  // namespace memplan::cli
