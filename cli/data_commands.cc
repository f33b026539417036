#include "cli/data_commands.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "cli/admin_commands.h"
#include "cli/exit_codes.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "common/base/error_code.h"
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

// The end of a line about a daemon that cannot be reached: the fix.
const char* kSocketHint = " (is it running? --socket or MOONCAKE_SOCKET name another)";

// Why a Unix-socket connect to path fails, in the OS's words ("No such file or directory",
// "Connection refused"); "" when it succeeds (something listens there). The C ABI says
// only -900; this second connect is what lets the message name the cause.
std::string WhyUnreachable(const std::string& path) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) return "the path is too long for a Unix socket";
  path.copy(address.sun_path, path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  std::string why = rc == 0 ? "" : std::strerror(errno);
  close(fd);
  return why;
}

// Prints what failed ("put KEY") with the store's code and returns the exit code; a daemon
// that stopped answering midway is named.
int Failed(const GlobalOptions& g, const std::string& what, int code) {
  if (code == MOONCAKE_STORE_RPC_FAIL || code == MOONCAKE_STORE_RPC_TIMEOUT) {
    PrintError(what + ": " + CodeText(code) + ": lost mooncaked at " + g.socket + kSocketHint);
  } else {
    PrintError(what + ": " + CodeText(code));
  }
  return ExitFor(code);
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
    if (rc == 0) return kExitOk;
    if (rc == MOONCAKE_STORE_RPC_FAIL || rc == MOONCAKE_STORE_RPC_TIMEOUT) {
      std::string why = WhyUnreachable(g.socket);
      PrintError(why.empty()
                     ? "mooncaked at " + g.socket + " did not answer: " + CodeText(rc) + kSocketHint
                     : "cannot reach mooncaked at " + g.socket + ": " + why + kSocketHint);
      return kExitUnreachable;
    }
    PrintError("cannot use mooncaked at " + g.socket + ": " + CodeText(rc));
    return rc == MOONCAKE_STORE_PERMISSION_DENIED ? kExitError : ExitFor(rc);
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
    return Failed(inv.global, "rm --regex \"" + pattern + "\"", static_cast<int>(removed));
  }
  if (inv.global.json) {
    PrintJson({{"pattern", pattern}, {"removed", removed}});
  } else {
    std::cout << "removed " << removed << " key" << (removed == 1 ? "" : "s") << "\n";
  }
  return kExitOk;
}

// The most replicas a put may ask for (the master's limit).
constexpr uint64_t kMaxReplicas = 64;

