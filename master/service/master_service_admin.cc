// Admin reads of MasterService: a page of keys, one key described without a lease, and the
// segments with their state, for the master's admin HTTP (master/server/master_admin.h). Nothing
// here changes an object; the walks hold a shard's lock a slice at a time, as the other
// walks over every object do (master_service.cc, RemoveMatching).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <re2/re2.h>

#include "common/base/tenant_key.h"
#include "master/service/master_service.h"

namespace mooncake {

namespace {

// A ListKeys cursor: "<shard>.<slot>.<layout>", where the page stopped and the shard
// table's layout then (a resize since restarts that shard).
std::string FormatCursor(size_t shard, size_t slot, uint64_t layout) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%zu.%zu.%" PRIu64, shard, slot, layout);
  return buf;
}

// Digits only, no sign, no blanks, at most 19 of them (no overflow).
bool ParseNumber(const std::string& text, size_t* pos, char stop, uint64_t* out) {
  size_t start = *pos;
  uint64_t value = 0;
  while (*pos < text.size() && text[*pos] >= '0' && text[*pos] <= '9') {
    if (*pos - start >= 19) return false;
    value = value * 10 + static_cast<uint64_t>(text[*pos] - '0');
    ++*pos;
  }
  if (*pos == start) return false;
  if (stop != '\0') {
    if (*pos >= text.size() || text[*pos] != stop) return false;
    ++*pos;
  } else if (*pos != text.size()) {
    return false;
  }
  *out = value;
  return true;
}

bool ParseCursor(const std::string& text, size_t shard_count, size_t* shard, size_t* slot,
                 uint64_t* layout) {
  size_t pos = 0;
  uint64_t s = 0, i = 0;
  if (!ParseNumber(text, &pos, '.', &s) || !ParseNumber(text, &pos, '.', &i) ||
      !ParseNumber(text, &pos, '\0', layout) || s >= shard_count) {
    return false;
  }
  *shard = static_cast<size_t>(s);
  *slot = static_cast<size_t>(i);
  return true;
}

}  // namespace

std::unique_ptr<RE2> MasterService::CompileKeyPattern(const std::string& pattern,
                                                      std::string* error) {
  // Only the pattern's first bytes go into the message: it may be long, and is anyone's input.
  const int shown = static_cast<int>(std::min<size_t>(pattern.size(), 64));
  const char* more = pattern.size() > static_cast<size_t>(shown) ? "..." : "";
  if (pattern.size() > MOONCAKE_STORE_MAX_PATTERN_LEN) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "a pattern of %zu bytes, more than %d ('%.*s%s')",
                  pattern.size(), MOONCAKE_STORE_MAX_PATTERN_LEN, shown, pattern.data(), more);
    *error = buf;
    return nullptr;
  }
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingLatin1);  // keys are bytes, as std::regex saw them
  options.set_max_mem(kRegexMaxMem);  // a program that needs more fails to compile
  options.set_never_capture(true);
  options.set_log_errors(false);  // the caller says it once
  auto re = std::make_unique<RE2>(pattern, options);
  if (!re->ok()) {
    *error = re->error() + " (pattern '" + pattern.substr(0, static_cast<size_t>(shown)) +
             more + "')";
    return nullptr;
  }
  return re;
}

const char* MasterService::SegmentStatus(const Segment& segment) {
  if (!segment.attached()) return "detached";
  return segment.draining() ? "draining" : "attached";
}

