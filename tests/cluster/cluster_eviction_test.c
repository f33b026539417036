/* Eviction under pressure, through the C ABI on a real master and two real daemons A and
 * B (indices 0 and 1), scaled down from issue 13 with its ratios kept:
 *  - an application on B polls batch_is_exist over every key written so far while one on
 *    A writes three times the cluster's memory in batches of 128 x 64 KiB: every entry is
 *    stored, usage is at or under the high watermark after every batch (so after every
 *    eviction round), and the newest keys -- half the memory's worth -- read back intact;
 *  - a pool full of leased objects: a put answers -200 after the daemon's
 *    --put_no_space_wait (a batch too, per entry, in the same time), evicting nothing, and
 *    a put issued just before the oldest lease ends waits for it and succeeds;
 *  - hard pins survive any pressure; soft pins outlive every plain object, then go oldest
 *    first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define MiB ((size_t)1 << 20)
#define KEY_LEN 32

enum { A = 0, B = 1 };

static void name_key(char *out, const char *prefix, int i) {
  snprintf(out, KEY_LEN, "%s-%05d", prefix, i);
}

static mc_cluster_eviction_stats stats_of(const mc_cluster *c) {
  mc_cluster_eviction_stats s;
  assert_int_equal(mc_cluster_eviction_stats_get(c, &s), 0);
  return s;
}

/* ---- batch_is_exist polling while a batch writer fills three times the memory ---------- */

#define SEGMENT (64 * MiB) /* per daemon: 128 MiB in all (the issue: 2 x 256 MB) */
#define OBJ (64 * 1024)
#define BATCH 128
#define BATCHES ((int)(3 * 2 * SEGMENT / (BATCH * OBJ))) /* 48: three times the memory */
#define KEYS (BATCHES * BATCH)                           /* 6144 */
#define NEWEST 1024 /* half the memory's worth, read back at the end (the issue: 1,024) */

typedef struct poller {
  mooncake_store_t store;
  const char **keys;
  atomic_int written; /* keys [0, written) are stored: poll them */
  atomic_int stop;
  /* Written by the polling thread, read after it is joined. */
  int loops;
  int64_t hits;
  int errors;
} poller;

/* The engine's prefix lookup: batch_is_exist over every key written so far, in a loop. */
static void *poll_existence(void *arg) {
  poller *p = arg;
  int *present = malloc(KEYS * sizeof(int));
  while (!atomic_load(&p->stop)) {
    int n = atomic_load(&p->written);
    if (n == 0) {
      usleep(1000);
      continue;
    }
    if (mooncake_store_batch_is_exist(p->store, p->keys, (size_t)n, present) != 0) ++p->errors;
    for (int i = 0; i < n; ++i) {
      if (present[i] == 1) ++p->hits;
      if (present[i] < 0) ++p->errors;
    }
    ++p->loops;
  }
  free(present);
  return NULL;
}

