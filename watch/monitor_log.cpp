// Bands and the log reader for memplan watch --replay.
#include "watch/monitor_log.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>

#include "estimator/error.h"

namespace memplan::watch {

const char* band_of(double u, const Thresholds& t) {
  if (u >= t.emergency) return "emergency";
  if (u >= t.critical) return "critical";
  if (u >= t.warning) return "warning";
  return "normal";
}

std::vector<nlohmann::json> read_monitor_log(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw InputError(Where::at_file(path), fmt::format("cannot read the log: {}", std::strerror(errno)),
                     "memplan watch --log FILE and memplan.Monitor(log=FILE) write these files");
  std::vector<nlohmann::json> records;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // e.byte is 1-based within the line (the text parsed).
      const int col = static_cast<int>(std::min<size_t>(e.byte, line.size()));
      std::string what = e.what();
      if (const auto p = what.find("syntax error"); p != std::string::npos) what = what.substr(p);
      throw InputError(Where::at_file(path, number, col > 0 ? col : 1), fmt::format("not a JSON line: {}", what),
                       "a memplan.monitor/v1 log holds one JSON object per line");
    }
    if (!j.is_object() || !j.contains("schema") || j["schema"] != kMonitorSchema || !j.contains("kind"))
      throw InputError(Where::at_file(path, number, 1), fmt::format("not a {} record", kMonitorSchema),
                       "memplan watch --log FILE and memplan.Monitor(log=FILE) write these files");
    records.push_back(std::move(j));
  }
  if (records.empty())
    throw InputError(Where::at_file(path), "the log holds no record", "was the training command started with --log?");
  return records;
}

}  // namespace memplan::watch
