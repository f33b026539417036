#include "daemon/transfer_protocol.h"

#include "common/little_endian.h"

namespace mooncake {
namespace transfer {

namespace {

template <typename T>
void Put(char*& p, T v) {
  PutLittleEndian(&p, static_cast<uint64_t>(v), sizeof(T));
}

template <typename T>
T Get(const char*& p) {
  return static_cast<T>(GetLittleEndian(&p, sizeof(T)));
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
  Put(p, h.master_epoch);
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
  h->master_epoch = Get<int64_t>(p);
  bool known_op = h->op == static_cast<uint16_t>(Op::kWrite) ||
                  h->op == static_cast<uint16_t>(Op::kRead) ||
                  h->op == static_cast<uint16_t>(Op::kControl);
  return h->magic == kRequestMagic && h->version == kVersion && known_op;
}

void EncodeReply(const ReplyHeader& h, char out[kReplyHeaderSize]) {
  char* p = out;
  Put(p, h.magic);
  Put(p, ToInt(h.code));
  Put(p, h.request_id);
  Put(p, h.length);
}

bool DecodeReply(const char in[kReplyHeaderSize], ReplyHeader* h) {
  const char* p = in;
  h->magic = Get<uint32_t>(p);
  h->code = FromWire(Get<int32_t>(p));
  h->request_id = Get<uint64_t>(p);
  h->length = Get<uint64_t>(p);
  return h->magic == kReplyMagic;
}

}  // namespace transfer
}  // namespace mooncake
