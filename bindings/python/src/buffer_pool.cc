// BufferPool: Mooncake's pool of leased buffers (mooncake-integration/store/buffer_pool.cpp)
// with its constructor arguments, methods, errors and Registered* aliases.
//
// Mooncake leases from the client's local buffer and, once that is full, from "overflow"
// memory it allocates (posix_memalign, alignment bytes) and registers with the store. Here
// the local buffer is the store's pool, shared with the daemon (so puts from and gets into
// a lease are zero-copy), and overflow memory is registered with register_buffer as there
// (puts and gets stage it through the pool). max_bytes bounds pool and overflow bytes
// together: 0 is twice the pool's size, as in Mooncake, else at least the pool's size.
//
// Threads: acquire blocks (with the GIL released) until a release makes room; leases are
// released from any thread. A lease exported as a memoryview (buffer) cannot be released
// while the view lives.
#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "mooncake_store.h"
#include "segments.h"
#include "store_handle.h"

namespace mooncake_py {
namespace {

class BufferLease;

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  BufferPool(Store& store, uint64_t max_bytes, uint64_t min_size_class, py::object max_size_class,
             uint64_t alignment, bool block_on_exhaustion, py::object default_timeout,
             py::object max_regions)
      : handle_(store.handle()),
        registry_(store.registry()),
        block_on_exhaustion_(block_on_exhaustion) {
    if (min_size_class == 0 || alignment == 0) {
      throw std::runtime_error("min_size_class and alignment must be positive");
    }
    if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) {
      throw std::runtime_error("alignment must be a power of two and at least sizeof(void*)");
    }
    if (handle_->pool_size == 0 || mooncake_store_health_check(handle_->get()) == 1) {
      throw std::runtime_error("BufferPool requires a store configured with a local buffer");
    }
    alignment_ = alignment;
    const uint64_t pool = handle_->pool_size;
    max_bytes_ = max_bytes == 0 ? pool * 2 : std::max(max_bytes, pool);
    if (!max_size_class.is_none()) max_size_class.cast<uint64_t>();  // a TypeError when not
    if (!default_timeout.is_none()) default_timeout_ = default_timeout.cast<double>();
    if (!max_regions.is_none()) max_regions_ = max_regions.cast<uint64_t>();
  }
  ~BufferPool() = default;

  std::shared_ptr<BufferLease> Acquire(uint64_t size, py::object block, py::object timeout);
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    if (regions_ > 0) throw std::runtime_error("cannot close buffer pool with active leases");
    closed_ = true;
    cv_.notify_all();
  }
  // A lease's bytes come back.
  void Return(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= bytes;
    --regions_;
    cv_.notify_all();
  }
  const std::shared_ptr<StoreHandle>& handle() const { return handle_; }
  const std::shared_ptr<RangeRegistry>& registry() const { return registry_; }
  uint64_t alignment() const { return alignment_; }

 private:
  bool HasRoomLocked(uint64_t bytes) const {
    return bytes <= max_bytes_ - used_ && (!max_regions_ || regions_ < *max_regions_);
  }

  const std::shared_ptr<StoreHandle> handle_;  // keeps the pool mapped while leases live
  // The store's known ranges: a lease is one while it lives, so that the store's calls
  // taking a bare address (get_into_ranges, get_into, ...) know how many bytes it holds,
  // as Mooncake's know its local buffer.
  const std::shared_ptr<RangeRegistry> registry_;
  const bool block_on_exhaustion_;
  uint64_t alignment_ = 0;
  uint64_t max_bytes_ = 0;
  std::optional<double> default_timeout_;
  std::optional<uint64_t> max_regions_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t used_ = 0;     // leased bytes; guarded by mu_
  uint64_t regions_ = 0;  // leases; guarded by mu_
  bool closed_ = false;   // guarded by mu_
};

// One leased buffer: a block of the store's pool, or registered overflow memory.
class BufferLease : public std::enable_shared_from_this<BufferLease> {
 public:
  // bytes: what the lease holds of the pool's capacity (at least 1); size: what was asked
  // for, which size, buffer and its views report (0 for acquire(0), as in Mooncake).
  BufferLease(std::shared_ptr<BufferPool> pool, std::unique_ptr<PoolBlock> block, void* overflow,
              uint64_t bytes, uint64_t size)
      : pool_(std::move(pool)),
        block_(std::move(block)),
        overflow_(overflow),
        bytes_(bytes),
        size_(size) {}
  ~BufferLease() { ReleaseLease(); }

  uintptr_t ptr() const {
    if (closed_) throw std::runtime_error("buffer lease is closed");
    return reinterpret_cast<uintptr_t>(data());
  }
  uint64_t size() const { return size_; }
  char* data() const { return block_ ? block_->data() : static_cast<char*>(overflow_); }
  void Release() {
    if (exports_ > 0) throw std::runtime_error("cannot release buffer while exported views exist");
    ReleaseLease();
  }
  bool closed() const { return closed_; }
  int exports_ = 0;  // BufferLeaseViews alive; touched with the GIL held

 private:
  void ReleaseLease() {
    if (closed_) return;
    closed_ = true;
    block_.reset();
    if (overflow_ != nullptr) {
      pool_->registry()->Remove(RangeRegistry::kRegistered, reinterpret_cast<uintptr_t>(overflow_));
      mooncake_store_unregister_buffer(pool_->handle()->get(), overflow_);
      std::free(overflow_);
      overflow_ = nullptr;
    }
    pool_->Return(bytes_);
  }

  std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<PoolBlock> block_;
  void* overflow_;
  const uint64_t bytes_;
  const uint64_t size_;
  bool closed_ = false;
};

