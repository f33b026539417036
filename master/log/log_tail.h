// The newest records of the operation log, kept in memory for the standbys to pull
// (master/ha/log_server.h): a bounded ring of at most max_bytes of payload (at least the
// newest record is always kept). The OpLog feeds it from Append, under its own mutex, so
// the ring holds consecutive records in seq order, and from Recover (a restarted master
// serves what its log still had without sending every standby a snapshot).
//
// Payloads are held as shared immutable strings: a reader copies pointers under the lock
// (never the bytes), so a pull of megabytes holds up appends for microseconds only.
//
// Lock order: OpLog::mu_ -> LogTail::mu_ (a leaf). Thread-safe.
#ifndef MOONCAKE_MASTER_LOG_TAIL_H_
#define MOONCAKE_MASTER_LOG_TAIL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace mooncake {

class LogTail {
 public:
  struct Entry {
    uint64_t seq = 0;
    std::shared_ptr<const std::string> payload;
  };

  explicit LogTail(uint64_t max_bytes) : max_bytes_(max_bytes) {}
  LogTail(const LogTail&) = delete;
  LogTail& operator=(const LogTail&) = delete;

  // seq must be the last held + 1, or the ring is emptied first (a gap: a new base).
  void Add(uint64_t seq, std::string_view payload);
  // Forgets everything: the next record added is after `last` (a standby's bootstrap).
  void Reset(uint64_t last);

  enum class ReadResult { kOk, kGone, kPastEnd };
  // The records from from_seq on, as many as fit in max_bytes of payload (at least one when
  // from_seq is held). kGone: from_seq is older than the oldest held (and not just after
  // the base); kPastEnd: from_seq > last + 1. kOk with nothing: from_seq == last + 1.
  ReadResult Read(uint64_t from_seq, uint64_t max_bytes, std::vector<Entry>* out) const;
  // The CRC-32C of record seq's payload, false when it is not held.
  bool Crc(uint64_t seq, uint32_t* crc) const;
  // The last seq added (or Reset's), 0 before any.
  uint64_t last() const;

 private:
  const uint64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);  // consecutive seqs, base_ + 1 ...
  uint64_t base_ ABSL_GUARDED_BY(mu_) = 0;  // the seq before the oldest held
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;  // payload bytes held
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_LOG_TAIL_H_
