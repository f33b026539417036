// mooncake._fast_copy: concat_arrays_into, Mooncake's gather copy of a list of numpy arrays
// into one destination (mooncake-wheel/mooncake/_fast_copy.c), which
// mooncake.structured_object_store uses to pack ragged rows straight into a store buffer.
//
//   concat_arrays_into(arrays, dest_ptr, dest_size, start=0, count=-1, nthreads=1) -> int
//
// copies the bytes of arrays[start:start+count] (count < 0: to the end; start and count are
// clamped to the list), back to back, to dest_ptr and returns how many bytes it copied.
// Input policy: arrays must be a list of C-contiguous ndarrays (TypeError for another item,
// ValueError for a strided one); their bytes together must fit dest_size (ValueError
// "destination buffer too small"), checked before anything is written. dest_ptr is the
// caller's: an address of dest_size writable bytes (a store lease, a ctypes buffer). An
// empty range copies nothing and checks nothing. The copy runs with the GIL released, on
// up to nthreads threads (each a contiguous run of the arrays); the arrays are referenced
// until it ends.
//
// A module of its own, not part of mooncake_store: it needs neither the store's library nor
// a connection, as in Mooncake.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace py = pybind11;

namespace {

struct Source {
  const char* data;
  size_t bytes;
};

// Copies sources[first, last) back to back to out.
void CopyRun(const std::vector<Source>& sources, size_t first, size_t last, char* out) {
  for (size_t i = first; i < last; ++i) {
    if (sources[i].bytes == 0) continue;
    std::memcpy(out, sources[i].data, sources[i].bytes);
    out += sources[i].bytes;
  }
}

size_t ConcatArraysInto(const py::list& arrays, uint64_t dest_ptr, uint64_t dest_size,
                        py::ssize_t start, py::ssize_t count, int nthreads) {
  const py::ssize_t length = static_cast<py::ssize_t>(arrays.size());
  start = std::clamp<py::ssize_t>(start, 0, length);
  if (count < 0 || count > length - start) count = length - start;
  if (count == 0) return 0;

  std::vector<py::array> held;  // keeps every source alive while the GIL is released
  std::vector<Source> sources;
  held.reserve(count);
  sources.reserve(count);
  size_t total = 0;
  for (py::ssize_t i = start; i < start + count; ++i) {
    py::handle item = arrays[i];
    if (!py::isinstance<py::array>(item)) {
      throw py::type_error("arrays[" + std::to_string(i) + "] is not an ndarray");
    }
    py::array array = py::reinterpret_borrow<py::array>(item);
    if (!(array.flags() & py::array::c_style)) {
      throw py::value_error("arrays[" + std::to_string(i) + "] is not C-contiguous");
    }
    size_t bytes = static_cast<size_t>(array.nbytes());
    if (bytes > SIZE_MAX - total) throw py::value_error("array byte sizes overflow");
    total += bytes;
    sources.push_back({static_cast<const char*>(array.data()), bytes});
    held.push_back(std::move(array));
  }
  if (total > dest_size) {
    throw py::value_error("destination buffer too small: need " + std::to_string(total) +
                          " bytes, got " + std::to_string(dest_size));
  }

  char* dest = reinterpret_cast<char*>(static_cast<uintptr_t>(dest_ptr));
  const size_t n = sources.size();
  const size_t workers = std::clamp<size_t>(nthreads < 1 ? 1 : nthreads, 1, n);
  py::gil_scoped_release nogil;
  if (workers == 1) {
    CopyRun(sources, 0, n, dest);
    return total;
  }
  // Runs of equal array counts; each starts where the bytes before it end.
  const size_t per = (n + workers - 1) / workers;
  std::vector<std::thread> threads;
  size_t offset = 0;
  for (size_t first = 0; first < n; first += per) {
    size_t last = std::min(n, first + per);
    char* out = dest + offset;
    for (size_t i = first; i < last; ++i) offset += sources[i].bytes;
    if (first == 0) continue;  // the calling thread copies the first run
    try {
      threads.emplace_back(CopyRun, std::cref(sources), first, last, out);
    } catch (const std::system_error&) {
      CopyRun(sources, first, last, out);  // no thread to be had: copy it here
    }
  }
  CopyRun(sources, 0, std::min(n, per), dest);
  for (std::thread& t : threads) t.join();
  return total;
}

}  // namespace

PYBIND11_MODULE(_fast_copy, m) {
  m.doc() = "Fast gather copy of ndarray lists (Mooncake's mooncake._fast_copy).";
  m.def("concat_arrays_into", &ConcatArraysInto, py::arg("arrays"), py::arg("dest_ptr"),
        py::arg("dest_size"), py::arg("start") = 0, py::arg("count") = -1,
        py::arg("nthreads") = 1,
        "Copies the bytes of arrays[start:start+count] back to back to dest_ptr (GIL "
        "released) and returns how many were copied.");
}
