// The memplan.monitor/v1 JSON-lines log (docs/monitor-log.md) that `memplan watch --log` and the
// Python memplan.Monitor write, and the bands both report. One JSON object per line, each with
// "schema" and "kind" (start, sample, step, end).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "estimator/setup.h"

namespace memplan::watch {

constexpr const char* kMonitorSchema = "memplan.monitor/v1";

// One device of a sample record.
struct LogDevice {
  int64_t index = 0;
  std::string name;
  int64_t used_bytes = 0, total_bytes = 0;
};

// A record of the log, typed: what `memplan watch --replay` (and a report) reads of each kind.
// A key absent or null takes the default shown; a key present with the wrong type or out of range
// is an error at its line (the log comes from a file anyone can write).
struct LogRecord {
  enum class Kind { start, sample, step, end };
  Kind kind = Kind::start;
  int line = 0;    // 1-based line in the file
  double t = 0.0;  // seconds since the start record
  // start
  std::string source, sampler, reader, device;
  std::vector<std::string> command;  // watch: the command's argv
  Thresholds thresholds;             // the defaults where the record gives none
  std::optional<int64_t> estimate_peak_bytes;
  // sample
  std::vector<LogDevice> devices;
  // step
  int64_t step = 0;
  std::string error;  // step: why the reading failed ("" when it did not)
  int64_t peak_used_bytes = 0, capacity_bytes = 0;
  std::string band;
  std::vector<std::string> events;
  std::optional<double> leak_rate_bytes_per_step;
  int64_t leak_since_step = 0;
  std::optional<double> departure_error;
  std::string departure_term, recommendation_flags;
  // end
  std::optional<int64_t> exit_code;
  int64_t peak_bytes = 0, steps = 0;
  std::string worst_band;
};

// One line of a log (line `number`, 1-based): its record, nullopt for a blank line. InputError at
// file:line:col for a line that is not JSON or not a memplan.monitor/v1 record, at file:line for
// a key of the wrong type or out of range (sizes are whole numbers of bytes from 0 to 2^62, times
// and fractions finite). The caller reads the file a line at a time (bounded: profiles' reader,
// cli/run_trace.h for_each_monitor_record).
std::optional<LogRecord> parse_monitor_line(const std::string& line, const std::string& path, int number);
// The InputError of a log without a record (at the file).
[[noreturn]] void no_records(const std::string& path);

}  // namespace memplan::watch
