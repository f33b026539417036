// The client side of the SSD tier on the socket (issue 14, part api): a put's offload
// choice travels in its config and reaches the master's ReplicateConfig; a config from a
// library of the previous ABI is malformed (hence the ABI bump, which HELLO checks first);
// and the largest replica-descriptor reply the daemon may send still parses within the
// frame limits.
#include <string>
#include <vector>

#include "common/uds/uds_ops.h"
#include "daemon/service/store_service.h"
#include "include/mooncake_store.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake;
using namespace mooncake::uds;

namespace {

// The bytes of one value packed on its own, parsed back as T.
template <class T, class U>
bool Reparse(const U& value, T* out) {
  FrameBuilder frame(1, 2, 1);
  PackValue(frame.args(), value);
  const char* data = frame.data();
  Message m;
  if (!ParseMessage(data + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &m)) return false;
  ReadValue(m.args, out);
  return m.args.ok() && m.args.remaining() == 0;
}

void test_offload_travels_to_the_master_config(void**) {
  for (uint64_t mode : {0, 1, 2}) {
    WireConfig wire;
    wire.offload = mode;
    WireConfig back;
    assert_true(Reparse(wire, &back));
    assert_int_equal(back.offload, mode);
    rpc::ReplicateConfig config;
    assert_true(store_detail::ToRpcConfig(back, &config));
    assert_int_equal(config.offload, static_cast<int32_t>(mode));
  }
  // The C ABI's modes are the wire's values.
  assert_int_equal(MOONCAKE_SSD_OFFLOAD_DEFAULT, 0);
  assert_int_equal(MOONCAKE_SSD_OFFLOAD_ON, 1);
  assert_int_equal(MOONCAKE_SSD_OFFLOAD_OFF, 2);
}

void test_unknown_offload_is_refused(void**) {
  WireConfig wire;
  wire.offload = 3;
  rpc::ReplicateConfig config;
  assert_false(store_detail::ToRpcConfig(wire, &config));
}

// The config a library of ABI 2 sends: [replica_num, soft, hard, [preferred]].
struct OldConfig {
  uint64_t replica_num = 1;
  bool with_soft_pin = false;
  bool with_hard_pin = false;
  std::vector<std::string> preferred_segments;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("replica_num", s.replica_num);
    v("with_soft_pin", s.with_soft_pin);
    v("with_hard_pin", s.with_hard_pin);
    v("preferred", s.preferred_segments);
  }
};

// ... is not a config any more.
void test_previous_abi_config_is_malformed(void**) {
  WireConfig back;
  assert_false(Reparse(OldConfig(), &back));
  assert_true(MOONCAKE_STORE_ABI_VERSION >= 3);
}

// kMaxReplicaDescBatch keys with 65 replicas each (64 memory replicas, the most a put may
// ask for, and a disk one) of long names: the reply still fits one frame and parses.
void test_largest_batch_reply_parses(void**) {
  BatchReplicaDescReply reply;
  WireReplica replica;
  replica.kind = 1;
  replica.status = 1;
  replica.location = std::string(253, 'h') + ":65535";
  replica.size = 1ull << 32;
  reply.entries.assign(kMaxReplicaDescBatch,
                       ReplicaDescEntry{0, std::vector<WireReplica>(65, replica)});
  ReplyFrame frame(7, ErrorCode::OK, reply);
  const char* data = frame.data();
  assert_true(frame.size() - kFrameHeaderBytes <= kMaxFrameBytes);
  Message m;
  std::string why;
  if (!ParseMessage(data + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes, &m, &why)) {
    fail_msg("the largest reply does not parse: %s", why.c_str());
  }
  BatchReplicaDescReply back;
  assert_true(ParseFields(m.args, &back));
  assert_int_equal(back.entries.size(), kMaxReplicaDescBatch);
  assert_int_equal(back.entries.back().replicas.size(), 65);
  assert_string_equal(back.entries.back().replicas.back().location.c_str(),
                      replica.location.c_str());
  // Every location fits the C ABI's descriptor.
  assert_true(replica.location.size() < MOONCAKE_STORE_LOCATION_SIZE);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_offload_travels_to_the_master_config),
      cmocka_unit_test(test_unknown_offload_is_refused),
      cmocka_unit_test(test_previous_abi_config_is_malformed),
      cmocka_unit_test(test_largest_batch_reply_parses),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
