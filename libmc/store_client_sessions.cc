// Put sessions (see store_client.h): the daemon's staged put, held open across calls; and
// the daemon's counts for the connection (CLIENT_STATS).
//
// A session is PUT_BEGIN's put id on the channel that answered it; every later request of
// the session goes on that channel alone (Connection::SendPinned), since another
// connection's ids are its own. Requests are pipelined: a batch's PUT_BEGINs, PUT_CHUNKs
// and PUT_COMMITs are sent kInFlight at a time and their replies read in order, so a
// batch costs about one round trip per kInFlight requests, not one per key.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

#include "absl/synchronization/mutex.h"
#include "libmc/device_memory.h"
#include "libmc/last_error.h"
#include "libmc/store_client.h"

namespace mooncake {
namespace client {

struct StoreClient::PutSession {
  uint64_t put_id = 0;  // 0 while its PUT_BEGIN is in flight
  uint64_t size = 0;
  std::shared_ptr<Connection> conn;
  std::shared_ptr<Channel> channel;
  // WritePutSessions calls writing into it. Under the client's sessions_mu_, which an
  // annotation here cannot name (it is another object's).
  int writers = 0;
};

namespace {

// Requests of one batch in flight at once.
constexpr size_t kInFlight = 32;
// Staged fragments move in blocks of at most kChunkBytes (at least kMinChunkBytes when the
// pool is that large), as staged puts do.
constexpr uint64_t kChunkBytes = 4ull << 20;
constexpr uint64_t kMinChunkBytes = 64ull << 10;

ErrorCode NoSession() {
  return Refused(ErrorCode::INVALID_PARAMS,
                 "no put session is open for the key: open one with "
                 "batch_put_session_start (mooncake_store_put_session_start) first");
}

// A request sent and what its reply settles: the index of the entry it belongs to.
struct InFlight {
  Ticket ticket;
  size_t entry;
  std::shared_ptr<PoolBlock> block;  // a staged chunk's bytes, until the daemon answered
};

// Sends requests through send(entry) (which returns false when it sent nothing) and reads
// each reply with done(entry, code, reply), at most kInFlight outstanding, in order.
class Pipeline {
 public:
  explicit Pipeline(Connection& conn) : conn_(conn) {}
  ~Pipeline() { Drain(); }

  template <class Done>
  void Push(InFlight sent, Done done) {
    queue_.push_back(std::move(sent));
    while (queue_.size() >= kInFlight) WaitOldest(done);
  }
  template <class Done>
  void WaitOldest(Done done) {
    InFlight& front = queue_.front();
    Reply reply;
    ErrorCode code = conn_.Wait(front.ticket, &reply);
    size_t entry = front.entry;
    queue_.pop_front();
    done(entry, code, reply);
  }
  template <class Done>
  void Finish(Done done) {
    while (!queue_.empty()) WaitOldest(done);
  }
  bool empty() const { return queue_.empty(); }

