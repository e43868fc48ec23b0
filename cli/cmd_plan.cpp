// memplan plan (placeholder while it is written; see the issue).
#include "cli/commands.h"
#include "estimator/error.h"

namespace memplan::cli {

Command register_plan(CLI::App& root, Io io) {
  auto* app = root.add_subcommand("plan", "(being written)");
  return {app, [] () -> int { throw InternalError("memplan plan is not implemented yet"); }};
}

}  // namespace memplan::cli
