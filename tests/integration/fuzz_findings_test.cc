// What the fuzz harnesses found (docs/fuzzing.md), each fixed and pinned here in the normal
// suite; the inputs that found them are replayed by fuzz_replay_* and the fuzz runs too
// (fuzz/corpus/<harness>/regress-*).
//
//  - a frame or a record declaring more msgpack entries than it has bytes made the decoder
//    allocate for all of them first (an 11-byte frame asked for 89 GB), and a frame with
//    bytes after its message was accepted;
//  - a Thrift call declaring a long string or list made the master allocate and zero-fill
//    it before reading it (a 30-byte call, 1.3 GB);
//  - a snapshot shard whose zstd header claimed up to 4 GiB made a restore zero-fill that
//    much before finding the frame empty;
//  - a config file whose key is a list or a map threw out of the flag parser and killed
//    the binary.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <zstd.h>
#include <thrift/transport/TBufferTransports.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "MasterService.h"
#include "common/base/flags.h"
#include "common/base/little_endian.h"
#include "common/uds/uds_ops.h"
#include "master/service/master_service.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/log/state_records.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"

namespace {

using namespace mooncake;
namespace harness = mooncake::testing;

// ---- the Unix-socket frames ----

std::string Payload(uds::FrameBuilder& b) {
  return std::string(b.data() + uds::kFrameHeaderBytes, b.size() - uds::kFrameHeaderBytes);
}

void test_frame_declaring_more_entries_than_bytes_is_refused(void**) {
  // [id, head, {map of 0xdddddddd pairs...}]: what the fuzzer sent (89 GB asked of malloc).
  const std::string frame("\x88\xdd\xdd\xdd\xdd\xdd\xdd\xdd", 8);
  uds::Message m;
  assert_false(uds::ParseMessage(frame.data(), frame.size(), &m));
  // An array header alone, 2^32 - 1 entries announced, none there.
  const std::string array("\x93\x01\x02\xdd\xff\xff\xff\xff", 8);
  assert_false(uds::ParseMessage(array.data(), array.size(), &m));
}

void test_frame_with_bytes_after_the_message_is_refused(void**) {
  uds::RequestFrame frame(7, uds::Op::kExist, uds::KeyArgs{"key-1"});
  std::string payload = Payload(frame);
  uds::Message m;
  assert_true(uds::ParseMessage(payload.data(), payload.size(), &m));
  payload += '\xc0';  // a msgpack nil after the message (docs/protocol.md: malformed)
  assert_false(uds::ParseMessage(payload.data(), payload.size(), &m));
}

void test_frame_nested_deeper_than_any_message_is_refused(void**) {
  std::string payload("\x93\x01\x0e", 3);  // [1, 14, [[[[...]]]]]
  payload += std::string(64, '\x91');
  payload += '\x90';
  uds::Message m;
  assert_false(uds::ParseMessage(payload.data(), payload.size(), &m));
}

void test_deepest_real_frames_still_parse(void**) {
  uds::BatchPutArgs batch;
  batch.entries = {{"a", 0, 10, ""}, {"b", 64, 20, "g"}};
  batch.config.replica_num = 2;
  batch.config.preferred_segments = {"10.0.0.1:12300", "10.0.0.2:12300"};
  uds::RequestFrame frame(3, uds::Op::kBatchPut, batch);
  const std::string payload = Payload(frame);
  uds::Message m;
  assert_true(uds::ParseMessage(payload.data(), payload.size(), &m));
  uds::BatchPutArgs parsed;
  assert_true(uds::ParseFields(m.args, &parsed));
  assert_int_equal(parsed.entries.size(), 2);
  assert_string_equal(parsed.config.preferred_segments[1].c_str(), "10.0.0.2:12300");
}

// ---- the master's records ----

void test_record_declaring_more_entries_than_bytes_is_refused(void**) {
  LogRecord record;
  // A map of 0x07000028 pairs: the fuzzer's 5-byte record (5.6 GB asked of malloc).
  assert_false(DecodeLogRecord(std::string_view("\xdf\x07\x00\x00\x28", 5), &record));
  std::vector<SegmentRecord> segments;
  assert_false(DecodeSegments(std::string_view("\xdd\x10\x00\x00\x00", 5), &segments));
  // A real one still decodes.
  std::string bytes;
  const ReplicaRecord replicas[] = {{11, 0, 0}, {12, 64, 1}};
  AppendPublishRecord(&bytes, "key-1", 100, 7, true, replicas, 2);
  assert_true(DecodeLogRecord(bytes, &record));
  assert_int_equal(record.object.replicas.size(), 2);
}

// ---- snapshots ----

long PeakResidentMiBOfThisProcess() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

void test_snapshot_shard_claiming_more_than_it_can_hold_is_refused(void**) {
  LoadedSnapshot snapshot;
  std::string segments(ZSTD_compressBound(1), '\0');
  segments.resize(ZSTD_compress(segments.data(), segments.size(), "\x90", 1, 3));  // []
  snapshot.payloads["segments"] = segments;
  // A zstd frame header that says 1.5 GiB follow (magic, a 4-byte content size, a window),
  // and nothing after it: what the fuzzer sent, a shard of 1.5 GiB in 9 bytes.
  const uint64_t claimed = 1536ull << 20;
  std::string packed("\x28\xb5\x2f\xfd\x80\x00", 6);
  AppendLittleEndian(&packed, claimed, 4);
  std::string& metadata = snapshot.payloads["metadata"];
  AppendLittleEndian(&metadata, 0, 4);  // shard
  AppendLittleEndian(&metadata, 1, 4);  // objects
  AppendLittleEndian(&metadata, claimed, 4);
  AppendLittleEndian(&metadata, packed.size(), 4);
  metadata += packed;
  assert_int_equal(ZSTD_getFrameContentSize(packed.data(), packed.size()), claimed);

  const long before = PeakResidentMiBOfThisProcess();
  MasterService service{MasterOptions()};
  SnapshotFigures figures;
  std::string why;
  assert_int_equal(ToInt(LoadSnapshotPayloads(&service, snapshot, &figures, &why)),
                   ToInt(ErrorCode::DESERIALIZE_FAIL));
  const long after = PeakResidentMiBOfThisProcess();
  std::printf("peak resident memory: %ld MiB before the load, %ld MiB after (%s)\n", before,
              after, why.c_str());
  assert_true(after < before + 256);
}

// ---- the master's RPC ----

// The master's peak resident memory (VmHWM), in MiB.
long PeakResidentMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6)) / 1024;
  }
  return -1;
}

