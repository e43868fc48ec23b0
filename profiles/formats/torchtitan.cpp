// Placeholder until the torchtitan reader lands in this branch.
#include "profiles/formats.h"
namespace memplan::profiles::detail {
void read_torchtitan(const Node&, ReadState&) {}
}  // namespace memplan::profiles::detail
