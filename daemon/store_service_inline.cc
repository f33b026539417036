// Requests answered on the event-loop thread (StoreService::TryInline).
//
// Handing a request to a worker costs a futex wake and a context switch, several
// microseconds on a small machine: as much as the rest of a cached read. So the thread
// that cut the frame answers it itself when nothing can block: HOSTNAME, HEALTH, and a
// GET (up to kInlineMaxBytes), EXIST or GET_SIZE the read cache can answer. Everything
// else, including anything malformed or unacceptable (whose handling and logging live in
// the worker handlers), goes to the workers untouched. The answer is written without
// blocking; when the socket is full or a worker is writing, a worker writes it instead.
#include <cstring>

#include "daemon/transfer/daemon_metrics.h"
#include "daemon/service/store_service.h"
#include "daemon/base/tenant_scope.h"

namespace mooncake {

using uds::Op;
using namespace store_detail;

namespace {

// Sends the reply now or hands its frame back for a worker.
// Counts the request (op, started at start_ns) before the reply leaves, so that a client
// that has its answer and then scrapes /metrics finds its request counted.
template <class Reply>
StoreService::Inline Finish(ClientConnection* s, const uds::Message& m, int64_t start_ns,
                            ErrorCode code, const Reply& reply, std::string* deferred) {
  const uint64_t id = m.id;
  // A frame this small stays on the stack: no allocation on the inline path.
  uds::ReplyFrame frame(id, code, reply);
  const char* data = frame.data();
  DaemonMetrics::Get().CountRequest(m.head, code, start_ns);
  switch (s->TrySend(data, frame.size())) {
    case ClientConnection::TrySendResult::kBusy:
      deferred->assign(data, frame.size());
      return StoreService::Inline::kDeferred;
    case ClientConnection::TrySendResult::kSent:
    case ClientConnection::TrySendResult::kFailed:  // the client is closed; nothing to do
      break;
  }
  return StoreService::Inline::kAnswered;
}

}  // namespace

StoreService::Inline StoreService::TryInline(ClientConnection* s, const uds::Message& m,
                                             std::string* deferred) {
  // Anything that does not parse is left for Handle, which logs it and closes.
  switch (static_cast<Op>(m.head)) {
    case Op::kHostname: {
      const int64_t start_ns = MonotonicNanos();
      uds::NoArgs in;
      uds::HostnameReply out;
      if (!uds::ParseFields(m.args, &in)) break;
      return Finish(s, m, start_ns, OnHostname(s, in, &out), out, deferred);
    }
    case Op::kHealth: {
      const int64_t start_ns = MonotonicNanos();
      uds::NoArgs in;
      uds::HealthReply out;
      if (!uds::ParseFields(m.args, &in)) break;
      return Finish(s, m, start_ns, OnHealth(s, in, &out), out, deferred);
    }
    case Op::kGet: {
      const int64_t start_ns = MonotonicNanos();
      uds::GetArgs in;
      if (!cache_->enabled() || !uds::ParseFields(m.args, &in)) break;
      ScopeKeys(s->tenant(), &in);
      char* dest = s->PoolRange(in.pool_offset, in.capacity);
      if (!ValidKey(in.key) || dest == nullptr) break;
      Result<uint64_t> copied = CopyCached(in.key, dest, in.capacity, kInlineMaxBytes);
      if (copied.ok() && copied.value() == 0) break;
      // Too small a buffer: the worker's handler answers it, saying why.
      if (copied.code() == ErrorCode::INVALID_PARAMS) break;
      DaemonMetrics::Get().CountCacheHit();
      DaemonMetrics::Get().CountBytes(TransferKind::kRead, ReplicaTier::kLocalMemory,
                                      copied.ok() ? copied.value() : 0);
      return Finish(s, m, start_ns, copied.code(), uds::GetReply{copied.value()}, deferred);
    }
    case Op::kExist:
    case Op::kGetSize: {
      const int64_t start_ns = MonotonicNanos();
      uds::KeyArgs in;
      ReadCache::Entry cached;
      if (!cache_->enabled() || !uds::ParseFields(m.args, &in)) break;
      ScopeKeys(s->tenant(), &in);
      if (!ValidKey(in.key) || !cache_->Lookup(in.key, &cached)) break;
      if (m.head == static_cast<int64_t>(Op::kExist)) {
        return Finish(s, m, start_ns, ErrorCode::OK, uds::ExistReply{1}, deferred);
      }
      return Finish(s, m, start_ns, ErrorCode::OK, uds::SizeReply{cached.size}, deferred);
    }
    default:
      break;
  }
  return Inline::kNotInline;
}

}  // namespace mooncake
