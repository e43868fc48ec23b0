// The memplan executable: everything lives in memplan::cli::run.
#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) { return memplan::cli::run(argc, argv, std::cout, std::cerr); }
