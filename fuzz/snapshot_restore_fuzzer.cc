// A restarting master's whole restore (master/snapshot/state_restore.h) over a snapshot directory
// and an operation log the input describes: SnapshotStore finds and checks the snapshot
// (descriptor, manifest, payload sizes and CRC-32Cs: master/snapshot/snapshot_format.h), the
// codec loads it, the log replays after it.
//
// Input: sections (fuzz/fuzz_util.h), each a file of the directory:
//   tag 0  latest                      tag 3  the payload "segments"
//   tag 1  the snapshot's descriptor   tag 4  the payload "metadata"
//   tag 2  the snapshot's manifest     tag 5  an operation-log file (named after the
//                                             first seq its header gives)
//   tag 6  options: bit 0 rewrites the manifest's payload lines with the real size and
//          CRC of each payload there is, bit 1 the manifest's trailing CRC, bit 2 the
//          descriptor's manifest_crc32c, bit 3 the descriptor's trailing CRC (so that the
//          fuzzer gets past the checksums to what they guard), bit 4 names the snapshot's
//          directory after the descriptor's sequence and created_ms lines (else
//          00000000000000000001-1).
//
// Invariants:
//  - the restore succeeds (the directory is readable), and what it restored, once
//    FinishRestore dropped what could not be trusted, is consistent (fuzz/master_state.h);
//  - a snapshot it refused is never a candidate again (renamed *.invalid);
//  - a restore is repeatable: restoring the same directory again (as the next restart
//    would) loads the same snapshot, ends the log at the same seq and yields the same state.
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/base/crc32c.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/master_state.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"
#include "master/snapshot/snapshot_format.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/state_restore.h"

namespace {

using namespace mooncake;

struct Files {
  std::string latest, descriptor, manifest, segments, metadata;
  bool has_latest = false, has_descriptor = false, has_manifest = false;
  bool has_segments = false, has_metadata = false;
  std::vector<std::string> logs;
  uint8_t options = 0;
};

Files Parse(const uint8_t* data, size_t size) {
  Files f;
  for (const fuzz::Section& s : fuzz::SplitSections(data, size)) {
    std::string bytes(s.bytes);
    switch (s.tag % 7) {
      case 0: f.latest = bytes, f.has_latest = true; break;
      case 1: f.descriptor = bytes, f.has_descriptor = true; break;
      case 2: f.manifest = bytes, f.has_manifest = true; break;
      case 3: f.segments = bytes, f.has_segments = true; break;
      case 4: f.metadata = bytes, f.has_metadata = true; break;
      case 5: f.logs.push_back(bytes); break;
      case 6: f.options = bytes.empty() ? 0 : static_cast<uint8_t>(bytes[0]); break;
    }
  }
  return f;
}

// text with its last line replaced by (or, when it is not one, followed by) the trailer
// "crc32c <8 hex>\n" of everything before it.
std::string WithTrailer(std::string text) {
  if (!text.empty() && text.back() != '\n') text += '\n';
  size_t last = text.size() >= 2 ? text.rfind('\n', text.size() - 2) : std::string::npos;
  last = last == std::string::npos ? 0 : last + 1;
  if (text.compare(last, 7, "crc32c ") == 0) text.resize(last);
  return text + "crc32c " + snapshot_format::Hex8(Crc32c(text.data(), text.size())) + "\n";
}

// Every "<key> ..." line of text rewritten by fix(key, rest) (which returns the new line,
// or the old one).
template <typename Fix>
std::string RewriteLines(const std::string& text, Fix fix) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    out += fix(text.substr(pos, end - pos));
    if (nl != std::string::npos) out += '\n';
    pos = end + 1;
  }
  return out;
}

void FixChecksums(Files* f) {
  if (f->options & 1) {
    f->manifest = RewriteLines(f->manifest, [&](const std::string& line) {
      const std::string* bytes = line.rfind("payload segments ", 0) == 0   ? &f->segments
                                 : line.rfind("payload metadata ", 0) == 0 ? &f->metadata
                                                                           : nullptr;
      if (bytes == nullptr) return line;
      return line.substr(0, line.find(' ', 8)) + " " + snapshot_format::U64Text(bytes->size()) +
             " " + snapshot_format::Hex8(Crc32c(bytes->data(), bytes->size()));
    });
  }
  if (f->options & 2) f->manifest = WithTrailer(f->manifest);
  if (f->options & 4) {
    const std::string crc = snapshot_format::Hex8(Crc32c(f->manifest.data(), f->manifest.size()));
    f->descriptor = RewriteLines(f->descriptor, [&](const std::string& line) {
      return line.rfind("manifest_crc32c ", 0) == 0 ? "manifest_crc32c " + crc : line;
    });
  }
  if (f->options & 8) f->descriptor = WithTrailer(f->descriptor);
}

