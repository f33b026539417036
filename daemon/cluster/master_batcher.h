// Group commit of the daemon's single-key master calls (docs/daemon.md, "Group commit"):
// concurrent PutStart, PutEnd and GetReplicaList calls, from any clients' requests, share
// the master's batch RPCs (BatchPutStart, BatchPutEnd, BatchGetReplicaList), so that a
// busy daemon sends one RPC, and the master runs one Thrift dispatch and one Sync, where
// it would have sent several.
//
// Each kind is a GroupCommit (daemon/base/group_commit.h): a call made while fewer than
// kLeaders RPCs of its kind are in flight is sent at once, alone, as the single form (no
// added latency for a lone client, nor for a second one); calls made while kLeaders are
// in flight queue up and go together, up to max_group of them, as the batch form, in the
// next RPC a leader sends. Only calls that would send the same arguments besides the key
// share an RPC: PutStart's by writer and ReplicateConfig, PutEnd's by writer,
// GetReplicaList's by reader.
//
// The effects are the single forms': the master's batch handlers run the single form per
// key, in order (master/server/rpc_handler.cc), and BatchPutEnd acknowledges the OK entries
// only once its one Sync confirms them, each failing with the same -1503/-1600 a single
// PutEnd would. Each call gets its own key's code; a failure of the whole RPC (RPC_FAIL,
// NOT_LEADER, a reply of the wrong length) becomes every member's code. The repeat
// policy after a failover is the single forms' (MasterClient: kSafe, a repeated start's
// OBJECT_ALREADY_EXISTS distrusted per entry). The retries the callers run around these
// calls (-200's wait, -103's re-registration) stay with each caller: a call that must
// ask again submits again, without holding the others of its group.
//
// With max_group 0 every call goes straight to the MasterClient, as before group commit.
//
// Thread roles: any thread calls; each call blocks until its RPC answered (as the
// MasterClient's own calls do), the leader of a group running the RPC for all of it.
// Lock order: each lane's lock is a leaf, never held while the RPC runs.
#ifndef MOONCAKE_DAEMON_MASTER_BATCHER_H_
#define MOONCAKE_DAEMON_MASTER_BATCHER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/base/error_code.h"
#include "daemon/base/group_commit.h"
#include "daemon/master_link/master_client.h"

namespace mooncake {

class MasterBatcher {
 public:
  // The daemon's --group_commit_max default: enough for every worker thread's call.
  static constexpr int64_t kDefaultMaxGroup = 64;
  // RPCs of one kind in flight before calls queue up. Two, not LevelDB's one: with one,
  // the second of two concurrent calls waited a whole round trip for nothing (a group
  // forms only when a third arrives) and, whenever the leader lost its CPU on a loaded
  // host, every queued call waited with it, which multiplied the tail latency of
  // concurrent small puts (bench/README.md, "Design choices measured").
  static constexpr size_t kLeaders = 2;

  // spin_ns: how long a queued call polls before it sleeps (--spin_us).
  MasterBatcher(MasterClient* master, size_t max_group, int64_t spin_ns);
  ~MasterBatcher();
  MasterBatcher(const MasterBatcher&) = delete;
  MasterBatcher& operator=(const MasterBatcher&) = delete;

  // As MasterClient's calls of the same names.
  ErrorCode PutStart(int64_t writer, const std::string& key, int64_t size,
                     const rpc::ReplicateConfig& config, rpc::PutStartResult* out);
  ErrorCode PutEnd(int64_t writer, const std::string& key, int64_t checksum);
  ErrorCode GetReplicaList(const std::string& key, int64_t reader, rpc::ReplicaListResult* out);

 private:
  struct StartCall;
  struct EndCall;
  struct ListCall;
  void RunStarts(const std::vector<StartCall*>& group);
  void RunEnds(const std::vector<EndCall*>& group);
  void RunLists(const std::vector<ListCall*>& group);

  MasterClient* const master_;
  const bool grouped_;
  // Null without grouping.
  std::unique_ptr<GroupCommit<StartCall>> starts_;
  std::unique_ptr<GroupCommit<EndCall>> ends_;
  std::unique_ptr<GroupCommit<ListCall>> lists_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_MASTER_BATCHER_H_
