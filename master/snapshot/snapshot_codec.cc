#include "master/snapshot/snapshot_codec.h"

#include <zstd.h>

#include "common/base/little_endian.h"

namespace mooncake {

namespace {

constexpr int kZstdLevel = 3;
constexpr int kFrameHeaderBytes = 16;
// A shard of a KV-cache directory is a few MB; this bounds what a corrupt header can make
// a restore allocate.
constexpr uint64_t kMaxRawShardBytes = 1ull << 32;
// zstd's largest expansion: a block of 128 KiB takes at least 4 bytes (an RLE block), so
// a frame that says it holds more than this times its own size lies.
constexpr uint64_t kMaxZstdExpansion = 32768;

bool Compress(std::string_view raw, std::string* out) {
  out->resize(ZSTD_compressBound(raw.size()));
  size_t n = ZSTD_compress(out->data(), out->size(), raw.data(), raw.size(), kZstdLevel);
  if (ZSTD_isError(n)) return false;
  out->resize(n);
  return true;
}

// raw_size must be what the frame says it holds and what its size can hold, so a header
// that lies cannot make it allocate more than the frame would produce (a 30-byte payload
// claiming 4 GiB made a restore zero-fill 4 GiB before finding out).
bool Decompress(std::string_view packed, uint64_t raw_size, std::string* out) {
  if (raw_size > kMaxRawShardBytes || raw_size / kMaxZstdExpansion > packed.size() ||
      ZSTD_getFrameContentSize(packed.data(), packed.size()) != raw_size) {
    return false;
  }
  out->resize(raw_size);
  size_t n = ZSTD_decompress(out->data(), raw_size, packed.data(), packed.size());
  return !ZSTD_isError(n) && n == raw_size;
}

}  // namespace

ErrorCode WriteSnapshotPayloads(MasterService* service, SnapshotWriter* writer,
                                SnapshotFigures* figures, std::string* error) {
  std::vector<SegmentRecord> segments = service->ExportSegments();
  std::string raw, packed;
  AppendArrayHeader(&raw, static_cast<uint32_t>(segments.size()));
  for (const SegmentRecord& s : segments) AppendSegment(&raw, s);
  if (!Compress(raw, &packed)) {
    *error = "zstd could not compress the segments";
    return ErrorCode::SERIALIZE_FAIL;
  }
  ErrorCode code = writer->OpenPayload("segments", error);
  if (code == ErrorCode::OK) code = writer->Append(packed, error);
  if (code == ErrorCode::OK) code = writer->ClosePayload(error);
  if (code != ErrorCode::OK) return code;
  figures->segments = static_cast<int64_t>(segments.size());

  code = writer->OpenPayload("metadata", error);
  if (code != ErrorCode::OK) return code;
  std::string header;
  service->ExportObjects([&](size_t shard, const std::string& objects, uint32_t count) {
    if (!Compress(objects, &packed)) {
      *error = "zstd could not compress shard " + std::to_string(shard);
      code = ErrorCode::SERIALIZE_FAIL;
      return false;
    }
    header.clear();
    AppendLittleEndian(&header, shard, 4);
    AppendLittleEndian(&header, count, 4);
    AppendLittleEndian(&header, objects.size(), 4);
    AppendLittleEndian(&header, packed.size(), 4);
    code = writer->Append(header, error);
    if (code == ErrorCode::OK) code = writer->Append(packed, error);
    figures->objects += count;
    return code == ErrorCode::OK;
  });
  if (code != ErrorCode::OK) return code;
  return writer->ClosePayload(error);
}

ErrorCode LoadSnapshotPayloads(MasterService* service, const LoadedSnapshot& snapshot,
                               SnapshotFigures* figures, std::string* why) {
  auto segments = snapshot.payloads.find("segments");
  auto metadata = snapshot.payloads.find("metadata");
  if (segments == snapshot.payloads.end() || metadata == snapshot.payloads.end()) {
    *why = "the manifest lists no segments or no metadata payload";
    return ErrorCode::DESERIALIZE_FAIL;
  }
  std::string raw;
  unsigned long long raw_size =
      ZSTD_getFrameContentSize(segments->second.data(), segments->second.size());
  std::vector<SegmentRecord> records;
  if (!Decompress(segments->second, raw_size, &raw) || !DecodeSegments(raw, &records)) {
    *why = "the segments payload does not decode";
    return ErrorCode::DESERIALIZE_FAIL;
  }
  for (const SegmentRecord& r : records) service->RestoreSegment(r);
  figures->segments = static_cast<int64_t>(records.size());

  std::string_view rest = metadata->second;
  int64_t previous_shard = -1;
  while (!rest.empty()) {
    if (rest.size() < kFrameHeaderBytes) {
      *why = "the metadata payload ends inside a shard header";
      return ErrorCode::DESERIALIZE_FAIL;
    }
    const char* p = rest.data();
    int64_t shard = static_cast<int64_t>(GetLittleEndian(&p, 4));
    uint64_t count = GetLittleEndian(&p, 4);
    uint64_t raw_bytes = GetLittleEndian(&p, 4);
    uint64_t packed_bytes = GetLittleEndian(&p, 4);
    rest.remove_prefix(kFrameHeaderBytes);
    if (shard <= previous_shard || shard >= static_cast<int64_t>(MasterService::kShardCount) ||
        packed_bytes > rest.size()) {
      *why = "shard frame " + std::to_string(shard) + " is out of order or overruns the payload";
      return ErrorCode::DESERIALIZE_FAIL;
    }
    previous_shard = shard;
    uint64_t seen = 0;
    if (!Decompress(rest.substr(0, packed_bytes), raw_bytes, &raw) ||
        !DecodeObjects(raw, [&](ObjectRecord&& object) {
          service->RestoreObject(std::move(object));
          ++seen;
        }) ||
        seen != count) {
      *why = "shard " + std::to_string(shard) + " does not decode";
      return ErrorCode::DESERIALIZE_FAIL;
    }
    figures->objects += static_cast<int64_t>(count);
    rest.remove_prefix(packed_bytes);
  }
  return ErrorCode::OK;
}

}  // namespace mooncake
