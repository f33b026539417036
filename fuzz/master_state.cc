#include "fuzz/master_state.h"

#include <utility>

#include "fuzz/fuzz_util.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/snapshot/snapshot_writer.h"

namespace mooncake {
namespace fuzz {

namespace {

bool SameSegment(const SegmentRecord& a, const SegmentRecord& b) {
  if (a.segment_id != b.segment_id || a.name != b.name || a.base != b.base || a.size != b.size ||
      a.daemon_id != b.daemon_id || a.incarnation != b.incarnation ||
      a.lent_by_client != b.lent_by_client || a.endpoints.size() != b.endpoints.size()) {
    return false;
  }
  for (size_t i = 0; i < a.endpoints.size(); ++i) {
    const EndpointRecord& x = a.endpoints[i];
    const EndpointRecord& y = b.endpoints[i];
    if (x.protocol != y.protocol || x.address != y.address || x.descriptor != y.descriptor) {
      return false;
    }
  }
  return true;
}

bool SameObject(const ObjectRecord& a, const ObjectRecord& b) {
  if (a.key != b.key || a.size != b.size || a.checksum != b.checksum ||
      a.hard_pin != b.hard_pin || a.replicas.size() != b.replicas.size()) {
    return false;
  }
  for (size_t i = 0; i < a.replicas.size(); ++i) {
    const ReplicaRecord& x = a.replicas[i];
    const ReplicaRecord& y = b.replicas[i];
    if (x.segment_id != y.segment_id || x.offset != y.offset || x.kind != y.kind) return false;
  }
  return true;
}

}  // namespace

ExportedState Export(MasterService* service) {
  ExportedState state;
  for (SegmentRecord& s : service->ExportSegments()) {
    const int64_t id = s.segment_id;
    FUZZ_CHECK(state.segments.emplace(id, std::move(s)).second, "segment %lld exported twice",
               static_cast<long long>(id));
  }
  service->ExportObjects([&](size_t shard, const std::string& bytes, uint32_t count) {
    uint32_t seen = 0;
    FUZZ_CHECK(DecodeObjects(bytes,
                             [&](ObjectRecord&& object) {
                               ++seen;
                               std::string key = object.key;
                               FUZZ_CHECK(state.objects.emplace(key, std::move(object)).second,
                                          "object exported twice");
                             }),
               "shard %zu's export does not decode", shard);
    FUZZ_CHECK(seen == count, "shard %zu exported %u objects, said %u", shard, seen, count);
    return true;
  });
  return state;
}

void CheckRestorable(const ExportedState& state) {
  MasterService restored{MasterOptions()};
  for (const auto& [id, segment] : state.segments) restored.RestoreSegment(segment);
  for (const auto& [key, object] : state.objects) restored.RestoreObject(ObjectRecord(object));
  MasterService::RestoreCounts counts = restored.FinishRestore();
  FUZZ_CHECK(counts.dropped_replicas == 0 && counts.dropped_objects == 0,
             "the state's own snapshot drops %lld replicas and %lld objects when restored: "
             "ranges overlap or leave their segments",
             static_cast<long long>(counts.dropped_replicas),
             static_cast<long long>(counts.dropped_objects));
  CheckSameState(state, Export(&restored), "the state", "its snapshot restored");
}

void CheckSameState(const ExportedState& x, const ExportedState& y, const char* a_name,
                    const char* b_name) {
  for (const auto& [id, segment] : x.segments) {
    auto it = y.segments.find(id);
    FUZZ_CHECK(it != y.segments.end(), "segment %lld of %s is not in %s",
               static_cast<long long>(id), a_name, b_name);
    FUZZ_CHECK(SameSegment(segment, it->second), "segment %lld differs between %s and %s",
               static_cast<long long>(id), a_name, b_name);
  }
  FUZZ_CHECK(x.segments.size() == y.segments.size(), "%s has %zu segments, %s %zu", a_name,
             x.segments.size(), b_name, y.segments.size());
  for (const auto& [key, object] : x.objects) {
    auto it = y.objects.find(key);
    FUZZ_CHECK(it != y.objects.end(), "object \"%s\" of %s is not in %s", key.c_str(), a_name,
               b_name);
    FUZZ_CHECK(SameObject(object, it->second), "object \"%s\" differs between %s and %s",
               key.c_str(), a_name, b_name);
  }
  FUZZ_CHECK(x.objects.size() == y.objects.size(), "%s has %zu objects, %s %zu", a_name,
             x.objects.size(), b_name, y.objects.size());
}

std::string WriteSnapshot(MasterService* service, const std::string& dir, uint64_t sequence,
                          int64_t created_ms) {
  SnapshotWriter writer(dir, sequence, created_ms);
  SnapshotFigures figures;
  std::string error;
  ErrorCode code = writer.Begin(&error);
  if (code == ErrorCode::OK) code = WriteSnapshotPayloads(service, &writer, &figures, &error);
  if (code == ErrorCode::OK) {
    code = writer.Publish({{"objects", std::to_string(figures.objects)},
                           {"segments", std::to_string(figures.segments)}},
                          &error);
  }
  FUZZ_CHECK(code == ErrorCode::OK, "cannot take a snapshot into %s: %s", dir.c_str(),
             error.c_str());
  return writer.name();
}

}  // namespace fuzz
}  // namespace mooncake
