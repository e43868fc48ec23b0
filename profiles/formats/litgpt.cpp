// Placeholder until the litgpt reader lands in this branch.
#include "profiles/formats.h"
namespace memplan::profiles::detail {
void read_litgpt(const Node&, ReadState&) {}
}  // namespace memplan::profiles::detail
