// memplan check (placeholder while it is written; see the issue).
#include "cli/commands.h"
#include "estimator/error.h"

namespace memplan::cli {

Command register_check(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("check", "(being written)");
  return {app, [] () -> int { throw InternalError("memplan check is not implemented yet"); }};
}

}  // namespace memplan::cli
