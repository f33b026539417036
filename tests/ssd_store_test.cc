// The SSD tier's storage engine (daemon/ssd_store/ssd_store.h) on its own, in directories under
// /var/tmp (a disk-backed filesystem: O_DIRECT is exercised) and on a small tmpfs:
//  - round trips of 1 B .. 4 MiB + 1, whole and partial ranges, aligned and unaligned dest;
//  - many objects across many buckets;
//  - restarts: a clean close keeps everything (relaxed, strict), the state a kill -9 leaves
//    keeps every object after the relaxed bound and in strict mode at once, disabled keeps
//    nothing (and leaves IDENTITY), the bucket ids continue past the highest found;
//  - damage: a torn or corrupt .meta record, a truncated bucket file, a flipped byte;
//  - eviction: fifo evicts the oldest bucket, lru the least recently read, DropFn refusing
//    deletes nothing and fails the write, reads during evictions never see wrong bytes;
//  - ENOSPC on a 4 MiB tmpfs (needs root to mount it; skipped otherwise);
//  - the directory lock, the group commit's one sync per batch.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/base/logging.h"
#include "daemon/ssd_store/ssd_store.h"
#include "tests/cmocka_cpp.h"

using mooncake::ErrorCode;
using mooncake::SsdEvictionPolicy;
using mooncake::SsdObject;
using mooncake::SsdOptions;
using mooncake::SsdPersistMode;
using mooncake::SsdStats;
using mooncake::SsdStore;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string MakeTempDir() {
  char tmpl[] = "/var/tmp/ssd-store-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) std::abort();
  return tmpl;
}

// Deterministic bytes of object (seed, size).
std::string Value(uint64_t seed, uint64_t size) {
  std::string v(size, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<char>(x);
  }
  return v;
}

std::string Key(int i) { return "key-" + std::to_string(i); }

SsdOptions Options(const std::string& dir, SsdPersistMode mode = SsdPersistMode::kRelaxed,
                   uint64_t bucket = 4 * kMiB, uint64_t capacity = 256 * kMiB) {
  SsdOptions o;
  o.path = dir;
  o.bucket_size = bucket;
  o.capacity = capacity;
  o.high_watermark = 1.0;
  o.persist_mode = mode;
  return o;
}

// A DropFn that records its calls and answers as told.
struct DropLog {
  std::mutex mu;
  std::vector<std::vector<std::string>> calls;
  std::atomic<bool> answer{true};
  SsdStore::DropFn Fn() {
    return [this](const std::vector<std::string>& keys) {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(keys);
      return answer.load();
    };
  }
  std::set<std::string> AllKeys() {
    std::lock_guard<std::mutex> lock(mu);
    std::set<std::string> all;
    for (const auto& c : calls) all.insert(c.begin(), c.end());
    return all;
  }
};

std::unique_ptr<SsdStore> OpenOk(const SsdOptions& o, DropLog* drops) {
  std::unique_ptr<SsdStore> store;
  std::string error;
  const ErrorCode rc = SsdStore::Open(o, drops->Fn(), &store, &error);
  if (rc != ErrorCode::OK) std::fprintf(stderr, "Open: %s\n", error.c_str());
  assert_int_equal(static_cast<int>(rc), 0);
  return store;
}

// Writes objects (key i, Value(i, size)) in one batch; returns the results.
std::vector<ErrorCode> Put(SsdStore* store, const std::vector<int>& ids, uint64_t size) {
  std::vector<std::string> values;
  for (int i : ids) values.push_back(Value(i, size));
  std::vector<SsdStore::WriteItem> items(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    items[k].object = SsdObject{Key(ids[k]), size, static_cast<int64_t>(ids[k])};
    items[k].data = values[k].data();
  }
  store->Write(&items);
  std::vector<ErrorCode> out;
  for (const auto& item : items) out.push_back(item.result);
  return out;
}

void PutOk(SsdStore* store, const std::vector<int>& ids, uint64_t size) {
  for (ErrorCode rc : Put(store, ids, size)) assert_int_equal(static_cast<int>(rc), 0);
}

