#include "daemon/master_client.h"

#include <poll.h>

#include <chrono>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "common/error_code.h"

namespace mooncake {

using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;

namespace {

thread_local std::string g_last_error;

constexpr int32_t kRpcFail = static_cast<int32_t>(ErrorCode::RPC_FAIL);

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

int32_t MasterClient::Call(const std::function<void(rpc::MasterServiceClient&)>& fn) {
  std::string error;
  std::unique_ptr<Connection> conn = Checkout(&error);
  if (conn == nullptr) {
    g_last_error = error;
    return kRpcFail;
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
    return kRpcFail;
  }
  Checkin(std::move(conn));
  return 0;
}

// ---- wrappers ----

int32_t MasterClient::RegisterDaemon(int64_t daemon_id, const std::string& name) {
  int32_t code = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { code = c.RegisterDaemon(daemon_id, name); });
  return rc != 0 ? rc : code;
}

int32_t MasterClient::Heartbeat(int64_t daemon_id, rpc::HeartbeatResult* out) {
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { c.Heartbeat(*out, daemon_id); });
  return rc != 0 ? rc : out->code;
}

int32_t MasterClient::MountSegment(const rpc::SegmentInfo& segment) {
  int32_t code = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { code = c.MountSegment(segment); });
  return rc != 0 ? rc : code;
}

int32_t MasterClient::UnmountSegment(int64_t daemon_id, int64_t segment_id) {
  int32_t code = 0;
  int32_t rc =
      Call([&](rpc::MasterServiceClient& c) { code = c.UnmountSegment(daemon_id, segment_id); });
  return rc != 0 ? rc : code;
}

int32_t MasterClient::GetAllSegments(std::vector<rpc::SegmentInfo>* out) {
  return Call([&](rpc::MasterServiceClient& c) { c.GetAllSegments(*out); });
}

int32_t MasterClient::PutStart(int64_t writer, const std::string& key, int64_t size,
                               const rpc::ReplicateConfig& config, rpc::PutStartResult* out) {
  int32_t rc =
      Call([&](rpc::MasterServiceClient& c) { c.PutStart(*out, writer, key, size, config); });
  return rc != 0 ? rc : out->code;
}

int32_t MasterClient::PutEnd(int64_t writer, const std::string& key, int64_t checksum) {
  int32_t code = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { code = c.PutEnd(writer, key, checksum); });
  return rc != 0 ? rc : code;
}

int32_t MasterClient::PutRevoke(int64_t writer, const std::string& key) {
  int32_t code = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { code = c.PutRevoke(writer, key); });
  return rc != 0 ? rc : code;
}

int32_t MasterClient::UpsertStart(int64_t writer, const std::string& key, int64_t size,
                                  const rpc::ReplicateConfig& config, rpc::PutStartResult* out) {
  int32_t rc =
      Call([&](rpc::MasterServiceClient& c) { c.UpsertStart(*out, writer, key, size, config); });
  return rc != 0 ? rc : out->code;
}

int32_t MasterClient::UpsertEnd(int64_t writer, const std::string& key, int64_t checksum) {
  int32_t code = 0;
  int32_t rc =
      Call([&](rpc::MasterServiceClient& c) { code = c.UpsertEnd(writer, key, checksum); });
  return rc != 0 ? rc : code;
}

int32_t MasterClient::UpsertRevoke(int64_t writer, const std::string& key) {
  int32_t code = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { code = c.UpsertRevoke(writer, key); });
  return rc != 0 ? rc : code;
}

int32_t MasterClient::BatchPutStart(int64_t writer, const std::vector<std::string>& keys,
                                    const std::vector<int64_t>& sizes,
                                    const rpc::ReplicateConfig& config,
                                    std::vector<rpc::PutStartResult>* out) {
  int32_t rc = Call(
      [&](rpc::MasterServiceClient& c) { c.BatchPutStart(*out, writer, keys, sizes, config); });
  if (rc == 0 && out->size() != keys.size()) rc = kRpcFail;  // a master that miscounts
  if (rc != 0) out->clear();
  return rc;
}

int32_t MasterClient::BatchPutEnd(int64_t writer, const std::vector<std::string>& keys,
                                  std::vector<int32_t>* out,
                                  const std::vector<int64_t>& checksums) {
  int32_t rc =
      Call([&](rpc::MasterServiceClient& c) { c.BatchPutEnd(*out, writer, keys, checksums); });
  if (rc == 0 && out->size() != keys.size()) rc = kRpcFail;
  if (rc != 0) out->clear();
  return rc;
}

int32_t MasterClient::BatchPutRevoke(int64_t writer, const std::vector<std::string>& keys,
                                     std::vector<int32_t>* out) {
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { c.BatchPutRevoke(*out, writer, keys); });
  if (rc == 0 && out->size() != keys.size()) rc = kRpcFail;
  if (rc != 0) out->clear();
  return rc;
}

int32_t MasterClient::GetReplicaList(const std::string& key, rpc::ReplicaListResult* out) {
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { c.GetReplicaList(*out, key); });
  return rc != 0 ? rc : out->code;
}

int32_t MasterClient::BatchGetReplicaList(const std::vector<std::string>& keys,
                                          std::vector<rpc::ReplicaListResult>* out) {
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { c.BatchGetReplicaList(*out, keys); });
  if (rc == 0 && out->size() != keys.size()) rc = kRpcFail;
  if (rc != 0) out->clear();
  return rc;
}

int32_t MasterClient::ExistKey(const std::string& key) {
  int32_t code = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { code = c.ExistKey(key); });
  return rc != 0 ? rc : code;
}

int32_t MasterClient::BatchExistKey(const std::vector<std::string>& keys,
                                    std::vector<int32_t>* out) {
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { c.BatchExistKey(*out, keys); });
  if (rc == 0 && out->size() != keys.size()) rc = kRpcFail;
  if (rc != 0) out->clear();
  return rc;
}

int32_t MasterClient::Remove(const std::string& key, bool force) {
  int32_t code = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { code = c.Remove(key, force); });
  return rc != 0 ? rc : code;
}

int64_t MasterClient::RemoveByRegex(const std::string& pattern, bool force) {
  int64_t count = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { count = c.RemoveByRegex(pattern, force); });
  return rc != 0 ? rc : count;
}

int64_t MasterClient::RemoveAll(bool force) {
  int64_t count = 0;
  int32_t rc = Call([&](rpc::MasterServiceClient& c) { count = c.RemoveAll(force); });
  return rc != 0 ? rc : count;
}

}  // namespace mooncake
