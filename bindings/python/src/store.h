// Store: the C++ object behind one MooncakeDistributedStore (its current handle and the
// registry of caller buffers), and the constants the binding's methods share.
#ifndef MOONCAKE_STORE_PY_STORE_H_
#define MOONCAKE_STORE_PY_STORE_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "mooncake_store.h"
#include "store_handle.h"

namespace mooncake_py {

namespace py = pybind11;

constexpr int kInvalidParams = MOONCAKE_STORE_INVALID_PARAMS;
// Mooncake's documented default for local_buffer_size. The pool is a sparse memfd, so an
// untouched pool costs address space, not memory.
constexpr uint64_t kDefaultLocalBufferSize = 1ull << 30;

class Store {
 public:
  Store()
      : handle_(std::make_shared<StoreHandle>()),
        registry_(std::make_shared<RangeRegistry>()) {}

  // The current handle. Read (and replaced) only with the GIL held; a call keeps its copy
  // for its whole length, so a concurrent close()/connect() never frees a handle in use.
  // A call that takes it reaches the library, whose message is then the one that counts:
  // this thread's binding refusal on this store is forgotten.
  std::shared_ptr<StoreHandle> handle() const {
    t_calling_store = this;
    if (t_binding_refusal.store == this) t_binding_refusal.store = nullptr;
    return handle_;
  }

  // setup()/connect() refused by the binding before the library saw them (call names the
  // method): why becomes last_error() and one line on sys.stderr, as a refusal of the
  // library is logged. Returns -600.
  int Refuse(const char* call, const std::string& why) const {
    t_binding_refusal = {this, why};
    py::module_::import("sys").attr("stderr").attr("write")(
        "mooncake_store: " + std::string(call) + "(): " + why + "\n");
    return kInvalidParams;
  }

  // Why this thread's last failed call on this store failed ("" when it succeeded): the
  // binding's own refusal, else mooncake_store_errmsg of the handle.
  std::string LastError() const {
    if (t_binding_refusal.store == this) return t_binding_refusal.why;
    return mooncake_store_errmsg(handle_->get());
  }
  const std::shared_ptr<RangeRegistry>& registry() const { return registry_; }

  // The handle a connect/setup with this pool size should use. The C library keeps a closed
  // handle's pool mapped and reuses it when the next connect asks for the same size, so
  // alloc() memory stays valid; with another size it would unmap the old pool under live
  // memoryviews and BufferHandles. So then a fresh handle is made, and the old one lives
  // on until the last object pointing into its pool is gone.
  std::shared_ptr<StoreHandle> HandleForConnect(uint64_t pool_size) {
    handle();  // the connect reaches the library: its message counts from here
    if (open_ || !handle_->connected_once || handle_->pool_size == pool_size) return handle_;
    handle_ = std::make_shared<StoreHandle>();
    return handle_;
  }

  // Records a successful connect. A fresh handle knows none of the caller's registered
  // buffers: they are registered again, so register_buffer() survives close()+connect().
  void Connected(const std::shared_ptr<StoreHandle>& handle, uint64_t pool_size) {
    bool fresh = !handle->connected_once;
    handle->connected_once = true;
    handle->pool_size = pool_size;
    open_ = true;
    if (!fresh) return;
    auto ranges = registry_->Registered();
    if (ranges.empty()) return;
    py::gil_scoped_release nogil;
    for (const auto& r : ranges) {
      mooncake_store_register_buffer(handle->get(), reinterpret_cast<void*>(r.first), r.second);
    }
  }
  void Closed() { open_ = false; }
  // Between a successful connect/setup and close().
  bool open() const { return open_; }

  // The keys with a get session open (batch_get_session_start .. _end, ranges.h). Read and
  // changed only with the GIL held.
  std::set<std::string>& get_sessions() { return get_sessions_; }

 private:
  std::shared_ptr<StoreHandle> handle_;
  std::shared_ptr<RangeRegistry> registry_;
  bool open_ = false;  // between a successful connect/setup and close()
  std::set<std::string> get_sessions_;
};

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_STORE_H_
