#include "daemon/master_link/master_client.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "common/base/error_code.h"
#include "common/master_link/master_auth.h"
#include "common/base/spin_wait.h"
#include "daemon/base/group_ids.h"

namespace mooncake {
namespace {

// A TSocket whose reads first poll for the master's reply (adaptive, common/base/spin_wait.h):
// the reply of a short RPC comes within tens of microseconds, and a worker that polls
// for it needs no wake-up. A connection is used by one thread at a time (checked out of
// the pool), as its AdaptiveSpin requires.
class SpinningSocket : public apache::thrift::transport::TVirtualTransport<
                           SpinningSocket, apache::thrift::transport::TSocket> {
 public:
  SpinningSocket(const std::string& host, int port, int64_t spin_ns)
      : TVirtualTransport(host, port), spin_(spin_ns) {}
  uint32_t read(uint8_t* buf, uint32_t len) {
    if (spin_.SpinReadable(getSocketFD())) return TSocket::read(buf, len);
    uint32_t n = TSocket::read(buf, len);  // blocks, bounded by the receive timeout
    spin_.Blocked();
    return n;
  }

 private:
  AdaptiveSpin spin_;
};

}  // namespace

using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;

namespace {

thread_local std::string g_last_error;

// Between two attempts of a call waiting for a leader: each also re-reads etcd.
constexpr std::chrono::milliseconds kFailoverPause{50};

}  // namespace

struct MasterClient::Connection {
  std::shared_ptr<TSocket> socket;
  std::shared_ptr<TFramedTransport> transport;
  std::unique_ptr<rpc::MasterServiceClient> client;
  uint64_t generation = 0;
  MasterLeader leader;  // the leader it was opened to (host, port, the key's term)
  int64_t term = 0;     // the master's own term, or leader.term for a master without HA

  // An idle connection has nothing to read; if it is readable the master closed it (or
  // restarted), and using it would cost a failed request.
  bool LooksClosed() const {
    struct pollfd p = {socket->getSocketFD(), POLLIN | POLLRDHUP, 0};
    return poll(&p, 1, 0) != 0;
  }
};

MasterClient::MasterClient(MasterClientOptions options, std::unique_ptr<MasterLocator> locator)
    : options_(std::move(options)), locator_(std::move(locator)) {
  if (locator_ == nullptr) locator_ = MasterLocator::Fixed(options_.host, options_.port);
  locator_->SetChangeCallback([this](const MasterLeader& leader) { OnLeaderChange(leader); });
  locator_->StartWatch();
}

MasterClient::~MasterClient() {
  locator_.reset();  // no leader change is reported from now on
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : idle_) c->transport->close();
}

std::string MasterClient::LastError() { return g_last_error; }

void MasterClient::SetLeaderChangeHandler(std::function<void(const MasterLeader&)> handler) {
  std::lock_guard<std::mutex> lock(handler_mu_);
  leader_handler_ = std::move(handler);
}

void MasterClient::OnLeaderChange(const MasterLeader& leader) {
  DropIdle();  // connections to the old leader; busy ones are dropped at check-in
  std::lock_guard<std::mutex> lock(handler_mu_);
  if (leader_handler_) leader_handler_(leader);
}

