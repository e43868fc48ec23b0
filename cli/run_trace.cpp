// Monitor log -> report::RunTrace (run_trace.h).
#include "cli/run_trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "cli/common.h"
#include "estimator/text.h"
#include "profiles/reader.h"

namespace memplan::cli {

void RunTraceBuilder::point(size_t series, report::RunTrace::Point p) {
  if (thin_.size() <= series) thin_.resize(series + 1);
  Thinned& th = thin_[series];
  if (th.pending == 0 || p.bytes > th.best.bytes) th.best = p;
  if (++th.pending < th.stride) return;
  std::vector<report::RunTrace::Point>& pts = r_.series[series].points;
  pts.push_back(th.best);
  th.pending = 0;
  if (pts.size() < 2 * kMaxPoints) return;
  // Twice the room used: each pair of neighbours becomes its larger point, at twice the stride.
  for (size_t i = 0; i < pts.size() / 2; ++i) pts[i] = pts[2 * i + 1].bytes > pts[2 * i].bytes ? pts[2 * i + 1] : pts[2 * i];
  pts.resize(pts.size() / 2);
  th.stride *= 2;
}

void RunTraceBuilder::event(report::RunTrace::Event e) {
  if (r_.events.size() < kMaxEvents) {
    r_.events.push_back(std::move(e));
  } else {
    ++dropped_events_;
  }
}

void RunTraceBuilder::add(const watch::LogRecord& rec) {
  using Kind = watch::LogRecord::Kind;
  report::RunTrace& r = r_;
  switch (rec.kind) {
    case Kind::start:
      r.thresholds = rec.thresholds;
      estimate_peak_ = rec.estimate_peak_bytes;
      r.title = rec.source == "watch" && !rec.command.empty() ? fmt::format("'{}'", fmt::join(rec.command, " "))
                                                              : fmt::format("monitor on {}", rec.device.empty() ? "?" : rec.device);
      r.lines.push_back(fmt::format("measured by {}", !rec.reader.empty() ? rec.reader : !rec.sampler.empty() ? rec.sampler : "?"));
      break;
    case Kind::sample: {
      double fullest = 0;
      for (const watch::LogDevice& d : rec.devices)
        if (d.total_bytes > 0) fullest = std::max(fullest, static_cast<double>(d.used_bytes) / static_cast<double>(d.total_bytes));
      if (const Band b = band_of(fullest, r.thresholds); b > worst_) {  // a band:X event each time it gets worse
        worst_ = b;
        event({rec.t, fmt::format("band:{}", to_string(b)), fmt::format("{:.1f}% of the fullest device", 100 * fullest)});
      }
      for (const watch::LogDevice& d : rec.devices) {
        auto it = std::find_if(device_series_.begin(), device_series_.end(), [&](const auto& e) { return e.first == d.index; });
        if (it == device_series_.end()) {
          device_series_.emplace_back(d.index, r.series.size());
          it = device_series_.end() - 1;
          r.series.push_back({d.name == "process tree" || d.name.empty() ? d.name.empty() ? fmt::format("device {}", d.index) : d.name
                                                                         : fmt::format("GPU{} {}", d.index, d.name),
                              {}});
        }
        point(it->second, {rec.t, d.used_bytes});
        r.capacity_bytes = std::max(r.capacity_bytes, d.total_bytes);
      }
      break;
    }
    case Kind::step:
      if (!rec.error.empty()) {
        event({rec.t, "reading failed", fmt::format("step {}: {}", rec.step, rec.error)});
        break;
      }
      if (steps_ == SIZE_MAX) {
        steps_ = r.series.size();
        r.series.push_back({"step peaks (monitor)", {}});
      }
      point(steps_, {rec.t, rec.peak_used_bytes});
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
        event({rec.t, ev, detail});
      }
      break;
    case Kind::end: {
      std::string what = rec.exit_code ? fmt::format("exit {}", *rec.exit_code) : "end";
      std::string detail = rec.exit_code ? fmt::format("peak {}", text::gib(rec.peak_bytes)) : fmt::format("{} steps", rec.steps);
      if (!rec.worst_band.empty()) detail += ", worst band " + rec.worst_band;
      if (r.events.size() >= kMaxEvents) {  // the end is always shown: in the place of the last kept event
        ++dropped_events_;
        r.events.pop_back();
      }
      r.events.push_back({rec.t, what, detail});
      r.lines.push_back(fmt::format("ended at {:.1f} s: {}", rec.t, detail));
      r.capacity_bytes = std::max(r.capacity_bytes, rec.capacity_bytes);
      break;
    }
  }
}

report::RunTrace RunTraceBuilder::finish(const MemoryBreakdown* estimate) {
  report::RunTrace r = std::move(r_);
  for (size_t i = 0; i < thin_.size() && i < r.series.size(); ++i) {
    if (thin_[i].pending > 0) r.series[i].points.push_back(thin_[i].best);
    if (thin_[i].stride > 1)
      r.lines.push_back(fmt::format("{}: each point the highest of {} samples (a long log, thinned to at most {})", r.series[i].name,
                                    thin_[i].stride, 2 * kMaxPoints));
  }
  if (dropped_events_ > 0)
    r.lines.push_back(fmt::format("{} more events not listed (the first {} are)", dropped_events_, kMaxEvents - 1));
  r.version = MEMPLAN_VERSION;
  if (r.title.empty()) r.title = "a monitor log";
  if (estimate) {
    for (const PhaseState& ph : estimate->phases)
      r.estimate.push_back({fmt::format("estimate: {}{}", phase_name(ph.phase), &ph == &estimate->peak() ? " (peak)" : ""), ph.total()});
  } else if (estimate_peak_) {
    r.estimate.push_back({"estimate (peak)", *estimate_peak_});
  }
  *this = RunTraceBuilder();
  return r;
}

namespace {
// A watched run samples ten times a second at most: a day of it is about 200 MB of log, read a
// line at a time (a record is a few hundred bytes; a line of a MiB is not one).
constexpr int64_t kMaxLogBytes = int64_t{1} << 30;
constexpr int64_t kMaxLogLineBytes = int64_t{1} << 20;
}  // namespace

int for_each_monitor_record(const std::string& path, const Where& named_at, const std::function<void(const watch::LogRecord&)>& each,
                            int lines) {
  bool any = false;
  int read = 0;
  try {
    profiles::detail::for_each_text_line(path, named_at, kMaxLogBytes, kMaxLogLineBytes, [&](const std::string& line, int number) {
      if (lines > 0 && number > lines) return false;
      read = number;
      if (const std::optional<watch::LogRecord> rec = watch::parse_monitor_line(line, path, number)) {
        any = true;
        each(*rec);
      }
      return true;
    });
  } catch (const InputError& e) {
    if (e.where().line > 0) throw;  // a bad line: at its place already
    throw InputError(e.where(), fmt::format("cannot read the log: {}", e.message()),
                     "memplan watch --log FILE and memplan.Monitor(log=FILE) write these files");
  }
  if (!any) watch::no_records(path);
  return read;
}

std::optional<FlagsEstimate> estimate_of_flags(std::ostream& err, const profiles::SetupInputs& in) {
  if (!in.model && !in.config) return std::nullopt;
  const profiles::BuiltSetup b = profiles::build_setup(in);
  print_warnings(err, b.warnings);
  return FlagsEstimate{estimate(b.setup, calibration_of(b)), b.setup.thresholds};
}

}  // namespace memplan::cli
