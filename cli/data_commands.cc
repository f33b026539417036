#include "cli/data_commands.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "common/error_code.h"
#include "mooncake_store.h"

namespace mooncake {
namespace cli {
namespace {

// Reads and writes go in pieces of this size, so that the progress line moves.
constexpr size_t kIoPieceBytes = 1u << 20;

// What an error code of the store means to a script.
int ExitFor(int code) {
  if (code == MOONCAKE_STORE_OBJECT_NOT_FOUND) return kExitMissing;
  if (code == MOONCAKE_STORE_RPC_FAIL || code == MOONCAKE_STORE_RPC_TIMEOUT) {
    return kExitUnreachable;
  }
  return kExitError;
}

// A handle connected to the daemon, closed and freed on scope exit.
class Store {
 public:
  Store() : handle_(mooncake_store_create()) {}
  ~Store() {
    if (handle_ != nullptr) mooncake_store_destroy(handle_);
  }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // kExitOk once connected; otherwise the error is printed and its exit code returned.
  int Open(const GlobalOptions& g) {
    if (handle_ == nullptr) {
      PrintError("out of memory");
      return kExitError;
    }
    if (!g.tenant.empty() && mooncake_store_set_tenant(handle_, g.tenant.c_str()) != 0) {
      PrintError("bad --tenant \"" + g.tenant + "\": 1 to 64 characters of [A-Za-z0-9_.-]");
      return kExitUsage;
    }
    int rc = mooncake_store_connect(handle_, g.socket.c_str(), kStagingPoolBytes);
    if (rc != 0) {
      PrintError("cannot use the daemon at " + g.socket + ": " + CodeText(rc));
      return rc == MOONCAKE_STORE_PERMISSION_DENIED ? kExitError : ExitFor(rc);
    }
    return kExitOk;
  }
  mooncake_store_t get() const { return handle_; }

 private:
  mooncake_store_t handle_;
};

// A heap block a value lives in while it moves (see the header: held once).
class ValueBuffer {
 public:
  ValueBuffer() = default;
  ~ValueBuffer() { std::free(data_); }
  ValueBuffer(const ValueBuffer&) = delete;
  ValueBuffer& operator=(const ValueBuffer&) = delete;

