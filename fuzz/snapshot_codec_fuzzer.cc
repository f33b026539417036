// The payloads of a master snapshot (master/snapshot/snapshot_codec.h) as a restore decodes them:
// the zstd-compressed segment list and the metadata payload's shard frames, loaded into a
// fresh MasterService (LoadSnapshotPayloads), then made consistent (FinishRestore). The
// store's size and CRC checks come before this in a restore; here any bytes reach it.
//
// Input: sections (fuzz/fuzz_util.h) that build the two payloads:
//   tag 0  the segments payload as it is stored (compressed)
//   tag 1  bytes appended to the metadata payload as they are (frames, compressed)
//   tag 2  the segments payload's msgpack before compression: the harness compresses it
//   tag 3  one shard frame before compression: u16 shard | u32 object count | the
//          objects' msgpack; the harness compresses it and writes the frame header
// (tags 2 and 3 let the fuzzer work on what zstd would otherwise hide). Without a tag 0
// or 2 there is no segments payload, without a tag 1 or 3 no metadata payload.
//
// Invariants:
//  - a refusal is DESERIALIZE_FAIL with a reason; nothing else comes out;
//  - what loads, once FinishRestore dropped what could not be trusted, is consistent
//    (fuzz/master_state.h);
//  - the loaded state survives a snapshot: written by the snapshot child's code
//    (SnapshotWriter, WriteSnapshotPayloads), read back by SnapshotStore::Load and loaded
//    into another fresh service, it is the same state.
#include <zstd.h>

#include <map>
#include <string>

#include "common/base/little_endian.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/master_state.h"
#include "master/service/master_service.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/snapshot/snapshot_store.h"

namespace {

using namespace mooncake;

std::string Compress(std::string_view raw) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 1);
  FUZZ_CHECK(!ZSTD_isError(n), "zstd cannot compress %zu bytes", raw.size());
  out.resize(n);
  return out;
}

LoadedSnapshot Payloads(const uint8_t* data, size_t size) {
  LoadedSnapshot snapshot;
  std::map<std::string, std::string>& p = snapshot.payloads;
  for (const fuzz::Section& s : fuzz::SplitSections(data, size)) {
    switch (s.tag % 4) {
      case 0:
        p["segments"] = std::string(s.bytes);
        break;
      case 1:
        p["metadata"] += s.bytes;
        break;
      case 2:
        p["segments"] = Compress(s.bytes);
        break;
      case 3: {
        std::string_view raw = s.bytes.size() >= 6 ? s.bytes.substr(6) : std::string_view();
        const char* header = s.bytes.data();
        uint64_t shard = s.bytes.size() >= 2 ? GetLittleEndian(&header, 2) : 0;
        uint64_t count = s.bytes.size() >= 6 ? GetLittleEndian(&header, 4) : 0;
        std::string packed = Compress(raw);
        std::string& frame = p["metadata"];
        AppendLittleEndian(&frame, shard, 4);
        AppendLittleEndian(&frame, count, 4);
        AppendLittleEndian(&frame, raw.size(), 4);
        AppendLittleEndian(&frame, packed.size(), 4);
        frame += packed;
        break;
      }
    }
  }
  return snapshot;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const LoadedSnapshot snapshot = Payloads(data, size);
  MasterService service{MasterOptions()};
  SnapshotFigures figures;
  std::string why;
  const ErrorCode code = LoadSnapshotPayloads(&service, snapshot, &figures, &why);
  if (code != ErrorCode::OK) {
    FUZZ_CHECK(code == ErrorCode::DESERIALIZE_FAIL && !why.empty(),
               "a payload refused with code %d, reason \"%s\"", ToInt(code), why.c_str());
    return 0;
  }
  FUZZ_CHECK(figures.segments >= 0 && figures.objects >= 0, "negative figures");
  service.FinishRestore();
  const fuzz::ExportedState loaded = fuzz::Export(&service);
  fuzz::CheckRestorable(loaded);

  const std::string dir = fuzz::FreshDir();
  const std::string name = fuzz::WriteSnapshot(&service, dir, 42, 1700000000000);
  SnapshotStore store(dir);
  std::string load_why;
  Result<LoadedSnapshot> written = store.Load(name, &load_why);
  FUZZ_CHECK(written.ok(), "the snapshot just written does not load: %s", load_why.c_str());
  MasterService reloaded{MasterOptions()};
  FUZZ_CHECK(LoadSnapshotPayloads(&reloaded, written.value(), &figures, &why) == ErrorCode::OK,
             "the snapshot just written does not decode: %s", why.c_str());
  const MasterService::RestoreCounts counts = reloaded.FinishRestore();
  FUZZ_CHECK(counts.dropped_replicas == 0 && counts.dropped_objects == 0,
             "the snapshot of a restored state drops %lld replicas and %lld objects",
             static_cast<long long>(counts.dropped_replicas),
             static_cast<long long>(counts.dropped_objects));
  fuzz::CheckSameState(loaded, fuzz::Export(&reloaded), "the loaded state", "its snapshot");
  return 0;
}
