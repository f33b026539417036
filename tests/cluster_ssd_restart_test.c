/* The SSD tier across a kill -9 of its daemon (issue 14; docs/ssd.md, "Restarts"), on a
 * real master and two real daemons, the owner (0) and a reader (1), both with SSD dirs:
 *  - strict: every offload the master acknowledged before the kill reads back, with its
 *    own bytes, through the restarted owner and through the other daemon;
 *  - relaxed: every offload acknowledged more than the stated bound (one second) before
 *    the kill reads back; the ones in the window read back or answer -704 once the
 *    restarted owner's reconciliation is complete, never wrong, never -800;
 *  - disabled: none reads back, each answers -704 cleanly;
 * and a master restarted without its state, which adopts what the daemons' SSDs hold. */
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
#include "tests/cluster.h"
#include "tests/cluster_ssd_util.h"
#include "tests/cluster_test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define OBJ (256 * KiB)
#define COUNT 32      /* 8 MiB: all in memory as well; the kill takes the memory away */
#define LATE 8        /* relaxed: put right before the kill, inside the bound */
#define BOUND_S 1.0   /* relaxed mode's bound (daemon/ssd_store/ssd_store.h, kRelaxedSyncMs) */

enum { OWNER = 0, READER = 1 };

/* Starts the cluster with every daemon's SSD in mode, puts COUNT objects through the
 * owner with offload at put, and waits until the master acknowledged every offload. */
static mc_cluster *start_and_offload(const char *mode, mooncake_store_t *owner) {
  static const char *const master[] = {"--enable_offload", NULL};
  const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "64m",
                                "--ssd_bucket_size", "4m", "--ssd_persist_mode", mode, NULL};
  mc_cluster_options opts = {2, 32 * MiB, 1000, master, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  *owner = connect_app(c, OWNER, 4 * MiB);
  placement p;
  const int target[] = {OWNER};
  steer(&p, c, target, 1, 1);
  put_series(*owner, "rs", 0, COUNT, OBJ, &p.config);
  await_offloads_done(c, COUNT, 20);
  for (int i = 0; i < COUNT; ++i) {
    int memory = -1, disk = -1;
    assert_int_equal(kinds_of(c, "rs", i, &memory, &disk), 0);
    assert_int_equal(disk, 1);
  }
  return c;
}

/* kill -9 of the owner, then the same daemon again (same --ssd_path, socket and port),
 * waited for until its reconciliation with the master is complete. */
static mooncake_store_t kill_and_restart(mc_cluster *c, mooncake_store_t owner) {
  mooncake_store_destroy(owner);
  int before = reconciliations(c, OWNER);
  mc_cluster_kill_daemon_at(c, OWNER, SIGKILL);
  assert_int_equal(mc_cluster_restart_daemon_at(c, OWNER), 0);
  await_reconciliation(c, OWNER, before, 30);
  return connect_app(c, OWNER, 4 * MiB);
}

/* How many of prefix/0..count-1 read back through s (each waited for up to timeout_s
 * while it answers an error); every one read is right, by read_checked. */
static int readable(mooncake_store_t s, const char *prefix, int count, double timeout_s) {
  int n = 0;
  for (int i = 0; i < count; ++i) {
    n += read_checked_within(s, prefix, i, OBJ, timeout_s) == (int64_t)OBJ;
  }
  return n;
}

static void test_strict_every_acknowledged_offload_survives(void **state) {
  (void)state;
  mooncake_store_t owner;
  mc_cluster *c = start_and_offload("strict", &owner);
  owner = kill_and_restart(c, owner);
  mooncake_store_t reader = connect_app(c, READER, 4 * MiB);
  int via_reader = readable(reader, "rs", COUNT, 10);
  int via_owner = readable(owner, "rs", COUNT, 10);
  mc_cluster_disk_stats d = disk_stats(c);
  fprintf(stderr, "strict: %d of %d read back through the other daemon, %d through the "
          "restarted owner; master: %lld disk objects, %lld adopted\n",
          via_reader, COUNT, via_owner, (long long)d.objects, (long long)d.adopted);
  assert_int_equal(via_reader, COUNT);
  assert_int_equal(via_owner, COUNT);
  assert_true(count_log_lines(mc_cluster_log_at(c, OWNER), "persisted identity", NULL) >= 1);
  mooncake_store_destroy(reader);
  mooncake_store_destroy(owner);
  mc_cluster_stop(c);
}

