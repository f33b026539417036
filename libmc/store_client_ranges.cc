// Ranged gets: only the fragments' bytes cross the pool (see store_client.h).
//
// A fragment whose destination lies in the pool goes to the daemon as its own pool offset
// (zero copy). The other fragments of a get share one staging block of their total size,
// packed in order, and are copied out once the daemon answered; when the pool has no such
// block free even after the frame in progress was sent, each of them goes on its own
// through chunks of at most kRangeChunkBytes (GET_RANGES, one chunk in flight), so any
// fragment fits any non-empty pool. Frames (BATCH_GET_RANGES) hold at most
// uds::kMaxRangesPerRequest fragments, uds::kMaxBatch entries and about kFrameKeyBudget
// bytes of keys; a get whose fragments do not fit one frame continues in the next, as an
// entry for the same key.
#include <algorithm>
#include <chrono>

#include "libmc/store_client.h"

namespace mooncake {
namespace client {

namespace {

constexpr uint64_t kRangeChunkBytes = 4ull << 20;
constexpr uint64_t kRangeMinChunkBytes = 64ull << 10;
constexpr size_t kFrameKeyBudget = 16u << 20;

// Where a fragment sent in a frame came from, and where its bytes go when staged.
struct Sent {
  StoreClient::Range* range;
  char* dest;                // the caller's bytes
  const MemoryPlace* place;  // where dest lives (its get's)
  const char* staged;        // its bytes in a staging block, or null (zero copy or empty)
};

// A BATCH_GET_RANGES request being filled.
class RangeFrame {
 public:
  explicit RangeFrame(Connection& conn) : conn_(conn) {}

  size_t fragments() const { return sent_.size(); }
  bool empty() const { return args_.entries.empty(); }

  // Room for n more fragments of a get of key: a new entry for it, after sending the frame
  // first when it is full.
  void Open(const std::string& key, size_t n) {
    if (!empty() && (sent_.size() + n > uds::kMaxRangesPerRequest ||
                     args_.entries.size() >= uds::kMaxBatch || key_bytes_ >= kFrameKeyBudget)) {
      Flush();
    }
    args_.entries.push_back(uds::GetRangesArgs{key, {}});
    key_bytes_ += key.size();
  }

  // staged: the fragment's bytes in block (kept until the daemon answered), or null.
  void Add(StoreClient::Range* range, uint64_t pool_offset, char* dest, const MemoryPlace* place,
           const char* staged, const std::shared_ptr<PoolBlock>& block = nullptr) {
    if (sent_.size() >= uds::kMaxRangesPerRequest) {
      std::string key = args_.entries.back().key;
      Flush();
      Open(key, 1);
    }
    args_.entries.back().ranges.push_back({range->src_offset, range->length, pool_offset});
    sent_.push_back({range, dest, place, staged});
    if (block && (blocks_->empty() || blocks_->back() != block)) blocks_->push_back(block);
  }

  void Flush() {
    if (empty()) return;
    uds::GetRangesReply reply;
    ErrorCode code = conn_.Invoke<uds::Op::kBatchGetRanges>(args_, &reply, blocks_);
    if (code == ErrorCode::OK && reply.values.size() != sent_.size()) {
      code = ErrorCode::INTERNAL_ERROR;
    }
    for (size_t i = 0; i < sent_.size(); ++i) {
      Sent& s = sent_[i];
      int64_t v = code == ErrorCode::OK ? reply.values[i] : ToInt(code);
      if (v < 0) {
        s.range->result = FromWire(v);
      } else if (static_cast<uint64_t>(v) != s.range->length) {
        s.range->result = ErrorCode::INTERNAL_ERROR;  // the daemon reads a fragment whole
      } else {
        ErrorCode copied = ErrorCode::OK;
        if (s.staged != nullptr && v > 0) {
          copied = CopyToCaller(*s.place, s.dest, s.staged, s.range->length);
        }
        s.range->result = copied == ErrorCode::OK ? Result<uint64_t>(static_cast<uint64_t>(v))
                                                  : Result<uint64_t>(copied);
      }
    }
    args_.entries.clear();
    sent_.clear();
    key_bytes_ = 0;
    // A fresh vector: after a timeout the connection keeps the old blocks until the
    // daemon answers.
    blocks_ = std::make_shared<std::vector<std::shared_ptr<PoolBlock>>>();
  }