std::unique_ptr<MasterClient::Connection> MasterClient::Open(const MasterLeader& leader,
                                                             std::string* error) {
  auto conn = std::make_unique<Connection>();
  conn->leader = leader;
  conn->socket = std::make_shared<SpinningSocket>(leader.host, leader.port,
                                                  options_.spin_us * 1000);
  conn->socket->setConnTimeout(options_.connect_timeout_ms);
  conn->socket->setSendTimeout(options_.rpc_timeout_ms);
  conn->socket->setRecvTimeout(options_.rpc_timeout_ms);
  conn->socket->setNoDelay(true);
  conn->transport = std::make_shared<TFramedTransport>(conn->socket);
  try {
    conn->transport->open();
  } catch (const std::exception& e) {
    *error = "master " + leader.name() + ": " + e.what();
    return nullptr;
  }
  conn->client =
      std::make_unique<rpc::MasterServiceClient>(std::make_shared<TBinaryProtocol>(conn->transport));
  ErrorCode admitted = AuthenticateToMaster(conn->client.get(), options_.cluster_key.get(), error);
  if (admitted != ErrorCode::OK) {
    *error = "master " + leader.name() + ": " + *error;
    conn->transport->close();
    return nullptr;
  }
  rpc::RoleResult role;
  try {
    conn->client->GetRole(role);
  } catch (const std::exception& e) {
    *error = "master " + leader.name() + ": GetRole: " + e.what();
    conn->transport->close();
    return nullptr;
  }
  if (FromWire(role.code) != ErrorCode::OK || role.role != rpc::MasterRole::LEADER) {
    *error = "master " + leader.name() + " is not the leader (" +
             (role.role == rpc::MasterRole::STANDBY ? "a standby" : "deposed") +
             (role.leader.empty() ? "" : "; it names " + role.leader) + ")";
    conn->transport->close();
    return nullptr;
  }
  // A master without HA says term 0: it is fenced by the key that named it.
  conn->term = role.term > 0 ? role.term : leader.term;
  if (role.term > 0) locator_->ObserveTerm(role.term);
  int64_t highest = locator_->highest_term();
  if (conn->term < highest) {
    *error = "master " + leader.name() + " leads under term " + std::to_string(conn->term) +
             ", below term " + std::to_string(highest) + " known: not used";
    conn->transport->close();
    return nullptr;
  }
  return conn;
}

std::unique_ptr<MasterClient::Connection> MasterClient::Checkout(const MasterLeader& leader,
                                                                 std::string* error) {
  const int64_t highest = locator_->highest_term();
  uint64_t generation;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(options_.rpc_timeout_ms);
    for (;;) {
      while (!idle_.empty()) {
        std::unique_ptr<Connection> conn = std::move(idle_.back());
        idle_.pop_back();
        if (conn->generation == generation_ && conn->leader.same_as(leader) &&
            conn->term >= highest && !conn->LooksClosed()) {
          return conn;
        }
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
  std::unique_ptr<Connection> conn = Open(leader, error);
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

void MasterClient::Discard(std::unique_ptr<Connection> conn) {
  conn->transport->close();
  std::lock_guard<std::mutex> lock(mu_);
  --open_count_;
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

MasterClient::Attempt MasterClient::Try(const Rpc& fn, std::string* error) {
  MasterLeader leader = locator_->Current();
  if (!leader.known()) {
    *error = "no master leader known (" + locator_->description() + ")";
    return Attempt::kNotSent;
  }
  std::unique_ptr<Connection> conn = Checkout(leader, error);
  if (conn == nullptr) return Attempt::kNotSent;
  try {
    fn(*conn->client);
  } catch (const std::exception& e) {
    *error = "master " + leader.name() + ": " + e.what();
    // The connection may hold half a reply; it cannot be reused. A NOT_LEADER refusal
    // comes before the handler: the master stepped down since we connected, and ran nothing.
    Discard(std::move(conn));
    return RefusalCode(e.what()) == ErrorCode::NOT_LEADER ? Attempt::kNotLeader
                                                          : Attempt::kMaybeRan;
  }
  const int64_t highest = locator_->highest_term();
  if (conn->term < highest) {
    // A newer leader was elected while this ran: what the old one said is not taken.
    *error = "master " + leader.name() + ": a reply under term " + std::to_string(conn->term) +
             " ignored, term " + std::to_string(highest) + " is known";
    Discard(std::move(conn));
    return Attempt::kMaybeRan;
  }
  Checkin(std::move(conn));
  return Attempt::kDone;
}

ErrorCode MasterClient::Call(const Rpc& fn, Repeat repeat, bool* repeated) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  ErrorCode code = CallWithFailover(fn, repeat, repeated);
  if (code != ErrorCode::OK) failed_calls_.fetch_add(1, std::memory_order_relaxed);
  return code;
}

ErrorCode MasterClient::CallWithFailover(const Rpc& fn, Repeat repeat, bool* repeated) {
  if (repeated != nullptr) *repeated = false;
  std::string error;
  Attempt attempt = Try(fn, &error);
  if (attempt == Attempt::kDone) return ErrorCode::OK;
  // A fixed master fails as it always did: the daemon's own retries (heartbeat,
  // registration) take over; there is nobody else to ask.
  if (!locator_->via_etcd() || (attempt == Attempt::kMaybeRan && repeat == Repeat::kNever)) {
    g_last_error = error;
    return attempt == Attempt::kNotLeader ? ErrorCode::NOT_LEADER : ErrorCode::RPC_FAIL;
  }
  bool may_have_run = attempt == Attempt::kMaybeRan;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.failover_wait_ms);
  for (;;) {
    locator_->Refresh();
    attempt = Try(fn, &error);
    if (attempt == Attempt::kDone) {
      if (repeated != nullptr) *repeated = may_have_run;
      return ErrorCode::OK;
    }
    // Once sent to a leader, a call is not sent a third time.
    if (attempt == Attempt::kMaybeRan) {
      if (repeat == Repeat::kNever || may_have_run) break;
      may_have_run = true;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(kFailoverPause);
  }
  g_last_error = error;
  return ErrorCode::RPC_FAIL;
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
// the list it is given first) runs with args, repeated after a failover as repeat says,
// and *out gets the codes, as ListOf checks them against expected.
template <class Method, class... Args>
ErrorCode CallForCodes(MasterClient& client, Repeat repeat, size_t expected,
                       std::vector<ErrorCode>* out, Method method, const Args&... args) {
  std::vector<int32_t> wire;
  ErrorCode call =
      client.Call([&](rpc::MasterServiceClient& c) { (c.*method)(wire, args...); }, repeat);
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

// A put's first step, sent again after an attempt that may have run: OBJECT_ALREADY_EXISTS
// may then be our own reservation, which the first attempt made and whose reply was lost.
// The put must not count it as "already cached" (it would answer success for an object
// that never gets its bytes): it fails instead, and the reservation, never visible, is
// discarded as any abandoned put's (put_start_discard_timeout).
void DistrustRepeatedStart(bool repeated, rpc::PutStartResult* result) {
  if (repeated && FromWire(result->code) == ErrorCode::OBJECT_ALREADY_EXISTS) {
    result->code = ToInt(ErrorCode::RPC_FAIL);
  }
}

}  // namespace

// ---- wrappers ----
// Repeat::kSafe where a second run (after a first that may have run, at the old leader
// or at a new one that replicated it) has the effect of one; docs/ha.md says why for each.

ErrorCode MasterClient::RegisterDaemon(int64_t daemon_id, const std::string& name) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { code = c.RegisterDaemon(daemon_id, name); },
      Repeat::kSafe);
  return CodeOf(call, code);
}

ErrorCode MasterClient::Heartbeat(int64_t daemon_id, rpc::HeartbeatResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.Heartbeat(*out, daemon_id);
      },
      Repeat::kSafe);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::MountSegment(const rpc::SegmentInfo& segment) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { code = c.MountSegment(segment); },
      Repeat::kSafe);
  return CodeOf(call, code);
}

