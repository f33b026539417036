// The memory this daemon has registered with its RDMA devices, by address: every work
// request needs the local key of the registration its buffer lies in, and buffers are
// anywhere inside large registrations (an application's pool, a segment). An ordered map
// keyed by base finds the candidate with one upper_bound.
//
// A region holds one memory region per opened device (ibv_mr, in device order): memory is
// registered with every device, since a transfer may leave through any of them.
//
// Not thread-safe: the transport guards it.
#ifndef MOONCAKE_DAEMON_RDMA_MEMORY_MAP_H_
#define MOONCAKE_DAEMON_RDMA_MEMORY_MAP_H_

#include <cstdint>
#include <map>
#include <vector>

struct ibv_mr;

namespace mooncake {

class RdmaMemoryMap {
 public:
  struct Region {
    uintptr_t base = 0;
    uint64_t size = 0;
    std::vector<ibv_mr*> mrs;  // one per device
    bool for_peers = false;    // with remote access (a segment), not local only (a pool)
  };

  // False (nothing changed) when size is 0, the range wraps around, or it overlaps a
  // region already present: one address must have one key per device.
  bool Insert(const char* base, uint64_t size, std::vector<ibv_mr*> mrs, bool for_peers = false);
  // The memory regions of the region starting at base, for deregistration; empty when
  // there is none.
  std::vector<ibv_mr*> Remove(const char* base);
  // The region holding all of [addr, addr + length), or null (also when the range spans
  // two adjacent regions: one work request has one key).
  const Region* Find(const char* addr, uint64_t length) const;

  bool empty() const { return regions_.empty(); }
  // Every memory region of every region; the map is left empty.
  std::vector<ibv_mr*> TakeAll();

 private:
  std::map<uintptr_t, Region> regions_;  // by base
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_RDMA_MEMORY_MAP_H_
