#include "daemon/base/descriptor_limit.h"

#include <algorithm>

namespace mooncake {

uint64_t TransferConnectionsWithin(uint64_t descriptor_limit, uint64_t wanted) {
  return std::max<uint64_t>(1, std::min(wanted, descriptor_limit / 2));
}

}  // namespace mooncake
