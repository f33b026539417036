// The master's RPC server (master/server/rpc_server.h), as master/server/main.cc runs it, inside a test:
// on 127.0.0.1 at a port the kernel chose, with the master's protocol
// (MakeRpcProtocolFactory), serving on a thread of its own from construction until
// destruction. So the in-process suites test the server the product uses.
#ifndef MOONCAKE_TESTS_IN_PROCESS_RPC_SERVER_H_
#define MOONCAKE_TESTS_IN_PROCESS_RPC_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include <thrift/TProcessor.h>

#include "master/server/rpc_handler.h"
#include "master/server/rpc_server.h"
#include "tests/harness/cmocka_cpp.h"

namespace mooncake {
namespace testing {

class InProcessRpcServer {
 public:
  explicit InProcessRpcServer(std::shared_ptr<apache::thrift::TProcessorFactory> processors,
                              size_t io_threads = 1, RpcServerOptions options = {})
      : server_(std::move(processors), MakeRpcProtocolFactory(),
                WithDefaults(options, io_threads)) {
    std::string error;
    if (!server_.Listen(&error)) fail_msg("rpc server: %s", error.c_str());
    thread_ = std::thread([this] { server_.Serve(); });
  }
  ~InProcessRpcServer() { Stop(); }
  InProcessRpcServer(const InProcessRpcServer&) = delete;
  InProcessRpcServer& operator=(const InProcessRpcServer&) = delete;

  int port() const { return server_.port(); }
  const RpcServer& server() const { return server_; }
  // Stops the server and waits until Serve returned (its connections closed).
  void Stop() {
    server_.Stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  static RpcServerOptions WithDefaults(RpcServerOptions o, size_t io_threads) {
    o.address = "127.0.0.1";
    o.port = 0;
    o.io_threads = io_threads;
    return o;
  }

  RpcServer server_;
  std::thread thread_;
};

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_IN_PROCESS_RPC_SERVER_H_
