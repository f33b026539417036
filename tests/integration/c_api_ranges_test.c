/* Ranged reads through the C ABI (issue 17, part ranges), against a real master and two
 * daemons (with --checksum): mooncake_store_get_ranges and mooncake_store_batch_get_ranges
 * read exactly the fragments asked for, from a replica in the reader's daemon and from one
 * in the other daemon's memory, into pool memory (zero copy) and into plain memory
 * (staged, and chunked when a fragment is larger than the pool); a miss, fragments past the
 * value or the buffer, argument rules; fragments covering a checksummed value are read
 * and checked; one writer thread with reader threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define POOL_SIZE (1u << 20) /* small, so that a 3 MiB fragment into plain memory is chunked */
#define VALUE_SIZE (4u << 20)

static mc_cluster *g_cluster;

typedef struct {
  mooncake_store_t store; /* on daemon 0 */
  char *value;            /* VALUE_SIZE bytes of pattern */
} fixture;

static int setup_store(void **state) {
  fixture *f = calloc(1, sizeof(*f));
  f->store = connect_app(g_cluster, 0, POOL_SIZE);
  f->value = malloc(VALUE_SIZE);
  mooncake_store_remove_all(f->store, 1);
  *state = f;
  return 0;
}

static int teardown_store(void **state) {
  fixture *f = *state;
  mooncake_store_destroy(f->store);
  free(f->value);
  free(f);
  return 0;
}

/* Puts VALUE_SIZE bytes of pattern seed under key, its one replica on daemon target. */
static void put_on(fixture *f, const char *key, int target, uint64_t seed) {
  placement p;
  steer(&p, g_cluster, &target, 1, 1);
  fill_pattern(f->value, VALUE_SIZE, seed);
  mooncake_store_t writer = connect_app(g_cluster, target, 8u << 20);
  assert_int_equal(mooncake_store_put(writer, key, f->value, VALUE_SIZE, &p.config), 0);
  mooncake_store_destroy(writer);
  assert_int_equal(replica_daemon(g_cluster, key, 0), target);
}

static void test_arguments(void **state) {
  fixture *f = *state;
  char buf[16];
  mooncake_range_t r = {0, 4, 0};
  int64_t res[1] = {7};
  assert_int_equal(mooncake_store_get_ranges(NULL, "k", buf, 16, &r, 1, res), -1);
  assert_int_equal(mooncake_store_get_ranges(f->store, NULL, buf, 16, &r, 1, res), -1);
  assert_int_equal(mooncake_store_get_ranges(f->store, "k", NULL, 16, &r, 1, res), -1);
  assert_int_equal(mooncake_store_get_ranges(f->store, "k", buf, 16, NULL, 1, res), -1);
  assert_int_equal(mooncake_store_get_ranges(f->store, "k", buf, 16, &r, 1, NULL), -1);
  /* No fragment: nothing to do, whatever the other arguments. */
  assert_int_equal(mooncake_store_get_ranges(f->store, "k", NULL, 0, NULL, 0, NULL), 0);
  assert_int_equal(mooncake_store_get_ranges(f->store, "", buf, 16, &r, 1, res), -600);
  assert_int_equal(res[0], -600);
  int64_t totals[1];
  assert_int_equal(mooncake_store_batch_get_ranges(f->store, NULL, 1, totals), -1);
  assert_int_equal(mooncake_store_batch_get_ranges(f->store, NULL, 0, NULL), 0);
  /* A buffer inside a registered range, its size running past it. */
  char *reg = malloc(4096);
  assert_int_equal(mooncake_store_register_buffer(f->store, reg, 4096), 0);
  assert_int_equal(mooncake_store_get_ranges(f->store, "k", reg, 8192, &r, 1, res), -600);
  mooncake_store_unregister_buffer(f->store, reg);
  free(reg);
}

