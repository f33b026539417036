// The records of the master's durable state (master/log/state_records.h): an operation-log
// record, a snapshot's segment list and a shard's object array, decoded straight from the
// input (a restore checks their CRCs first; this skips that, to reach the decoders with
// anything at all).
//
// The whole input is read by each of the three decoders.
//
// Invariants:
//  - what decodes keeps the format's rules: a known op, a non-empty key, kinds below 256;
//  - decode -> encode -> decode gives the same record, and the encoding is a fixed point
//    (what the master writes for a record it read is exactly what it wrote before).
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "master/log/state_records.h"

namespace {

using namespace mooncake;

std::string EncodeObjects(const std::vector<ObjectRecord>& objects) {
  std::string out;
  AppendArrayHeader(&out, static_cast<uint32_t>(objects.size()));
  for (const ObjectRecord& o : objects) {
    AppendObject(&out, o.key, o.size, o.checksum, o.hard_pin, o.replicas.data(),
                 o.replicas.size());
  }
  return out;
}

std::string EncodeSegments(const std::vector<SegmentRecord>& segments) {
  std::string out;
  AppendArrayHeader(&out, static_cast<uint32_t>(segments.size()));
  for (const SegmentRecord& s : segments) AppendSegment(&out, s);
  return out;
}

std::string EncodeLogRecord(const LogRecord& r) {
  std::string out;
  switch (r.op) {
    case LogOp::kPublish:
      AppendPublishRecord(&out, r.object.key, r.object.size, r.object.checksum,
                          r.object.hard_pin, r.object.replicas.data(), r.object.replicas.size());
      break;
    case LogOp::kRemove:
      AppendRemoveRecord(&out, r.key);
      break;
    case LogOp::kMount:
      AppendMountRecord(&out, r.segment);
      break;
    case LogOp::kUnmount:
      AppendUnmountRecord(&out, r.segment_id);
      break;
  }
  return out;
}

void CheckLogRecord(std::string_view bytes) {
  LogRecord record;
  if (!DecodeLogRecord(bytes, &record)) return;
  FUZZ_CHECK(record.op >= LogOp::kPublish && record.op <= LogOp::kUnmount, "log op %d",
             static_cast<int>(record.op));
  FUZZ_CHECK(record.op != LogOp::kPublish || !record.object.key.empty(), "a publish without a key");
  FUZZ_CHECK(record.op != LogOp::kRemove || !record.key.empty(), "a removal without a key");
  const std::string encoded = EncodeLogRecord(record);
  LogRecord again;
  FUZZ_CHECK(DecodeLogRecord(encoded, &again), "an encoded log record does not decode");
  FUZZ_CHECK(EncodeLogRecord(again) == encoded, "a log record changes when decoded again");
}

void CheckSegments(std::string_view bytes) {
  std::vector<SegmentRecord> segments;
  if (!DecodeSegments(bytes, &segments)) return;
  const std::string encoded = EncodeSegments(segments);
  std::vector<SegmentRecord> again;
  FUZZ_CHECK(DecodeSegments(encoded, &again) && again.size() == segments.size(),
             "encoded segments do not decode");
  FUZZ_CHECK(EncodeSegments(again) == encoded, "segments change when decoded again");
}

void CheckObjects(std::string_view bytes) {
  std::vector<ObjectRecord> objects;
  if (!DecodeObjects(bytes, [&](ObjectRecord&& o) { objects.push_back(std::move(o)); })) return;
  for (const ObjectRecord& o : objects) {
    FUZZ_CHECK(!o.key.empty(), "an object without a key decoded");
  }
  const std::string encoded = EncodeObjects(objects);
  std::vector<ObjectRecord> again;
  FUZZ_CHECK(DecodeObjects(encoded, [&](ObjectRecord&& o) { again.push_back(std::move(o)); }),
             "encoded objects do not decode");
  FUZZ_CHECK(EncodeObjects(again) == encoded, "objects change when decoded again");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckLogRecord(bytes);
  CheckSegments(bytes);
  CheckObjects(bytes);
  return 0;
}
