#include "daemon/ssd_store/ssd_bucket.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "common/base/crc32c.h"
#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "daemon/ssd_store/ssd_io.h"

namespace mooncake {

namespace {

constexpr char kMetaMagic[8] = {'M', 'C', 'S', 'S', 'D', 'M', 'T', '1'};

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v));
  out->push_back(static_cast<char>(v >> 8));
}
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// Reads little-endian integers off the front of a view; false once it runs short.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool U8(uint8_t* v) { return Take(1, v); }
  bool U16(uint16_t* v) { return Take(2, v); }
  bool U32(uint32_t* v) { return Take(4, v); }
  bool U64(uint64_t* v) { return Take(8, v); }
  bool Bytes(size_t n, std::string* out) {
    if (bytes_.size() < n) return false;
    out->assign(bytes_.data(), n);
    bytes_.remove_prefix(n);
    return true;
  }
  size_t left() const { return bytes_.size(); }

 private:
  template <typename T>
  bool Take(size_t n, T* v) {
    if (bytes_.size() < n) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) x |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[i])) << (8 * i);
    *v = static_cast<T>(x);
    bytes_.remove_prefix(n);
    return true;
  }
  std::string_view bytes_;
};

// A body that parses: the known type, a stored key's length, as many block CRCs as the
// length needs and nothing after them.
bool DecodeBody(std::string_view body, MetaRecord* r) {
  Reader in(body);
  uint8_t type = 0;
  uint16_t key_length = 0;
  if (!in.U8(&type) || (type != MetaRecord::kPut && type != MetaRecord::kDrop)) return false;
  r->type = static_cast<MetaRecord::Type>(type);
  if (!in.U16(&key_length) || key_length == 0 || key_length > tenant_key::kMaxStoredKeyLen ||
      !in.Bytes(key_length, &r->key) || !in.U64(&r->offset)) {
    return false;
  }
  if (r->type == MetaRecord::kDrop) return in.left() == 0;
  uint64_t checksum = 0;
  if (!in.U64(&r->length) || !in.U32(&r->data_crc) || !in.U64(&checksum)) return false;
  r->checksum = static_cast<int64_t>(checksum);
  const uint64_t blocks = CheckBlocksOf(r->length);
  if (in.left() != blocks * 4) return false;  // also bounds the vector by the body's size
  r->block_crcs.resize(blocks);
  for (uint32_t& crc : r->block_crcs) in.U32(&crc);
  return true;
}

}  // namespace

std::string EncodeMetaHeader(uint64_t bucket_id) {
  std::string out(kMetaMagic, sizeof(kMetaMagic));
  PutU64(&out, bucket_id);
  return out;
}

void AppendMetaRecord(std::string* out, const MetaRecord& r) {
  std::string body;
  body.push_back(static_cast<char>(r.type));
  PutU16(&body, static_cast<uint16_t>(r.key.size()));
  body += r.key;
  PutU64(&body, r.offset);
  if (r.type == MetaRecord::kPut) {
    PutU64(&body, r.length);
    PutU32(&body, r.data_crc);
    PutU64(&body, static_cast<uint64_t>(r.checksum));
    for (uint32_t crc : r.block_crcs) PutU32(&body, crc);
  }
  PutU32(out, static_cast<uint32_t>(body.size()));
  PutU32(out, Crc32c(body.data(), body.size()));
  *out += body;
}

MetaScan ParseMeta(std::string_view bytes, uint64_t bucket_id, uint64_t bucket_bytes,
                   const std::function<void(MetaRecord&&)>& on_record) {
  MetaScan scan;
  if (bytes.size() < kSsdMetaHeaderSize ||
      bytes.substr(0, kSsdMetaHeaderSize) != EncodeMetaHeader(bucket_id)) {
    return scan;
  }
  scan.header_ok = true;
  size_t at = kSsdMetaHeaderSize;
  scan.valid_bytes = at;
  while (at < bytes.size()) {
    Reader head(bytes.substr(at));
    uint32_t body_length = 0;
    uint32_t crc = 0;
    if (!head.U32(&body_length) || !head.U32(&crc) || body_length > kSsdMaxRecordBody ||
        body_length > bytes.size() - at - 8) {
      scan.torn = true;
      break;
    }
    const std::string_view body = bytes.substr(at + 8, body_length);
    MetaRecord record;
    if (Crc32c(body.data(), body.size()) != crc || !DecodeBody(body, &record)) {
      scan.torn = true;
      break;
    }
    at += 8 + body_length;
    scan.valid_bytes = at;
    ++scan.records;
    // A slot lies page-aligned inside the file as it is now; a drop names a slot too.
    const bool inside = IsPageAligned(record.offset) && record.offset <= bucket_bytes &&
                        record.length <= bucket_bytes &&
                        RoundUpToPage(record.length) <= bucket_bytes - record.offset;
    if (!inside) {
      ++scan.skipped;
      continue;
    }
    on_record(std::move(record));
  }
  return scan;
}