ErrorCode MasterService::ListKeys(const std::string& tenant, const std::string& cursor,
                                  size_t limit, const std::string& pattern, KeyPage* out,
                                  std::string* error) {
  out->keys.clear();
  out->next_cursor.clear();
  if (!tenant_key::ValidTenantOrDefault(tenant)) {
    *error = "malformed tenant id";
    return ErrorCode::INVALID_PARAMS;
  }
  if (limit == 0) {
    *error = "limit must be positive";
    return ErrorCode::INVALID_PARAMS;
  }
  std::unique_ptr<RE2> re;
  if (!pattern.empty()) {
    re = CompileKeyPattern(pattern, error);
    if (!re) return ErrorCode::INVALID_PARAMS;
  }
  size_t shard_index = 0, slot = 0;
  uint64_t layout = 0;
  if (!cursor.empty() && !ParseCursor(cursor, kShardCount, &shard_index, &slot, &layout)) {
    *error = "malformed cursor";
    return ErrorCode::INVALID_PARAMS;
  }

  // A slice's candidates, each with the slot right after it (where a page ending on it
  // resumes), copied out under the lock and matched without it.
  struct Candidate {
    size_t next_slot;
    std::string key;
  };
  std::vector<Candidate> found;
  size_t scanned = 0;
  for (; shard_index < kShardCount; ++shard_index, slot = 0) {
    Shard& shard = objects_.shard(shard_index);
    for (bool done = false; !done;) {
      found.clear();
      {
        StateGate::Shared gate(gate_);
        absl::MutexLock lock(&shard.mu);
        if (slot > 0 && shard.objects.layout() != layout) slot = 0;  // resized: start over
        layout = shard.objects.layout();
        const size_t slice_end = slot + kScanSlice;
        while (!done && slot < slice_end) {
          const size_t here = slot;
          done = shard.objects.Walk(&slot, 1, [&](std::string_view key, ObjectMetadata& meta) {
            if (meta.complete && tenant_key::TenantOf(key) == tenant) {
              found.push_back({here + 1, std::string(tenant_key::UserKeyOf(key))});
            }
            return false;
          });
          ++scanned;
        }
      }
      for (Candidate& c : found) {
        if (re && !RE2::PartialMatch(c.key, *re)) continue;
        out->keys.push_back(std::move(c.key));
        if (out->keys.size() == limit) {
          out->next_cursor = FormatCursor(shard_index, c.next_slot, layout);
          return ErrorCode::OK;
        }
      }
      if (!done && scanned >= kListScanSlots) {
        out->next_cursor = FormatCursor(shard_index, slot, layout);
        return ErrorCode::OK;
      }
    }
    if (scanned >= kListScanSlots && shard_index + 1 < kShardCount) {
      out->next_cursor = FormatCursor(shard_index + 1, 0, 0);
      return ErrorCode::OK;
    }
  }
  return ErrorCode::OK;
}

ErrorCode MasterService::DescribeKey(const std::string& key, KeyDescription* out) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key)) return ErrorCode::INVALID_PARAMS;
  LockedKey locked(objects_, key);
  if (locked.object == nullptr) return ErrorCode::OBJECT_NOT_FOUND;
  const ObjectMetadata& meta = *locked.object;
  const int64_t now = Now();
  out->size = meta.size;
  out->complete = meta.complete;
  out->hard_pinned = meta.hard_pin;
  out->soft_pinned = meta.soft_pinned(now);
  out->lease_remaining_ms = meta.leased(now) ? meta.time_ms - now : 0;
  out->soft_pin_remaining_ms = out->soft_pinned ? meta.soft_pin_ms - now : 0;
  out->checksum = meta.checksum_or_none();
  out->group = GroupForLog(key, meta);
  out->replicas.clear();
  auto describe = [&](const Replica& r) {
    std::shared_ptr<Segment> segment = segments_.Get(r.segment);
    if (!segment) return;  // unmounted a moment ago; its replica is being dropped
    ReplicaView v;
    v.replica_id = r.id();
    v.kind = r.kind;
    v.status = r.status;
    v.segment_id = segment->info().segment_id;
    v.segment_name = segment->info().name;
    v.segment_status = SegmentStatus(*segment);
    v.daemon_id = segment->info().daemon_id;
    v.offset = r.offset;
    v.base = static_cast<uint64_t>(segment->info().base);
    if (!segment->info().endpoints.empty()) {
      v.protocol = segment->info().endpoints[0].protocol;
      v.endpoint = segment->info().endpoints[0].address;
    }
    out->replicas.push_back(std::move(v));
  };
  // Memory replicas first, then disk ones, as readers get them.
  for (size_t i = 0; i < meta.replicas.size(); ++i) {
    if (meta.replicas[i].memory()) describe(meta.replicas[i]);
  }
  for (size_t i = 0; i < meta.replicas.size(); ++i) {
    if (!meta.replicas[i].memory()) describe(meta.replicas[i]);
  }
  return ErrorCode::OK;
}

std::vector<MasterService::SegmentView> MasterService::SegmentDetails() const {
  StateGate::Shared gate(gate_);
  std::vector<SegmentView> out;
  for (const std::shared_ptr<Segment>& segment : segments_.All()) {
    SegmentView v;
    v.info = segment->info();
    v.info.used = static_cast<int64_t>(segment->used());
    v.info.incarnation = 0;
    v.status = SegmentStatus(*segment);
    v.capacity = segment->capacity();
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace mooncake