 private:
  void Drain() {
    for (InFlight& f : queue_) {
      Reply ignored;
      conn_.Wait(f.ticket, &ignored);
    }
  }
  Connection& conn_;
  std::deque<InFlight> queue_;
};

}  // namespace

void StoreClient::StartPutSessions(std::vector<SessionStart>& starts,
                                   const uds::WireConfig& config) {
  Context c;
  ErrorCode rc = Acquire(&c);
  std::shared_ptr<Channel> channel = rc == ErrorCode::OK ? c.conn->Pin(&rc) : nullptr;
  if (!channel) {
    for (SessionStart& s : starts) s.result = rc;
    return;
  }
  // Each key is claimed first (a session without a put id yet), so that a second start of
  // it, in this batch or another thread's, is refused.
  std::vector<std::shared_ptr<PutSession>> claimed(starts.size());
  {
    absl::MutexLock lock(&sessions_mu_);
    for (size_t i = 0; i < starts.size(); ++i) {
      auto session = std::make_shared<PutSession>();
      session->size = starts[i].size;
      session->conn = c.conn;
      session->channel = channel;
      if (!put_sessions_.emplace(starts[i].key, session).second) {
        starts[i].result = Refused(ErrorCode::INVALID_PARAMS,
                                   "a put session is open for the key already: end or revoke "
                                   "it first");
        continue;
      }
      claimed[i] = std::move(session);
    }
  }
  Pipeline pipe(*c.conn);
  auto done = [&](size_t i, ErrorCode code, const Reply& reply) {
    uds::PutBeginReply begun;
    if (code == ErrorCode::OK && !uds::ParseFields(reply.message.args, &begun)) {
      code = ErrorCode::INTERNAL_ERROR;
    }
    starts[i].result = code;
    absl::MutexLock lock(&sessions_mu_);
    if (code == ErrorCode::OK) {
      claimed[i]->put_id = begun.put_id;
    } else {
      put_sessions_.erase(starts[i].key);
    }
  };
  uds::PutBeginArgs args{"", 0, config, uds::Flag{false}};
  for (size_t i = 0; i < starts.size(); ++i) {
    if (!claimed[i]) continue;
    args.key = starts[i].key;
    args.size = starts[i].size;
    args.config.group = starts[i].group;
    Request request(uds::Op::kPutBegin, args);
    pipe.Push(InFlight{c.conn->SendPinned(channel, request), i, nullptr}, done);
  }
  pipe.Finish(done);
}

void StoreClient::WritePutSessions(std::vector<SessionWrite>& writes) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc == ErrorCode::OK && !c.pool) {
    rc = Refused(ErrorCode::INVALID_PARAMS,
                 "the handle has no pool (local_buffer_size 0): nothing can be written");
  }
  if (rc != ErrorCode::OK) {
    for (SessionWrite& w : writes) w.result = rc;
    return;
  }
  // Each write's session, checked and held (its writers count keeps its end waiting), and
  // where each of its fragments lives (host or device memory).
  std::vector<std::shared_ptr<PutSession>> sessions(writes.size());
  std::vector<std::vector<MemoryPlace>> places(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    SessionWrite& w = writes[i];
    uint64_t size = 0;
    {
      absl::MutexLock lock(&sessions_mu_);
      auto it = put_sessions_.find(w.key);
      if (it == put_sessions_.end() || it->second->put_id == 0) {
        w.result = NoSession();
        continue;
      }
      size = it->second->size;
      sessions[i] = it->second;
    }
    ErrorCode bad = ErrorCode::OK;
    uint64_t total = 0;
    for (const SessionFragment& f : w.fragments) {
      if (f.length > size || f.dst_offset > size - f.length) {
        bad = Refused(ErrorCode::INVALID_PARAMS,
                      "a fragment of " + std::to_string(f.length) + " bytes at offset " +
                          std::to_string(f.dst_offset) + " runs past the value's " +
                          std::to_string(size) + " bytes");
        break;
      }
      if (f.length > 0 && f.src == nullptr) {
        bad = Refused(ErrorCode::INTERNAL_ERROR, "a fragment's source is NULL");
        break;
      }
      places[i].emplace_back();
      bad = CheckBuffer(f.src, f.length, /*for_write=*/false, &places[i].back());
      if (bad != ErrorCode::OK) break;
      total += f.length;
    }
    if (bad != ErrorCode::OK) {
      w.result = bad;
      sessions[i].reset();
      continue;
    }
    w.result = total;
    absl::MutexLock lock(&sessions_mu_);
    ++sessions[i]->writers;
  }

