// memplan-measure, the companion memplan runs for measure and calibrate (the only executable
// linked with LibTorch): everything lives in memplan::cli::run_companion.
#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) { return memplan::cli::run_companion(argc, argv, std::cout, std::cerr); }
