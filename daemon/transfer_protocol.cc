#include "daemon/transfer_protocol.h"

#include <cstring>

namespace mooncake {
namespace transfer {

namespace {

// Little-endian on the wire whatever the host; x86 and arm64 compile these to moves.
template <typename T>
void Put(char*& p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) *p++ = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
}

template <typename T>
T Get(const char*& p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(*p++)) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

void EncodeRequest(const RequestHeader& h, char out[kRequestHeaderSize]) {
  char* p = out;
  Put(p, h.magic);
  Put(p, h.version);
  Put(p, h.op);
  Put(p, h.request_id);
  Put(p, h.segment_id);
  Put(p, h.offset);
  Put(p, h.length);
  Put(p, h.reserved);
}

bool DecodeRequest(const char in[kRequestHeaderSize], RequestHeader* h) {
  const char* p = in;
  h->magic = Get<uint32_t>(p);
  h->version = Get<uint16_t>(p);
  h->op = Get<uint16_t>(p);
  h->request_id = Get<uint64_t>(p);
  h->segment_id = Get<int64_t>(p);
  h->offset = Get<uint64_t>(p);
  h->length = Get<uint64_t>(p);
  h->reserved = Get<uint64_t>(p);
  bool known_op = h->op == static_cast<uint16_t>(Op::kWrite) ||
                  h->op == static_cast<uint16_t>(Op::kRead) ||
                  h->op == static_cast<uint16_t>(Op::kControl);
  return h->magic == kRequestMagic && h->version == kVersion && known_op && h->reserved == 0;
}

void EncodeReply(const ReplyHeader& h, char out[kReplyHeaderSize]) {
  char* p = out;
  Put(p, h.magic);
  Put(p, h.code);
  Put(p, h.request_id);
  Put(p, h.length);
}

bool DecodeReply(const char in[kReplyHeaderSize], ReplyHeader* h) {
  const char* p = in;
  h->magic = Get<uint32_t>(p);
  h->code = Get<int32_t>(p);
  h->request_id = Get<uint64_t>(p);
  h->length = Get<uint64_t>(p);
  return h->magic == kReplyMagic;
}

}  // namespace transfer
}  // namespace mooncake
