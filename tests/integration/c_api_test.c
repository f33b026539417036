/* The C ABI conventions of docs/design.md, one test each, against a real master and daemon.
 * Written in C on purpose: it also proves the public header is plain C. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define POOL_SIZE (64u << 20)

static mc_cluster *g_cluster;

static int setup_store(void **state) {
  return store_fixture_setup(state, g_cluster, 0, POOL_SIZE);
}

static void fill(char *buf, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) buf[i] = (char)(seed * 31u + i * 7u + (i >> 8));
}

static void test_null_arguments(void **state) {
  store_fixture *f = *state;
  char buf[16] = {0};
  int results[1];
  assert_int_equal(mooncake_store_put(NULL, "k", buf, 1, NULL), MOONCAKE_STORE_INTERNAL_ERROR);
  assert_int_equal(mooncake_store_put(f->store, NULL, buf, 1, NULL), -1);
  assert_int_equal(mooncake_store_put(f->store, "k", NULL, 1, NULL), -1);
  assert_int_equal(mooncake_store_get_into(f->store, "k", NULL, 16), -1);
  assert_int_equal(mooncake_store_get_into(NULL, "k", buf, 16), -1);
  assert_int_equal(mooncake_store_is_exist(f->store, NULL), -1);
  assert_int_equal(mooncake_store_get_size(NULL, "k"), -1);
  assert_int_equal(mooncake_store_remove(f->store, NULL, 0), -1);
  assert_int_equal(mooncake_store_batch_is_exist(f->store, NULL, 1, results), -1);
  assert_int_equal(mooncake_store_get_hostname(f->store, NULL, 10), -1);
  assert_int_equal(mooncake_store_connect(NULL, NULL, 0), -1);
  assert_string_equal(mooncake_store_strerror(MOONCAKE_STORE_OBJECT_NOT_FOUND),
                      "object not found");
}

static void test_miss_codes(void **state) {
  store_fixture *f = *state;
  char buf[64];
  assert_int_equal(mooncake_store_get_into(f->store, "missing", buf, sizeof(buf)), -704);
  assert_int_equal(mooncake_store_get_size(f->store, "missing"), -704);
  assert_int_equal(mooncake_store_is_exist(f->store, "missing"), 0);
  assert_int_equal(mooncake_store_remove(f->store, "missing", 0), -704);
}

static void test_put_never_overwrites(void **state) {
  store_fixture *f = *state;
  char a[100], b[100], out[100];
  fill(a, sizeof(a), 1);
  fill(b, sizeof(b), 2);
  assert_int_equal(mooncake_store_put(f->store, "same-key", a, sizeof(a), NULL), 0);
  assert_int_equal(mooncake_store_put(f->store, "same-key", b, sizeof(b), NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "same-key", out, sizeof(out)), 100);
  assert_memory_equal(out, a, sizeof(a));
  /* upsert does replace */
  assert_int_equal(mooncake_store_upsert_from(f->store, "same-key", b, 60, NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "same-key", out, sizeof(out)), 60);
  assert_memory_equal(out, b, 60);
}

static void test_invalid_inputs(void **state) {
  store_fixture *f = *state;
  char value[8] = "v";
  char *long_key = malloc(MOONCAKE_STORE_MAX_KEY_LEN + 2);
  memset(long_key, 'k', MOONCAKE_STORE_MAX_KEY_LEN + 1);
  long_key[MOONCAKE_STORE_MAX_KEY_LEN + 1] = '\0';
  assert_int_equal(mooncake_store_put(f->store, "empty", value, 0, NULL), -600);
  assert_int_equal(mooncake_store_put(f->store, "", value, 1, NULL), -600);
  assert_int_equal(mooncake_store_put(f->store, long_key, value, 1, NULL), -600);
  assert_int_equal(mooncake_store_is_exist(f->store, long_key), -600);
  long_key[MOONCAKE_STORE_MAX_KEY_LEN] = '\0'; /* exactly 4096 bytes is fine */
  assert_int_equal(mooncake_store_put(f->store, long_key, value, 1, NULL), 0);
  assert_int_equal(mooncake_store_is_exist(f->store, long_key), 1);
  mooncake_replicate_config_t zero = {0};
  assert_int_equal(mooncake_store_put(f->store, "no-replicas", value, 1, &zero), -600);
  assert_int_equal(mooncake_store_put(f->store, "too-big", value,
                                      (size_t)MOONCAKE_STORE_MAX_VALUE_SIZE + 1, NULL),
                   -600);
  free(long_key);
}

