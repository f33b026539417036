// The SSD tier's `.meta` files (daemon/ssd_store/ssd_bucket.h), parsed as the daemon's scan at start
// parses them, then a whole SsdStore opened over them (daemon/ssd_store/ssd_store.h).
//
// Input: sections (fuzz/fuzz_util.h): tag 0 the bucket file's length (u32 little-endian,
// at most 4 MiB: the store reads what the records name), tag 1 the `.meta` bytes of bucket
// 1, tag 2 those of bucket 2 (whose data file is as long as bucket 1's).
//
// Invariants:
//  - the scan trusts a prefix: valid_bytes <= the size, the header first, and scanning
//    that prefix alone gives the same records, untorn;
//  - every record it reports names a page-aligned slot inside the bucket file, a stored
//    key's length, and a put as many block CRCs as its length needs;
//  - the reported records, encoded again, parse back the same (the codec's fixed point);
//  - LiveRecords leaves puts only, one per key, all among the records;
//  - a store opened over the files (strict mode) lists exactly keys those live records
//    name, each with its length, and a read of each answers OK or CHECKSUM_MISMATCH (the
//    data file is zeros: a record whose CRCs say otherwise is never served), never more.
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/base/tenant_key.h"
#include "daemon/ssd_store/ssd_bucket.h"
#include "daemon/ssd_store/ssd_io.h"
#include "daemon/ssd_store/ssd_store.h"
#include "fuzz/fuzz_util.h"

