// The CRC32C of a value that moves in chunks (the staged put and get), which arrive in any
// order and on several workers at once: each chunk's CRC is kept with its range, and the
// whole value's CRC is combined from them once they cover it.
//
// Thread-safety: every method may be called from any thread.
#ifndef MOONCAKE_DAEMON_CHUNKED_CHECKSUM_H_
#define MOONCAKE_DAEMON_CHUNKED_CHECKSUM_H_

#include <cstdint>
#include <map>

#include "absl/synchronization/mutex.h"

namespace mooncake {

class ChunkedChecksum {
 public:
  // Records the chunk [offset, offset + length) of the value, whose bytes are at data.
  void Add(uint64_t offset, const char* data, uint64_t length);
  // The same with the chunk's CRC already known (a transport computed it on the way).
  void AddCrc(uint64_t offset, uint64_t length, uint32_t crc);
  // The value's CRC when the chunks cover [0, size) exactly, each byte once; false when
  // they leave a gap, overlap (a chunk sent twice) or run past size.
  bool Total(uint64_t size, uint32_t* crc) const;
  // The sum of the chunks' lengths: Total is worth asking once it reaches the size.
  uint64_t bytes() const;

 private:
  struct Chunk {
    uint64_t length;
    uint32_t crc;
  };
  mutable absl::Mutex mu_;
  std::multimap<uint64_t, Chunk> chunks_ ABSL_GUARDED_BY(mu_);  // by offset
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_CHUNKED_CHECKSUM_H_
