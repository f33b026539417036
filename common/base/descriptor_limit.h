// The process's descriptor limit (RLIMIT_NOFILE), which every socket counts against. A
// server started with the common soft limit of 1024 would run out well before its own
// connection caps, and accept() would fail with EMFILE instead of a cap closing a
// connection with a reason. The master and the daemon poll (epoll, poll; never select),
// so descriptors above 1024 are no hazard: both raise the soft limit at start.
#ifndef MOONCAKE_COMMON_DESCRIPTOR_LIMIT_H_
#define MOONCAKE_COMMON_DESCRIPTOR_LIMIT_H_

#include <cstdint>
#include <string>

namespace mooncake {

// Raises the soft limit to the hard limit when it is lower. Returns the soft limit now in
// force; *message says what it is and whether it was raised, for the start-up log.
uint64_t RaiseDescriptorLimit(std::string* message);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_DESCRIPTOR_LIMIT_H_
