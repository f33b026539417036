// The tensor methods: forwards to mooncake/_tensor_*.py, and the natives they use. See
// tensor_methods.h.
#include "tensor_methods.h"

#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "buffers.h"
#include "mooncake_store.h"
#include "replicate_config.h"
#include "store_handle.h"
#include "tensor_codec.h"
#include "tensor_types.h"

namespace mooncake_py {

namespace {

// A member written in Python: its name (the same there), the module that has it, and the
// signature help() shows (Mooncake's argument names and defaults).
struct Forwarded {
  const char* name;
  const char* module;
  const char* doc;
};

constexpr const char* kStore = "mooncake._tensor_store";
constexpr const char* kTp = "mooncake._tensor_tp";
constexpr const char* kWrite = "mooncake._tensor_parallel_write";
constexpr const char* kRead = "mooncake._tensor_parallel_read";
constexpr const char* kCodec = "mooncake._tensor_codec";

constexpr Forwarded kMethods[] = {
    {"put_tensor", kStore, "put_tensor(key, tensor) -> int"},
    {"get_tensor", kStore, "get_tensor(key) -> torch.Tensor | None"},
    {"batch_put_tensor", kStore, "batch_put_tensor(keys, tensors_list) -> list[int]"},
    {"batch_get_tensor", kStore, "batch_get_tensor(keys) -> list[torch.Tensor | None]"},
    {"put_tensor_from", kStore,
     "put_tensor_from(key, buffer_ptr, size) -> int: stores the tensor object "
     "[header][elements] at buffer_ptr as it is (zero copy from pool memory)"},
    {"batch_put_tensor_from", kStore,
     "batch_put_tensor_from(keys, buffer_ptrs, sizes) -> list[int]"},
    {"get_tensor_into", kStore,
     "get_tensor_into(key, buffer_ptr, size) -> torch.Tensor | None: the object read into the "
     "buffer, the tensor a view of its elements there"},
    {"batch_get_tensor_into", kStore,
     "batch_get_tensor_into(keys, buffer_ptrs, sizes) -> list[torch.Tensor | None]"},
    {"get_tensor_into_cuda", kStore, "get_tensor_into_cuda(key, tensor) -> int"},
    {"batch_get_tensor_into_cuda", kStore,
     "batch_get_tensor_into_cuda(keys, tensors_list) -> list[int]"},
    {"upsert_tensor", kStore, "upsert_tensor(key, tensor) -> int"},
    {"upsert_tensor_from", kStore, "upsert_tensor_from(key, buffer_ptr, size) -> int"},
    {"batch_upsert_tensor", kStore, "batch_upsert_tensor(keys, tensors_list) -> list[int]"},
    {"batch_upsert_tensor_from", kStore,
     "batch_upsert_tensor_from(keys, buffer_ptrs, sizes) -> list[int]"},
    {"pub_tensor", kStore, "pub_tensor(key, tensor, config=ReplicateConfig()) -> int"},
    {"batch_pub_tensor", kStore,
     "batch_pub_tensor(keys, tensors_list, config=ReplicateConfig()) -> list[int]"},
    {"upsert_pub_tensor", kStore,
     "upsert_pub_tensor(key, tensor, config=ReplicateConfig()) -> int"},
    {"batch_upsert_pub_tensor", kStore,
     "batch_upsert_pub_tensor(keys, tensors_list, config=ReplicateConfig()) -> list[int]"},
    {"save_tensor_to_safetensor", kStore,
     "save_tensor_to_safetensor(key, file_name=None) -> int: the tensor under key written "
     "to a safetensors file (named key when file_name is None); -1100 on a miss"},
    {"load_tensor_from_safetensor", kStore,
     "load_tensor_from_safetensor(key=None, file_name) -> torch.Tensor | None: the tensor "
     "named key in the file (else its first) stored under key (else file_name)"},
    {"put_tensor_with_tp", kTp,
     "put_tensor_with_tp(key, tensor, tp_rank=0, tp_size=1, split_dim=0) -> int: every "
     "shard, under key_tp_<rank>"},
    {"get_tensor_with_tp", kTp,
     "get_tensor_with_tp(key, tp_rank=0, tp_size=1, split_dim=0) -> torch.Tensor | None"},
    {"batch_put_tensor_with_tp", kTp,
     "batch_put_tensor_with_tp(base_keys, tensors_list, tp_rank=0, tp_size=1, split_dim=0) "
     "-> list[int]"},
    {"batch_get_tensor_with_tp", kTp,
     "batch_get_tensor_with_tp(base_keys, tp_rank=0, tp_size=1) -> list[torch.Tensor | None]"},
    {"pub_tensor_with_tp", kTp,
     "pub_tensor_with_tp(key, tensor, config=ReplicateConfig(), tp_rank=0, tp_size=1, "
     "split_dim=0) -> int"},
    {"batch_pub_tensor_with_tp", kTp,
     "batch_pub_tensor_with_tp(base_keys, tensors_list, config=ReplicateConfig(), tp_rank=0, "
     "tp_size=1, split_dim=0) -> list[int]"},
    {"get_tensor_with_tp_into", kTp,
     "get_tensor_with_tp_into(key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0) -> "
     "torch.Tensor | None"},
    {"batch_get_tensor_with_tp_into", kTp,
     "batch_get_tensor_with_tp_into(base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1) -> "
     "list[torch.Tensor | None]"},
    {"put_tensor_with_tp_from", kTp,
     "put_tensor_with_tp_from(key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0) -> "
     "int: the whole tensor object at buffer_ptr split into every shard"},
    {"batch_put_tensor_with_tp_from", kTp,
     "batch_put_tensor_with_tp_from(base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1, "
     "split_dim=0) -> list[int]"},
    {"put_tensor_with_parallelism", kWrite,
     "put_tensor_with_parallelism(key, tensor, parallelism=None, config=ReplicateConfig(), "
     "writer_partition=None) -> int"},
    {"batch_put_tensor_with_parallelism", kWrite,
     "batch_put_tensor_with_parallelism(keys, tensors_list, parallelisms=None, "
     "config=ReplicateConfig(), writer_partitions=None) -> list[int]"},
    {"put_tensor_with_parallelism_from", kWrite,
     "put_tensor_with_parallelism_from(key, buffer_ptr, size, parallelism=None, "
     "config=ReplicateConfig(), writer_partition=None) -> int"},
    {"batch_put_tensor_with_parallelism_from", kWrite,
     "batch_put_tensor_with_parallelism_from(keys, buffer_ptrs, sizes, parallelisms=None, "
     "config=ReplicateConfig(), writer_partitions=None) -> list[int]"},
    {"upsert_tensor_with_parallelism", kWrite,
     "upsert_tensor_with_parallelism(key, tensor, parallelism=None, config=ReplicateConfig(), "
     "writer_partition=None) -> int"},
    {"batch_upsert_tensor_with_parallelism", kWrite,
     "batch_upsert_tensor_with_parallelism(keys, tensors_list, parallelisms=None, "
     "config=ReplicateConfig(), writer_partitions=None) -> list[int]"},
    {"upsert_tensor_with_parallelism_from", kWrite,
     "upsert_tensor_with_parallelism_from(key, buffer_ptr, size, parallelism=None, "
     "config=ReplicateConfig(), writer_partition=None) -> int"},
    {"batch_upsert_tensor_with_parallelism_from", kWrite,
     "batch_upsert_tensor_with_parallelism_from(keys, buffer_ptrs, sizes, parallelisms=None, "
     "config=ReplicateConfig(), writer_partitions=None) -> list[int]"},
    {"get_tensor_with_parallelism", kRead,
     "get_tensor_with_parallelism(key, target=None) -> torch.Tensor | None: target a "
     "ReadTarget (None: as stored)"},
    {"batch_get_tensor_with_parallelism", kRead,
     "batch_get_tensor_with_parallelism(keys, targets=None) -> list[torch.Tensor | None]"},
    {"get_tensor_with_parallelism_into", kRead,
     "get_tensor_with_parallelism_into(key, buffer_ptr, size, target=None) -> torch.Tensor | "
     "None: into a registered buffer or pool memory"},
    {"batch_get_tensor_with_parallelism_into", kRead,
     "batch_get_tensor_with_parallelism_into(keys, buffer_ptrs, sizes, targets=None) -> "
     "list[torch.Tensor | None]"},
};

// The module that has the tensor calls, imported when first needed.
py::module_ TensorModule(const char* name) {
  try {
    return py::module_::import(name);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ImportError)) throw;
    py::raise_from(e, PyExc_ImportError,
                   ("mooncake_store's tensor calls are written in Python, in " + std::string(name) +
                    ", which does not import: install the binding with its package (pip "
                    "install ./bindings/python, or make install), or put the build tree's "
                    "bindings/python on PYTHONPATH")
                       .c_str());
    throw py::error_already_set();
  }
}

