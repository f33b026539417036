/* Remote replicas in the daemon's read cache, through the C ABI on a real master and two
 * real daemons A and B (indices 0 and 1). An application on A reads objects that live on
 * B; A's daemon remembers where, for 90% of the read lease, and reads them again straight
 * from B without asking the master. B checks on every such read that the lease came from
 * the master it is mounted at now, so a master restart cannot make A's remembered ranges
 * serve bytes the new master gave to other objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define MiB ((size_t)1 << 20)
#define POOL (16 * MiB)
#define KEYS 8

enum { A = 0, B = 1 };

static size_t value_size(int k) { return k % 2 == 0 ? 64 * 1024 : MiB + 3; }

/* Puts KEYS objects from an app on A onto B and reads each once from A (which fills A's
 * read cache with B's ranges), checking placement and bytes. */
static void put_on_b_and_read_from_a(mc_cluster *c, mooncake_store_t a, const char *prefix,
                                     uint64_t seed, char *out) {
  placement on_b;
  const int b = B;
  steer(&on_b, c, &b, 1, 1);
  char key[64];
  char *v = malloc(MiB + 3);
  for (int k = 0; k < KEYS; ++k) {
    snprintf(key, sizeof(key), "%s-%d", prefix, k);
    fill_pattern(v, value_size(k), seed + k);
    assert_int_equal(mooncake_store_put(a, key, v, value_size(k), &on_b.config), 0);
    assert_int_equal(replica_daemon(c, key, 0), B);
    assert_int_equal(mooncake_store_get_into(a, key, out, value_size(k)), (int64_t)value_size(k));
    assert_int_equal(check_pattern(out, value_size(k), seed + k), -1);
  }
  free(v);
}

/* With the master stopped, A still reads what it read before: from B, every byte right,
 * single and batched (the batch's remote reads run in parallel). */
static void test_remote_reads_skip_the_master(void **state) {
  (void)state;
  mc_cluster_options opts = {2, 256 * MiB, 10000, NULL, NULL};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t a = connect_app(c, A, POOL);
  char *out = mooncake_store_alloc(a, KEYS * (MiB + 3));
  assert_non_null(out);
  put_on_b_and_read_from_a(c, a, "cached", 100, out);

  assert_int_equal(mc_cluster_pause_master(c), 0);
  double t0 = now_seconds();
  char key[64];
  for (int k = 0; k < KEYS; ++k) {
    snprintf(key, sizeof(key), "cached-%d", k);
    memset(out, 0, value_size(k));
    assert_int_equal(mooncake_store_get_into(a, key, out, value_size(k)), (int64_t)value_size(k));
    assert_int_equal(check_pattern(out, value_size(k), 100 + k), -1);
  }
  char keys[KEYS][64];
  const char *key_ptrs[KEYS];
  void *bufs[KEYS];
  size_t sizes[KEYS];
  int64_t got[KEYS];
  for (int k = 0; k < KEYS; ++k) {
    snprintf(keys[k], sizeof(keys[k]), "cached-%d", k);
    key_ptrs[k] = keys[k];
    bufs[k] = out + (size_t)k * (MiB + 3);
    sizes[k] = value_size(k);
    memset(bufs[k], 0, sizes[k]);
  }
  assert_int_equal(mooncake_store_batch_get_into(a, key_ptrs, bufs, sizes, KEYS, got), 0);
  for (int k = 0; k < KEYS; ++k) {
    assert_int_equal(got[k], (int64_t)sizes[k]);
    assert_int_equal(check_pattern(bufs[k], sizes[k], 100 + k), -1);
  }
  /* Nothing waited on the stopped master (an RPC would have hung for the daemons' 10 s
   * --rpc_timeout). */
  assert_true(now_seconds() - t0 < 5.0);
  mc_cluster_resume_master(c);

  mooncake_store_free(a, out);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* The master restarts and B mounts its segment at the new one, which may give B's ranges
 * to new objects at once; A has not noticed (its heartbeat is a minute apart). A's
 * remembered ranges on B must not serve: B refuses reads under the old master's leases,
 * A forgets the entry and asks the new master, which does not know the old objects. */
static void test_master_restart_voids_remote_entries(void **state) {
  (void)state;
  static const char *const slow_heartbeat[] = {"--heartbeat_interval", "60s", NULL};
  static const char *const fast_heartbeat[] = {"--heartbeat_interval", "200ms", NULL};
  mc_cluster_options opts = {1, 256 * MiB, 10000, NULL, slow_heartbeat};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  assert_int_equal(mc_cluster_add_daemon(c, fast_heartbeat), B);
  for (int tries = 0; tries < 100 && mc_cluster_segment_at(c, B, &(mc_cluster_segment){0}); ++tries) {
    usleep(50 * 1000);  /* B's segment mounted */
  }
  mooncake_store_t a = connect_app(c, A, POOL);
  char *out = mooncake_store_alloc(a, MiB + 3);
  assert_non_null(out);
  put_on_b_and_read_from_a(c, a, "before", 200, out);

  mc_cluster_kill_master(c, SIGKILL);
  assert_int_equal(mc_cluster_restart_master(c), 0);
  mc_cluster_segment seg;
  double t0 = now_seconds();
  while (mc_cluster_segment_at(c, B, &seg) != 0 && now_seconds() - t0 < 10) usleep(50 * 1000);
  assert_int_equal(mc_cluster_segment_at(c, B, &seg), 0);  /* B is mounted at the new master */

  char key[64];
  for (int k = 0; k < KEYS; ++k) {
    snprintf(key, sizeof(key), "before-%d", k);
    int64_t rc = mooncake_store_get_into(a, key, out, value_size(k));
    /* Never the old bytes: the new master does not know the key. */
    assert_true(rc == MOONCAKE_STORE_OBJECT_NOT_FOUND || rc == MOONCAKE_STORE_RPC_FAIL);
  }
  /* Either B refused A's remembered range (a lease of the old master), or A learnt of the
   * new master first -- its replica-task runner asks the master for work every second at
   * most, and registering again forgets the read cache -- and asked the new master. */
  assert_true(count_log_lines(mc_cluster_log_at(c, B), "another master", NULL) >= 1 ||
              count_log_lines(mc_cluster_log_at(c, A), "forgotten before mounting again",
                              NULL) >= 1);

  /* Reads under the new master's leases are served: an app on B puts, A reads it. */
  mooncake_store_t b = connect_app(c, B, POOL);
  placement on_b;
  const int target = B;
  steer(&on_b, c, &target, 1, 1);
  char *v = malloc(MiB + 3);
  fill_pattern(v, MiB + 3, 300);
  assert_int_equal(mooncake_store_put(b, "after", v, MiB + 3, &on_b.config), 0);
  for (int round = 0; round < 2; ++round) {  /* asked of the master, then from the cache */
    memset(out, 0, MiB + 3);
    assert_int_equal(mooncake_store_get_into(a, "after", out, MiB + 3), (int64_t)(MiB + 3));
    assert_int_equal(check_pattern(out, MiB + 3, 300), -1);
  }
  free(v);
  mooncake_store_free(a, out);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_remote_reads_skip_the_master),
      cmocka_unit_test(test_master_restart_voids_remote_entries),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
