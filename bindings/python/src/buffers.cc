// Resolving buffer arguments and copying results out into Python bytes. See buffers.h.
#include "buffers.h"

#include <cstring>

namespace py = pybind11;

namespace mooncake_py {

Address ResolveAddress(py::handle obj, bool writable, std::vector<BufferView>* keep) {
  Address a;
  if (PyIndex_Check(obj.ptr())) {
    // int, numpy integer scalars. (ndarrays have __index__ too, but it fails for anything
    // but a 0-d integer array; those fall through to the buffer protocol.)
    PyObject* index = PyNumber_Index(obj.ptr());
    if (index != nullptr) {
      unsigned long long v = PyLong_AsUnsignedLongLong(index);
      Py_DECREF(index);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        throw py::type_error("a buffer address must be an int in [0, 2**64)");
      }
      a.ptr = reinterpret_cast<char*>(static_cast<uintptr_t>(v));
      return a;
    }
    PyErr_Clear();
  }
  if (!PyObject_CheckBuffer(obj.ptr())) {
    throw py::type_error("expected a buffer address (int) or an object with the buffer protocol");
  }
  keep->emplace_back(obj, writable);
  a.ptr = keep->back().data();
  a.capacity = keep->back().size();
  return a;
}

// PyBytes of n bytes copied from data; the copy runs without the GIL (the new object is
// not visible to any other thread yet).
py::bytes BytesFrom(const char* data, size_t n) {
  PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n));
  if (b == nullptr) throw py::error_already_set();
  {
    py::gil_scoped_release nogil;
    std::memcpy(PyBytes_AS_STRING(b), data, n);
  }
  return py::reinterpret_steal<py::bytes>(b);
}

}  // namespace mooncake_py
