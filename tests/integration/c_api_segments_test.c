/* Mooncake's segment calls and replica clearing (issue 17, part segments) against a real
 * master and two daemons: mooncake_store_batch_replica_clear (argument rules, leased keys
 * skipped until the lease runs out, one daemon's replicas only, per-key codes), and the
 * mount family -- a range of the handle's pool lent as a segment (a pointer outside the
 * pool refused), daemon memory lent (allocate_and_mount_segment), both seen by the master
 * as lent segments, holding objects, drained on unmount_segment with every object kept,
 * and unmount_local_disk_segment on a daemon without an SSD tier. */
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

#define POOL_SIZE (32u << 20)
#define VALUE_SIZE 4096

static mc_cluster *g_cluster; /* two daemons with small segments of their own */

static int setup_store(void **state) {
  return store_fixture_setup(state, g_cluster, 0, POOL_SIZE);
}

static void put_on(mooncake_store_t s, const char *key, const int *targets, size_t n) {
  placement p;
  steer(&p, g_cluster, targets, n, n);
  char value[VALUE_SIZE];
  fill_pattern(value, sizeof(value), (uint64_t)strlen(key));
  assert_int_equal(mooncake_store_put(s, key, value, sizeof(value), &p.config), 0);
}

/* Clears one key until its read lease has run out (polled: the lease is the cluster's
 * 1 s); returns the last code. */
static int clear_when_unleased(mooncake_store_t s, const char *key, const char *segment) {
  const char *keys[1] = {key};
  int code = 0;
  for (double deadline = now_seconds() + 10; now_seconds() < deadline; usleep(50 * 1000)) {
    assert_int_equal(mooncake_store_batch_replica_clear(s, keys, 1, segment, &code), 0);
    if (code != MOONCAKE_STORE_OBJECT_HAS_LEASE) break;
  }
  return code;
}

