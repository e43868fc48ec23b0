// The memplan.monitor/v1 JSON-lines log (docs/monitor-log.md) that `memplan watch --log` and the
// Python memplan.Monitor write, and the bands both report. One JSON object per line, each with
// "schema" and "kind" (start, sample, step, end).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "estimator/setup.h"

namespace memplan::watch {

constexpr const char* kMonitorSchema = "memplan.monitor/v1";

// normal, warning, critical or emergency for a fraction of device memory (the guides' bands;
// the target is fit's goal, not a band).
const char* band_of(double utilization, const Thresholds& t);

// The records of a log file, in order. InputError at file:line:col for a line that is not JSON or
// not a memplan.monitor/v1 record, and at the file when it cannot be read or holds none.
std::vector<nlohmann::json> read_monitor_log(const std::string& path);

}  // namespace memplan::watch
