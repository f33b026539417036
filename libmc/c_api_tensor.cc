// The extern "C" surface of include/mooncake_store.h's tensor section: argument checks
// (NULL -> -1, too small an output -> -600), then libmc/tensor_format.h, whose refusals
// name the field. None of these calls takes a handle, so each one's message is the one
// mooncake_store_errmsg(NULL) returns on the calling thread, as for parse_size; they log
// nothing (a layout that does not decode is an answer, not an incident).
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "common/base/error_code.h"
#include "include/mooncake_store.h"
#include "libmc/api_checks.h"
#include "libmc/c_api_call.h"
#include "libmc/last_error.h"
#include "libmc/tensor_format.h"

using mooncake::ErrorCode;
using mooncake::client::kInternal;
using mooncake::client::kInvalidParams;
using mooncake::client::NullArgument;
using mooncake::client::Refuse;

namespace tensor = mooncake::client::tensor;

namespace {

// Runs f (the body of a handle-less call), turning any exception into -1, and records the
// call's message for errmsg(NULL). R is the function's integer type.
template <typename R, typename F>
R NoHandleCall(F&& f) noexcept {
  mooncake::client::BeginCall();
  R result = kInternal;
  try {
    result = f();
  } catch (...) {
    result = kInternal;
  }
  try {
    mooncake::client::RecordMessage(
        0, result >= 0 ? std::string() : mooncake::client::MessageFor(mooncake::FromWire(result)));
  } catch (...) {  // out of memory: the message is lost, the result is not
  }
  return result;
}

int ToAbi(ErrorCode code) { return mooncake::ToInt(code); }

int TooSmall(const char* what, size_t size, size_t needed) {
  return Refuse(kInvalidParams, std::string(what) + " is " + std::to_string(size) + " bytes; " +
                                    std::to_string(needed) + " are needed");
}

}  // namespace

MC_EXPORT size_t mooncake_store_tensor_dtype_size(int32_t dtype) {
  return tensor::DtypeSize(dtype);
}

MC_EXPORT int mooncake_store_tensor_header_init(mooncake_tensor_header_t* header, int32_t dtype,
                                                int32_t ndim, const int64_t* shape) {
  return NoHandleCall<int>([&] {
    if (header == nullptr) return NullArgument("header");
    if (shape == nullptr && ndim > 0) return NullArgument("shape");
    return ToAbi(tensor::InitHeader(dtype, ndim, shape, header));
  });
}

MC_EXPORT int mooncake_store_tensor_header_encode(const mooncake_tensor_header_t* header, void* out,
                                                  size_t out_size) {
  return NoHandleCall<int>([&] {
    if (header == nullptr) return NullArgument("header");
    if (out == nullptr) return NullArgument("out");
    if (out_size < tensor::kHeaderSize) return TooSmall("out", out_size, tensor::kHeaderSize);
    return ToAbi(tensor::EncodeHeader(*header, static_cast<uint8_t*>(out)));
  });
}

MC_EXPORT int mooncake_store_tensor_header_decode(const void* buf, size_t buf_size,
                                                  uint64_t object_size,
                                                  mooncake_tensor_header_t* out) {
  return NoHandleCall<int>([&] {
    if (buf == nullptr) return NullArgument("buf");
    if (out == nullptr) return NullArgument("out");
    if (buf_size < tensor::kHeaderSize) {
      return TooSmall("the object's first bytes (buf_size)", buf_size, tensor::kHeaderSize);
    }
    return ToAbi(tensor::DecodeHeader(static_cast<const uint8_t*>(buf), object_size, out));
  });
}

MC_EXPORT int mooncake_store_tensor_manifest_encode(const mooncake_tensor_manifest_t* manifest,
                                                    void* out, size_t out_size) {
  return NoHandleCall<int>([&] {
    if (manifest == nullptr) return NullArgument("manifest");
    if (out == nullptr) return NullArgument("out");
    if (out_size < tensor::kManifestSize) {
      return TooSmall("out", out_size, tensor::kManifestSize);
    }
    return ToAbi(tensor::EncodeManifest(*manifest, static_cast<uint8_t*>(out)));
  });
}

MC_EXPORT int mooncake_store_tensor_manifest_decode(const void* buf, size_t buf_size,
                                                    mooncake_tensor_manifest_t* out) {
  return NoHandleCall<int>([&] {
    if (buf == nullptr) return NullArgument("buf");
    if (out == nullptr) return NullArgument("out");
    if (buf_size < tensor::kManifestSize) {
      return TooSmall("buf_size", buf_size, tensor::kManifestSize);
    }
    return ToAbi(tensor::DecodeManifest(static_cast<const uint8_t*>(buf), out));
  });
}

MC_EXPORT int mooncake_store_tensor_shard_range(int64_t dim_size, int32_t rank, int32_t count,
                                                int64_t* start, int64_t* extent) {
  return NoHandleCall<int>([&] {
    if (start == nullptr) return NullArgument("start");
    if (extent == nullptr) return NullArgument("extent");
    return ToAbi(tensor::ShardRange(dim_size, rank, count, start, extent));
  });
}

MC_EXPORT int64_t mooncake_store_tensor_key(int kind, const char* base,
                                            const mooncake_tensor_axis_t* axes, size_t axis_count,
                                            char* out, size_t out_size) {
  return NoHandleCall<int64_t>([&]() -> int64_t {
    if (out != nullptr && out_size > 0) out[0] = '\0';
    if (base == nullptr) return NullArgument("base");
    if (out == nullptr) return NullArgument("out");
    const bool shard =
        kind == MOONCAKE_TENSOR_KEY_SHARD || kind == MOONCAKE_TENSOR_KEY_WRITER_SHARD;
    if (axes == nullptr && shard) return NullArgument("axes");
    std::string key;
    ErrorCode rc = tensor::Key(kind, base, axes, axis_count, &key);
    if (rc != ErrorCode::OK) return ToAbi(rc);
    if (key.size() + 1 > out_size) return TooSmall("out", out_size, key.size() + 1);
    std::memcpy(out, key.c_str(), key.size() + 1);
    return static_cast<int64_t>(key.size());
  });
}
