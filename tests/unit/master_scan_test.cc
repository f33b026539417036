// Walks over every key in MasterService: RemoveByRegex runs RE2 (linear time, pattern size
// and compiled size capped) with no lock held, and every walk lets go of a shard's lock
// after a slice, so concurrent requests are answered meanwhile and objects that exist for
// the whole walk are never missed, even when inserts rehash the shard under it.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "master/directory/object_table.h"
#include "tests/harness/master_service_fixture.h"

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The shard MasterService keeps key in.
size_t ShardOf(const std::string& key) {
  return mooncake::ObjectTable::Hash(key) % MasterService::kShardCount;
}

// n keys "<prefix><i>" (for i from 0 on) that all live in shard.
std::vector<std::string> KeysInShard(const std::string& prefix, size_t shard, size_t n) {
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < n; ++i) {
    std::string key = prefix + std::to_string(i);
    if (ShardOf(key) == shard) keys.push_back(key);
  }
  return keys;
}

void test_patterns_refused(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "kept", 64);
  assert_int_equal(s.RemoveByRegex(std::string(MOONCAKE_STORE_MAX_PATTERN_LEN + 1, 'k'), true),
                   kBadParams);
  assert_int_equal(s.RemoveByRegex("(kept)\\1", true), kBadParams);  // RE2: no backreferences
  assert_int_equal(s.RemoveByRegex("(?=kept)", true), kBadParams);   // nor lookaround
  assert_int_equal(s.RemoveByRegex("(a{1000}){1000}", true), kBadParams);  // RE2's own limit
  // Short, but 370k instructions once compiled: more than kRegexMaxMem, refused unrun.
  std::string huge;
  while (huge.size() + 11 <= MOONCAKE_STORE_MAX_PATTERN_LEN) huge += "[a-z]{1000}";
  assert_int_equal(s.RemoveByRegex(huge, true), kBadParams);
  assert_int_equal(s.GetStats().objects, 1);
  // The longest pattern allowed runs (it matches "kept" nowhere).
  std::string longest = "^kept" + std::string(MOONCAKE_STORE_MAX_PATTERN_LEN - 5, 'x');
  assert_int_equal(s.RemoveByRegex(longest, true), 0);
  assert_int_equal(s.RemoveByRegex("^kep", true), 1);
}

// The issue's patterns, which made std::regex backtrack for ever: a 4 KiB key of 'a's
// against (?:a|a)*c, and 200 keys of 'a's then 'b' against (a+)+$. RE2 answers at once.
void test_backtracking_patterns_are_linear(void**) {
  MasterService s(Options());
  AddDaemon(s, 1, 16 * kMiB);
  Put(s, 1, std::string(MOONCAKE_STORE_MAX_KEY_LEN, 'a'), 64);
  for (int i = 0; i < 200; ++i) Put(s, 1, std::to_string(i) + std::string(40, 'a') + "b", 64);
  for (int i = 0; i < 7; ++i) Put(s, 1, "ends-" + std::to_string(i) + "-aaaa", 64);
  for (int i = 0; i < 5; ++i) Put(s, 1, "with-c-" + std::to_string(i), 64);
  Clock::time_point t0 = Clock::now();
  assert_int_equal(s.RemoveByRegex("(?:a|a)*c", true), 5);
  assert_int_equal(s.RemoveByRegex("(a+)+$", true), 7 + 1);  // and the 4 KiB key
  double took = SecondsSince(t0);
  print_message("both patterns over %d keys: %.1f ms\n", 213, took * 1000);
  // A hang guard: backtracking would take hours on these keys, RE2 takes microseconds, and
  // a loaded machine anything in between but never seconds.
  assert_true(took < 10.0);
  assert_int_equal(s.GetStats().objects, 200);
}

// Keys are bytes (Latin-1), as std::regex saw them: '.' is one byte, \xff matches 0xff.
void test_keys_are_bytes(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "k\xff", 64);
  Put(s, 1, "k\xc3\xa9", 64);  // "ké" in UTF-8: two bytes
  assert_int_equal(s.RemoveByRegex("^k.$", true), 1);
  assert_int_equal(s.ExistKey("k\xff"), 0);
  assert_int_equal(s.RemoveByRegex("^k..$", true), 1);
}

