// Rendering of input errors and warnings, and the failed-check reporter.
#include "estimator/error.h"

#include "estimator/checked.h"

#include <fmt/format.h>

namespace memplan {

std::string Where::str() const {
  if (!file.empty()) {
    if (line > 0 && col > 0) return fmt::format("{}:{}:{}", file, line, col);
    if (line > 0) return fmt::format("{}:{}", file, line);
    return file;
  }
  return flag;
}

InputError::InputError(Where where, const std::string& message, std::string hint)
    : std::runtime_error(message), where_(std::move(where)), message_(message), hint_(std::move(hint)) {}

static std::string render_diag(const Where& where, const char* kind, const std::string& message,
                               const std::string& hint) {
  std::string out;
  if (!where.file.empty()) out = fmt::format("{}: {}: {}", where.str(), kind, message);
  else if (!where.flag.empty()) out = fmt::format("{}: {}: {}", kind, where.flag, message);
  else out = fmt::format("{}: {}", kind, message);
  if (!hint.empty()) out += fmt::format("\nhint: {}", hint);
  return out;
}

std::string InputError::render() const { return render_diag(where_, "error", message_, hint_); }
std::string Warning::render() const { return render_diag(where, "warning", message, hint); }

void check_failed(const char* file, int line, const char* expr, const std::string& msg) {
  throw InternalError(fmt::format("{}:{}: internal check failed: {} ({})", file, line, expr, msg));
}

}  // namespace memplan

namespace memplan {

void too_large(const char* what) {
  throw InputError(Where{}, fmt::format("{} is too large to count in 64-bit integers (over 9.2e18)", what),
                   "an input is far outside any real setup; check the sizes, batch and parallel degrees");
}

}  // namespace memplan