// One piece of an object: rows of row bytes, each stride bytes after the previous one.
struct Piece {
  const char* data;
  size_t row;
  size_t stride;
  size_t rows;
};

size_t AsSize(py::handle v) {
  unsigned long long n = py::cast<unsigned long long>(v);
  if (n > std::numeric_limits<size_t>::max()) throw py::value_error("piece size out of range");
  return static_cast<size_t>(n);
}

// A piece as the Python side hands it: a bytes-like object (copied), (address, size), or
// (address, row, stride, rows). Addresses are the tensors' own (data_ptr()), held alive by
// the caller for the call.
Piece ParsePiece(py::handle piece, std::vector<BufferView>* keep) {
  if (!py::isinstance<py::tuple>(piece)) {
    keep->emplace_back(piece, false);
    return {keep->back().data(), keep->back().size(), keep->back().size(), 1};
  }
  py::tuple t = py::reinterpret_borrow<py::tuple>(piece);
  const char* data = reinterpret_cast<const char*>(static_cast<uintptr_t>(AsSize(t[0])));
  if (t.size() == 2) return {data, AsSize(t[1]), AsSize(t[1]), 1};
  if (t.size() == 4) return {data, AsSize(t[1]), AsSize(t[2]), AsSize(t[3])};
  throw py::value_error("a piece is bytes, (address, size) or (address, row, stride, rows)");
}