/* Fragments into pool memory and plain memory, from the replica of daemon target. */
static void read_fragments_from(fixture *f, int target) {
  char key[64];
  snprintf(key, sizeof(key), "ranges-frag-%d", target);
  put_on(f, key, target, 11 + target);
  const mooncake_range_t r[4] = {
      {0, 4096, 0}, {VALUE_SIZE - 777, 777, 5000}, {1234567, 65536, 10000}, {99, 0, 3}};
  int64_t res[4];
  char *pool = mooncake_store_alloc(f->store, 128 << 10);
  char *plain = calloc(1, 128 << 10);
  assert_non_null(pool);
  for (int k = 0; k < 2; ++k) {
    char *dest = k == 0 ? pool : plain;
    memset(dest, 0, 128 << 10);
    assert_int_equal(mooncake_store_get_ranges(f->store, key, dest, 128 << 10, r, 4, res),
                     4096 + 777 + 65536);
    assert_int_equal(res[0], 4096);
    assert_int_equal(res[1], 777);
    assert_int_equal(res[2], 65536);
    assert_int_equal(res[3], 0);
    for (int i = 0; i < 3; ++i) {
      assert_memory_equal(dest + r[i].dst_offset, f->value + r[i].src_offset, r[i].length);
    }
    assert_int_equal(dest[4096], 0); /* nothing between the fragments was written */
  }
  mooncake_store_free(f->store, pool);
  free(plain);
}

static void test_local_replica(void **state) { read_fragments_from(*state, 0); }
static void test_remote_replica(void **state) { read_fragments_from(*state, 1); }

static void test_fragment_larger_than_the_pool(void **state) {
  fixture *f = *state;
  put_on(f, "ranges-big", 1, 21);
  char *plain = malloc(3u << 20);
  mooncake_range_t r = {VALUE_SIZE - (3u << 20), 3u << 20, 0};
  int64_t res;
  assert_int_equal(mooncake_store_get_ranges(f->store, "ranges-big", plain, 3u << 20, &r, 1, &res),
                   3u << 20);
  assert_memory_equal(plain, f->value + r.src_offset, r.length);
  free(plain);
}

static void test_bad_fragments_and_miss(void **state) {
  fixture *f = *state;
  put_on(f, "ranges-bad", 0, 31);
  char buf[4096];
  const mooncake_range_t r[5] = {{VALUE_SIZE - 10, 11, 0},  /* past the value */
                                 {VALUE_SIZE + 1, 0, 0},    /* starts past it */
                                 {0, 100, 4000},            /* past the buffer */
                                 {UINT64_MAX, 2, 0},        /* overflow */
                                 {10, 100, 0}};             /* fine */
  int64_t res[5];
  assert_int_equal(mooncake_store_get_ranges(f->store, "ranges-bad", buf, sizeof(buf), r, 5, res),
                   -600);
  for (int i = 0; i < 4; ++i) assert_int_equal(res[i], -600);
  assert_int_equal(res[4], 100);
  assert_memory_equal(buf, f->value + 10, 100);
  assert_int_equal(mooncake_store_get_ranges(f->store, "ranges-missing", buf, sizeof(buf), r + 4,
                                             1, res),
                   -704);
  assert_int_equal(res[0], -704);
}

/* Layer-wise: fragments covering the whole (checksummed) value once, in pieces, and the
 * whole value as one fragment; the batch form over two keys, one named twice. */
static void test_batch_and_covering_fragments(void **state) {
  fixture *f = *state;
  put_on(f, "ranges-b0", 0, 41);
  char *v0 = malloc(VALUE_SIZE);
  memcpy(v0, f->value, VALUE_SIZE);
  put_on(f, "ranges-b1", 1, 42);
  enum { kLayers = 8 };
  const uint64_t layer = VALUE_SIZE / kLayers;
  mooncake_range_t cover[kLayers];
  for (int i = 0; i < kLayers; ++i) {
    cover[i] = (mooncake_range_t){(uint64_t)i * layer, layer, (uint64_t)(kLayers - 1 - i) * layer};
  }
  mooncake_range_t whole = {0, VALUE_SIZE, 0};
  mooncake_range_t tail = {VALUE_SIZE - 8, 8, 0};
  char *d0 = malloc(VALUE_SIZE), *d1 = malloc(VALUE_SIZE), *d2 = malloc(8);
  int64_t r0[kLayers], r1[1], r2[1], totals[3];
  mooncake_ranged_get_t gets[3] = {{"ranges-b0", d0, VALUE_SIZE, cover, kLayers, r0},
                                   {"ranges-b1", d1, VALUE_SIZE, &whole, 1, r1},
                                   {"ranges-b0", d2, 8, &tail, 1, r2}};
  assert_int_equal(mooncake_store_batch_get_ranges(f->store, gets, 3, totals), 0);
  assert_int_equal(totals[0], VALUE_SIZE);
  assert_int_equal(totals[1], VALUE_SIZE);
  assert_int_equal(totals[2], 8);
  for (int i = 0; i < kLayers; ++i) {
    assert_int_equal(r0[i], layer);
    assert_memory_equal(d0 + cover[i].dst_offset, v0 + cover[i].src_offset, layer);
  }
  assert_memory_equal(d1, f->value, VALUE_SIZE);
  assert_memory_equal(d2, v0 + VALUE_SIZE - 8, 8);
  free(v0);
  free(d0);
  free(d1);
  free(d2);
}

