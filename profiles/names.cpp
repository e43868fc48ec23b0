// Small text helpers shared by the readers and the CLI: size strings ("24GiB") and
// did-you-mean matching (Levenshtein distance plus substrings).
#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "profiles/profiles.h"
#include "profiles/detail.h"
#include "profiles/reader.h"

namespace memplan::profiles {
using detail::lower;

namespace {

// Bytes per unit. One letter means binary ("80G" is how nvidia-smi users write GiB); "GB" is
// decimal, as disk and marketing sizes are.
std::optional<long double> unit_bytes(const std::string& unit) {
  static const std::pair<const char*, long double> kUnits[] = {
      {"", 1.0L},     {"b", 1.0L},
      {"k", 0x1p10L}, {"kib", 0x1p10L}, {"kb", 1e3L},
      {"m", 0x1p20L}, {"mib", 0x1p20L}, {"mb", 1e6L},
      {"g", 0x1p30L}, {"gib", 0x1p30L}, {"gb", 1e9L},
      {"t", 0x1p40L}, {"tib", 0x1p40L}, {"tb", 1e12L},
  };
  for (const auto& [name, bytes] : kUnits)
    if (unit == name) return bytes;
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> parse_size(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return std::nullopt;
  const std::string t = text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i == 0) return std::nullopt;  // also rejects signs: sizes are never negative
  bool fraction = false;
  if (i < t.size() && t[i] == '.') {
    fraction = true;
    const size_t dot = i++;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    if (i == dot + 1) return std::nullopt;
  }
  const std::string number = t.substr(0, i);
  while (i < t.size() && t[i] == ' ') ++i;
  const std::string unit = lower(t.substr(i));
  const auto bytes = unit_bytes(unit);
  if (!bytes || (fraction && *bytes == 1.0L) || number.size() > 30) return std::nullopt;
  // long double holds every integer below 2^64 exactly, so whole byte counts round-trip.
  const long double v = std::strtold(number.c_str(), nullptr) * *bytes;
  if (!(v <= 0x1p62L)) return std::nullopt;
  return static_cast<int64_t>(std::llroundl(v));
}

std::optional<InputError> bare_size_error(const std::string& text, const Where& where) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const auto bare = [&](char c) { return digit(c) || c == '.' || c == '_' || c == ' ' || c == 'e' || c == 'E' || c == '+'; };
  if (std::none_of(text.begin(), text.end(), digit) || !std::all_of(text.begin(), text.end(), bare)) return std::nullopt;
  const std::string message = fmt::format("'{}' has no unit (it would be {} bytes)", clip(text), clip(text));
  const double gb = static_cast<double>(std::strtold(text.c_str(), nullptr) / 1e9L);
  const double gib = static_cast<double>(std::strtold(text.c_str(), nullptr) / 0x1p30L);
  if (text.find_first_of("eE") != std::string::npos)  // 24e9: say it in both units
    return InputError(where, message, fmt::format("write the unit: {0:.4g}GB ({0:.4g} x 10^9 bytes) or {1:.4g}GiB ({1:.4g} x 2^30 bytes)", gb, gib));
  if (std::all_of(text.begin(), text.end(), digit) && text.size() >= 7 && text.size() <= 19)  // a byte count (older memplan files wrote these)
    return InputError(where, message, fmt::format("write the unit: {}B to keep it in bytes, or {:.4g}GiB ({:.4g}GB)", text, gib, gb));
  return InputError(where, message,
                    fmt::format("write the unit: {0}GiB ({0} x 2^30 bytes, what nvidia-smi's MiB add up to) or {0}GB ({0} x "
                                "10^9 bytes, a vendor's spec sheet)",
                                clip(text)));
}

int64_t read_size(const std::string& text, const Where& where, const std::string& what) {
  if (auto bare = bare_size_error(text, where)) throw *bare;
  const auto bytes = parse_size(text);
  if (!bytes)
    throw InputError(where, fmt::format("cannot read '{}' as {}", clip(text), what), "write a size with its unit, like 12GiB, 24GB or 512MiB");
  if (*bytes <= 0) throw InputError(where, fmt::format("{} must be above 0 (got '{}')", what, clip(text)), "a size like 12GiB");
  return *bytes;
}

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates, size_t max) {
  // A typo is up to a third of the word (at least 1, at most 3 edits); a word of 3 or more
  // characters inside a candidate (or the reverse) counts too: "mistral" -> "mistral-7b".
  if (word.size() > detail::kMaxSuggestLength) return {};  // no name is that long; and edit distance is quadratic
  const std::string w = lower(word);
  const int limit = std::clamp(static_cast<int>(w.size()) / 3, 1, 3);
  std::vector<std::pair<int, std::string>> scored;
  for (const auto& c : candidates) {
    const std::string lc = lower(c);
    const int d = edit_distance(w, lc);
    const bool inside = (w.size() >= 3 && lc.find(w) != std::string::npos) ||
                        (lc.size() >= 3 && w.find(lc) != std::string::npos);
    if (d <= limit || inside) scored.emplace_back(d, c);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [d, c] : scored)
    if (out.size() < max && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

namespace detail {

// "RTX 3090", "rtx_3090" and "Rtx-3090" all read "rtx-3090".
std::string normalise_name(const std::string& name) {
  std::string out;
  for (char c : lower(name)) {
    if (c == ' ' || c == '_') c = '-';
    if (c == '-' && (out.empty() || out.back() == '-')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::vector<std::string> suggest_among(const std::string& word, const std::vector<Named>& presets) {
  std::vector<std::string> spellings, owners;
  for (const auto& p : presets) {
    spellings.push_back(normalise_name(p.name));
    owners.push_back(p.name);
    for (const auto& a : p.aliases) {
      spellings.push_back(normalise_name(a));
      owners.push_back(p.name);
    }
  }
  std::vector<std::string> out;
  for (const auto& hit : nearest(normalise_name(word), spellings, spellings.size())) {
    const auto i = static_cast<size_t>(std::find(spellings.begin(), spellings.end(), hit) - spellings.begin());
    if (std::find(out.begin(), out.end(), owners[i]) == out.end()) out.push_back(owners[i]);
    if (out.size() == 3) break;
  }
  return out;
}

std::string did_you_mean(const std::vector<std::string>& suggestions, const char* lister, const char* otherwise) {
  if (suggestions.empty()) return fmt::format("{} lists the presets; {}", lister, otherwise);
  return fmt::format("did you mean '{}'? ({} lists the presets)", suggestions.front(), lister);
}

}  // namespace detail
}  // namespace memplan::profiles
