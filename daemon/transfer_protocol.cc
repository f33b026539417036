#include "daemon/transfer/transfer_protocol.h"

#include "common/base/little_endian.h"

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

enum HelloTag : uint16_t {
  kDaemonNameTag = 1,
  kClientNonceTag = 2,
};

void AppendField(std::string* out, uint16_t tag, const std::string& value) {
  AppendLittleEndian(out, tag, 2);
  AppendLittleEndian(out, value.size(), 2);
  *out += value;
}

}  // namespace

bool KnownOp(uint16_t op) {
  switch (static_cast<Op>(op)) {
    case Op::kWrite:
    case Op::kRead:
    case Op::kControl:
    case Op::kReadDisk:
    case Op::kHello:
    case Op::kAuth:
      return true;
  }
  return false;
}

std::string EncodeDiskRead(const DiskRead& read) {
  std::string out;
  AppendLittleEndian(&out, read.value_offset, 8);
  AppendLittleEndian(&out, read.length, 8);
  AppendLittleEndian(&out, read.value_size, 8);
  AppendLittleEndian(&out, static_cast<uint64_t>(read.checksum), 8);
  out += read.key;
  return out;
}

bool DecodeDiskRead(const char* payload, size_t length, DiskRead* read, const char** why) {
  if (length < kDiskReadFixedBytes) {
    *why = "READ_DISK payload shorter than its fixed fields";
    return false;
  }
  const char* p = payload;
  read->value_offset = Get<uint64_t>(p);
  read->length = Get<uint64_t>(p);
  read->value_size = Get<uint64_t>(p);
  read->checksum = Get<int64_t>(p);
  size_t key_length = length - kDiskReadFixedBytes;
  if (key_length == 0 || key_length > kMaxDiskKey) {
    *why = "READ_DISK key empty or too long";
    return false;
  }
  read->key.assign(p, key_length);
  if (read->length == 0 || read->length > kMaxDiskRead) {
    *why = "READ_DISK length 0 or over 4 MiB";
    return false;
  }
  if (read->length > read->value_size || read->value_offset > read->value_size - read->length) {
    *why = "READ_DISK range outside the value";
    return false;
  }
  return true;
}

std::string EncodeHello(const Hello& hello) {
  std::string out;
  AppendField(&out, kDaemonNameTag, hello.daemon_name);
  if (!hello.client_nonce.empty()) AppendField(&out, kClientNonceTag, hello.client_nonce);
  return out;
}

bool DecodeHello(const char* payload, size_t length, Hello* hello, const char** why) {
  const char* p = payload;
  const char* end = payload + length;
  bool named = false;
  uint16_t last_tag = 0;
  while (p != end) {
    if (end - p < 4) {
      *why = "HELLO field header cut short";
      return false;
    }
    uint16_t tag = Get<uint16_t>(p);
    uint16_t size = Get<uint16_t>(p);
    if (size > end - p) {
      *why = "HELLO field longer than the payload";
      return false;
    }
    if (tag != kDaemonNameTag && tag != kClientNonceTag) {
      *why = "unknown HELLO field";
      return false;
    }
    if (tag <= last_tag) {
      *why = "HELLO fields repeated or out of order";
      return false;
    }
    last_tag = tag;
    if (tag == kDaemonNameTag) {
      named = true;
      hello->daemon_name.assign(p, size);
    } else {
      if (size != kNonceBytes) {
        *why = "HELLO client nonce not 32 bytes";
        return false;
      }
      hello->client_nonce.assign(p, size);
    }
    p += size;
  }
  const std::string& name = hello->daemon_name;
  if (!named || name.empty() || name.size() > kMaxDaemonName) {
    *why = "HELLO without a daemon name of 1..255 bytes";
    return false;
  }
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      *why = "HELLO daemon name not printable ASCII";
      return false;
    }
  }
  return true;
}

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
  return h->magic == kRequestMagic && h->version == kVersion && KnownOp(h->op);
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
