// ParallelAxis, TensorParallelism and ReadTarget. See tensor_types.h.
#include "tensor_types.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

namespace mooncake_py {

namespace {

std::string Optional(const std::optional<int>& v) {
  return v.has_value() ? std::to_string(*v) : "None";
}

std::string Repr(const ParallelAxis& a) {
  return "ParallelAxis(kind='" + a.kind + "', rank=" + std::to_string(a.rank) +
         ", size=" + std::to_string(a.size) + ", split_dim=" + Optional(a.split_dim) +
         ", expert_id=" + Optional(a.expert_id) + ", stage_id=" + Optional(a.stage_id) + ")";
}

std::string Repr(const TensorParallelism& p) {
  std::string out = "TensorParallelism(axes=[";
  for (size_t i = 0; i < p.axes.size(); ++i) out += (i ? ", " : "") + Repr(p.axes[i]);
  return out + "])";
}

const char* ModeName(ReadMode mode) {
  switch (mode) {
    case ReadMode::kShard:
      return "shard";
    case ReadMode::kFull:
      return "full";
    case ReadMode::kAsStored:
      break;
  }
  return "as_stored";
}

// Mooncake's: any case; anything else raises RuntimeError("Unsupported ReadTarget mode").
ReadMode ParseMode(std::string mode) {
  std::transform(mode.begin(), mode.end(), mode.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (mode == "AS_STORED") return ReadMode::kAsStored;
  if (mode == "SHARD") return ReadMode::kShard;
  if (mode == "FULL") return ReadMode::kFull;
  throw std::runtime_error("Unsupported ReadTarget mode");
}

}  // namespace

void RegisterTensorTypes(py::module_& m) {
  py::class_<ParallelAxis>(m, "ParallelAxis",
                           "One axis of a tensor's parallel split: its kind ('tp', 'dp', "
                           "'ep', 'pp'), this shard's rank of size, and split_dim (TP), "
                           "expert_id (EP) or stage_id (PP).")
      .def(py::init([](std::string kind, int rank, int size, std::optional<int> split_dim,
                       std::optional<int> expert_id, std::optional<int> stage_id) {
             return ParallelAxis{std::move(kind), rank, size, split_dim, expert_id, stage_id};
           }),
           py::arg("kind") = "", py::arg("rank") = 0, py::arg("size") = 1,
           py::arg("split_dim") = py::none(), py::arg("expert_id") = py::none(),
           py::arg("stage_id") = py::none())
      .def_readwrite("kind", &ParallelAxis::kind)
      .def_readwrite("rank", &ParallelAxis::rank)
      .def_readwrite("size", &ParallelAxis::size)
      .def_readwrite("split_dim", &ParallelAxis::split_dim)
      .def_readwrite("expert_id", &ParallelAxis::expert_id)
      .def_readwrite("stage_id", &ParallelAxis::stage_id)
      .def("__repr__", [](const ParallelAxis& a) { return Repr(a); });

  py::class_<TensorParallelism>(m, "TensorParallelism",
                                "A tensor's parallel split: its axes, a list of ParallelAxis "
                                "(at most 4, one of each kind).")
      .def(py::init(
               [](std::vector<ParallelAxis> axes) { return TensorParallelism{std::move(axes)}; }),
           py::arg("axes") = std::vector<ParallelAxis>{})
      .def_readwrite("axes", &TensorParallelism::axes)
      .def("__repr__", [](const TensorParallelism& p) { return Repr(p); });

  py::class_<ReadTarget>(m, "ReadTarget",
                         "What get_tensor_with_parallelism returns: mode 'as_stored' (the "
                         "object under the key), 'shard' (parallelism's shard) or 'full' "
                         "(the whole tensor, from its shards).")
      .def(py::init([](const std::string& mode, std::optional<TensorParallelism> parallelism) {
             return ReadTarget{ParseMode(mode), std::move(parallelism)};
           }),
           py::arg("mode") = "as_stored", py::arg("parallelism") = py::none())
      .def_property(
          "mode", [](const ReadTarget& t) { return std::string(ModeName(t.mode)); },
          [](ReadTarget& t, const std::string& mode) { t.mode = ParseMode(mode); },
          "'as_stored', 'shard' or 'full' (set in any case; else RuntimeError)")
      .def_readwrite("parallelism", &ReadTarget::parallelism)
      .def("__repr__", [](const ReadTarget& t) {
        return std::string("ReadTarget(mode='") + ModeName(t.mode) +
               "', parallelism=" + (t.parallelism ? Repr(*t.parallelism) : std::string("None")) +
               ")";
      });
}

}  // namespace mooncake_py