// The exporter behind a lease's memoryview: holds the lease, and counts as an export.
class BufferLeaseView {
 public:
  explicit BufferLeaseView(std::shared_ptr<BufferLease> lease) : lease_(std::move(lease)) {
    ++lease_->exports_;
  }
  ~BufferLeaseView() { --lease_->exports_; }
  BufferLeaseView(const BufferLeaseView&) = delete;
  BufferLeaseView& operator=(const BufferLeaseView&) = delete;
  py::buffer_info Info() {
    if (lease_->closed()) throw std::runtime_error("buffer lease is closed");
    return py::buffer_info(lease_->data(), 1, "B", static_cast<py::ssize_t>(lease_->size()));
  }

 private:
  std::shared_ptr<BufferLease> lease_;
};

std::shared_ptr<BufferLease> BufferPool::Acquire(uint64_t size, py::object block,
                                                 py::object timeout) {
  const bool wait = block.is_none() ? block_on_exhaustion_ : block.cast<bool>();
  std::optional<double> timeout_s = default_timeout_;
  if (!timeout.is_none()) timeout_s = timeout.cast<double>();
  if (timeout_s && *timeout_s < 0) throw std::runtime_error("timeout must be non-negative");
  const uint64_t bytes = std::max<uint64_t>(size, 1);
  if (bytes > max_bytes_) throw std::runtime_error("requested buffer size exceeds pool capacity");
  auto deadline = std::chrono::steady_clock::now();
  if (timeout_s) deadline += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(*timeout_s));
  py::gil_scoped_release nogil;
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (closed_) throw std::runtime_error("buffer pool is closed");
      if (HasRoomLocked(bytes)) break;
      if (!wait) throw std::runtime_error("buffer pool is exhausted");
      if (!timeout_s) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
                 !HasRoomLocked(bytes)) {
        throw std::runtime_error("timed out waiting for buffer");
      }
    }
    used_ += bytes;
    ++regions_;
  }
  // The room is ours; the memory is found without the lock.
  std::unique_ptr<PoolBlock> pooled = PoolBlock::Alloc(handle_, bytes, registry_);
  void* overflow = nullptr;
  if (!pooled) {
    if (posix_memalign(&overflow, alignment_, bytes) != 0 ||
        mooncake_store_register_buffer(handle_->get(), overflow, bytes) != 0) {
      std::free(overflow);
      Return(bytes);
      throw std::runtime_error("overflow buffer registration failed");
    }
    registry_->Add(RangeRegistry::kRegistered, reinterpret_cast<uintptr_t>(overflow), bytes);
  }
  return std::make_shared<BufferLease>(shared_from_this(), std::move(pooled), overflow, bytes,
                                       size);
}

}  // namespace

void RegisterBufferPool(py::module_& m) {
  py::class_<BufferLeaseView>(m, "BufferLeaseView", py::buffer_protocol())
      .def_property_readonly("buffer", [](py::object self) { return py::memoryview(self); })
      .def_buffer(&BufferLeaseView::Info);

  py::class_<BufferLease, std::shared_ptr<BufferLease>>(m, "BufferLease")
      .def_property_readonly("ptr", &BufferLease::ptr)
      .def_property_readonly("size", &BufferLease::size)
      .def_property_readonly("buffer",
                             [](std::shared_ptr<BufferLease> self) {
                               if (self->closed()) {
                                 throw std::runtime_error("buffer lease is closed");
                               }
                               return py::memoryview(py::cast(new BufferLeaseView(self),
                                                              py::return_value_policy::take_ownership));
                             })
      .def("release", &BufferLease::Release)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](BufferLease& self, py::args) { self.Release(); });

  py::class_<BufferPool, std::shared_ptr<BufferPool>>(m, "BufferPool")
      .def(py::init([](Store& store, uint64_t max_bytes, uint64_t min_size_class,
                       py::object max_size_class, uint64_t alignment, bool block_on_exhaustion,
                       py::object default_timeout, py::object max_regions,
                       py::object prewarm_size, uint64_t prewarm_count) {
             (void)prewarm_size;  // Mooncake's prewarm reserves nothing either
             (void)prewarm_count;
             return std::make_shared<BufferPool>(store, max_bytes, min_size_class, max_size_class,
                                                 alignment, block_on_exhaustion, default_timeout,
                                                 max_regions);
           }),
           py::arg("store"), py::arg("max_bytes") = 0, py::arg("min_size_class") = 64 * 1024,
           py::arg("max_size_class") = py::none(), py::arg("alignment") = 8 * 1024 * 1024,
           py::arg("block_on_exhaustion") = true, py::arg("default_timeout") = py::none(),
           py::arg("max_regions") = py::none(), py::arg("prewarm_size") = py::none(),
           py::arg("prewarm_count") = 0)
      .def("acquire", &BufferPool::Acquire, py::arg("size"), py::arg("block") = py::none(),
           py::arg("timeout") = py::none())
      .def("buffer", &BufferPool::Acquire, py::arg("size"), py::arg("block") = py::none(),
           py::arg("timeout") = py::none())
      .def("prewarm", [](BufferPool&, uint64_t, uint64_t) {}, py::arg("size"), py::arg("count"))
      .def("close", &BufferPool::Close);

  m.attr("RegisteredBufferPool") = m.attr("BufferPool");
  m.attr("RegisteredBufferLease") = m.attr("BufferLease");
  m.attr("RegisteredBufferLeaseView") = m.attr("BufferLeaseView");
}

}  // namespace mooncake_py
