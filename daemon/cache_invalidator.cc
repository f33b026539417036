#include "daemon/cluster/cache_invalidator.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "common/base/little_endian.h"
#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "include/mooncake_store.h"

namespace mooncake {

using Clock = std::chrono::steady_clock;

namespace invalidation {

namespace {

constexpr uint8_t kKeys = 1;
constexpr uint8_t kEverything = 2;
constexpr size_t kHeader = 1 + 4;  // what, count
constexpr size_t kKeyLength = 2;

std::string Header(uint8_t what) {
  std::string out;
  AppendLittleEndian(&out, what, 1);
  AppendLittleEndian(&out, 0, 4);  // the count, patched when the payload is closed
  return out;
}

void SetCount(std::string* payload, uint32_t count) {
  char* p = &(*payload)[1];
  PutLittleEndian(&p, count, 4);
}

}  // namespace

std::vector<std::string> EncodeKeys(const std::vector<std::string>& keys,
                                    const std::vector<int32_t>& which, size_t max_payload) {
  std::vector<std::string> out;
  std::string payload = Header(kKeys);
  uint32_t count = 0;
  auto add = [&](const std::string& key) {
    if (count > 0 && payload.size() + kKeyLength + key.size() > max_payload) {
      SetCount(&payload, count);
      out.push_back(std::move(payload));
      payload = Header(kKeys);
      count = 0;
    }
    AppendLittleEndian(&payload, key.size(), kKeyLength);
    payload += key;
    ++count;
  };
  if (which.empty()) {
    for (const std::string& key : keys) add(key);
  } else {
    for (int32_t i : which) {
      if (i >= 0 && static_cast<size_t>(i) < keys.size()) add(keys[static_cast<size_t>(i)]);
    }
  }
  if (count > 0) {
    SetCount(&payload, count);
    out.push_back(std::move(payload));
  }
  return out;
}

std::string EncodeEverything() { return Header(kEverything); }

bool Decode(const std::string& payload, bool* everything, std::vector<std::string>* keys) {
  keys->clear();
  if (payload.size() < kHeader) return false;
  const char* p = payload.data();
  const char* end = p + payload.size();
  uint8_t what = static_cast<uint8_t>(GetLittleEndian(&p, 1));
  uint64_t count = GetLittleEndian(&p, 4);
  *everything = what == kEverything;
  if (what == kEverything) return count == 0 && p == end;
  if (what != kKeys) return false;
  // Every key costs at least three bytes: a count the payload cannot hold is a lie, and
  // reserving for it would let a 5-byte request allocate gigabytes.
  if (count > static_cast<uint64_t>(end - p) / (kKeyLength + 1)) return false;
  keys->reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (end - p < static_cast<ptrdiff_t>(kKeyLength)) return false;
    uint64_t length = GetLittleEndian(&p, kKeyLength);
    if (length == 0 || length > tenant_key::kMaxStoredKeyLen ||
        static_cast<uint64_t>(end - p) < length) {
      return false;
    }
    keys->emplace_back(p, length);
    p += length;
  }
  return p == end;
}

}  // namespace invalidation

