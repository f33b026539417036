// The process's descriptor limit (RLIMIT_NOFILE), which every socket counts against: the
// transfer port's connections, the pooled ones to other daemons and to the master, and the
// applications' connections and pools. A daemon started with the common soft limit of
// 1024 would run out well before the transfer port's own cap, and accept() would fail
// with EMFILE instead of a cap refusing with a reason. The daemon polls (never select),
// so descriptors above 1024 are no hazard.
#ifndef MOONCAKE_DAEMON_DESCRIPTOR_LIMIT_H_
#define MOONCAKE_DAEMON_DESCRIPTOR_LIMIT_H_

#include <cstdint>
#include <string>

namespace mooncake {

// Raises the soft limit to the hard limit when it is lower. Returns the soft limit now in
// force; *message says what it is and whether it was raised, for the start-up log.
uint64_t RaiseDescriptorLimit(std::string* message);

// The transfer port's connection cap that fits a descriptor limit: wanted, or half the
// limit when that is less (the other half is for everything else the daemon opens).
uint64_t TransferConnectionsWithin(uint64_t descriptor_limit, uint64_t wanted);

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_DESCRIPTOR_LIMIT_H_
