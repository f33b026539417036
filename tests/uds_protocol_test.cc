// common/uds_protocol: frames round-trip, every malformed shape is detected, and a
// descriptor passed with SCM_RIGHTS arrives with its frame.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "common/uds/uds_ops.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake::uds;

namespace {

std::string Payload(FrameBuilder& b) {
  return std::string(b.data() + kFrameHeaderBytes, b.size() - kFrameHeaderBytes);
}

void test_round_trip(void** state) {
  (void)state;
  FrameBuilder b(42, static_cast<int64_t>(Op::kPut), 4);
  b.args().pack(std::string("key-1"));
  b.args().pack(uint64_t{4096});
  b.args().pack(uint64_t{1} << 40);
  WireConfig config;
  config.replica_num = 2;
  config.with_hard_pin = true;
  config.preferred_segments = {"10.0.0.1:12300", "10.0.0.2:12300"};
  PackValue(b.args(), config);

  // The length prefix is little-endian and counts the payload only.
  const unsigned char* p = reinterpret_cast<const unsigned char*>(b.data());
  uint32_t length = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
  assert_int_equal(length, b.size() - kFrameHeaderBytes);

  Message m;
  std::string payload = Payload(b);
  assert_true(ParseMessage(payload.data(), payload.size(), &m));
  assert_int_equal(m.id, 42);
  assert_int_equal(m.head, static_cast<int64_t>(Op::kPut));
  assert_int_equal(m.args.size(), 4);
  assert_string_equal(m.args.Str().c_str(), "key-1");
  assert_int_equal(m.args.U64(), 4096);
  assert_int_equal(m.args.U64(), uint64_t{1} << 40);
  WireConfig back;
  ReadValue(m.args, &back);
  assert_true(m.args.ok());
  assert_int_equal(back.replica_num, 2);
  assert_int_equal(back.soft_pin_action, 0);
  assert_true(back.with_hard_pin);
  assert_int_equal(back.preferred_segments.size(), 2);
  assert_string_equal(back.preferred_segments[1].c_str(), "10.0.0.2:12300");
  // Reading past the end fails instead of inventing a value.
  assert_int_equal(m.args.remaining(), 0);
  (void)m.args.U64();
  assert_false(m.args.ok());
}

void test_negative_codes_and_types(void** state) {
  (void)state;
  FrameBuilder b(7, -704, 2);
  b.args().pack(std::string("x"));
  b.args().pack(true);
  Message m;
  std::string payload = Payload(b);
  assert_true(ParseMessage(payload.data(), payload.size(), &m));
  assert_int_equal(m.head, -704);
  (void)m.args.U64();  // a string where a number is expected
  assert_false(m.args.ok());
}

void test_malformed_payloads(void** state) {
  (void)state;
  Message m;
  const char garbage[] = "\xc1\xc1\xc1 not msgpack";
  assert_false(ParseMessage(garbage, sizeof(garbage) - 1, &m));
  assert_false(ParseMessage("", 0, &m));
  // Well-formed msgpack of the wrong shape: [1, 2] and [1, 2, "not an array"].
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(2);
  pk.pack(1);
  pk.pack(2);
  assert_false(ParseMessage(buf.data(), buf.size(), &m));
  buf.clear();
  pk.pack_array(3);
  pk.pack(1);
  pk.pack(2);
  pk.pack(std::string("x"));
  assert_false(ParseMessage(buf.data(), buf.size(), &m));
  // A truncated frame: cut the last byte of a good payload.
  FrameBuilder b(1, 2, 1);
  b.args().pack(std::string("abcdef"));
  std::string payload = Payload(b);
  assert_false(ParseMessage(payload.data(), payload.size() - 1, &m));
}

void test_reader_cuts_frames_and_passes_fds(void** state) {
  (void)state;
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int memfd = memfd_create("uds-test", MFD_CLOEXEC);
  assert_true(memfd >= 0);

  FrameBuilder first(1, static_cast<int64_t>(Op::kHello), 1);
  first.args().pack(uint64_t{1});
  FrameBuilder second(2, static_cast<int64_t>(Op::kHealth), 0);
  assert_true(SendFrame(sv[0], first.data(), first.size(), memfd));
  assert_true(SendFrame(sv[0], second.data(), second.size()));

  FrameReader reader;
  const char* payload = nullptr;
  size_t length = 0;
  bool oversized = false;
  int frames = 0;
  while (frames < 2) {
    assert_int_equal(static_cast<int>(reader.ReadFrom(sv[1])),
                     static_cast<int>(FrameReader::Status::kOk));
    while (reader.Next(&payload, &length, &oversized)) {
      Message m;
      assert_true(ParseMessage(payload, length, &m));
      assert_int_equal(m.id, ++frames);
    }
    assert_false(oversized);
  }
  std::vector<int> fds = reader.TakeFds();
  assert_int_equal(fds.size(), 1);
  struct stat a, b;
  fstat(memfd, &a);
  fstat(fds[0], &b);
  assert_int_equal(a.st_ino, b.st_ino);  // the same memfd arrived
  close(fds[0]);
  close(memfd);

  // An oversized length prefix is reported, not waited for.
  const unsigned char huge[4] = {0xff, 0xff, 0xff, 0x7f};
  assert_int_equal(write(sv[0], huge, 4), 4);
  assert_int_equal(static_cast<int>(reader.ReadFrom(sv[1])),
                   static_cast<int>(FrameReader::Status::kOk));
  assert_false(reader.Next(&payload, &length, &oversized));
  assert_true(oversized);

  close(sv[0]);
  FrameReader closed;
  assert_int_equal(static_cast<int>(closed.ReadFrom(sv[1])),
                   static_cast<int>(FrameReader::Status::kClosed));
  close(sv[1]);
}

void test_partial_frames(void** state) {
  (void)state;
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  FrameBuilder b(9, 14, 1);
  b.args().pack(std::string(1000, 'k'));
  FrameReader reader;
  const char* payload = nullptr;
  size_t length = 0;
  bool oversized = false;
  // Deliver the frame a few bytes at a time: nothing comes out until it is whole.
  for (size_t sent = 0; sent < b.size();) {
    size_t n = std::min<size_t>(7, b.size() - sent);
    assert_int_equal(write(sv[0], b.data() + sent, n), static_cast<ssize_t>(n));
    sent += n;
    reader.ReadFrom(sv[1]);
    bool got = reader.Next(&payload, &length, &oversized);
    assert_true(got == (sent == b.size()));
  }
  Message m;
  assert_true(ParseMessage(payload, length, &m));
  assert_int_equal(m.id, 9);
  close(sv[0]);
  close(sv[1]);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_negative_codes_and_types),
      cmocka_unit_test(test_malformed_payloads),
      cmocka_unit_test(test_reader_cuts_frames_and_passes_fds),
      cmocka_unit_test(test_partial_frames),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
