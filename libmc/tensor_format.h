// Mooncake's tensor object layouts (include/mooncake_store.h, "tensors"): the 304-byte
// header before a tensor's elements, the 96-byte manifest of a split tensor, the uniform
// split, and the keys of a split tensor's objects. This is the one place the layouts are
// written down in code; every binding reaches them through the C ABI (c_api_tensor.cc).
//
// The layouts are Mooncake's C structs as its client memcpy's them on x86-64 (natural
// alignment, little-endian, no padding in the header, 4 bytes of it in the manifest), so
// objects written by either client read on the other. Here they are read and written field
// by field at fixed offsets (the tables in docs/mooncake-api.md, "Tensors"), little-endian
// whatever the host, never by casting bytes to a struct.
//
// Input policy: every function takes its arguments as untrusted (a header may come from
// any object in the store) and answers INVALID_PARAMS, explained as the caller's doing
// (libmc/last_error.h) with the field named, for anything Mooncake's reader would refuse.
// Decode accepts exactly what Mooncake's reader accepts, and encode only what decode
// accepts, so what is encoded always decodes. Nothing here allocates beyond a key string,
// touches a handle or blocks: any thread may call anything.
#ifndef MOONCAKE_LIBMC_TENSOR_FORMAT_H_
#define MOONCAKE_LIBMC_TENSOR_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/base/error_code.h"
#include "include/mooncake_store.h"

namespace mooncake {
namespace client {
namespace tensor {

constexpr uint32_t kHeaderMagic = 0x4d4f4f4e;
constexpr uint32_t kManifestMagic = 0x574d414e;
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderSize = MOONCAKE_TENSOR_HEADER_SIZE;
constexpr size_t kManifestSize = MOONCAKE_TENSOR_MANIFEST_SIZE;
// Mooncake's reader accepts one more axis kind than it writes (its RESERVED).
constexpr int32_t kReservedAxisKind = 4;

// The bytes of one element, 0 for a code that names no type.
size_t DtypeSize(int32_t dtype);

// A FULL header for a tensor of the given shape (see mooncake_store_tensor_header_init).
ErrorCode InitHeader(int32_t dtype, int32_t ndim, const int64_t* shape,
                     mooncake_tensor_header_t* out);

// Checks a header as decode would for an object of data_offset + data_bytes bytes.
ErrorCode CheckHeader(const mooncake_tensor_header_t& header);

// The header's kHeaderSize bytes at out.
ErrorCode EncodeHeader(const mooncake_tensor_header_t& header, uint8_t* out);

// The header at buf (kHeaderSize bytes) of an object of object_size bytes (0: take the
// header's own data_offset + data_bytes).
ErrorCode DecodeHeader(const uint8_t* buf, uint64_t object_size, mooncake_tensor_header_t* out);

ErrorCode EncodeManifest(const mooncake_tensor_manifest_t& manifest, uint8_t* out);
ErrorCode DecodeManifest(const uint8_t* buf, mooncake_tensor_manifest_t* out);

// Shard rank of count along a dimension of dim_size elements, when count divides it.
ErrorCode ShardRange(int64_t dim_size, int32_t rank, int32_t count, int64_t* start,
                     int64_t* extent);

// The key of kind (MOONCAKE_TENSOR_KEY_*) for base; axes as mooncake_store_tensor_key says.
ErrorCode Key(int kind, const std::string& base, const mooncake_tensor_axis_t* axes,
              size_t axis_count, std::string* out);

}  // namespace tensor
}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_TENSOR_FORMAT_H_
