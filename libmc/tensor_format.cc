// Mooncake's tensor layouts, field by field. See tensor_format.h; the offsets below are
// the tables of docs/mooncake-api.md, "Tensors".
#include "libmc/tensor_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "libmc/last_error.h"

namespace mooncake {
namespace client {
namespace tensor {

namespace {

// Header offsets.
constexpr size_t kMagicAt = 0;           // u32
constexpr size_t kVersionAt = 4;         // u16
constexpr size_t kHeaderSizeAt = 6;      // u16
constexpr size_t kDtypeAt = 8;           // i32
constexpr size_t kNdimAt = 12;           // i32
constexpr size_t kLayoutAt = 16;         // u32
constexpr size_t kFlagsAt = 20;          // u32, 0
constexpr size_t kDataOffsetAt = 24;     // u64
constexpr size_t kDataBytesAt = 32;      // u64
constexpr size_t kGlobalShapeAt = 40;    // i64[8]
constexpr size_t kLocalShapeAt = 104;    // i64[8]
constexpr size_t kAxisCountAt = 168;     // u32
constexpr size_t kAxesReservedAt = 172;  // u32, 0
constexpr size_t kAxesAt = 176;          // 4 axes of kAxisSize bytes
constexpr size_t kAxisSize = 32;
// Offsets within one axis.
constexpr size_t kAxisKindAt = 0;     // i32
constexpr size_t kAxisIndexAt = 4;    // i32: the axis's position in the list
constexpr size_t kAxisRankAt = 8;     // i32
constexpr size_t kAxisShardsAt = 12;  // i32
constexpr size_t kAxisSplitAt = 16;   // i32, -1 for none
constexpr size_t kAxisIdAt = 20;      // i32: EP's expert id, PP's stage id, else 0
constexpr size_t kAxisExtentAt = 24;  // i64: local_shape[split_dim], 0 without a split
static_assert(kAxesAt + MOONCAKE_TENSOR_MAX_AXES * kAxisSize == kHeaderSize,
              "the header is 304 bytes");

// Manifest offsets.
constexpr size_t kManifestDtypeAt = 8;      // i32
constexpr size_t kManifestNdimAt = 12;      // i32
constexpr size_t kManifestSplitAt = 16;     // i32
constexpr size_t kManifestShardsAt = 20;    // i32
constexpr size_t kManifestReservedAt = 24;  // i32, 0; then 4 bytes of alignment
constexpr size_t kManifestShapeAt = 32;     // i64[8]
static_assert(kManifestShapeAt + 8 * MOONCAKE_TENSOR_MAX_DIMS == kManifestSize,
              "the manifest is 96 bytes");

constexpr int kMaxDims = MOONCAKE_TENSOR_MAX_DIMS;
constexpr uint32_t kMaxAxes = MOONCAKE_TENSOR_MAX_AXES;

template <typename T>
void Put(uint8_t* out, size_t at, T value) {
  using U = typename std::make_unsigned<T>::type;
  U v = static_cast<U>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

template <typename T>
T Get(const uint8_t* in, size_t at) {
  using U = typename std::make_unsigned<T>::type;
  U v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<U>(in[at + i]) << (8 * i);
  return static_cast<T>(v);
}

ErrorCode Bad(std::string what, std::string why) {
  return Refused(ErrorCode::INVALID_PARAMS, what + ": " + why);
}

std::string Num(int64_t v) { return std::to_string(v); }

// numel(shape[0..ndim)) x element size, or false on overflow.
bool ElementBytes(const int64_t* shape, int32_t ndim, size_t element_size, uint64_t* out) {
  uint64_t n = element_size;
  for (int32_t i = 0; i < ndim; ++i) {
    const uint64_t d = static_cast<uint64_t>(shape[i]);
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

// The checks of the header's fields that do not depend on the object's size.
ErrorCode CheckFields(const char* what, int32_t dtype, int32_t ndim, int32_t layout,
                      const int64_t* global_shape, const int64_t* local_shape, uint32_t axis_count,
                      const mooncake_tensor_axis_t* axes) {
  const std::string w = what;
  if (DtypeSize(dtype) == 0) {
    return Bad(w, "dtype " + Num(dtype) + " names no element type (0 to " +
                      Num(MOONCAKE_DTYPE_COUNT - 1) + ")");
  }
  if (ndim < 0 || ndim > kMaxDims) {
    return Bad(w, "ndim " + Num(ndim) + " is out of range (0 to " + Num(kMaxDims) + ")");
  }
  if (layout != MOONCAKE_TENSOR_FULL && layout != MOONCAKE_TENSOR_SHARD) {
    return Bad(w, "layout " + Num(layout) + " is neither FULL (0) nor SHARD (1)");
  }
  if (axis_count > kMaxAxes) {
    return Bad(w, "axis_count " + Num(axis_count) + " is more than " + Num(kMaxAxes));
  }
  for (int32_t i = 0; i < ndim; ++i) {
    if (global_shape[i] < 0 || local_shape[i] < 0) {
      return Bad(w, "dimension " + Num(i) + " is negative (global " + Num(global_shape[i]) +
                        ", local " + Num(local_shape[i]) + ")");
    }
  }
  for (uint32_t i = 0; i < axis_count; ++i) {
    const mooncake_tensor_axis_t& a = axes[i];
    const std::string axis = "axis " + Num(i) + ": ";
    if (a.kind < MOONCAKE_TENSOR_AXIS_DP || a.kind > kReservedAxisKind) {
      return Bad(w, axis + "kind " + Num(a.kind) + " is unknown (DP 0, TP 1, EP 2, PP 3)");
    }
    if (a.size <= 0 || a.rank < 0 || a.rank >= a.size) {
      return Bad(w, axis + "rank " + Num(a.rank) + " of size " + Num(a.size) +
                        " (size must be > 0 and 0 <= rank < size)");
    }
    if (a.split_dim < -1 || a.split_dim >= ndim) {
      return Bad(
          w, axis + "split_dim " + Num(a.split_dim) + " is not -1 or a dimension of " + Num(ndim));
    }
  }
  return ErrorCode::OK;
}

}  // namespace

size_t DtypeSize(int32_t dtype) {
  switch (dtype) {
    case MOONCAKE_DTYPE_FLOAT64:
    case MOONCAKE_DTYPE_INT64:
    case MOONCAKE_DTYPE_UINT64:
      return 8;
    case MOONCAKE_DTYPE_FLOAT32:
    case MOONCAKE_DTYPE_INT32:
    case MOONCAKE_DTYPE_UINT32:
      return 4;
    case MOONCAKE_DTYPE_INT16:
    case MOONCAKE_DTYPE_UINT16:
    case MOONCAKE_DTYPE_FLOAT16:
    case MOONCAKE_DTYPE_BFLOAT16:
      return 2;
    case MOONCAKE_DTYPE_INT8:
    case MOONCAKE_DTYPE_UINT8:
    case MOONCAKE_DTYPE_BOOL:
    case MOONCAKE_DTYPE_FLOAT8_E4M3:
    case MOONCAKE_DTYPE_FLOAT8_E5M2:
      return 1;
    default:
      return 0;
  }
}

ErrorCode InitHeader(int32_t dtype, int32_t ndim, const int64_t* shape,
                     mooncake_tensor_header_t* out) {
  mooncake_tensor_header_t h{};
  h.dtype = dtype;
  h.ndim = ndim;
  h.layout = MOONCAKE_TENSOR_FULL;
  std::fill(std::begin(h.global_shape), std::end(h.global_shape), -1);
  std::fill(std::begin(h.local_shape), std::end(h.local_shape), -1);
  if (ndim > 0 && ndim <= kMaxDims) {
    std::copy(shape, shape + ndim, h.global_shape);
    std::copy(shape, shape + ndim, h.local_shape);
  }
  ErrorCode rc =
      CheckFields("tensor", dtype, ndim, h.layout, h.global_shape, h.local_shape, 0, h.axes);
  if (rc != ErrorCode::OK) return rc;
  if (!ElementBytes(shape, ndim, DtypeSize(dtype), &h.data_bytes) ||
      h.data_bytes > std::numeric_limits<uint64_t>::max() - kHeaderSize) {
    return Bad("tensor", "its size overflows 64 bits");
  }
  h.data_offset = kHeaderSize;
  *out = h;
  return ErrorCode::OK;
}

ErrorCode CheckHeader(const mooncake_tensor_header_t& h) {
  ErrorCode rc = CheckFields("tensor header", h.dtype, h.ndim, h.layout, h.global_shape,
                             h.local_shape, h.axis_count, h.axes);
  if (rc != ErrorCode::OK) return rc;
  if (h.data_offset < kHeaderSize) {
    return Bad("tensor header", "data_offset " + Num(static_cast<int64_t>(h.data_offset)) +
                                    " is inside the header (at least " + Num(kHeaderSize) + ")");
  }
  if (h.data_bytes > std::numeric_limits<uint64_t>::max() - h.data_offset) {
    return Bad("tensor header", "data_offset + data_bytes overflows 64 bits");
  }
  uint64_t expected = 0;
  if (!ElementBytes(h.local_shape, h.ndim, DtypeSize(h.dtype), &expected) ||
      expected != h.data_bytes) {
    return Bad("tensor header", "data_bytes " + std::to_string(h.data_bytes) +
                                    " is not the bytes of local_shape's elements (" +
                                    std::to_string(expected) + ")");
  }
  return ErrorCode::OK;
}

ErrorCode EncodeHeader(const mooncake_tensor_header_t& h, uint8_t* out) {
  ErrorCode rc = CheckHeader(h);
  if (rc != ErrorCode::OK) return rc;
  std::memset(out, 0, kHeaderSize);
  Put<uint32_t>(out, kMagicAt, kHeaderMagic);
  Put<uint16_t>(out, kVersionAt, kVersion);
  Put<uint16_t>(out, kHeaderSizeAt, static_cast<uint16_t>(kHeaderSize));
  Put<int32_t>(out, kDtypeAt, h.dtype);
  Put<int32_t>(out, kNdimAt, h.ndim);
  Put<uint32_t>(out, kLayoutAt, static_cast<uint32_t>(h.layout));
  Put<uint32_t>(out, kFlagsAt, 0);
  Put<uint64_t>(out, kDataOffsetAt, h.data_offset);
  Put<uint64_t>(out, kDataBytesAt, h.data_bytes);
  for (int i = 0; i < kMaxDims; ++i) {
    Put<int64_t>(out, kGlobalShapeAt + 8 * i, i < h.ndim ? h.global_shape[i] : -1);
    Put<int64_t>(out, kLocalShapeAt + 8 * i, i < h.ndim ? h.local_shape[i] : -1);
  }
  Put<uint32_t>(out, kAxisCountAt, h.axis_count);
  Put<uint32_t>(out, kAxesReservedAt, 0);
  for (uint32_t i = 0; i < h.axis_count; ++i) {
    const mooncake_tensor_axis_t& a = h.axes[i];
    const size_t at = kAxesAt + i * kAxisSize;
    int32_t id = 0;
    if (a.kind == MOONCAKE_TENSOR_AXIS_EP && a.expert_id >= 0) id = a.expert_id;
    if (a.kind == MOONCAKE_TENSOR_AXIS_PP && a.stage_id >= 0) id = a.stage_id;
    Put<int32_t>(out, at + kAxisKindAt, a.kind);
    Put<int32_t>(out, at + kAxisIndexAt, static_cast<int32_t>(i));
    Put<int32_t>(out, at + kAxisRankAt, a.rank);
    Put<int32_t>(out, at + kAxisShardsAt, a.size);
    Put<int32_t>(out, at + kAxisSplitAt, a.split_dim);
    Put<int32_t>(out, at + kAxisIdAt, id);
    Put<int64_t>(out, at + kAxisExtentAt, a.split_dim >= 0 ? h.local_shape[a.split_dim] : 0);
  }
  return ErrorCode::OK;
}

ErrorCode DecodeHeader(const uint8_t* in, uint64_t object_size, mooncake_tensor_header_t* out) {
  const std::string w = "tensor header";
  const uint32_t magic = Get<uint32_t>(in, kMagicAt);
  if (magic != kHeaderMagic) {
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%08x", magic);
    return Bad(w, std::string("magic ") + hex +
                      " is not a tensor's (0x4d4f4f4e): the object "
                      "is not a tensor stored by put_tensor");
  }
  if (Get<uint16_t>(in, kVersionAt) != kVersion) {
    return Bad(w, "version " + Num(Get<uint16_t>(in, kVersionAt)) + " is not 1");
  }
  if (Get<uint16_t>(in, kHeaderSizeAt) != kHeaderSize) {
    return Bad(
        w, "header_size " + Num(Get<uint16_t>(in, kHeaderSizeAt)) + " is not " + Num(kHeaderSize));
  }
  mooncake_tensor_header_t h{};
  h.dtype = Get<int32_t>(in, kDtypeAt);
  h.ndim = Get<int32_t>(in, kNdimAt);
  const uint32_t layout = Get<uint32_t>(in, kLayoutAt);
  if (layout > MOONCAKE_TENSOR_SHARD) {
    return Bad(w, "layout " + std::to_string(layout) + " is neither FULL (0) nor SHARD (1)");
  }
  h.layout = static_cast<int32_t>(layout);
  h.data_offset = Get<uint64_t>(in, kDataOffsetAt);
  h.data_bytes = Get<uint64_t>(in, kDataBytesAt);
  for (int i = 0; i < kMaxDims; ++i) {
    h.global_shape[i] = Get<int64_t>(in, kGlobalShapeAt + 8 * i);
    h.local_shape[i] = Get<int64_t>(in, kLocalShapeAt + 8 * i);
  }
  h.axis_count = Get<uint32_t>(in, kAxisCountAt);
  for (uint32_t i = 0; i < std::min(h.axis_count, kMaxAxes); ++i) {
    const size_t at = kAxesAt + i * kAxisSize;
    mooncake_tensor_axis_t& a = h.axes[i];
    a.kind = Get<int32_t>(in, at + kAxisKindAt);
    a.rank = Get<int32_t>(in, at + kAxisRankAt);
    a.size = Get<int32_t>(in, at + kAxisShardsAt);
    a.split_dim = Get<int32_t>(in, at + kAxisSplitAt);
    const int32_t id = Get<int32_t>(in, at + kAxisIdAt);
    a.expert_id = a.kind == MOONCAKE_TENSOR_AXIS_EP ? id : -1;
    a.stage_id = a.kind == MOONCAKE_TENSOR_AXIS_PP ? id : -1;
  }
  ErrorCode rc = CheckFields(w.c_str(), h.dtype, h.ndim, h.layout, h.global_shape, h.local_shape,
                             h.axis_count, h.axes);
  if (rc != ErrorCode::OK) return rc;
  for (int i = h.ndim; i < kMaxDims; ++i) {
    if (h.global_shape[i] != -1 || h.local_shape[i] != -1) {
      return Bad(w, "dimension " + Num(i) + " past ndim " + Num(h.ndim) + " is not -1");
    }
  }
  if (object_size == 0) {
    if (h.data_bytes > std::numeric_limits<uint64_t>::max() - h.data_offset) {
      return Bad(w, "data_offset + data_bytes overflows 64 bits");
    }
    object_size = h.data_offset + h.data_bytes;
  }
  if (h.data_offset < kHeaderSize || h.data_offset > object_size) {
    return Bad(w, "data_offset " + std::to_string(h.data_offset) +
                      " is not between the header's end and the object's (" +
                      std::to_string(object_size) + " bytes)");
  }
  if (h.data_bytes != object_size - h.data_offset) {
    return Bad(w, "data_bytes " + std::to_string(h.data_bytes) + " is not the " +
                      std::to_string(object_size - h.data_offset) +
                      " bytes after data_offset (a truncated or padded object)");
  }
  rc = CheckHeader(h);
  if (rc != ErrorCode::OK) return rc;
  *out = h;
  return ErrorCode::OK;
}

ErrorCode EncodeManifest(const mooncake_tensor_manifest_t& m, uint8_t* out) {
  const std::string w = "tensor manifest";
  if (m.ndim < 0 || m.ndim > kMaxDims) {
    return Bad(w, "ndim " + Num(m.ndim) + " is out of range (0 to " + Num(kMaxDims) + ")");
  }
  if (m.shard_count <= 0) return Bad(w, "shard_count " + Num(m.shard_count) + " is not > 0");
  if (m.split_dim < 0 || m.split_dim >= m.ndim) {
    return Bad(w, "split_dim " + Num(m.split_dim) + " is not a dimension of " + Num(m.ndim));
  }
  for (int i = 0; i < m.ndim; ++i) {
    if (m.global_shape[i] < 0) return Bad(w, "dimension " + Num(i) + " is negative");
  }
  std::memset(out, 0, kManifestSize);
  Put<uint32_t>(out, kMagicAt, kManifestMagic);
  Put<uint16_t>(out, kVersionAt, kVersion);
  Put<uint16_t>(out, kHeaderSizeAt, static_cast<uint16_t>(kManifestSize));
  Put<int32_t>(out, kManifestDtypeAt, m.dtype);
  Put<int32_t>(out, kManifestNdimAt, m.ndim);
  Put<int32_t>(out, kManifestSplitAt, m.split_dim);
  Put<int32_t>(out, kManifestShardsAt, m.shard_count);
  Put<int32_t>(out, kManifestReservedAt, 0);
  for (int i = 0; i < kMaxDims; ++i) {
    Put<int64_t>(out, kManifestShapeAt + 8 * i, i < m.ndim ? m.global_shape[i] : -1);
  }
  return ErrorCode::OK;
}

ErrorCode DecodeManifest(const uint8_t* in, mooncake_tensor_manifest_t* out) {
  const std::string w = "tensor manifest";
  if (Get<uint32_t>(in, kMagicAt) != kManifestMagic) {
    return Bad(w, "magic is not a manifest's (0x574d414e)");
  }
  if (Get<uint16_t>(in, kVersionAt) != kVersion) return Bad(w, "version is not 1");
  if (Get<uint16_t>(in, kHeaderSizeAt) != kManifestSize) {
    return Bad(w, "header_size is not " + Num(kManifestSize));
  }
  mooncake_tensor_manifest_t m{};
  m.dtype = Get<int32_t>(in, kManifestDtypeAt);
  m.ndim = Get<int32_t>(in, kManifestNdimAt);
  m.split_dim = Get<int32_t>(in, kManifestSplitAt);
  m.shard_count = Get<int32_t>(in, kManifestShardsAt);
  for (int i = 0; i < kMaxDims; ++i) {
    m.global_shape[i] = Get<int64_t>(in, kManifestShapeAt + 8 * i);
  }
  if (m.ndim < 0 || m.ndim > kMaxDims) return Bad(w, "ndim " + Num(m.ndim) + " is out of range");
  if (m.shard_count <= 0) return Bad(w, "shard_count " + Num(m.shard_count) + " is not > 0");
  if (m.split_dim < 0 || m.split_dim >= m.ndim) {
    return Bad(w, "split_dim " + Num(m.split_dim) + " is not a dimension of " + Num(m.ndim));
  }
  for (int i = 0; i < m.ndim; ++i) {
    if (m.global_shape[i] < 0) return Bad(w, "dimension " + Num(i) + " is negative");
  }
  *out = m;
  return ErrorCode::OK;
}

ErrorCode ShardRange(int64_t dim_size, int32_t rank, int32_t count, int64_t* start,
                     int64_t* extent) {
  if (count <= 0 || rank < 0 || rank >= count) {
    return Bad("tensor split", "rank " + Num(rank) + " of " + Num(count) +
                                   " shards (count must be > 0 and 0 <= rank < count)");
  }
  if (dim_size < 0 || dim_size % count != 0) {
    return Bad("tensor split", "a dimension of " + Num(dim_size) + " does not split into " +
                                   Num(count) + " equal shards (only uniform splits are stored)");
  }
  *extent = dim_size / count;
  *start = *extent * rank;
  return ErrorCode::OK;
}

ErrorCode Key(int kind, const std::string& base, const mooncake_tensor_axis_t* axes,
              size_t axis_count, std::string* out) {
  static const char* const kNames[] = {"dp", "tp", "ep", "pp"};
  const std::string w = "tensor key";
  switch (kind) {
    case MOONCAKE_TENSOR_KEY_WRITER_MANIFEST:
      *out = base + "__writer_manifest";
      return ErrorCode::OK;
    case MOONCAKE_TENSOR_KEY_PARALLELISM_MANIFEST:
      *out = base + "__parallelism_manifest";
      return ErrorCode::OK;
    case MOONCAKE_TENSOR_KEY_SHARD:
    case MOONCAKE_TENSOR_KEY_WRITER_SHARD:
      break;
    default:
      return Bad(w, "kind " + Num(kind) + " is not a MOONCAKE_TENSOR_KEY_* (0 to 3)");
  }
  if (axis_count == 0 || axis_count > kMaxAxes) {
    return Bad(w, Num(static_cast<int64_t>(axis_count)) + " axes (1 to " + Num(kMaxAxes) + ")");
  }
  bool seen[4] = {false, false, false, false};
  for (size_t i = 0; i < axis_count; ++i) {
    const mooncake_tensor_axis_t& a = axes[i];
    if (a.kind < MOONCAKE_TENSOR_AXIS_DP || a.kind > MOONCAKE_TENSOR_AXIS_PP) {
      return Bad(w, "axis " + Num(i) + ": kind " + Num(a.kind) +
                        " is unknown (DP 0, TP 1, EP 2, "
                        "PP 3)");
    }
    if (seen[a.kind]) return Bad(w, std::string("two ") + kNames[a.kind] + " axes");
    seen[a.kind] = true;
    if (a.size <= 0 || a.rank < 0 || a.rank >= a.size) {
      return Bad(w, "axis " + Num(i) + ": rank " + Num(a.rank) + " of size " + Num(a.size));
    }
  }
  if (kind == MOONCAKE_TENSOR_KEY_WRITER_SHARD) {
    const mooncake_tensor_axis_t& a = axes[0];
    if (axis_count != 1 || a.kind != MOONCAKE_TENSOR_AXIS_TP || a.split_dim < 0) {
      return Bad(w, "a writer shard has one TP axis with a split_dim");
    }
    *out = base + "__writer_" + Num(a.rank) + "of" + Num(a.size) + "_sd" + Num(a.split_dim);
    return ErrorCode::OK;
  }
  if (axis_count == 1 && axes[0].kind == MOONCAKE_TENSOR_AXIS_TP) {
    *out = base + "_tp_" + Num(axes[0].rank);  // the key of put_tensor_with_tp's shards
    return ErrorCode::OK;
  }
  // Every axis, DP then TP, EP, PP: the order of Mooncake's canonical parallelism, which is
  // the kinds' numeric order.
  std::string key = base;
  for (int k = MOONCAKE_TENSOR_AXIS_DP; k <= MOONCAKE_TENSOR_AXIS_PP; ++k) {
    for (size_t i = 0; i < axis_count; ++i) {
      const mooncake_tensor_axis_t& a = axes[i];
      if (a.kind != k) continue;
      key += std::string("__") + kNames[k] + "_" + Num(a.rank) + "of" + Num(a.size);
      if (a.split_dim >= 0) key += "_sd" + Num(a.split_dim);
      if (a.expert_id >= 0) key += "_eid" + Num(a.expert_id);
      if (a.stage_id >= 0) key += "_sid" + Num(a.stage_id);
    }
  }
  *out = std::move(key);
  return ErrorCode::OK;
}

}  // namespace tensor
}  // namespace client
}  // namespace mooncake
