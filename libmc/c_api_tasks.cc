// The C ABI's calls of ABI 5 (include/mooncake_store.h): copy and move tasks, and the
// mount of a file's range: argument checks, then StoreClient (libmc/store_client_tasks.cc,
// store_client_segments.cc).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "include/mooncake_store.h"
#include "libmc/c_api_call.h"

using mooncake::ErrorCode;
using mooncake::client::CheckKey;
using mooncake::client::kInvalidParams;
using mooncake::client::NullArgument;
using mooncake::client::Refuse;
using mooncake::client::abi::Api;
using mooncake::client::abi::AsClient;
using mooncake::client::abi::Kind;
using mooncake::client::abi::ToAbi;

namespace {

// As many names as a task may copy to (a replica per segment, 64 at most).
constexpr size_t kMaxTargets = 64;

// A segment name as the calls take it: at most a replica descriptor's location.
int CheckName(const char* name, const char* what, std::string* out) {
  if (name == nullptr) return NullArgument(what);
  size_t n = strnlen(name, MOONCAKE_STORE_LOCATION_SIZE);
  if (n == 0 || n >= MOONCAKE_STORE_LOCATION_SIZE) {
    return Refuse(kInvalidParams, std::string(what) + " must be 1 to " +
                                      std::to_string(MOONCAKE_STORE_LOCATION_SIZE - 1) +
                                      " bytes (a segment's name: \"host:port\")");
  }
  out->assign(name, n);
  return 0;
}

void WriteId(const mooncake::uds::TaskIdReply& id, mooncake_task_id_t* out) {
  out->high = id.id_high;
  out->low = id.id_low;
}

}  // namespace

MC_EXPORT int mooncake_store_create_copy_task(mooncake_store_t store, const char* key,
                                              const char** targets, size_t count,
                                              mooncake_task_id_t* id_out) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (id_out == nullptr) return NullArgument("id_out");
    std::string k;
    int rc = CheckKey(key, &k);
    if (rc != 0) return rc;
    if (count == 0 || count > kMaxTargets) {
      return Refuse(kInvalidParams, "count " + std::to_string(count) +
                                        ": a copy names 1 to 64 target segments");
    }
    if (targets == nullptr) return NullArgument("targets");
    std::vector<std::string> names(count);
    for (size_t i = 0; i < count; ++i) {
      rc = CheckName(targets[i], "a target", &names[i]);
      if (rc != 0) return rc;
    }
    mooncake::uds::TaskIdReply id;
    ErrorCode code = AsClient(store)->CreateCopyTask(k, names, &id);
    if (code == ErrorCode::OK) WriteId(id, id_out);
    return ToAbi(code);
  });
}

MC_EXPORT int mooncake_store_create_move_task(mooncake_store_t store, const char* key,
                                              const char* source, const char* target,
                                              mooncake_task_id_t* id_out) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (id_out == nullptr) return NullArgument("id_out");
    std::string k, from, to;
    int rc = CheckKey(key, &k);
    if (rc == 0) rc = CheckName(source, "source", &from);
    if (rc == 0) rc = CheckName(target, "target", &to);
    if (rc != 0) return rc;
    mooncake::uds::TaskIdReply id;
    ErrorCode code = AsClient(store)->CreateMoveTask(k, from, to, &id);
    if (code == ErrorCode::OK) WriteId(id, id_out);
    return ToAbi(code);
  });
}

MC_EXPORT int mooncake_store_query_task(mooncake_store_t store, mooncake_task_id_t id,
                                        mooncake_task_info_t* out) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (out == nullptr) return NullArgument("out");
    mooncake::uds::TaskReply task;
    ErrorCode code = AsClient(store)->QueryTask({id.high, id.low}, &task);
    if (code != ErrorCode::OK) return ToAbi(code);
    std::memset(out, 0, sizeof(*out));
    out->id = id;
    out->type = static_cast<int>(task.type);
    out->status = static_cast<int>(task.status);
    out->created_at_ms_epoch = task.created_unix_ms;
    out->last_updated_at_ms_epoch = task.updated_unix_ms;
    out->assigned_client.high = 0;
    out->assigned_client.low = task.assigned_daemon;
    size_t n = std::min(task.message.size(), sizeof(out->message) - 1);
    std::memcpy(out->message, task.message.data(), n);
    return 0;
  });
}

MC_EXPORT int mooncake_store_mount_file_segment(mooncake_store_t store, int fd, uint64_t offset,
                                                uint64_t size, uint64_t* segment_id_out) {
  return Api<int>(__func__, store, Kind::kSetup, [&] {
    if (segment_id_out == nullptr) return NullArgument("segment_id_out");
    if (fd < 0) return Refuse(kInvalidParams, "fd " + std::to_string(fd) + " is not a descriptor");
    return ToAbi(AsClient(store)->MountFileSegment(fd, offset, size, segment_id_out));
  });
}