// Reads the whole object i and compares: OK, or the code Read answered.
ErrorCode Check(SsdStore* store, int i, uint64_t size) {
  std::string got(size + 1, '\0');
  const ErrorCode rc = store->Read(Key(i), 0, got.data() + 1, size);  // unaligned on purpose
  if (rc != ErrorCode::OK) return rc;
  if (std::memcmp(got.data() + 1, Value(i, size).data(), size) != 0) {
    std::fprintf(stderr, "wrong bytes for %s\n", Key(i).c_str());
    return ErrorCode::INTERNAL_ERROR;
  }
  return ErrorCode::OK;
}

void CheckOk(SsdStore* store, int i, uint64_t size) {
  assert_int_equal(static_cast<int>(Check(store, i, size)), 0);
}

std::vector<std::string> FilesEnding(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& ent : fs::directory_iterator(dir)) {
    const std::string name = ent.path().filename().string();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(ent.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The files as a kill -9 of the daemon would leave them now: a copy of the directory
// (written, not necessarily synced, bytes included), without the LOCK it held.
std::string CrashCopy(const std::string& dir) {
  const std::string copy = MakeTempDir();
  for (const auto& ent : fs::directory_iterator(dir)) {
    if (ent.path().filename() == "LOCK") continue;
    fs::copy_file(ent.path(), copy / ent.path().filename(), fs::copy_options::overwrite_existing);
  }
  return copy;
}

uint64_t FileSize(const std::string& path) { return fs::file_size(path); }

void test_round_trip(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = OpenOk(Options(dir), &drops);
  const std::vector<uint64_t> sizes = {1, 100, 4095, 4096, 4097, 256 * 1024 - 1, 256 * 1024,
                                       256 * 1024 + 1, kMiB, 3 * kMiB + 17, 4 * kMiB,
                                       4 * kMiB + 1};
  for (size_t i = 0; i < sizes.size(); ++i) PutOk(store.get(), {static_cast<int>(i)}, sizes[i]);
  char* aligned = static_cast<char*>(aligned_alloc(4096, 5 * kMiB));
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint64_t size = sizes[i];
    const std::string want = Value(i, size);
    CheckOk(store.get(), static_cast<int>(i), size);  // unaligned dest
    assert_int_equal(static_cast<int>(store->Read(Key(i), 0, aligned, size)), 0);
    assert_memory_equal(aligned, want.data(), size);
    // Ranges: the first byte, the last, one across a check block's edge, the middle.
    const uint64_t edge = std::min<uint64_t>(256 * 1024 - 3, size - 1);
    const std::pair<uint64_t, uint64_t> ranges[] = {
        {0, 1}, {size - 1, 1}, {edge, std::min<uint64_t>(7, size - edge)}, {size / 3, size / 3}};
    for (const auto& [off, len] : ranges) {
      std::string got(len, '\0');
      assert_int_equal(static_cast<int>(store->Read(Key(i), off, got.data(), len)), 0);
      assert_memory_equal(got.data(), want.data() + off, len);
    }
    SsdObject found;
    assert_true(store->Find(Key(i), &found));
    assert_int_equal(found.size, size);
    assert_int_equal(found.checksum, static_cast<int64_t>(i));
    // Past the end of the value.
    assert_int_equal(static_cast<int>(store->Read(Key(i), size, aligned, 1)),
                     static_cast<int>(ErrorCode::INVALID_PARAMS));
  }
  free(aligned);
  char byte;
  assert_int_equal(static_cast<int>(store->Read("no-such-key", 0, &byte, 1)),
                   static_cast<int>(ErrorCode::OBJECT_NOT_FOUND));
  // A second write of a key replaces the first.
  PutOk(store.get(), {0}, 5000);
  SsdObject found;
  assert_true(store->Find(Key(0), &found));
  assert_int_equal(found.size, 5000);
  CheckOk(store.get(), 0, 5000);
  const SsdStats stats = store->Stats();
  assert_int_equal(stats.objects, sizes.size());
  assert_true(stats.direct_io);  // /var/tmp is disk-backed
  assert_int_equal(store->List().size(), sizes.size());
  // Bad items are refused alone.
  std::vector<SsdStore::WriteItem> bad(2);
  bad[0].object = SsdObject{"", 1, -1};
  bad[0].data = "x";
  bad[1].object = SsdObject{"k", 10, -1};
  bad[1].data = nullptr;
  store->Write(&bad);
  assert_int_equal(static_cast<int>(bad[0].result), static_cast<int>(ErrorCode::INVALID_PARAMS));
  assert_int_equal(static_cast<int>(bad[1].result), static_cast<int>(ErrorCode::INVALID_PARAMS));
  store.reset();
  fs::remove_all(dir);
}

void test_many_objects_across_buckets(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = OpenOk(Options(dir, SsdPersistMode::kRelaxed, kMiB, 64 * kMiB), &drops);
  const uint64_t size = 100 * 1000;
  for (int batch = 0; batch < 20; ++batch) {
    std::vector<int> ids;
    for (int k = 0; k < 10; ++k) ids.push_back(batch * 10 + k);
    PutOk(store.get(), ids, size);
  }
  for (int i = 0; i < 200; ++i) CheckOk(store.get(), i, size);
  const SsdStats stats = store->Stats();
  assert_int_equal(stats.objects, 200);
  assert_true(stats.buckets >= 20);  // ten 100 KB objects (in 4 KiB pages) fit a 1 MiB bucket
  assert_int_equal(stats.live_bytes, 200 * size);
  assert_int_equal(stats.evicted_buckets, 0);
  assert_int_equal(FilesEnding(dir, ".bucket").size(), stats.buckets);
  store.reset();
  fs::remove_all(dir);
}

void ExpectAll(SsdStore* store, int count, uint64_t size) {
  assert_int_equal(store->List().size(), count);
  for (int i = 0; i < count; ++i) CheckOk(store, i, size);
}

void test_restart_keeps_objects(void**) {
  for (SsdPersistMode mode : {SsdPersistMode::kRelaxed, SsdPersistMode::kStrict}) {
    const std::string dir = MakeTempDir();
    DropLog drops;
    auto store = OpenOk(Options(dir, mode, kMiB), &drops);
    for (int i = 0; i < 30; ++i) PutOk(store.get(), {i}, 70000);
    store->Forget({Key(29)});
    uint64_t highest = 0;
    for (const std::string& f : FilesEnding(dir, ".bucket")) {
      highest = std::max<uint64_t>(highest, std::stoull(fs::path(f).filename().string()));
    }
    store.reset();  // a clean close
    store = OpenOk(Options(dir, mode, kMiB), &drops);
    ExpectAll(store.get(), 29, 70000);
    SsdObject found;
    assert_false(store->Find(Key(29), &found));  // the forgotten stays forgotten
    // New objects go to a new bucket, numbered past the highest found.
    PutOk(store.get(), {100}, 10);
    uint64_t newest = 0;
    for (const std::string& f : FilesEnding(dir, ".bucket")) {
      newest = std::max<uint64_t>(newest, std::stoull(fs::path(f).filename().string()));
    }
    assert_true(newest > highest);
    store.reset();
    fs::remove_all(dir);
  }
}

void test_crash_strict_keeps_every_object_at_once(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = OpenOk(Options(dir, SsdPersistMode::kStrict, kMiB), &drops);
  // Four writers at once: the group commit serves them all.
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int k = 0; k < 10; ++k) PutOk(store.get(), {t * 10 + k}, 50000);
    });
  }
  for (auto& w : writers) w.join();
  const std::string copy = CrashCopy(dir);  // at once: no flusher was waited for
  DropLog copy_drops;
  auto after = OpenOk(Options(copy, SsdPersistMode::kStrict, kMiB), &copy_drops);
  ExpectAll(after.get(), 40, 50000);
  after.reset();
  // One strict Write of a batch is one round of syncs.
  const uint64_t before = store->Stats().syncs;
  PutOk(store.get(), {50, 51, 52, 53, 54, 55, 56, 57}, 3000);
  assert_int_equal(store->Stats().syncs - before, 1);
  store.reset();
  fs::remove_all(dir);
  fs::remove_all(copy);
}

