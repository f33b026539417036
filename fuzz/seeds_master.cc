// Seeds of the master's harnesses: RPC call sequences written by the generated Thrift
// client, and the on-disk formats written by the master's own encoders.
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/base/little_endian.h"
#include "common/master_link/master_auth.h"
#include "common/base/tenant_key.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/master_state.h"
#include "fuzz/seeds.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"
#include "master/log/state_records.h"

namespace mooncake {
namespace fuzz {

namespace {

using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TMemoryBuffer;

// A master_rpc_fuzzer input: [clock byte][call] ..., the calls as the daemons' client
// writes them (common/master_link/master.thrift).
class RpcScript {
 public:
  RpcScript()
      : buffer_(std::make_shared<TMemoryBuffer>()),
        client_(std::make_shared<TBinaryProtocol>(buffer_)) {}

  // The clock byte before the next call: kSteps index step (0..7), and the upkeep first.
  rpc::MasterServiceClient& At(int step, bool tick = false) { return Clock(step | (tick ? 8 : 0)); }
  // A snapshot before the next call, or a restart of the master.
  rpc::MasterServiceClient& AfterSnapshot() { return Clock(0x10); }
  rpc::MasterServiceClient& AfterRestart() { return Clock(0x20); }
  // The next call on a new connection: of a peer of a master with kFuzzClusterKey, of
  // another host's peer of one without a key, of a peer on this host (as the first).
  rpc::MasterServiceClient& OnKeyedConnection() { return Clock(0x40); }
  rpc::MasterServiceClient& OnRemoteConnection() { return Clock(0x80); }
  rpc::MasterServiceClient& OnLocalConnection() { return Clock(0xC0); }
  rpc::MasterServiceClient& Now() { return At(0); }
  std::string bytes() { return buffer_->getBufferAsString(); }

 private:
  rpc::MasterServiceClient& Clock(int bits) {
    uint8_t b = static_cast<uint8_t>(bits);
    buffer_->write(&b, 1);
    return client_;
  }

