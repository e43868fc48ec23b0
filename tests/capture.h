// The standard output of a shell command (popen): what the tests that run real shells and
// interpreters read back.
#pragma once

#include <cstdio>
#include <string>

namespace memplan::testing {

inline std::string capture_output(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

}  // namespace memplan::testing
