// A monitor log (memplan watch --log, memplan.Monitor(log=...)) as the run chart's trace
// (report::RunTrace), for `memplan report --monitor-log` and `memplan watch --html`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "estimator/breakdown.h"
#include "report/report.h"
#include "watch/monitor_log.h"

namespace memplan::cli {

// The trace of a log's records: one series per GPU (or the process tree) from the samples, the
// monitor's per-step peaks as one more, the capacity and bands from the records, the estimate's
// peak from the start record, and the events (band changes, leak, departure, recommendation, the
// end). `estimate`, when given (the setup flags of report or watch), adds its phases.
report::RunTrace run_trace(const std::vector<watch::LogRecord>& records, const MemoryBreakdown* estimate);

}  // namespace memplan::cli
