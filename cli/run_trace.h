// A monitor log (memplan watch --log, memplan.Monitor(log=...)) as the run chart's trace
// (report::RunTrace), for `memplan report --monitor-log` and `memplan watch --html`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <iosfwd>

#include "estimator/breakdown.h"
#include "profiles/profiles.h"
#include "report/report.h"
#include "watch/monitor_log.h"

namespace memplan::cli {

// The trace of a log's records, folded in one at a time: one series per GPU (or the process tree)
// from the samples, the monitor's per-step peaks as one more, the capacity and bands from the
// records, the estimate's peak from the start record, and the events (band changes, leak,
// departure, recommendation, the end). Its memory does not grow with the log: a series past
// kMaxPoints is thinned, each pair of neighbours kept as the larger of the two (the peak stays,
// with its time), and later points are taken at the same stride; past kMaxEvents the events are
// counted in a last one. A day of 10 samples a second is 864,000 points per series.
class RunTraceBuilder {
 public:
  static constexpr size_t kMaxPoints = 4096;
  static constexpr size_t kMaxEvents = 1000;
  void add(const watch::LogRecord& rec);
  // `estimate`, when given (the setup flags of report or watch), adds its phases.
  report::RunTrace finish(const MemoryBreakdown* estimate);

 private:
  struct Thinned {  // a series' stride: each kept point the larger of `stride` raw ones
    size_t stride = 1, pending = 0;
    report::RunTrace::Point best;
  };
  void point(size_t series, report::RunTrace::Point p);
  void event(report::RunTrace::Event e);
  report::RunTrace r_;
  std::vector<Thinned> thin_;               // per series
  std::vector<std::pair<int64_t, size_t>> device_series_;  // device index -> series
  size_t steps_ = SIZE_MAX;                 // the monitor's step peaks
  std::optional<int64_t> estimate_peak_;
  Band worst_ = Band::normal;
  size_t dropped_events_ = 0;
};

// A monitor log's records, in order, each handed to `each` as it is read (one line in memory at a
// time) through the bounded, non-blocking reader (a FIFO, a device, a file past 1 GiB or a line
// past 1 MiB is refused): InputError "cannot read the log" at `named_at`, or at the bad line.
// `lines` > 0: only the first `lines` lines (a log still being written, read again after a pass
// that checked them). Returns the lines read.
int for_each_monitor_record(const std::string& path, const Where& named_at, const std::function<void(const watch::LogRecord&)>& each,
                            int lines = 0);

// The estimate of the setup flags, when they name a model (--model or --config; their warnings
// printed to `err`), with the setup's bands; nullopt without a model.
struct FlagsEstimate {
  MemoryBreakdown breakdown;
  Thresholds thresholds;
};
std::optional<FlagsEstimate> estimate_of_flags(std::ostream& err, const profiles::SetupInputs& in);

}  // namespace memplan::cli