std::vector<MetaRecord> LiveRecords(std::vector<MetaRecord> records) {
  // key -> index of its latest live put.
  std::map<std::string, size_t> latest;
  std::vector<bool> live(records.size(), false);
  for (size_t i = 0; i < records.size(); ++i) {
    const MetaRecord& r = records[i];
    auto it = latest.find(r.key);
    if (r.type == MetaRecord::kPut) {
      if (it != latest.end()) {
        live[it->second] = false;
        it->second = i;
      } else {
        latest.emplace(r.key, i);
      }
      live[i] = true;
    } else if (it != latest.end() && records[it->second].offset == r.offset) {
      live[it->second] = false;
      latest.erase(it);
    }
  }
  std::vector<MetaRecord> out;
  for (size_t i = 0; i < records.size(); ++i) {
    if (live[i]) out.push_back(std::move(records[i]));
  }
  return out;
}

std::string SsdBucket::DataPath(const std::string& dir, uint64_t id) {
  return dir + "/" + std::to_string(id) + ".bucket";
}

std::string SsdBucket::MetaPath(const std::string& dir, uint64_t id) {
  return dir + "/" + std::to_string(id) + ".meta";
}

std::unique_ptr<SsdBucket> SsdBucket::Create(const std::string& dir, uint64_t id, bool direct,
                                             bool with_meta, uint64_t preallocate,
                                             std::string* error) {
  std::unique_ptr<SsdBucket> b(new SsdBucket(dir, id));
  const std::string data_path = DataPath(dir, id);
  b->data_fd_ = open(data_path.c_str(),
                     O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
  if (b->data_fd_ < 0) {
    *error = "create " + data_path + ": " + std::strerror(errno);
    return nullptr;
  }
  // No room for all of it (or no fallocate): the bucket grows as it is written instead.
  if (preallocate > 0 && fallocate(b->data_fd_, 0, 0, static_cast<off_t>(preallocate)) != 0) {
    b->TruncateData(0);
  }
  if (!with_meta) return b;
  const std::string meta_path = MetaPath(dir, id);
  b->meta_fd_ = open(meta_path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
  if (b->meta_fd_ < 0) {
    *error = "create " + meta_path + ": " + std::strerror(errno);
    b->RemoveFiles();
    return nullptr;
  }
  if (!b->AppendMeta(EncodeMetaHeader(id), error)) {
    b->RemoveFiles();
    return nullptr;
  }
  return b;
}

std::unique_ptr<SsdBucket> SsdBucket::OpenExisting(const std::string& dir, uint64_t id,
                                                   bool direct, uint64_t meta_bytes,
                                                   std::string* error) {
  std::unique_ptr<SsdBucket> b(new SsdBucket(dir, id));
  const std::string data_path = DataPath(dir, id);
  const std::string meta_path = MetaPath(dir, id);
  b->data_fd_ = open(data_path.c_str(), O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0));
  b->meta_fd_ = open(meta_path.c_str(), O_RDWR | O_CLOEXEC);
  if (b->data_fd_ < 0 || b->meta_fd_ < 0) {
    *error = "open " + data_path + " / .meta: " + std::strerror(errno);
    return nullptr;
  }
  if (ftruncate(b->meta_fd_, static_cast<off_t>(meta_bytes)) != 0) {
    *error = "truncate " + meta_path + ": " + std::strerror(errno);
    return nullptr;
  }
  b->meta_bytes_ = meta_bytes;
  return b;
}

SsdBucket::~SsdBucket() {
  if (data_fd_ >= 0) close(data_fd_);
  if (meta_fd_ >= 0) close(meta_fd_);
}

bool SsdBucket::AppendMeta(std::string_view records, std::string* error) {
  if (meta_fd_ < 0) return true;  // persistence disabled: no meta file
  size_t done = 0;
  while (done < records.size()) {
    const ssize_t n = pwrite(meta_fd_, records.data() + done, records.size() - done,
                             static_cast<off_t>(meta_bytes_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = MetaPath(dir_, id_) + ": " + std::strerror(n < 0 ? errno : ENOSPC);
      // A partial record would end every later scan of this file before the records
      // appended after it.
      if (ftruncate(meta_fd_, static_cast<off_t>(meta_bytes_)) != 0) {
        *error += " (and cutting it back failed)";
      }
      return false;
    }
    done += static_cast<size_t>(n);
  }
  meta_bytes_ += records.size();
  return true;
}

bool SsdBucket::SyncData(std::string* error) {
  if (fdatasync(data_fd_) == 0) return true;
  *error = DataPath(dir_, id_) + ": fdatasync: " + std::strerror(errno);
  return false;
}

bool SsdBucket::SyncMeta(std::string* error) {
  if (meta_fd_ < 0 || fdatasync(meta_fd_) == 0) return true;
  *error = MetaPath(dir_, id_) + ": fdatasync: " + std::strerror(errno);
  return false;
}

void SsdBucket::TruncateData(uint64_t bytes) {
  if (ftruncate(data_fd_, static_cast<off_t>(bytes)) != 0) {
    // The tail stays, as dead space the index never names.
    MC_LOG_WARN("ssd: cutting %s back: %s", DataPath(dir_, id_).c_str(), std::strerror(errno));
  }
}

void SsdBucket::RemoveFiles() {
  unlink(DataPath(dir_, id_).c_str());
  if (meta_fd_ >= 0) unlink(MetaPath(dir_, id_).c_str());
}

}  // namespace mooncake
