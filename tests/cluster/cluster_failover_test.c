/* Writers route around a lost daemon, through the C ABI on a real master and three real
 * daemons A, B and C (indices 0, 1, 2). B is killed; until the master's TTL declares it
 * dead (60 s here: a loaded machine does the test's work well within it) the master still
 * places replicas on it. A put whose
 * transfer to B fails is revoked and placed again with B avoided, and later puts avoid B
 * from the start: no put fails, none lands on B, and every value reads back from C. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define MiB ((size_t)1 << 20)
#define PUTS 24

enum { A = 0, B = 1, C = 2 };

static const char *const kMasterFlags[] = {"--client_live_ttl_sec", "60", NULL};

static void test_puts_avoid_a_dead_daemon(void **state) {
  (void)state;
  mc_cluster_options opts = {3, 256 * MiB, 10000, kMasterFlags, NULL};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t a = connect_app(c, A, 16 * MiB), reader = connect_app(c, C, 16 * MiB);
  size_t n = 256 * 1024;
  char *v = malloc(n), *out = malloc(n);
  char key[32];
  /* Before: the default strategy uses B too (the test would prove nothing otherwise). */
  int on_b = 0;
  for (int k = 0; k < PUTS; ++k) {
    snprintf(key, sizeof(key), "warm-%d", k);
    fill_pattern(v, n, k);
    assert_int_equal(mooncake_store_put(a, key, v, n, NULL), 0);
    on_b += replica_daemon(c, key, 0) == B;
  }
  assert_true(on_b > 0);

  assert_true(mc_cluster_kill_daemon_at(c, B, SIGKILL) != -1 || !mc_cluster_daemon_alive(c, B));
  double t0 = now_seconds();
  for (int replicas = 1; replicas <= 2; ++replicas) {
    mooncake_replicate_config_t config = {(size_t)replicas, 0, 0, NULL, 0};
    for (int k = 0; k < PUTS; ++k) {
      snprintf(key, sizeof(key), "after-%d-%d", replicas, k);
      fill_pattern(v, n, 1000 + k);
      assert_int_equal(mooncake_store_put(a, key, v, n, &config), 0);
      for (int r = 0; r < replicas; ++r) assert_int_not_equal(replica_daemon(c, key, r), B);
      memset(out, 0, n);
      assert_int_equal(mooncake_store_get_into(reader, key, out, n), (int64_t)n);
      assert_int_equal(check_pattern(out, n, 1000 + k), -1);
    }
  }
  /* All of it well inside the master's TTL: B was still listed, and avoided. */
  assert_true(now_seconds() - t0 < 45.0);
  free(v);
  free(out);
  mooncake_store_destroy(a);
  mooncake_store_destroy(reader);
  mc_cluster_stop(c);
}

/* The same for one batch, the first request after the kill: its entries placed on B fail
 * their transfers, and are placed again (elsewhere) within the same BATCH_PUT. */
static void test_batch_put_avoids_a_dead_daemon(void **state) {
  (void)state;
  mc_cluster_options opts = {3, 256 * MiB, 10000, kMasterFlags, NULL};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t a = connect_app(c, A, 32 * MiB), reader = connect_app(c, C, 16 * MiB);
  size_t n = 256 * 1024;
  char keys[PUTS][32];
  const char *key_ptrs[PUTS];
  void *bufs[PUTS];
  size_t sizes[PUTS];
  int results[PUTS];
  for (int k = 0; k < PUTS; ++k) {
    snprintf(keys[k], sizeof(keys[k]), "batch-%d", k);
    key_ptrs[k] = keys[k];
    bufs[k] = mooncake_store_alloc(a, n);
    assert_non_null(bufs[k]);
    sizes[k] = n;
    fill_pattern(bufs[k], n, 2000 + k);
  }
  assert_true(mc_cluster_kill_daemon_at(c, B, SIGKILL) != -1 || !mc_cluster_daemon_alive(c, B));
  assert_int_equal(
      mooncake_store_batch_put_from(a, key_ptrs, bufs, sizes, PUTS, NULL, results), 0);
  char *out = malloc(n);
  for (int k = 0; k < PUTS; ++k) {
    assert_int_equal(results[k], 0);
    assert_int_not_equal(replica_daemon(c, keys[k], 0), B);
    assert_int_equal(mooncake_store_get_into(reader, keys[k], out, n), (int64_t)n);
    assert_int_equal(check_pattern(out, n, 2000 + k), -1);
  }
  free(out);
  mooncake_store_destroy(a);
  mooncake_store_destroy(reader);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_puts_avoid_a_dead_daemon),
      cmocka_unit_test(test_batch_put_avoids_a_dead_daemon),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