ErrorCode MasterClient::UnmountSegment(int64_t daemon_id, int64_t segment_id) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { code = c.UnmountSegment(daemon_id, segment_id); },
      Repeat::kSafe);
  return CodeOf(call, code);
}

ErrorCode MasterClient::GetAllSegments(std::vector<rpc::SegmentInfo>* out) {
  return Call(
      [&](rpc::MasterServiceClient& c) {
        c.GetAllSegments(*out);
      },
      Repeat::kSafe);
}

ErrorCode MasterClient::DrainSegment(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                                     int32_t max_moves, const std::vector<std::string>& avoided,
                                     rpc::DrainBatchResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.DrainSegment(*out, daemon_id, segment_id, cursor, max_moves, avoided);
      },
      Repeat::kNever);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::CommitMoves(int64_t daemon_id, int64_t segment_id,
                                    const std::vector<std::string>& keys,
                                    std::vector<ErrorCode>* out) {
  return CallForCodes(*this, Repeat::kNever, keys.size(), out,
                      &rpc::MasterServiceClient::CommitMoves, daemon_id, segment_id, keys);
}

ErrorCode MasterClient::RevokeMoves(int64_t daemon_id, int64_t segment_id,
                                    const std::vector<std::string>& keys,
                                    std::vector<ErrorCode>* out) {
  return CallForCodes(*this, Repeat::kNever, keys.size(), out,
                      &rpc::MasterServiceClient::RevokeMoves, daemon_id, segment_id, keys);
}