  std::shared_ptr<TMemoryBuffer> buffer_;
  rpc::MasterServiceClient client_;
};

std::string Name(int64_t daemon) { return "10.0.0." + std::to_string(daemon) + ":7000"; }

rpc::SegmentInfo Segment(int64_t daemon, int64_t id, int64_t size) {
  rpc::SegmentInfo s;
  s.segment_id = id;
  s.name = Name(daemon);
  s.base = id << 32;
  s.size = size;
  s.daemon_id = daemon;
  s.incarnation = 0x5eed0000 + id;
  rpc::TransportEndpoint tcp;
  tcp.protocol = "tcp";
  tcp.address = Name(daemon);
  s.endpoints = {tcp};
  return s;
}

rpc::ReplicateConfig Config(int32_t replicas = 1) {
  rpc::ReplicateConfig c;
  c.replica_num = replicas;
  return c;
}

// The handshake, on the connection the script is on (a keyed one), with a proof made with
// the master's key or another.
void Handshake(RpcScript& s, bool right_key = true) {
  const std::string client_nonce(32, 'c');
  const std::string other_key = "59ce16e81f624fa34252c29efed16caf248625997377b07e9cf9af9eeca9bef2";
  ClusterKey key = ClusterKey::FromKeys({right_key ? kFuzzClusterKey : other_key});
  s.Now().send_AuthChallenge(client_nonce);
  s.Now().send_Authenticate(
      key.Prove(ClusterKey::Role::kClient, kMasterAuthContext, client_nonce, kFuzzServerNonce));
}

void Daemon(RpcScript& s, int64_t daemon, int64_t segment_size = 1 << 20) {
  s.Now().send_RegisterDaemon(daemon, Name(daemon));
  s.Now().send_MountSegment(Segment(daemon, daemon * 10 + 1, segment_size));
}

SegmentRecord SegmentRec(int64_t id, int64_t size) {
  SegmentRecord s;
  s.segment_id = id;
  s.name = "10.0.0.1:7000";
  s.base = id << 32;
  s.size = size;
  s.daemon_id = 1;
  s.incarnation = 0x5eed0000 + id;
  s.endpoints = {{"tcp", "10.0.0.1:12300", ""}, {"rdma", "mlx5_0", std::string(40, '\1')}};
  return s;
}

// A little history of the master's, as the log records it.
std::vector<std::string> History() {
  const ReplicaRecord on11[] = {{11, 0, 0}};
  const ReplicaRecord on11_12[] = {{11, 4096, 0}, {12, 0, 0}};
  std::vector<std::string> records(7);
  AppendMountRecord(&records[0], SegmentRec(11, 1 << 20));
  AppendMountRecord(&records[1], SegmentRec(12, 1 << 20));
  AppendPublishRecord(&records[2], "key-1", 4000, 0x1234abcd, false, on11, 1);
  AppendPublishRecord(&records[3], "key-2", 100, -1, true, on11_12, 2);
  AppendRemoveRecord(&records[4], "key-1");
  AppendPublishRecord(&records[5], "key-1", 4000, -1, false, on11, 1);
  AppendUnmountRecord(&records[6], 12);
  return records;
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A directory of its own, removed with this.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    char name[] = "/tmp/mc-fuzz-seeds.XXXXXX";
    path = mkdtemp(name);
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

// The files an OpLog with these options leaves after appending records from seq after+1,
// concatenated in sequence order (what oplog_recovery_fuzzer cuts back into files).
std::string LogFiles(const std::vector<std::string>& records, uint64_t file_bytes,
                     uint64_t preallocate_bytes, uint64_t after = 0) {
  ScratchDir dir;
  {
    OpLogOptions options;
    options.dir = dir.path;
    options.file_bytes = file_bytes;
    options.preallocate_bytes = preallocate_bytes;
    OpLog log(options);
    log.Recover(0, [](uint64_t, std::string_view) { return true; });
    log.Start(after);
    for (const std::string& r : records) log.Sync(log.Append(r));  // one flush each
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) files.push_back(e.path());
  std::sort(files.begin(), files.end());  // 20-digit names sort by seq
  std::string out;
  for (const auto& f : files) out += ReadAll(f);
  return out;
}

int64_t g_now = 1000;

// A master with a few objects on two segments, one of them with two replicas.
void Populate(MasterService* service) {
  for (int64_t daemon : {1, 2}) {
    service->RegisterDaemon(daemon, Name(daemon));
    service->MountSegment(Segment(daemon, daemon * 10 + 1, 1 << 20));
  }
  for (int i = 0; i < 5; ++i) {
    const std::string key = "key-" + std::to_string(i);
    rpc::ReplicateConfig config = Config(i == 0 ? 2 : 1);
    config.with_hard_pin = i == 1;
    service->PutStart(1, key, 1000 * (i + 1), config);
    service->PutEnd(1, key, i == 2 ? -1 : 1000 + i);
  }
}

MasterOptions SeedOptions() {
  MasterOptions o;
  o.now_ms = [] { return g_now; };
  o.allocation_strategy = "free_ratio_first";
  return o;
}

// The files of a snapshot of a populated master: name -> bytes, and the snapshot's name.
std::map<std::string, std::string> SnapshotFiles(const std::string& dir, std::string* name) {
  MasterService service(SeedOptions());
  Populate(&service);
  *name = WriteSnapshot(&service, dir, 7, 1700000000000);
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/snapshots/" + *name)) {
    files[e.path().filename().string()] = ReadAll(e.path());
  }
  files["latest"] = ReadAll(dir + "/latest");
  return files;
}

}  // namespace

Seeds SnapshotCodecSeeds() {
  ScratchDir dir;
  std::string name;
  std::map<std::string, std::string> files = SnapshotFiles(dir.path, &name);
  Seeds seeds;
  std::string stored;
  AppendSection(&stored, 0, files["segments"]);
  AppendSection(&stored, 1, files["metadata"]);
  seeds.emplace_back("seed-stored", stored);

  // The same state before compression, a shard frame per object shard.
  MasterService service(SeedOptions());
  Populate(&service);
  std::string raw;
  std::string segments;
  std::vector<SegmentRecord> records = service.ExportSegments();
  AppendArrayHeader(&segments, static_cast<uint32_t>(records.size()));
  for (const SegmentRecord& r : records) AppendSegment(&segments, r);
  AppendSection(&raw, 2, segments);
  service.ExportObjects([&](size_t shard, const std::string& objects, uint32_t count) {
    std::string frame;
    AppendLittleEndian(&frame, shard, 2);
    AppendLittleEndian(&frame, count, 4);
    AppendSection(&raw, 3, frame + objects);
    return true;
  });
  seeds.emplace_back("seed-raw", raw);
  return seeds;
}

Seeds SnapshotRestoreSeeds() {
  ScratchDir dir;
  std::string name;
  std::map<std::string, std::string> files = SnapshotFiles(dir.path, &name);
  // The log after the snapshot (seq 7): a removal and another object.
  std::vector<std::string> later(2);
  AppendRemoveRecord(&later[0], "key-4");
  const ReplicaRecord on11[] = {{11, 900096, 0}};  // free, and 64-byte aligned
  AppendPublishRecord(&later[1], "key-9", 100, -1, false, on11, 1);
  const std::string log = LogFiles(later, 64 << 20, 0, /*after=*/7);
  Seeds seeds;
  auto directory = [&](uint8_t options, bool with_log) {
    std::string input;
    AppendSection(&input, 0, files["latest"]);
    AppendSection(&input, 1, files["descriptor"]);
    AppendSection(&input, 2, files["manifest"]);
    AppendSection(&input, 3, files["segments"]);
    AppendSection(&input, 4, files["metadata"]);
    if (with_log) AppendSection(&input, 5, log);
    AppendSection(&input, 6, std::string(1, static_cast<char>(options)));
    return input;
  };
  seeds.emplace_back("seed-snapshot", directory(0x10, false));
  seeds.emplace_back("seed-snapshot-and-log", directory(0x10, true));
  seeds.emplace_back("seed-checksums-fixed", directory(0x1f, true));
  return seeds;
}

Seeds StateRecordsSeeds() {
  Seeds seeds;
  const std::vector<std::string> history = History();
  const char* names[] = {"seed-mount", "seed-mount-2", "seed-publish", "seed-publish-pinned",
                         "seed-remove", "seed-republish", "seed-unmount"};
  for (size_t i = 0; i < history.size(); ++i) seeds.emplace_back(names[i], history[i]);
  std::string segments;
  AppendArrayHeader(&segments, 2);
  AppendSegment(&segments, SegmentRec(11, 1 << 20));
  SegmentRecord lent = SegmentRec(12, 64 << 10);
  lent.lent_by_client = true;
  AppendSegment(&segments, lent);
  seeds.emplace_back("seed-segments", segments);
  std::string objects;
  const ReplicaRecord replicas[] = {{11, 0, 0}, {12, 128, 1}};
  AppendArrayHeader(&objects, 3);
  AppendObject(&objects, "a", 10, -1, false, replicas, 1);
  AppendObject(&objects, "b", 20, 7, true, replicas, 2);
  AppendObject(&objects, std::string(300, 'k'), 30, 0xffffffff, false, replicas + 1, 1);
  seeds.emplace_back("seed-objects", objects);
  return seeds;
}

Seeds OplogRecoverySeeds() {
  const std::vector<std::string> history = History();
  auto with_options = [](uint8_t options, const std::string& files) {
    return std::string(1, static_cast<char>(options)) + files;
  };
  Seeds seeds;
  seeds.emplace_back("seed-one-file", with_options(0x00, LogFiles(history, 64 << 20, 0)));
  const std::string three_files = LogFiles(history, 200, 0);
  seeds.emplace_back("seed-three-files", with_options(0x00, three_files));
  seeds.emplace_back("seed-after-snapshot", with_options(0x03, three_files));
  seeds.emplace_back("seed-zero-tail", with_options(0x80, LogFiles(history, 64 << 20, 512)));
  seeds.emplace_back("seed-any-payload",
                     with_options(0x40, LogFiles({"x", std::string(100, 'y'), "z"}, 64 << 20, 0)));
  return seeds;
}

Seeds MasterRpcSeeds() {
  Seeds seeds;
  {  // one object's whole life
    RpcScript s;
    Daemon(s, 1);
    s.Now().send_PutStart(1, "key-1", 4096, Config());
    s.Now().send_PutEnd(1, "key-1", 0x1234abcd);
    s.Now().send_GetReplicaList("key-1", 0);
    s.Now().send_ExistKey("key-1");
    s.At(3).send_Heartbeat(1);
    s.Now().send_Remove("key-1", false, 1);
    s.Now().send_GetStats();
    s.Now().send_GetAllSegments();
    s.Now().send_UnmountSegment(1, 11);
    seeds.emplace_back("seed-put-get-remove", s.bytes());
  }
  {  // batches over two daemons, two replicas each
    RpcScript s;
    Daemon(s, 1);
    Daemon(s, 2);
    rpc::ReplicateConfig two = Config(2);
    two.preferred_segments = {Name(2)};
    two.avoided_segments = {Name(3)};
    s.Now().send_BatchPutStart(1, {"a", "b", "c"}, {100, 20000, 300000}, two);
    s.Now().send_BatchPutEnd(1, {"a", "b", "c"}, {1, 2, -1});
    s.Now().send_BatchGetReplicaList({"a", "b", "c", "missing"}, 2);
    s.Now().send_BatchExistKey({"a", "missing"});
    s.At(3).send_BatchPutRevoke(1, {"c"});
    s.Now().send_BatchRemove({"a", "b"}, true, 1);
    seeds.emplace_back("seed-batches", s.bytes());
  }
  {  // an upsert replacing a value that is being read
    RpcScript s;
    Daemon(s, 1);
    s.Now().send_PutStart(1, "k", 1000, Config());
    s.Now().send_PutEnd(1, "k", -1);
    s.Now().send_GetReplicaList("k", 0);
    s.Now().send_UpsertStart(1, "k", 5000, Config());
    s.Now().send_GetReplicaList("k", 0);
    s.Now().send_UpsertEnd(1, "k", 77);
    s.Now().send_GetReplicaList("k", 0);
    s.Now().send_UpsertStart(1, "k", 10, Config());
    s.At(2, true).send_UpsertRevoke(1, "k");
    seeds.emplace_back("seed-upsert", s.bytes());
  }
  {  // the SSD tier: a disk segment, an offloading put, its task and report, reconcile,
     // drops, promotion, and a restart that keeps the disk replicas
    RpcScript s;
    Daemon(s, 1);
    rpc::SegmentInfo disk = Segment(1, 12, 1ll << 30);
    disk.kind = rpc::ReplicaKind::LOCAL_DISK;
    disk.base = 0;
    s.Now().send_MountSegment(disk);
    rpc::ReplicateConfig offload = Config();
    offload.offload = 1;
    s.Now().send_PutStart(1, "hot", 4096, offload);
    s.Now().send_PutEnd(1, "hot", 7);
    s.Now().send_FetchOffloads(1, 16);
    s.Now().send_ReportOffloads(1, 12, {"hot"}, {(int64_t{1} << 32) | 1}, {0});
    s.Now().send_GetReplicaList("hot", 0);
    rpc::DiskObject cold;
    cold.key = "cold";
    cold.size = 8192;
    cold.checksum = 5;
    s.Now().send_BeginDiskReconciliation(1, 12, 77);
    s.Now().send_RegisterDiskReplicas(1, 12, {cold}, 77);
    s.Now().send_EndDiskReconciliation(1, 12, 77);
    s.Now().send_GetReplicaList("cold", 0);
    s.Now().send_PromoteStart(1, "cold", (int64_t{2} << 32) | 1);
    s.Now().send_PromoteEnd(1, "cold", true);
    s.AfterSnapshot().send_DropDiskReplicas(1, 12, {"hot"});
    s.AfterRestart().send_RegisterDaemon(1, Name(1));
    s.Now().send_MountSegment(disk);
    s.Now().send_GetStats();
    seeds.emplace_back("seed-disk", s.bytes());
  }
  {  // pins, leases and eviction above the watermark
    RpcScript s;
    Daemon(s, 1, 64 << 10);
    rpc::ReplicateConfig soft = Config();
    soft.with_soft_pin = true;
    soft.soft_pin_ttl_ms = 7000;
    rpc::ReplicateConfig hard = Config();
    hard.with_hard_pin = true;
    for (int i = 0; i < 6; ++i) {
      std::string key = "obj-" + std::to_string(i);
      s.Now().send_PutStart(1, key, 10000, i % 3 == 0 ? soft : i % 3 == 1 ? hard : Config());
      s.Now().send_PutEnd(1, key, i);
    }
    s.Now().send_GetReplicaList("obj-0", 0);
    s.At(3, true).send_GetStats();
    s.At(5, true).send_RemoveAll(false, 0, "");
    s.Now().send_RemoveByRegex("^obj-[0-9]+$", true, 1, "");
    seeds.emplace_back("seed-eviction", s.bytes());
  }
  {  // a daemon that falls silent, and one replaced at the same endpoint
    RpcScript s;
    Daemon(s, 1);
    Daemon(s, 2);
    s.Now().send_PutStart(2, "on-2", 4096, Config());
    s.Now().send_PutEnd(2, "on-2", -1);
    s.At(6, true).send_Heartbeat(1);
    s.At(6, true).send_Heartbeat(1);
    s.At(6, true).send_GetReplicaList("on-2", 0);
    s.Now().send_RegisterDaemon(3, Name(1));
    s.Now().send_Heartbeat(1);
    s.Now().send_MountSegment(Segment(3, 31, 1 << 20));
    s.Now().send_MountSegment(Segment(3, 31, 1 << 20));
    seeds.emplace_back("seed-liveness", s.bytes());
  }
  {  // puts left unfinished: taken over, then released
    RpcScript s;
    Daemon(s, 1);
    Daemon(s, 2);
    s.Now().send_PutStart(1, "k", 4096, Config());
    s.At(4).send_PutStart(2, "k", 4096, Config());
    s.Now().send_PutEnd(1, "k", -1);
    s.Now().send_PutRevoke(2, "k");
    s.Now().send_PutStart(1, "j", 4096, Config());
    s.At(6, true).send_PutEnd(1, "j", -1);
    s.Now().send_Snapshot();
    s.Now().send_LastSnapshot();
    seeds.emplace_back("seed-unfinished", s.bytes());
  }
  {  // a snapshot, more changes, a restart: one daemon re-attaches, the other never does
    RpcScript s;
    Daemon(s, 1);
    Daemon(s, 2);
    for (const char* key : {"a", "b", "c"}) {
      s.Now().send_PutStart(1, key, 4096, Config(2));
      s.Now().send_PutEnd(1, key, -1);
    }
    s.AfterSnapshot().send_Remove("a", true, 0);
    s.Now().send_PutStart(1, "d", 100, Config());
    s.Now().send_PutEnd(1, "d", 5);
    s.AfterRestart().send_Heartbeat(1);
    s.Now().send_RegisterDaemon(1, Name(1));
    s.Now().send_MountSegment(Segment(1, 11, 1 << 20));
    s.Now().send_GetReplicaList("b", 0);
    for (int i = 0; i < 3; ++i) s.At(6, true).send_Heartbeat(1);  // past the re-attach grace
    s.Now().send_GetAllSegments();
    s.AfterRestart().send_GetStats();
    seeds.emplace_back("seed-restart", s.bytes());
  }
  {  // read caches: daemon 2 caches what it reads; changes by daemon 1 name it
    RpcScript s;
    Daemon(s, 1);
    Daemon(s, 2);
    for (const char* key : {"a", "b", "c"}) {
      s.Now().send_PutStart(1, key, 4096, Config());
      s.Now().send_PutEnd(1, key, -1);
    }
    s.Now().send_GetReplicaList("a", 2);
    s.Now().send_BatchGetReplicaList({"b", "c"}, 2);
    s.Now().send_UpsertStart(1, "a", 2048, Config());
    s.Now().send_UpsertEnd(1, "a", 9);
    s.Now().send_Remove("a", false, 1);
    s.Now().send_BatchRemove({"c", "b", "missing"}, true, 1);
    s.Now().send_GetReplicaList("b", 2);
    s.At(1).send_RemoveByRegex("^[a-c]$", true, 1, "");
    s.AfterRestart().send_RemoveAll(true, 2, "");
    seeds.emplace_back("seed-cache-holders", s.bytes());
  }
  {  // a segment drained into another (one a client lent) before its daemon unmounts it
    RpcScript s;
    Daemon(s, 1);
    Daemon(s, 2);
    rpc::SegmentInfo lent = Segment(2, 22, 1 << 20);
    lent.lent_by_client = true;
    s.Now().send_MountSegment(lent);
    rpc::ReplicateConfig on1 = Config();
    on1.preferred_segments = {Name(1)};
    for (const char* key : {"a", "b", "c", "d"}) {
      s.Now().send_PutStart(1, key, 4096, on1);
      s.Now().send_PutEnd(1, key, -1);
    }
    s.Now().send_DrainSegment(1, 11, 0, 64, {Name(3)});  // the whole walk: every object
    s.Now().send_CommitMoves(1, 11, {"a", "b"});
    s.Now().send_RevokeMoves(1, 11, {"c", "d"});
    s.Now().send_DrainSegment(1, 11, 0, 1, {Name(2)});   // a walk of a shard or two
    s.Now().send_DrainSegment(1, 11, 0, 64, {});
    s.Now().send_CommitMoves(1, 11, {"c", "missing"});
    s.Now().send_DrainSegment(2, 11, 0, 64, {});         // not daemon 2's
    s.Now().send_GetReplicaList("a", 0);
    s.Now().send_UnmountSegment(1, 11);
    s.Now().send_GetAllSegments();
    seeds.emplace_back("seed-drain", s.bytes());
  }
  {  // a daemon that proves the key, and proves it again after a restart of the master
    RpcScript s;
    s.OnKeyedConnection().send_GetStats();  // refused: no handshake yet
    Handshake(s);
    Daemon(s, 1);
    s.Now().send_PutStart(1, "k", 4096, Config());
    s.Now().send_PutEnd(1, "k", -1);
    s.Now().send_AuthChallenge(std::string(32, 'c'));  // admitted already: -600
    s.AfterRestart().send_Heartbeat(1);                 // a new connection: refused
    Handshake(s);
    s.Now().send_RegisterDaemon(1, Name(1));
    s.Now().send_MountSegment(Segment(1, 11, 1 << 20));
    s.Now().send_GetReplicaList("k", 0);
    seeds.emplace_back("seed-authenticated", s.bytes());
  }
  {  // attack 2: a peer without the key, or with another, gets refusals only
    RpcScript s;
    Daemon(s, 1);  // on this host, no key: admitted
    s.Now().send_PutStart(1, "k", 4096, Config());
    s.Now().send_PutEnd(1, "k", -1);
    s.OnKeyedConnection().send_RemoveAll(true, 0, "");
    s.Now().send_GetAllSegments();
    s.Now().send_GetReplicaList("k", 0);
    Handshake(s, /*right_key=*/false);
    s.Now().send_RegisterDaemon(6, Name(6));
    s.Now().send_MountSegment(Segment(6, 61, 1 << 30));
    s.OnKeyedConnection().send_Authenticate(std::string(32, 'p'));  // no challenge first
    s.Now().send_UnmountSegment(1, 11);
    s.OnRemoteConnection().send_AuthChallenge(std::string(32, 'c'));
    s.Now().send_Snapshot();
    s.OnLocalConnection().send_GetReplicaList("k", 0);
    seeds.emplace_back("seed-refused", s.bytes());
  }
  {  // tenants: the same key in three key spaces, "fz" past its quota (64 KB), scoped
     // removals, an upsert of "fz", and a restart that recounts their figures
    RpcScript s;
    Daemon(s, 1);
    Daemon(s, 2);
    const std::string fz = tenant_key::Encode("fz", "k");
    const std::string other = tenant_key::Encode("other", "k");
    for (const std::string& key : {std::string("k"), fz, other}) {
      s.Now().send_PutStart(1, key, 30000, Config(2));
      s.Now().send_PutEnd(1, key, -1);
    }
    s.Now().send_BatchPutStart(1, {tenant_key::Encode("fz", "a"), tenant_key::Encode("fz", "b")},
                               {4000, 4000}, Config());
    s.Now().send_UpsertStart(1, fz, 2000, Config());
    s.Now().send_UpsertEnd(1, fz, 3);
    s.Now().send_GetStats();
    s.AfterSnapshot().send_RemoveByRegex("^k$", true, 1, "fz");
    s.Now().send_RemoveAll(true, 1, "other");
    s.Now().send_RemoveAll(true, 1, "not a tenant");
    s.AfterRestart().send_GetStats();
    seeds.emplace_back("seed-tenants", s.bytes());
  }
  return seeds;
}

namespace {

// An rpc_preauth_fuzzer input: sections (fuzz/rpc_preauth_fuzzer.cc), the calls framed as
// a connection sends them.
class PreauthScript {
 public:
  PreauthScript()
      : buffer_(std::make_shared<TMemoryBuffer>()),
        client_(std::make_shared<TBinaryProtocol>(buffer_)) {}