void test_crash_relaxed_keeps_objects_after_the_bound(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = OpenOk(Options(dir, SsdPersistMode::kRelaxed, kMiB), &drops);
  for (int i = 0; i < 20; ++i) PutOk(store.get(), {i}, 60000);
  std::this_thread::sleep_for(std::chrono::milliseconds(SsdStore::kRelaxedSyncMs));
  // The bound holds on an idle machine; a loaded one may run the flusher late, so poll
  // (the flusher runs every quarter of the bound).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  size_t listed = 0;
  for (;;) {
    const std::string copy = CrashCopy(dir);
    DropLog copy_drops;
    auto after = OpenOk(Options(copy, SsdPersistMode::kRelaxed, kMiB), &copy_drops);
    listed = after->List().size();
    if (listed == 20) ExpectAll(after.get(), 20, 60000);
    after.reset();
    fs::remove_all(copy);
    if (listed == 20 || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  assert_int_equal(listed, 20);
  store.reset();
  fs::remove_all(dir);
}

void test_disabled_keeps_none(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  {
    auto store = OpenOk(Options(dir, SsdPersistMode::kRelaxed, kMiB), &drops);
    for (int i = 0; i < 5; ++i) PutOk(store.get(), {i}, 300000);
  }
  const std::string identity = dir + "/IDENTITY";
  {
    FILE* f = std::fopen(identity.c_str(), "w");
    std::fputs("segment 7\n", f);
    std::fclose(f);
  }
  for (int round = 0; round < 2; ++round) {  // a relaxed dir opened disabled, then again
    auto store = OpenOk(Options(dir, SsdPersistMode::kDisabled, kMiB), &drops);
    assert_int_equal(store->List().size(), 0);
    assert_int_equal(store->Stats().objects, 0);
    assert_int_equal(FilesEnding(dir, ".bucket").size(), 0);
    assert_int_equal(FilesEnding(dir, ".meta").size(), 0);
    assert_int_equal(static_cast<int>(Check(store.get(), 0, 300000)),
                     static_cast<int>(ErrorCode::OBJECT_NOT_FOUND));
    PutOk(store.get(), {1, 2}, 1000);  // works without .meta files
    CheckOk(store.get(), 2, 1000);
    assert_int_equal(FilesEnding(dir, ".meta").size(), 0);
  }
  assert_true(fs::exists(identity));
  assert_int_equal(FileSize(identity), 10);
  fs::remove_all(dir);
}

// One bucket holding objects 0..4 (written one by one: one record each), closed cleanly.
std::string FiveObjects(uint64_t size, std::string* meta, std::string* bucket) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = OpenOk(Options(dir), &drops);
  for (int i = 0; i < 5; ++i) PutOk(store.get(), {i}, size);
  store.reset();
  const auto metas = FilesEnding(dir, ".meta");
  const auto buckets = FilesEnding(dir, ".bucket");
  assert_int_equal(metas.size(), 1);
  assert_int_equal(buckets.size(), 1);
  *meta = metas[0];
  *bucket = buckets[0];
  return dir;
}

void ExpectExactly(const std::string& dir, int first_missing, uint64_t size) {
  DropLog drops;
  auto store = OpenOk(Options(dir), &drops);
  assert_int_equal(store->List().size(), first_missing);
  for (int i = 0; i < first_missing; ++i) CheckOk(store.get(), i, size);
  for (int i = first_missing; i < 5; ++i) {
    SsdObject o;
    assert_false(store->Find(Key(i), &o));
  }
  // The store stays writable after the damage, and what it writes survives.
  PutOk(store.get(), {9}, size);
  store.reset();
  store = OpenOk(Options(dir), &drops);
  CheckOk(store.get(), 9, size);
  assert_int_equal(store->List().size(), first_missing + 1);
}

void test_torn_meta_record(void**) {
  std::string meta, bucket;
  // A record cut at the end: the last object is gone, the others are fine.
  std::string dir = FiveObjects(10000, &meta, &bucket);
  assert_int_equal(truncate(meta.c_str(), static_cast<off_t>(FileSize(meta) - 3)), 0);
  ExpectExactly(dir, 4, 10000);
  fs::remove_all(dir);
  // A byte flipped in the third record: it and all after it are not trusted.
  dir = FiveObjects(10000, &meta, &bucket);
  {
    const uint64_t record = (FileSize(meta) - 16) / 5;  // five records of one size
    const int fd = open(meta.c_str(), O_RDWR);
    char c;
    const off_t at = static_cast<off_t>(16 + 2 * record + 12);
    assert_int_equal(pread(fd, &c, 1, at), 1);
    c ^= 0x40;
    assert_int_equal(pwrite(fd, &c, 1, at), 1);
    close(fd);
  }
  ExpectExactly(dir, 2, 10000);
  fs::remove_all(dir);
}

void test_truncated_bucket(void**) {
  std::string meta, bucket;
  const uint64_t size = 64 * 1024;  // slots of 64 KiB: object i at i * 64 KiB
  std::string dir = FiveObjects(size, &meta, &bucket);
  assert_int_equal(truncate(bucket.c_str(), static_cast<off_t>(3 * size + 100)), 0);
  ExpectExactly(dir, 3, size);
  fs::remove_all(dir);
}

void FlipByte(const std::string& path, uint64_t at) {
  const int fd = open(path.c_str(), O_RDWR);
  assert_true(fd >= 0);
  char c;
  assert_int_equal(pread(fd, &c, 1, static_cast<off_t>(at)), 1);
  c ^= 0x01;
  assert_int_equal(pwrite(fd, &c, 1, static_cast<off_t>(at)), 1);
  close(fd);
}

void test_flipped_byte_is_never_served(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = OpenOk(Options(dir), &drops);
  PutOk(store.get(), {0}, kMiB);  // at offset 0 of the first bucket
  PutOk(store.get(), {1}, 5000);
  const std::string bucket = FilesEnding(dir, ".bucket")[0];
  FlipByte(bucket, 3 * 256 * 1024 + 10);  // in the fourth check block of object 0
  // A range inside the first block does not touch the damage and is right.
  std::string got(1000, '\0');
  assert_int_equal(static_cast<int>(store->Read(Key(0), 10, got.data(), 1000)), 0);
  assert_memory_equal(got.data(), Value(0, kMiB).data() + 10, 1000);
  // One that touches it: never the bytes.
  assert_int_equal(static_cast<int>(store->Read(Key(0), 3 * 256 * 1024, got.data(), 100)),
                   static_cast<int>(ErrorCode::CHECKSUM_MISMATCH));
  SsdObject o;
  assert_false(store->Find(Key(0), &o));
  assert_int_equal(static_cast<int>(Check(store.get(), 0, kMiB)),
                   static_cast<int>(ErrorCode::OBJECT_NOT_FOUND));
  assert_int_equal(drops.calls.size(), 1);
  assert_true(drops.calls[0] == std::vector<std::string>{Key(0)});
  assert_int_equal(store->Stats().corrupt_reads, 1);
  CheckOk(store.get(), 1, 5000);
  // A whole read finds it too, and the drop survives a restart.
  FlipByte(bucket, kMiB + 4999);  // object 1's last byte
  assert_int_equal(static_cast<int>(Check(store.get(), 1, 5000)),
                   static_cast<int>(ErrorCode::CHECKSUM_MISMATCH));
  store.reset();
  store = OpenOk(Options(dir), &drops);
  assert_int_equal(store->List().size(), 0);
  store.reset();
  fs::remove_all(dir);
}

// 4 buckets of 1 MiB under the watermark, two 512 KiB objects per bucket: objects 0..7
// fill them (bucket 1: 0 and 1, bucket 2: 2 and 3 ...).
std::unique_ptr<SsdStore> FullStore(const std::string& dir, SsdEvictionPolicy policy,
                                    DropLog* drops) {
  SsdOptions o = Options(dir, SsdPersistMode::kRelaxed, kMiB, 4 * kMiB);
  o.eviction_policy = policy;
  auto store = OpenOk(o, drops);
  for (int i = 0; i < 8; ++i) PutOk(store.get(), {i}, 512 * 1024);
  assert_int_equal(store->Stats().used_bytes, 4 * kMiB);
  assert_int_equal(drops->calls.size(), 0);
  return store;
}

std::set<std::string> Keys(std::initializer_list<int> ids) {
  std::set<std::string> out;
  for (int i : ids) out.insert(Key(i));
  return out;
}

void ExpectSurvivors(SsdStore* store, const std::set<int>& alive) {
  for (int i = 0; i <= 8; ++i) {
    const ErrorCode rc = Check(store, i, 512 * 1024);
    assert_int_equal(static_cast<int>(rc),
                     static_cast<int>(alive.count(i) ? ErrorCode::OK : ErrorCode::OBJECT_NOT_FOUND));
  }
}

void test_fifo_evicts_the_oldest_bucket(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = FullStore(dir, SsdEvictionPolicy::kFifo, &drops);
  for (int i : {0, 1, 2, 3}) CheckOk(store.get(), i, 512 * 1024);  // reads do not matter to fifo
  PutOk(store.get(), {8}, 512 * 1024);
  assert_true(drops.AllKeys() == Keys({0, 1}));
  ExpectSurvivors(store.get(), {2, 3, 4, 5, 6, 7, 8});
  assert_int_equal(store->Stats().evicted_buckets, 1);
  store.reset();
  fs::remove_all(dir);
}

void test_lru_evicts_the_least_recently_read_bucket(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = FullStore(dir, SsdEvictionPolicy::kLru, &drops);
  CheckOk(store.get(), 0, 512 * 1024);  // bucket 1 read: bucket 2 is now the least recent
  CheckOk(store.get(), 5, 512 * 1024);
  PutOk(store.get(), {8}, 512 * 1024);
  assert_true(drops.AllKeys() == Keys({2, 3}));
  ExpectSurvivors(store.get(), {0, 1, 4, 5, 6, 7, 8});
  // Forgotten objects are not the master's business at eviction: the next to go is
  // bucket 3 (4 and 5: read before bucket 4's 6 and 7 above), with only its live key.
  store->Forget({Key(4)});
  CheckOk(store.get(), 0, 512 * 1024);
  PutOk(store.get(), {9}, 512 * 1024);  // fits in the open bucket, with 8
  assert_int_equal(drops.calls.size(), 1);
  PutOk(store.get(), {10}, 512 * 1024);
  assert_int_equal(drops.calls.size(), 2);
  assert_true(drops.calls.back() == std::vector<std::string>{Key(5)});
  store.reset();
  fs::remove_all(dir);
}

void test_drop_refused_deletes_nothing(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = FullStore(dir, SsdEvictionPolicy::kFifo, &drops);
  drops.answer = false;
  const auto buckets_before = FilesEnding(dir, ".bucket");
  const std::vector<ErrorCode> rc = Put(store.get(), {8}, 512 * 1024);
  assert_int_equal(static_cast<int>(rc[0]), static_cast<int>(ErrorCode::FILE_WRITE_FAIL));
  assert_int_equal(drops.calls.size(), 1);  // it was asked, and said no
  assert_true(FilesEnding(dir, ".bucket") == buckets_before);
  ExpectSurvivors(store.get(), {0, 1, 2, 3, 4, 5, 6, 7});
  const SsdStats stats = store->Stats();
  assert_int_equal(stats.write_failures, 1);
  assert_int_equal(stats.evicted_buckets, 0);
  // Once the master can be told again, the write goes through.
  drops.answer = true;
  PutOk(store.get(), {8}, 512 * 1024);
  ExpectSurvivors(store.get(), {2, 3, 4, 5, 6, 7, 8});
  store.reset();
  fs::remove_all(dir);
}

void test_enospc_fails_cleanly(void**) {
  const std::string mnt = MakeTempDir();
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0) {
    std::fprintf(stderr, "skipped: cannot mount a tmpfs (%s): needs root\n", std::strerror(errno));
    fs::remove_all(mnt);
    return;
  }
  for (bool drop_answer : {false, true}) {
    const std::string dir = mnt + "/ssd";
    fs::create_directories(dir);
    DropLog drops;
    drops.answer = drop_answer;
    // The capacity says 64 MiB; the filesystem has 4.
    auto store = OpenOk(Options(dir, SsdPersistMode::kRelaxed, kMiB, 64 * kMiB), &drops);
    std::vector<int> stored;
    int failures = 0;
    for (int i = 0; i < 24; ++i) {
      const ErrorCode rc = Put(store.get(), {i}, 300 * 1000)[0];
      if (rc == ErrorCode::OK) {
        stored.push_back(i);
      } else {
        assert_int_equal(static_cast<int>(rc), static_cast<int>(ErrorCode::FILE_WRITE_FAIL));
        ++failures;
      }
    }
    assert_true(failures > 0);
    assert_true(stored.size() >= 5);
    // What is in the index reads back right; the failed objects are not in it.
    size_t listed = 0;
    for (int i : stored) {
      const ErrorCode rc = Check(store.get(), i, 300 * 1000);
      if (!drop_answer) assert_int_equal(static_cast<int>(rc), 0);
      assert_true(rc == ErrorCode::OK || rc == ErrorCode::OBJECT_NOT_FOUND);
      listed += rc == ErrorCode::OK;
    }
    assert_int_equal(store->List().size(), listed);
    if (drop_answer) {
      // Eviction on ENOSPC made room: the newest objects went in.
      assert_true(store->Stats().evicted_buckets > 0);
      assert_true(std::find(stored.begin(), stored.end(), 23) != stored.end() ||
                  std::find(stored.begin(), stored.end(), 22) != stored.end());
    } else {
      assert_int_equal(store->Stats().evicted_buckets, 0);
    }
    store.reset();
    fs::remove_all(dir);
  }
  assert_int_equal(umount2(mnt.c_str(), MNT_DETACH), 0);
  fs::remove_all(mnt);
}

