// Seeds of the daemon's harnesses and of the flags: frames built by the protocol's own
// frame builders, headers and descriptors by the transfer port's encoders, command lines
// and config files from the binaries' own flag tables.
#include <string>
#include <vector>

#include "common/base/flags.h"
#include "common/uds/uds_ops.h"
#include "daemon/cluster/cache_invalidator.h"
#include "daemon/server/daemon_options.h"
#include "daemon/transfer/rdma_endpoint.h"
#include "daemon/transfer/transfer_protocol.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/seeds.h"
#include "include/mooncake_store.h"
#include "master/directory/master_options.h"

namespace mooncake {
namespace fuzz {

namespace {

template <class Args>
std::string Request(uint64_t id, uds::Op op, const Args& args) {
  uds::RequestFrame frame(id, op, args);
  return std::string(frame.data(), frame.size());
}

std::string Hello() {
  uds::HelloArgs hello;
  hello.abi_version = MOONCAKE_STORE_ABI_VERSION;
  hello.pool_size = 1 << 20;
  hello.pid = 4242;
  hello.master_address = "127.0.0.1:50051";
  hello.tenant = "team-7.prod";
  return Request(1, uds::Op::kHello, hello);
}

uds::WireConfig Config() {
  uds::WireConfig c;
  c.replica_num = 2;
  c.soft_pin_action = 1;  // ENABLE, for a minute
  c.soft_pin_ttl_given = true;
  c.soft_pin_ttl_ms = 60000;
  c.prefer_local = true;
  c.preferred_segments = {"10.0.0.1:12300"};
  return c;
}

// One request of every op, as libmc sends them after HELLO.
std::vector<std::pair<std::string, std::string>> EveryOp() {
  std::vector<std::pair<std::string, std::string>> ops;
  uds::PutArgs put{"key-1", 0, 4096, Config()};
  ops.emplace_back("put", Request(2, uds::Op::kPut, put));
  ops.emplace_back("upsert", Request(3, uds::Op::kUpsert, put));
  uds::BatchPutArgs batch_put;
  batch_put.entries = {{"a", 0, 10}, {"b", 64, 20}};
  batch_put.config = Config();
  ops.emplace_back("batch-put", Request(4, uds::Op::kBatchPut, batch_put));
  uds::PutBeginArgs begin{"big", 1 << 30, Config(), uds::Flag{true}};
  ops.emplace_back("put-begin", Request(5, uds::Op::kPutBegin, begin));
  uds::ChunkArgs chunk{7, 0, 0, 1 << 20};
  ops.emplace_back("put-chunk", Request(6, uds::Op::kPutChunk, chunk));
  ops.emplace_back("put-commit", Request(7, uds::Op::kPutCommit, uds::StagedIdArgs{7}));
  ops.emplace_back("put-abort", Request(8, uds::Op::kPutAbort, uds::StagedIdArgs{7}));
  uds::GetArgs get{"key-1", 4096, 4096};
  ops.emplace_back("get", Request(9, uds::Op::kGet, get));
  uds::BatchGetArgs batch_get;
  batch_get.entries = {get, {"b", 0, 64}};
  ops.emplace_back("batch-get", Request(10, uds::Op::kBatchGet, batch_get));
  ops.emplace_back("get-begin", Request(11, uds::Op::kGetBegin, uds::KeyArgs{"big"}));
  ops.emplace_back("get-chunk", Request(12, uds::Op::kGetChunk, chunk));
  ops.emplace_back("get-end", Request(13, uds::Op::kGetEnd, uds::StagedIdArgs{9}));
  ops.emplace_back("exist", Request(14, uds::Op::kExist, uds::KeyArgs{"key-1"}));
  uds::BatchExistArgs exist;
  exist.keys = {"a", "b", "c"};
  ops.emplace_back("batch-exist", Request(15, uds::Op::kBatchExist, exist));
  ops.emplace_back("get-size", Request(16, uds::Op::kGetSize, uds::KeyArgs{"key-1"}));
  ops.emplace_back("remove", Request(17, uds::Op::kRemove, uds::RemoveArgs{"key-1", {true}}));
  uds::RemoveByRegexArgs regex{"^key-[0-9]+$", {false}};
  ops.emplace_back("remove-by-regex", Request(18, uds::Op::kRemoveByRegex, regex));
  ops.emplace_back("remove-all", Request(19, uds::Op::kRemoveAll, uds::RemoveAllArgs{{true}}));
  ops.emplace_back("hostname", Request(20, uds::Op::kHostname, uds::NoArgs{}));
  ops.emplace_back("health", Request(21, uds::Op::kHealth, uds::NoArgs{}));
  ops.emplace_back("mount-segment",
                   Request(22, uds::Op::kMountSegment, uds::MountSegmentArgs{64 << 20}));
  uds::BatchRemoveArgs batch_remove;
  batch_remove.keys = {"a", "b"};
  ops.emplace_back("batch-remove", Request(23, uds::Op::kBatchRemove, batch_remove));
  ops.emplace_back("unmount-segments", Request(24, uds::Op::kUnmountSegments, uds::NoArgs{}));
  ops.emplace_back("pool-fence", Request(25, uds::Op::kPoolFence, uds::NoArgs{}));
  uds::BatchReplicaClearArgs clear;
  clear.keys = {"a", "b"};
  clear.segment_name = "127.0.0.1:7000";
  ops.emplace_back("batch-replica-clear", Request(26, uds::Op::kBatchReplicaClear, clear));
  ops.emplace_back("mount-pool-segment", Request(27, uds::Op::kMountPoolSegment,
                                                 uds::MountPoolSegmentArgs{4096, 1 << 20}));
  ops.emplace_back("allocate-segment",
                   Request(28, uds::Op::kAllocateSegment, uds::MountSegmentArgs{1 << 20}));
  ops.emplace_back("unmount-segment",
                   Request(29, uds::Op::kUnmountSegment, uds::UnmountSegmentArgs{12345}));
  ops.emplace_back("unmount-local-disk-segment",
                   Request(30, uds::Op::kUnmountLocalDiskSegment, uds::NoArgs{}));
  uds::GetRangesArgs ranges{"key-1", {{0, 64, 0}, {4032, 64, 64}}};
  ops.emplace_back("get-ranges", Request(31, uds::Op::kGetRanges, ranges));
  uds::BatchGetRangesArgs batch_ranges;
  batch_ranges.entries = {ranges, {"key-2", {{128, 256, 4096}}}};
  ops.emplace_back("batch-get-ranges", Request(32, uds::Op::kBatchGetRanges, batch_ranges));
  ops.emplace_back("batch-upsert", Request(33, uds::Op::kBatchUpsert, batch_put));
  return ops;
}

// "--name=default" for every flag of a FlagSet, in gflags' spellings by turns ("-name=",
// "--name=", and "--name"/"--noname" for booleans), so the corpus starts from each.
std::vector<std::string> EveryFlag(const FlagSet& flags) {
  std::vector<std::string> args;
  bool single_dash = false;
  for (const FlagSet::Doc& doc : flags.Docs()) {
    const std::string dashes = single_dash ? "-" : "--";
    single_dash = !single_dash;
    if (doc.value_name.empty()) {
      args.push_back(dashes + (doc.default_value == "true" ? "" : "no") + doc.name);
    } else {
      args.push_back(dashes + doc.name + "=" + doc.default_value);
    }
  }
  return args;
}

}  // namespace

Seeds UdsFrameSeeds() {
  Seeds seeds;
  std::string session = Hello();
  for (const auto& [name, frame] : EveryOp()) {
    seeds.emplace_back("seed-" + name, Hello() + frame);
    session += frame;
  }
  seeds.emplace_back("seed-session", session);
  seeds.emplace_back("seed-hello", Hello());
  return seeds;
}

Seeds TransferHeaderSeeds() {
  Seeds seeds;
  auto request = [](transfer::Op op, int64_t segment, uint64_t length) {
    transfer::RequestHeader h;
    h.op = static_cast<uint16_t>(op);
    h.request_id = 77;
    h.segment_id = segment;
    h.offset = 4096;
    h.length = length;
    h.master_epoch = 0x1234;
    char out[transfer::kRequestHeaderSize];
    transfer::EncodeRequest(h, out);
    return std::string(out, sizeof(out));
  };
  seeds.emplace_back("seed-write", request(transfer::Op::kWrite, 11, 1 << 20));
  seeds.emplace_back("seed-read", request(transfer::Op::kRead, 11, 4096));
  seeds.emplace_back("seed-control",
                     request(transfer::Op::kControl,
                             static_cast<int64_t>(transfer::ControlChannel::kRdmaConnect), 100));
  transfer::ReplyHeader reply;
  reply.code = ErrorCode::SEGMENT_NOT_FOUND;
  reply.request_id = 77;
  reply.length = 4096;
  char out[transfer::kReplyHeaderSize];
  transfer::EncodeReply(reply, out);
  seeds.emplace_back("seed-reply", std::string(out, sizeof(out)));
  transfer::Hello hello;
  hello.daemon_name = "10.0.0.1:12300";
  const std::string hello_payload = transfer::EncodeHello(hello);
  seeds.emplace_back("seed-hello", hello_payload);
  seeds.emplace_back("seed-hello-request",
                     request(transfer::Op::kHello, 0, hello_payload.size()) + hello_payload);
  // The cluster-key handshake: HELLO with a client nonce, then AUTH with a proof.
  hello.client_nonce = std::string(transfer::kNonceBytes, '\x11');
  const std::string keyed_hello = transfer::EncodeHello(hello);
  seeds.emplace_back("seed-hello-keyed", keyed_hello);
  seeds.emplace_back("seed-auth-request",
                     request(transfer::Op::kAuth, 0, transfer::kProofBytes) +
                         std::string(transfer::kProofBytes, '\x22'));
  const std::vector<std::string> keys = {"key-1", "key-2", std::string(100, 'k')};
  seeds.emplace_back("seed-invalidate-keys",
                     invalidation::EncodeKeys(keys, {}, transfer::kMaxControlPayload)[0]);
  seeds.emplace_back("seed-invalidate-everything", invalidation::EncodeEverything());
  seeds.emplace_back("seed-lines", "\x20\x01key-1\nkey-2\n\n10.0.0.2:12300\n" +
                                       std::string(100, 'k'));
  RdmaSegmentDescriptor d;
  d.mtu = 5;
  d.lid = 3;
  d.rkey = 0xabcd;
  d.base = 1ull << 40;
  d.size = 1 << 30;
  seeds.emplace_back("seed-rdma-descriptor", EncodeRdmaDescriptor(d));
  RdmaQpEndpoint e;
  e.mtu = 3;
  e.rd_atomic = 16;
  e.qpn = 0x1234;
  e.psn = 0x55aa;
  e.instance = 99;
  e.device = "mlx5_0";
  seeds.emplace_back("seed-rdma-endpoint", EncodeRdmaQpEndpoint(e));
  return seeds;
}

// What peers without the key send to the transfer port, one section per connection (tag 1:
// left open), as transfer_opening_fuzzer reads them.
Seeds TransferOpeningSeeds() {
  auto request = [](transfer::Op op, int64_t segment, uint64_t offset, uint64_t length) {
    transfer::RequestHeader h;
    h.op = static_cast<uint16_t>(op);
    h.request_id = 5;
    h.segment_id = segment;
    h.offset = offset;
    h.length = length;
    char out[transfer::kRequestHeaderSize];
    transfer::EncodeRequest(h, out);
    return std::string(out, sizeof(out));
  };
  const std::string keyed = transfer::EncodeHello(
      transfer::Hello{"10.0.0.1:12300", std::string(transfer::kNonceBytes, '\x11')});
  const std::string unkeyed = transfer::EncodeHello(transfer::Hello{"10.0.0.1:12300", ""});
  const std::string hello = request(transfer::Op::kHello, 0, 0, keyed.size()) + keyed;
  const std::string auth = request(transfer::Op::kAuth, 0, 0, transfer::kProofBytes) +
                           std::string(transfer::kProofBytes, '\x22');
  const std::string read = request(transfer::Op::kRead, 7, 0, 4096);
  const std::string write = request(transfer::Op::kWrite, 7, 0, 64) + std::string(64, 'w');
  const std::string control = request(transfer::Op::kControl, 2, 0, 8) + std::string(8, 'c');
  transfer::DiskRead disk_read;
  disk_read.key = "key-1";
  disk_read.value_size = 4096;
  disk_read.length = 4096;
  const std::string disk = transfer::EncodeDiskRead(disk_read);
  const std::string read_disk = request(transfer::Op::kReadDisk, 8, 0, disk.size()) + disk;
  const std::vector<std::pair<std::string, std::pair<uint8_t, std::string>>> one = {
      {"seed-hello-auth", {0, hello + auth}},
      {"seed-hello-auth-read", {0, hello + auth + read}},
      {"seed-hello-left-open", {1, hello}},
      {"seed-hello-cut-short", {1, hello.substr(0, transfer::kRequestHeaderSize + 10)}},
      {"seed-header-cut-short", {1, hello.substr(0, 20)}},
      {"seed-silent", {1, ""}},
      {"seed-hello-no-nonce",
       {0, request(transfer::Op::kHello, 0, 0, unkeyed.size()) + unkeyed}},
      {"seed-auth-alone", {0, auth}},
      {"seed-read-before-hello", {0, read}},
      {"seed-write-before-auth", {0, hello + write}},
      {"seed-control-before-hello", {0, control}},
      {"seed-read-disk-before-hello", {0, read_disk}},
      {"seed-hello-twice", {0, hello + hello}},
  };
  Seeds seeds;
  std::string several;  // the first eight, one after the other: the harness's most
  for (size_t i = 0; i < one.size(); ++i) {
    std::string input;
    AppendSection(&input, one[i].second.first, one[i].second.second);
    seeds.emplace_back(one[i].first, input);
    if (i < 8) several += input;
  }
  seeds.emplace_back("seed-several-connections", several);
  return seeds;
}

Seeds FlagsSeeds() {
  MasterOptions master;
  FlagSet master_flags("mooncake-master", "");
  RegisterMasterFlags(&master_flags, &master);
  DaemonOptions daemon;
  FlagSet daemon_flags("mooncaked", "");
  RegisterDaemonFlags(&daemon_flags, &daemon);
  auto command_line = [](const std::vector<std::string>& args) {
    std::string input;
    for (const std::string& a : args) AppendSection(&input, 0, a);
    return input;
  };
  Seeds seeds;
  seeds.emplace_back("seed-master-every-flag", command_line(EveryFlag(master_flags)));
  seeds.emplace_back("seed-daemon-every-flag", command_line(EveryFlag(daemon_flags)));
  seeds.emplace_back("seed-forms",
                     command_line({"--rpc_port", "0", "--enable_snapshot", "--snapshot_dir=/x",
                                   "--read_cache", "false", "--global_segment_size", "1.5 GiB",
                                   "--client_live_ttl_sec=2.5s", "--transfer_timeout", "250ms"}));
  seeds.emplace_back("seed-gflags",
                     command_line({"-v=1", "-port=50051", "--noenable_metric_reporting",
                                   "-read_cache", "--v", "0", "-log_level", "debug",
                                   "--nologtostderr", "-rpc_interface", "eth0"}));
  std::string yaml;
  for (const FlagSet::Doc& doc : master_flags.Docs()) {
    yaml += doc.name + ": \"" + doc.default_value + "\"\n";
  }
  std::string with_yaml = command_line({"--rpc_port=7000"});
  AppendSection(&with_yaml, 1, yaml);
  seeds.emplace_back("seed-master-config-yaml", with_yaml);
  std::string with_json = command_line({"--port", "12345"});
  AppendSection(&with_json, 1,
                "{\"master\": \"10.0.0.1:50051\", \"socket_mode\": \"0600\", "
                "\"protocol\": \"tcp\", \"worker_threads\": 8, \"checksum\": true}");
  seeds.emplace_back("seed-daemon-config-json", with_json);
  return seeds;
}

}  // namespace fuzz
}  // namespace mooncake
