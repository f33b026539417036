// PUT, UPSERT, BATCH_PUT, BATCH_UPSERT and the staged put (PUT_BEGIN / CHUNK / COMMIT / ABORT).
//
// The bytes go from the application's pool to every replica the master reserved: a
// memcpy into this daemon's segments, a transfer-engine WRITE into other daemons', all in
// parallel. The object is published (PutEnd) only when every replica was written;
// otherwise it is revoked, so it is visible with all its replicas or not at all. A
// reservation the master answers -200 is asked again while eviction makes room, for up to
// --put_no_space_wait (daemon/service/no_space_wait.h); a batch's other entries wait with it.
//
// A single put's PutStart (not an upsert's: the master has no batch form of it) and its
// PutEnd go through the group commit (daemon/cluster/master_batcher.h): concurrent puts share
// batch RPCs, each keeping its own code, its own -200 wait and -103 re-registration.
#include "common/base/crc32c.h"
#include "common/base/logging.h"
#include "daemon/base/group_ids.h"
#include "daemon/service/no_space_wait.h"
#include "daemon/service/store_service.h"

namespace mooncake {

using namespace store_detail;

namespace {

// keys[j] and sizes[j] for each j in picked, in order: the entries a batch asks again.
void PickEntries(const std::vector<std::string>& keys, const std::vector<int64_t>& sizes,
                 const std::vector<size_t>& picked, std::vector<std::string>* picked_keys,
                 std::vector<int64_t>* picked_sizes) {
  for (size_t j : picked) {
    picked_keys->push_back(keys[j]);
    picked_sizes->push_back(sizes[j]);
  }
}

}  // namespace

ErrorCode StoreService::StartPut(ClientConnection* s, const std::string& key, uint64_t size,
                                 const rpc::ReplicateConfig& asked, bool upsert,
                                 rpc::PutStartResult* out) {
  rpc::ReplicateConfig config = asked;
  config.avoided_segments = io_->engine()->Suspects();
  NoSpaceWait wait(put_no_space_wait_ms_);
  bool reregistered = false;
  for (;;) {
    int64_t writer = membership_->daemon_id();
    ErrorCode code =
        upsert ? master_->UpsertStart(writer, key, static_cast<int64_t>(size), config, out)
               : batcher_.PutStart(writer, key, static_cast<int64_t>(size), config, out);
    if (code == ErrorCode::NO_AVAILABLE_HANDLE && wait.Next(s)) continue;
    // -103: the master restarted since our last heartbeat. Register now rather than fail
    // every put until the heartbeat notices.
    if (code != ErrorCode::CLIENT_NOT_FOUND || reregistered ||
        membership_->Reregister() != ErrorCode::OK) {
      return code;
    }
    reregistered = true;
  }
}

ErrorCode StoreService::StartBatch(ClientConnection* s, int64_t writer,
                                   const std::vector<std::string>& keys,
                                   const std::vector<int64_t>& sizes,
                                   const rpc::ReplicateConfig& config,
                                   std::vector<rpc::PutStartResult>* started) {
  ErrorCode rc = master_->BatchPutStart(writer, keys, sizes, config, started);
  if (rc == ErrorCode::OK && !started->empty() &&
      FromWire((*started)[0].code) == ErrorCode::CLIENT_NOT_FOUND &&
      membership_->Reregister() == ErrorCode::OK) {
    rc = master_->BatchPutStart(writer, keys, sizes, config, started);
  }
  if (rc != ErrorCode::OK) return rc;
  // The entries without space are asked again, together, while the others keep what they
  // reserved: the batch goes on once every entry has its answer.
  NoSpaceWait wait(put_no_space_wait_ms_);
  for (;;) {
    std::vector<size_t> again;
    for (size_t j = 0; j < started->size(); ++j) {
      if (FromWire((*started)[j].code) == ErrorCode::NO_AVAILABLE_HANDLE) again.push_back(j);
    }
    if (again.empty() || !wait.Next(s)) return ErrorCode::OK;
    std::vector<std::string> retry_keys;
    std::vector<int64_t> retry_sizes;
    PickEntries(keys, sizes, again, &retry_keys, &retry_sizes);
    std::vector<rpc::PutStartResult> retried;
    // A failed call leaves those entries at -200; the rest of the batch goes on.
    if (master_->BatchPutStart(writer, retry_keys, retry_sizes, PickGroups(config, again),
                               &retried) != ErrorCode::OK ||
        retried.size() != again.size()) {
      return ErrorCode::OK;
    }
    for (size_t k = 0; k < again.size(); ++k) (*started)[again[k]] = std::move(retried[k]);
  }
}

ErrorCode StoreService::EndPut(const std::string& key, bool upsert, int64_t checksum,
                               StaleCaches* stale) {
  int64_t writer = membership_->daemon_id();
  return upsert ? master_->UpsertEnd(writer, key, checksum, stale)
                : batcher_.PutEnd(writer, key, checksum);
}

ErrorCode StoreService::RevokePut(const std::string& key, bool upsert) {
  int64_t writer = membership_->daemon_id();
  return upsert ? master_->UpsertRevoke(writer, key) : master_->PutRevoke(writer, key);
}

ErrorCode StoreService::FinishPut(ClientConnection* s, const std::string& key, bool upsert,
                                  int64_t checksum) {
  if (s->closed()) {
    // The client is gone and will never learn the outcome: publish nothing it left.
    RevokePut(key, upsert);
    return ErrorCode::TRANSFER_FAIL;
  }
  StaleCaches stale;
  ErrorCode code = EndPut(key, upsert, checksum, &stale);
  // If the publish failed on the wire it may or may not have happened; a revoke of a
  // published object is refused (-1010), so trying is always safe.
  if (code != ErrorCode::OK) RevokePut(key, upsert);
  // Before the writer is answered, so that its next read sees the new value, and so does
  // every host's (an upsert names the daemons that may cache the old one). A plain put
  // matters here too: a fill of ours may have raced the removal that freed the key.
  ForgetEverywhere(stale, {key}, false);
  return code;
}

ErrorCode StoreService::ReserveAndWrite(ClientConnection* s, const std::string& key, char* src,
                                        uint64_t size, const rpc::ReplicateConfig& config,
                                        bool upsert, int64_t* checksum, bool* retryable) {
  *retryable = false;
  rpc::PutStartResult started;
  ErrorCode code = StartPut(s, key, size, config, upsert, &started);
  if (code != ErrorCode::OK) return code;
  std::vector<ReplicaTarget> targets;
  code = io_->ResolveAll(started.replicas, size, started.master_epoch, &targets);
  if (code == ErrorCode::OK) {
    std::vector<ValueSlice> slice{ValueSlice{&targets, 0, src, size}};
    slice[0].want_crc = checksum_;
    io_->WriteAll(&slice, TransferDeadline());
    code = slice[0].result;
    *checksum = ValueChecksum(slice[0]);
  }
  if (code != ErrorCode::OK) {
    // Retried only once the reservation is surely gone: else the retry would meet it.
    *retryable = RevokePut(key, upsert) == ErrorCode::OK && code == ErrorCode::TRANSFER_FAIL;
  }
  return code;
}

ErrorCode StoreService::OnPut(ClientConnection* s, const uds::PutArgs& in, uds::NoReply*) {
  return PutWhole(s, in, false);
}

ErrorCode StoreService::OnUpsert(ClientConnection* s, const uds::PutArgs& in, uds::NoReply*) {
  return PutWhole(s, in, true);
}

ErrorCode StoreService::PutWhole(ClientConnection* s, const uds::PutArgs& in, bool upsert) {
  rpc::ReplicateConfig config;
  char* src = s->PoolRange(in.pool_offset, in.size);
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;  // Run names the key's rule
  if (!ValidSize(in.size)) return RefuseSize(in.size);
  if (src == nullptr) return RefusePoolRange(s, in.pool_offset, in.size);
  if (!ConfigOf(s, in.config, &config)) return RefuseConfig(in.config);
  int64_t checksum = -1;
  bool retryable = false;
  ErrorCode code =
      ReserveAndWrite(s, in.key, src, in.size, config, upsert, &checksum, &retryable);
  if (retryable) {
    // A replica's daemon could not be reached (dead, frozen, restarted): it is suspect
    // now, so the master is asked to place the replicas elsewhere, once.
    code = ReserveAndWrite(s, in.key, src, in.size, config, upsert, &checksum, &retryable);
  }
  // put never overwrites; the old value stays
  if (code == ErrorCode::OBJECT_ALREADY_EXISTS && !upsert) return ErrorCode::OK;
  return code != ErrorCode::OK ? code : FinishPut(s, in.key, upsert, checksum);
}

ErrorCode StoreService::OnBatchPut(ClientConnection* s, const uds::BatchPutArgs& in,
                                   uds::BatchPutReply* out) {
  const size_t n = in.entries.size();
  std::vector<BatchPutEntry> items(n);
  std::vector<int64_t>& results = out->values;
  results.assign(n, ToInt(ErrorCode::INVALID_PARAMS));
  for (size_t i = 0; i < n; ++i) {
    const uds::PutEntry& e = in.entries[i];
    items[i].key = e.key;
    items[i].size = e.size;
    items[i].src = s->PoolRange(e.pool_offset, e.size);
    items[i].group = e.group;
  }
  rpc::ReplicateConfig config;
  std::vector<size_t> acceptable;
  if (ConfigOf(s, in.config, &config)) {
    uds::WireConfig entry_config = in.config;  // to judge each entry's group id
    for (size_t i = 0; i < n; ++i) {
      const BatchPutEntry& e = items[i];
      entry_config.group = e.group;
      if (ValidKey(e.key) && ValidSize(e.size) && e.src != nullptr && ValidGroup(entry_config)) {
        acceptable.push_back(i);
      }
    }
  }
  std::vector<size_t> retry, ignored;
  if (!acceptable.empty()) BatchPutRound(s, items, acceptable, config, &results, &retry);
  // As for a single put: entries whose transfer failed go again, once, with the daemons
  // that failed now avoided.
  if (!retry.empty()) BatchPutRound(s, items, retry, config, &results, &ignored);
  return ErrorCode::OK;
}

// Each entry is a whole UPSERT of its own, in order: an upsert replaces a complete value
// (UpsertStart / UpsertEnd each), which the master's batch calls do not offer, and a batch
// naming one key twice must apply both in order.
ErrorCode StoreService::OnBatchUpsert(ClientConnection* s, const uds::BatchPutArgs& in,
                                      uds::BatchPutReply* out) {
  out->values.assign(in.entries.size(), ToInt(ErrorCode::INVALID_PARAMS));
  uds::PutArgs put{"", 0, 0, in.config};
  for (size_t i = 0; i < in.entries.size(); ++i) {
    const uds::PutEntry& e = in.entries[i];
    put.key = e.key;
    put.pool_offset = e.pool_offset;
    put.size = e.size;
    put.config.group = e.group;  // each entry's own group id, if the batch names them
    out->values[i] = ToInt(PutWhole(s, put, /*upsert=*/true));
    if (s->closed()) break;  // nobody will read the rest
  }
  return ErrorCode::OK;
}

// What a round's writes leave for its publish: the entries to end (with their checksums,
// under --checksum) and those to revoke, each with its index in items.
struct StoreService::PutRoundOutcome {
  std::vector<std::string> to_end, to_revoke;
  std::vector<size_t> end_index, revoke_index;
  std::vector<int64_t> checksums;
  void Revoke(const std::string& key, size_t i) {
    to_revoke.push_back(key);
    revoke_index.push_back(i);
  }
};

void StoreService::WriteStarted(const std::vector<BatchPutEntry>& items,
                                const std::vector<size_t>& which,
                                std::vector<std::string>* keys,
                                const std::vector<rpc::PutStartResult>& started,
                                const std::vector<size_t>& js, std::vector<int64_t>* results,
                                PutRoundOutcome* out) {
  std::vector<std::vector<ReplicaTarget>> targets(js.size());
  std::vector<ValueSlice> slices;
  std::vector<size_t> slice_key;  // j of each slice
  slices.reserve(js.size());
  slice_key.reserve(js.size());
  for (size_t k = 0; k < js.size(); ++k) {
    size_t j = js[k];
    size_t i = which[j];
    ErrorCode code = FromWire(started[j].code);
    // Already there: the old value stays.
    (*results)[i] = code == ErrorCode::OBJECT_ALREADY_EXISTS ? 0 : ToInt(code);
    if (code != ErrorCode::OK) continue;
    code = io_->ResolveAll(started[j].replicas, items[i].size, started[j].master_epoch,
                           &targets[k]);
    if (code != ErrorCode::OK) {
      (*results)[i] = ToInt(code);
      out->Revoke((*keys)[j], i);
      continue;
    }
    slices.push_back(ValueSlice{&targets[k], 0, items[i].src, items[i].size});
    slices.back().want_crc = checksum_;
    slice_key.push_back(j);
  }
  if (slices.empty()) return;
  io_->WriteAll(&slices, TransferDeadline());
  for (size_t k = 0; k < slices.size(); ++k) {
    size_t j = slice_key[k];
    if (slices[k].result != ErrorCode::OK) {
      (*results)[which[j]] = ToInt(slices[k].result);
      out->Revoke((*keys)[j], which[j]);
      continue;
    }
    out->to_end.push_back(std::move((*keys)[j]));  // (*keys)[j] is not read again
    out->end_index.push_back(which[j]);
    if (checksum_) out->checksums.push_back(ValueChecksum(slices[k]));
  }
}

void StoreService::BatchPutRound(ClientConnection* s, const std::vector<BatchPutEntry>& items,
                                 const std::vector<size_t>& which,
                                 const rpc::ReplicateConfig& asked,
                                 std::vector<int64_t>* results, std::vector<size_t>* retry) {
  rpc::ReplicateConfig config = asked;
  config.avoided_segments = io_->engine()->Suspects();
  std::vector<std::string> keys;
  std::vector<int64_t> sizes;
  keys.reserve(which.size());
  sizes.reserve(which.size());
  if (!asked.group_ids.empty()) config.group_ids.clear();  // the entries' own, in order
  for (size_t i : which) {
    keys.push_back(items[i].key);
    sizes.push_back(static_cast<int64_t>(items[i].size));
    if (!asked.group_ids.empty()) config.group_ids.push_back(items[i].group);
  }
  int64_t writer = membership_->daemon_id();
  PutRoundOutcome outcome;
  // Phases 1 and 2, pipelined: the entries are reserved in chunks, and each chunk is
  // written while the master reserves the next ones. Entries the master could not place
  // yet (-200) or that found us unregistered (-103) go through StartBatch's waits and
  // retries afterwards, together; the others keep what they reserved meanwhile.
  std::vector<rpc::PutStartResult> started(keys.size());
  std::vector<size_t> later;
  master_->BatchPutStartPipelined(
      writer, keys, sizes, config, kMasterChunk,
      [&](size_t first, ErrorCode rc, std::vector<rpc::PutStartResult>* chunk,
          std::chrono::steady_clock::time_point) {
        const size_t count = std::min(kMasterChunk, keys.size() - first);
        std::vector<size_t> now;
        for (size_t j = first; j < first + count; ++j) {
          if (rc != ErrorCode::OK) {
            (*results)[which[j]] = ToInt(rc);
            continue;
          }
          started[j] = std::move((*chunk)[j - first]);
          ErrorCode code = FromWire(started[j].code);
          bool wait =
              code == ErrorCode::NO_AVAILABLE_HANDLE || code == ErrorCode::CLIENT_NOT_FOUND;
          (wait ? later : now).push_back(j);
        }
        WriteStarted(items, which, &keys, started, now, results, &outcome);
      });
  if (!later.empty()) {
    std::vector<std::string> later_keys;
    std::vector<int64_t> later_sizes;
    PickEntries(keys, sizes, later, &later_keys, &later_sizes);
    std::vector<rpc::PutStartResult> restarted;
    ErrorCode rc =
        StartBatch(s, writer, later_keys, later_sizes, PickGroups(config, later), &restarted);
    if (rc != ErrorCode::OK) {
      for (size_t j : later) (*results)[which[j]] = ToInt(rc);
    } else {
      for (size_t k = 0; k < later.size(); ++k) started[later[k]] = std::move(restarted[k]);
      WriteStarted(items, which, &keys, started, later, results, &outcome);
    }
  }
  // Phase 3: publish the copies, unless the client is gone; revoke the rest.
  std::vector<ErrorCode> codes;
  if (!outcome.to_end.empty() && !s->closed()) {
    ErrorCode rc = master_->BatchPutEnd(writer, outcome.to_end, &codes, outcome.checksums);
    for (const std::string& key : outcome.to_end) cache_->Invalidate(key);  // as in FinishPut
    for (size_t k = 0; k < outcome.to_end.size(); ++k) {
      ErrorCode code = rc != ErrorCode::OK ? rc : codes[k];
      (*results)[outcome.end_index[k]] = ToInt(code);
      if (code != ErrorCode::OK) outcome.Revoke(outcome.to_end[k], outcome.end_index[k]);
    }
  } else {
    for (size_t k = 0; k < outcome.to_end.size(); ++k) {
      outcome.Revoke(outcome.to_end[k], outcome.end_index[k]);
    }
  }
  if (outcome.to_revoke.empty()) return;
  ErrorCode rc = master_->BatchPutRevoke(writer, outcome.to_revoke, &codes);
  for (size_t k = 0; k < outcome.to_revoke.size(); ++k) {
    // Retried only once the reservation is surely gone, and only after a transfer failed.
    size_t i = outcome.revoke_index[k];
    if (rc == ErrorCode::OK && codes[k] == ErrorCode::OK &&
        (*results)[i] == ToInt(ErrorCode::TRANSFER_FAIL) && !s->closed()) {
      retry->push_back(i);
    }
  }
}

ErrorCode StoreService::OnPutBegin(ClientConnection* s, const uds::PutBeginArgs& in,
                                   uds::PutBeginReply* out) {
  rpc::ReplicateConfig config;
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;  // Run names the key's rule
  if (!ValidSize(in.size)) return RefuseSize(in.size);
  if (!ConfigOf(s, in.config, &config)) return RefuseConfig(in.config);
  auto put = std::make_shared<StagedPut>();
  put->key = in.key;
  put->size = in.size;
  put->upsert = in.upsert.value;
  put->checksum = checksum_;
  rpc::PutStartResult started;
  // -705 goes back as is
  ErrorCode code = StartPut(s, in.key, in.size, config, put->upsert, &started);
  if (code != ErrorCode::OK) return code;
  code = io_->ResolveAll(started.replicas, in.size, started.master_epoch, &put->targets);
  uint64_t put_id = code == ErrorCode::OK ? s->AddPut(put) : 0;
  if (put_id == 0) {
    RevokePut(in.key, put->upsert);
    if (code != ErrorCode::OK) return code;
    return Refuse(ErrorCode::INVALID_PARAMS,
                  "more than " + std::to_string(ClientConnection::kMaxStaged) +
                      " staged puts open on this connection");
  }
  out->put_id = put_id;
  return ErrorCode::OK;
}

ErrorCode StoreService::OnPutChunk(ClientConnection* s, const uds::ChunkArgs& in, uds::NoReply*) {
  std::shared_ptr<StagedPut> put = s->FindPut(in.staged_id);
  char* src = s->PoolRange(in.pool_offset, in.length);
  if (put == nullptr) return RefuseStagedId("put", in.staged_id);
  if (src == nullptr) return RefusePoolRange(s, in.pool_offset, in.length);
  if (!ChunkInside(in, put->size)) {
    return Refuse(ErrorCode::INVALID_PARAMS, "chunk runs past the value's " +
                                                 std::to_string(put->size) + " bytes");
  }
  std::shared_lock<std::shared_mutex> lock(put->mu);
  if (put->finished) return RefuseStagedId("put", in.staged_id);
  std::vector<ValueSlice> slice{ValueSlice{&put->targets, in.value_offset, src, in.length}};
  slice[0].want_crc = put->checksum;
  io_->WriteAll(&slice, TransferDeadline());
  ErrorCode code = slice[0].result;
  if (code == ErrorCode::OK && put->checksum) {
    // The transport's CRC of the chunk when a remote replica had one computed on the way.
    if (slice[0].crc >= 0) {
      put->crc.AddCrc(in.value_offset, in.length, static_cast<uint32_t>(slice[0].crc));
    } else {
      put->crc.Add(in.value_offset, src, in.length);
    }
  }
  // A chunk that failed is repeated by nobody: the client aborts, or commits and gets
  // -800 back, so the put is never published half written.
  if (code != ErrorCode::OK) put->failed = true;
  return code;
}

ErrorCode StoreService::OnPutCommit(ClientConnection* s, const uds::StagedIdArgs& in,
                                    uds::NoReply*) {
  return EndStagedPut(s, in.staged_id, true);
}

ErrorCode StoreService::OnPutAbort(ClientConnection* s, const uds::StagedIdArgs& in,
                                   uds::NoReply*) {
  return EndStagedPut(s, in.staged_id, false);
}

ErrorCode StoreService::EndStagedPut(ClientConnection* s, uint64_t put_id, bool commit) {
  std::shared_ptr<StagedPut> put = s->TakePut(put_id);
  if (put == nullptr) return RefuseStagedId("put", put_id);
  std::unique_lock<std::shared_mutex> lock(put->mu);  // waits for running chunks
  put->finished = true;
  if (!commit || put->failed) {
    ErrorCode code = RevokePut(put->key, put->upsert);
    return put->failed ? ErrorCode::TRANSFER_FAIL : code;
  }
  int64_t checksum = -1;
  uint32_t crc = 0;
  if (put->checksum && put->crc.Total(put->size, &crc)) checksum = crc;
  return FinishPut(s, put->key, put->upsert, checksum);
}

}  // namespace mooncake
