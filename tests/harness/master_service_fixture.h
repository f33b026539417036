// The hand-driven fixture the MasterService suites share: a clock tests move by hand,
// small TTLs, daemons with one segment each, and put/read shorthands that assert success.
#ifndef MOONCAKE_TESTS_MASTER_SERVICE_FIXTURE_H_
#define MOONCAKE_TESTS_MASTER_SERVICE_FIXTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "master/service/master_service.h"
#include "tests/harness/cmocka_cpp.h"

namespace {

using mooncake::ErrorCode;
using mooncake::MasterOptions;
using mooncake::MasterService;
using mooncake::ToInt;
namespace rpc = mooncake::rpc;

constexpr int64_t kT0 = 1000;
constexpr int64_t kLease = 100;
constexpr int64_t kDiscard = 1000;
constexpr int64_t kRelease = 10000;
constexpr int64_t kMiB = 1 << 20;

// Result codes, as the service returns them.
constexpr int kNoSpace = static_cast<int>(ErrorCode::NO_AVAILABLE_HANDLE);
constexpr int kUnknownDaemon = static_cast<int>(ErrorCode::CLIENT_NOT_FOUND);
constexpr int kExists = static_cast<int>(ErrorCode::OBJECT_ALREADY_EXISTS);
constexpr int kNotReady = static_cast<int>(ErrorCode::REPLICA_IS_NOT_READY);
constexpr int kNotFound = static_cast<int>(ErrorCode::OBJECT_NOT_FOUND);
constexpr int kNotOwner = static_cast<int>(ErrorCode::ILLEGAL_CLIENT);
constexpr int kLeased = static_cast<int>(ErrorCode::OBJECT_HAS_LEASE);
constexpr int kUnavailable = static_cast<int>(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS);
constexpr int kBadParams = static_cast<int>(ErrorCode::INVALID_PARAMS);
constexpr int kSegmentExists = static_cast<int>(ErrorCode::SEGMENT_ALREADY_EXISTS);
constexpr int kNoSegment = static_cast<int>(ErrorCode::SEGMENT_NOT_FOUND);

int64_t g_now = kT0;

// Small TTLs; daemons live "forever" unless a test says otherwise. Restarts the clock.
// The pool may fill up completely before anything is evicted (a high watermark of 1): the
// suites that place objects by hand count on it; eviction's own tests set a lower one.
inline MasterOptions Options() {
  g_now = kT0;
  MasterOptions o;
  o.now_ms = [] { return g_now; };
  o.default_kv_lease_ttl_ms = kLease;
  o.default_kv_soft_pin_ttl_ms = 100000;
  o.client_live_ttl_ms = 100000000;
  o.put_start_discard_timeout_ms = kDiscard;
  o.put_start_release_timeout_ms = kRelease;
  o.eviction_high_watermark_ratio = 1.0;
  o.eviction_ratio = 0.25;
  return o;
}

inline std::string Name(int64_t daemon) { return "10.0.0." + std::to_string(daemon) + ":7000"; }

// A segment of daemon's, at a base of its own.
inline rpc::SegmentInfo SegmentOf(int64_t daemon, int64_t segment_id, int64_t size) {
  rpc::SegmentInfo info;
  info.segment_id = segment_id;
  info.name = Name(daemon);
  info.base = segment_id << 32;
  info.size = size;
  info.daemon_id = daemon;
  return info;
}

inline void Mount(MasterService& s, int64_t daemon, int64_t segment_id, int64_t size) {
  assert_int_equal(ToInt(s.MountSegment(SegmentOf(daemon, segment_id, size))), 0);
}

// Registers a daemon and mounts one segment for it, id daemon * 10 + 1.
inline void AddDaemon(MasterService& s, int64_t daemon, int64_t segment_size = kMiB) {
  assert_int_equal(ToInt(s.RegisterDaemon(daemon, Name(daemon))), 0);
  Mount(s, daemon, daemon * 10 + 1, segment_size);
}

inline rpc::ReplicateConfig Cfg(int32_t replicas = 1) {
  rpc::ReplicateConfig c;
  c.replica_num = replicas;
  return c;
}

// One replica, preferably on the given daemon's segment.
inline rpc::ReplicateConfig On(int64_t daemon) {
  rpc::ReplicateConfig c = Cfg();
  c.preferred_segments = {Name(daemon)};
  return c;
}

inline rpc::ReplicateConfig Pinned(bool hard) {
  rpc::ReplicateConfig c = Cfg();
  (hard ? c.with_hard_pin : c.with_soft_pin) = true;
  return c;
}

// PutStart + PutEnd, both asserted OK; returns the replicas handed to the writer.
inline std::vector<rpc::ReplicaDescriptor> Put(MasterService& s, int64_t writer,
                                               const std::string& key, int64_t size,
                                               const rpc::ReplicateConfig& c = Cfg()) {
  rpc::PutStartResult r = s.PutStart(writer, key, size, c);
  assert_int_equal(r.code, 0);
  assert_int_equal(ToInt(s.PutEnd(writer, key)), 0);
  return r.replicas;
}

// A reader's report that the replica replica_id of key's value (size bytes, checksum as
// listed) failed its checksum (ReportBadReplicas).
inline rpc::BadReplica Mismatch(const std::string& key, int64_t replica_id, int64_t size,
                                int64_t checksum) {
  rpc::BadReplica bad;
  bad.key = key;
  bad.reason = rpc::BadReplicaReason::CHECKSUM_MISMATCH;
  bad.replica_id = replica_id;
  bad.size = size;
  bad.checksum = checksum;
  return bad;
}

inline int64_t Used(const MasterService& s) { return s.GetStats().used_bytes; }

inline int64_t SegmentUsed(const MasterService& s, int64_t segment_id) {
  for (const rpc::SegmentInfo& info : s.GetAllSegments()) {
    if (info.segment_id == segment_id) return info.used;
  }
  return -1;
}

}  // namespace

#endif  // MOONCAKE_TESTS_MASTER_SERVICE_FIXTURE_H_