namespace {

using namespace mooncake;

std::vector<MetaRecord> Scan(std::string_view meta, uint64_t id, uint64_t bucket_bytes,
                             MetaScan* scan) {
  std::vector<MetaRecord> records;
  *scan = ParseMeta(meta, id, bucket_bytes, [&](MetaRecord&& r) { records.push_back(std::move(r)); });
  return records;
}

bool Same(const MetaRecord& a, const MetaRecord& b) {
  return a.type == b.type && a.key == b.key && a.offset == b.offset && a.length == b.length &&
         a.data_crc == b.data_crc && a.checksum == b.checksum && a.block_crcs == b.block_crcs;
}

std::vector<MetaRecord> CheckScan(std::string_view meta, uint64_t id, uint64_t bucket_bytes) {
  MetaScan scan;
  std::vector<MetaRecord> records = Scan(meta, id, bucket_bytes, &scan);
  FUZZ_CHECK(scan.valid_bytes <= meta.size(), "valid %llu of %zu bytes",
             (unsigned long long)scan.valid_bytes, meta.size());
  FUZZ_CHECK(scan.header_ok == (scan.valid_bytes >= kSsdMetaHeaderSize), "header %d, valid %llu",
             scan.header_ok, (unsigned long long)scan.valid_bytes);
  FUZZ_CHECK(records.size() + scan.skipped == scan.records, "%zu + %llu != %llu records",
             records.size(), (unsigned long long)scan.skipped, (unsigned long long)scan.records);
  for (const MetaRecord& r : records) {
    FUZZ_CHECK(!r.key.empty() && r.key.size() <= tenant_key::kMaxStoredKeyLen, "key of %zu bytes",
               r.key.size());
    FUZZ_CHECK(IsPageAligned(r.offset) && r.offset + RoundUpToPage(r.length) <= bucket_bytes,
               "slot %llu+%llu outside %llu", (unsigned long long)r.offset,
               (unsigned long long)r.length, (unsigned long long)bucket_bytes);
    FUZZ_CHECK(r.type == MetaRecord::kDrop || r.block_crcs.size() == CheckBlocksOf(r.length),
               "%zu block CRCs for %llu bytes", r.block_crcs.size(), (unsigned long long)r.length);
  }
  if (!scan.header_ok) return records;
  MetaScan prefix;
  std::vector<MetaRecord> again = Scan(meta.substr(0, scan.valid_bytes), id, bucket_bytes, &prefix);
  FUZZ_CHECK(!prefix.torn && prefix.valid_bytes == scan.valid_bytes && again.size() == records.size(),
             "the trusted prefix scans differently");
  std::string encoded = EncodeMetaHeader(id);
  for (const MetaRecord& r : records) AppendMetaRecord(&encoded, r);
  MetaScan round;
  again = Scan(encoded, id, bucket_bytes, &round);
  FUZZ_CHECK(!round.torn && round.valid_bytes == encoded.size() && again.size() == records.size(),
             "encoded records do not scan back");
  for (size_t i = 0; i < records.size(); ++i) {
    FUZZ_CHECK(Same(records[i], again[i]), "record %zu changes when encoded again", i);
  }
  return records;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t bucket_bytes = 0;
  std::string metas[2];
  bool present[2] = {false, false};
  for (const fuzz::Section& s : fuzz::SplitSections(data, size)) {
    if (s.tag == 0) {
      uint32_t v = 0;
      for (size_t i = 0; i < 4 && i < s.bytes.size(); ++i) {
        v |= static_cast<uint32_t>(static_cast<uint8_t>(s.bytes[i])) << (8 * i);
      }
      bucket_bytes = v % ((4u << 20) + 1);
    } else if (s.tag == 1 || s.tag == 2) {
      metas[s.tag - 1] = std::string(s.bytes);
      present[s.tag - 1] = true;
    }
  }
  std::map<std::string, uint64_t> live;  // key -> length, the later bucket winning
  for (int b = 0; b < 2; ++b) {
    if (!present[b]) continue;
    std::vector<MetaRecord> records = CheckScan(metas[b], b + 1, bucket_bytes);
    const size_t count = records.size();
    std::vector<MetaRecord> alive = LiveRecords(std::move(records));
    FUZZ_CHECK(alive.size() <= count, "more live records than records");
    std::set<std::string> keys;
    for (const MetaRecord& r : alive) {
      FUZZ_CHECK(r.type == MetaRecord::kPut, "a drop left live");
      FUZZ_CHECK(keys.insert(r.key).second, "key live twice in one bucket");
      live[r.key] = r.length;
    }
  }

  // The store over the same files: a zero-filled bucket file of bucket_bytes each.
  const std::string& dir = fuzz::FreshDir();
  for (int b = 0; b < 2; ++b) {
    if (!present[b]) continue;
    fuzz::WriteFile(SsdBucket::MetaPath(dir, b + 1), metas[b]);
    const std::string path = SsdBucket::DataPath(dir, b + 1);
    const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    FUZZ_CHECK(fd >= 0 && ftruncate(fd, static_cast<off_t>(bucket_bytes)) == 0, "cannot make %s",
               path.c_str());
    close(fd);
  }
  SsdOptions options;
  options.path = dir;
  options.bucket_size = 1 << 20;
  options.capacity = 64 << 20;
  options.persist_mode = SsdPersistMode::kStrict;
  std::unique_ptr<SsdStore> store;
  std::string error;
  std::vector<std::string> dropped;
  const ErrorCode rc = SsdStore::Open(
      options,
      [&](const std::vector<std::string>& keys) {
        dropped.insert(dropped.end(), keys.begin(), keys.end());
        return true;
      },
      &store, &error);
  FUZZ_CHECK(rc == ErrorCode::OK, "Open: %s", error.c_str());
  const std::vector<SsdObject> listed = store->List();
  FUZZ_CHECK(listed.size() == live.size(), "%zu listed, %zu live", listed.size(), live.size());
  std::vector<char> buf;
  for (const SsdObject& o : listed) {
    auto it = live.find(o.key);
    FUZZ_CHECK(it != live.end() && it->second == o.size, "listed a key no live record names");
    buf.resize(o.size + 1);
    const ErrorCode read = store->Read(o.key, 0, buf.data(), o.size);
    FUZZ_CHECK(read == ErrorCode::OK || read == ErrorCode::CHECKSUM_MISMATCH, "Read: %d",
               static_cast<int>(read));
  }
  return 0;
}
