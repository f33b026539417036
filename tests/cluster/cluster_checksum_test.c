/* Issue 33, checksums on by default, and bad replicas dropped: a real master and two real
 * daemons. Daemon 0 has no segment of its own; an application on it lends a range of its
 * pool as a segment (mooncake_store_mount_segment), so that the test can change an
 * object's bytes behind the master's back -- what a range freed and reused after a restore
 * to an older point looks like to a reader. Daemon 1 has a segment of its own.
 *
 * A replica with changed bytes is never served: a get answers -801 (its only replica) or
 * the bytes of its good replica; the reader's daemon reports it and the master drops it
 * (counted as objects_dropped{reason="unreadable"}), after which the key answers -704, is
 * absent for is_exist, and a put stores it afresh. Readers on daemon 0 (local memory) and
 * on daemon 1 (remote memory, over the transfer port), a whole value and one read in
 * chunks by a client whose pool cannot hold it. No daemon here is started with
 * --checksum: it is the default. */
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

#define MiB ((uint64_t)1 << 20)
#define POOL (32 * MiB)
#define LENT (8 * MiB)
#define VALUE (64 * 1024)
#define BIG (4 * MiB)         /* more than SMALL_POOL: read and put in chunks */
#define SMALL_POOL (2 * MiB)
#define WAIT_S 20.0

static mc_cluster *g_cluster;
static mooncake_store_t g_lender; /* on daemon 0, lending LENT bytes of its pool */
static mooncake_store_t g_remote; /* on daemon 1 */
static char *g_lent;
static uint64_t g_lent_id;

static int setup(void **state) {
  (void)state;
  mc_cluster_options o = {1, 0, 0, NULL, NULL};
  g_cluster = mc_cluster_start_with(&o);
  if (g_cluster == NULL) return -1;
  const char *const with_memory[] = {"--global_segment_size", "64m", NULL};
  int i = mc_cluster_add_daemon(g_cluster, with_memory);
  if (i != 1 || mc_cluster_await_daemon_at(g_cluster, 1, 30000) != 0) return -1;
  g_lender = connect_app(g_cluster, 0, POOL);
  g_remote = connect_app(g_cluster, 1, POOL);
  g_lent = mooncake_store_alloc(g_lender, LENT);
  if (g_lent == NULL) return -1;
  return mooncake_store_mount_segment(g_lender, g_lent, LENT, &g_lent_id);
}

static int teardown(void **state) {
  (void)state;
  mooncake_store_destroy(g_remote);
  mooncake_store_destroy(g_lender);
  mc_cluster_stop(g_cluster);
  return 0;
}

static int64_t dropped(void) {
  mc_cluster_master_stats s;
  assert_int_equal(mc_cluster_master_stats_get(g_cluster, &s), 0);
  return s.dropped_unreadable;
}

/* Puts key (size bytes of seed's pattern) with replica_num replicas, daemon 0's (the lent
 * segment) first; flips a byte of the replica that lies in the lent segment, and returns
 * how many replicas the master lists. */
static int put_and_corrupt(const char *key, uint64_t seed, size_t replica_num, size_t size) {
  static const int targets[] = {0, 1};
  placement p;
  steer(&p, g_cluster, targets, replica_num, replica_num);
  char *value = malloc(size);
  fill_pattern(value, size, seed);
  assert_int_equal(mooncake_store_put(g_lender, key, value, size, &p.config), 0);
  free(value);
  int found = 0, listed = 0;
  for (int r = 0; r < (int)replica_num; ++r) {
    int64_t segment = 0;
    uint64_t offset = 0;
    if (mc_cluster_replica_at(g_cluster, key, r, &segment, &offset) != 0) continue;
    ++listed;
    if ((uint64_t)segment != g_lent_id) continue;
    assert_true(offset + size <= LENT);
    g_lent[offset + size / 2] ^= 0x5a; /* behind the master's back */
    ++found;
  }
  assert_int_equal(found, 1);
  return listed;
}

/* Polls until the master lists fewer than n replicas of key; asserts it does in time. */
static void await_replicas_below(const char *key, int n) {
  for (double deadline = now_seconds() + WAIT_S;; usleep(50 * 1000)) {
    int64_t segment = 0;
    uint64_t offset = 0;
    if (mc_cluster_replica_at(g_cluster, key, n - 1, &segment, &offset) != 0) return;
    assert_true(now_seconds() < deadline);
  }
}

/* Its only replica (size bytes) changed: -801, then dropped (-704), then put again. */
static void check_only_replica(mooncake_store_t reader, const char *key, size_t size) {
  int64_t before = dropped();
  assert_int_equal(put_and_corrupt(key, 1, 1, size), 1);
  char *buf = malloc(size);
  assert_int_equal(mooncake_store_get_into(reader, key, buf, size),
                   MOONCAKE_STORE_CHECKSUM_MISMATCH);
  /* Every answer until the drop is a failure, never bytes; then -704. */
  assert_int_equal(poll_until_missing(reader, key, size, WAIT_S),
                   MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(mooncake_store_is_exist(reader, key), 0);
  assert_true(dropped() >= before + 1);
  /* Absent now: a put stores the key afresh (its checksum too: the get verifies it). */
  char *fresh = malloc(size);
  fill_pattern(fresh, size, 2);
  assert_int_equal(mooncake_store_put(reader, key, fresh, size, NULL), 0);
  assert_int_equal(mooncake_store_get_into(reader, key, buf, size), (int64_t)size);
  assert_int_equal(check_pattern(buf, size, 2), -1);
  free(fresh);
  free(buf);
}

static void test_local_reader(void **state) {
  (void)state;
  check_only_replica(g_lender, "local-only", VALUE);
}

static void test_remote_reader(void **state) {
  (void)state;
  check_only_replica(g_remote, "remote-only", VALUE);
}

/* A reader whose pool cannot hold the value reads it in chunks (a staged get: GET_BEGIN,
 * GET_CHUNK...; and puts it again the same way): the chunk that completes it answers -801,
 * and the replica every chunk came from is reported. */
static void test_staged_reader(void **state) {
  (void)state;
  mooncake_store_t small = connect_app(g_cluster, 1, SMALL_POOL);
  check_only_replica(small, "staged-only", BIG);
  mooncake_store_destroy(small);
}

/* One of two replicas changed: the get answers the good one's bytes, and the bad one is
 * dropped, the object keeping the other. */
static void test_good_replica_answers(void **state) {
  (void)state;
  int64_t before = dropped();
  assert_int_equal(put_and_corrupt("two", 3, 2, VALUE), 2);
  char *buf = malloc(VALUE);
  /* Daemon 0 tries its own memory first: the changed bytes, skipped. */
  assert_int_equal(mooncake_store_get_into(g_lender, "two", buf, VALUE), VALUE);
  assert_int_equal(check_pattern(buf, VALUE, 3), -1);
  await_replicas_below("two", 2);
  assert_true(dropped() >= before + 1);
  int64_t segment = 0;
  uint64_t offset = 0;
  assert_int_equal(mc_cluster_replica_at(g_cluster, "two", 0, &segment, &offset), 0);
  assert_true((uint64_t)segment != g_lent_id);
  memset(buf, 0, VALUE);
  assert_int_equal(mooncake_store_get_into(g_lender, "two", buf, VALUE), VALUE);
  assert_int_equal(check_pattern(buf, VALUE, 3), -1);
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_local_reader),
      cmocka_unit_test(test_remote_reader),
      cmocka_unit_test(test_staged_reader),
      cmocka_unit_test(test_good_replica_answers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
