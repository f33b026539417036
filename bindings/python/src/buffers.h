// Python buffers and the objects that expose pool memory to Python: BufferView (a buffer
// held for a call), Address (a buffer argument: an int address or a buffer object),
// BufferHandle (get_buffer()'s result) and PoolMemory (the exporter behind alloc()).
#ifndef MOONCAKE_STORE_PY_BUFFERS_H_
#define MOONCAKE_STORE_PY_BUFFERS_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "store_handle.h"

namespace mooncake_py {

namespace py = pybind11;

// A Python buffer held for the length of a call (PyBUF_SIMPLE: C-contiguous bytes, any
// shape). Acquire and release with the GIL held; use the memory without it.
class BufferView {
 public:
  BufferView(py::handle obj, bool writable) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
      throw py::error_already_set();
    }
    held_ = true;
  }
  BufferView(BufferView&& other) noexcept : view_(other.view_), held_(other.held_) {
    other.held_ = false;
  }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  BufferView& operator=(BufferView&&) = delete;
  ~BufferView() {
    if (held_) PyBuffer_Release(&view_);
  }

  // Never NULL, even for an empty buffer (whose buf may be NULL): the C ABI answers NULL
  // with -1 but an empty value with -600, and -600 is what Mooncake returns.
  char* data() const {
    static char empty;
    return view_.buf != nullptr ? static_cast<char*>(view_.buf) : &empty;
  }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// A buffer argument. Mooncake passes memory as an int address (numpy's arr.ctypes.data,
// torch's t.data_ptr()); as an extension, any object with the buffer protocol (an alloc()
// memoryview, a numpy array) is accepted too, and then a size beyond its end is refused.
struct Address {
  char* ptr = nullptr;
  size_t capacity = std::numeric_limits<size_t>::max();  // unknown for a bare int
  bool fits(uint64_t size) const { return size <= capacity; }
};

Address ResolveAddress(py::handle obj, bool writable, std::vector<BufferView>* keep);

// PyBytes of n bytes copied from data; the copy runs without the GIL (the new object is
// not visible to any other thread yet).
py::bytes BytesFrom(const char* data, size_t n);

// The result of get_buffer(): a value read into a pool block (or the heap when the pool has
// no room), exposed through the buffer protocol as unsigned bytes, so bytes(h), len(h),
// memoryview(h) and numpy.asarray(h) work without copying.
class BufferHandle {
 public:
  BufferHandle(Scratch memory, size_t size) : memory_(std::move(memory)), size_(size) {}
  uintptr_t ptr() const { return reinterpret_cast<uintptr_t>(memory_.data()); }
  size_t size() const { return size_; }
  char* data() const { return memory_.data(); }

 private:
  Scratch memory_;
  size_t size_;
};

// The exporter behind alloc()'s memoryview. The memoryview keeps it alive, and numpy
// arrays made from the memoryview keep the memoryview alive, so the pool block is
// returned exactly when the last view of it goes away.
class PoolMemory {
 public:
  explicit PoolMemory(std::unique_ptr<PoolBlock> block) : block_(std::move(block)) {}
  char* data() const { return block_->data(); }
  size_t size() const { return block_->size(); }

 private:
  std::unique_ptr<PoolBlock> block_;
};

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_BUFFERS_H_
