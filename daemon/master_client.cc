#include "daemon/master_client.h"

#include <poll.h>

#include <chrono>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "common/error_code.h"
#include "common/master_auth.h"

namespace mooncake {

using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;

namespace {

thread_local std::string g_last_error;

}  // namespace

struct MasterClient::Connection {
  std::shared_ptr<TSocket> socket;
  std::shared_ptr<TFramedTransport> transport;
  std::unique_ptr<rpc::MasterServiceClient> client;
  uint64_t generation = 0;

  // An idle connection has nothing to read; if it is readable the master closed it (or
  // restarted), and using it would cost a failed request.
  bool LooksClosed() const {
    struct pollfd p = {socket->getSocketFD(), POLLIN | POLLRDHUP, 0};
    return poll(&p, 1, 0) != 0;
  }
};

MasterClient::MasterClient(MasterClientOptions options) : options_(std::move(options)) {}

MasterClient::~MasterClient() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : idle_) c->transport->close();
}

std::string MasterClient::LastError() { return g_last_error; }

std::unique_ptr<MasterClient::Connection> MasterClient::Open(std::string* error) {
  auto conn = std::make_unique<Connection>();
  conn->socket = std::make_shared<TSocket>(options_.host, options_.port);
  conn->socket->setConnTimeout(options_.connect_timeout_ms);
  conn->socket->setSendTimeout(options_.rpc_timeout_ms);
  conn->socket->setRecvTimeout(options_.rpc_timeout_ms);
  conn->socket->setNoDelay(true);
  conn->transport = std::make_shared<TFramedTransport>(conn->socket);
  try {
    conn->transport->open();
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
  conn->client =
      std::make_unique<rpc::MasterServiceClient>(std::make_shared<TBinaryProtocol>(conn->transport));
  ErrorCode admitted = AuthenticateToMaster(conn->client.get(), options_.cluster_key.get(), error);
  if (admitted != ErrorCode::OK) {
    *error = "master " + options_.host + ":" + std::to_string(options_.port) + ": " + *error;
    conn->transport->close();
    return nullptr;
  }
  return conn;
}

std::unique_ptr<MasterClient::Connection> MasterClient::Checkout(std::string* error) {
  uint64_t generation;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(options_.rpc_timeout_ms);
    for (;;) {
      while (!idle_.empty()) {
        std::unique_ptr<Connection> conn = std::move(idle_.back());
        idle_.pop_back();
        if (conn->generation == generation_ && !conn->LooksClosed()) return conn;
        conn->transport->close();
        --open_count_;
      }
      if (open_count_ < options_.max_connections) break;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
          open_count_ >= options_.max_connections) {
        *error = "all master connections busy";
        return nullptr;
      }
    }
    ++open_count_;  // reserve the slot before connecting without the lock
    generation = generation_;
  }
  std::unique_ptr<Connection> conn = Open(error);
  if (conn == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    --open_count_;
    cv_.notify_one();
    return nullptr;
  }
  conn->generation = generation;
  return conn;
}

void MasterClient::Checkin(std::unique_ptr<Connection> conn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn->generation == generation_) {
    idle_.push_back(std::move(conn));
  } else {
    conn->transport->close();
    --open_count_;
  }
  cv_.notify_one();
}

void MasterClient::DropIdle() {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  for (auto& c : idle_) c->transport->close();
  open_count_ -= idle_.size();
  idle_.clear();
  cv_.notify_all();
}

ErrorCode MasterClient::Call(const std::function<void(rpc::MasterServiceClient&)>& fn) {
  std::string error;
  std::unique_ptr<Connection> conn = Checkout(&error);
  if (conn == nullptr) {
    g_last_error = error;
    return ErrorCode::RPC_FAIL;
  }
  try {
    fn(*conn->client);
  } catch (const std::exception& e) {
    // The connection may hold half a reply; it cannot be reused.
    g_last_error = e.what();
    conn->transport->close();
    std::lock_guard<std::mutex> lock(mu_);
    --open_count_;
    cv_.notify_one();
    return ErrorCode::RPC_FAIL;
  }
  Checkin(std::move(conn));
  return ErrorCode::OK;
}