// The snapshot's directory name: from the descriptor's lines when asked, if they parse.
std::string SnapshotDirName(const Files& f) {
  uint64_t sequence = 1;
  int64_t created_ms = 1;
  if (f.options & 16) {
    RewriteLines(f.descriptor, [&](const std::string& line) {
      if (line.rfind("sequence ", 0) == 0) {
        snapshot_format::ParseCanonicalU64(line.substr(9), UINT64_MAX, &sequence);
      } else if (line.rfind("created_ms ", 0) == 0) {
        int64_t v = 0;
        if (snapshot_format::ParseCanonicalI64(line.substr(11), &v) && v >= 0) created_ms = v;
      }
      return line;
    });
  }
  return SnapshotName(sequence, created_ms);
}

void WriteDirectory(const std::string& dir, const Files& f) {
  const std::string snapshot = dir + "/snapshots/" + SnapshotDirName(f);
  std::filesystem::create_directories(snapshot);
  std::filesystem::create_directories(dir + "/oplog");
  if (f.has_latest) fuzz::WriteFile(dir + "/latest", f.latest);
  if (f.has_descriptor) fuzz::WriteFile(snapshot + "/descriptor", f.descriptor);
  if (f.has_manifest) fuzz::WriteFile(snapshot + "/manifest", f.manifest);
  if (f.has_segments) fuzz::WriteFile(snapshot + "/segments", f.segments);
  if (f.has_metadata) fuzz::WriteFile(snapshot + "/metadata", f.metadata);
  for (size_t i = 0; i < f.logs.size(); ++i) {
    uint64_t seq = i + 1;
    if (f.logs[i].size() >= 16) {
      const char* p = f.logs[i].data() + 8;
      seq = 0;
      for (int b = 0; b < 8; ++b) seq |= uint64_t{static_cast<uint8_t>(p[b])} << (8 * b);
      if (seq == 0) seq = i + 1;
    }
    char name[32];
    std::snprintf(name, sizeof(name), "%020" PRIu64 ".log", seq);
    fuzz::WriteFile(dir + "/oplog/" + name, f.logs[i]);
  }
}

struct Restored {
  RestoreOutcome outcome;
  fuzz::ExportedState state;
};

Restored Restore(const std::string& dir) {
  MasterService service{MasterOptions()};
  SnapshotStore store(dir);
  OpLogOptions log_options;
  log_options.dir = dir + "/oplog";
  OpLog oplog(log_options);
  Result<RestoreOutcome> outcome = RestoreMasterState(&service, &store, &oplog);
  FUZZ_CHECK(outcome.ok(), "the restore failed: %d", ToInt(outcome.code()));
  Restored r{outcome.value(), fuzz::Export(&service)};
  fuzz::CheckRestorable(r.state);
  if (!r.outcome.snapshot.empty()) {
    const std::vector<std::string> candidates = store.Candidates();
    FUZZ_CHECK(!candidates.empty() && candidates[0] == r.outcome.snapshot,
               "snapshot %s was loaded but is not the first candidate now",
               r.outcome.snapshot.c_str());
  } else {
    FUZZ_CHECK(store.Candidates().empty(), "no snapshot loaded, yet a candidate is left");
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Files files = Parse(data, size);
  FixChecksums(&files);
  const std::string dir = fuzz::FreshDir();
  WriteDirectory(dir, files);

  const Restored first = Restore(dir);
  const Restored second = Restore(dir);
  FUZZ_CHECK(second.outcome.snapshot == first.outcome.snapshot &&
                 second.outcome.last_sequence == first.outcome.last_sequence,
             "restored again: snapshot \"%s\" and log seq %" PRIu64 ", first \"%s\" and %" PRIu64,
             second.outcome.snapshot.c_str(), second.outcome.last_sequence,
             first.outcome.snapshot.c_str(), first.outcome.last_sequence);
  fuzz::CheckSameState(first.state, second.state, "the first restore", "the second");
  return 0;
}