ErrorCode MasterClient::PutStart(int64_t writer, const std::string& key, int64_t size,
                                 const rpc::ReplicateConfig& config, rpc::PutStartResult* out) {
  bool repeated = false;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.PutStart(*out, writer, key, size, config);
      },
      Repeat::kSafe, &repeated);
  DistrustRepeatedStart(repeated, out);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::PutEnd(int64_t writer, const std::string& key, int64_t checksum) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { code = c.PutEnd(writer, key, checksum); },
      Repeat::kSafe);
  return CodeOf(call, code);
}

ErrorCode MasterClient::PutRevoke(int64_t writer, const std::string& key) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { code = c.PutRevoke(writer, key); },
      Repeat::kSafe);
  return CodeOf(call, code);
}

ErrorCode MasterClient::UpsertStart(int64_t writer, const std::string& key, int64_t size,
                                    const rpc::ReplicateConfig& config,
                                    rpc::PutStartResult* out) {
  bool repeated = false;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.UpsertStart(*out, writer, key, size, config);
      },
      Repeat::kSafe, &repeated);
  DistrustRepeatedStart(repeated, out);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::UpsertEnd(int64_t writer, const std::string& key, int64_t checksum,
                                  StaleCaches* stale) {
  rpc::ChangeResult result;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.UpsertEnd(result, writer, key, checksum);
      },
      Repeat::kSafe);
  StaleOf(call, &result.holders, stale);
  return CodeOf(call, static_cast<int32_t>(result.code));
}

ErrorCode MasterClient::UpsertRevoke(int64_t writer, const std::string& key) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { code = c.UpsertRevoke(writer, key); },
      Repeat::kSafe);
  return CodeOf(call, code);
}

ErrorCode MasterClient::BatchPutStart(int64_t writer, const std::vector<std::string>& keys,
                                      const std::vector<int64_t>& sizes,
                                      const rpc::ReplicateConfig& config,
                                      std::vector<rpc::PutStartResult>* out) {
  bool repeated = false;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.BatchPutStart(*out, writer, keys, sizes, config);
      },
      Repeat::kSafe, &repeated);
  for (rpc::PutStartResult& r : *out) DistrustRepeatedStart(repeated, &r);
  return ListOf(call, keys.size(), out);
}

ErrorCode MasterClient::BatchPutEnd(int64_t writer, const std::vector<std::string>& keys,
                                    std::vector<ErrorCode>* out,
                                    const std::vector<int64_t>& checksums) {
  return CallForCodes(*this, Repeat::kSafe, keys.size(), out,
                      &rpc::MasterServiceClient::BatchPutEnd, writer, keys, checksums);
}

ErrorCode MasterClient::BatchPutRevoke(int64_t writer, const std::vector<std::string>& keys,
                                       std::vector<ErrorCode>* out) {
  return CallForCodes(*this, Repeat::kSafe, keys.size(), out,
                      &rpc::MasterServiceClient::BatchPutRevoke, writer, keys);
}

ErrorCode MasterClient::GetReplicaList(const std::string& key, int64_t reader,
                                       rpc::ReplicaListResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.GetReplicaList(*out, key, reader);
      },
      Repeat::kSafe);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::BatchGetReplicaList(const std::vector<std::string>& keys, int64_t reader,
                                            std::vector<rpc::ReplicaListResult>* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.BatchGetReplicaList(*out, keys, reader);
      },
      Repeat::kSafe);
  return ListOf(call, keys.size(), out);
}

