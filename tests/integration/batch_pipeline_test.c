/* Batches bigger than one chunk of the daemon's pipelined master calls
 * (MasterClient::BatchGetReplicaListPipelined and BatchPutStartPipelined, chunks of
 * StoreService::kMasterChunk keys, up to four in flight):
 *  - a batch get answers every slot as get_into of its key alone would, in order, across
 *    every chunk boundary, whatever the mix of hits, misses, duplicates, bad keys and short
 *    buffers; the second pass is served by the read cache the chunks filled, and a value
 *    rewritten between passes is never answered stale. With keys of 3000 bytes a chunk
 *    carries more than the pipeline lets travel beyond the first chunk in flight
 *    (MasterClient::kPipelineBytes), so the chunks go one at a time, and still answer
 *    every slot;
 *  - a batch put answers every entry as put_from would have, in order: new keys are
 *    stored, keys stored before keep their old value (0), a key named twice in different
 *    chunks keeps its first value, an empty key fails alone; every stored byte reads back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define POOL (64 * MiB)

static mc_cluster *cluster;

static int setup_cluster(void **state) {
  (void)state;
  /* A long lease: the second pass must be served by the read cache. */
  mc_cluster_options opts = {1, 256 * MiB, 10000, NULL, NULL};
  cluster = mc_cluster_start_with(&opts);
  return cluster != NULL ? 0 : -1;
}

static int teardown_cluster(void **state) {
  (void)state;
  mc_cluster_stop(cluster);
  return 0;
}

static int setup(void **state) { return store_fixture_setup(state, cluster, 0, POOL); }

/* Nine chunks and a part of a tenth (the daemon's chunk is 32 keys). */
enum { B = 300, STORED = 200 };

/* Slot i: a stored key mostly; a miss every 7th slot, a repeat of slot i - 63 every 11th
 * (the same key in two chunks), an empty key at 64 and 191 (-600), and the stored key of
 * slot 127 with a buffer too small for it (-600 for that slot only). */
static const char *slot_key(int i, char *buf, size_t n) {
  if (i == 64 || i == 191) {
    buf[0] = '\0';
  } else if (i % 7 == 3) {
    snprintf(buf, n, "p-miss-%d", i);
  } else if (i % 11 == 5 && i >= 63) {
    snprintf(buf, n, "p-%d", (i - 63) % STORED);
  } else {
    snprintf(buf, n, "p-%d", i % STORED);
  }
  return buf;
}

static size_t value_size(int k) { return 1 * KiB + (size_t)(k % 5) * 300; }

static void put_value(mooncake_store_t s, int k, uint64_t seed, int upsert) {
  char key[32];
  char *v = mooncake_store_alloc(s, 4 * KiB);
  assert_non_null(v);
  snprintf(key, sizeof(key), "p-%d", k);
  fill_pattern(v, value_size(k), seed);
  if (upsert) {
    assert_int_equal(mooncake_store_upsert_from(s, key, v, value_size(k), NULL), 0);
  } else {
    assert_int_equal(mooncake_store_put_from(s, key, v, value_size(k), NULL), 0);
  }
  mooncake_store_free(s, v);
}

static void test_chunked_batch_get_matches_single_gets(void **state) {
  mooncake_store_t s = ((store_fixture *)*state)->store;
  for (int k = 0; k < STORED; ++k) put_value(s, k, 5000 + k, 0);
  static char names[B][32];
  const char *keys[B];
  void *bufs[B];
  size_t sizes[B];
  int64_t got[B];
  char *area = mooncake_store_alloc(s, B * 4 * KiB);
  char *single = mooncake_store_alloc(s, 4 * KiB);
  assert_non_null(area);
  assert_non_null(single);
  for (int i = 0; i < B; ++i) {
    keys[i] = slot_key(i, names[i], sizeof(names[i]));
    bufs[i] = area + (size_t)i * 4 * KiB;
    sizes[i] = i == 127 ? 100 : 4 * KiB;
  }
  for (int pass = 0; pass < 3; ++pass) {
    /* Before the last pass a value read by the two passes before is replaced: the cache
     * the chunks filled must not answer its old bytes. */
    if (pass == 2) put_value(s, 70, 9070, 1);
    memset(area, 0, B * 4 * KiB);
    assert_int_equal(mooncake_store_batch_get_into(s, keys, bufs, sizes, B, got), 0);
    for (int i = 0; i < B; ++i) {
      int64_t want = mooncake_store_get_into(s, keys[i], single, sizes[i]);
      assert_int_equal(got[i], want);
      if (want > 0) {
        int k = atoi(keys[i] + 2);
        uint64_t seed = pass == 2 && k == 70 ? 9070 : 5000 + (uint64_t)k;
        assert_int_equal(want, (int64_t)value_size(k));
        assert_int_equal(check_pattern(bufs[i], value_size(k), seed), -1);
      }
    }
    assert_int_equal(got[3], MOONCAKE_STORE_OBJECT_NOT_FOUND);
    assert_int_equal(got[64], MOONCAKE_STORE_INVALID_PARAMS);
    assert_int_equal(got[191], MOONCAKE_STORE_INVALID_PARAMS);
    assert_int_equal(got[127], MOONCAKE_STORE_INVALID_PARAMS);
    assert_int_equal(got[299], (int64_t)value_size(99));
  }
  mooncake_store_free(s, single);
  mooncake_store_free(s, area);
}