static void test_existence_polling_does_not_starve_eviction(void **state) {
  (void)state;
  /* The read lease at its production default: before, every poll renewed it. */
  mc_cluster_options opts = {2, SEGMENT, 10000, NULL, NULL};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t a = connect_app(c, A, 2 * BATCH * OBJ);
  mooncake_store_t b = connect_app(c, B, 2 * BATCH * OBJ);
  char(*names)[KEY_LEN] = malloc((size_t)KEYS * KEY_LEN);
  const char **keys = malloc(KEYS * sizeof(char *));
  for (int i = 0; i < KEYS; ++i) {
    name_key(names[i], "prefix", i);
    keys[i] = names[i];
  }
  char *area = mooncake_store_alloc(a, BATCH * OBJ);
  assert_non_null(area);
  void *bufs[BATCH];
  size_t sizes[BATCH];
  for (int j = 0; j < BATCH; ++j) {
    bufs[j] = area + (size_t)j * OBJ;
    sizes[j] = OBJ;
  }

  poller p = {.store = b, .keys = keys};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, poll_existence, &p), 0);
  mc_cluster_eviction_stats s = stats_of(c);
  const int64_t watermark = (int64_t)(0.9 * (double)s.capacity_bytes);
  int64_t peak = 0, rounds_seen = 0;
  double t0 = now_seconds();
  for (int r = 0; r < BATCHES; ++r) {
    for (int j = 0; j < BATCH; ++j) fill_pattern(bufs[j], OBJ, (uint64_t)(r * BATCH + j));
    int results[BATCH];
    assert_int_equal(mooncake_store_batch_put_from(a, keys + r * BATCH, bufs, sizes, BATCH, NULL,
                                                   results),
                     0);
    for (int j = 0; j < BATCH; ++j) {
      if (results[j] != 0) fprintf(stderr, "batch %d entry %d: %d\n", r, j, results[j]);
      assert_int_equal(results[j], 0);
    }
    atomic_store(&p.written, (r + 1) * BATCH);
    s = stats_of(c);
    if (s.used_bytes > peak) peak = s.used_bytes;
    assert_true(s.used_bytes <= watermark);
    if (s.rounds > rounds_seen) assert_true(s.last_used_bytes <= watermark);
    rounds_seen = s.rounds;
  }
  double elapsed = now_seconds() - t0;
  atomic_store(&p.stop, 1);
  pthread_join(thread, NULL);

  s = stats_of(c);
  fprintf(stderr,
          "%d batches in %.2f s (%.0f MiB/s); %d polls (%lld hits); %lld eviction rounds "
          "(%lld by puts, %lld short), %lld objects evicted, longest %lld us, mean %lld us; "
          "peak use %.1f%%; %lld existence hits counted as uses\n",
          BATCHES, elapsed, (double)KEYS * OBJ / MiB / elapsed, p.loops, (long long)p.hits,
          (long long)s.rounds, (long long)s.put_rounds, (long long)s.short_rounds,
          (long long)s.evicted_objects, (long long)s.max_us,
          (long long)(s.rounds > 0 ? s.total_us / s.rounds : 0),
          100.0 * (double)peak / (double)s.capacity_bytes, (long long)s.exist_uses);
  assert_int_equal(p.errors, 0);
  assert_true(p.loops >= 5);
  assert_true(s.exist_uses > 0);
  assert_true(s.exist_uses <= KEYS); /* once per key: the polls renewed nothing */
  assert_true(s.rounds > 0);
  assert_true(s.evicted_objects >= KEYS - (int64_t)(s.capacity_bytes / OBJ));

  /* The newest keys read back from B, every byte right. */
  char *out = mooncake_store_alloc(b, BATCH * OBJ);
  assert_non_null(out);
  void *outs[BATCH];
  for (int j = 0; j < BATCH; ++j) outs[j] = out + (size_t)j * OBJ;
  for (int first = KEYS - NEWEST; first < KEYS; first += BATCH) {
    int64_t got[BATCH];
    assert_int_equal(mooncake_store_batch_get_into(b, keys + first, outs, sizes, BATCH, got), 0);
    for (int j = 0; j < BATCH; ++j) {
      if (got[j] != (int64_t)OBJ) fprintf(stderr, "%s: %lld\n", keys[first + j], (long long)got[j]);
      assert_int_equal(got[j], (int64_t)OBJ);
      assert_int_equal(check_pattern(outs[j], OBJ, (uint64_t)(first + j)), -1);
    }
  }
  mooncake_store_free(b, out);
  mooncake_store_free(a, area);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  free(keys);
  free(names);
  mc_cluster_stop(c);
}

/* ---- a pool full of leased objects ---------------------------------------------------- */

/* The lease is long enough for a loaded machine to fill the pool within it, and the wait
 * for room long enough to tell one wait from several. Usage may reach the whole pool
 * before anything is evicted (the high watermark at 1): otherwise the upkeep, finding the
 * pool past the watermark, could evict an object between its put and the read that leases
 * it (the only one not leased), which a slow machine makes likely. */
#define SMALL_SEGMENT (16 * MiB)
#define LEASE_MS 15000
#define WAIT_MS 3000 /* the daemons' --put_no_space_wait */

