// Tests for what mooncake::SnapshotStore makes of damaged files: every kind of corruption
// a snapshot can suffer (each must fail Load with a reason naming the file, and leave the
// older snapshots to fall back on), a latest that is missing, names nothing or is garbage,
// and hostile descriptors and manifests (every single-byte flip and truncation, and bad
// content under valid CRCs). The round trip, retention and the writer are tested in
// snapshot_store_test.cc.

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/base/crc32c.h"
#include "master/snapshot/snapshot_format.h"
#include "master/snapshot/snapshot_store.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/snapshot_store_test_util.h"

using mooncake::ErrorCode;
using mooncake::LoadedSnapshot;
using mooncake::Result;
using mooncake::SnapshotName;
using mooncake::SnapshotStore;
using mooncake::SnapshotWriter;

namespace {

using namespace mooncake::snapshot_store_test;  // what the SnapshotStore suites share

// ---- damaging files -------------------------------------------------------------------------

void FlipByte(const std::string& path, size_t offset) {
  std::string bytes = ReadFile(path);
  assert_true(offset < bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
  WriteFile(path, bytes);
}

// The file's text without its last line.
std::string Unseal(const std::string& text) {
  size_t start = text.rfind('\n', text.size() - 2);
  return text.substr(0, start + 1);
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  assert_true(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

// Replaces the manifest with a sealed body and points the descriptor (resealed) at it, so
// that only the manifest's content is at fault.
void ReplaceManifest(const std::string& snapshot, const std::string& body) {
  const std::string manifest = Seal(body);
  WriteFile(snapshot + "/manifest", manifest);
  std::string descriptor = Unseal(ReadFile(snapshot + "/descriptor"));
  size_t at = descriptor.find("manifest_crc32c ");
  assert_true(at != std::string::npos);
  descriptor.replace(at + 16, 8, Hex8(mooncake::Crc32c(manifest.data(), manifest.size())));
  WriteFile(snapshot + "/descriptor", Seal(descriptor));
}

// ---- tests ----------------------------------------------------------------------------------

// Each corruption of the newer of two snapshots: Load fails naming the file, the older one
// stays a candidate and loads.
struct Corruption {
  const char* what;
  std::function<void(const std::string& snapshot, const std::string& older)> apply;
  const char* file;  // the file the reason must name
  ErrorCode code;
  bool still_candidate;  // the newer one (only a missing descriptor hides it)
};

void test_corruption(void** state) {
  const std::string& root = Dir(state);
  const Corruption cases[] = {
      {"flipped payload byte",
       [](const std::string& s, const std::string&) { FlipByte(s + "/segments", 5000); },
       "segments", ErrorCode::DESERIALIZE_FAIL, true},
      {"flipped last payload byte",
       [](const std::string& s, const std::string&) {
         FlipByte(s + "/metadata", ReadFile(s + "/metadata").size() - 1);
       },
       "metadata", ErrorCode::DESERIALIZE_FAIL, true},
      {"truncated payload",
       [](const std::string& s, const std::string&) {
         assert_int_equal(::truncate((s + "/segments").c_str(), 9999), 0);
       },
       "segments", ErrorCode::DESERIALIZE_FAIL, true},
      {"payload longer than the manifest says",
       [](const std::string& s, const std::string&) {
         WriteFile(s + "/segments", ReadFile(s + "/segments") + "x");
       },
       "segments", ErrorCode::DESERIALIZE_FAIL, true},
      {"missing payload",
       [](const std::string& s, const std::string&) {
         assert_int_equal(::unlink((s + "/metadata").c_str()), 0);
       },
       "metadata", ErrorCode::FILE_NOT_FOUND, true},
      {"payload replaced by a directory",
       [](const std::string& s, const std::string&) {
         assert_int_equal(::unlink((s + "/metadata").c_str()), 0);
         assert_int_equal(::mkdir((s + "/metadata").c_str(), 0755), 0);
       },
       "metadata", ErrorCode::DESERIALIZE_FAIL, true},
      {"missing manifest",
       [](const std::string& s, const std::string&) {
         assert_int_equal(::unlink((s + "/manifest").c_str()), 0);
       },
       "manifest", ErrorCode::FILE_NOT_FOUND, true},
      {"flipped manifest byte (a size digit)",
       [](const std::string& s, const std::string&) {
         FlipByte(s + "/manifest", ReadFile(s + "/manifest").find("segments ") + 9);
       },
       "manifest", ErrorCode::DESERIALIZE_FAIL, true},
      {"empty manifest",
       [](const std::string& s, const std::string&) { WriteFile(s + "/manifest", ""); }, "manifest",
       ErrorCode::DESERIALIZE_FAIL, true},
      {"manifest cut short",
       [](const std::string& s, const std::string&) {
         std::string m = ReadFile(s + "/manifest");
         WriteFile(s + "/manifest", m.substr(0, m.size() - 5));
       },
       "manifest", ErrorCode::DESERIALIZE_FAIL, true},
      {"another snapshot's (intact) manifest",
       [](const std::string& s, const std::string& older) {
         WriteFile(s + "/manifest", ReadFile(older + "/manifest"));
       },
       "manifest", ErrorCode::DESERIALIZE_FAIL, true},
      {"flipped descriptor byte (the sequence digit)",
       [](const std::string& s, const std::string&) {
         FlipByte(s + "/descriptor", ReadFile(s + "/descriptor").find("sequence ") + 9);
       },
       "descriptor", ErrorCode::DESERIALIZE_FAIL, true},
      {"descriptor resealed with another sequence",
       [](const std::string& s, const std::string&) {
         std::string d = Unseal(ReadFile(s + "/descriptor"));
         WriteFile(s + "/descriptor", Seal(Replace(d, "sequence 2\n", "sequence 3\n")));
       },
       "descriptor", ErrorCode::DESERIALIZE_FAIL, true},
      {"empty descriptor",
       [](const std::string& s, const std::string&) { WriteFile(s + "/descriptor", ""); },
       "descriptor", ErrorCode::DESERIALIZE_FAIL, true},
      {"missing descriptor",
       [](const std::string& s, const std::string&) {
         assert_int_equal(::unlink((s + "/descriptor").c_str()), 0);
       },
       "descriptor", ErrorCode::FILE_NOT_FOUND, false},
  };
  int index = 0;
  for (const Corruption& c : cases) {
    const std::string dir = root + "/case" + std::to_string(index++);
    SnapshotStore store(dir);
    const std::string older = WriteSnapshot(dir, 1, kMs, Standard(1));
    const std::string newer = WriteSnapshot(dir, 2, kMs + 1, Standard(2), {{"objects", "7"}});
    const std::string snapshot = dir + "/snapshots/" + newer;
    ExpectLoads(store, newer, Standard(2));  // intact before
    c.apply(snapshot, dir + "/snapshots/" + older);

    std::string why;
    Result<LoadedSnapshot> r = store.Load(newer, &why);
    if (r.ok()) fail_msg("%s: Load succeeded", c.what);
    if (r.code() != c.code) {
      fail_msg("%s: code %d, expected %d (%s)", c.what, static_cast<int>(r.code()),
               static_cast<int>(c.code), why.c_str());
    }
    ExpectContains(why, snapshot + "/" + c.file);
    std::vector<std::string> candidates = store.Candidates();
    if (c.still_candidate) {
      ExpectNames(candidates, {newer, older});
    } else {
      ExpectNames(candidates, {older});
    }
    ExpectLoads(store, older, Standard(1));
    // What the master does next: the bad one is set aside, the older one is what is left.
    if (c.still_candidate) {
      assert_int_equal(static_cast<int>(store.MarkInvalid(newer)), 0);
      ExpectNames(store.Candidates(), {older});
    }
  }
}

// latest missing, naming nothing, or garbage: Candidates falls back to the listing.
void test_latest_fallback(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  const std::string a = WriteSnapshot(dir, 1, kMs, Standard(1));
  const std::string b = WriteSnapshot(dir, 2, kMs, Standard(2));
  const std::string latest = dir + "/latest";
  const std::string bad[] = {
      SnapshotName(99, kMs) + "\n",  // a snapshot that does not exist
      "garbage\n",
      "",
      a,                    // no newline
      a + "\n" + b + "\n",  // two lines
      a + ".invalid\n",
      std::string("\0\xff\n", 3),
      std::string(100000, '7'),  // bigger than any name
  };
  for (const std::string& content : bad) {
    WriteFile(latest, content);
    ExpectNames(store.Candidates(), {b, a});
  }
  assert_int_equal(::unlink(latest.c_str()), 0);
  ExpectNames(store.Candidates(), {b, a});
  assert_true(store.HasAny());
  assert_int_equal(::mkdir(latest.c_str(), 0755), 0);  // not even a file
  ExpectNames(store.Candidates(), {b, a});
  assert_int_equal(::rmdir(latest.c_str()), 0);
  WriteFile(latest, a + "\n");
  ExpectNames(store.Candidates(), {a, b});
}

// Every single-byte flip and every truncation of the descriptor and the manifest fails;
// hostile content with valid CRCs (overflowing numbers, non-canonical ones, path names,
// repeated keys, another format) is refused without crashing or allocating its sizes.
void test_hostile_files(void** state) {
  const std::string& dir = Dir(state);
  SnapshotStore store(dir);
  const std::string older = WriteSnapshot(dir, 1, kMs, Standard(1));
  const std::string name = WriteSnapshot(dir, 2, kMs, Standard(2), {{"objects", "5"}});
  const std::string snapshot = dir + "/snapshots/" + name;
  std::string why;
  for (const char* file : {"descriptor", "manifest"}) {
    const std::string path = snapshot + "/" + file;
    const std::string original = ReadFile(path);
    for (size_t i = 0; i < original.size(); ++i) {
      for (int bit : {0x01, 0x80, 0x20}) {
        std::string bad = original;
        bad[i] = static_cast<char>(bad[i] ^ bit);
        WriteFile(path, bad);
        why.clear();
        assert_false(store.Load(name, &why).ok());
        ExpectContains(why, path);
      }
    }
    for (size_t n = 0; n < original.size(); ++n) {
      WriteFile(path, original.substr(0, n));
      why.clear();
      assert_false(store.Load(name, &why).ok());
      ExpectContains(why, path);
    }
    WriteFile(path, original);
    ExpectLoads(store, name, Standard(2));
  }

  // Descriptors with valid CRCs but bad content.
  const std::string descriptor_path = snapshot + "/descriptor";
  const std::string descriptor = ReadFile(descriptor_path);
  const std::string body = Unseal(descriptor);
  WriteFile(descriptor_path, Seal(body));
  ExpectLoads(store, name, Standard(2));  // Seal is what the writer does
  const std::pair<std::string, std::string> bad_descriptor_edits[] = {
      {"sequence 2\n", "sequence 02\n"},
      {"sequence 2\n", "sequence +2\n"},
      {"sequence 2\n", "sequence 18446744073709551618\n"},
      {"sequence 2\n", "sequence 99999999999999999999999\n"},
      {"sequence 2\n", "sequence  2\n"},
      {"sequence 2\n", "sequence 2 \n"},
      {"sequence 2\n", "sequence -2\n"},
      {"sequence 2\n", ""},
      {"created_ms 1700000000000\n", "created_ms -0\n"},
      {"created_ms 1700000000000\n", "created_ms 9223372036854775808\n"},
      {"created_ms 1700000000000\n", "created_ms -1700000000000\n"},
      {"format 1\n", "format 2\n"},
      {"format 1\n", "format 01\n"},
      {"format 1\n", ""},
      {"mooncake-master snapshot descriptor\n", "mooncake-master snapshot manifest\n"},
      {"manifest_crc32c ", "manifest_crc32c 0"},
      {"objects 5\n", "objects\n"},
      {"objects 5\n", "objects 5\nobjects 6\n"},
      {"objects 5\n", "sequence 5\n"},
      {"objects 5\n", "objects 5\r\n"},
      {"objects 5\n", "objects \x01\n"},
      {"objects 5\n", "../x 5\n"},
      {"objects 5\n", " 5\n"},
      {"objects 5\n", "\n"},
  };
  for (const auto& edit : bad_descriptor_edits) {
    WriteFile(descriptor_path, Seal(Replace(body, edit.first, edit.second)));
    why.clear();
    Result<LoadedSnapshot> r = store.Load(name, &why);
    if (r.ok()) fail_msg("descriptor edit \"%s\" was accepted", edit.second.c_str());
    assert_int_equal(static_cast<int>(r.code()), static_cast<int>(ErrorCode::DESERIALIZE_FAIL));
    ExpectContains(why, descriptor_path);
  }
  WriteFile(descriptor_path, descriptor);
  // Extra lines beyond the limit.
  {
    std::string many = body;
    for (size_t i = 0; i <= mooncake::kMaxSnapshotExtras; ++i) {
      many += "k" + std::to_string(i) + " v\n";
    }
    WriteFile(descriptor_path, Seal(many));
    assert_false(store.Load(name, &why).ok());
    ExpectContains(why, descriptor_path);
  }
  // A descriptor bigger than any the writer makes is not read at all.
  WriteFile(descriptor_path, Seal(body + std::string(mooncake::kMaxSnapshotTextBytes, '#')));
  assert_false(store.Load(name, &why).ok());
  ExpectContains(why, descriptor_path);
  WriteFile(descriptor_path, descriptor);
  ExpectLoads(store, name, Standard(2));

  // Manifests with valid CRCs (and a descriptor naming them) but bad content.
  const std::string manifest_path = snapshot + "/manifest";
  const std::string manifest = ReadFile(manifest_path);
  const std::string mbody = Unseal(manifest);
  ReplaceManifest(snapshot, mbody);
  ExpectLoads(store, name, Standard(2));
  const std::string seg = "payload segments 10002 ";
  const std::pair<std::string, std::string> bad_manifest_edits[] = {
      {seg, "payload segments 18446744073709551616 "},
      {seg, "payload segments 18446744073709551615 "},  // fits, but is not the file's size
      {seg, "payload segments 010002 "},
      {seg, "payload segments -1 "},
      {seg, "payload ../descriptor 10002 "},
      {seg, "payload manifest 10002 "},
      {seg, "payload descriptor 10002 "},
      {seg, "payload /etc/passwd 10002 "},
      {seg, "payload  segments 10002 "},
      {seg, "payload segments 10002  "},
      {seg, "payload metadata 50002 "},  // listed twice
      {seg, "payloads segments 10002 "},
      {"\npayload metadata", "\nextra\npayload metadata"},
      {"\npayload metadata", "\npayload metadata x"},
  };
  for (const auto& edit : bad_manifest_edits) {
    ReplaceManifest(snapshot, Replace(mbody, edit.first, edit.second));
    why.clear();
    Result<LoadedSnapshot> r = store.Load(name, &why);
    if (r.ok()) fail_msg("manifest edit \"%s\" was accepted", edit.second.c_str());
    ExpectContains(why, snapshot + "/");
  }
  // An uppercase CRC, a fifth field.
  for (const std::string& line :
       {std::string("payload extra 0 0000000A\n"), std::string("payload extra 0 00000000 x\n"),
        std::string("payload extra 0 0000000\n")}) {
    WriteFile(snapshot + "/extra", "");
    ReplaceManifest(snapshot, mbody + line);
    assert_false(store.Load(name, &why).ok());
    ExpectContains(why, manifest_path);
  }
  ReplaceManifest(snapshot, mbody + "payload extra 0 00000000\n");  // the control: accepted
  ExpectLoads(store, name, {Standard(2)[0], Standard(2)[1], {"extra", ""}});
  ExpectNames(store.Candidates(), {name, older});
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_corruption, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_latest_fallback, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_hostile_files, Setup, Teardown),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
