// The memplan command line. main() calls run(); tests call it with captured streams.
// Exit codes: 0 success / fits, 1 does not fit / over budget, 2 invalid input or usage,
// 3 internal error.
#pragma once

#include <iosfwd>

namespace memplan::cli {

constexpr int kExitOk = 0;
constexpr int kExitDoesNotFit = 1;
constexpr int kExitInvalid = 2;
constexpr int kExitInternal = 3;

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace memplan::cli
