// Bands and the log reader for memplan watch --replay.
#include "watch/monitor_log.h"

#include <fmt/format.h>

#include <cmath>

#include "estimator/breakdown.h"
#include "estimator/error.h"

namespace memplan::watch {

namespace {

using nlohmann::json;

constexpr int64_t kMaxLogBytes = int64_t{1} << 62;  // a size in a log: up to 4.6e18 B
constexpr const char* kBytesWhat = "a whole number of bytes from 0 to 2^62";

// A record's keys, read with their types checked: the log comes from a file anyone can write.
class Fields {
 public:
  Fields(const json& j, const std::string& path, int line, const std::string& kind) : j_(j), path_(path), line_(line), kind_(kind) {}

  [[noreturn]] void bad(const std::string& key, const std::string& what, const json& got) const {
    std::string shown = got.dump(-1, ' ', false, json::error_handler_t::replace);
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    throw InputError(Where::at_file(path_, line_, 1),
                     fmt::format("{} record: '{}' must be {} (got {})", kind_, key, what, shown),
                     "memplan watch --log FILE and memplan.Monitor(log=FILE) write these logs; docs/monitor-log.md lists each "
                     "key and its type");
  }
  const json* find(const json& obj, const std::string& key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::string text(const std::string& key, const json* obj = nullptr) const {
    const json* v = find(obj ? *obj : j_, key);
    if (!v) return "";
    if (!v->is_string()) bad(key, "a string", *v);
    return v->get<std::string>();
  }
  // A band's name (estimator/breakdown.h band_of); "" when absent.
  std::string band(const std::string& key) const {
    const std::string b = text(key);
    if (!b.empty() && !parse_band(b))
      bad(key, "a band: normal, above_target, warning, critical, emergency or out_of_memory", j_.at(key));
    return b;
  }
  std::optional<double> number(const std::string& key, const json* obj = nullptr) const {
    const json* v = find(obj ? *obj : j_, key);
    if (!v) return std::nullopt;
    if (!v->is_number() || !std::isfinite(v->get<double>())) bad(key, "a finite number", *v);
    return v->get<double>();
  }
  // A whole number in [lo, hi] (JSON integers; an integral float as Python may write one).
  std::optional<int64_t> integer(const std::string& key, int64_t lo, int64_t hi, const json* obj = nullptr,
                                 const char* what = "a whole number") const {
    const json* v = find(obj ? *obj : j_, key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) bad(key, what, *v);
      return static_cast<int64_t>(u);
    }
    if (v->is_number_integer()) {
      const int64_t i = v->get<int64_t>();
      if (i < lo || i > hi) bad(key, what, *v);
      return i;
    }
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi))
        return static_cast<int64_t>(d);
    }
    bad(key, what, *v);
  }
  int64_t bytes(const std::string& key, const json* obj = nullptr) const {
    return integer(key, 0, kMaxLogBytes, obj, kBytesWhat).value_or(0);
  }
  std::vector<std::string> texts(const std::string& key) const {
    std::vector<std::string> out;
    const json* v = find(j_, key);
    if (!v) return out;
    if (!v->is_array()) bad(key, "a list of strings", *v);
    for (const json& e : *v) {
      if (!e.is_string()) bad(key, "a list of strings", *v);
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  const json* object(const std::string& key) const {
    const json* v = find(j_, key);
    if (v && !v->is_object()) bad(key, "an object", *v);
    return v;
  }
  const json* array(const std::string& key) const {
    const json* v = find(j_, key);
    if (v && !v->is_array()) bad(key, "a list", *v);
    return v;
  }

 private:
  const json& j_;
  const std::string& path_;
  int line_;
  std::string kind_;
};

LogRecord typed(const json& j, const std::string& path, int line) {
  const std::string kind = j["kind"].is_string() ? j["kind"].get<std::string>() : "";
  LogRecord r;
  r.line = line;
  if (kind == "start") r.kind = LogRecord::Kind::start;
  else if (kind == "sample") r.kind = LogRecord::Kind::sample;
  else if (kind == "step") r.kind = LogRecord::Kind::step;
  else if (kind == "end") r.kind = LogRecord::Kind::end;
  else
    throw InputError(Where::at_file(path, line, 1),
                     fmt::format("unknown record kind {}", j["kind"].dump(-1, ' ', false, json::error_handler_t::replace)),
                     "a memplan.monitor/v1 record is a start, sample, step or end");
  const Fields f(j, path, line, kind);
  r.t = f.number("t").value_or(0.0);
  switch (r.kind) {
    case LogRecord::Kind::start: {
      r.source = f.text("source");
      r.sampler = f.text("sampler");
      r.reader = f.text("reader");
      r.device = f.text("device");
      r.command = f.texts("command");
      if (const json* t = f.object("thresholds")) {
        auto fraction = [&](const char* key, double fallback) {
          const double v = f.number(key, t).value_or(fallback);
          if (!(v > 0 && v <= 1)) f.bad(std::string("thresholds.") + key, "a fraction in (0, 1]", (*t)[key]);
          return v;
        };
        r.thresholds.target = fraction("target", r.thresholds.target);
        r.thresholds.warning = fraction("warning", r.thresholds.warning);
        r.thresholds.critical = fraction("critical", r.thresholds.critical);
        r.thresholds.emergency = fraction("emergency", r.thresholds.emergency);
      }
      if (const json* e = f.object("estimate")) r.estimate_peak_bytes = f.integer("peak_bytes", 0, kMaxLogBytes, e, kBytesWhat);
      break;
    }
    case LogRecord::Kind::sample:
      if (const json* devs = f.array("devices"))
        for (const json& d : *devs) {
          if (!d.is_object()) f.bad("devices", "a list of objects", d);
          LogDevice dev;
          dev.index = f.integer("index", 0, 1'000'000, &d).value_or(0);
          dev.name = f.text("name", &d);
          dev.used_bytes = f.bytes("used_bytes", &d);
          dev.total_bytes = f.bytes("total_bytes", &d);
          r.devices.push_back(std::move(dev));
        }
      break;
    case LogRecord::Kind::step:
      r.step = f.integer("step", 0, int64_t{1} << 62).value_or(0);
      r.error = f.text("error");
      r.peak_used_bytes = f.bytes("peak_used_bytes");
      r.capacity_bytes = f.bytes("capacity_bytes");
      r.band = f.band("band");
      r.events = f.texts("events");
      if (const json* l = f.object("leak")) {
        r.leak_rate_bytes_per_step = f.number("rate_bytes_per_step", l).value_or(0.0);
        r.leak_since_step = f.integer("since_step", 0, int64_t{1} << 62, l).value_or(0);
      }
      if (const json* d = f.object("departure")) {
        r.departure_error = f.number("error", d).value_or(0.0);
        r.departure_term = f.text("term", d);
      }
      if (const json* rec = f.object("recommendation")) r.recommendation_flags = f.text("flags", rec);
      break;
    case LogRecord::Kind::end:
      r.exit_code = f.integer("exit_code", -1'000'000, 1'000'000);
      r.peak_bytes = f.bytes("peak_bytes");
      r.capacity_bytes = f.bytes("capacity_bytes");
      r.steps = f.integer("steps", 0, int64_t{1} << 62).value_or(0);
      r.worst_band = f.band("worst_band");
      break;
  }
  return r;
}

}  // namespace

std::optional<LogRecord> parse_monitor_line(const std::string& line, const std::string& path, int number) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return std::nullopt;
  json j;
  try {
    j = json::parse(line);
  } catch (const json::parse_error& e) {
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
  return typed(j, path, number);
}

void no_records(const std::string& path) {
  throw InputError(Where::at_file(path), "the log holds no record", "was the training command started with --log?");
}

}  // namespace memplan::watch