template <typename Result>
void MasterClient::Pipeline(const std::vector<std::string>& keys, size_t chunk,
                            const PipelineCalls<Result>& calls,
                            const ChunkDone<Result>& on_chunk) {
  using SteadyClock = std::chrono::steady_clock;
  chunk = std::max<size_t>(chunk, 1);
  const size_t chunks = (keys.size() + chunk - 1) / chunk;
  std::vector<std::vector<std::string>> parts(chunks);
  std::vector<size_t> part_bytes(chunks, 0);
  for (size_t i = 0; i < chunks; ++i) {
    parts[i].assign(keys.begin() + i * chunk,
                    keys.begin() + std::min(keys.size(), (i + 1) * chunk));
    for (const std::string& key : parts[i]) part_bytes[i] += key.size();
  }
  std::string error;
  MasterLeader leader = locator_->Current();
  std::unique_ptr<Connection> conn = leader.known() ? Checkout(leader, &error) : nullptr;
  size_t delivered = 0;
  size_t sent = 0;
  size_t bytes_in_flight = 0;  // of the keys of chunks sent and not yet received
  std::vector<SteadyClock::time_point> sent_at(chunks);
  // Sends or receives on the pipeline's connection; false (and the connection dropped)
  // when that failed or the reply came from a lower term than the highest known.
  auto step = [&](const std::function<void()>& io) {
    if (conn == nullptr) return false;
    try {
      io();
      if (conn->term >= locator_->highest_term()) return true;
    } catch (const std::exception&) {
      // The fallback below asks again, and says why if that fails too.
    }
    Discard(std::move(conn));
    conn = nullptr;
    return false;
  };
  // Fills the window: the first chunk in flight always goes, the others within the bounds.
  auto fill_window = [&] {
    while (sent < chunks && (sent == delivered ||
                             (sent - delivered < kPipelineWindow &&
                              bytes_in_flight + part_bytes[sent] <= kPipelineBytes))) {
      sent_at[sent] = SteadyClock::now();
      if (!step([&] { calls.send(*conn->client, parts[sent], sent * chunk); })) return false;
      if (sent > delivered) bytes_in_flight += part_bytes[sent];
      ++sent;
    }
    return true;
  };
  bool piped = fill_window();
  while (piped && delivered < sent) {
    calls_.fetch_add(1, std::memory_order_relaxed);
    std::vector<Result> results;
    piped = step([&] { calls.receive(*conn->client, &results); }) &&
            results.size() == parts[delivered].size();
    if (!piped) break;
    // The next chunk in flight becomes the first, which the byte bound leaves out.
    if (delivered + 1 < sent) bytes_in_flight -= part_bytes[delivered + 1];
    const size_t done = delivered++;
    piped = fill_window();
    on_chunk(done * chunk, ErrorCode::OK, &results, sent_at[done]);
  }
  if (conn != nullptr) {
    if (delivered == chunks) {
      Checkin(std::move(conn));
    } else {
      Discard(std::move(conn));  // it may hold a reply nobody will read
    }
  }
  // What the pipeline left: one ordinary call per chunk.
  for (; delivered < chunks; ++delivered) {
    std::vector<Result> results;
    SteadyClock::time_point asked_at = SteadyClock::now();
    ErrorCode rc = calls.call(parts[delivered], delivered * chunk, delivered < sent, &results);
    on_chunk(delivered * chunk, rc, &results, asked_at);
  }
}

void MasterClient::BatchGetReplicaListPipelined(
    const std::vector<std::string>& keys, int64_t reader, size_t chunk,
    const ChunkDone<rpc::ReplicaListResult>& on_chunk) {
  PipelineCalls<rpc::ReplicaListResult> calls;
  calls.send = [&](rpc::MasterServiceClient& c, const std::vector<std::string>& part, size_t) {
    c.send_BatchGetReplicaList(part, reader);
  };
  calls.receive = [](rpc::MasterServiceClient& c, std::vector<rpc::ReplicaListResult>* out) {
    c.recv_BatchGetReplicaList(*out);
  };
  calls.call = [&](const std::vector<std::string>& part, size_t, bool,
                   std::vector<rpc::ReplicaListResult>* out) {
    return BatchGetReplicaList(part, reader, out);
  };
  Pipeline(keys, chunk, calls, on_chunk);
}

void MasterClient::BatchPutStartPipelined(int64_t writer, const std::vector<std::string>& keys,
                                          const std::vector<int64_t>& sizes,
                                          const rpc::ReplicateConfig& config, size_t chunk,
                                          const ChunkDone<rpc::PutStartResult>& on_chunk) {
  auto sizes_of = [&](size_t first, size_t count) {
    return std::vector<int64_t>(sizes.begin() + first, sizes.begin() + first + count);
  };
  PipelineCalls<rpc::PutStartResult> calls;
  // Each part with its keys' own group ids (daemon/base/group_ids.h).
  calls.send = [&](rpc::MasterServiceClient& c, const std::vector<std::string>& part,
                   size_t first) {
    c.send_BatchPutStart(writer, part, sizes_of(first, part.size()),
                         GroupsFrom(config, first, part.size()));
  };
  calls.receive = [](rpc::MasterServiceClient& c, std::vector<rpc::PutStartResult>* out) {
    c.recv_BatchPutStart(*out);
  };
  calls.call = [&](const std::vector<std::string>& part, size_t first, bool was_sent,
                   std::vector<rpc::PutStartResult>* out) {
    ErrorCode rc = BatchPutStart(writer, part, sizes_of(first, part.size()),
                                 GroupsFrom(config, first, part.size()), out);
    for (rpc::PutStartResult& r : *out) DistrustRepeatedStart(was_sent, &r);
    return rc;
  };
  Pipeline(keys, chunk, calls, on_chunk);
}