void test_reads_during_eviction_never_see_wrong_bytes(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto store = OpenOk(Options(dir, SsdPersistMode::kRelaxed, kMiB, 4 * kMiB), &drops);
  const uint64_t size = 200 * 1000;
  std::atomic<int> written{0};
  std::atomic<bool> done{false};
  std::atomic<int> ok_reads{0}, bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      unsigned x = t + 1;
      std::string got(size, '\0');
      while (!done) {
        const int n = written.load();
        if (n == 0) continue;
        x = x * 1103515245 + 12345;
        const int i = static_cast<int>((x >> 8) % n);
        const uint64_t off = (x >> 4) % 3 == 0 ? 0 : 1000 * ((x >> 12) % 100);
        const uint64_t len = size - off;
        const ErrorCode rc = store->Read(Key(i), off, got.data(), len);
        if (rc == ErrorCode::OK) {
          if (std::memcmp(got.data(), Value(i, size).data() + off, len) != 0) ++bad;
          ++ok_reads;
        } else if (rc != ErrorCode::OBJECT_NOT_FOUND) {
          ++bad;
        }
      }
    });
  }
  for (int i = 0; i < 80; ++i) {
    PutOk(store.get(), {i}, size);
    written = i + 1;
  }
  done = true;
  for (auto& r : readers) r.join();
  assert_int_equal(bad.load(), 0);
  assert_true(ok_reads.load() > 0);
  const SsdStats stats = store->Stats();
  assert_true(stats.evicted_buckets >= 10);
  assert_int_equal(stats.corrupt_reads, 0);
  assert_true(stats.used_bytes <= 4 * kMiB);
  for (const SsdObject& o : store->List()) {
    CheckOk(store.get(), std::stoi(o.key.substr(4)), size);
  }
  store.reset();
  fs::remove_all(dir);
}