  // Room for capacity bytes, keeping the first size(); false when out of memory.
  bool Reserve(size_t capacity) {
    if (capacity <= capacity_) return true;
    void* grown = std::realloc(data_, capacity);
    if (grown == nullptr) return false;
    data_ = static_cast<char*>(grown);
    capacity_ = capacity;
    return true;
  }
  char* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  void set_size(size_t size) { size_ = size; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Reads fd to its end into buffer (at most limit bytes; one more means too large). known
// is the size fstat gave (0: not known). false with *error on a read error.
bool ReadAll(int fd, uint64_t known, uint64_t limit, ValueBuffer* buffer, ProgressLine* progress,
             std::string* error) {
  if (!buffer->Reserve(known > 0 ? known + 1 : kIoPieceBytes)) {
    *error = "out of memory for " + HumanSize(known);
    return false;
  }
  size_t size = 0;
  for (;;) {
    if (size == buffer->capacity()) {
      size_t grow = buffer->capacity() < (1u << 30) ? buffer->capacity() : (1u << 30);
      if (!buffer->Reserve(buffer->capacity() + grow)) {
        *error = "out of memory after " + HumanSize(size);
        return false;
      }
    }
    size_t want = buffer->capacity() - size;
    if (want > kIoPieceBytes) want = kIoPieceBytes;
    ssize_t n = read(fd, buffer->data() + size, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::strerror(errno);
      return false;
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
    progress->Update(size);
    if (size > limit) break;
  }
  buffer->set_size(size);
  return true;
}

bool WriteAll(int fd, const char* data, size_t size, ProgressLine* progress, std::string* error) {
  size_t done = 0;
  while (done < size) {
    size_t want = size - done < kIoPieceBytes ? size - done : kIoPieceBytes;
    ssize_t n = write(fd, data + done, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
    progress->Update(done);
  }
  return true;
}

int RemoveByRegex(const Invocation& inv, Store* store) {
  std::string pattern = inv.Text("regex");
  int64_t removed =
      mooncake_store_remove_by_regex(store->get(), pattern.c_str(), inv.Has("force") ? 1 : 0);
  if (removed < 0) {
    PrintError("rm --regex \"" + pattern + "\": " + CodeText(static_cast<int>(removed)));
    return ExitFor(static_cast<int>(removed));
  }
  if (inv.global.json) {
    PrintJson({{"pattern", pattern}, {"removed", removed}});
  } else {
    std::cout << "removed " << removed << " key" << (removed == 1 ? "" : "s") << "\n";
  }
  return kExitOk;
}

}  // namespace

int RunPut(const Invocation& inv) {
  const std::string& key = inv.args[0];
  const std::string& path = inv.args[1];
  uint64_t replicas = inv.Count("replicas", 1);
  if (replicas == 0) {
    PrintError("put: --replicas must be at least 1");
    return kExitUsage;
  }
  int fd = path == "-" ? STDIN_FILENO : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    PrintError("put: cannot open " + path + ": " + std::strerror(errno));
    return kExitError;
  }
  struct stat st;
  uint64_t known =
      fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  if (known > MOONCAKE_STORE_MAX_VALUE_SIZE) {
    PrintError("put: " + path + " is " + HumanSize(known) + ", over the store's 4 GiB limit");
    if (fd != STDIN_FILENO) close(fd);
    return kExitError;
  }
  // Connect before reading, so that a daemon that is down costs no read of a large file.
  Store store;
  int rc = store.Open(inv.global);
  if (rc != kExitOk) {
    if (fd != STDIN_FILENO) close(fd);
    return rc;
  }
  ProgressLine progress("put " + key, known, inv.global.progress);
  ValueBuffer value;
  std::string error;
  bool read_ok = ReadAll(fd, known, MOONCAKE_STORE_MAX_VALUE_SIZE, &value, &progress, &error);
  if (fd != STDIN_FILENO) close(fd);
  if (!read_ok) {
    PrintError("put: cannot read " + path + ": " + error);
    return kExitError;
  }
  if (value.size() == 0 || value.size() > MOONCAKE_STORE_MAX_VALUE_SIZE) {
    PrintError("put: " + path + (value.size() == 0 ? " is empty" : " is over 4 GiB") +
               ": values are 1 byte to 4 GiB");
    return kExitError;
  }

  std::vector<const char*> preferred;
  std::string prefer = inv.Text("prefer");
  if (!prefer.empty()) preferred.push_back(prefer.c_str());
  mooncake_replicate_config_t config = {};
  config.replica_num = replicas;
  config.with_soft_pin = inv.Has("soft_pin") ? 1 : 0;
  config.with_hard_pin = inv.Has("hard_pin") ? 1 : 0;
  config.preferred_segments = preferred.empty() ? nullptr : preferred.data();
  config.preferred_segments_count = preferred.size();
  progress.Phase("storing", value.size());
  int put = mooncake_store_put(store.get(), key.c_str(), value.data(), value.size(), &config);
  if (put != 0) {
    PrintError("put " + key + ": " + CodeText(put));
    return ExitFor(put);
  }
  progress.Finish(value.size());
  if (inv.global.json) {
    PrintJson({{"key", key}, {"size", value.size()}, {"replicas", replicas}});
  } else {
    std::cout << "stored " << key << " (" << HumanSize(value.size()) << ")\n";
  }
  return kExitOk;
}

int RunGet(const Invocation& inv) {
  const std::string& key = inv.args[0];
  std::string path = inv.args.size() > 1 ? inv.args[1] : "-";
  Store store;
  int rc = store.Open(inv.global);
  if (rc != kExitOk) return rc;
  ProgressLine progress("get " + key, 0, inv.global.progress);
  ValueBuffer value;
  // The value may be replaced by a larger one between get_size and get_into (-600): ask
  // its size again, a few times.
  int64_t got = MOONCAKE_STORE_INVALID_PARAMS;
  for (int attempt = 0; attempt < 3 && got == MOONCAKE_STORE_INVALID_PARAMS; ++attempt) {
    int64_t size = mooncake_store_get_size(store.get(), key.c_str());
    if (size < 0) {
      got = size;
      break;
    }
    if (!value.Reserve(static_cast<size_t>(size))) {
      PrintError("get " + key + ": out of memory for " + HumanSize(static_cast<uint64_t>(size)));
      return kExitError;
    }
    progress.Phase("fetching", static_cast<uint64_t>(size));
    got =
        mooncake_store_get_into(store.get(), key.c_str(), value.data(), static_cast<size_t>(size));
  }
  if (got < 0) {
    int code = static_cast<int>(got);
    PrintError("get " + key + ": " +
               (code == MOONCAKE_STORE_OBJECT_NOT_FOUND ? "no such key" : CodeText(code)));
    return ExitFor(code);
  }
  size_t size = static_cast<size_t>(got);
  // The file is created only once the value is here: a missing key leaves it untouched.
  int fd = path == "-" ? STDOUT_FILENO
                       : open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    PrintError("get: cannot create " + path + ": " + std::strerror(errno));
    return kExitError;
  }
  std::string error;
  bool ok = WriteAll(fd, value.data(), size, &progress, &error);
  if (fd != STDOUT_FILENO && close(fd) != 0 && ok) {
    ok = false;
    error = std::strerror(errno);
  }
  if (!ok) {
    PrintError("get: cannot write " + path + ": " + error);
    return kExitError;
  }
  progress.Finish(size);
  // stdout carries the value itself; a summary goes there only when the value went to a file.
  if (path != "-" && inv.global.json) {
    PrintJson({{"key", key}, {"size", size}, {"file", path}});
  } else if (path != "-") {
    std::cout << "wrote " << key << " (" << HumanSize(size) << ") to " << path << "\n";
  }
  return kExitOk;
}

int RunExists(const Invocation& inv) {
  Store store;
  int rc = store.Open(inv.global);
  if (rc != kExitOk) return rc;
  std::vector<const char*> keys;
  for (const auto& k : inv.args) keys.push_back(k.c_str());
  std::vector<int> results(keys.size(), 0);
  int batch = mooncake_store_batch_is_exist(store.get(), keys.data(), keys.size(), results.data());
  if (batch != 0) {
    PrintError("exists: " + CodeText(batch));
    return ExitFor(batch);
  }
  int exit_code = kExitOk;
  nlohmann::json json = nlohmann::json::object();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (results[i] < 0) {
      PrintError("exists " + inv.args[i] + ": " + CodeText(results[i]));
      exit_code = ExitFor(results[i]);
      json[inv.args[i]] = nullptr;
      continue;
    }
    if (results[i] == 0 && exit_code == kExitOk) exit_code = kExitMissing;
    json[inv.args[i]] = results[i] == 1;
    if (!inv.global.json)
      std::cout << (results[i] == 1 ? "present " : "missing ") << inv.args[i] << "\n";
  }
  if (inv.global.json) PrintJson(json);
  return exit_code;
}

int RunRemove(const Invocation& inv) {
  Store store;
  int rc = store.Open(inv.global);
  if (rc != kExitOk) return rc;
  if (inv.Has("regex")) return RemoveByRegex(inv, &store);
  std::vector<const char*> keys;
  for (const auto& k : inv.args) keys.push_back(k.c_str());
  std::vector<int> results(keys.size(), 0);
  int batch = mooncake_store_batch_remove(store.get(), keys.data(), keys.size(),
                                          inv.Has("force") ? 1 : 0, results.data());
  if (batch != 0) {
    PrintError("rm: " + CodeText(batch));
    return ExitFor(batch);
  }
  // An error outranks a missing key: a script must not take "kept, leased" for "gone".
  int exit_code = kExitOk;
  nlohmann::json json = nlohmann::json::object();
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string outcome;
    if (results[i] == 0) {
      outcome = "removed";
    } else if (results[i] == MOONCAKE_STORE_OBJECT_NOT_FOUND) {
      outcome = "missing";
      if (exit_code == kExitOk) exit_code = kExitMissing;
    } else {
      outcome = ErrorName(results[i]);
      PrintError("rm " + inv.args[i] + ": " + CodeText(results[i]) +
                 (results[i] == MOONCAKE_STORE_OBJECT_HAS_LEASE
                      ? ": a read holds it; retry once the lease ends, or rm --force"
                      : ""));
      exit_code = ExitFor(results[i]);
    }
    json[inv.args[i]] = outcome;
    if (!inv.global.json && (results[i] == 0 || results[i] == MOONCAKE_STORE_OBJECT_NOT_FOUND)) {
      std::cout << outcome << " " << inv.args[i] << "\n";
    }
  }
  if (inv.global.json) PrintJson(json);
  return exit_code;
}

}  // namespace cli
}  // namespace mooncake
