// The request classes of Mooncake's tensor parallelism calls (store_py.cpp at 3b5a594):
// ParallelAxis (one axis: kind, rank, size, and the optional split_dim, expert_id,
// stage_id), TensorParallelism (its axes) and ReadTarget (what a read returns: "as_stored",
// "shard" or "full", and for which parallelism). Plain records, as in Mooncake: the calls
// (mooncake/_tensor_parallel.py) read them by attribute, so any object with the same
// attributes works too (Mooncake's tests pass a dataclass as writer_partition).
//
// As in Mooncake, TensorParallelism.axes hands out the list's own ParallelAxis objects:
// `p.axes[0].rank = 3` changes p (pybind11's reference_internal for vector elements), and
// assigning a list copies it. Mooncake's constructors take no arguments; these also take
// the fields as keywords.
#ifndef MOONCAKE_STORE_PY_TENSOR_TYPES_H_
#define MOONCAKE_STORE_PY_TENSOR_TYPES_H_

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

namespace mooncake_py {

namespace py = pybind11;

struct ParallelAxis {
  std::string kind;  // "tp", "dp", "ep", "pp" (any case)
  int rank = 0;
  int size = 1;
  std::optional<int> split_dim;  // TP: the dimension split (required); others: none
  std::optional<int> expert_id;  // EP: required
  std::optional<int> stage_id;   // PP: required
};

struct TensorParallelism {
  std::vector<ParallelAxis> axes;
};

// What a read returns: the object as stored, one shard of parallelism (read, or assembled
// from the shards of another split), or the whole tensor.
enum class ReadMode { kAsStored, kShard, kFull };

struct ReadTarget {
  ReadMode mode = ReadMode::kAsStored;
  std::optional<TensorParallelism> parallelism;
};

void RegisterTensorTypes(py::module_& m);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_TENSOR_TYPES_H_