void test_second_open_fails_with_the_lock(void**) {
  const std::string dir = MakeTempDir();
  DropLog drops;
  auto first = OpenOk(Options(dir), &drops);
  std::unique_ptr<SsdStore> second;
  std::string error;
  assert_int_equal(static_cast<int>(SsdStore::Open(Options(dir), drops.Fn(), &second, &error)),
                   static_cast<int>(ErrorCode::FILE_LOCK_FAIL));
  assert_true(second == nullptr);
  assert_true(error.find("LOCK is held by another process") != std::string::npos);
  first.reset();
  assert_int_equal(static_cast<int>(SsdStore::Open(Options(dir), drops.Fn(), &second, &error)), 0);
  second.reset();
  // Options out of range.
  SsdOptions bad = Options(dir);
  bad.capacity = bad.bucket_size;
  assert_int_equal(static_cast<int>(SsdStore::Open(bad, drops.Fn(), &second, &error)),
                   static_cast<int>(ErrorCode::INVALID_PARAMS));
  fs::remove_all(dir);
}

}  // namespace

int main() {
  mooncake::SetLogLevel(mooncake::LogLevel::kWarning);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_many_objects_across_buckets),
      cmocka_unit_test(test_restart_keeps_objects),
      cmocka_unit_test(test_crash_strict_keeps_every_object_at_once),
      cmocka_unit_test(test_crash_relaxed_keeps_objects_after_the_bound),
      cmocka_unit_test(test_disabled_keeps_none),
      cmocka_unit_test(test_torn_meta_record),
      cmocka_unit_test(test_truncated_bucket),
      cmocka_unit_test(test_flipped_byte_is_never_served),
      cmocka_unit_test(test_fifo_evicts_the_oldest_bucket),
      cmocka_unit_test(test_lru_evicts_the_least_recently_read_bucket),
      cmocka_unit_test(test_drop_refused_deletes_nothing),
      cmocka_unit_test(test_enospc_fails_cleanly),
      cmocka_unit_test(test_reads_during_eviction_never_see_wrong_bytes),
      cmocka_unit_test(test_second_open_fails_with_the_lock),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