// A pattern that is slow but linear (about 50 ms per 4 KiB key) over keys all in one
// shard: the walk copies keys out under the lock and runs the pattern without it, so puts,
// reads and existence checks in that very shard never wait for the pattern.
void test_requests_answered_during_a_slow_pattern(void**) {
  MasterService s(Options());
  AddDaemon(s, 1, 64 * kMiB);
  const size_t shard = 7;
  std::vector<std::string> slow = KeysInShard(std::string(4000, 'a'), shard, 20);
  for (const std::string& key : slow) Put(s, 1, key, 64);
  std::vector<std::string> probes = KeysInShard("probe-", shard, 2000);
  Put(s, 1, probes[0], 64);
  std::string pattern;
  for (int i = 0; i < 4; ++i) pattern += "[a-z]{1000}";
  pattern += "z";  // never matches: every key costs the whole walk through it

  std::atomic<bool> done{false};
  double took = 0;
  std::thread remover([&] {
    Clock::time_point t0 = Clock::now();
    assert_int_equal(s.RemoveByRegex(pattern, true), 0);
    took = SecondsSince(t0);
    done = true;
  });
  double worst = 0;
  int ops = 0;
  for (size_t i = 1; !done.load() && i < probes.size(); ++i, ++ops) {
    Clock::time_point t0 = Clock::now();
    assert_int_equal(s.GetReplicaList(probes[0]).code, 0);
    assert_int_equal(s.ExistKey(probes[0]), 1);
    Put(s, 1, probes[i], 64);
    worst = std::max(worst, SecondsSince(t0));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  remover.join();
  print_message("pattern over %zu keys: %.2f s; %d rounds of requests in its shard, the "
                "slowest %.1f ms\n", slow.size(), took, ops, worst * 1000);
  assert_true(took > 0.5);  // the test shows something only if the pattern took a while
  assert_true(ops > 10);
  // Far below the pattern's time (a lock held while matching would show as all of it);
  // loose enough for a loaded machine.
  assert_true(worst < 0.25);
}

// ObjectTable::Walk in slices: erasing and inserting between slices leaves the cursor
// meaningful (every object there throughout is visited exactly once), and a rehash changes
// layout(), which is what tells a walker to start over.
void test_table_walk_in_slices(void**) {
  mooncake::ObjectTable table;
  auto insert = [&table](const std::string& key) {
    table.Insert(key, mooncake::ObjectTable::Hash(key), mooncake::ObjectMetadata());
  };
  for (int i = 0; i < 1000; ++i) insert("k" + std::to_string(i));
  const uint64_t layout = table.layout();
  std::vector<int> seen(1000, 0);
  size_t cursor = 0;
  int extra = 0;
  for (bool done = false; !done;) {
    done = table.Walk(&cursor, 100, [&](std::string_view key, mooncake::ObjectMetadata&) {
      if (key[0] == 'k') ++seen[std::stoi(std::string(key.substr(1)))];
      return key[0] == 'k' && std::stoi(std::string(key.substr(1))) % 2 == 0;  // erase evens
    });
    if (extra < 40) insert("x" + std::to_string(extra++));  // few: no rehash
  }
  assert_int_equal(table.layout(), layout);
  for (int n : seen) assert_int_equal(n, 1);
  assert_int_equal(table.size(), 500 + static_cast<size_t>(extra));
  for (int i = 0; i < 2000; ++i) insert("y" + std::to_string(i));
  assert_int_not_equal(table.layout(), layout);
}

// The same in MasterService, with inserts into the very shard being walked. It holds 390
// objects in 1024 slots (4 slices), 10 of them bait on which the pattern costs some 13 ms
// each, so the walk takes a while; 50 ms into it, 4000 inserts grow the table three times
// over, so the walk most likely starts over, more than once. Every object there for the
// whole walk is still found, by removal by pattern and by RemoveAll.
void test_walks_survive_rehashing(void**) {
  const size_t shard = 3;
  const std::vector<std::string> old_keys = KeysInShard("old/", shard, 380);
  const std::vector<std::string> bait_keys = KeysInShard(std::string(2100, 'b'), shard, 10);
  const std::vector<std::string> new_keys = KeysInShard("new/", shard, 4000);
  const int64_t kOld = static_cast<int64_t>(old_keys.size());
  const int64_t kOthers = static_cast<int64_t>(bait_keys.size() + new_keys.size());
  for (bool by_pattern : {true, false}) {
    MasterService s(Options());
    AddDaemon(s, 1, 64 * kMiB);
    for (const std::string& key : old_keys) Put(s, 1, key, 64);
    for (const std::string& key : bait_keys) Put(s, 1, key, 64);
    std::thread inserter([&] {
      if (by_pattern) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (const std::string& key : new_keys) Put(s, 1, key, 64);
    });
    Clock::time_point t0 = Clock::now();
    int64_t removed =
        by_pattern ? s.RemoveByRegex("^old/|[a-z]{1000}[a-z]{1000}#", true) : s.RemoveAll(true);
    double took = SecondsSince(t0);
    inserter.join();
    int64_t left = s.GetStats().objects;
    print_message("%s: removed %lld in %.0f ms, %zu inserts into the same shard running\n",
                  by_pattern ? "by pattern" : "all", static_cast<long long>(removed),
                  took * 1000, new_keys.size());
    for (const std::string& key : old_keys) assert_int_equal(s.ExistKey(key), 0);
    if (by_pattern) {
      assert_int_equal(removed, kOld);
      assert_int_equal(left, kOthers);
    } else {
      assert_true(removed >= kOld + static_cast<int64_t>(bait_keys.size()));
      assert_int_equal(removed + left, kOld + kOthers);  // each new one removed or kept, once
    }
  }
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_patterns_refused),
      cmocka_unit_test(test_backtracking_patterns_are_linear),
      cmocka_unit_test(test_keys_are_bytes),
      cmocka_unit_test(test_requests_answered_during_a_slow_pattern),
      cmocka_unit_test(test_table_walk_in_slices),
      cmocka_unit_test(test_walks_survive_rehashing),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
