// Thrift's own messages (server start and stop, transport errors it handles itself) go
// to stderr by default; the processes route them into the log at debug level instead.
#ifndef MOONCAKE_COMMON_RPC_LOGGING_H_
#define MOONCAKE_COMMON_RPC_LOGGING_H_

namespace mooncake {

// Routes apache::thrift::GlobalOutput to MC_LOG_DEBUG ("thrift: ..."). Part of mc_rpc,
// which links Thrift.
void RouteThriftOutputToDebugLog();

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_RPC_LOGGING_H_