namespace {

// The code of an RPC that returns one: RPC_FAIL when the call itself failed.
ErrorCode CodeOf(ErrorCode call, int32_t wire) {
  return call != ErrorCode::OK ? call : FromWire(wire);
}

// A batch RPC's outcome: RPC_FAIL also for a master that miscounts; *out is left empty
// on failure.
template <class T>
ErrorCode ListOf(ErrorCode call, size_t expected, std::vector<T>* out) {
  if (call == ErrorCode::OK && out->size() != expected) call = ErrorCode::RPC_FAIL;
  if (call != ErrorCode::OK) out->clear();
  return call;
}

// Per-key codes as they came on the wire.
std::vector<ErrorCode> CodesOf(const std::vector<int32_t>& wire) {
  std::vector<ErrorCode> codes;
  codes.reserve(wire.size());
  for (int32_t w : wire) codes.push_back(FromWire(w));
  return codes;
}

// A batch RPC that answers a code per key: method (a MasterServiceClient call that fills
// the list it is given first) runs with args, and *out gets the codes, as ListOf checks
// them against expected.
template <class Method, class... Args>
ErrorCode CallForCodes(MasterClient& client, size_t expected, std::vector<ErrorCode>* out,
                       Method method, const Args&... args) {
  std::vector<int32_t> wire;
  ErrorCode call = client.Call([&](rpc::MasterServiceClient& c) { (c.*method)(wire, args...); });
  call = ListOf(call, expected, &wire);
  *out = CodesOf(wire);
  return call;
}

// A count, or the code that came instead of it.
Result<uint64_t> CountOf(ErrorCode call, int64_t wire) {
  if (call != ErrorCode::OK) return call;
  if (wire < 0) return FromWire(wire);
  return static_cast<uint64_t>(wire);
}

// What a change's reply said about other daemons' read caches, stamped now.
void StaleOf(ErrorCode call, std::vector<rpc::CacheHolder>* holders, StaleCaches* stale) {
  stale->received_at = std::chrono::steady_clock::now();
  stale->holders.clear();
  if (call == ErrorCode::OK) stale->holders.swap(*holders);
}

}  // namespace

// ---- wrappers ----

ErrorCode MasterClient::RegisterDaemon(int64_t daemon_id, const std::string& name) {
  int32_t code = 0;
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { code = c.RegisterDaemon(daemon_id, name); });
  return CodeOf(call, code);
}

ErrorCode MasterClient::Heartbeat(int64_t daemon_id, rpc::HeartbeatResult* out) {
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { c.Heartbeat(*out, daemon_id); });
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::MountSegment(const rpc::SegmentInfo& segment) {
  int32_t code = 0;
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { code = c.MountSegment(segment); });
  return CodeOf(call, code);
}

ErrorCode MasterClient::UnmountSegment(int64_t daemon_id, int64_t segment_id) {
  int32_t code = 0;
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { code = c.UnmountSegment(daemon_id, segment_id); });
  return CodeOf(call, code);
}

ErrorCode MasterClient::GetAllSegments(std::vector<rpc::SegmentInfo>* out) {
  return Call([&](rpc::MasterServiceClient& c) { c.GetAllSegments(*out); });
}

ErrorCode MasterClient::DrainSegment(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                                     int32_t max_moves, const std::vector<std::string>& avoided,
                                     rpc::DrainBatchResult* out) {
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) {
    c.DrainSegment(*out, daemon_id, segment_id, cursor, max_moves, avoided);
  });
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::CommitMoves(int64_t daemon_id, int64_t segment_id,
                                    const std::vector<std::string>& keys,
                                    std::vector<ErrorCode>* out) {
  return CallForCodes(*this, keys.size(), out, &rpc::MasterServiceClient::CommitMoves, daemon_id,
                      segment_id, keys);
}

ErrorCode MasterClient::RevokeMoves(int64_t daemon_id, int64_t segment_id,
                                    const std::vector<std::string>& keys,
                                    std::vector<ErrorCode>* out) {
  return CallForCodes(*this, keys.size(), out, &rpc::MasterServiceClient::RevokeMoves, daemon_id,
                      segment_id, keys);
}

ErrorCode MasterClient::PutStart(int64_t writer, const std::string& key, int64_t size,
                                 const rpc::ReplicateConfig& config, rpc::PutStartResult* out) {
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { c.PutStart(*out, writer, key, size, config); });
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::PutEnd(int64_t writer, const std::string& key, int64_t checksum) {
  int32_t code = 0;
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { code = c.PutEnd(writer, key, checksum); });
  return CodeOf(call, code);
}

ErrorCode MasterClient::PutRevoke(int64_t writer, const std::string& key) {
  int32_t code = 0;
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { code = c.PutRevoke(writer, key); });
  return CodeOf(call, code);
}

ErrorCode MasterClient::UpsertStart(int64_t writer, const std::string& key, int64_t size,
                                    const rpc::ReplicateConfig& config,
                                    rpc::PutStartResult* out) {
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { c.UpsertStart(*out, writer, key, size, config); });
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::UpsertEnd(int64_t writer, const std::string& key, int64_t checksum,
                                  StaleCaches* stale) {
  rpc::ChangeResult result;
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { c.UpsertEnd(result, writer, key, checksum); });
  StaleOf(call, &result.holders, stale);
  return CodeOf(call, static_cast<int32_t>(result.code));
}

ErrorCode MasterClient::UpsertRevoke(int64_t writer, const std::string& key) {
  int32_t code = 0;
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { code = c.UpsertRevoke(writer, key); });
  return CodeOf(call, code);
}

ErrorCode MasterClient::BatchPutStart(int64_t writer, const std::vector<std::string>& keys,
                                      const std::vector<int64_t>& sizes,
                                      const rpc::ReplicateConfig& config,
                                      std::vector<rpc::PutStartResult>* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { c.BatchPutStart(*out, writer, keys, sizes, config); });
  return ListOf(call, keys.size(), out);
}

