// The master's operation log on disk (master/log/oplog.h) as a restarting master finds it:
// the input becomes the log's files, OpLog::Recover replays them, and the log goes on.
//
// Input: [options byte][file bytes]. The file bytes are cut into files at every "MCOPLOG1"
// (the magic each file starts with), each named after the first seq its header gives (or
// its index when it has none). Options: bits 0-4 the seq the snapshot holds everything up
// to (Recover's after_seq); bit 5 names every file one seq later than its header says;
// bit 6 replays into nothing but a list (any payload is taken), else into a MasterService
// (ApplyLogRecord, as a restore does, which refuses a record it cannot decode); bit 7
// preallocates 4 KiB steps of zeros in the file the log goes on in.
//
// Invariants:
//  - Recover never fails on a readable directory, and the records it replays form the
//    chain after_seq+1, after_seq+2, ... up to the seq it returns;
//  - recovering is stable: a second Recover of the directory it left changes nothing on
//    disk and replays the same records;
//  - the log goes on: Start at the recovered seq, two appends, and a third Recover
//    replays the same records followed by the two new ones, numbered next;
//  - the state the records restore, once FinishRestore dropped what could not be trusted,
//    is consistent (fuzz/master_state.h).
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "fuzz/master_state.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"

namespace {

using namespace mooncake;
using Records = std::vector<std::pair<uint64_t, std::string>>;

constexpr std::string_view kMagic(OpLog::kMagic, sizeof(OpLog::kMagic));

std::string FileName(uint64_t seq) {
  char name[32];
  std::snprintf(name, sizeof(name), "%020" PRIu64 ".log", seq);
  return name;
}

uint64_t Le64(std::string_view p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

// Writes the input's files into dir.
void WriteFiles(const std::string& dir, std::string_view bytes, bool name_later) {
  std::vector<size_t> starts;
  for (size_t at = bytes.find(kMagic); at != std::string_view::npos;
       at = bytes.find(kMagic, at + 1)) {
    starts.push_back(at);
  }
  if (starts.empty() || starts[0] != 0) starts.insert(starts.begin(), 0);
  std::set<uint64_t> named;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1] : bytes.size();
    const std::string_view file = bytes.substr(starts[i], end - starts[i]);
    uint64_t seq = file.size() >= 16 && file.substr(0, kMagic.size()) == kMagic
                       ? Le64(file.substr(8))
                       : i + 1;
    if (name_later && seq != UINT64_MAX) ++seq;
    if (seq == 0 || !named.insert(seq).second) continue;
    fuzz::WriteFile(dir + "/" + FileName(seq), file);
  }
}

// Recover into a list (and into service, when there is one); checks the chain.
Records Recover(const OpLogOptions& options, uint64_t after_seq, MasterService* service,
                uint64_t* last) {
  Records records;
  OpLog log(options);
  Result<uint64_t> recovered = log.Recover(after_seq, [&](uint64_t seq, std::string_view payload) {
    if (service != nullptr && !service->ApplyLogRecord(payload)) return false;
    records.emplace_back(seq, std::string(payload));
    return true;
  });
  FUZZ_CHECK(recovered.ok(), "Recover failed: %d", ToInt(recovered.code()));
  for (size_t i = 0; i < records.size(); ++i) {
    FUZZ_CHECK(records[i].first == after_seq + 1 + i, "record %zu replayed has seq %" PRIu64
               " after seq %" PRIu64, i, records[i].first, after_seq);
    FUZZ_CHECK(records[i].second.size() <= OpLog::kMaxPayload, "a %zu-byte payload",
               records[i].second.size());
  }
  *last = recovered.value();
  FUZZ_CHECK(*last == after_seq + records.size(), "Recover returned %" PRIu64 " after %zu "
             "records past %" PRIu64, *last, records.size(), after_seq);
  return records;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t options_byte = data[0];
  const uint64_t after_seq = options_byte & 0x1f;
  const bool name_later = options_byte & 0x20;
  const bool into_service = !(options_byte & 0x40);

  OpLogOptions options;
  options.dir = fuzz::FreshDir() + "/oplog";
  options.preallocate_bytes = options_byte & 0x80 ? 4096 : 0;
  std::filesystem::create_directories(options.dir);
  WriteFiles(options.dir, std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1),
             name_later);

  MasterService service{MasterOptions()};
  uint64_t last = 0;
  const Records first = Recover(options, after_seq, into_service ? &service : nullptr, &last);
  if (into_service) {
    service.FinishRestore();
    fuzz::CheckRestorable(fuzz::Export(&service));
  }

  const auto on_disk = fuzz::ReadTree(options.dir);
  uint64_t last_again = 0;
  const Records second = Recover(options, after_seq, nullptr, &last_again);
  FUZZ_CHECK(second == first && last_again == last, "a second Recover replayed %zu records "
             "to seq %" PRIu64 ", the first %zu to %" PRIu64, second.size(), last_again,
             first.size(), last);
  FUZZ_CHECK(fuzz::ReadTree(options.dir) == on_disk, "a second Recover changed the directory");

  {
    OpLog log(options);
    FUZZ_CHECK(log.Recover(after_seq, [](uint64_t, std::string_view) { return true; }).ok(),
               "Recover before Start failed");
    FUZZ_CHECK(log.Start(last) == ErrorCode::OK, "Start after seq %" PRIu64 " failed", last);
    FUZZ_CHECK(log.Append("one more") == last + 1 && log.Append("and another") == last + 2,
               "appends after seq %" PRIu64 " are numbered otherwise", last);
  }  // written and synced as the log closes
  Records expected = first;
  expected.emplace_back(last + 1, "one more");
  expected.emplace_back(last + 2, "and another");
  uint64_t last_after = 0;
  const Records third = Recover(options, after_seq, nullptr, &last_after);
  FUZZ_CHECK(third == expected && last_after == last + 2,
             "after two appends Recover replayed %zu records to seq %" PRIu64 ", expected %zu "
             "to %" PRIu64, third.size(), last_after, expected.size(), last + 2);
  return 0;
}
