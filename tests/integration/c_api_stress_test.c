/* Data integrity and concurrency through the C ABI against a real master and daemon:
 * random keys and sizes from 1 byte to 16 MiB through pool and plain buffers, and 8 threads
 * x 2,000 mixed operations on one handle, every byte verified. */
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

static mc_cluster *g_cluster;

/* xorshift64*: deterministic per seed, so a failure can be replayed. */
static uint64_t next_random(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

/* The bytes of a value are a function of its key's seed, so any reader can verify them. */
static void fill_value(unsigned char *buf, size_t n, uint64_t seed) {
  uint64_t s = seed | 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t r = next_random(&s);
    memcpy(buf + i, &r, 8);
  }
  uint64_t r = next_random(&s);
  memcpy(buf + i, &r, n - i);
}

/* Log-uniform from 1 byte to max: small and huge values both get exercised. */
static size_t random_size(uint64_t *s, size_t max) {
  unsigned bits = (unsigned)(next_random(s) % 25); /* 2^0 .. 2^24 */
  size_t size = ((size_t)1 << bits) + next_random(s) % ((size_t)1 << bits);
  return size > max ? max : size;
}

static void test_integrity_random_sizes(void **state) {
  (void)state;
  mooncake_store_t store = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(store, mc_cluster_socket(g_cluster), 48u << 20), 0);
  enum { kObjects = 120 };
  const size_t max_size = 16u << 20;
  unsigned char *plain_in = malloc(max_size), *plain_out = malloc(max_size);
  unsigned char *expect = malloc(max_size);
  uint64_t rng = 0x5eed;
  size_t sizes[kObjects];
  char key[64];
  for (int i = 0; i < kObjects; ++i) {
    sizes[i] = (i == 0) ? 1 : (i == 1) ? max_size : random_size(&rng, max_size);
    snprintf(key, sizeof(key), "integrity-%d-%zu", i, sizes[i]);
    int use_pool = i % 2;
    unsigned char *src = use_pool ? mooncake_store_alloc(store, sizes[i]) : plain_in;
    assert_non_null(src);
    fill_value(src, sizes[i], (uint64_t)i * 7919);
    assert_int_equal(mooncake_store_put_from(store, key, src, sizes[i], NULL), 0);
    if (use_pool) mooncake_store_free(store, src);
  }
  for (int i = 0; i < kObjects; ++i) {
    snprintf(key, sizeof(key), "integrity-%d-%zu", i, sizes[i]);
    int use_pool = (i / 2) % 2; /* read through the other kind of buffer half the time */
    unsigned char *dst = use_pool ? mooncake_store_alloc(store, sizes[i]) : plain_out;
    assert_non_null(dst);
    memset(dst, 0xAB, sizes[i]);
    assert_int_equal(mooncake_store_get_size(store, key), (int64_t)sizes[i]);
    assert_int_equal(mooncake_store_get_into(store, key, dst, sizes[i]), (int64_t)sizes[i]);
    fill_value(expect, sizes[i], (uint64_t)i * 7919);
    assert_memory_equal(dst, expect, sizes[i]);
    if (use_pool) mooncake_store_free(store, dst);
  }
  assert_true(mooncake_store_remove_all(store, 1) >= kObjects);
  free(plain_in);
  free(plain_out);
  free(expect);
  mooncake_store_destroy(store);
}

typedef struct {
  mooncake_store_t store;
  int thread;
  int failures;
  char message[256];
} worker_args;

#define KEYS_PER_THREAD 64
#define OPS_PER_THREAD 2000

static void record_failure(worker_args *w, const char *what, int op, int64_t got) {
  if (w->failures++ == 0) {
    snprintf(w->message, sizeof(w->message), "thread %d op %d: %s (got %lld)", w->thread, op,
             what, (long long)got);
  }
}

/* Each thread owns its keys, so it knows exactly what must be there; the model is the
 * `present` array. Values are a function of (key, generation) so stale reads show. */
static void *worker(void *p) {
  worker_args *w = p;
  uint64_t rng = 0x1234 + (uint64_t)w->thread * 0x9E3779B97F4A7C15ull;
  int present[KEYS_PER_THREAD] = {0};
  unsigned generation[KEYS_PER_THREAD] = {0};
  size_t size_of[KEYS_PER_THREAD] = {0};
  unsigned char *buf = malloc(64 * 1024), *expect = malloc(64 * 1024);
  unsigned char *pool_buf = mooncake_store_alloc(w->store, 64 * 1024);
  char key[64];
  for (int op = 0; op < OPS_PER_THREAD && w->failures == 0; ++op) {
    int k = (int)(next_random(&rng) % KEYS_PER_THREAD);
    snprintf(key, sizeof(key), "t%d-k%d", w->thread, k);
    uint64_t seed = ((uint64_t)w->thread << 40) | ((uint64_t)k << 20) | generation[k];
    unsigned char *io = (op % 3 == 0 && pool_buf) ? pool_buf : buf;
    switch (next_random(&rng) % 6) {
      case 0:
      case 1: { /* put */
        size_t n = present[k] ? size_of[k] : 1 + next_random(&rng) % (64 * 1024);
        if (!present[k]) size_of[k] = n;
        fill_value(io, n, seed);
        int rc = mooncake_store_put_from(w->store, key, io, n, NULL);
        if (rc != 0) record_failure(w, "put", op, rc);
        present[k] = 1;
        break;
      }
      case 2:
      case 3: { /* get and verify */
        int64_t got = mooncake_store_get_into(w->store, key, io, 64 * 1024);
        if (!present[k]) {
          if (got != -704) record_failure(w, "get of a removed key", op, got);
        } else if (got != (int64_t)size_of[k]) {
          record_failure(w, "get size", op, got);
        } else {
          fill_value(expect, size_of[k], seed);
          if (memcmp(io, expect, size_of[k]) != 0) record_failure(w, "get bytes differ", op, got);
        }
        break;
      }
      case 4: { /* exist */
        int e = mooncake_store_is_exist(w->store, key);
        if (e != present[k]) record_failure(w, "exist", op, e);
        break;
      }
      default: { /* remove (force: reads above hold leases) */
        int rc = mooncake_store_remove(w->store, key, 1);
        if (rc != (present[k] ? 0 : -704)) record_failure(w, "remove", op, rc);
        if (present[k]) generation[k]++;
        present[k] = 0;
        break;
      }
    }
  }
  mooncake_store_free(w->store, pool_buf);
  free(buf);
  free(expect);
  return NULL;
}

static void test_eight_threads_one_handle(void **state) {
  (void)state;
  mooncake_store_t store = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(store, mc_cluster_socket(g_cluster), 16u << 20), 0);
  enum { kThreads = 8 };
  pthread_t threads[kThreads];
  worker_args args[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    args[i] = (worker_args){.store = store, .thread = i};
    pthread_create(&threads[i], NULL, worker, &args[i]);
  }
  int failures = 0;
  for (int i = 0; i < kThreads; ++i) {
    pthread_join(threads[i], NULL);
    if (args[i].failures) {
      fprintf(stderr, "%s\n", args[i].message);
      failures += args[i].failures;
    }
  }
  assert_int_equal(failures, 0);
  mooncake_store_destroy(store);
}

int main(void) {
  g_cluster = mc_cluster_start(1u << 30);
  if (g_cluster == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_integrity_random_sizes),
      cmocka_unit_test(test_eight_threads_one_handle),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
