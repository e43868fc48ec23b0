// Placeholder until the nemo reader lands in this branch.
#include "profiles/formats.h"
namespace memplan::profiles::detail {
void read_nemo(const Node&, ReadState&) {}
}  // namespace memplan::profiles::detail