static void test_pool_full_of_leased_objects(void **state) {
  (void)state;
  static const char *const master_flags[] = {"--eviction_high_watermark_ratio", "1", NULL};
  static const char *const daemon_flags[] = {"--put_no_space_wait", "3000ms", NULL};
  mc_cluster_options opts = {2, SMALL_SEGMENT, LEASE_MS, master_flags, daemon_flags};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t a = connect_app(c, A, 8 * MiB);
  char *value = mooncake_store_alloc(a, 4 * MiB);
  char *out = mooncake_store_alloc(a, MiB);
  assert_non_null(value);
  assert_non_null(out);
  memset(value, 7, 4 * MiB);
  char key[KEY_LEN];

  /* Each object read right after its put: the pool fills with leased objects. */
  double first_read = 0, last_read = 0;
  int stored = 0, rc = 0;
  double put_started = 0;
  for (;; ++stored) {
    name_key(key, "leased", stored);
    put_started = now_seconds();
    rc = mooncake_store_put_from(a, key, value, MiB, NULL);
    if (rc != 0) break;
    assert_int_equal(mooncake_store_get_into(a, key, out, MiB), (int64_t)MiB);
    last_read = now_seconds();
    if (stored == 0) first_read = last_read;
  }
  double waited = now_seconds() - put_started;
  assert_true(last_read - first_read < LEASE_MS / 1000.0 - 1.5); /* every lease still runs */
  assert_int_equal(rc, MOONCAKE_STORE_NO_AVAILABLE_HANDLE);
  assert_int_equal(stored, (int)(2 * SMALL_SEGMENT / MiB)); /* full */
  assert_true(waited >= 0.9 * WAIT_MS / 1000.0);             /* it asked for a while */
  assert_true(waited < 2 * WAIT_MS / 1000.0);                /* and then answered */
  mc_cluster_eviction_stats s = stats_of(c);
  assert_int_equal(s.evicted_objects, 0); /* nothing leased was evicted */
  assert_true(s.no_space_puts >= 2);      /* it was asked again */

  /* A batch answers per entry, all within one wait, not one per entry. */
  const char *batch_keys[4] = {"leased-batch-0", "leased-batch-1", "leased-batch-2",
                               "leased-batch-3"};
  void *bufs[4] = {value, value + MiB, value + 2 * MiB, value + 3 * MiB};
  size_t sizes[4] = {MiB, MiB, MiB, MiB};
  int results[4];
  double t = now_seconds();
  assert_int_equal(mooncake_store_batch_put_from(a, batch_keys, bufs, sizes, 4, NULL, results), 0);
  waited = now_seconds() - t;
  for (int j = 0; j < 4; ++j) assert_int_equal(results[j], MOONCAKE_STORE_NO_AVAILABLE_HANDLE);
  assert_true(waited < 2 * WAIT_MS / 1000.0); /* one wait per entry would be four */
  assert_int_equal(stats_of(c).evicted_objects, 0);
  assert_true(now_seconds() < first_read + LEASE_MS / 1000.0); /* no lease ended meanwhile */

  /* Asked just before the oldest lease ends, a put waits for it and takes its place. The
   * newer half is read again first, from B (A's read cache would answer without the
   * master, renewing nothing): their leases run well past the put. */
  double until = first_read + LEASE_MS / 1000.0 - 1.0 - now_seconds();
  if (until > 0) usleep((useconds_t)(until * 1e6));
  mooncake_store_t b = connect_app(c, B, 2 * MiB);
  char *out_b = mooncake_store_alloc(b, MiB);
  assert_non_null(out_b);
  for (int i = stored / 2; i < stored; ++i) {
    name_key(key, "leased", i);
    assert_int_equal(mooncake_store_get_into(b, key, out_b, MiB), (int64_t)MiB);
  }
  t = now_seconds();
  assert_int_equal(mooncake_store_put_from(a, "leased-late", value, MiB, NULL), 0);
  waited = now_seconds() - t;
  assert_true(waited < WAIT_MS / 1000.0 + 0.5);
  s = stats_of(c);
  assert_true(s.evicted_objects >= 1);
  assert_true(s.evicted_objects <= stored / 2);
  for (int i = stored / 2; i < stored; ++i) {
    name_key(key, "leased", i);
    assert_int_equal(mooncake_store_is_exist(b, key), 1);
  }
  name_key(key, "leased", 0);  /* the oldest lease: the first to end */
  assert_int_equal(mooncake_store_is_exist(b, key), 0);
  mooncake_store_free(b, out_b);
  mooncake_store_destroy(b);

  mooncake_store_free(a, out);
  mooncake_store_free(a, value);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* ---- pins ------------------------------------------------------------------------------- */

#define PINNED 4

/* Puts count 1 MiB objects named prefix-<i> from first on, in batches of 8. */
static void put_series(mooncake_store_t a, char *value, const char *prefix, int first, int count,
                     const mooncake_replicate_config_t *config) {
  char names[8][KEY_LEN];
  const char *keys[8];
  void *bufs[8];
  size_t sizes[8];
  for (int done = 0; done < count; done += 8) {
    int n = count - done < 8 ? count - done : 8;
    for (int j = 0; j < n; ++j) {
      name_key(names[j], prefix, first + done + j);
      keys[j] = names[j];
      bufs[j] = value + (size_t)j * MiB;
      sizes[j] = MiB;
    }
    int results[8];
    assert_int_equal(mooncake_store_batch_put_from(a, keys, bufs, sizes, (size_t)n, config,
                                                   results),
                     0);
    for (int j = 0; j < n; ++j) assert_int_equal(results[j], 0);
  }
}

/* is_exist, not a read: a read's lease would move the object later in eviction's order
 * (a hit counts as a use too, but only the first since the put, and only for that moment). */
static int present(mooncake_store_t a, const char *prefix, int i) {
  char key[KEY_LEN];
  name_key(key, prefix, i);
  int rc = mooncake_store_is_exist(a, key);
  assert_true(rc == 0 || rc == 1);
  return rc;
}

static void test_hard_pins_survive_soft_pins_go_last(void **state) {
  (void)state;
  mc_cluster_options opts = {2, SMALL_SEGMENT, 1000, NULL, NULL};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t a = connect_app(c, A, 16 * MiB);
  char *value = mooncake_store_alloc(a, 8 * MiB);
  assert_non_null(value);
  memset(value, 3, 8 * MiB);
  mooncake_replicate_config_t hard = {1, 0, 1, NULL, 0};
  mooncake_replicate_config_t soft = {1, 1, 0, NULL, 0};
  put_series(a, value, "hard", 0, PINNED, &hard);
  put_series(a, value, "soft", 0, PINNED, &soft);
  /* Ten times the memory of plain objects: they evict one another, never a pin. */
  put_series(a, value, "plain", 0, 10 * 32, NULL);
  for (int i = 0; i < PINNED; ++i) {
    assert_true(present(a, "hard", i));
    assert_true(present(a, "soft", i));
  }
  assert_true(present(a, "plain", 10 * 32 - 1));
  assert_false(present(a, "plain", 0));
  /* Soft-pinned objects only: once the plain ones are gone, the oldest soft pins go. */
  put_series(a, value, "soft", PINNED, 64, &soft);
  for (int i = 0; i < PINNED; ++i) {
    assert_true(present(a, "hard", i));
    assert_false(present(a, "soft", i));
  }
  assert_false(present(a, "plain", 10 * 32 - 1));
  assert_true(present(a, "soft", PINNED + 63));
  mc_cluster_eviction_stats st = stats_of(c);
  assert_true(st.used_bytes <= (int64_t)(0.9 * (double)st.capacity_bytes));

  mooncake_store_free(a, value);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_existence_polling_does_not_starve_eviction),
      cmocka_unit_test(test_pool_full_of_leased_objects),
      cmocka_unit_test(test_hard_pins_survive_soft_pins_go_last),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
