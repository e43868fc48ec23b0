// Placeholder until the lightning reader lands in this branch.
#include "profiles/formats.h"
namespace memplan::profiles::detail {
void read_lightning(const Node&, ReadState&) {}
}  // namespace memplan::profiles::detail