Result<bool> MasterClient::ExistKey(const std::string& key) {
  int32_t found = 0;
  ErrorCode call =
      Call([&](rpc::MasterServiceClient& c) { found = c.ExistKey(key); }, Repeat::kSafe);
  if (call != ErrorCode::OK) return call;
  if (found == 0 || found == 1) return found == 1;
  return FromWire(found);
}

ErrorCode MasterClient::BatchExistKey(const std::vector<std::string>& keys,
                                      std::vector<int32_t>* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.BatchExistKey(*out, keys);
      },
      Repeat::kSafe);
  return ListOf(call, keys.size(), out);
}

// Removals are never sent twice: the first may have removed the object and a put of the
// same key made a new one since, which the second would remove too.

ErrorCode MasterClient::Remove(const std::string& key, bool force, int64_t caller,
                              StaleCaches* stale) {
  rpc::ChangeResult result;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.Remove(result, key, force, caller);
      },
      Repeat::kNever);
  StaleOf(call, &result.holders, stale);
  return CodeOf(call, static_cast<int32_t>(result.code));
}

ErrorCode MasterClient::BatchRemove(const std::vector<std::string>& keys, bool force,
                                    int64_t caller, std::vector<ErrorCode>* out,
                                    StaleCaches* stale) {
  rpc::BatchChangeResult result;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.BatchRemove(result, keys, force, caller);
      },
      Repeat::kNever);
  // A master that miscounts is as good as no answer, but the holders it named are real.
  StaleOf(call, &result.holders, stale);
  call = ListOf(call, keys.size(), &result.codes);
  *out = CodesOf(result.codes);
  return call;
}

ErrorCode MasterClient::BatchReplicaClear(const std::vector<std::string>& keys,
                                          const std::string& segment_name, int64_t caller,
                                          std::vector<ErrorCode>* out, StaleCaches* stale) {
  rpc::BatchChangeResult result;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.BatchReplicaClear(result, keys, segment_name, caller);
      },
      Repeat::kNever);
  StaleOf(call, &result.holders, stale);
  call = ListOf(call, keys.size(), &result.codes);
  *out = CodesOf(result.codes);
  return call;
}

Result<uint64_t> MasterClient::RemoveByRegex(const std::string& pattern, bool force,
                                             int64_t caller, const std::string& tenant,
                                             StaleCaches* stale) {
  rpc::ChangeResult result;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.RemoveByRegex(result, pattern, force, caller, tenant);
      },
      Repeat::kNever);
  StaleOf(call, &result.holders, stale);
  return CountOf(call, result.code);
}

Result<uint64_t> MasterClient::RemoveAll(bool force, int64_t caller, const std::string& tenant,
                                         StaleCaches* stale) {
  rpc::ChangeResult result;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.RemoveAll(result, force, caller, tenant);
      },
      Repeat::kNever);
  StaleOf(call, &result.holders, stale);
  return CountOf(call, result.code);
}

// ---- the SSD tier ----
// Not sent twice: a task list handed out twice, or an outcome reported twice, is answered
// per key as a refusal, which the tier would take for a real one; its own rounds retry.

ErrorCode MasterClient::FetchOffloads(int64_t daemon_id, int32_t max_tasks,
                                      rpc::OffloadTasksResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.FetchOffloads(*out, daemon_id, max_tasks);
      },
      Repeat::kNever);
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
  return CallForCodes(*this, Repeat::kNever, keys.size(), out,
                      &rpc::MasterServiceClient::ReportOffloads, daemon_id, disk_segment_id, keys,
                      replica_ids, wire_codes);
}

