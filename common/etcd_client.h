// A small client of etcd's v3 API (docs/ha.md), through etcd's JSON gateway over HTTP
// (libcurl): POST /v3/kv/range, /v3/kv/txn, /v3/kv/deleterange, /v3/lease/grant,
// /v3/lease/keepalive, /v3/lease/revoke, keys and values base64 as the gateway wants them.
// The gateway rather than gRPC: it is part of every etcd server (Debian's 3.4 included),
// needs no code generated from protocol files, and the few calls the masters and daemons
// make are small and rare -- an election, a lease renewed every second, a key read when
// the leader changes.
//
// Endpoints are tried in order, starting with the last one that answered; a call fails over
// to the next on a connection error, a timeout or an HTTP 5xx, so one etcd member down
// costs one timeout. Each call is one HTTP request on a connection of its own (no signals,
// no proxy from the environment): calls are rare, and nothing is shared between threads.
//
// Errors are values: OK; RPC_FAIL when no endpoint answered (connection refused, or HTTP
// 5xx: a member without quorum), RPC_TIMEOUT when the last one tried took longer than the
// call's timeout; INTERNAL_ERROR, with one log line naming the endpoint, for an answer that
// is not JSON, lacks what the call needs, is larger than 16 MiB, or is a refusal (HTTP 4xx
// or an "error" field). etcd's refusals because something is gone are results, not errors:
// KeepAlive of an unknown lease answers *ttl_seconds 0, RevokeLease of one is OK.
//
// Thread-safety: every method may be called from any thread; calls do not share a curl
// handle.
#ifndef MOONCAKE_COMMON_ETCD_CLIENT_H_
#define MOONCAKE_COMMON_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/error_code.h"

namespace mooncake {

class EtcdClient {
 public:
  // endpoints: "host:port[,host:port...]" (';' separates too, as in Mooncake's flag; an
  // optional "http://" in front of each is taken off; https is not supported). timeout_ms bounds each HTTP request. INVALID_PARAMS for an
  // empty or malformed list.
  static ErrorCode Create(const std::string& endpoints, int64_t timeout_ms,
                          std::unique_ptr<EtcdClient>* out);
  ~EtcdClient();

  struct KeyValue {
    std::string key, value;
    int64_t create_revision = 0;  // etcd's revision when the key was created: grows with
                                  // every creation, so it numbers terms
    int64_t mod_revision = 0;
    int64_t lease = 0;            // 0: none
  };

  // The key's value; *found false when it does not exist (still OK).
  ErrorCode Get(const std::string& key, KeyValue* out, bool* found);
  // Every key with this prefix, in key order.
  ErrorCode GetPrefix(const std::string& prefix, std::vector<KeyValue>* out);
  // Puts unconditionally (lease 0: none).
  ErrorCode Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Creates key only if it does not exist (a transaction comparing its create_revision to
  // 0), bound to lease. *created says whether it did; *current gets the key as it is after
  // the call (ours, or the one that was there). A key that already holds exactly this
  // value and lease counts as created: that is our own attempt, applied by an endpoint that
  // then timed out before the call failed over.
  ErrorCode CreateIfAbsent(const std::string& key, const std::string& value, int64_t lease,
                           bool* created, KeyValue* current);
  // Puts only while `guard` still has create_revision guard_revision (a transaction): how a
  // leader writes only while it still holds its leader key. *done false when it no longer
  // does.
  ErrorCode PutIfHeld(const std::string& guard, int64_t guard_revision, const std::string& key,
                      const std::string& value, bool* done);
  // Deletes key only while it has create_revision revision (a leader giving up its key).
  ErrorCode DeleteIfHeld(const std::string& key, int64_t revision, bool* done);

  // A new lease of ttl_seconds; *id its id.
  ErrorCode GrantLease(int64_t ttl_seconds, int64_t* id);
  // Renews the lease once; *ttl_seconds what etcd says is left (0 or less: the lease is
  // gone, and with it every key bound to it).
  ErrorCode KeepAlive(int64_t id, int64_t* ttl_seconds);
  ErrorCode RevokeLease(int64_t id);

 private:
  EtcdClient() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_ETCD_CLIENT_H_