static void test_buffer_too_small(void **state) {
  store_fixture *f = *state;
  char value[100], out[100];
  fill(value, sizeof(value), 3);
  assert_int_equal(mooncake_store_put(f->store, "hundred", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_get_size(f->store, "hundred"), 100);
  assert_int_equal(mooncake_store_get_into(f->store, "hundred", out, 50), -600);
  assert_int_equal(mooncake_store_get_into(f->store, "hundred", out, 100), 100);
  assert_memory_equal(out, value, 100);
}

static void test_batch_rules(void **state) {
  store_fixture *f = *state;
  char a[10], b[20], c[30], oa[10], ob[20], small[5];
  fill(a, 10, 4);
  fill(b, 20, 5);
  fill(c, 30, 6);
  const char *keys[3] = {"batch-a", "batch-b", "batch-c"};
  void *bufs[3] = {a, b, c};
  size_t sizes[3] = {10, 20, 30};
  int results[3] = {77, 77, 77};
  /* Empty batch: 0, nothing written. */
  assert_int_equal(mooncake_store_batch_put_from(f->store, keys, bufs, sizes, 0, NULL, results), 0);
  assert_int_equal(results[0], 77);
  assert_int_equal(mooncake_store_batch_put_from(f->store, keys, bufs, sizes, 3, NULL, NULL), -1);
  assert_int_equal(mooncake_store_batch_put_from(f->store, keys, bufs, sizes, 3, NULL, results), 0);
  assert_int_equal(results[0], 0);
  assert_int_equal(results[1], 0);
  assert_int_equal(results[2], 0);

  const char *probe[3] = {"batch-a", "batch-missing", "batch-b"};
  int exist[3];
  assert_int_equal(mooncake_store_batch_is_exist(f->store, probe, 3, exist), 0);
  assert_int_equal(exist[0], 1);
  assert_int_equal(exist[1], 0);
  assert_int_equal(exist[2], 1);

  const char *get_keys[3] = {"batch-a", "batch-missing", "batch-c"};
  void *outs[3] = {oa, ob, small};
  size_t out_sizes[3] = {10, 20, 5};
  int64_t got[3];
  assert_int_equal(mooncake_store_batch_get_into(f->store, get_keys, outs, out_sizes, 3, got), 0);
  assert_int_equal(got[0], 10);
  assert_memory_equal(oa, a, 10);
  assert_int_equal(got[1], -704);
  assert_int_equal(got[2], -600); /* 30 bytes do not fit in 5 */
  int64_t untouched[1] = {55};
  assert_int_equal(mooncake_store_batch_get_into(f->store, get_keys, outs, out_sizes, 0,
                                                 untouched), 0);
  assert_int_equal(untouched[0], 55);
}

static void test_batch_remove(void **state) {
  store_fixture *f = *state;
  char value[32], out[32];
  fill(value, sizeof(value), 5);
  assert_int_equal(mooncake_store_put(f->store, "br-free", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_put(f->store, "br-leased", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "br-leased", out, sizeof(out)), 32);
  /* Each entry answers as remove would: gone, missing, leased (kept), a NULL key, an
   * over-long key. */
  char long_key[MOONCAKE_STORE_MAX_KEY_LEN + 2];
  memset(long_key, 'k', sizeof(long_key) - 1);
  long_key[sizeof(long_key) - 1] = '\0';
  const char *keys[5] = {"br-free", "br-missing", "br-leased", NULL, long_key};
  int results[5] = {55, 55, 55, 55, 55};
  assert_int_equal(mooncake_store_batch_remove(f->store, keys, 5, 0, results), 0);
  assert_int_equal(results[0], 0);
  assert_int_equal(results[1], -704);
  assert_int_equal(results[2], -706);
  assert_int_equal(results[3], -1);
  assert_int_equal(results[4], -600);
  assert_int_equal(mooncake_store_is_exist(f->store, "br-free"), 0);
  assert_int_equal(mooncake_store_is_exist(f->store, "br-leased"), 1);
  /* force removes the leased one. */
  assert_int_equal(mooncake_store_batch_remove(f->store, keys + 2, 1, 1, results), 0);
  assert_int_equal(results[0], 0);
  assert_int_equal(mooncake_store_is_exist(f->store, "br-leased"), 0);
  assert_int_equal(mooncake_store_batch_remove(f->store, keys, 0, 0, NULL), 0);
  assert_int_equal(mooncake_store_batch_remove(f->store, NULL, 1, 0, results), -1);
  assert_int_equal(mooncake_store_batch_remove(NULL, keys, 1, 0, results), -1);
}

static void test_remove_respects_lease(void **state) {
  store_fixture *f = *state;
  char value[64], out[64];
  fill(value, sizeof(value), 7);
  assert_int_equal(mooncake_store_put(f->store, "leased", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "leased", out, sizeof(out)), 64);
  /* The read granted a lease (1 s in this cluster). */
  assert_int_equal(mooncake_store_remove(f->store, "leased", 0), -706);
  assert_int_equal(mooncake_store_remove(f->store, "leased", 1), 0);
  assert_int_equal(mooncake_store_is_exist(f->store, "leased"), 0);

  assert_int_equal(mooncake_store_put(f->store, "leased-2", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "leased-2", out, sizeof(out)), 64);
  /* The lease waited out with the real clock (the lease is the feature; nothing marks its
   * end, and a slow machine only waits longer). */
  usleep(1300 * 1000);
  assert_int_equal(mooncake_store_remove(f->store, "leased-2", 0), 0);
}

static void test_remove_all_and_regex(void **state) {
  store_fixture *f = *state;
  char value[32];
  char key[32];
  fill(value, sizeof(value), 8);
  for (int i = 0; i < 10; ++i) {
    snprintf(key, sizeof(key), "layer-%d-block", i);
    assert_int_equal(mooncake_store_put(f->store, key, value, sizeof(value), NULL), 0);
  }
  assert_int_equal(mooncake_store_put(f->store, "other", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_remove_by_regex(f->store, "^layer-[0-4]-", 0), 5);
  assert_int_equal(mooncake_store_is_exist(f->store, "layer-3-block"), 0);
  assert_int_equal(mooncake_store_remove_by_regex(f->store, "([", 0), -600);
  /* A read grants a lease: remove_all without force keeps that object. An existence hit
   * does not (its exist lease only holds eviction off), so the other checked one goes. */
  char out[32];
  assert_int_equal(mooncake_store_get_into(f->store, "layer-7-block", out, sizeof(out)), 32);
  assert_int_equal(mooncake_store_is_exist(f->store, "layer-8-block"), 1);
  assert_int_equal(mooncake_store_remove_all(f->store, 0), 5);
  assert_int_equal(mooncake_store_is_exist(f->store, "layer-8-block"), 0);
  assert_int_equal(mooncake_store_is_exist(f->store, "other"), 0);
  assert_int_equal(mooncake_store_remove_all(f->store, 1), 1);
  assert_int_equal(mooncake_store_is_exist(f->store, "layer-7-block"), 0);
}

static void test_hostname_and_health(void **state) {
  store_fixture *f = *state;
  char host[64], tiny[4], expected[64];
  snprintf(expected, sizeof(expected), "127.0.0.1:%d", mc_cluster_daemon_port(g_cluster));
  assert_int_equal(mooncake_store_get_hostname(f->store, host, sizeof(host)), 0);
  assert_string_equal(host, expected);
  assert_int_equal(mooncake_store_get_hostname(f->store, tiny, sizeof(tiny)), -600);
  assert_int_equal(mooncake_store_health_check(f->store), 0);

  mooncake_store_t idle = mooncake_store_create();
  assert_int_equal(mooncake_store_health_check(idle), 1);
  char value[4] = "abc";
  assert_int_equal(mooncake_store_put(idle, "k", value, 3, NULL), -600); /* not connected */
  assert_int_equal(mooncake_store_close(idle), 0);
  assert_int_equal(mooncake_store_close(idle), 0); /* safe twice */
  mooncake_store_destroy(idle);
}

static void test_pool_zero_copy(void **state) {
  store_fixture *f = *state;
  size_t n = 1u << 20;
  char *src = mooncake_store_alloc(f->store, n);
  char *dst = mooncake_store_alloc(f->store, n);
  assert_non_null(src);
  assert_non_null(dst);
  fill(src, n, 9);
  assert_int_equal(mooncake_store_put_from(f->store, "pooled", src, n, NULL), 0);
  memset(dst, 0, n);
  assert_int_equal(mooncake_store_get_into(f->store, "pooled", dst, n), (int64_t)n);
  assert_memory_equal(dst, src, n);
  mooncake_store_free(f->store, src);
  mooncake_store_free(f->store, dst);
  mooncake_store_free(f->store, NULL); /* ignored */
  /* A pool request larger than the pool fails cleanly. */
  assert_null(mooncake_store_alloc(f->store, (size_t)POOL_SIZE * 2));
}

static void test_value_larger_than_pool(void **state) {
  (void)state;
  mooncake_store_t small = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(small, mc_cluster_socket(g_cluster), 1u << 20), 0);
  size_t n = 5u << 20; /* five times the pool */
  char *src = malloc(n), *dst = malloc(n);
  fill(src, n, 10);
  assert_int_equal(mooncake_store_put(small, "bigger-than-pool", src, n, NULL), 0);
  memset(dst, 0, n);
  assert_int_equal(mooncake_store_get_into(small, "bigger-than-pool", dst, n), (int64_t)n);
  assert_memory_equal(dst, src, n);
  free(src);
  free(dst);
  mooncake_store_destroy(small);
}

static void test_zero_pool_rejects_copying_put(void **state) {
  (void)state;
  mooncake_store_t none = mooncake_store_create();
  assert_int_equal(mooncake_store_setup(none, "127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "",
                                        NULL),
                   0);
  char value[8] = "value";
  assert_int_equal(mooncake_store_put(none, "zero-pool", value, 5, NULL), -600);
  assert_int_equal(mooncake_store_is_exist(none, "zero-pool"), 0);
  mooncake_store_destroy(none);
}

static void test_setup_checks_master_address(void **state) {
  (void)state;
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", 0, 1u << 20, "tcp", "",
                                        "10.255.255.1:1"),
                   -600);
  mooncake_store_destroy(s);
}

