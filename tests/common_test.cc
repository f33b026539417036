// common/: the result-code table, size and duration parsing, flags and config files,
// CRC-32C.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/base/crc32c.h"
#include "common/base/error_code.h"
#include "common/base/flags.h"
#include "common/base/units.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using namespace mooncake;

namespace {

void test_error_table(void** state) {
  (void)state;
  // Every code of the table is distinct, named, and has a text; the C names match.
  std::set<int32_t> seen;
#define CHECK_ENTRY(name, value, text)                                  \
  assert_true(seen.insert(value).second);                               \
  assert_string_equal(ErrorName(value), #name);                         \
  assert_string_equal(mooncake_store_strerror(value), text);            \
  assert_int_equal(static_cast<int32_t>(ErrorCode::name), value);       \
  assert_int_equal(MOONCAKE_STORE_##name, value);
  MOONCAKE_STORE_ERROR_TABLE(CHECK_ENTRY)
#undef CHECK_ENTRY
  // Mooncake's values for the codes callers test against.
  assert_int_equal(MOONCAKE_STORE_OBJECT_NOT_FOUND, -704);
  assert_int_equal(MOONCAKE_STORE_INVALID_PARAMS, -600);
  assert_int_equal(MOONCAKE_STORE_NO_AVAILABLE_HANDLE, -200);
  assert_int_equal(MOONCAKE_STORE_RPC_FAIL, -900);
  assert_string_equal(mooncake_store_strerror(12345), "unknown error code");
  assert_false(IsKnownErrorCode(12345));
}

void test_sizes(void** state) {
  (void)state;
  uint64_t v = 0;
  assert_true(ParseSize("4096", &v));
  assert_int_equal(v, 4096);
  assert_true(ParseSize("16MB", &v));
  assert_int_equal(v, 16ull << 20);
  assert_true(ParseSize("16 MB", &v));
  assert_int_equal(v, 16ull << 20);
  assert_true(ParseSize("4 GB", &v));
  assert_int_equal(v, 4ull << 30);
  assert_true(ParseSize("1GiB", &v));
  assert_int_equal(v, 1ull << 30);
  assert_true(ParseSize("1.5k", &v));
  assert_int_equal(v, 1536);
  assert_true(ParseSize("2tb", &v));
  assert_int_equal(v, 2ull << 40);
  assert_true(ParseSize("18446744073709551615", &v));  // whole bytes are read exactly
  assert_true(v == UINT64_MAX);
  // A bare number is whole bytes: a fraction needs a unit ("1.5" once made 2 bytes).
  for (const char* bad : {"50%", "-1", "", "MB", "12XB", "1.2.3", "99999999999T", "1.5",
                          "1.5B", "0.5", "4096.", "18446744073709551616"}) {
    assert_false(ParseSize(bad, &v));
  }
}

void test_durations(void** state) {
  (void)state;
  int64_t ms = 0;
  assert_true(ParseDuration("10000", 1, &ms));
  assert_int_equal(ms, 10000);
  assert_true(ParseDuration("10", 1000, &ms));  // a bare number is in the flag's unit
  assert_int_equal(ms, 10000);
  assert_true(ParseDuration("250ms", 1000, &ms));
  assert_int_equal(ms, 250);
  assert_true(ParseDuration("1.5s", 1, &ms));
  assert_int_equal(ms, 1500);
  assert_true(ParseDuration("5m", 1, &ms));
  assert_int_equal(ms, 300000);
  assert_true(ParseDuration("1h", 1, &ms));
  assert_int_equal(ms, 3600000);
  for (const char* bad : {"-5s", "5 days", "s", ""}) assert_false(ParseDuration(bad, 1, &ms));
}

struct Flags {
  std::string name = "default";
  int64_t count = 1;
  double ratio = 0.5;
  bool verbose = false;
  uint64_t size = 0;
  int64_t ttl_ms = 0;
  std::string mode = "a";
  FlagSet set{"prog", "test"};
  Flags() {
    set.AddString("name", &name, "");
    set.AddInt("count", &count, "");
    set.AddDouble("ratio", &ratio, "");
    set.AddBool("verbose", &verbose, "");
    set.AddSize("size", &size, "");
    set.AddDuration("ttl_sec", &ttl_ms, 1000, "");
    set.AddChoice("mode", &mode, {"a", "b"}, "");
  }
  bool Parse(std::vector<std::string> args, std::string* error) {
    args.insert(args.begin(), "prog");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return set.Parse(static_cast<int>(argv.size()), argv.data(), error);
  }
};

void test_flags(void** state) {
  (void)state;
  std::string error;
  Flags f;
  assert_true(f.Parse({"--name", "x", "--count=3", "--verbose", "--size", "16MB", "--ttl_sec",
                       "2", "--mode", "b", "--ratio", "0.25"},
                      &error));
  assert_string_equal(f.name.c_str(), "x");
  assert_int_equal(f.count, 3);
  assert_true(f.verbose);
  assert_int_equal(f.size, 16 << 20);
  assert_int_equal(f.ttl_ms, 2000);
  assert_string_equal(f.mode.c_str(), "b");
  assert_true(f.ratio == 0.25);

  Flags g;
  assert_false(g.Parse({"--nope", "1"}, &error));
  assert_non_null(strstr(error.c_str(), "--nope"));
  Flags h;
  assert_false(h.Parse({"--count", "three"}, &error));
  assert_non_null(strstr(error.c_str(), "--count"));
  Flags i;
  assert_false(i.Parse({"--mode", "c"}, &error));
  Flags j;
  assert_false(j.Parse({"--count"}, &error));
  Flags k;
  assert_true(k.Parse({"--verbose", "false", "--count", "2"}, &error));
  assert_false(k.verbose);
}

void WriteFile(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  assert_non_null(f);
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

void test_config_files(void** state) {
  (void)state;
  std::string dir = testing::MakeTempDir("mc-config-");
  std::string error;

  WriteFile(dir + "/c.yaml", "name: from-file\ncount: 9\nsize: 4 GB\nttl_sec: 500ms\n");
  Flags yaml;
  assert_true(yaml.Parse({"--config", dir + "/c.yaml", "--count", "2"}, &error));
  assert_string_equal(yaml.name.c_str(), "from-file");
  assert_int_equal(yaml.count, 2);  // the command line wins
  assert_int_equal(yaml.size, 4ull << 30);
  assert_int_equal(yaml.ttl_ms, 500);

  WriteFile(dir + "/c.json", "{\"name\": \"json\", \"verbose\": true, \"ratio\": 0.75}");
  Flags json;
  assert_true(json.Parse({"--config=" + dir + "/c.json"}, &error));
  assert_string_equal(json.name.c_str(), "json");
  assert_true(json.verbose);
  assert_true(json.ratio == 0.75);

  WriteFile(dir + "/bad.yaml", "typo_key: 1\n");
  Flags bad;
  assert_false(bad.Parse({"--config", dir + "/bad.yaml"}, &error));
  assert_non_null(strstr(error.c_str(), "typo_key"));

  Flags missing;
  assert_false(missing.Parse({"--config", dir + "/none.yaml"}, &error));
  testing::RemoveTree(dir);
}

// Known answers: the check value of the CRC catalogue and RFC 3720 appendix B.4.
void test_crc32c_vectors(void** state) {
  (void)state;
  assert_int_equal(Crc32c("123456789", 9), 0xE3069283u);
  assert_int_equal(Crc32c("", 0), 0);
  uint8_t buf[32];
  std::memset(buf, 0, sizeof(buf));
  assert_int_equal(Crc32c(buf, sizeof(buf)), 0x8A9136AAu);
  std::memset(buf, 0xFF, sizeof(buf));
  assert_int_equal(Crc32c(buf, sizeof(buf)), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  assert_int_equal(Crc32c(buf, sizeof(buf)), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
  assert_int_equal(Crc32c(buf, sizeof(buf)), 0x113FDB5Cu);
  assert_int_equal(Crc32cExtendPortable(0, "123456789", 9), 0xE3069283u);
}

// The hardware path (when the CPU has one) against the table, at every alignment and at
// lengths around its stream sizes (3 x 256 and 3 x 8192 bytes) as well as random ones.
void test_crc32c_hardware_matches_portable(void** state) {
  (void)state;
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf((1 << 20) + 64);
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  auto check = [&](size_t offset, size_t n) {
    const uint8_t* p = buf.data() + offset;
    assert_int_equal(Crc32cExtend(0, p, n), Crc32cExtendPortable(0, p, n));
    assert_int_equal(Crc32cExtend(0x12345678, p, n), Crc32cExtendPortable(0x12345678, p, n));
  };
  for (int i = 0; i < 2000; ++i) check(rng() % 64, rng() % 10001);
  for (size_t n : {767, 768, 775, 24575, 24576, 24583, 49152 + 800, 1 << 20}) {
    for (size_t offset = 0; offset < 9; ++offset) check(offset, n);
  }
}

void test_crc32c_extend(void** state) {
  (void)state;
  std::mt19937_64 rng(11);
  std::vector<uint8_t> buf(100000);
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  uint32_t whole = Crc32c(buf.data(), buf.size());
  for (int round = 0; round < 50; ++round) {
    uint32_t crc = 0;
    uint32_t portable = 0;
    for (size_t at = 0; at < buf.size();) {
      size_t n = std::min<size_t>(buf.size() - at, rng() % 30000);
      crc = Crc32cExtend(crc, buf.data() + at, n);
      portable = Crc32cExtendPortable(portable, buf.data() + at, n);
      at += n;
    }
    assert_int_equal(crc, whole);
    assert_int_equal(portable, whole);
  }
}

void test_crc32c_combine(void** state) {
  (void)state;
  std::mt19937_64 rng(12);
  std::vector<uint8_t> buf(300000);
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  for (int round = 0; round < 200; ++round) {
    size_t n = rng() % buf.size();
    size_t cut = n == 0 ? 0 : rng() % (n + 1);
    uint32_t a = Crc32c(buf.data(), cut);
    uint32_t b = Crc32c(buf.data() + cut, n - cut);
    assert_int_equal(Crc32cCombine(a, b, n - cut), Crc32c(buf.data(), n));
  }
  assert_int_equal(Crc32cCombine(0x12345678, 0, 0), 0x12345678);  // b empty
  // Lengths past 4 GiB: the same as combining twice.
  uint32_t a = Crc32c(buf.data(), 1000);
  uint64_t big = (5ull << 30) + 3;
  assert_int_equal(Crc32cCombine(Crc32cCombine(a, 0, big), 0, 1),
                   Crc32cCombine(a, 0, big + 1));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_table), cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_durations),   cmocka_unit_test(test_flags),
      cmocka_unit_test(test_config_files),
      cmocka_unit_test(test_crc32c_vectors),
      cmocka_unit_test(test_crc32c_hardware_matches_portable),
      cmocka_unit_test(test_crc32c_extend),
      cmocka_unit_test(test_crc32c_combine),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
