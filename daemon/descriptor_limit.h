// The transfer port's share of the process's descriptor limit (common/base/descriptor_limit.h
// raises the limit itself): a daemon holds the transfer port's connections, the pooled
// ones to other daemons and to the master, and the applications' connections and pools.
#ifndef MOONCAKE_DAEMON_DESCRIPTOR_LIMIT_H_
#define MOONCAKE_DAEMON_DESCRIPTOR_LIMIT_H_

#include <cstdint>

#include "common/base/descriptor_limit.h"

namespace mooncake {

// The transfer port's connection cap that fits a descriptor limit: wanted, or half the
// limit when that is less (the other half is for everything else the daemon opens).
uint64_t TransferConnectionsWithin(uint64_t descriptor_limit, uint64_t wanted);

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_DESCRIPTOR_LIMIT_H_