/* ---- one writer, reader threads ---- */

enum { kKeys = 16, kReaders = 3, kSmall = 64 << 10 };

typedef struct {
  int id;
  int errors;
} reader_arg;

static void small_key(char *out, size_t n, int i) { snprintf(out, n, "ranges-w-%d", i); }

static void *writer_main(void *arg) {
  (void)arg;
  mooncake_store_t s = connect_app(g_cluster, 1, 4u << 20);
  char *v = malloc(kSmall);
  for (int i = 0; i < kKeys; ++i) {
    char key[32];
    small_key(key, sizeof(key), i);
    fill_pattern(v, kSmall, 500 + i);
    if (mooncake_store_put(s, key, v, kSmall, NULL) != 0) fprintf(stderr, "put %s failed\n", key);
  }
  free(v);
  mooncake_store_destroy(s);
  return NULL;
}

static void *reader_main(void *arg) {
  reader_arg *a = arg;
  mooncake_store_t s = connect_app(g_cluster, 0, 4u << 20);
  char *v = malloc(kSmall), dest[3000];
  int done[kKeys] = {0}, left = kKeys;
  double deadline = now_seconds() + 60;
  while (left > 0 && now_seconds() < deadline) {
    for (int i = 0; i < kKeys; ++i) {
      if (done[i]) continue;
      char key[32];
      small_key(key, sizeof(key), i);
      mooncake_range_t r[3] = {{(uint64_t)(a->id * 131 + i) % (kSmall - 1000), 1000, 0},
                               {0, 1000, 1000},
                               {kSmall - 1000, 1000, 2000}};
      int64_t res[3];
      int64_t got = mooncake_store_get_ranges(s, key, dest, sizeof(dest), r, 3, res);
      if (got == -704 || got == -703) continue; /* not written yet, or being written */
      fill_pattern(v, kSmall, 500 + i);
      int ok = got == 3000;
      for (int k = 0; ok && k < 3; ++k) {
        ok = memcmp(dest + r[k].dst_offset, v + r[k].src_offset, 1000) == 0;
      }
      if (!ok) {
        fprintf(stderr, "reader %d key %d: %lld\n", a->id, i, (long long)got);
        a->errors++;
      }
      done[i] = 1;
      left--;
    }
  }
  if (left > 0) a->errors++;
  free(v);
  mooncake_store_destroy(s);
  return NULL;
}

static void test_one_writer_many_readers(void **state) {
  (void)state;
  pthread_t w, r[kReaders];
  reader_arg args[kReaders];
  for (int i = 0; i < kReaders; ++i) {
    args[i] = (reader_arg){i, 0};
    pthread_create(&r[i], NULL, reader_main, &args[i]);
  }
  pthread_create(&w, NULL, writer_main, NULL);
  pthread_join(w, NULL);
  for (int i = 0; i < kReaders; ++i) {
    pthread_join(r[i], NULL);
    assert_int_equal(args[i].errors, 0);
  }
}

int main(void) {
  static const char *const daemon_flags[] = {"--checksum", NULL};
  mc_cluster_options o = {0};
  o.daemons = 2;
  o.segment_size = 256u << 20;
  o.daemon_flags = daemon_flags;
  g_cluster = mc_cluster_start_with(&o);
  if (g_cluster == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_arguments, setup_store, teardown_store),
      cmocka_unit_test_setup_teardown(test_local_replica, setup_store, teardown_store),
      cmocka_unit_test_setup_teardown(test_remote_replica, setup_store, teardown_store),
      cmocka_unit_test_setup_teardown(test_fragment_larger_than_the_pool, setup_store,
                                      teardown_store),
      cmocka_unit_test_setup_teardown(test_bad_fragments_and_miss, setup_store, teardown_store),
      cmocka_unit_test_setup_teardown(test_batch_and_covering_fragments, setup_store,
                                      teardown_store),
      cmocka_unit_test_setup_teardown(test_one_writer_many_readers, setup_store, teardown_store),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
