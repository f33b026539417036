// daemon/base/parallel_copy.h: every byte of every piece lands where it should, whatever the
// mix of piece sizes, with the helper shared, busy, asleep or absent, and with callers
// racing for it.
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "daemon/base/parallel_copy.h"
#include "tests/cmocka_cpp.h"

namespace {

using mooncake::ParallelCopy;

// Pieces of the given sizes cut out of one source, copied by copier into a zeroed
// destination at a shifted layout; checks every byte, and that no byte outside a piece
// was written.
void CopyAndCheck(ParallelCopy* copier, const std::vector<size_t>& lengths, uint32_t seed) {
  size_t total = 0;
  for (size_t n : lengths) total += n;
  std::vector<char> src(total), dst(total + lengths.size() * 3 + 1, 0);
  std::mt19937 rng(seed);
  for (char& c : src) c = static_cast<char>(rng() | 1);  // never 0
  std::vector<ParallelCopy::Piece> pieces;
  size_t from = 0, to = 1;  // a gap of 3 zero bytes before each piece, 1 at the start
  for (size_t n : lengths) {
    pieces.push_back({dst.data() + to, src.data() + from, n});
    from += n;
    to += n + 3;
  }
  copier->Copy(pieces);
  from = 0;
  to = 1;
  assert_int_equal(dst[0], 0);
  for (size_t n : lengths) {
    assert_int_equal(std::memcmp(dst.data() + to, src.data() + from, n), 0);
    if (to + n + 3 <= dst.size()) {
      for (size_t g = 0; g < 3 && to + n + g < dst.size(); ++g) assert_int_equal(dst[to + n + g], 0);
    }
    from += n;
    to += n + 3;
  }
}

std::vector<std::vector<size_t>> Layouts() {
  return {
      {1u << 20},                                       // one big value
      {(1u << 20) + 7},                                 // not a multiple of a group
      std::vector<size_t>(128, 4096),                   // a batch of 4 KiB values
      std::vector<size_t>(300, 1000),                   // groups that end mid-piece count
      {3, ParallelCopy::kGroupBytes - 1, 5u << 20, 1},  // mixed, tiny ones around a huge one
      {100, 200},                                       // below the threshold: the caller alone
      {},
  };
}

void test_every_layout_copies_exactly(void**) {
  ParallelCopy copier;
  uint32_t seed = 1;
  for (int round = 0; round < 20; ++round) {
    for (const auto& layout : Layouts()) CopyAndCheck(&copier, layout, seed++);
  }
}

void test_helper_takes_a_share_of_big_copies(void**) {
  // No spinning: the helper sleeps between copies and every big one wakes it.
  ParallelCopy copier(256u << 10, 256u << 10, 0);
  for (int i = 0; i < 200 && copier.helper_bytes() == 0; ++i) {
    CopyAndCheck(&copier, {8u << 20}, 100 + i);
  }
  assert_true(copier.helper_bytes() > 0);
}

void test_without_helper_the_caller_copies(void**) {
  ParallelCopy copier(0);
  for (const auto& layout : Layouts()) CopyAndCheck(&copier, layout, 7);
  assert_int_equal(copier.helper_bytes(), 0);
}

void test_racing_callers(void**) {
  ParallelCopy copier;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&copier, t] {
      uint32_t seed = 1000 * (t + 1);
      for (int round = 0; round < 10; ++round) {
        for (const auto& layout : Layouts()) CopyAndCheck(&copier, layout, seed++);
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_layout_copies_exactly),
      cmocka_unit_test(test_helper_takes_a_share_of_big_copies),
      cmocka_unit_test(test_without_helper_the_caller_copies),
      cmocka_unit_test(test_racing_callers),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
