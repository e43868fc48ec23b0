#include "estimator/text.h"

#include <cstdio>

#include <fmt/format.h>

namespace memplan::text {

size_t utf8_length(const std::string& t, size_t i) {
  const auto b = [&](size_t k) { return k < t.size() ? static_cast<unsigned char>(t[k]) : 0u; };
  const unsigned c = b(i);
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return b(k) >= lo && b(k) <= hi; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c == 0xE0) return cont(i + 1, 0xA0) && cont(i + 2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(i + 1) && cont(i + 2) ? 3 : 0;
  if (c == 0xED) return cont(i + 1, 0x80, 0x9F) && cont(i + 2) ? 3 : 0;
  if (c == 0xF0) return cont(i + 1, 0x90) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c == 0xF4) return cont(i + 1, 0x80, 0x8F) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  return 0;
}

namespace {

std::string hex_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", c);
  return buf;
}

bool plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '/' ||
         c == '@' || c == '+' || c == '-';
}

// What a YAML 1.1 or 1.2 reader (yaml-cpp, PyYAML) would take for something other than a string.
bool looks_typed(const std::string& v) {
  std::string l;
  for (char c : v) l += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (const char* w : {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", ".nan"})
    if (l == w) return true;
  // Numbers: digits with at most . _ + - e between them (1, 1.5, 1e5, 0x1F is not plain-safe anyway).
  bool digit = false;
  for (char c : l) {
    if (c >= '0' && c <= '9') digit = true;
    else if (c != '.' && c != '_' && c != '+' && c != '-' && c != 'e') return false;
  }
  return digit;
}

// The code point of the valid UTF-8 sequence of `len` bytes at `i`.
uint32_t code_point(const std::string& v, size_t i, size_t len) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(v[i + k])); };
  if (len == 2) return (b(0) & 0x1F) << 6 | (b(1) & 0x3F);
  if (len == 3) return (b(0) & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
  return (b(0) & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 | (b(3) & 0x3F);
}

// Characters that end a line for some reader although they are not ASCII (YAML 1.1, which PyYAML
// reads, breaks lines at NEL U+0085, LINE SEPARATOR U+2028 and PARAGRAPH SEPARATOR U+2029:
// https://yaml.org/spec/1.1/#id868518), and the bidirectional controls that make text display in
// another order than it reads (U+061C, U+200E-F, U+202A-E, U+2066-9: CVE-2021-42574).
bool breaks_or_reorders(uint32_t cp) {
  return cp == 0x85 || cp == 0x2028 || cp == 0x2029 || cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// The walk every escaper shares: a valid multi-byte UTF-8 character is kept (unless `keep` says
// the format cannot hold it: then the visible \uXXXX where `as_code_point`, else its bytes as
// \xNN), a byte that starts none is written \xNN, and each ASCII byte is written by `ascii(c, out)`.
template <class Ascii, class Keep>
std::string escape(const std::string& v, Ascii ascii, Keep keep, bool as_code_point = false) {
  std::string out;
  for (size_t i = 0; i < v.size();) {
    const auto c = static_cast<unsigned char>(v[i]);
    const size_t len = utf8_length(v, i);
    if (len == 1) ascii(c, out);
    else if (len > 1 && keep(i, len)) out.append(v, i, len);
    else if (len > 1 && as_code_point) out += fmt::format("\\u{:04X}", code_point(v, i, len));
    else {
      out += hex_byte(c);
      i += 1;
      continue;
    }
    i += len;
  }
  return out;
}
constexpr auto keep_all = [](size_t, size_t) { return true; };

}  // namespace

std::string yaml_scalar(const std::string& v) {
  bool plain = !v.empty() && v[0] != '-' && v[0] != '.' && !looks_typed(v);
  for (char c : v) plain = plain && plain_char(c);
  if (plain) return v;
  const auto ascii = [](unsigned char c, std::string& out) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) out += hex_byte(c);
        else out += static_cast<char>(c);
    }
  };
  // \uXXXX is a YAML escape in double quotes (1.1 and 1.2): the line-ending and reordering
  // characters are written so, the rest as they are.
  const auto keep = [&v](size_t i, size_t len) { return !breaks_or_reorders(code_point(v, i, len)); };
  return "\"" + escape(v, ascii, keep, /*as_code_point=*/true) + "\"";
}

std::string shell_word(const std::string& v) {
  bool plain = !v.empty();
  for (char c : v)
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '/' ||
                      c == ':' || c == '@' || c == '%' || c == '+' || c == '=' || c == ',' || c == '-');
  if (plain) return v;
  bool visible = true;  // nothing that would reach the terminal as a control
  for (size_t i = 0; i < v.size() && visible;) {
    const auto c = static_cast<unsigned char>(v[i]);
    const size_t len = utf8_length(v, i);
    visible = len > 0 && (len > 1 ? !breaks_or_reorders(code_point(v, i, len)) : c >= 0x20 && c != 0x7F);
    i += len > 0 ? len : 1;
  }
  if (visible) {
    std::string out = "'";
    for (char c : v) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }
  std::string out = "$'";
  for (size_t i = 0; i < v.size();) {
    const size_t len = utf8_length(v, i);
    if (len > 1 && !breaks_or_reorders(code_point(v, i, len))) {
      out.append(v, i, len);
      i += len;
      continue;
    }
    const size_t n = len > 0 ? len : 1;  // each byte of a control, a break or a stray byte
    for (size_t k = 0; k < n; ++k) {
      const auto b = static_cast<unsigned char>(v[i + k]);
      if (n == 1 && b >= 0x20 && b != 0x7F && b < 0x80) out += b == '\'' ? std::string("\\'") : b == '\\' ? std::string("\\\\") : std::string(1, static_cast<char>(b));
      else out += hex_byte(b);
    }
    i += n;
  }
  return out + "'";
}

std::string comment_text(const std::string& v) {
  const auto ascii = [](unsigned char c, std::string& out) {
    if (c < 0x20 || c == 0x7F) out += hex_byte(c);
    else out += static_cast<char>(c);
  };
  const auto keep = [&v](size_t i, size_t len) { return !breaks_or_reorders(code_point(v, i, len)); };
  return escape(v, ascii, keep, /*as_code_point=*/true);
}

std::string xml_text(const std::string& v) {
  const auto ascii = [](unsigned char c, std::string& out) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') out += hex_byte(c);
        else out += static_cast<char>(c);
    }
  };
  // U+FFFE and U+FFFF are UTF-8 but no XML character: their bytes as \xNN.
  const auto keep = [&v](size_t i, size_t len) {
    return !(len == 3 && static_cast<unsigned char>(v[i]) == 0xEF && static_cast<unsigned char>(v[i + 1]) == 0xBF &&
             static_cast<unsigned char>(v[i + 2]) >= 0xBE);
  };
  return escape(v, ascii, keep);
}

std::string thousands(int64_t n) {
  const uint64_t magnitude = n < 0 ? uint64_t{0} - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);  // INT64_MIN too
  std::string s = std::to_string(magnitude);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return n < 0 ? "-" + s : s;
}

std::string size_argument(int64_t bytes) {
  constexpr int64_t kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30;
  if (bytes > 0 && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + "GiB";
  if (bytes > 0 && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + "MiB";
  return std::to_string(bytes) + "B";
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

std::string fixed_gib(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024)); }

std::string gib(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double a = b < 0 ? -b : b;
  if (a >= 1024.0 * 1024 * 1024 * 1024) return fmt::format("{:.2f} TiB", b / (1024.0 * 1024 * 1024 * 1024));
  if (a >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (a >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (a >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace memplan::text
