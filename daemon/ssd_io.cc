#include "daemon/ssd_store/ssd_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mooncake {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(RoundUpToPage(bytes)) {
  if (size_ == 0) return;
  void* p = nullptr;
  if (posix_memalign(&p, kSsdPage, size_) != 0) std::abort();
  data_ = static_cast<char*>(p);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

std::unique_ptr<IoRing> IoRing::Create(unsigned depth, std::string* error) {
  std::unique_ptr<IoRing> ring(new IoRing());
  const int rc = io_uring_queue_init(depth, &ring->ring_, 0);
  if (rc < 0) {
    *error = std::string("io_uring_queue_init: ") + std::strerror(-rc);
    return nullptr;
  }
  ring->initialized_ = true;
  ring->depth_ = depth;
  return ring;
}

IoRing::~IoRing() {
  // An op still in flight would write into memory its owner frees: finish them first.
  while (in_flight_ > 0 && WaitOne() != nullptr) {
  }
  if (initialized_) io_uring_queue_exit(&ring_);
}

void IoRing::Queue(IoOp* op) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {  // the submission queue is full of unsubmitted entries
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  char* at = op->buffer + op->done;
  const unsigned left = op->length - op->done;
  if (op->write) {
    io_uring_prep_write(sqe, op->fd, at, left, op->offset + op->done);
  } else {
    io_uring_prep_read(sqe, op->fd, at, left, op->offset + op->done);
  }
  io_uring_sqe_set_data(sqe, op);
}

void IoRing::Start(IoOp* op) {
  op->done = 0;
  op->error = 0;
  ++in_flight_;
  if (op->length == 0) {
    // Nothing to move; a zero-length SQE would read as the end of the file. It still
    // comes back from WaitOne, through a no-op entry.
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
    }
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, op);
    return;
  }
  Queue(op);
}

IoOp* IoRing::WaitOne() {
  while (in_flight_ > 0) {
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_submit_and_wait(&ring_, 1);
    // The ring itself failing (not one op) is not retried: the caller sees the ops it
    // still has in flight as unfinished (done < length).
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      broken_ = true;
      return nullptr;
    }
    if (io_uring_peek_cqe(&ring_, &cqe) != 0) continue;
    IoOp* op = static_cast<IoOp*>(io_uring_cqe_get_data(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    if (op->length == 0) {
      --in_flight_;
      return op;
    }
    if (res == -EINTR || res == -EAGAIN) {
      Queue(op);
      continue;
    }
    if (res < 0) {
      op->error = -res;
    } else if (res == 0) {
      op->error = op->write ? ENOSPC : ENODATA;
    } else {
      op->done += static_cast<uint32_t>(res);
      if (op->done < op->length) {  // a short transfer: ask for the rest
        Queue(op);
        continue;
      }
    }
    --in_flight_;
    return op;
  }
  return nullptr;
}

RingPool::Lease::~Lease() {
  if (ring_ == nullptr) return;
  std::lock_guard<std::mutex> lock(pool_->mu_);
  if (ring_->broken() || ring_->in_flight() > 0) {
    ring_.reset();  // its entries can never be told apart from a new owner's
    --pool_->created_;
  } else {
    pool_->free_.push_back(std::move(ring_));
  }
  pool_->returned_.notify_one();
}

RingPool::Lease RingPool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!free_.empty()) {
      std::unique_ptr<IoRing> ring = std::move(free_.back());
      free_.pop_back();
      return Lease(this, std::move(ring));
    }
    if (created_ < max_rings_) {
      ++created_;
      lock.unlock();
      std::string error;
      std::unique_ptr<IoRing> ring = IoRing::Create(depth_, &error);
      if (ring == nullptr) {
        lock.lock();
        --created_;
      }
      return Lease(this, std::move(ring));
    }
    returned_.wait(lock);
  }
}

bool ProbeDirectIo(const std::string& dir, std::string* why) {
  const std::string path = dir + "/.direct-probe";
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = std::string("open(O_DIRECT): ") + std::strerror(errno);
    unlink(path.c_str());
    return false;
  }
  AlignedBuffer page(kSsdPage);
  std::memset(page.data(), 0x5a, kSsdPage);
  bool ok = true;
  if (pwrite(fd, page.data(), kSsdPage, 0) != static_cast<ssize_t>(kSsdPage)) {
    *why = std::string("a page-aligned O_DIRECT write: ") + std::strerror(errno);
    ok = false;
  } else if (pread(fd, page.data(), kSsdPage, 0) != static_cast<ssize_t>(kSsdPage)) {
    *why = std::string("a page-aligned O_DIRECT read: ") + std::strerror(errno);
    ok = false;
  }
  close(fd);
  unlink(path.c_str());
  return ok;
}

}  // namespace mooncake
