// The memplan command line. main() calls run(); tests call it with captured streams.
// Exit codes: 0 success / fits, 1 does not fit / over budget, 2 invalid input or usage,
// 3 internal error.
#pragma once

#include <iosfwd>
#include <string>

namespace memplan::cli {

constexpr int kExitOk = 0;
constexpr int kExitDoesNotFit = 1;
constexpr int kExitInvalid = 2;
constexpr int kExitInternal = 3;

// memplan: every command; measure and calibrate run the companion (find_companion()).
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);
// memplan-measure, the companion linked with LibTorch: measure and calibrate
// (argv: memplan-measure measure|calibrate FLAGS...). cmd_measure.cpp.
int run_companion(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// The companion executable memplan runs for measure and calibrate, as git finds its
// sub-commands: in $MEMPLAN_EXEC_PATH when set (and only there), else beside the running
// executable, else in <its folder>/../libexec/memplan (an installed memplan: bin/ and libexec/
// under one prefix). "" when none.
std::string find_companion();

}  // namespace memplan::cli