  // The next call, sent on the current connection by Send().
  rpc::MasterServiceClient& Call() { return client_; }
  // The call since the last Send, framed, as one write.
  void Send() {
    const std::string message = buffer_->getBufferAsString();
    buffer_->resetBuffer();
    AppendSection(&bytes_, 0, Header(static_cast<uint32_t>(message.size())) + message);
  }
  void Raw(const std::string& bytes) { AppendSection(&bytes_, 0, bytes); }
  void Handshake(const std::string& nonce) { AppendSection(&bytes_, 3, nonce); }
  void NextConnection() { AppendSection(&bytes_, 1, ""); }
  void Hold(uint8_t count, uint8_t address) {
    AppendSection(&bytes_, 2, std::string{static_cast<char>(count), static_cast<char>(address)});
  }
  const std::string& bytes() const { return bytes_; }

  static std::string Header(uint32_t n) {
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)};
  }

 private:
  std::shared_ptr<TMemoryBuffer> buffer_;
  rpc::MasterServiceClient client_;
  std::string bytes_;
};

}  // namespace

Seeds RpcPreauthSeeds() {
  Seeds seeds;
  {  // calls before the handshake: refused; then the handshake and the same calls served
    PreauthScript s;
    s.Call().send_GetStats();
    s.Send();
    s.Call().send_RemoveAll(true, 0, "");
    s.Send();
    s.Handshake(std::string(32, 'c'));
    s.Call().send_GetStats();
    s.Send();
    s.Call().send_ExistKey("k");
    s.Send();
    seeds.emplace_back("seed-refused-then-admitted", s.bytes());
  }
  {  // a frame declared at 200 MB before admission, and one just over 4 KiB
    PreauthScript s;
    s.Raw(PreauthScript::Header(200u << 20) + std::string(1000, 'x'));
    s.NextConnection();
    s.Call().send_GetRole();
    s.Send();
    s.Raw(PreauthScript::Header(4097) + std::string(4097, 'x'));
    seeds.emplace_back("seed-huge-frames", s.bytes());
  }
  {  // admitted, then a call over 4 KiB behind the handshake: served
    PreauthScript s;
    s.Handshake("nonce");
    s.Call().send_ExistKey(std::string(5000, 'k'));
    s.Send();
    s.Call().send_GetAllSegments();
    s.Send();
    seeds.emplace_back("seed-admitted-big-call", s.bytes());
  }
  {  // half a handshake, a repeated challenge, a proof that does not check
    PreauthScript s;
    s.Call().send_AuthChallenge(std::string(32, 'a'));
    s.Send();
    s.Call().send_AuthChallenge(std::string(32, 'a'));
    s.Send();
    s.NextConnection();
    s.Call().send_AuthChallenge(std::string(32, 'b'));
    s.Send();
    s.Call().send_Authenticate(std::string(32, 'p'));
    s.Send();
    s.Call().send_GetStats();
    s.Send();
    seeds.emplace_back("seed-bad-handshakes", s.bytes());
  }
  {  // silent connections from other addresses, a cut frame, a frame of 0 bytes
    PreauthScript s;
    s.Hold(7, 0);
    s.Hold(7, 1);
    s.Call().send_GetRole();
    s.Send();
    s.Raw(PreauthScript::Header(100) + "cut");
    s.NextConnection();
    s.Hold(3, 2);
    s.Raw(PreauthScript::Header(0));
    seeds.emplace_back("seed-held-and-cut", s.bytes());
  }
  return seeds;
}

}  // namespace fuzz
}  // namespace mooncake
