// A monitor log (memplan watch --log, memplan.Monitor(log=...)) as the run chart's trace
// (report::RunTrace), for `memplan report --monitor-log` and `memplan watch --html`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <iosfwd>

#include "estimator/breakdown.h"
#include "profiles/profiles.h"
#include "report/report.h"
#include "watch/monitor_log.h"

namespace memplan::cli {

// The trace of a log's records: one series per GPU (or the process tree) from the samples, the
// monitor's per-step peaks as one more, the capacity and bands from the records, the estimate's
// peak from the start record, and the events (band changes, leak, departure, recommendation, the
// end). `estimate`, when given (the setup flags of report or watch), adds its phases.
report::RunTrace run_trace(const std::vector<watch::LogRecord>& records, const MemoryBreakdown* estimate);

// A monitor log's records, read through the bounded, non-blocking reader (a FIFO, a device or a
// file past 1 GiB is refused): InputError "cannot read the log" at `named_at`, or at the bad line.
std::vector<watch::LogRecord> read_monitor_log(const std::string& path, const Where& named_at);

// The estimate of the setup flags, when they name a model (--model or --config; their warnings
// printed to `err`), with the setup's bands; nullopt without a model.
struct FlagsEstimate {
  MemoryBreakdown breakdown;
  Thresholds thresholds;
};
std::optional<FlagsEstimate> estimate_of_flags(std::ostream& err, const profiles::SetupInputs& in);

}  // namespace memplan::cli