// A round's begin and end are safe to repeat: a second begin of the same round changes
// nothing, a second end answers OK and drops nothing more (docs/ha.md).
ErrorCode MasterClient::BeginDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                                int64_t round) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        code = c.BeginDiskReconciliation(daemon_id, disk_segment_id, round);
      },
      Repeat::kSafe);
  return CodeOf(call, code);
}

ErrorCode MasterClient::RegisterDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                             const std::vector<rpc::DiskObject>& objects,
                                             int64_t round, std::vector<ErrorCode>* out) {
  return CallForCodes(*this, Repeat::kNever, objects.size(), out,
                      &rpc::MasterServiceClient::RegisterDiskReplicas, daemon_id, disk_segment_id,
                      objects, round);
}

ErrorCode MasterClient::EndDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                              int64_t round) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        code = c.EndDiskReconciliation(daemon_id, disk_segment_id, round);
      },
      Repeat::kSafe);
  return CodeOf(call, code);
}

ErrorCode MasterClient::DropDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                         const std::vector<std::string>& keys,
                                         std::vector<ErrorCode>* out) {
  return CallForCodes(*this, Repeat::kNever, keys.size(), out,
                      &rpc::MasterServiceClient::DropDiskReplicas, daemon_id, disk_segment_id,
                      keys);
}

ErrorCode MasterClient::ListUnverified(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                                       int32_t max_replicas, rpc::UnverifiedPage* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.ListUnverified(*out, daemon_id, segment_id, cursor, max_replicas);
      },
      Repeat::kSafe);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::ReportVerified(int64_t daemon_id, int64_t segment_id,
                                       const std::vector<rpc::VerifiedReplica>& replicas,
                                       std::vector<ErrorCode>* out) {
  return CallForCodes(*this, Repeat::kSafe, replicas.size(), out,
                      &rpc::MasterServiceClient::ReportVerified, daemon_id, segment_id, replicas);
}

ErrorCode MasterClient::ReportBadReplicas(int64_t daemon_id,
                                          const std::vector<rpc::BadReplica>& replicas,
                                          std::vector<ErrorCode>* out) {
  return CallForCodes(*this, Repeat::kSafe, replicas.size(), out,
                      &rpc::MasterServiceClient::ReportBadReplicas, daemon_id, replicas);
}

// Promotion on hit: a reservation is made once (a second PromoteStart would meet the
// first's, -705); PromoteEnd follows it.

ErrorCode MasterClient::PromoteStart(int64_t writer, const std::string& key,
                                     int64_t disk_replica_id, rpc::PutStartResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) {
        c.PromoteStart(*out, writer, key, disk_replica_id);
      },
      Repeat::kNever);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::PromoteEnd(int64_t writer, const std::string& key, bool ok) {
  int32_t code = 0;
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { code = c.PromoteEnd(writer, key, ok); },
      Repeat::kNever);
  return CodeOf(call, code);
}

// ---- copy and move tasks ----

ErrorCode MasterClient::CreateCopyTask(const std::string& key,
                                       const std::vector<std::string>& targets,
                                       rpc::TaskResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { c.CreateCopyTask(*out, key, targets); },
      Repeat::kNever);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::CreateMoveTask(const std::string& key, const std::string& source,
                                       const std::string& target, rpc::TaskResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { c.CreateMoveTask(*out, key, source, target); },
      Repeat::kNever);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::QueryTask(int64_t id_high, int64_t id_low, const std::string& tenant,
                                  rpc::QueryTaskResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { c.QueryTask(*out, id_high, id_low, tenant); },
      Repeat::kSafe);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::FetchReplicaTasks(int64_t daemon_id, int32_t max_tasks,
                                          rpc::ReplicaTasksResult* out) {
  ErrorCode call = Call(
      [&](rpc::MasterServiceClient& c) { c.FetchReplicaTasks(*out, daemon_id, max_tasks); },
      Repeat::kNever);
  return CodeOf(call, out->code);
}

ErrorCode MasterClient::CompleteReplicaTasks(int64_t daemon_id,
                                             const std::vector<rpc::ReplicaTaskOutcome>& outcomes,
                                             std::vector<ErrorCode>* out) {
  return CallForCodes(*this, Repeat::kNever, outcomes.size(), out,
                      &rpc::MasterServiceClient::CompleteReplicaTasks, daemon_id, outcomes);
}

}  // namespace mooncake