// One framed call, as a daemon's client sends it, of which the caller writes the args.
template <typename WriteArgs>
std::string FramedCall(const std::string& method, WriteArgs write_args) {
  auto buffer = std::make_shared<apache::thrift::transport::TMemoryBuffer>();
  apache::thrift::protocol::TBinaryProtocol out(buffer);
  out.writeMessageBegin(method, apache::thrift::protocol::T_CALL, 1);
  write_args(out);
  const std::string message = buffer->getBufferAsString();
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>(message.size() >> (8 * (3 - i)));
  return frame + message;
}

bool SendRaw(int port, const std::string& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  char ignored[256];
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  while (ok && recv(fd, ignored, sizeof(ignored), 0) > 0) {
  }  // the master answers or closes the connection once it has read the call
  close(fd);
  return ok;
}

void test_master_refuses_calls_declaring_huge_strings_and_lists(void**) {
  // Both ways a call is read: decoded for a handler (a master without a key admits a
  // loopback peer at once) and skipped unread (a master with a key, before the handshake).
  for (bool with_key : {false, true}) {
    const std::string dir = harness::MakeTempDir("mc-fuzz-findings-");
    harness::ChildProcess master;
    int port = 0;
    std::vector<std::string> flags;
    if (!with_key) flags = {"--cluster_key_file", ""};
    assert_true(harness::StartMaster(&master, &port, dir + "/master.log", flags));
    const long before = PeakResidentMiB(master.pid());
    assert_true(before > 0);

    // PutStart whose key says 1.5 GB, with 8 bytes of it there.
    const std::string long_key =
        FramedCall("PutStart", [](apache::thrift::protocol::TProtocol& p) {
          p.writeStructBegin("MasterService_PutStart_args");
          p.writeFieldBegin("key", apache::thrift::protocol::T_STRING, 2);
          p.writeI32(1500 << 20);
          p.writeI64(0);
        });
    assert_true(SendRaw(port, long_key));
    // BatchExistKey whose list says 25 million keys, none there.
    const std::string long_list =
        FramedCall("BatchExistKey", [](apache::thrift::protocol::TProtocol& p) {
          p.writeStructBegin("MasterService_BatchExistKey_args");
          p.writeFieldBegin("keys", apache::thrift::protocol::T_LIST, 1);
          p.writeListBegin(apache::thrift::protocol::T_STRING, 25 << 20);
          p.writeI64(0);
        });
    assert_true(SendRaw(port, long_list));

    const long after = PeakResidentMiB(master.pid());
    std::printf("master %s a key: peak resident memory %ld MiB before the calls, %ld MiB "
                "after\n",
                with_key ? "with" : "without", before, after);
    assert_true(after < before + 256);
    int64_t objects = -1;
    assert_true(harness::WithMasterClientKey(
        port, with_key ? harness::ClusterKeyFile() : "", [&](rpc::MasterServiceClient& c) {
          rpc::MasterStats stats;
          c.GetStats(stats);
          objects = stats.objects;
        }));
    assert_int_equal(objects, 0);
    assert_int_equal(master.Stop(SIGTERM, 5000), 0);
    harness::RemoveTree(dir);
  }
}