// Closes a file descriptor on scope exit (not stdin).
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { Close(); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  void Close() {
    if (fd_ > STDIN_FILENO) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// put without --upsert of a key that exists: nothing was stored, and the old value stays.
int KeyExists(const Invocation& inv, const std::string& key) {
  PrintError(key + " exists; not stored (Mooncake keeps the first value; --upsert replaces it)");
  if (inv.global.json) PrintJson({{"key", key}, {"stored", false}, {"exists", true}});
  return kExitExists;
}

// rm without --force of keys a read holds (-706): a forced remove unpublishes such a key at
// once and frees its space only when the lease ends (docs/master.md, "Leases"), so no reader
// sees freed memory and removing it is safe. But force also removes a hard-pinned key, which
// takes an explicit --force; so each is looked up first (the master's /query_key, no lease)
// and only the unpinned ones are removed again with force. A key whose pins cannot be looked
// up stays (-706, with why). Updates results, marks leased removals and says why a key was
// kept.
void RemoveLeased(const Invocation& inv, Store* store, const std::vector<const char*>& keys,
                  std::vector<int>* results, std::vector<bool>* leased,
                  std::vector<std::string>* kept_because) {
  std::vector<size_t> again;
  for (size_t i = 0; i < keys.size(); ++i) {
    if ((*results)[i] != MOONCAKE_STORE_OBJECT_HAS_LEASE) continue;
    KeyDescription held = DescribeKey(inv.global, keys[i]);
    if (held.outcome == KeyDescription::kMissing) {
      (*results)[i] = MOONCAKE_STORE_OBJECT_NOT_FOUND;  // removed meanwhile
    } else if (held.outcome == KeyDescription::kFailed) {
      (*kept_because)[i] = "a read holds it, and whether it is hard-pinned could not be asked (" +
                           held.error + "); rm --force removes it";
    } else if (held.body.value("hard_pinned", false)) {
      (*results)[i] = MOONCAKE_STORE_UNAVAILABLE_IN_CURRENT_STATUS;
      (*kept_because)[i] = "it is hard-pinned (and a read holds it); rm --force removes it";
    } else {
      again.push_back(i);
    }
  }
  if (again.empty()) return;
  std::vector<const char*> forced;
  for (size_t i : again) forced.push_back(keys[i]);
  std::vector<int> forced_results(forced.size(), 0);
  int batch = mooncake_store_batch_remove(store->get(), forced.data(), forced.size(), 1,
                                          forced_results.data());
  for (size_t k = 0; k < again.size(); ++k) {
    size_t i = again[k];
    (*results)[i] = batch != 0 ? batch : forced_results[k];
    (*leased)[i] = (*results)[i] == 0;
  }
}

}  // namespace

int RunPut(const Invocation& inv) {
  const std::string& key = inv.args[0];
  const bool upsert = inv.Has("upsert");
  // The value: -f FILE, "-" (stdin, as -f - is), or the literal bytes of VALUE.
  const bool literal = !inv.Has("file") && inv.args[1] != "-";
  const std::string path = inv.Has("file") ? inv.Text("file") : "-";
  const std::string source = path == "-" ? "stdin" : path;
  uint64_t replicas = inv.Count("replicas", 1);
  if (replicas == 0 || replicas > kMaxReplicas) {
    PrintError("put: --replicas takes 1 to " + std::to_string(kMaxReplicas) + ", not " +
               std::to_string(replicas));
    return kExitUsage;
  }
  if (literal && inv.args[1].empty()) {
    PrintError("put: VALUE is empty: values are 1 byte to 4 GiB");
    return kExitUsage;
  }
  int fd = -1;
  uint64_t known = 0;
  if (!literal) {
    fd = path == "-" ? STDIN_FILENO : open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      PrintError("put: cannot open " + path + ": " + std::strerror(errno));
      return kExitError;
    }
    struct stat st;
    known = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
  }
  FdCloser closer(fd);
  if (known > MOONCAKE_STORE_MAX_VALUE_SIZE) {
    PrintError("put: " + source + " is " + HumanSize(known) + ", over the store's 4 GiB limit");
    return kExitError;
  }
  // Connect before reading, so that a daemon that is down costs no read of a large file.
  Store store;
  int rc = store.Open(inv.global);
  if (rc != kExitOk) return rc;
  // A put of a key that exists answers 0 and keeps the old value (the C ABI cannot tell
  // the two apart), so the key is looked up first; the check takes no read lease.
  if (!upsert) {
    int exists = mooncake_store_is_exist(store.get(), key.c_str());
    if (exists < 0) return Failed(inv.global, "put " + key, exists);
    if (exists == 1) return KeyExists(inv, key);
  }
  ValueBuffer value;
  if (literal) {
    const std::string& text = inv.args[1];
    if (!value.Reserve(text.size())) {
      PrintError("put: out of memory for " + HumanSize(text.size()));
      return kExitError;
    }
    text.copy(value.data(), text.size());
    value.set_size(text.size());
  }
  ProgressLine progress("put " + key, known, inv.global.progress);
  if (!literal) {
    std::string error;
    if (!ReadAll(fd, known, MOONCAKE_STORE_MAX_VALUE_SIZE, &value, &progress, &error)) {
      PrintError("put: cannot read " + source + ": " + error);
      return kExitError;
    }
    closer.Close();
    if (value.size() == 0 || value.size() > MOONCAKE_STORE_MAX_VALUE_SIZE) {
      PrintError("put: " + source + (value.size() == 0 ? " is empty" : " is over 4 GiB") +
                 ": values are 1 byte to 4 GiB");
      return kExitError;
    }
  }

  std::vector<const char*> preferred;
  std::string prefer = inv.Text("prefer");
  if (!prefer.empty()) preferred.push_back(prefer.c_str());
  mooncake_put_config_t config;
  mooncake_store_put_config_init(&config);
  config.replica_num = replicas;
  if (inv.Has("soft_pin")) config.soft_pin_action = MOONCAKE_SOFT_PIN_ENABLE;
  config.with_hard_pin = inv.Has("hard_pin") ? 1 : 0;
  config.preferred_segments = preferred.empty() ? nullptr : preferred.data();
  config.preferred_segments_count = preferred.size();
  progress.Phase("storing", value.size());
  int put =
      upsert ? mooncake_store_upsert_from_ex(store.get(), key.c_str(), value.data(), value.size(),
                                             &config)
             : mooncake_store_put_ex(store.get(), key.c_str(), value.data(), value.size(), &config);
  if (put != 0) return Failed(inv.global, "put " + key, put);
  progress.Finish(value.size());

  // What the master now holds under the key (no read lease): the replicas it placed, and,
  // for a plain put, whether the value is ours. Another writer may have put the key
  // between the check above and this put (which then kept theirs): a value of another size,
  // or one still being written, is theirs. One of the same size cannot be told apart.
  KeyDescription held = DescribeKey(inv.global, key);
  int64_t placed = -1;  // unknown
  if (held.outcome == KeyDescription::kFound) {
    const nlohmann::json& body = held.body;
    bool theirs = !body.value("complete", true) || body.value("size", uint64_t{0}) != value.size();
    if (!upsert && theirs) return KeyExists(inv, key);
    placed = 0;
    if (body.contains("replicas") && body["replicas"].is_array()) {
      for (const auto& r : body["replicas"]) {
        if (r.value("kind", std::string()) == "memory") ++placed;
      }
    }
  }
  if (placed >= 0 && static_cast<uint64_t>(placed) < replicas) {
    PrintError("put " + key + ": the master placed " + std::to_string(placed) + " of " +
               std::to_string(replicas) + " replicas (it places what the daemons have room for, " +
               "one per daemon; mooncake-cli segments lists them)");
  } else if (placed < 0 && replicas > 1) {
    PrintError("put " + key + ": stored; how many of the " + std::to_string(replicas) +
               " replicas were placed is not known: " +
               (held.outcome == KeyDescription::kMissing
                    ? "the master at " + inv.global.admin_url + " does not list the key"
                    : held.error));
  }
  if (inv.global.json) {
    PrintJson({{"key", key},
               {"stored", true},
               {"size", value.size()},
               {"upsert", upsert},
               {"replicas", placed >= 0 ? nlohmann::json(placed) : nlohmann::json(nullptr)},
               {"replicas_asked", replicas}});
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
    if (code != MOONCAKE_STORE_OBJECT_NOT_FOUND) return Failed(inv.global, "get " + key, code);
    PrintError("get " + key + ": no such key");
    return kExitMissing;
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
  if (batch != 0) return Failed(inv.global, "exists", batch);
  int exit_code = kExitOk;
  nlohmann::json json = nlohmann::json::object();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (results[i] < 0) {
      exit_code = Failed(inv.global, "exists " + inv.args[i], results[i]);
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
  const bool force = inv.Has("force");
  std::vector<const char*> keys;
  for (const auto& k : inv.args) keys.push_back(k.c_str());
  std::vector<int> results(keys.size(), 0);
  int batch = mooncake_store_batch_remove(store.get(), keys.data(), keys.size(), force ? 1 : 0,
                                          results.data());
  if (batch != 0) return Failed(inv.global, "rm", batch);
  // Why a key was kept, beyond its code (for -706 and -1010).
  std::vector<std::string> kept_because(keys.size());
  std::vector<bool> leased(keys.size(), false);
  if (!force) RemoveLeased(inv, &store, keys, &results, &leased, &kept_because);
  // An error outranks a missing key: a script must not take "kept, it is hard-pinned" for
  // "gone".
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
      if (results[i] == MOONCAKE_STORE_UNAVAILABLE_IN_CURRENT_STATUS && kept_because[i].empty()) {
        kept_because[i] = "it is hard-pinned; rm --force removes it";
      }
      PrintError("rm " + inv.args[i] + ": " + CodeText(results[i]) +
                 (kept_because[i].empty() ? "" : ": " + kept_because[i]));
      exit_code = ExitFor(results[i]);
    }
    json[inv.args[i]] = outcome;
    if (!inv.global.json && (results[i] == 0 || results[i] == MOONCAKE_STORE_OBJECT_NOT_FOUND)) {
      std::cout << outcome << " " << inv.args[i]
                << (leased[i] ? " (a read holds it: its space returns when the lease ends)" : "")
                << "\n";
    }
  }
  if (inv.global.json) PrintJson(json);
  return exit_code;
}

}  // namespace cli
}  // namespace mooncake
