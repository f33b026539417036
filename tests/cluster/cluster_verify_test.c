/* Replicas the master cannot vouch for, against real processes (docs/durability.md,
 * "Verification after restore", "A daemon that returns late"): a master with its log
 * disabled, restored to a snapshot that lists an object whose range was since given to
 * another, never hands out the other object's bytes, whole or in fragments -- the daemon's
 * check drops it and the master counts it; a daemon stopped past its grace period comes back to find the objects
 * its memory still holds adopted back, while a key removed or written again meanwhile keeps
 * its newer state. Daemons run with --checksum (objects carry their CRC-32C). */
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
#define VALUE (64 * 1024)
#define KEPT 8

static const char *const k_daemon_flags[] = {"--checksum", NULL};

static mc_cluster_verify_stats verify_stats(const mc_cluster *c) {
  mc_cluster_verify_stats s;
  assert_int_equal(mc_cluster_verify_stats_get(c, &s), 0);
  return s;
}

/* Objects the master dropped because their bytes were wrong: found by the daemon's check
 * after a restore, or reported by a reader. */
static int64_t dropped_old(const mc_cluster *c) {
  mc_cluster_verify_stats s = verify_stats(c);
  return s.restore_checksum + s.unreadable;
}

/* Puts VALUE bytes of pattern seed under key through a, its one replica on daemon target
 * (asked of the master, which leases the object, unless leased is 0). */
static void put_leased(mc_cluster *c, mooncake_store_t a, const char *key, int target,
                       uint64_t seed, int leased) {
  placement p;
  steer(&p, c, &target, 1, 1);
  char *value = malloc(VALUE);
  fill_pattern(value, VALUE, seed);
  assert_int_equal(mooncake_store_put(a, key, value, VALUE, &p.config), 0);
  free(value);
  if (leased) assert_int_equal(replica_daemon(c, key, 0), target);
}

static void put_on(mc_cluster *c, mooncake_store_t a, const char *key, int target,
                   uint64_t seed) {
  put_leased(c, a, key, target, seed, 1);
}

/* get_into's answer for key; when it read the value, whether its bytes are seed's. */
static int64_t get_checked(mooncake_store_t a, const char *key, uint64_t seed) {
  char *buf = malloc(VALUE);
  int64_t n = mooncake_store_get_into(a, key, buf, VALUE);
  if (n == VALUE && check_pattern(buf, VALUE, seed) >= 0) {
    free(buf);
    fail_msg("%s read back with wrong bytes", key);
  }
  free(buf);
  return n;
}

/* ---- 1. a restore to an older point -------------------------------------------------------- */

/* --oplog_mode disabled: "old" is in the snapshot, removed after it, and its range holds
 * "new" (also after it) when the master is killed. The restored master lists "old" at
 * that range: until the daemon has checked it a get fails its checksum (-801), after it
 * "old" is gone (-704); it never reads as "new"'s bytes, and the drop is counted. */
