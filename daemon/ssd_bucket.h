// One bucket of the SSD tier (daemon/ssd_store/ssd_store.h, docs/ssd.md): the append-only data file
// `<dir>/<id>.bucket` and its `.meta` file, the record codec of `.meta`, and its scan at
// start.
//
// `.meta` is a 16-byte header ("MCSSDMT1", the bucket id as u64) and records, each
//   u32 body length | u32 CRC-32C of the body | body
// (little-endian). A body is
//   u8 type (1 put, 2 drop) | u16 key length | key | u64 offset
// and, for a put,
//   | u64 length | u32 CRC-32C of the value | i64 the master's checksum (-1: none)
//   | u32 CRC-32C of each kSsdCheckBlock of the value, ceil(length / kSsdCheckBlock) of them
// A put says the value of key is at [offset, offset + length) of the bucket file, in a slot
// of RoundUpToPage(length) bytes starting at a page-aligned offset; a drop says the put of
// the same key and offset is dead (the key was replaced, forgotten or found corrupt).
//
// Input policy (ParseMeta): the file may be torn (a crash mid-append), truncated, or any
// bytes at all. A record whose length or CRC does not hold, or whose body does not parse,
// ends the scan: nothing after it is trusted. A record that checks but names a range
// outside the bucket file as it is (a bucket cut short) is skipped alone.
//
// Thread-safety: the codec functions are pure. An SsdBucket's fds and paths never change;
// AppendMeta and the syncs are called by one thread at a time (the store's sync path).
#ifndef MOONCAKE_DAEMON_SSD_BUCKET_H_
#define MOONCAKE_DAEMON_SSD_BUCKET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mooncake {

// Each value is checked in blocks of this size, so that reading part of a large value
// reads (and checks) only the blocks the range touches.
constexpr uint64_t kSsdCheckBlock = 256 << 10;
constexpr size_t kSsdMetaHeaderSize = 16;
// The largest body a record may have: the longest stored key, and the block CRCs of a
// value of 1 TiB (a bucket's largest size).
constexpr uint32_t kSsdMaxRecordBody = 64 * 1024 + 4 * ((1ull << 40) / kSsdCheckBlock);

inline uint64_t CheckBlocksOf(uint64_t length) {
  return (length + kSsdCheckBlock - 1) / kSsdCheckBlock;
}

struct MetaRecord {
  enum Type : uint8_t { kPut = 1, kDrop = 2 };
  Type type = kPut;
  std::string key;
  uint64_t offset = 0;
  // Put only:
  uint64_t length = 0;
  uint32_t data_crc = 0;
  int64_t checksum = -1;
  std::vector<uint32_t> block_crcs;
};

std::string EncodeMetaHeader(uint64_t bucket_id);
void AppendMetaRecord(std::string* out, const MetaRecord& record);

struct MetaScan {
  bool header_ok = false;  // false: nothing of the file is trusted
  uint64_t valid_bytes = 0;  // the header and every record up to the first bad one
  uint64_t records = 0;      // records read (those skipped included)
  uint64_t skipped = 0;      // checked records naming a range outside the bucket file
  bool torn = false;         // bytes past valid_bytes that do not form a record
};

// Reads the `.meta` bytes of bucket bucket_id, whose data file is bucket_bytes long, and
// calls on_record for each record that holds, in file order (see the input policy above).
MetaScan ParseMeta(std::string_view bytes, uint64_t bucket_id, uint64_t bucket_bytes,
                   const std::function<void(MetaRecord&&)>& on_record);

// The puts a bucket's records leave live: each put not followed by a drop of the same key
// and offset, and of a key put twice in the bucket the later one. In file order.
std::vector<MetaRecord> LiveRecords(std::vector<MetaRecord> records);

// The files of one bucket.
class SsdBucket {
 public:
  static std::string DataPath(const std::string& dir, uint64_t id);
  static std::string MetaPath(const std::string& dir, uint64_t id);

  // Creates both files (the meta file with its header); with_meta false (persistence
  // disabled) makes no meta file. The data file is preallocated to preallocate bytes where
  // the filesystem can (its size too: writes inside the size are overwrites, which ext4
  // runs in parallel; extending writes of one file take turns); the store cuts it to what
  // it holds when it seals the bucket. nullptr with *error.
  static std::unique_ptr<SsdBucket> Create(const std::string& dir, uint64_t id, bool direct,
                                           bool with_meta, uint64_t preallocate,
                                           std::string* error);
  // Opens the files of a bucket found at start, the meta file cut back to meta_bytes (its
  // valid part: later appends must follow a record that checks).
  static std::unique_ptr<SsdBucket> OpenExisting(const std::string& dir, uint64_t id,
                                                 bool direct, uint64_t meta_bytes,
                                                 std::string* error);
  ~SsdBucket();
  SsdBucket(const SsdBucket&) = delete;
  SsdBucket& operator=(const SsdBucket&) = delete;

  uint64_t id() const { return id_; }
  int data_fd() const { return data_fd_; }

  // Appends encoded records to the meta file; on a failure (ENOSPC) cuts the file back so
  // that a retry appends after the last whole record. false with *error.
  bool AppendMeta(std::string_view records, std::string* error);
  bool SyncData(std::string* error);
  bool SyncMeta(std::string* error);
  // Cuts the data file back to bytes (the tail of a write that failed).
  void TruncateData(uint64_t bytes);
  // Unlinks both files (the fds stay valid until the bucket is destroyed).
  void RemoveFiles();

 private:
  SsdBucket(std::string dir, uint64_t id) : dir_(std::move(dir)), id_(id) {}

  const std::string dir_;
  const uint64_t id_;
  int data_fd_ = -1;
  int meta_fd_ = -1;
  uint64_t meta_bytes_ = 0;  // the sync path's
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SSD_BUCKET_H_
