// Monitor log -> report::RunTrace (run_trace.h).
#include "cli/run_trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "cli/common.h"
#include "estimator/text.h"
#include "profiles/reader.h"

namespace memplan::cli {

report::RunTrace run_trace(const std::vector<watch::LogRecord>& records, const MemoryBreakdown* estimate) {
  using Kind = watch::LogRecord::Kind;
  report::RunTrace r;
  r.version = MEMPLAN_VERSION;
  std::map<int64_t, size_t> device_series;  // device index -> series
  size_t steps = SIZE_MAX;                  // the monitor's step peaks
  std::optional<int64_t> estimate_peak;
  Band worst = Band::normal;  // of the samples: a band:X event each time it gets worse (the monitor's steps say it themselves)
  for (const watch::LogRecord& rec : records) {
    switch (rec.kind) {
      case Kind::start:
        r.thresholds = rec.thresholds;
        estimate_peak = rec.estimate_peak_bytes;
        r.title = rec.source == "watch" && !rec.command.empty() ? fmt::format("'{}'", fmt::join(rec.command, " "))
                                                                : fmt::format("monitor on {}", rec.device.empty() ? "?" : rec.device);
        r.lines.push_back(fmt::format("measured by {}", !rec.reader.empty() ? rec.reader : !rec.sampler.empty() ? rec.sampler : "?"));
        break;
      case Kind::sample: {
        double fullest = 0;
        for (const watch::LogDevice& d : rec.devices)
          if (d.total_bytes > 0) fullest = std::max(fullest, static_cast<double>(d.used_bytes) / static_cast<double>(d.total_bytes));
        if (const Band b = band_of(fullest, r.thresholds); b > worst) {
          worst = b;
          r.events.push_back({rec.t, fmt::format("band:{}", to_string(b)), fmt::format("{:.1f}% of the fullest device", 100 * fullest)});
        }
        for (const watch::LogDevice& d : rec.devices) {
          auto it = device_series.find(d.index);
          if (it == device_series.end()) {
            it = device_series.emplace(d.index, r.series.size()).first;
            r.series.push_back({d.name == "process tree" || d.name.empty() ? d.name.empty() ? fmt::format("device {}", d.index) : d.name
                                                                           : fmt::format("GPU{} {}", d.index, d.name),
                                {}});
          }
          r.series[it->second].points.push_back({rec.t, d.used_bytes});
          r.capacity_bytes = std::max(r.capacity_bytes, d.total_bytes);
        }
        break;
      }
      case Kind::step:
        if (!rec.error.empty()) {
          r.events.push_back({rec.t, "reading failed", fmt::format("step {}: {}", rec.step, rec.error)});
          break;
        }
        if (steps == SIZE_MAX) {
          steps = r.series.size();
          r.series.push_back({"step peaks (monitor)", {}});
        }
        r.series[steps].points.push_back({rec.t, rec.peak_used_bytes});
        r.capacity_bytes = std::max(r.capacity_bytes, rec.capacity_bytes);
        for (const std::string& ev : rec.events) {
          std::string detail = fmt::format("step {}", rec.step);
          if (ev == "leak" && rec.leak_rate_bytes_per_step)
            detail += fmt::format(": +{}/step since step {}", text::gib(static_cast<int64_t>(*rec.leak_rate_bytes_per_step)), rec.leak_since_step);
          else if (ev == "departure" && rec.departure_error)
            detail += fmt::format(": {:+.1f}% against the estimate (likely {})", 100 * *rec.departure_error,
                                  rec.departure_term.empty() ? "?" : rec.departure_term);
          else if (ev == "recommendation" && !rec.recommendation_flags.empty())
            detail += ": memplan fit: " + rec.recommendation_flags;
          r.events.push_back({rec.t, ev, detail});
        }
        break;
      case Kind::end: {
        std::string what = rec.exit_code ? fmt::format("exit {}", *rec.exit_code) : "end";
        std::string detail = rec.exit_code ? fmt::format("peak {}", text::gib(rec.peak_bytes)) : fmt::format("{} steps", rec.steps);
        if (!rec.worst_band.empty()) detail += ", worst band " + rec.worst_band;
        r.events.push_back({rec.t, what, detail});
        r.lines.push_back(fmt::format("ended at {:.1f} s: {}", rec.t, detail));
        r.capacity_bytes = std::max(r.capacity_bytes, rec.capacity_bytes);
        break;
      }
    }
  }
  if (r.title.empty()) r.title = "a monitor log";
  if (estimate) {
    for (const PhaseState& ph : estimate->phases)
      r.estimate.push_back({fmt::format("estimate: {}{}", phase_name(ph.phase), &ph == &estimate->peak() ? " (peak)" : ""), ph.total()});
  } else if (estimate_peak) {
    r.estimate.push_back({"estimate (peak)", *estimate_peak});
  }
  return r;
}

namespace {
// A watched run samples ten times a second at most: a day of it is about 200 MB of log.
constexpr int64_t kMaxLogBytes = int64_t{1} << 30;
}  // namespace

std::vector<watch::LogRecord> read_monitor_log(const std::string& path, const Where& named_at) {
  std::string text;
  try {
    text = profiles::detail::read_text_file(path, named_at, kMaxLogBytes);
  } catch (const InputError& e) {
    throw InputError(e.where(), fmt::format("cannot read the log: {}", e.message()),
                     "memplan watch --log FILE and memplan.Monitor(log=FILE) write these files");
  }
  return watch::parse_monitor_log(text, path);
}

std::optional<FlagsEstimate> estimate_of_flags(std::ostream& err, const profiles::SetupInputs& in) {
  if (!in.model && !in.config) return std::nullopt;
  const profiles::BuiltSetup b = profiles::build_setup(in);
  print_warnings(err, b.warnings);
  return FlagsEstimate{estimate(b.setup, calibration_of(b)), b.setup.thresholds};
}

}  // namespace memplan::cli
