/* The batch paths (BATCH_PUT, BATCH_GET, BATCH_EXIST) against a real master and daemon:
 * a batch answers every key as the single call would have, in order, whatever the mix of
 * hits, misses, duplicates and bad entries; and the copies the daemon shares between two
 * threads (daemon/base/parallel_copy.h: a big value, a big batch) deliver every byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/cluster_test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define POOL (64 * MiB)

static mc_cluster *cluster;

static int setup_cluster(void **state) {
  (void)state;
  /* A long lease: the re-reads below must hit the read cache. The copy helper on (it is
   * off by default): the big copies below are shared with it. */
  static const char *const daemon_flags[] = {"--copy_helper_min", "256KiB", NULL};
  mc_cluster_options opts = {1, 512 * MiB, 10000, NULL, daemon_flags};
  cluster = mc_cluster_start_with(&opts);
  return cluster != NULL ? 0 : -1;
}

static int teardown_cluster(void **state) {
  (void)state;
  mc_cluster_stop(cluster);
  return 0;
}

static int setup(void **state) { return store_fixture_setup(state, cluster, 0, POOL); }

/* The key of slot i of a mixed batch: stored ("hit-<k>"), never stored ("miss-<k>"), a
 * key named twice, or not a key at all (empty). */
enum { N = 24 };
static const char *mixed_key(int i, char *buf, size_t n) {
  switch (i % 6) {
    case 0: snprintf(buf, n, "hit-%d", i / 6); break;
    case 1: snprintf(buf, n, "miss-%d", i); break;
    case 2: snprintf(buf, n, "hit-%d", (i / 6 + 1) % (N / 6)); break; /* another's key again */
    case 3: snprintf(buf, n, "hit-%d", i / 6); break;                 /* slot 0's key again */
    case 4: buf[0] = '\0'; break;                                     /* -600 */
    default: snprintf(buf, n, "hit-%d", (i / 6 + 2) % (N / 6)); break;
  }
  return buf;
}

static size_t hit_size(int k) { return 4 * KiB + (size_t)k * 517; }

static void put_hits(mooncake_store_t s) {
  char key[32];
  char *v = mooncake_store_alloc(s, 8 * KiB);
  assert_non_null(v);
  for (int k = 0; k < N / 6; ++k) {
    snprintf(key, sizeof(key), "hit-%d", k);
    fill_pattern(v, hit_size(k), 1000 + k);
    assert_int_equal(mooncake_store_put_from(s, key, v, hit_size(k), NULL), 0);
  }
  mooncake_store_free(s, v);
}

/* Each slot's result and bytes equal what get_into of that key alone returns; twice,
 * the second time from the read cache. */
static void test_batch_get_matches_single_gets(void **state) {
  mooncake_store_t s = ((store_fixture *)*state)->store;
  put_hits(s);
  char names[N][32];
  const char *keys[N];
  void *bufs[N];
  size_t sizes[N];
  int64_t got[N];
  char *single = mooncake_store_alloc(s, 8 * KiB);
  assert_non_null(single);
  for (int i = 0; i < N; ++i) {
    keys[i] = mixed_key(i, names[i], sizeof(names[i]));
    /* One slot's buffer is too small for its value: -600 for that slot only. */
    sizes[i] = i == 9 ? 100 : 8 * KiB;
    bufs[i] = mooncake_store_alloc(s, 8 * KiB);
    assert_non_null(bufs[i]);
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < N; ++i) memset(bufs[i], 0, 8 * KiB);
    assert_int_equal(mooncake_store_batch_get_into(s, keys, bufs, sizes, N, got), 0);
    for (int i = 0; i < N; ++i) {
      int64_t want = mooncake_store_get_into(s, keys[i], single, sizes[i]);
      assert_int_equal(got[i], want);
      if (want > 0) {
        int k = atoi(keys[i] + 4);
        assert_int_equal(want, (int64_t)hit_size(k));
        assert_int_equal(check_pattern(bufs[i], hit_size(k), 1000 + k), -1);
      }
    }
    assert_int_equal(got[1], MOONCAKE_STORE_OBJECT_NOT_FOUND);
    assert_int_equal(got[4], MOONCAKE_STORE_INVALID_PARAMS);
    assert_int_equal(got[9], MOONCAKE_STORE_INVALID_PARAMS);
    assert_true(got[0] > 0 && got[3] == got[0]);
  }
  for (int i = 0; i < N; ++i) mooncake_store_free(s, bufs[i]);
  mooncake_store_free(s, single);
}