  Pipeline pipe(*c.conn);
  auto done = [&](size_t i, ErrorCode code, const Reply&) {
    if (code != ErrorCode::OK && writes[i].result.ok()) writes[i].result = code;
  };
  for (size_t i = 0; i < writes.size(); ++i) {
    if (!sessions[i]) continue;
    const PutSession& session = *sessions[i];
    for (size_t k = 0; k < writes[i].fragments.size(); ++k) {
      const SessionFragment& f = writes[i].fragments[k];
      for (uint64_t sent = 0; sent < f.length && writes[i].result.ok();) {
        uint64_t pool_offset = 0;
        std::shared_ptr<PoolBlock> block;
        uint64_t n = f.length - sent;
        if (places[i][k].device || !c.pool->Contains(f.src + sent, n, &pool_offset)) {
          // Staged: a block as large as is free, up to kChunkBytes; when none is, the
          // chunks in flight give theirs back first.
          uint64_t want = std::min(n, kChunkBytes);
          uint64_t least = std::min({want, kMinChunkBytes, c.pool->capacity()});
          block = c.pool->TryStage(least, want);
          while (!block && !pipe.empty()) {
            pipe.WaitOldest(done);
            block = c.pool->TryStage(least, want);
          }
          if (!block) {
            block = c.pool->Stage(least, want,
                                  std::chrono::steady_clock::now() +
                                      std::chrono::milliseconds(c.conn->timeout_ms()));
          }
          if (!block) {
            writes[i].result = Refused(ErrorCode::NO_AVAILABLE_HANDLE,
                                       "no room in the handle's pool to stage a fragment");
            break;
          }
          n = block->size();
          ErrorCode copied = CopyFromCaller(places[i][k], block->data(), f.src + sent, n);
          if (copied != ErrorCode::OK) {
            writes[i].result = copied;
            break;
          }
          pool_offset = block->offset();
        }
        Request request(uds::Op::kPutChunk,
                        uds::ChunkArgs{session.put_id, f.dst_offset + sent, pool_offset, n});
        pipe.Push(InFlight{c.conn->SendPinned(session.channel, request, block), i, block}, done);
        sent += n;
      }
    }
  }
  pipe.Finish(done);
  absl::MutexLock lock(&sessions_mu_);
  for (const auto& session : sessions) {
    if (session) --session->writers;
  }
  sessions_cv_.SignalAll();
}

void StoreClient::EndPutSessions(const std::vector<std::string>& keys, bool commit,
                                 std::vector<ErrorCode>* results) {
  results->assign(keys.size(), ErrorCode::OK);
  // Taken out of the table at once (no new write starts), then waited for: the writes in
  // flight land before the commit or abort.
  std::vector<std::shared_ptr<PutSession>> sessions(keys.size());
  {
    absl::MutexLock lock(&sessions_mu_);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = put_sessions_.find(keys[i]);
      if (it == put_sessions_.end() || it->second->put_id == 0) {
        (*results)[i] = NoSession();
        continue;
      }
      sessions[i] = std::move(it->second);
      put_sessions_.erase(it);
    }
    auto idle = [](const std::shared_ptr<PutSession>& s) { return !s || s->writers == 0; };
    while (!std::all_of(sessions.begin(), sessions.end(), idle)) sessions_cv_.Wait(&sessions_mu_);
  }
  std::deque<InFlight> sent;
  auto done = [&](size_t i, ErrorCode code) {
    // A revoke of a put already gone (its object removed meanwhile) has nothing left to
    // do; one whose writes failed went through all the same.
    if (!commit && (code == ErrorCode::OBJECT_NOT_FOUND || code == ErrorCode::TRANSFER_FAIL)) {
      code = ErrorCode::OK;
    }
    (*results)[i] = code;
  };
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!sessions[i]) continue;
    const PutSession& session = *sessions[i];
    Request request(commit ? uds::Op::kPutCommit : uds::Op::kPutAbort,
                    uds::StagedIdArgs{session.put_id});
    sent.push_back(InFlight{session.conn->SendPinned(session.channel, request), i, nullptr});
    while (sent.size() >= kInFlight) {
      Reply reply;
      size_t i = sent.front().entry;
      done(i, sessions[i]->conn->Wait(sent.front().ticket, &reply));
      sent.pop_front();
    }
  }
  for (InFlight& f : sent) {
    Reply reply;
    done(f.entry, sessions[f.entry]->conn->Wait(f.ticket, &reply));
  }
}

Result<uint64_t> StoreClient::DiskReadCount() {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::ClientStatsReply stats;
  rc = c.conn->Invoke<uds::Op::kClientStats>(uds::NoArgs(), &stats);
  if (rc != ErrorCode::OK) return rc;
  return stats.disk_reads;
}

}  // namespace client
}  // namespace mooncake