static void test_relaxed_offloads_older_than_the_bound_survive(void **state) {
  (void)state;
  mooncake_store_t owner;
  mc_cluster *c = start_and_offload("relaxed", &owner);
  usleep((useconds_t)((BOUND_S + 1.0) * 1e6)); /* the bound, and a margin */
  /* Inside the bound: these may be lost, never served wrong. */
  placement p;
  const int target[] = {OWNER};
  steer(&p, c, target, 1, 1);
  put_series(owner, "late", 0, LATE, OBJ, &p.config);
  owner = kill_and_restart(c, owner);
  mooncake_store_t reader = connect_app(c, READER, 4 * MiB);
  int old = readable(reader, "rs", COUNT, 10);
  int late = 0;
  for (int i = 0; i < LATE; ++i) {
    /* Reconciled: a copy the SSD lost is gone at the master too (issue 33), never listed
     * and unreadable (-800). */
    int64_t got = read_checked(reader, "late", i, OBJ);
    assert_true(got == (int64_t)OBJ || got == MOONCAKE_STORE_OBJECT_NOT_FOUND);
    late += got == (int64_t)OBJ;
  }
  fprintf(stderr, "relaxed: %d of %d older than the bound read back, %d of %d inside it\n",
          old, COUNT, late, LATE);
  assert_int_equal(old, COUNT);
  assert_int_equal(readable(owner, "rs", COUNT, 10), COUNT);
  mooncake_store_destroy(reader);
  mooncake_store_destroy(owner);
  mc_cluster_stop(c);
}

static void test_disabled_nothing_survives_cleanly(void **state) {
  (void)state;
  mooncake_store_t owner;
  mc_cluster *c = start_and_offload("disabled", &owner);
  owner = kill_and_restart(c, owner);
  mooncake_store_t reader = connect_app(c, READER, 4 * MiB);
  /* Each answers -704 once the master has dropped the old daemon's segments, which the
   * restarted one asks for at once; meanwhile nothing but a clean error. */
  int missing = 0;
  for (int i = 0; i < COUNT; ++i) {
    double until = now_seconds() + 10;
    int64_t got = read_checked(reader, "rs", i, OBJ);
    while (got != MOONCAKE_STORE_OBJECT_NOT_FOUND && now_seconds() < until) {
      assert_true(got < 0);
      usleep(20 * 1000);
      got = read_checked(reader, "rs", i, OBJ);
    }
    missing += got == MOONCAKE_STORE_OBJECT_NOT_FOUND;
    assert_int_equal(read_checked(owner, "rs", i, OBJ), MOONCAKE_STORE_OBJECT_NOT_FOUND);
  }
  fprintf(stderr, "disabled: %d of %d answer -704 after the restart\n", missing, COUNT);
  assert_int_equal(missing, COUNT);
  assert_true(count_log_lines(mc_cluster_log_at(c, OWNER), "wiped", NULL) >= 1);
  mooncake_store_destroy(reader);
  mooncake_store_destroy(owner);
  mc_cluster_stop(c);
}

/* A master restarted without its state (no snapshot, no log) learns the disk replicas
 * again from the daemons: they mount their disk segments again and re-register, and the
 * new master adopts every object it does not know. Disk-only objects read back. */
static void test_master_restart_adopts_disk_replicas(void **state) {
  (void)state;
  static const char *const master[] = {"--offload_on_evict", NULL};
  static const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "64m",
                                       "--ssd_bucket_size", "4m", "--ssd_persist_mode",
                                       "strict", "--put_no_space_wait", "10s", NULL};
  mc_cluster_options opts = {1, 4 * MiB, 1000, master, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, OWNER, 4 * MiB);
  put_series(s, "ms", 0, COUNT, OBJ, NULL); /* twice the memory: the older half on disk only */
  int disk_only[COUNT], n = 0;
  for (int i = 0; i < COUNT; ++i) {
    int memory = -1, disk = -1;
    assert_int_equal(kinds_of(c, "ms", i, &memory, &disk), 0);
    if (memory == 0 && disk == 1) disk_only[n++] = i;
  }
  assert_true(n >= COUNT / 4);
  mc_cluster_kill_master(c, SIGKILL);
  assert_int_equal(mc_cluster_restart_master(c), 0);
  int back = 0;
  for (int k = 0; k < n; ++k) {
    back += read_checked_within(s, "ms", disk_only[k], OBJ, 15) == (int64_t)OBJ;
  }
  mc_cluster_disk_stats d = disk_stats(c);
  fprintf(stderr, "master restarted: %d of %d disk-only objects read back; %lld adopted\n",
          back, n, (long long)d.adopted);
  assert_int_equal(back, n);
  assert_true(d.adopted >= n);
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strict_every_acknowledged_offload_survives),
      cmocka_unit_test(test_relaxed_offloads_older_than_the_bound_survive),
      cmocka_unit_test(test_disabled_nothing_survives_cleanly),
      cmocka_unit_test(test_master_restart_adopts_disk_replicas),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
