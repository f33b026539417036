// Private module functions over the C ABI's tensor layouts. See tensor_codec.h.
#include "tensor_codec.h"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "buffers.h"
#include "mooncake_store.h"

namespace mooncake_py {

namespace {

using Axis = std::tuple<int, int, int, std::optional<int>, std::optional<int>, std::optional<int>>;

// A refusal of the library: ValueError with its reason.
[[noreturn]] void Raise() { throw py::value_error(mooncake_store_errmsg(nullptr)); }

mooncake_tensor_axis_t ToC(const Axis& a) {
  return {std::get<0>(a),
          std::get<1>(a),
          std::get<2>(a),
          std::get<3>(a).value_or(-1),
          std::get<4>(a).value_or(-1),
          std::get<5>(a).value_or(-1)};
}

Axis FromC(const mooncake_tensor_axis_t& a) {
  auto opt = [](int32_t v) { return v >= 0 ? std::optional<int>(v) : std::nullopt; };
  return {a.kind, a.rank, a.size, opt(a.split_dim), opt(a.expert_id), opt(a.stage_id)};
}

py::tuple Shape(const int64_t* dims, int32_t ndim) {
  return py::tuple(py::cast(std::vector<int64_t>(dims, dims + ndim)));
}

// Shapes of more dimensions than the layout holds, copied as far as they fit: the library
// then refuses ndim itself, with its reason.
void CopyShape(const std::vector<int64_t>& from, int64_t* to) {
  for (size_t i = 0; i < from.size() && i < MOONCAKE_TENSOR_MAX_DIMS; ++i) to[i] = from[i];
}

py::bytes HeaderEncode(int32_t dtype, const std::vector<int64_t>& global_shape,
                       const std::vector<int64_t>& local_shape, int32_t layout,
                       const std::vector<Axis>& axes, uint64_t data_bytes) {
  mooncake_tensor_header_t h{};
  h.dtype = dtype;
  h.ndim = static_cast<int32_t>(local_shape.size());
  if (global_shape.size() != local_shape.size()) {
    throw py::value_error("tensor header: global_shape and local_shape differ in length");
  }
  h.layout = layout;
  CopyShape(global_shape, h.global_shape);
  CopyShape(local_shape, h.local_shape);
  if (axes.size() > MOONCAKE_TENSOR_MAX_AXES) {
    throw py::value_error("tensor header: " + std::to_string(axes.size()) + " axes (at most 4)");
  }
  h.axis_count = static_cast<uint32_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) h.axes[i] = ToC(axes[i]);
  h.data_offset = MOONCAKE_TENSOR_HEADER_SIZE;
  h.data_bytes = data_bytes;
  char out[MOONCAKE_TENSOR_HEADER_SIZE];
  if (mooncake_store_tensor_header_encode(&h, out, sizeof(out)) != 0) Raise();
  return py::bytes(out, sizeof(out));
}

py::dict HeaderDecode(py::handle buffer, uint64_t object_size) {
  BufferView view(buffer, false);
  mooncake_tensor_header_t h;
  if (mooncake_store_tensor_header_decode(view.data(), view.size(), object_size, &h) != 0) {
    Raise();
  }
  std::vector<Axis> axes;
  for (uint32_t i = 0; i < h.axis_count; ++i) axes.push_back(FromC(h.axes[i]));
  py::dict d;
  d["dtype"] = h.dtype;
  d["ndim"] = h.ndim;
  d["layout"] = h.layout;
  d["global_shape"] = Shape(h.global_shape, h.ndim);
  d["local_shape"] = Shape(h.local_shape, h.ndim);
  d["axes"] = axes;
  d["data_offset"] = h.data_offset;
  d["data_bytes"] = h.data_bytes;
  return d;
}

py::bytes ManifestEncode(int32_t dtype, int32_t split_dim, int32_t shard_count,
                         const std::vector<int64_t>& global_shape) {
  mooncake_tensor_manifest_t m{};
  m.dtype = dtype;
  m.ndim = static_cast<int32_t>(global_shape.size());
  m.split_dim = split_dim;
  m.shard_count = shard_count;
  CopyShape(global_shape, m.global_shape);
  char out[MOONCAKE_TENSOR_MANIFEST_SIZE];
  if (mooncake_store_tensor_manifest_encode(&m, out, sizeof(out)) != 0) Raise();
  return py::bytes(out, sizeof(out));
}

py::dict ManifestDecode(py::handle buffer) {
  BufferView view(buffer, false);
  mooncake_tensor_manifest_t m;
  if (mooncake_store_tensor_manifest_decode(view.data(), view.size(), &m) != 0) Raise();
  py::dict d;
  d["dtype"] = m.dtype;
  d["split_dim"] = m.split_dim;
  d["shard_count"] = m.shard_count;
  d["global_shape"] = Shape(m.global_shape, m.ndim);
  return d;
}

std::string Key(int kind, const std::string& base, const std::vector<Axis>& axes) {
  // The library takes C strings: a base with a NUL would name another key.
  if (base.find('\0') != std::string::npos) {
    throw py::value_error("tensor key: the key holds a NUL byte");
  }
  std::vector<mooncake_tensor_axis_t> c;
  for (const Axis& a : axes) c.push_back(ToC(a));
  std::string out(base.size() + 64 + 48 * c.size(), '\0');
  int64_t n = mooncake_store_tensor_key(kind, base.c_str(), c.empty() ? nullptr : c.data(),
                                        c.size(), out.data(), out.size());
  if (n < 0) Raise();
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

void RegisterTensorCodec(py::module_& m) {
  m.attr("_TENSOR_KEY_SHARD") = MOONCAKE_TENSOR_KEY_SHARD;
  m.attr("_TENSOR_KEY_WRITER_SHARD") = MOONCAKE_TENSOR_KEY_WRITER_SHARD;
  m.attr("_TENSOR_KEY_WRITER_MANIFEST") = MOONCAKE_TENSOR_KEY_WRITER_MANIFEST;
  m.attr("_TENSOR_KEY_PARALLELISM_MANIFEST") = MOONCAKE_TENSOR_KEY_PARALLELISM_MANIFEST;
  m.def(
      "_tensor_metadata_size", [] { return MOONCAKE_TENSOR_HEADER_SIZE; },
      "The bytes of Mooncake's tensor header before a tensor's elements: 304.");
  m.def("_tensor_dtype_size", &mooncake_store_tensor_dtype_size, py::arg("dtype"));
  m.def("_tensor_header_encode", &HeaderEncode, py::arg("dtype"), py::arg("global_shape"),
        py::arg("local_shape"), py::arg("layout"), py::arg("axes"), py::arg("data_bytes"));
  m.def("_tensor_header_decode", &HeaderDecode, py::arg("buffer"), py::arg("object_size") = 0);
  m.def("_tensor_manifest_encode", &ManifestEncode, py::arg("dtype"), py::arg("split_dim"),
        py::arg("shard_count"), py::arg("global_shape"));
  m.def("_tensor_manifest_decode", &ManifestDecode, py::arg("buffer"));
  m.def(
      "_tensor_shard_range",
      [](int64_t dim_size, int32_t rank, int32_t count) {
        int64_t start = 0, extent = 0;
        if (mooncake_store_tensor_shard_range(dim_size, rank, count, &start, &extent) != 0) {
          Raise();
        }
        return std::make_pair(start, extent);
      },
      py::arg("dim_size"), py::arg("rank"), py::arg("count"));
  m.def("_tensor_key", &Key, py::arg("kind"), py::arg("base"),
        py::arg("axes") = std::vector<Axis>{});
}

}  // namespace mooncake_py