/* Sizes as the daemon's flags read them; no handle, no daemon needed. */
static void test_parse_size(void **state) {
  (void)state;
  static const struct {
    const char *text;
    uint64_t bytes;
  } valid[] = {
      {"4096", 4096},
      {"0", 0},
      {"16MB", 16ull << 20},
      {"16 MB", 16ull << 20},
      {"16mb", 16ull << 20},
      {"16MiB", 16ull << 20},
      {" 4 GB ", 4ull << 30},
      {"1GiB", 1ull << 30},
      {"1.5GB", 3ull << 29},
      {"1.5G", 3ull << 29},
      {"512k", 512ull << 10},
      {"2T", 2ull << 40},
      {"7b", 7},
      {"16777215TB", 16777215ull << 40}, /* just below 2^64 */
      {"18446744073709551615", 18446744073709551615ull}, /* whole bytes, read exactly */
  };
  for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); ++i) {
    uint64_t out = 1;
    assert_int_equal(mooncake_store_parse_size(valid[i].text, &out), MOONCAKE_STORE_OK);
    assert_true(out == valid[i].bytes);
  }

  /* Garbage and overflow (2^64 bytes or more): -600, and *out untouched. */
  static const char *const invalid[] = {
      "", " ", "50%", "-1", "12XB", "MB", "1.2.3", "16 PB", "0x10", "1e3", "16MBB",
      "16777216TB", "18446744073709551616", "99999999999999999999999",
      "1.5", "0.5 B"}; /* a fraction needs a unit */
  for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); ++i) {
    uint64_t out = 42;
    assert_int_equal(mooncake_store_parse_size(invalid[i], &out), MOONCAKE_STORE_INVALID_PARAMS);
    assert_true(out == 42);
  }

  /* NULL arguments: -1, as everywhere in the ABI. */
  uint64_t out = 42;
  assert_int_equal(mooncake_store_parse_size(NULL, &out), MOONCAKE_STORE_INTERNAL_ERROR);
  assert_true(out == 42);
  assert_int_equal(mooncake_store_parse_size("16MB", NULL), MOONCAKE_STORE_INTERNAL_ERROR);
}

int main(void) {
  g_cluster = mc_cluster_start(512u << 20);
  if (g_cluster == NULL) return 1;
  /* setup() has no socket argument: it finds the daemon through $MOONCAKE_SOCKET. */
  setenv("MOONCAKE_SOCKET", mc_cluster_socket(g_cluster), 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_null_arguments, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_miss_codes, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_put_never_overwrites, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_invalid_inputs, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_buffer_too_small, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_batch_rules, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_remove_respects_lease, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_batch_remove, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_remove_all_and_regex, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_hostname_and_health, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_pool_zero_copy, setup_store, store_fixture_teardown),
      cmocka_unit_test(test_value_larger_than_pool),
      cmocka_unit_test(test_zero_pool_rejects_copying_put),
      cmocka_unit_test(test_setup_checks_master_address),
      cmocka_unit_test(test_parse_size),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