// _write_tensor_objects(keys, objects, config, upsert) -> list[int]: objects[i], a list of
// pieces, is gathered into one block (of the pool when it has room) and stored under
// keys[i]; all in one batch put (or upsert), one code per key.
std::vector<int> WriteTensorObjects(Store& self, const std::vector<std::string>& keys,
                                    const py::list& objects, const ReplicateConfig* config,
                                    bool upsert) {
  const size_t n = keys.size();
  if (objects.size() != n) return std::vector<int>(n, kInvalidParams);
  std::vector<int> results(n, 0);
  if (n == 0) return results;
  std::vector<BufferView> keep;
  keep.reserve(n * 2);
  std::vector<std::vector<Piece>> pieces(n);
  std::vector<size_t> totals(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (py::handle p : objects[i]) {
      pieces[i].push_back(ParsePiece(p, &keep));
      const Piece& piece = pieces[i].back();
      if (piece.rows != 0 && piece.row > std::numeric_limits<size_t>::max() / piece.rows) {
        throw py::value_error("piece size out of range");
      }
      totals[i] += piece.row * piece.rows;
    }
  }
  CConfig c(config);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  std::vector<Scratch> gathered(n);
  CBatch batch;
  for (size_t i = 0; i < n; ++i) {
    gathered[i] = Scratch(h, totals[i]);
    char* out = gathered[i].data();
    for (const Piece& p : pieces[i]) {
      for (size_t r = 0; r < p.rows; ++r, out += p.row)
        std::memcpy(out, p.data + r * p.stride, p.row);
    }
    batch.Add(CKey(keys[i]), gathered[i].data(), totals[i], i);
  }
  int rc = upsert
               ? mooncake_store_batch_upsert_from(h->get(), batch.keys.data(), batch.buffers.data(),
                                                  batch.sizes.data(), n, c.get(), results.data())
               : mooncake_store_batch_put_from_ex(h->get(), batch.keys.data(), batch.buffers.data(),
                                                  batch.sizes.data(), n, c.get(), results.data());
  if (rc != 0) results.assign(n, rc);
  return results;
}

// _refuse(why): a tensor call refused before it reached the library says why, as the
// binding's own refusals do: last_error() on this thread, and a line on stderr (at most
// one a second, as the library logs refused arguments).
void RefuseTensorCall(Store& self, const std::string& why) {
  t_binding_refusal = {&self, why};
  static auto last = std::chrono::steady_clock::time_point();
  auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::seconds(1) && last != std::chrono::steady_clock::time_point()) {
    return;
  }
  last = now;
  py::module_::import("sys").attr("stderr").attr("write")("mooncake_store: " + why + "\n");
}

}  // namespace

void RegisterTensors(py::module_& m, py::class_<Store>& store) {
  RegisterTensorTypes(m);
  RegisterTensorCodec(m);
  m.def(
      "_serialize_tensor",
      [](py::args args, py::kwargs kwargs) {
        return TensorModule(kCodec).attr("serialize_tensor")(*args, **kwargs);
      },
      "_serialize_tensor(tensor) -> (metadata: bytes, data_ptr, size, owner): a torch tensor "
      "as Mooncake's tensor header, and where its elements are (owner keeps them alive).");
  m.def(
      "_deserialize_tensor",
      [](py::args args, py::kwargs kwargs) {
        return TensorModule(kCodec).attr("deserialize_tensor")(*args, **kwargs);
      },
      "_deserialize_tensor(payload: bytes) -> torch.Tensor: header plus elements back to a "
      "tensor (ValueError if they are not one).");
  for (const Forwarded& f : kMethods) {
    store.def(
        f.name,
        [f](py::object self, py::args args, py::kwargs kwargs) {
          return TensorModule(f.module).attr(f.name)(self, *args, **kwargs);
        },
        f.doc);
  }
  store
      .def("_write_tensor_objects", &WriteTensorObjects, py::arg("keys"), py::arg("objects"),
           py::arg("config"), py::arg("upsert"))
      .def(
          "_writable_capacity",
          [](Store& self, uintptr_t address) { return self.registry()->CapacityAt(address); },
          py::arg("address"),
          "Bytes from address to the end of the registered buffer or pool block holding "
          "it; 0 when none does.")
      .def("_refuse", &RefuseTensorCall, py::arg("why"));
}

}  // namespace mooncake_py
