// A Thrift client wired to a master's processor in memory, over the protocol the master
// serves with (common/master_link/rpc_logging.h's MakeRpcProtocolFactory): the client's calls are
// written into `calls`, a test hands `in` and `out` to the processor, and the replies it
// writes come back to the client from `replies`. For tests of what the per-connection
// processor (master/server/authenticated_processor.h) lets through.
#ifndef MOONCAKE_TESTS_RPC_PIPE_H_
#define MOONCAKE_TESTS_RPC_PIPE_H_

#include <memory>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

#include "MasterService.h"
#include "common/master_link/rpc_logging.h"

namespace mooncake {
namespace testing {

struct RpcPipe {
  std::shared_ptr<apache::thrift::transport::TMemoryBuffer> calls =
      std::make_shared<apache::thrift::transport::TMemoryBuffer>();
  std::shared_ptr<apache::thrift::transport::TMemoryBuffer> replies =
      std::make_shared<apache::thrift::transport::TMemoryBuffer>();
  std::shared_ptr<apache::thrift::protocol::TProtocol> in =
      MakeRpcProtocolFactory()->getProtocol(calls);
  std::shared_ptr<apache::thrift::protocol::TProtocol> out =
      MakeRpcProtocolFactory()->getProtocol(replies);
  rpc::MasterServiceClient client{
      std::make_shared<apache::thrift::protocol::TBinaryProtocol>(replies),
      std::make_shared<apache::thrift::protocol::TBinaryProtocol>(calls)};
};

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_RPC_PIPE_H_
