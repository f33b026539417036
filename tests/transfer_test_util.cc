#include "tests/transfer_test_util.h"

#include <errno.h>

#include "common/error_code.h"
#include "tests/cmocka_cpp.h"

namespace mooncake {
namespace testing {

bool SendRequest(int fd, uint16_t op, int64_t segment, uint64_t offset, uint64_t length,
                 const std::string& payload) {
  transfer::RequestHeader h;
  h.op = op;
  h.request_id = 99;
  h.segment_id = segment;
  h.offset = offset;
  h.length = length;
  char head[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, head);
  return tcp_io::Send(fd, head, sizeof(head), payload.data(), payload.size(), kRawPeerBounds);
}

int32_t ReplyCode(int fd, std::string* payload) {
  char head[transfer::kReplyHeaderSize];
  if (!tcp_io::Recv(fd, head, sizeof(head), kRawPeerBounds)) {
    assert_true(errno == ECONNRESET);  // closed, not silent
    return kClosed;
  }
  transfer::ReplyHeader r;
  assert_true(transfer::DecodeReply(head, &r));
  if (r.code != ErrorCode::OK) assert_int_equal(r.length, 0);  // a refusal carries nothing
  std::string bytes(r.length, '\0');
  assert_true(tcp_io::Recv(fd, &bytes[0], bytes.size(), kRawPeerBounds));
  if (payload != nullptr) *payload = std::move(bytes);
  return ToInt(r.code);
}

}  // namespace testing
}  // namespace mooncake