 private:
  Connection& conn_;
  uds::BatchGetRangesArgs args_;
  std::vector<Sent> sent_;
  size_t key_bytes_ = 0;
  std::shared_ptr<std::vector<std::shared_ptr<PoolBlock>>> blocks_ =
      std::make_shared<std::vector<std::shared_ptr<PoolBlock>>>();
};

bool InsideBuffer(const StoreClient::Range& r, uint64_t buffer_size) {
  return r.length <= buffer_size && r.dst_offset <= buffer_size - r.length;
}

}  // namespace

void StoreClient::BatchGetRanges(std::vector<RangeGet>& gets) {
  Context c;
  ErrorCode rc = Acquire(&c);
  for (RangeGet& g : gets) {
    for (Range& r : g.ranges) r.result = rc != ErrorCode::OK ? rc : ErrorCode::INVALID_PARAMS;
  }
  if (rc != ErrorCode::OK) return;
  RangeFrame frame(*c.conn);
  for (RangeGet& g : gets) {
    if (g.ranges.empty()) continue;
    std::vector<Range*> staged;  // fragments whose destination is outside the pool
    uint64_t staged_bytes = 0;
    frame.Open(g.key, g.ranges.size());
    for (Range& r : g.ranges) {
      if (!InsideBuffer(r, g.buffer_size)) continue;  // -600, never sent
      char* dest = g.buffer + r.dst_offset;
      uint64_t offset = 0;
      if (r.length == 0) {  // the daemon still checks it against the value
        frame.Add(&r, 0, dest, &g.place, nullptr);
      } else if (c.pool && c.pool->Contains(dest, r.length, &offset)) {
        frame.Add(&r, offset, dest, &g.place, nullptr);
      } else {
        staged.push_back(&r);
        staged_bytes += r.length;
      }
    }
    if (staged.empty()) continue;
    std::shared_ptr<PoolBlock> block;
    if (c.pool) {
      block = c.pool->TryStage(staged_bytes, staged_bytes);
      if (!block && !frame.empty()) {
        frame.Flush();  // its blocks come back
        block = c.pool->TryStage(staged_bytes, staged_bytes);
      }
    }
    if (!block) {
      for (Range* r : staged) {
        r->result = c.pool ? GetRangeChunked(c, g.key, g.buffer + r->dst_offset, g.place,
                                             r->src_offset, r->length)
                           : Result<uint64_t>(ErrorCode::INVALID_PARAMS);  // no pool
      }
      continue;
    }
    if (frame.empty()) frame.Open(g.key, staged.size());
    uint64_t at = 0;
    for (Range* r : staged) {
      frame.Add(r, block->offset() + at, g.buffer + r->dst_offset, &g.place, block->data() + at,
                block);
      at += r->length;
    }
  }
  frame.Flush();
}

Result<uint64_t> StoreClient::GetRangeChunked(Context& c, const std::string& key, char* dest,
                                              const MemoryPlace& place, uint64_t src_offset,
                                              uint64_t length) {
  uint64_t done = 0;
  while (done < length) {
    uint64_t want = std::min(length - done, kRangeChunkBytes);
    uint64_t least = std::min({want, kRangeMinChunkBytes, c.pool->capacity()});
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(c.conn->timeout_ms());
    std::shared_ptr<PoolBlock> block = c.pool->Stage(least, want, deadline);
    if (!block) return ErrorCode::NO_AVAILABLE_HANDLE;
    uds::GetRangesArgs args{key, {{src_offset + done, block->size(), block->offset()}}};
    uds::GetRangesReply reply;
    ErrorCode code = c.conn->Invoke<uds::Op::kGetRanges>(args, &reply, block);
    if (code != ErrorCode::OK) return code;
    if (reply.values.size() != 1) return ErrorCode::INTERNAL_ERROR;
    if (reply.values[0] < 0) return FromWire(reply.values[0]);
    if (static_cast<uint64_t>(reply.values[0]) != block->size()) return ErrorCode::INTERNAL_ERROR;
    code = CopyToCaller(place, dest + done, block->data(), block->size());
    if (code != ErrorCode::OK) return code;
    done += block->size();
  }
  return length;
}

}  // namespace client
}  // namespace mooncake
