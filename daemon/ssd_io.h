// The SSD tier's I/O (daemon/ssd_store/ssd_store.h): io_uring rings (liburing) that run reads and
// writes of bucket files in batches, the aligned buffers O_DIRECT needs, and the probe
// that finds out whether a directory's filesystem takes O_DIRECT at all.
//
// Alignment. With O_DIRECT every buffer address, file offset and length is a multiple of
// kSsdPage; the store keeps its objects at page-aligned offsets in page-padded slots so that
// this always holds for the file side. Buffered I/O (the fallback) has no such rule.
//
// Thread-safety: an IoRing belongs to one thread at a time (RingPool hands them out); the
// pool and AlignedBuffer's allocation may be used from any thread.
#ifndef MOONCAKE_DAEMON_SSD_IO_H_
#define MOONCAKE_DAEMON_SSD_IO_H_

#include <liburing.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mooncake {

constexpr uint64_t kSsdPage = 4096;

inline uint64_t RoundUpToPage(uint64_t n) { return (n + kSsdPage - 1) & ~(kSsdPage - 1); }
inline bool IsPageAligned(uint64_t n) { return (n & (kSsdPage - 1)) == 0; }
inline bool IsPageAligned(const void* p) {
  return IsPageAligned(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)));
}

// Page-aligned heap memory (O_DIRECT's buffers).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);  // rounded up to a page; aborts if memory is out
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

// One read or write of a file range. The ring resumes a short transfer itself: an op ends
// with done == length, or with error set (an errno; ENODATA for a read that met the end
// of the file, ENOSPC for a write the filesystem took no byte of).
struct IoOp {
  bool write = false;
  int fd = -1;
  char* buffer = nullptr;
  uint32_t length = 0;
  uint64_t offset = 0;
  uint64_t tag = 0;  // the caller's, returned untouched

  uint32_t done = 0;
  int error = 0;
};

class IoRing {
 public:
  // A ring of depth entries; nullptr with *error when the kernel refuses one.
  static std::unique_ptr<IoRing> Create(unsigned depth, std::string* error);
  ~IoRing();
  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;

  unsigned depth() const { return depth_; }
  unsigned in_flight() const { return in_flight_; }

  // Queues op (kept alive by the caller until WaitOne returns it), submitted with the next
  // WaitOne: batches of Start calls go to the kernel in one system call. The caller keeps
  // in_flight() below depth().
  void Start(IoOp* op);
  // Submits what is queued and waits until one op ends; nullptr when none is in flight.
  IoOp* WaitOne();
  // The ring itself failed (not one op): ops still in flight never end. RingPool drops it.
  bool broken() const { return broken_; }

 private:
  IoRing() = default;
  void Queue(IoOp* op);

  io_uring ring_{};
  unsigned depth_ = 0;
  unsigned in_flight_ = 0;
  bool initialized_ = false;
  bool broken_ = false;
};

// Rings for the readers: one per concurrent reader, made on demand up to max_rings, then
// readers wait for one to be returned.
class RingPool {
 public:
  RingPool(unsigned max_rings, unsigned depth) : max_rings_(max_rings), depth_(depth) {}

  class Lease {
   public:
    Lease(RingPool* pool, std::unique_ptr<IoRing> ring) : pool_(pool), ring_(std::move(ring)) {}
    Lease(Lease&&) = default;
    ~Lease();
    IoRing* get() const { return ring_.get(); }  // nullptr: the kernel gave no ring

   private:
    RingPool* pool_;
    std::unique_ptr<IoRing> ring_;
  };
  Lease Acquire();

 private:
  const unsigned max_rings_;
  const unsigned depth_;
  std::mutex mu_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<IoRing>> free_;  // guarded by mu_
  unsigned created_ = 0;                       // guarded by mu_
};

// Whether files in dir take O_DIRECT with page alignment: writes, reads back and removes
// a probe file (dir/.direct-probe). false with *why (for the one log line) when they do not.
bool ProbeDirectIo(const std::string& dir, std::string* why);

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SSD_IO_H_
