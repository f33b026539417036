// Every segment the master knows, as published at mount: who owns it and the transport
// endpoints to reach it. The data path turns a replica descriptor (segment id, offset)
// into a transfer with it. LOCAL_DISK segments (other daemons' SSD tiers) are kept too,
// marked disk: a disk replica names one, and is read from its owner by key (READ_DISK).
//
// Learnt from GetAllSegments and kept: a lookup of a segment mounted since the last fetch
// misses, and the miss fetches again (one fetch at a time, at most one per
// kMinRefreshInterval: a miss right after a fetch waits for the interval to pass, so
// lookups of a segment that is gone for good cannot hammer the master). An entry of a segment unmounted since stays until the next fetch: a transfer
// to it fails, and the reader moves on to the next replica.
//
// Thread-safety: every method may be called from any thread.
#ifndef MOONCAKE_DAEMON_SEGMENT_DIRECTORY_H_
#define MOONCAKE_DAEMON_SEGMENT_DIRECTORY_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "daemon/master_link/master_client.h"
#include "daemon/transfer/transport.h"

namespace mooncake {

class SegmentDirectory {
 public:
  static constexpr std::chrono::milliseconds kMinRefreshInterval{100};

  explicit SegmentDirectory(MasterClient* master) : master_(master) {}
  SegmentDirectory(const SegmentDirectory&) = delete;
  SegmentDirectory& operator=(const SegmentDirectory&) = delete;

  // The segment, or null when the master does not know it (or cannot be asked).
  std::shared_ptr<const RemoteSegment> Find(int64_t segment_id);

 private:
  using Map = std::unordered_map<int64_t, std::shared_ptr<const RemoteSegment>>;
  std::shared_ptr<const RemoteSegment> Lookup(int64_t segment_id) const;

  MasterClient* const master_;
  mutable std::shared_mutex mu_;
  Map segments_;  // guarded by mu_
  std::mutex refresh_mu_;  // one fetch at a time
  std::chrono::steady_clock::time_point last_refresh_;  // guarded by refresh_mu_
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SEGMENT_DIRECTORY_H_
