// PUT, UPSERT, BATCH_PUT and the staged put (PUT_BEGIN / CHUNK / COMMIT / ABORT).
//
// The bytes go from the application's pool to every replica the master reserved: a
// memcpy into this daemon's segments, a transfer-engine WRITE into other daemons', all in
// parallel. The object is published (PutEnd) only when every replica was written;
// otherwise it is revoked, so it is visible with all its replicas or not at all.
#include "common/crc32c.h"
#include "common/logging.h"
#include "daemon/store_service.h"

namespace mooncake {

using uds::ArgReader;
using namespace store_detail;

namespace {

constexpr int32_t kExists = static_cast<int32_t>(ErrorCode::OBJECT_ALREADY_EXISTS);
constexpr int32_t kUnknownWriter = static_cast<int32_t>(ErrorCode::CLIENT_NOT_FOUND);
constexpr int32_t kTransferFail = static_cast<int32_t>(ErrorCode::TRANSFER_FAIL);

}  // namespace

int32_t StoreService::StartPut(const std::string& key, uint64_t size,
                               const rpc::ReplicateConfig& asked, bool upsert,
                               rpc::PutStartResult* out) {
  rpc::ReplicateConfig config = asked;
  config.avoided_segments = io_->engine()->Suspects();
  for (int attempt = 0;; ++attempt) {
    int64_t writer = membership_->daemon_id();
    int32_t code = upsert ? master_->UpsertStart(writer, key, static_cast<int64_t>(size), config, out)
                          : master_->PutStart(writer, key, static_cast<int64_t>(size), config, out);
    // -103: the master restarted since our last heartbeat. Register now rather than fail
    // every put until the heartbeat notices.
    if (code != kUnknownWriter || attempt > 0 || membership_->Reregister() != 0) return code;
  }
}

int32_t StoreService::EndPut(const std::string& key, bool upsert, int64_t checksum) {
  int64_t writer = membership_->daemon_id();
  return upsert ? master_->UpsertEnd(writer, key, checksum)
                : master_->PutEnd(writer, key, checksum);
}

int32_t StoreService::RevokePut(const std::string& key, bool upsert) {
  int64_t writer = membership_->daemon_id();
  return upsert ? master_->UpsertRevoke(writer, key) : master_->PutRevoke(writer, key);
}

int32_t StoreService::FinishPut(ClientSession* s, const std::string& key, bool upsert,
                                int64_t checksum) {
  if (s->closed()) {
    // The client is gone and will never learn the outcome: publish nothing it left.
    RevokePut(key, upsert);
    return ToInt(ErrorCode::TRANSFER_FAIL);
  }
  int32_t code = EndPut(key, upsert, checksum);
  // If the publish failed on the wire it may or may not have happened; a revoke of a
  // published object is refused (-1010), so trying is always safe.
  if (code != 0) RevokePut(key, upsert);
  // Before the writer is answered, so that its next read sees the new value. A plain put
  // matters too: the key may have been removed through another daemon while we still
  // remember the old value.
  cache_->Invalidate(key);
  return code;
}

int32_t StoreService::ReserveAndWrite(const std::string& key, const char* src, uint64_t size,
                                      const rpc::ReplicateConfig& config, bool upsert,
                                      int64_t* checksum, bool* retryable) {
  *retryable = false;
  rpc::PutStartResult started;
  int32_t code = StartPut(key, size, config, upsert, &started);
  if (code != 0) return code;
  std::vector<ReplicaTarget> targets;
  code = io_->ResolveAll(started.replicas, size, &targets);
  if (code == 0) {
    std::vector<ValueSlice> slice{{&targets, 0, const_cast<char*>(src), size}};
    slice[0].want_crc = checksum_;
    io_->WriteAll(&slice, TransferDeadline());
    code = slice[0].result;
    *checksum = ValueChecksum(slice[0]);
  }
  if (code != 0) {
    // Retried only once the reservation is surely gone: else the retry would meet it.
    *retryable = RevokePut(key, upsert) == 0 && code == kTransferFail;
  }
  return code;
}

bool StoreService::OnPut(ClientSession* s, uint64_t id, ArgReader* a, bool upsert) {
  std::string key = a->Str();
  uint64_t offset = a->U64();
  uint64_t size = a->U64();
  uds::WireConfig wire = a->Config();
  if (!Done(*a)) return false;
  rpc::ReplicateConfig config;
  const char* src = s->PoolRange(offset, size);
  if (!ValidKey(key) || !ValidSize(size) || src == nullptr || !ToRpcConfig(wire, &config)) {
    Reply(s, id, kInvalid);
    return true;
  }
  int64_t checksum = -1;
  bool retryable = false;
  int32_t code = ReserveAndWrite(key, src, size, config, upsert, &checksum, &retryable);
  if (retryable) {
    // A replica's daemon could not be reached (dead, frozen, restarted): it is suspect
    // now, so the master is asked to place the replicas elsewhere, once.
    code = ReserveAndWrite(key, src, size, config, upsert, &checksum, &retryable);
  }
  if (code == kExists && !upsert) code = kOk;  // put never overwrites; the old value stays
  Reply(s, id, code != 0 ? code : FinishPut(s, key, upsert, checksum));
  return true;
}

bool StoreService::OnBatchPut(ClientSession* s, uint64_t id, ArgReader* a) {
  ArgReader entries = a->Array();
  uds::WireConfig wire = a->Config();
  if (!Done(*a) || entries.size() > uds::kMaxBatch) return false;
  const size_t n = entries.size();
  std::vector<BatchPutEntry> items(n);
  std::vector<int64_t> results(n, kInvalid);
  for (size_t i = 0; i < n; ++i) {
    ArgReader e = entries.Array();
    items[i].key = e.Str();
    uint64_t offset = e.U64();
    items[i].size = e.U64();
    if (!Done(e)) return false;
    items[i].src = s->PoolRange(offset, items[i].size);
  }
  rpc::ReplicateConfig config;
  std::vector<size_t> acceptable;
  if (ToRpcConfig(wire, &config)) {
    for (size_t i = 0; i < n; ++i) {
      const BatchPutEntry& e = items[i];
      if (ValidKey(e.key) && ValidSize(e.size) && e.src != nullptr) acceptable.push_back(i);
    }
  }
  std::vector<size_t> retry, ignored;
  if (!acceptable.empty()) BatchPutRound(s, items, acceptable, config, &results, &retry);
  // As for a single put: entries whose transfer failed go again, once, with the daemons
  // that failed now avoided.
  if (!retry.empty()) BatchPutRound(s, items, retry, config, &results, &ignored);
  ReplyInts(s, id, kOk, results);
  return true;
}

void StoreService::BatchPutRound(ClientSession* s, const std::vector<BatchPutEntry>& items,
                                 const std::vector<size_t>& which,
                                 const rpc::ReplicateConfig& asked,
                                 std::vector<int64_t>* results, std::vector<size_t>* retry) {
  // Phase 1: one BatchPutStart for every entry.
  rpc::ReplicateConfig config = asked;
  config.avoided_segments = io_->engine()->Suspects();
  std::vector<std::string> keys;
  std::vector<int64_t> sizes;
  for (size_t i : which) {
    keys.push_back(items[i].key);
    sizes.push_back(static_cast<int64_t>(items[i].size));
  }
  std::vector<rpc::PutStartResult> started;
  int64_t writer = membership_->daemon_id();
  int32_t rc = master_->BatchPutStart(writer, keys, sizes, config, &started);
  if (rc == 0 && !started.empty() && started[0].code == kUnknownWriter &&
      membership_->Reregister() == 0) {
    rc = master_->BatchPutStart(writer, keys, sizes, config, &started);
  }
  if (rc != 0) {
    for (size_t i : which) (*results)[i] = rc;
    return;
  }

  // Phase 2: write what was reserved, every entry's remote replicas in parallel.
  std::vector<std::string> to_end, to_revoke;
  std::vector<size_t> end_index, revoke_index;
  std::vector<int64_t> checksums;
  std::vector<std::vector<ReplicaTarget>> targets(keys.size());
  std::vector<ValueSlice> slices;
  std::vector<size_t> slice_key;  // j of each slice
  auto revoke = [&](size_t j) {
    to_revoke.push_back(keys[j]);
    revoke_index.push_back(which[j]);
  };
  for (size_t j = 0; j < keys.size(); ++j) {
    size_t i = which[j];
    int32_t code = started[j].code;
    (*results)[i] = code == kExists ? kOk : code;  // already there: the old value stays
    if (code != 0) continue;
    code = io_->ResolveAll(started[j].replicas, items[i].size, &targets[j]);
    if (code != 0) {
      (*results)[i] = code;
      revoke(j);
      continue;
    }
    slices.push_back({&targets[j], 0, const_cast<char*>(items[i].src), items[i].size});
    slices.back().want_crc = checksum_;
    slice_key.push_back(j);
  }
  io_->WriteAll(&slices, TransferDeadline());
  for (size_t k = 0; k < slices.size(); ++k) {
    size_t j = slice_key[k];
    if (slices[k].result != 0) {
      (*results)[which[j]] = slices[k].result;
      revoke(j);
      continue;
    }
    to_end.push_back(keys[j]);
    end_index.push_back(which[j]);
    if (checksum_) checksums.push_back(ValueChecksum(slices[k]));
  }

  // Phase 3: publish the copies, unless the client is gone; revoke the rest.
  std::vector<int32_t> codes;
  if (!to_end.empty() && !s->closed()) {
    rc = master_->BatchPutEnd(writer, to_end, &codes, checksums);
    for (const std::string& key : to_end) cache_->Invalidate(key);  // as in FinishPut
    for (size_t k = 0; k < to_end.size(); ++k) {
      int32_t code = rc != 0 ? rc : codes[k];
      (*results)[end_index[k]] = code;
      if (code != 0) {
        to_revoke.push_back(to_end[k]);
        revoke_index.push_back(end_index[k]);
      }
    }
  } else {
    to_revoke.insert(to_revoke.end(), to_end.begin(), to_end.end());
    revoke_index.insert(revoke_index.end(), end_index.begin(), end_index.end());
  }
  if (to_revoke.empty()) return;
  rc = master_->BatchPutRevoke(writer, to_revoke, &codes);
  for (size_t k = 0; k < to_revoke.size(); ++k) {
    // Retried only once the reservation is surely gone, and only after a transfer failed.
    size_t i = revoke_index[k];
    if (rc == 0 && codes[k] == 0 && (*results)[i] == kTransferFail && !s->closed()) {
      retry->push_back(i);
    }
  }
}

bool StoreService::OnPutBegin(ClientSession* s, uint64_t id, ArgReader* a) {
  std::string key = a->Str();
  uint64_t size = a->U64();
  uds::WireConfig wire = a->Config();
  int upsert = ReadFlag(a);
  if (!Done(*a) || upsert < 0) return false;
  rpc::ReplicateConfig config;
  if (!ValidKey(key) || !ValidSize(size) || !ToRpcConfig(wire, &config)) {
    Reply(s, id, kInvalid);
    return true;
  }
  auto put = std::make_shared<StagedPut>();
  put->key = key;
  put->size = size;
  put->upsert = upsert == 1;
  put->checksum = checksum_;
  rpc::PutStartResult started;
  int32_t code = StartPut(key, size, config, put->upsert, &started);  // -705 goes back as is
  if (code != 0) {
    Reply(s, id, code);
    return true;
  }
  code = io_->ResolveAll(started.replicas, size, &put->targets);
  uint64_t put_id = code == 0 ? s->AddPut(put) : 0;
  if (put_id == 0) {
    RevokePut(key, put->upsert);
    Reply(s, id, code != 0 ? code : kInvalid);  // kInvalid: too many staged puts open
    return true;
  }
  ReplyInts(s, id, kOk, {static_cast<int64_t>(put_id)});
  return true;
}

bool StoreService::OnPutChunk(ClientSession* s, uint64_t id, ArgReader* a) {
  uint64_t put_id = a->U64();
  uint64_t value_offset = a->U64();
  uint64_t pool_offset = a->U64();
  uint64_t length = a->U64();
  if (!Done(*a)) return false;
  std::shared_ptr<StagedPut> put = s->FindPut(put_id);
  const char* src = s->PoolRange(pool_offset, length);
  int32_t code = kInvalid;
  if (put != nullptr && src != nullptr && length <= put->size &&
      value_offset <= put->size - length) {
    std::shared_lock<std::shared_mutex> lock(put->mu);
    if (!put->finished) {
      std::vector<ValueSlice> slice{{&put->targets, value_offset, const_cast<char*>(src), length}};
      slice[0].want_crc = put->checksum;
      io_->WriteAll(&slice, TransferDeadline());
      code = slice[0].result;
      if (code == 0 && put->checksum) {
        // The transport's CRC of the chunk when a remote replica had one computed on the way.
        if (slice[0].crc >= 0) {
          put->crc.AddCrc(value_offset, length, static_cast<uint32_t>(slice[0].crc));
        } else {
          put->crc.Add(value_offset, src, length);
        }
      }
      // A chunk that failed is repeated by nobody: the client aborts, or commits and gets
      // -800 back, so the put is never published half written.
      if (code != 0) put->failed = true;
    }
  }
  Reply(s, id, code);
  return true;
}

bool StoreService::OnPutEnd(ClientSession* s, uint64_t id, ArgReader* a, bool commit) {
  uint64_t put_id = a->U64();
  if (!Done(*a)) return false;
  std::shared_ptr<StagedPut> put = s->TakePut(put_id);
  if (put == nullptr) {
    Reply(s, id, kInvalid);
    return true;
  }
  std::unique_lock<std::shared_mutex> lock(put->mu);  // waits for running chunks
  put->finished = true;
  int32_t code = 0;
  if (!commit || put->failed) {
    code = RevokePut(put->key, put->upsert);
    if (put->failed) code = ToInt(ErrorCode::TRANSFER_FAIL);
  } else {
    int64_t checksum = -1;
    uint32_t crc = 0;
    if (put->checksum && put->crc.Total(put->size, &crc)) checksum = crc;
    code = FinishPut(s, put->key, put->upsert, checksum);
  }
  Reply(s, id, code);
  return true;
}

}  // namespace mooncake
