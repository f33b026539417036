// Fixed-width little-endian fields, whatever the host's byte order: the wire formats of
// the transfer port (daemon/transfer/transfer_protocol.h) and of the RDMA descriptors
// (daemon/transfer/rdma_endpoint.h). x86-64 and arm64 compile these loops to plain moves.
#ifndef MOONCAKE_COMMON_LITTLE_ENDIAN_H_
#define MOONCAKE_COMMON_LITTLE_ENDIAN_H_

#include <cstdint>
#include <string>

namespace mooncake {

// Writes the low `bytes` bytes of v at *p and moves *p past them.
inline void PutLittleEndian(char** p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) *(*p)++ = static_cast<char>((v >> (8 * i)) & 0xff);
}

// Appends the low `bytes` bytes of v to out.
inline void AppendLittleEndian(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads `bytes` bytes at *p and moves *p past them; the caller checked there are enough.
inline uint64_t GetLittleEndian(const char** p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(*(*p)++)) << (8 * i);
  }
  return v;
}

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_LITTLE_ENDIAN_H_
