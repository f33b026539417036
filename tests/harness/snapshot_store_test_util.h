// What the SnapshotStore suites (snapshot_store_test, snapshot_store_damage_test) share:
// reading and writing whole files, sealing a body the way the writer does, checks that
// name what differs, writing standard snapshots, and the fixture of a fresh directory.
// A suite that includes it lists <fstream> and <sstream> among its own standard headers, which
// come before tests/harness/cmocka_cpp.h: cmocka's fail() macro breaks <ios> included after it.
#ifndef MOONCAKE_TESTS_SNAPSHOT_STORE_TEST_UTIL_H_
#define MOONCAKE_TESTS_SNAPSHOT_STORE_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/base/crc32c.h"
#include "master/snapshot/snapshot_format.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/snapshot_writer.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"

namespace mooncake {
namespace snapshot_store_test {

using Extra = std::vector<std::pair<std::string, std::string>>;
using Payloads = std::vector<std::pair<std::string, std::string>>;

inline constexpr int64_t kMs = 1700000000000;

// ---- files ----------------------------------------------------------------------------------

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  assert_true(out.good());
}

inline std::string Hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

// body + its "crc32c" line: a file the way the writer seals it.
inline std::string Seal(const std::string& body) {
  return body + "crc32c " + Hex8(mooncake::Crc32c(body.data(), body.size())) + "\n";
}

// ---- checks ---------------------------------------------------------------------------------

inline void ExpectContains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) == std::string::npos) {
    fail_msg("\"%s\" does not contain \"%s\"", haystack.c_str(), needle.c_str());
  }
}

inline void ExpectNames(const std::vector<std::string>& got, const std::vector<std::string>& want) {
  if (got != want) {
    std::string g, w;
    for (const auto& s : got) g += s + " ";
    for (const auto& s : want) w += s + " ";
    fail_msg("candidates [%s], expected [%s]", g.c_str(), w.c_str());
  }
}

inline void ExpectOk(ErrorCode code, const std::string& error) {
  if (code != ErrorCode::OK) fail_msg("code %d: %s", static_cast<int>(code), error.c_str());
}

// ---- writing --------------------------------------------------------------------------------

inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

// Writes and publishes one snapshot; returns its name.
inline std::string WriteSnapshot(const std::string& dir, uint64_t sequence, int64_t created_ms,
                                 const Payloads& payloads, const Extra& extra = {}) {
  SnapshotWriter w(dir, sequence, created_ms);
  std::string error;
  ExpectOk(w.Begin(&error), error);
  for (const auto& p : payloads) {
    ExpectOk(w.OpenPayload(p.first, &error), error);
    ExpectOk(w.Append(p.second, &error), error);
    ExpectOk(w.ClosePayload(&error), error);
  }
  ExpectOk(w.Publish(extra, &error), error);
  assert_string_equal(w.name().c_str(), SnapshotName(sequence, created_ms).c_str());
  return w.name();
}

// The usual payloads of a snapshot numbered n.
inline Payloads Standard(uint64_t n) {
  return {{"segments", RandomBytes(10000 + n, n)}, {"metadata", RandomBytes(50000 + n, 100 + n)}};
}

inline void ExpectLoads(const SnapshotStore& store, const std::string& name,
                        const Payloads& payloads) {
  std::string why;
  Result<LoadedSnapshot> r = store.Load(name, &why);
  if (!r.ok()) fail_msg("Load(%s): %d: %s", name.c_str(), static_cast<int>(r.code()), why.c_str());
  assert_int_equal(r.value().payloads.size(), payloads.size());
  for (const auto& p : payloads) {
    auto it = r.value().payloads.find(p.first);
    assert_true(it != r.value().payloads.end());
    assert_true(it->second == p.second);
  }
}

// ---- fixture: a fresh directory per test -----------------------------------------------------

inline int Setup(void** state) {
  std::string dir = mooncake::testing::MakeTempDir("snapshot_store_test.");
  if (dir.empty()) return -1;
  *state = new std::string(dir + "/snap");  // below the temp dir: Begin creates it
  return 0;
}

inline int Teardown(void** state) {
  auto* dir = static_cast<std::string*>(*state);
  mooncake::testing::RemoveTree(dir->substr(0, dir->rfind('/')));
  delete dir;
  return 0;
}

inline const std::string& Dir(void** state) { return *static_cast<std::string*>(*state); }

}  // namespace snapshot_store_test
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_SNAPSHOT_STORE_TEST_UTIL_H_