static void test_restore_never_serves_another_keys_bytes(void **state) {
  (void)state;
  static const char *const master_flags[] = {
      "--enable_snapshot", "--snapshot_dir", "{dir}/snap", "--enable_snapshot_restore",
      "--snapshot_interval_seconds", "3600", "--oplog_mode", "disabled",
      "--reattach_grace_period_sec", "30", NULL};
  mc_cluster_options o = {1, 16 * MiB, 1000, master_flags, k_daemon_flags};
  mc_cluster *c = mc_cluster_start_with(&o);
  assert_non_null(c);
  mooncake_store_t a = connect_app(c, 0, 8 * MiB);
  put_leased(c, a, "old", 0, 1, 0); /* no lease: its removal frees the range at once */
  uint64_t old_at = 0, new_at = 1;
  assert_int_equal(mc_cluster_offset_of(c, "old", &old_at), 0);
  int64_t sequence = 0, objects = 0;
  assert_int_equal(mc_cluster_master_snapshot(c, &sequence, &objects), 0);
  assert_int_equal(objects, 1);
  assert_int_equal(mooncake_store_remove(a, "old", 0), 0);
  put_leased(c, a, "new", 0, 2, 0);
  assert_int_equal(mc_cluster_offset_of(c, "new", &new_at), 0);
  assert_int_equal(new_at, old_at);  /* the range the snapshot gives "old" holds "new" */

  mc_cluster_kill_master(c, SIGKILL);
  assert_int_equal(mc_cluster_restart_master(c), 0);
  /* Until "old" is dropped, every answer is a failure, never "new"'s bytes. Either the
   * daemon's check drops it, or a reader's -801 reaches the master first (the daemon
   * reports the mismatch) and it is dropped as unreadable: both are counted. */
  for (double until = now_seconds() + 60; dropped_old(c) < 1;) {
    if (now_seconds() > until) fail_msg("\"old\" was never dropped");
    /* -801 (its checksum), or whatever a master and daemons coming back may answer. */
    int64_t n = get_checked(a, "old", 1);
    if (n >= 0) fail_msg("\"old\" answered %lld before its check", (long long)n);
    /* A fragment has no checksum of its own: it must not be read from the unchecked
     * replica (whose bytes are "new"'s) at all. */
    char part[4096];
    mooncake_range_t r = {4096, sizeof(part), 0};
    int64_t result = 0;
    n = mooncake_store_get_ranges(a, "old", part, sizeof(part), &r, 1, &result);
    if (n >= 0) fail_msg("a fragment of \"old\" was read before its check");
    usleep(20 * 1000);
  }
  assert_int_equal(get_checked(a, "old", 1), -704);
  assert_int_equal(get_checked(a, "new", 2), -704); /* after the snapshot: lost */
  assert_int_equal(dropped_old(c), 1);
  for (double until = now_seconds() + 60; verify_stats(c).unverified_replicas > 0;) {
    if (now_seconds() > until) fail_msg("the daemon's check never ran");
    usleep(20 * 1000);
  }
  /* The check found "old" bad, unless a reader's report had dropped it already. */
  if (verify_stats(c).restore_checksum == 1) {
    assert_true(count_log_lines(mc_cluster_log_at(c, 0),
                                "verified: 1 replicas checked, 1 bad", NULL) >= 1);
  }
  /* Its range takes new puts again. */
  put_on(c, a, "after", 0, 3);
  assert_int_equal(get_checked(a, "after", 3), VALUE);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* ---- 2. a daemon that returns late ---------------------------------------------------------- */

/* Daemon 1 holds kept-*, "removed" and "re-put"; it is stopped until the master has
 * declared it dead and parked its objects. Meanwhile "removed" is removed and "re-put"
 * written again on daemon 0. Continued, daemon 1 registers and mounts again with the same
 * incarnation, checks the parked ranges, and the master adopts kept-* back: they read with
 * their bytes; "removed" stays gone and "re-put" keeps its new value. */
static void test_late_daemon_gets_its_objects_back(void **state) {
  (void)state;
  static const char *const master_flags[] = {"--client_live_ttl_sec", "1",
                                             "--daemon_grace_period_sec", "1", NULL};
  mc_cluster_options o = {2, 16 * MiB, 1000, master_flags, k_daemon_flags};
  mc_cluster *c = mc_cluster_start_with(&o);
  assert_non_null(c);
  mooncake_store_t a = connect_app(c, 0, 8 * MiB);
  char key[32];
  for (int i = 0; i < KEPT; ++i) {
    snprintf(key, sizeof(key), "kept-%d", i);
    put_on(c, a, key, 1, 100 + (uint64_t)i);
  }
  put_on(c, a, "removed", 1, 200);
  put_on(c, a, "re-put", 1, 201);

  assert_int_equal(mc_cluster_pause_daemon_at(c, 1), 0);
  for (double until = now_seconds() + 60; verify_stats(c).parked_objects < KEPT + 2;) {
    if (now_seconds() > until) fail_msg("daemon 1's objects were never parked");
    usleep(50 * 1000);
  }
  assert_int_equal(get_checked(a, "kept-0", 100), -704);
  assert_int_equal(mooncake_store_is_exist(a, "kept-0"), 0);
  assert_int_equal(mooncake_store_remove(a, "removed", 0), -704);
  put_on(c, a, "re-put", 0, 301);

  assert_int_equal(mc_cluster_resume_daemon_at(c, 1), 0);
  for (double until = now_seconds() + 60; verify_stats(c).parked_adopted < KEPT;) {
    if (now_seconds() > until) fail_msg("daemon 1's objects were never adopted back");
    usleep(50 * 1000);
  }
  for (int i = 0; i < KEPT; ++i) {
    snprintf(key, sizeof(key), "kept-%d", i);
    assert_int_equal(get_checked(a, key, 100 + (uint64_t)i), VALUE);
    assert_int_equal(replica_daemon(c, key, 0), 1);
  }
  assert_int_equal(get_checked(a, "removed", 200), -704);
  assert_int_equal(get_checked(a, "re-put", 301), VALUE);
  assert_int_equal(replica_daemon(c, "re-put", 0), 0);
  mc_cluster_verify_stats s = verify_stats(c);
  assert_int_equal(s.parked_adopted, KEPT);
  assert_int_equal(s.parked_objects, 0);
  assert_int_equal(s.restore_checksum, 0);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_restore_never_serves_another_keys_bytes),
      cmocka_unit_test(test_late_daemon_gets_its_objects_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