ErrorCode MasterClient::BatchPutEnd(int64_t writer, const std::vector<std::string>& keys,
                                    std::vector<ErrorCode>* out,
                                    const std::vector<int64_t>& checksums) {
  return CallForCodes(*this, keys.size(), out, &rpc::MasterServiceClient::BatchPutEnd, writer, keys,
                      checksums);
}

ErrorCode MasterClient::BatchPutRevoke(int64_t writer, const std::vector<std::string>& keys,
                                       std::vector<ErrorCode>* out) {
  return CallForCodes(*this, keys.size(), out, &rpc::MasterServiceClient::BatchPutRevoke, writer,
                      keys);
}

ErrorCode MasterClient::GetReplicaList(const std::string& key, int64_t reader,
                                       rpc::ReplicaListResult* out) {
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { c.GetReplicaList(*out, key, reader); });
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::BatchGetReplicaList(const std::vector<std::string>& keys, int64_t reader,
                                            std::vector<rpc::ReplicaListResult>* out) {
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { c.BatchGetReplicaList(*out, keys, reader); });
  return ListOf(call, keys.size(), out);
}

Result<bool> MasterClient::ExistKey(const std::string& key) {
  int32_t found = 0;
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { found = c.ExistKey(key); });
  if (call != ErrorCode::OK) return call;
  if (found == 0 || found == 1) return found == 1;
  return FromWire(found);
}

ErrorCode MasterClient::BatchExistKey(const std::vector<std::string>& keys,
                                      std::vector<int32_t>* out) {
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { c.BatchExistKey(*out, keys); });
  return ListOf(call, keys.size(), out);
}

ErrorCode MasterClient::Remove(const std::string& key, bool force, int64_t caller,
                              StaleCaches* stale) {
  rpc::ChangeResult result;
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { c.Remove(result, key, force, caller); });
  StaleOf(call, &result.holders, stale);
  return CodeOf(call, static_cast<int32_t>(result.code));
}

ErrorCode MasterClient::BatchRemove(const std::vector<std::string>& keys, bool force,
                                    int64_t caller, std::vector<ErrorCode>* out,
                                    StaleCaches* stale) {
  rpc::BatchChangeResult result;
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { c.BatchRemove(result, keys, force, caller); });
  // A master that miscounts is as good as no answer, but the holders it named are real.
  StaleOf(call, &result.holders, stale);
  call = ListOf(call, keys.size(), &result.codes);
  *out = CodesOf(result.codes);
  return call;
}

Result<uint64_t> MasterClient::RemoveByRegex(const std::string& pattern, bool force,
                                             int64_t caller, const std::string& tenant,
                                             StaleCaches* stale) {
  rpc::ChangeResult result;
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) {
    c.RemoveByRegex(result, pattern, force, caller, tenant);
  });
  StaleOf(call, &result.holders, stale);
  return CountOf(call, result.code);
}

Result<uint64_t> MasterClient::RemoveAll(bool force, int64_t caller, const std::string& tenant,
                                         StaleCaches* stale) {
  rpc::ChangeResult result;
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { c.RemoveAll(result, force, caller, tenant); });
  StaleOf(call, &result.holders, stale);
  return CountOf(call, result.code);
}

// ---- the SSD tier ----

ErrorCode MasterClient::FetchOffloads(int64_t daemon_id, int32_t max_tasks,
                                      rpc::OffloadTasksResult* out) {
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { c.FetchOffloads(*out, daemon_id, max_tasks); });
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::ReportOffloads(int64_t daemon_id, int64_t disk_segment_id,
                                       const std::vector<std::string>& keys,
                                       const std::vector<int64_t>& replica_ids,
                                       const std::vector<ErrorCode>& codes,
                                       std::vector<ErrorCode>* out) {
  std::vector<int32_t> wire_codes;
  wire_codes.reserve(codes.size());
  for (ErrorCode code : codes) wire_codes.push_back(ToInt(code));
  return CallForCodes(*this, keys.size(), out, &rpc::MasterServiceClient::ReportOffloads, daemon_id,
                      disk_segment_id, keys, replica_ids, wire_codes);
}

ErrorCode MasterClient::RegisterDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                             const std::vector<rpc::DiskObject>& objects,
                                             std::vector<ErrorCode>* out) {
  return CallForCodes(*this, objects.size(), out, &rpc::MasterServiceClient::RegisterDiskReplicas,
                      daemon_id, disk_segment_id, objects);
}

ErrorCode MasterClient::DropDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                         const std::vector<std::string>& keys,
                                         std::vector<ErrorCode>* out) {
  return CallForCodes(*this, keys.size(), out, &rpc::MasterServiceClient::DropDiskReplicas,
                      daemon_id, disk_segment_id, keys);
}

// Promotion on hit.

ErrorCode MasterClient::PromoteStart(int64_t writer, const std::string& key,
                                     int64_t disk_replica_id, rpc::PutStartResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { c.PromoteStart(*out, writer, key, disk_replica_id); });
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::PromoteEnd(int64_t writer, const std::string& key, bool ok) {
  int32_t code = 0;
  ErrorCode call = Call([&](rpc::MasterServiceClient& c) { code = c.PromoteEnd(writer, key, ok); });
  return CodeOf(call, code);
}

}  // namespace mooncake