// ---- config files ----

void test_config_key_that_is_not_a_name_is_an_error(void**) {
  const std::string dir = harness::MakeTempDir("mc-fuzz-findings-");
  for (const char* text : {"{[a, b]: 1}\n", "? {x: y}\n: 1\n", "~: 1\n"}) {
    const std::string path = dir + "/config.yaml";
    std::ofstream(path) << text;
    std::string value = "unchanged";
    FlagSet flags("test", "");
    flags.AddString("a", &value, "a flag");
    std::string arg = "--config=" + path;
    char program[] = "test";
    char* argv[] = {program, &arg[0], nullptr};
    std::string error;
    assert_false(flags.Parse(2, argv, &error));
    assert_non_null(std::strstr(error.c_str(), path.c_str()));
    assert_string_equal(value.c_str(), "unchanged");
  }
  harness::RemoveTree(dir);
}

}  // namespace

int main() {
  // Run by hand (from build/ or anywhere), it finds the binaries it spawns next to itself
  // (<build>/tests/integration/fuzz_findings_test); ctest sets MC_BUILD_DIR.
  std::error_code ignored;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ignored);
  if (std::getenv("MC_BUILD_DIR") == nullptr && !self.empty()) {
    setenv("MC_BUILD_DIR", self.parent_path().parent_path().c_str(), 0);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frame_declaring_more_entries_than_bytes_is_refused),
      cmocka_unit_test(test_frame_with_bytes_after_the_message_is_refused),
      cmocka_unit_test(test_frame_nested_deeper_than_any_message_is_refused),
      cmocka_unit_test(test_deepest_real_frames_still_parse),
      cmocka_unit_test(test_record_declaring_more_entries_than_bytes_is_refused),
      cmocka_unit_test(test_snapshot_shard_claiming_more_than_it_can_hold_is_refused),
      cmocka_unit_test(test_master_refuses_calls_declaring_huge_strings_and_lists),
      cmocka_unit_test(test_config_key_that_is_not_a_name_is_an_error),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
