// The extern "C" put sessions of include/mooncake_store.h (mooncake_store_put_session_*)
// and mooncake_store_disk_read_count: argument checks (libmc/api_checks.h), then
// StoreClient's (libmc/store_client_sessions.cc), in the frame every call runs in
// (libmc/c_api_call.h).
#include <cstdint>
#include <string>
#include <vector>

#include "include/mooncake_store.h"
#include "libmc/api_checks.h"
#include "libmc/c_api_call.h"
#include "libmc/last_error.h"
#include "libmc/store_client.h"

using mooncake::ErrorCode;
using mooncake::client::CheckAnyConfig;
using mooncake::client::CheckKey;
using mooncake::client::CheckValueSize;
using mooncake::client::NoteEntry;
using mooncake::client::NullArgument;
using mooncake::client::StoreClient;
using mooncake::client::abi::Api;
using mooncake::client::abi::AsClient;
using mooncake::client::abi::Kind;
using mooncake::client::abi::ToAbi;

namespace {

// end (commit) and revoke: a code per key.
int EndSessions(const char* function, mooncake_store_t store, const char** keys, size_t count,
                int* results_out, bool commit) {
  return Api<int>(function, store, Kind::kData, [&] {
    if (count == 0) return 0;
    if (keys == nullptr) return NullArgument("keys");
    if (results_out == nullptr) return NullArgument("results_out");
    std::vector<std::string> valid;
    std::vector<size_t> where;
    for (size_t i = 0; i < count; ++i) {
      std::string k;
      int rc = CheckKey(keys[i], &k);
      if (rc != 0) {
        results_out[i] = rc;
        NoteEntry(i, rc);
        continue;
      }
      valid.push_back(std::move(k));
      where.push_back(i);
    }
    std::vector<ErrorCode> codes;
    if (!valid.empty()) AsClient(store)->EndPutSessions(valid, commit, &codes);
    for (size_t j = 0; j < valid.size(); ++j) results_out[where[j]] = ToAbi(codes[j]);
    return 0;
  });
}

}  // namespace

MC_EXPORT int mooncake_store_put_session_start(mooncake_store_t store, const char** keys,
                                               const size_t* sizes, size_t count,
                                               const mooncake_put_config_t* config,
                                               int* results_out) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (count == 0) return 0;
    if (keys == nullptr) return NullArgument("keys");
    if (sizes == nullptr) return NullArgument("sizes");
    if (results_out == nullptr) return NullArgument("results_out");
    StoreClient* client = AsClient(store);
    mooncake::uds::WireConfig c;
    std::vector<std::string> groups;
    int config_rc = CheckAnyConfig(client, config, &c, count, &groups);
    std::vector<StoreClient::SessionStart> starts;
    std::vector<size_t> where;
    for (size_t i = 0; i < count; ++i) {
      std::string k;
      int rc = config_rc;  // every entry's: the call's message says why
      if (rc == 0) rc = CheckKey(keys[i], &k);
      if (rc == 0) rc = CheckValueSize(sizes[i]);
      if (rc != 0) {
        results_out[i] = rc;
        NoteEntry(i, rc);
        continue;
      }
      starts.push_back({std::move(k), sizes[i], groups.empty() ? std::string() : groups[i]});
      where.push_back(i);
    }
    if (!starts.empty()) client->StartPutSessions(starts, c);
    for (size_t j = 0; j < starts.size(); ++j) results_out[where[j]] = ToAbi(starts[j].result);
    return 0;
  });
}

MC_EXPORT int mooncake_store_put_session_write(mooncake_store_t store,
                                               const mooncake_session_write_t* writes,
                                               size_t count, int64_t* results_out) {
  return Api<int>(__func__, store, Kind::kData, [&] {
    if (count == 0) return 0;
    if (writes == nullptr) return NullArgument("writes");
    if (results_out == nullptr) return NullArgument("results_out");
    std::vector<StoreClient::SessionWrite> items;
    std::vector<size_t> where;
    for (size_t i = 0; i < count; ++i) {
      const mooncake_session_write_t& w = writes[i];
      StoreClient::SessionWrite item;
      int rc = CheckKey(w.key, &item.key);
      if (rc == 0 && w.fragment_count > 0 && w.fragments == nullptr) {
        rc = NullArgument("fragments");
      }
      if (rc != 0) {
        results_out[i] = rc;
        NoteEntry(i, rc);
        continue;
      }
      item.fragments.reserve(w.fragment_count);
      for (size_t k = 0; k < w.fragment_count; ++k) {
        const mooncake_put_fragment_t& f = w.fragments[k];
        item.fragments.push_back({static_cast<const char*>(f.src), f.length, f.dst_offset});
      }
      items.push_back(std::move(item));
      where.push_back(i);
    }
    if (!items.empty()) AsClient(store)->WritePutSessions(items);
    for (size_t j = 0; j < items.size(); ++j) results_out[where[j]] = ToAbi(items[j].result);
    return 0;
  });
}

MC_EXPORT int mooncake_store_put_session_end(mooncake_store_t store, const char** keys,
                                             size_t count, int* results_out) {
  return EndSessions(__func__, store, keys, count, results_out, true);
}

MC_EXPORT int mooncake_store_put_session_revoke(mooncake_store_t store, const char** keys,
                                                size_t count, int* results_out) {
  return EndSessions(__func__, store, keys, count, results_out, false);
}

MC_EXPORT int64_t mooncake_store_disk_read_count(mooncake_store_t store) {
  return Api<int64_t>(__func__, store, Kind::kData,
                      [&] { return ToAbi(AsClient(store)->DiskReadCount()); });
}
