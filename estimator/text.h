// Text that memplan writes for other programs to read, one function per output format: each
// writer of that format passes every string from outside (a model or file name, a Hub id, a path,
// a GPU name from a user's catalog) through it, so no name can end a value, start a key, forge a
// line or make the output invalid. (GitHub workflow commands: cli/cmd_check.cpp, which also stops
// command processing around the text it prints.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace memplan::text {

// Length of the valid UTF-8 sequence at `i` of `t`, or 0 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
size_t utf8_length(const std::string& t, size_t i);

// A YAML 1.2 scalar that reads back as `v`: plain when that is unambiguous (letters, digits and
// _ . / @ + - only, not starting with - or ., and not a number, boolean or null), else
// double-quoted with \" \\ \n \r \t escaped, other control characters as \xNN, and a byte that is
// not UTF-8 as \xNN (read back as U+00NN: YAML text is Unicode, a raw byte cannot be written).
std::string yaml_scalar(const std::string& v);

// A byte count as --gpu-memory and the other size flags take it, its unit stated (a bare number is
// refused there): "6GiB", "512MiB", else "6442450945B".
std::string size_argument(int64_t bytes);

// `v` for one comment line (# ... in YAML or TOML): control characters (a newline would end the
// comment and start a key) and bytes that are not UTF-8 as the visible text \xNN.
std::string comment_text(const std::string& v);

// Text for XML 1.0 (https://www.w3.org/TR/xml/#charsets) content and attribute values: markup
// characters as entities; what no XML document may hold, even as a character reference (C0
// controls but tab, LF and CR, bytes that are not UTF-8, U+FFFE/U+FFFF) as the visible \xNN.
std::string xml_text(const std::string& v);
// One word of a command line to paste into a POSIX shell (bash, zsh, dash) that reads back as `v`
// and runs nothing: as it is when it holds only letters, digits and _ . / : @ % + = , -; else in
// single quotes (a quote inside as '\''); and where it holds a control character, a byte that is
// not UTF-8 or a line-ending or reordering character (which would reach the terminal), as bash's
// and zsh's $'...' with those written \xNN.
std::string shell_word(const std::string& v);
// An integer with thousands separators: 1,235,814,400.
std::string thousands(int64_t n);
// Bytes for people, binary units: "11.72 GiB", "512.0 MiB", "1.50 TiB", "12 B".
std::string gib(int64_t bytes);
// Bytes in GiB with two decimals at any size, for lines that compare sizes: "0.50 GiB", "139.80 GiB".
std::string fixed_gib(int64_t bytes);
// A fraction as a percentage with one decimal: "87.5%".
std::string percent(double fraction);

}  // namespace memplan::text
