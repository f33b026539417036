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

#include "daemon/store_service.h"

namespace mooncake {

using uds::ArgReader;
using uds::Op;
using namespace store_detail;

namespace {

// Sends the frame now or hands it back for a worker.
StoreService::Inline Finish(ClientSession* s, const char* data, size_t size,
                            std::string* deferred) {
  switch (s->TrySend(data, size)) {
    case ClientSession::TrySendResult::kBusy:
      deferred->assign(data, size);
      return StoreService::Inline::kDeferred;
    case ClientSession::TrySendResult::kSent:
    case ClientSession::TrySendResult::kFailed:  // the session is closed; nothing to do
      break;
  }
  return StoreService::Inline::kAnswered;
}

StoreService::Inline FinishInt(ClientSession* s, uint64_t id, int32_t code, int64_t value,
                               std::string* deferred) {
  // FrameBuilder keeps a frame this small on the stack: no allocation on the inline path.
  uds::FrameBuilder frame(id, code, code == 0 ? 1 : 0);
  if (code == 0) frame.args().pack(value);
  return Finish(s, frame.data(), frame.size(), deferred);
}

}  // namespace

StoreService::Inline StoreService::TryInline(ClientSession* s, const uds::Message& m,
                                             std::string* deferred) {
  ArgReader a = m.args;  // a copy: a request handed on must reach its handler unread
  switch (static_cast<Op>(m.head)) {
    case Op::kHostname: {
      if (!Done(a)) break;
      uds::FrameBuilder frame(m.id, kOk, 1);
      frame.args().pack(membership_->name());
      const char* data = frame.data();
      return Finish(s, data, frame.size(), deferred);
    }
    case Op::kHealth:
      if (!Done(a)) break;
      return FinishInt(s, m.id, kOk, membership_->healthy() ? 1 : 0, deferred);
    case Op::kGet: {
      if (!cache_->enabled()) break;
      std::string key = a.Str();
      uint64_t offset = a.U64();
      uint64_t capacity = a.U64();
      char* dest = s->PoolRange(offset, capacity);
      if (!Done(a) || !ValidKey(key) || dest == nullptr) break;
      int64_t n = CopyCached(key, dest, capacity, kInlineMaxBytes);
      if (n == 0) break;
      return n < 0 ? FinishInt(s, m.id, static_cast<int32_t>(n), 0, deferred)
                   : FinishInt(s, m.id, kOk, n, deferred);
    }
    case Op::kExist:
    case Op::kGetSize: {
      if (!cache_->enabled()) break;
      std::string key = a.Str();
      ReadCache::Entry cached;
      if (!Done(a) || !ValidKey(key) || !cache_->Lookup(key, &cached)) break;
      int64_t value = m.head == static_cast<int64_t>(Op::kExist) ? 1 : static_cast<int64_t>(cached.size);
      return FinishInt(s, m.id, kOk, value, deferred);
    }
    default:
      break;
  }
  return Inline::kNotInline;
}

}  // namespace mooncake
