#include "cli/master_snapshot.h"

#include <thrift/TOutput.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "MasterService.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "common/auth/cluster_key.h"
#include "common/base/master_address.h"
#include "common/master_link/master_auth.h"

namespace mooncake {
namespace cli {
namespace {

// A snapshot of a large master takes a while (docs/durability.md); past this the CLI stops
// waiting and says so (the master goes on).
constexpr auto kWaitLimit = std::chrono::minutes(10);
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// The end of the line for a master that cannot be reached: the fix.
const char* kHint = " (is it running? --master or MOONCAKE_MASTER name another)";

nlohmann::json ToJson(const rpc::SnapshotResult& r) {
  return {{"code", r.code},
          {"name", r.name},
          {"sequence", r.sequence},
          {"pause_us", r.pause_us},
          {"duration_ms", r.duration_ms},
          {"bytes", r.bytes},
          {"objects", r.objects},
          {"error", r.error},
          {"running", r.running}};
}

void PrintResult(const rpc::SnapshotResult& r, bool json) {
  if (json) {
    PrintJson(ToJson(r));
    return;
  }
  if (r.running) {
    std::cout << "snapshot " << r.name << " started (sequence " << r.sequence << ")\n";
    return;
  }
  PrintFields(std::cout, {{"snapshot", r.name},
                          {"sequence", std::to_string(r.sequence)},
                          {"objects", std::to_string(r.objects)},
                          {"bytes", HumanSize(static_cast<uint64_t>(r.bytes))},
                          {"duration", HumanMillis(r.duration_ms)},
                          {"pause", HumanMillis(r.pause_us / 1000)}});
}

}  // namespace

int RunSnapshotTake(const Invocation& inv) {
  using apache::thrift::protocol::TBinaryProtocol;
  using apache::thrift::transport::TFramedTransport;
  using apache::thrift::transport::TSocket;
  const GlobalOptions& g = inv.global;
  MasterAddress master;
  std::string why;
  if (!ParseMasterAddress(g.master, &master, &why) || master.via_etcd()) {
    PrintError("snapshot needs --master HOST:PORT of the leader, not \"" + g.master + "\"");
    return kExitUsage;
  }
  const std::string& host = master.host;
  const int port = master.port;
  // Thrift prints its own line for a refused connection; the CLI says it once, its way.
  apache::thrift::GlobalOutput.setOutputFunction([](const char*) {});
  ClusterKey key;
  if (!g.cluster_key_file.empty()) {
    std::string error;
    Result<ClusterKey> loaded = ClusterKey::Load(g.cluster_key_file, &error);
    if (!loaded.ok()) {
      PrintError("--cluster_key_file: " + error);
      return kExitError;
    }
    key = loaded.value();
  }
  rpc::SnapshotResult started;
  rpc::SnapshotResult result;
  try {
    auto socket = std::make_shared<TSocket>(host, port);
    socket->setConnTimeout(3000);
    socket->setRecvTimeout(30000);
    socket->setSendTimeout(30000);
    auto transport = std::make_shared<TFramedTransport>(socket);
    try {
      transport->open();
    } catch (const std::exception& e) {
      PrintError("cannot reach the master at " + g.master + ": " + e.what() + kHint);
      return kExitUnreachable;
    }
    rpc::MasterServiceClient client(std::make_shared<TBinaryProtocol>(transport));
    std::string error;
    ErrorCode auth =
        AuthenticateToMaster(&client, g.cluster_key_file.empty() ? nullptr : &key, &error);
    if (auth != ErrorCode::OK) {
      PrintError("master " + g.master + ": " + CodeText(ToInt(auth)) + ": " + error);
      return auth == ErrorCode::RPC_FAIL ? kExitUnreachable : kExitError;
    }
    client.Snapshot(started);
    result = started;
    auto deadline = std::chrono::steady_clock::now() + kWaitLimit;
    // It answers once forked; the outcome is LastSnapshot's once that names this one.
    while (!inv.Has("no_wait") && result.code == 0 && result.running &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(kPollInterval);
      client.LastSnapshot(result);
      if (result.name != started.name) result.running = true;  // an older one: keep waiting
    }
    transport->close();
  } catch (const std::exception& e) {
    ErrorCode refusal = RefusalCode(e.what());
    if (refusal != ErrorCode::OK) {
      PrintError("master " + g.master + ": " + CodeText(ToInt(refusal)) +
                 (refusal == ErrorCode::UNAUTHENTICATED
                      ? " (give --cluster_key_file, or MOONCAKE_CLUSTER_KEY_FILE)"
                      : ""));
      return kExitError;
    }
    PrintError("lost the master at " + g.master + ": " + e.what() + kHint);
    return kExitUnreachable;
  }
  if (result.code != 0) {
    PrintError("snapshot: " + CodeText(result.code) +
               (result.error.empty() ? "" : ": " + result.error));
    return kExitError;
  }
  if (result.running && !inv.Has("no_wait")) {
    PrintError("snapshot " + result.name +
               " still running after 10 minutes; "
               "see mooncake-cli snapshot status");
    return kExitError;
  }
  PrintResult(result, g.json);
  return kExitOk;
}

}  // namespace cli
}  // namespace mooncake