// The holders of one Forget: what became of each.
struct CacheInvalidator::Round {
  enum State { kTelling, kAcknowledged, kFailed };
  explicit Round(size_t n) : state(n, kTelling) {}
  void Set(size_t i, bool acknowledged) {
    std::lock_guard<std::mutex> lock(mu);
    state[i] = acknowledged ? kAcknowledged : kFailed;
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<State> state;  // guarded by mu
};

CacheInvalidator::CacheInvalidator(ControlCaller* caller, size_t threads)
    : caller_(caller), workers_(std::max<size_t>(1, threads)) {}

ControlHandler CacheInvalidator::Handler(ReadCache* cache) {
  return [cache](const std::string& request, std::string* reply) {
    bool everything = false;
    std::vector<std::string> keys;
    if (!invalidation::Decode(request, &everything, &keys)) {
      MC_LOG_WARN("transfer port: malformed INVALIDATE (%zu bytes) refused", request.size());
      return ErrorCode::INVALID_PARAMS;
    }
    // Done before the acknowledgement leaves: the writer answers its client only after it.
    if (everything) {
      cache->Clear();
    } else {
      for (const std::string& key : keys) cache->Invalidate(key);
    }
    reply->clear();
    return ErrorCode::OK;
  };
}

bool CacheInvalidator::Tell(const std::string& address, const std::vector<std::string>& payloads,
                            Clock::time_point deadline) {
  for (const std::string& payload : payloads) {
    std::string reply;
    if (caller_->CallControl(address, transfer::ControlChannel::kCacheInvalidate, payload, &reply,
                             deadline) != ErrorCode::OK) {
      return false;
    }
  }
  return true;
}

CacheInvalidator::Outcome CacheInvalidator::Forget(const StaleCaches& stale,
                                                   const std::vector<std::string>& keys,
                                                   bool everything) {
  Outcome outcome;
  const std::vector<rpc::CacheHolder>& holders = stale.holders;
  if (holders.empty()) return outcome;
  // Far beyond any lease, short of overflowing the clock.
  constexpr int64_t kMaxWaitMs = int64_t{1} << 40;
  auto round = std::make_shared<Round>(holders.size());
  std::vector<Clock::time_point> deadlines(holders.size());
  std::vector<std::vector<std::string>> payloads(holders.size());
  std::vector<char> tried(holders.size(), 0);
  Clock::time_point now = Clock::now();
  int first = -1;  // told on this thread
  for (size_t i = 0; i < holders.size(); ++i) {
    const rpc::CacheHolder& h = holders[i];
    deadlines[i] = stale.received_at +
                   std::chrono::milliseconds(std::clamp<int64_t>(h.ms_left, 0, kMaxWaitMs));
    if (h.address.empty() || deadlines[i] <= now) {
      round->state[i] = Round::kFailed;  // nobody to tell: the deadline is waited out
      outcome.waited_out += deadlines[i] > now;
      if (h.address.empty() && deadlines[i] > now) {
        MC_LOG_INFO("read caches the master cannot name may hold %s: waiting %lld ms for "
                    "their leases to end", everything ? "removed keys" : "the changed keys",
                    static_cast<long long>(h.ms_left));
      }
      continue;
    }
    payloads[i] = everything ? std::vector<std::string>{invalidation::EncodeEverything()}
                             : invalidation::EncodeKeys(keys, h.keys, transfer::kMaxControlPayload);
    tried[i] = 1;
    if (first < 0) first = static_cast<int>(i);
  }
  // Every state is set: from here on the workers change them, under the round's lock.
  for (size_t i = 0; i < holders.size(); ++i) {
    if (!tried[i] || static_cast<int>(i) == first) continue;
    workers_.Submit([this, round, i, address = holders[i].address, sent = payloads[i],
                     deadline = deadlines[i]] { round->Set(i, Tell(address, sent, deadline)); });
  }
  if (first >= 0) {
    size_t i = static_cast<size_t>(first);
    round->Set(i, Tell(holders[i].address, payloads[i], deadlines[i]));
  }
  // Until each holder has acknowledged or its deadline has passed.
  std::unique_lock<std::mutex> lock(round->mu);
  for (;;) {
    now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    for (size_t i = 0; i < holders.size(); ++i) {
      if (round->state[i] != Round::kAcknowledged && deadlines[i] > now) {
        next = std::min(next, deadlines[i]);
      }
    }
    if (next == Clock::time_point::max()) break;
    round->cv.wait_until(lock, next);
  }
  for (size_t i = 0; i < holders.size(); ++i) {
    const rpc::CacheHolder& h = holders[i];
    if (round->state[i] == Round::kAcknowledged) {
      ++outcome.told;
    } else if (tried[i]) {
      ++outcome.waited_out;
      MC_LOG_WARN("read cache of daemon %lld (%s) did not confirm an invalidation: waited "
                  "%lld ms for its lease to end", static_cast<long long>(h.daemon_id),
                  h.address.c_str(), static_cast<long long>(h.ms_left));
    }
  }
  return outcome;
}

}  // namespace mooncake
