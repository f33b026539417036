// Shorthands of the SSD tier's MasterService suites (master_disk_test, master_disk_evict_
// test), on top of tests/harness/master_service_fixture.h: daemons with an SSD tier, offloads
// fetched and reported as a daemon does.
#ifndef MOONCAKE_TESTS_MASTER_DISK_FIXTURE_H_
#define MOONCAKE_TESTS_MASTER_DISK_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/harness/master_service_fixture.h"

namespace {

constexpr int64_t kSsd = int64_t{1} << 40;
constexpr int kNoSupport = static_cast<int>(ErrorCode::NOT_SUPPORTED);

// The daemon's LOCAL_DISK segment, id daemon * 10 + 9, as the daemon mounts it.
inline int64_t DiskId(int64_t daemon) { return daemon * 10 + 9; }
inline int64_t DiskIncarnation(int64_t daemon) { return daemon * 1000 + 99; }
inline rpc::SegmentInfo DiskSegment(int64_t daemon, int64_t owner = 0, int64_t incarnation = 0) {
  rpc::SegmentInfo info;
  info.segment_id = DiskId(daemon);
  info.name = Name(daemon);
  info.base = 0;
  info.size = kSsd;
  info.daemon_id = owner != 0 ? owner : daemon;
  info.incarnation = incarnation != 0 ? incarnation : DiskIncarnation(daemon);
  info.kind = rpc::ReplicaKind::LOCAL_DISK;
  rpc::TransportEndpoint tcp;
  tcp.protocol = "tcp";
  tcp.address = Name(daemon);
  info.endpoints.push_back(tcp);
  return info;
}

// A daemon with a memory segment (daemon * 10 + 1) and an SSD tier (daemon * 10 + 9).
inline void AddDiskDaemon(MasterService& s, int64_t daemon, int64_t memory = kMiB) {
  AddDaemon(s, daemon, memory);
  assert_int_equal(ToInt(s.MountSegment(DiskSegment(daemon))), 0);
}

inline rpc::ReplicateConfig Offload(int32_t choice = 1) {
  rpc::ReplicateConfig c = Cfg();
  c.offload = choice;
  return c;
}

// Fetches every queued task of daemon's (asserted OK).
inline std::vector<rpc::OffloadTask> Fetch(MasterService& s, int64_t daemon) {
  rpc::OffloadTasksResult r = s.FetchOffloads(daemon, MasterService::kMaxOffloadBatch);
  assert_int_equal(r.code, 0);
  return r.tasks;
}

// Reports tasks with one code for all; the master's answers.
inline std::vector<int32_t> Report(MasterService& s, int64_t daemon,
                                   const std::vector<rpc::OffloadTask>& tasks, int32_t code = 0) {
  std::vector<std::string> keys;
  std::vector<int64_t> ids;
  for (const rpc::OffloadTask& t : tasks) {
    keys.push_back(t.key);
    ids.push_back(t.replica_id);
  }
  return s.ReportOffloads(daemon, DiskId(daemon), keys, ids,
                          std::vector<int32_t>(keys.size(), code));
}

// Fetches and reports (OK) every task of daemon's; how many there were.
inline size_t OffloadAll(MasterService& s, int64_t daemon) {
  std::vector<rpc::OffloadTask> tasks = Fetch(s, daemon);
  for (int32_t code : Report(s, daemon, tasks)) assert_int_equal(code, 0);
  return tasks.size();
}

// The kinds GetReplicaList lists, in order ("MD": memory, then disk); the code when not OK.
inline std::string Kinds(MasterService& s, const std::string& key) {
  rpc::ReplicaListResult r = s.GetReplicaList(key);
  if (r.code != 0) return std::to_string(r.code);
  std::string kinds;
  for (const rpc::ReplicaDescriptor& d : r.replicas) {
    kinds += d.kind == rpc::ReplicaKind::MEMORY ? "M" : "D";
  }
  return kinds;
}

// The replica id of key's first LOCAL_DISK replica as GetReplicaList lists it (0: none),
// what a reader names to PromoteStart.
inline int64_t DiskReplicaId(MasterService& s, const std::string& key) {
  for (const rpc::ReplicaDescriptor& d : s.GetReplicaList(key).replicas) {
    if (d.kind == rpc::ReplicaKind::LOCAL_DISK) return d.replica_id;
  }
  return 0;
}

// Moves the clock by ms with the upkeep running every 100 ms, as the server's does (a
// longer gap would pass for the master's own stall).
inline void Advance(MasterService& s, int64_t ms) {
  for (int64_t left = ms; left > 0; left -= 100) {
    g_now += std::min<int64_t>(100, left);
    s.Tick();
  }
}

inline rpc::DiskStats Disk(const MasterService& s) { return s.GetStats().disk; }

}  // namespace

#endif  // MOONCAKE_TESTS_MASTER_DISK_FIXTURE_H_