/* Each slot's answer equals is_exist of that key alone. */
static void test_batch_exist_matches_single_calls(void **state) {
  mooncake_store_t s = ((store_fixture *)*state)->store;
  put_hits(s);
  char names[N][32];
  const char *keys[N];
  int got[N];
  for (int i = 0; i < N; ++i) keys[i] = mixed_key(i, names[i], sizeof(names[i]));
  assert_int_equal(mooncake_store_batch_is_exist(s, keys, N, got), 0);
  for (int i = 0; i < N; ++i) {
    assert_int_equal(got[i], mooncake_store_is_exist(s, keys[i]));
  }
  assert_int_equal(got[0], 1);
  assert_int_equal(got[1], 0);
  assert_true(got[4] < 0);
}

/* A key named twice in one batch put: both slots 0, and the first value stays (put never
 * overwrites); a bad slot is -600 and the others are stored. */
static void test_batch_put_duplicates_keep_the_first(void **state) {
  mooncake_store_t s = ((store_fixture *)*state)->store;
  enum { P = 5 };
  const char *keys[P] = {"dup", "one", "dup", "", "two"};
  void *bufs[P];
  size_t sizes[P];
  int got[P];
  for (int i = 0; i < P; ++i) {
    sizes[i] = 4 * KiB;
    bufs[i] = mooncake_store_alloc(s, sizes[i]);
    assert_non_null(bufs[i]);
    fill_pattern(bufs[i], sizes[i], 50 + i);
  }
  assert_int_equal(mooncake_store_batch_put_from(s, keys, bufs, sizes, P, NULL, got), 0);
  assert_int_equal(got[0], 0);
  assert_int_equal(got[1], 0);
  assert_int_equal(got[2], 0);
  assert_int_equal(got[3], MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(got[4], 0);
  char *out = mooncake_store_alloc(s, 4 * KiB);
  assert_int_equal(mooncake_store_get_into(s, "dup", out, 4 * KiB), (int64_t)(4 * KiB));
  assert_int_equal(check_pattern(out, 4 * KiB, 50), -1);
  assert_int_equal(mooncake_store_get_into(s, "two", out, 4 * KiB), (int64_t)(4 * KiB));
  assert_int_equal(check_pattern(out, 4 * KiB, 54), -1);
  mooncake_store_free(s, out);
  for (int i = 0; i < P; ++i) mooncake_store_free(s, bufs[i]);
}

/* Copies big enough to be shared with the copy helper: a 3 MiB + 5 value (put, first read,
 * re-read from the cache) and a batch of 128 x 4 KiB (put, get, re-read), every byte
 * checked each time. */
static void test_shared_copies_deliver_every_byte(void **state) {
  mooncake_store_t s = ((store_fixture *)*state)->store;
  const size_t big = 3 * MiB + 5;
  char *v = mooncake_store_alloc(s, big);
  char *out = mooncake_store_alloc(s, big);
  assert_non_null(v);
  assert_non_null(out);
  fill_pattern(v, big, 7);
  assert_int_equal(mooncake_store_put_from(s, "big", v, big, NULL), 0);
  for (int pass = 0; pass < 2; ++pass) {
    memset(out, 0, big);
    assert_int_equal(mooncake_store_get_into(s, "big", out, big), (int64_t)big);
    assert_int_equal(check_pattern(out, big, 7), -1);
  }
  enum { B = 128 };
  char names[B][32];
  const char *keys[B];
  void *bufs[B];
  size_t sizes[B];
  int put[B];
  int64_t got[B];
  char *area = mooncake_store_alloc(s, B * 4 * KiB);
  assert_non_null(area);
  for (int i = 0; i < B; ++i) {
    snprintf(names[i], sizeof(names[i]), "small-%d", i);
    keys[i] = names[i];
    bufs[i] = area + (size_t)i * 4 * KiB;
    sizes[i] = 4 * KiB;
    fill_pattern(bufs[i], sizes[i], 300 + i);
  }
  assert_int_equal(mooncake_store_batch_put_from(s, keys, bufs, sizes, B, NULL, put), 0);
  for (int i = 0; i < B; ++i) assert_int_equal(put[i], 0);
  for (int pass = 0; pass < 2; ++pass) {
    memset(area, 0, B * 4 * KiB);
    assert_int_equal(mooncake_store_batch_get_into(s, keys, bufs, sizes, B, got), 0);
    for (int i = 0; i < B; ++i) {
      assert_int_equal(got[i], (int64_t)(4 * KiB));
      assert_int_equal(check_pattern(bufs[i], 4 * KiB, 300 + i), -1);
    }
  }
  mooncake_store_free(s, area);
  mooncake_store_free(s, v);
  mooncake_store_free(s, out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_batch_get_matches_single_gets, setup,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_batch_exist_matches_single_calls, setup,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_batch_put_duplicates_keep_the_first, setup,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_shared_copies_deliver_every_byte, setup,
                                      store_fixture_teardown),
  };
  return cmocka_run_group_tests(tests, setup_cluster, teardown_cluster);
}
