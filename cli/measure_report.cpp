// The measure report (see measure_report.h).
#include "cli/measure_report.h"

#include <fmt/format.h>
#if __has_include(<fmt/ranges.h>)
#include <fmt/ranges.h>  // fmt::join in fmt 10+
#endif

#include <algorithm>

#include "cli/common.h"

namespace memplan::cli {
namespace {

double rel(int64_t est, int64_t meas) {
  return meas > 0 ? (static_cast<double>(est) - static_cast<double>(meas)) / static_cast<double>(meas) : 0;
}

// The estimate's allocated bytes at one phase of one step: step 1 has no optimizer states before
// its optimizer step, and its step creates them (first_step_optimizer_peak).
int64_t step_estimate(const TrainingSetup& s, const MemoryBreakdown& e, Phase p, int step) {
  const PhaseState& ph = e.at(p);
  if (step != 1) return estimated_allocated(ph);
  if (p == Phase::optimizer_step) return first_step_optimizer_peak(s, e) - (ph.total() - ph.allocated());
  return estimated_allocated(ph) - ph[Term::optimizer_states];
}

}  // namespace

int64_t estimated_allocated(const PhaseState& ph) { return ph.allocated(); }

std::vector<MeasureFigure> measure_figures(const calibrate::MeasureResult& r, const MemoryBreakdown& e, bool cuda) {
  const PhaseState& pk = e.peak();
  // The allocated peak may sit in another phase than the whole estimate's peak.
  int64_t est_alloc = 0;
  for (const PhaseState& ph : e.phases) est_alloc = std::max(est_alloc, estimated_allocated(ph));
  std::vector<MeasureFigure> out;
  auto add = [&](const char* name, int64_t measured, int64_t estimated, bool compared, std::string what) {
    MeasureFigure f{name, measured, estimated, compared, compared ? rel(estimated, measured) : 0.0, std::move(what)};
    out.push_back(std::move(f));
  };
  add("allocated", r.peak_bytes, est_alloc, true,
      cuda ? "the caching allocator's peak allocated bytes" : "the counting allocator's peak bytes");
  if (!cuda) return out;
  const bool whole = !r.extrapolated;
  add("reserved", r.peak_reserved, pk.reserved(), whole,
      "the caching allocator's peak reserved bytes (its segments)");
  add("device", r.peak_reserved + r.context_bytes, pk.total(), whole,
      fmt::format("peak reserved + {:.1f} MiB outside the allocator (cudaMemGetInfo's used minus reserved)",
                  r.context_bytes / 1048576.0));
  return out;
}

nlohmann::json measure_document(const TrainingSetup& hs, const calibrate::MeasureResult& r, const MemoryBreakdown& e,
                                bool cuda) {
  const bool depth_matches = !r.extrapolated && r.layers_measured == hs.model.num_layers;
  nlohmann::json doc = {{"schema", "memplan.measure/v1"}, {"memplan_version", MEMPLAN_VERSION}};
  doc["setup"] = setup_json(hs);
  doc["device"] = {{"name", r.device_name}, {"libtorch", r.libtorch}, {"driver", r.driver}};
  doc["layers_measured"] = r.layers_measured;
  doc["extrapolated"] = r.extrapolated;
  if (r.budget_bytes > 0) doc["budget_bytes"] = r.budget_bytes;
  doc["steps"] = nlohmann::json::array();
  for (const auto& st : r.steps) {
    nlohmann::json phases = nlohmann::json::array();
    for (const auto& ph : st.phases) {
      nlohmann::json j = {{"phase", phase_name(ph.phase)}, {"measured_peak_bytes", ph.peak_bytes}, {"measured_end_bytes", ph.end_bytes}};
      if (depth_matches) {
        const int64_t est = step_estimate(hs, e, ph.phase, st.step);
        j["estimated_peak_bytes"] = est;
        j["error"] = rel(est, ph.peak_bytes);
      }
      if (ph.peak_reserved) j["measured_peak_reserved_bytes"] = ph.peak_reserved;
      if (ph.device_used) j["device_used_bytes"] = ph.device_used;
      phases.push_back(j);
    }
    const auto peak_it = std::max_element(st.phases.begin(), st.phases.end(),
                                          [](const auto& a, const auto& c) { return a.peak_bytes < c.peak_bytes; });
    nlohmann::json sj = {{"step", st.step}, {"seconds", st.seconds}, {"phases", phases}};
    if (peak_it != st.phases.end()) {
      sj["measured_peak_bytes"] = peak_it->peak_bytes;
      sj["measured_peak_phase"] = phase_name(peak_it->phase);
      if (depth_matches) {
        int64_t best = 0;
        Phase bp = Phase::forward;
        for (Phase p : {Phase::forward, Phase::backward, Phase::optimizer_step})
          if (const int64_t v = step_estimate(hs, e, p, st.step); v > best) {
            best = v;
            bp = p;
          }
        sj["estimated_peak_bytes"] = best;
        sj["estimated_peak_phase"] = phase_name(bp);
      }
    }
    doc["steps"].push_back(sj);
  }
  // Run level: each measured figure against its own estimate.
  nlohmann::json figures = nlohmann::json::array();
  for (const MeasureFigure& f : measure_figures(r, e, cuda)) {
    nlohmann::json j = {{"name", f.name}, {"measured_bytes", f.measured}, {"estimated_bytes", f.estimated}, {"what", f.what}};
    if (f.compared) j["error"] = f.error;
    else j["not_compared"] = "measured at reduced depth: this figure is the shallower model's";
    figures.push_back(j);
  }
  doc["figures"] = figures;
  const MeasureFigure alloc = measure_figures(r, e, cuda).front();
  doc["measured_peak_bytes"] = r.peak_bytes;
  doc["measured_peak_phase"] = phase_name(r.peak_phase);
  doc["estimated_peak_bytes"] = alloc.estimated;  // allocated against allocated
  doc["estimated_peak_phase"] = phase_name(e.peak_phase());
  doc["error"] = alloc.error;
  doc["calibrated"] = e.calibrated;
  if (cuda) {
    doc["measured_context_bytes"] = r.context_bytes;
    doc["measured_context_init_bytes"] = r.context_init_bytes;
    doc["measured_peak_reserved_bytes"] = r.peak_reserved;
    doc["measured_device_used_peak_bytes"] = r.device_used_peak;
  }
  nlohmann::json terms = nlohmann::json::array();
  const PhaseState& opt = e.at(Phase::optimizer_step);
  if (depth_matches) {
    terms.push_back({{"name", "weights"}, {"measured_bytes", r.weights_bytes}, {"estimated_bytes", opt[Term::weights]}});
    terms.push_back({{"name", "optimizer_states"}, {"measured_bytes", r.states_bytes}, {"estimated_bytes", opt[Term::optimizer_states]}});
  }
  doc["terms"] = terms;
  doc["notes"] = r.notes;
  if (!r.oom.empty()) doc["oom"] = r.oom;
  return doc;
}

void print_measure(std::ostream& out, const TrainingSetup& hs, const calibrate::MeasureResult& r, const nlohmann::json& doc) {
  out << fmt::format("memplan measure: {} on {} (LibTorch {}{}{})\n", hs.model.name, r.device_name, r.libtorch,
                     r.driver.empty() ? "" : ", ", r.driver);
  out << "  " << describe(hs) << "\n";
  if (r.extrapolated)
    out << fmt::format("  measured at {} layers and extrapolated per layer to {} (the full model does not fit in {} here)\n",
                       fmt::join(r.depths, ", "), hs.model.num_layers, gib(r.budget_bytes));
  out << fmt::format("\n  {:<5} {:<15} {:>12} {:>12} {:>8}   (allocated bytes)\n", "step", "phase", "measured", "estimated", "error");
  for (const auto& st : doc["steps"])
    for (const auto& ph : st["phases"])
      out << fmt::format("  {:<5} {:<15} {:>12} {:>12} {:>8}\n", st["step"].get<int>(), ph["phase"].get<std::string>(),
                         gib(ph["measured_peak_bytes"].get<int64_t>()),
                         ph.contains("estimated_peak_bytes") ? gib(ph["estimated_peak_bytes"].get<int64_t>()) : "-",
                         ph.contains("error") ? fmt::format("{:+.2f}%", 100 * ph["error"].get<double>()) : "-");
  out << "\n";
  const bool cal = doc["calibrated"].get<bool>();
  for (const auto& f : doc["figures"]) {
    const std::string name = f["name"];
    out << fmt::format("  {:<10} measured {:>10}, estimated {:>10}: {}\n", name + ":", gib(f["measured_bytes"].get<int64_t>()),
                       gib(f["estimated_bytes"].get<int64_t>()),
                       f.contains("error") ? fmt::format("{:+.2f}%{}", 100 * f["error"].get<double>(), cal ? " (calibrated)" : "")
                                           : std::string("not compared (reduced depth)"));
    out << fmt::format("  {:<10} {}\n", "", f["what"].get<std::string>());
  }
  for (const auto& t : doc["terms"])
    out << fmt::format("  {}: measured {}, estimated {}\n", t["name"].get<std::string>(), gib(t["measured_bytes"].get<int64_t>()),
                       gib(t["estimated_bytes"].get<int64_t>()));
  for (const auto& n : r.notes) out << "  note: " << n << "\n";
}

}  // namespace memplan::cli