enum { LONG_KEYS = 96, LONG_KEY_BYTES = 3000 };

static void test_long_keys_go_one_chunk_at_a_time(void **state) {
  mooncake_store_t s = ((store_fixture *)*state)->store;
  static char names[LONG_KEYS][LONG_KEY_BYTES + 1];
  const char *keys[LONG_KEYS];
  void *bufs[LONG_KEYS];
  size_t sizes[LONG_KEYS];
  int64_t got[LONG_KEYS];
  char *area = mooncake_store_alloc(s, LONG_KEYS * 4 * KiB);
  assert_non_null(area);
  for (int i = 0; i < LONG_KEYS; ++i) {
    int n = snprintf(names[i], sizeof(names[i]), "long-%d-", i);
    memset(names[i] + n, 'k', LONG_KEY_BYTES - (size_t)n);
    names[i][LONG_KEY_BYTES] = '\0';
    keys[i] = names[i];
    bufs[i] = area + (size_t)i * 4 * KiB;
    sizes[i] = 4 * KiB;
    fill_pattern(bufs[i], value_size(i), 7000 + (uint64_t)i);
    if (i % 5 != 4) {  /* every fifth is a miss */
      assert_int_equal(mooncake_store_put_from(s, keys[i], bufs[i], value_size(i), NULL), 0);
    }
  }
  memset(area, 0, LONG_KEYS * 4 * KiB);
  assert_int_equal(mooncake_store_batch_get_into(s, keys, bufs, sizes, LONG_KEYS, got), 0);
  for (int i = 0; i < LONG_KEYS; ++i) {
    if (i % 5 == 4) {
      assert_int_equal(got[i], MOONCAKE_STORE_OBJECT_NOT_FOUND);
      continue;
    }
    assert_int_equal(got[i], (int64_t)value_size(i));
    assert_int_equal(check_pattern(bufs[i], value_size(i), 7000 + (uint64_t)i), -1);
  }
  mooncake_store_free(s, area);
}

enum { PUTS = 300 };

static void test_chunked_batch_put_matches_single_puts(void **state) {
  mooncake_store_t s = ((store_fixture *)*state)->store;
  static char names[PUTS][32];
  const char *keys[PUTS];
  void *bufs[PUTS];
  size_t sizes[PUTS];
  int got[PUTS];
  char *area = mooncake_store_alloc(s, PUTS * 4 * KiB);
  char *out = mooncake_store_alloc(s, 4 * KiB);
  assert_non_null(area);
  assert_non_null(out);
  /* Slot i: a new key, except every 13th (stored before, with another value), 150 (the
   * key of slot 40 again, three chunks later) and 77 (empty). */
  for (int i = 0; i < PUTS; ++i) {
    if (i == 77) {
      names[i][0] = '\0';
    } else {
      snprintf(names[i], sizeof(names[i]), "bp-%d", i == 150 ? 40 : i);
    }
    keys[i] = names[i];
    bufs[i] = area + (size_t)i * 4 * KiB;
    sizes[i] = value_size(i);
    fill_pattern(bufs[i], sizes[i], 8000 + (uint64_t)i);
    if (i % 13 == 6) {
      char *old = mooncake_store_alloc(s, 4 * KiB);
      assert_non_null(old);
      fill_pattern(old, 512, 100 + (uint64_t)i);
      assert_int_equal(mooncake_store_put_from(s, keys[i], old, 512, NULL), 0);
      mooncake_store_free(s, old);
    }
  }
  assert_int_equal(mooncake_store_batch_put_from(s, keys, bufs, sizes, PUTS, NULL, got), 0);
  for (int i = 0; i < PUTS; ++i) {
    assert_int_equal(got[i], i == 77 ? MOONCAKE_STORE_INVALID_PARAMS : 0);
    if (i == 77) continue;
    int64_t n = mooncake_store_get_into(s, keys[i], out, 4 * KiB);
    if (i % 13 == 6) {  /* stored before: the old value stays */
      assert_int_equal(n, 512);
      assert_int_equal(check_pattern(out, 512, 100 + (uint64_t)i), -1);
    } else if (i == 150) {  /* slot 40's key: the first value stays */
      assert_int_equal(n, (int64_t)value_size(40));
      assert_int_equal(check_pattern(out, (size_t)n, 8000 + 40), -1);
    } else {
      assert_int_equal(n, (int64_t)value_size(i));
      assert_int_equal(check_pattern(out, (size_t)n, 8000 + (uint64_t)i), -1);
    }
  }
  mooncake_store_free(s, out);
  mooncake_store_free(s, area);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_chunked_batch_get_matches_single_gets, setup,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_long_keys_go_one_chunk_at_a_time, setup,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_chunked_batch_put_matches_single_puts, setup,
                                      store_fixture_teardown),
  };
  return cmocka_run_group_tests(tests, setup_cluster, teardown_cluster);
}