static void test_replica_clear_arguments(void **state) {
  store_fixture *f = *state;
  const char *keys[2] = {"a", ""};
  int results[2] = {7, 7};
  assert_int_equal(mooncake_store_batch_replica_clear(NULL, keys, 1, NULL, results), -1);
  assert_int_equal(mooncake_store_batch_replica_clear(f->store, NULL, 1, NULL, results), -1);
  assert_int_equal(mooncake_store_batch_replica_clear(f->store, keys, 1, NULL, NULL), -1);
  assert_int_equal(mooncake_store_batch_replica_clear(f->store, keys, 0, NULL, NULL), 0);
  char long_name[MOONCAKE_STORE_LOCATION_SIZE + 1];
  memset(long_name, 'h', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = '\0';
  assert_int_equal(mooncake_store_batch_replica_clear(f->store, keys, 1, long_name, results),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(results[0], 7); /* nothing written */
  assert_int_equal(mooncake_store_batch_replica_clear(f->store, keys, 2, "", results), 0);
  assert_int_equal(results[0], MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(results[1], MOONCAKE_STORE_INVALID_PARAMS);
}

static void test_replica_clear_skips_leased_keys(void **state) {
  store_fixture *f = *state;
  static const int d0[] = {0};
  put_on(f->store, "leased", d0, 1);
  put_on(f->store, "idle", d0, 1);
  char out[VALUE_SIZE];
  assert_int_equal(mooncake_store_get_into(f->store, "leased", out, sizeof(out)), VALUE_SIZE);
  const char *keys[3] = {"leased", "idle", "missing"};
  int results[3];
  assert_int_equal(mooncake_store_batch_replica_clear(f->store, keys, 3, NULL, results), 0);
  assert_int_equal(results[0], MOONCAKE_STORE_OBJECT_HAS_LEASE);
  /* Just put: in use by its writer for one lease, as Mooncake's test of clear expects. */
  assert_int_equal(results[1], MOONCAKE_STORE_OBJECT_HAS_LEASE);
  assert_int_equal(results[2], MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(clear_when_unleased(f->store, "idle", NULL), 0);
  assert_int_equal(mooncake_store_is_exist(f->store, "idle"), 0);
  assert_int_equal(mooncake_store_is_exist(f->store, "leased"), 1);
  assert_int_equal(clear_when_unleased(f->store, "leased", NULL), 0);
  assert_int_equal(mooncake_store_get_into(f->store, "leased", out, sizeof(out)),
                   MOONCAKE_STORE_OBJECT_NOT_FOUND);
}

static void test_replica_clear_on_one_daemon(void **state) {
  store_fixture *f = *state;
  static const int both[] = {0, 1};
  put_on(f->store, "two", both, 2);
  const char *daemon0 = mc_cluster_name_at(g_cluster, 0);
  const char *daemon1 = mc_cluster_name_at(g_cluster, 1);
  assert_int_equal(clear_when_unleased(f->store, "two", daemon0), 0);
  mooncake_replica_desc_t d[2];
  size_t n = 0;
  assert_int_equal(mooncake_store_get_replica_desc(f->store, "two", d, 2, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(d[0].location, daemon1);
  char out[VALUE_SIZE];
  assert_int_equal(mooncake_store_get_into(f->store, "two", out, sizeof(out)), VALUE_SIZE);
  assert_int_equal(check_pattern(out, sizeof(out), strlen("two")), -1); /* the bytes kept */
  assert_int_equal(clear_when_unleased(f->store, "two", daemon0), MOONCAKE_STORE_SEGMENT_NOT_FOUND);
  assert_int_equal(clear_when_unleased(f->store, "two", daemon1), 0); /* its last: it goes */
  assert_int_equal(mooncake_store_is_exist(f->store, "two"), 0);
}

/* The master's lent segments at daemon 0 include id (its size and use written out). */
static int lent_at_daemon0(uint64_t id, mc_cluster_segment *out) {
  mc_cluster_segment lent[16];
  int n = mc_cluster_lent_segments_at(g_cluster, 0, lent, 16);
  for (int i = 0; i < n && i < 16; ++i) {
    if ((uint64_t)lent[i].id == id) {
      if (out != NULL) *out = lent[i];
      return 1;
    }
  }
  return 0;
}

static void test_mount_arguments(void **state) {
  store_fixture *f = *state;
  uint64_t id = 0;
  char outside[4096];
  assert_int_equal(mooncake_store_mount_segment(NULL, outside, 4096, &id), -1);
  assert_int_equal(mooncake_store_mount_segment(f->store, NULL, 4096, &id), -1);
  assert_int_equal(mooncake_store_mount_segment(f->store, outside, 4096, NULL), -1);
  /* Memory the daemon does not share: refused, nothing mounted. */
  assert_int_equal(mooncake_store_mount_segment(f->store, outside, sizeof(outside), &id),
                   MOONCAKE_STORE_INVALID_PARAMS);
  void *block = mooncake_store_alloc(f->store, 1u << 20);
  assert_non_null(block);
  assert_int_equal(mooncake_store_mount_segment(f->store, block, 0, &id),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_mount_segment(f->store, block, POOL_SIZE + 1, &id),
                   MOONCAKE_STORE_INVALID_PARAMS);
  mooncake_store_free(f->store, block);
  assert_int_equal(mooncake_store_allocate_and_mount_segment(NULL, 1, &id, NULL), -1);
  assert_int_equal(mooncake_store_allocate_and_mount_segment(f->store, 1, NULL, NULL), -1);
  assert_int_equal(mooncake_store_allocate_and_mount_segment(f->store, 0, &id, NULL),
                   MOONCAKE_STORE_INVALID_PARAMS);
  assert_int_equal(mooncake_store_unmount_segment(NULL, 1, NULL, NULL), -1);
  assert_int_equal(mooncake_store_unmount_segment(f->store, 12345, NULL, NULL),
                   MOONCAKE_STORE_SEGMENT_NOT_FOUND);
  assert_int_equal(mooncake_store_unmount_local_disk_segment(NULL), -1);
  /* No SSD tier on these daemons: nothing to unmount. */
  assert_int_equal(mooncake_store_unmount_local_disk_segment(f->store), 0);
}

/* Puts objects steered to daemon 0 until some land in the lent segment id (daemon 0's own
 * 8 MiB fill first), unmounts it, and checks that every object was moved (daemon 1 has
 * room) with its bytes. */
static void lend_and_unmount(mooncake_store_t s, uint64_t id, uint64_t size) {
  mc_cluster_segment seg;
  assert_true(lent_at_daemon0(id, &seg));
  assert_int_equal(seg.size, size);
  /* Another handle's segment is not this one's to unmount. */
  mooncake_store_t other = connect_app(g_cluster, 0, POOL_SIZE);
  assert_int_equal(mooncake_store_unmount_segment(other, id, NULL, NULL),
                   MOONCAKE_STORE_SEGMENT_NOT_FOUND);
  mooncake_store_destroy(other);
  static const int d0[] = {0};
  placement p;
  steer(&p, g_cluster, d0, 1, 1);
  char key[64];
  char value[VALUE_SIZE];
  int stored = 0;
  for (int in_lent = 0; !in_lent && stored < 4096; ++stored) {
    snprintf(key, sizeof(key), "lent-%llu-%d", (unsigned long long)id, stored);
    fill_pattern(value, sizeof(value), (uint64_t)stored);
    assert_int_equal(mooncake_store_put(s, key, value, sizeof(value), &p.config), 0);
    in_lent = lent_at_daemon0(id, &seg) && seg.used > 0;
  }
  assert_true(seg.used > 0);
  uint64_t moved = 99, dropped = 99;
  assert_int_equal(mooncake_store_unmount_segment(s, id, &moved, &dropped), 0);
  assert_true(moved >= 1);
  assert_int_equal(dropped, 0);
  assert_false(lent_at_daemon0(id, NULL));
  assert_int_equal(mooncake_store_unmount_segment(s, id, NULL, NULL),
                   MOONCAKE_STORE_SEGMENT_NOT_FOUND); /* once */
  for (int i = 0; i < stored; ++i) {
    snprintf(key, sizeof(key), "lent-%llu-%d", (unsigned long long)id, i);
    assert_int_equal(mooncake_store_get_into(s, key, value, sizeof(value)), VALUE_SIZE);
    assert_int_equal(check_pattern(value, sizeof(value), (uint64_t)i), -1);
  }
  mooncake_store_remove_all(s, 1);
}

static void test_pool_memory_lent(void **state) {
  store_fixture *f = *state;
  const uint64_t size = 4u << 20;
  void *block = mooncake_store_alloc(f->store, size);
  assert_non_null(block);
  uint64_t id = 0;
  assert_int_equal(mooncake_store_mount_segment(f->store, block, size, &id), 0);
  assert_true(id != 0);
  lend_and_unmount(f->store, id, size);
  mooncake_store_free(f->store, block);
}

static void test_daemon_memory_lent(void **state) {
  store_fixture *f = *state;
  uint64_t id = 0, allocated = 0;
  assert_int_equal(mooncake_store_allocate_and_mount_segment(f->store, 4u << 20, &id, &allocated),
                   0);
  assert_int_equal(allocated, 4u << 20);
  lend_and_unmount(f->store, id, allocated);
}

/* A segment left mounted goes with close: the master lists it no more. */
static void test_close_unmounts_what_is_left(void **state) {
  (void)state;
  mooncake_store_t s = connect_app(g_cluster, 0, POOL_SIZE);
  uint64_t a = 0, b = 0;
  void *block = mooncake_store_alloc(s, 1u << 20);
  assert_int_equal(mooncake_store_mount_segment(s, block, 1u << 20, &a), 0);
  assert_int_equal(mooncake_store_allocate_and_mount_segment(s, 1u << 20, &b, NULL), 0);
  assert_true(lent_at_daemon0(a, NULL) && lent_at_daemon0(b, NULL));
  assert_int_equal(mooncake_store_close(s), 0);
  int listed = 1;
  for (double deadline = now_seconds() + 10; listed && now_seconds() < deadline; usleep(50 * 1000)) {
    listed = lent_at_daemon0(a, NULL) || lent_at_daemon0(b, NULL);
  }
  assert_false(listed);
  mooncake_store_destroy(s);
}

int main(void) {
  mc_cluster_options o = {0};
  o.daemons = 2;
  o.segment_size = 8u << 20;
  g_cluster = mc_cluster_start_with(&o);
  if (g_cluster == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_replica_clear_arguments, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_replica_clear_skips_leased_keys, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_replica_clear_on_one_daemon, setup_store,
                                      store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_mount_arguments, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_pool_memory_lent, setup_store, store_fixture_teardown),
      cmocka_unit_test_setup_teardown(test_daemon_memory_lent, setup_store, store_fixture_teardown),
      cmocka_unit_test(test_close_unmounts_what_is_left),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
