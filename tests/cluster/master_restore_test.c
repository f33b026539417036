/* The master keeps what it acknowledged: snapshots, the operation log, restore with fallback,
 * daemons re-attaching. Real processes on 127.0.0.1: a master with --enable_snapshot and
 * --enable_snapshot_restore, three daemons with --checksum (every get verifies the bytes
 * against the CRC the master restored), applications through the C ABI. The master is
 * killed with SIGKILL and started again in place; objects must read back with the right
 * bytes and no byte moved (the daemons keep their memory, the master only its directory). */
#define _GNU_SOURCE /* prlimit */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"
#include "tests/harness/restore_test_util.h"

#define MiB ((size_t)1 << 20)
#define SIZE MANY_SIZE /* put_many's values */

/* A master that snapshots into {dir}/snap and restores from it; the periodic snapshots are
 * far apart so that the tests take theirs by hand. The re-attach grace period is long
 * enough that a loaded machine does what a test checks within it (re-attaching, reading
 * the detached objects) well before it runs out. */
#define MASTER_FLAGS(mode)                                                               \
  "--enable_snapshot", "--snapshot_dir", "{dir}/snap", "--enable_snapshot_restore",      \
      "--snapshot_interval_seconds", "3600", "--oplog_mode", mode,                       \
      "--reattach_grace_period_sec", "20"
#define GRACE_S 20.0

static const char *const k_daemon_flags[] = {"--checksum", NULL};
static const char *const k_strict[] = {MASTER_FLAGS("strict"), NULL};
static const char *const k_relaxed[] = {MASTER_FLAGS("relaxed"), NULL};
static const char *const k_disabled[] = {MASTER_FLAGS("disabled"), NULL};

static mc_cluster *start(const char *const *master_flags, int daemons) {
  mc_cluster_options o = {daemons, 128 * MiB, 10000, master_flags, k_daemon_flags};
  mc_cluster *c = mc_cluster_start_with(&o);
  assert_non_null(c);
  return c;
}

/* None of them is there any more (-704). */
static void assert_all_missing(mooncake_store_t s, const char *prefix, int count) {
  tally t = read_all(s, prefix, count, NULL);
  if (t.missing != count) fail_msg("%s: %d of %d missing", prefix, t.missing, count);
}

/* Waits until every restored segment has been re-attached by its daemon. */
static void await_reattached(mc_cluster *c, double timeout_s) { await_pending(c, 0, timeout_s); }

/* Waits until the master lists a segment of daemon i (it has registered and mounted). */
static void await_mounted(mc_cluster *c, int i, double timeout_s) {
  mc_cluster_segment seg;
  for (double until = now_seconds() + timeout_s; mc_cluster_segment_at(c, i, &seg) != 0;) {
    if (now_seconds() > until) fail_msg("daemon %d has no segment after %.0f s", i, timeout_s);
    usleep(50 * 1000);
  }
}

static void crash_and_restore(mc_cluster *c) {
  mc_cluster_kill_master(c, SIGKILL);
  assert_int_equal(mc_cluster_restart_master(c), 0);
  await_reattached(c, 60);
}

/* Lines of the master's log holding both needle and "<name>". */
static int log_lines_naming(mc_cluster *c, const char *needle, const char *name) {
  return count_log_lines(mc_cluster_master_log(c), needle, name);
}

/* ---- 1. strict ------------------------------------------------------------------------ */

/* Strict: a snapshot in the middle (60,000 objects before, 40,000 after), SIGKILL right
 * after the last put returned. Every acknowledged object reads back, byte for byte, from
 * every daemon. */
static void test_strict_loses_nothing_acknowledged(void **state) {
  (void)state;
  mc_cluster *c = start(k_strict, 3);
  mooncake_store_t a = connect_app(c, 0, 64 * MiB), b = connect_app(c, 1, 64 * MiB);
  const int before = 60000, after = 40000;
  put_many(a, "before", before, NULL);
  int64_t sequence = 0, objects = 0;
  assert_int_equal(mc_cluster_master_snapshot(c, &sequence, &objects), 0);
  assert_int_equal(objects, before);
  put_many(b, "after", after, NULL);
  crash_and_restore(c);

  assert_int_equal(master_stats(c).restored_objects, before + after);
  assert_all_read(a, "before", before);
  assert_all_read(b, "after", after);
  mooncake_store_t x = connect_app(c, 2, 64 * MiB);
  assert_all_read(x, "after", after);
  /* New puts land in the restored segments without overwriting anything. */
  put_many(x, "new", 5000, NULL);
  assert_all_read(a, "before", before);
  assert_all_read(a, "new", 5000);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mooncake_store_destroy(x);
  mc_cluster_stop(c);
}

/* ---- 2. strict, under fire -------------------------------------------------------------- */

#define FIRE_CAP 200000

/* Puts prefix/0, 1, ... one at a time until told to stop, recording every result. */
typedef struct writer {
  mooncake_store_t s;
  const char *prefix;
  int stop;      /* __atomic */
  int done;      /* __atomic: results[0..done) are final */
  int acked;     /* __atomic: how many returned 0 */
  int *results;
} writer;

static void *writer_main(void *arg) {
  writer *w = arg;
  char key[48], buf[SIZE];
  for (int i = 0; i < FIRE_CAP && !__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE); ++i) {
    key_of(key, sizeof(key), w->prefix, i);
    fill_pattern(buf, SIZE, seed_of(w->prefix, i));
    w->results[i] = mooncake_store_put(w->s, key, buf, SIZE, NULL);
    if (w->results[i] == 0) __atomic_add_fetch(&w->acked, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&w->done, i + 1, __ATOMIC_RELEASE);
  }
  return NULL;
}

/* A writer puts continuously while the master is killed at an arbitrary moment and started
 * again: every put that returned 0 reads back with its bytes; a failed one may be missing
 * or present, but never with other bytes. */
static void test_strict_under_fire(void **state) {
  (void)state;
  mc_cluster *c = start(k_strict, 3);
  mooncake_store_t a = connect_app(c, 0, 64 * MiB);
  writer w = {a, "fire", 0, 0, 0, calloc(FIRE_CAP, sizeof(int))};
  assert_non_null(w.results);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, writer_main, &w), 0);
  /* Killed once the writer is under way (a slow machine gets there later)... */
  for (double until = now_seconds() + 60; __atomic_load_n(&w.acked, __ATOMIC_ACQUIRE) < 100;) {
    if (now_seconds() > until) fail_msg("no puts acknowledged before the kill");
    usleep(20 * 1000);
  }
  mc_cluster_kill_master(c, SIGKILL);
  int acked_at_kill = __atomic_load_n(&w.acked, __ATOMIC_ACQUIRE);
  assert_true(acked_at_kill > 0);
  /* ... and started again once the writer's puts have failed meanwhile. */
  for (double until = now_seconds() + 60;
       __atomic_load_n(&w.done, __ATOMIC_ACQUIRE) <= __atomic_load_n(&w.acked, __ATOMIC_ACQUIRE);) {
    if (now_seconds() > until) fail_msg("no put failed while the master was down");
    usleep(20 * 1000);
  }
  assert_int_equal(mc_cluster_restart_master(c), 0);
  await_reattached(c, 60);
  /* Puts work again once the daemons are back. */
  int acked_at_restore = __atomic_load_n(&w.acked, __ATOMIC_ACQUIRE);
  for (double until = now_seconds() + 60;
       __atomic_load_n(&w.acked, __ATOMIC_ACQUIRE) < acked_at_restore + 100;) {
    if (now_seconds() > until) fail_msg("no puts acknowledged after the restore");
    usleep(20 * 1000);
  }
  __atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
  assert_int_equal(pthread_join(thread, NULL), 0);

  int n = w.done, failed = 0, failed_present = 0;
  int64_t *codes = calloc((size_t)n, sizeof(int64_t));
  assert_non_null(codes);
  read_all(a, w.prefix, n, codes); /* checks the bytes of every key present */
  for (int i = 0; i < n; ++i) {
    if (w.results[i] == 0) {
      if (codes[i] != (int64_t)SIZE) fail_msg("acked fire/%08d: get %lld", i, (long long)codes[i]);
    } else {
      ++failed;
      if (codes[i] == (int64_t)SIZE) {
        ++failed_present;
      } else if (codes[i] != MOONCAKE_STORE_OBJECT_NOT_FOUND) {
        fail_msg("failed fire/%08d: get %lld", i, (long long)codes[i]);
      }
    }
  }
  print_message("%d puts: %d acknowledged before the kill, %d failed (%d of them present)\n", n,
                acked_at_kill, failed, failed_present);
  free(codes);
  free(w.results);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* ---- 3. relaxed ------------------------------------------------------------------------- */

/* Relaxed: what was put more than a flush interval (100 ms) before the crash survives it. */
static void test_relaxed_within_its_bound(void **state) {
  (void)state;
  mc_cluster *c = start(k_relaxed, 3);
  mooncake_store_t a = connect_app(c, 0, 64 * MiB);
  const int count = 20000;
  put_many(a, "relaxed", count, NULL);
  /* The background flush (every 100 ms) gets everything to disk on its own, without any
   * Sync; polled rather than slept, so that a loaded machine's slow fdatasync says how slow
   * instead of failing. */
  double t0 = now_seconds();
  mc_cluster_master_stats st = master_stats(c);
  while (st.oplog_synced != st.oplog_sequence && now_seconds() - t0 < 30) {
    usleep(20 * 1000);
    st = master_stats(c);
  }
  print_message("relaxed: %lld records durable %.0f ms after the last put returned\n",
                (long long)st.oplog_sequence, (now_seconds() - t0) * 1000);
  assert_true(st.oplog_sequence >= count);
  assert_int_equal(st.oplog_synced, st.oplog_sequence);
  crash_and_restore(c);
  mc_cluster_master_stats after = master_stats(c);
  if (after.restored_objects != count) {
    fail_msg("restored %lld objects of %d", (long long)after.restored_objects, count);
  }
  assert_all_read(a, "relaxed", count);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* ---- 4. snapshots only ------------------------------------------------------------------- */

/* --oplog_mode disabled: what the snapshot holds survives; what came after is lost, and
 * answers -704 (never someone else's bytes). */
static void test_snapshot_only(void **state) {
  (void)state;
  mc_cluster *c = start(k_disabled, 3);
  mooncake_store_t a = connect_app(c, 0, 64 * MiB);
  put_many(a, "kept", 20000, NULL);
  char name[128];
  int64_t objects = 0;
  take_snapshot(c, name, sizeof(name), &objects);
  assert_int_equal(objects, 20000);
  put_many(a, "lost", 10000, NULL);
  crash_and_restore(c);
  assert_int_equal(master_stats(c).restored_objects, 20000);
  assert_all_read(a, "kept", 20000);
  assert_all_missing(a, "lost", 10000);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* ---- 5. corrupted latest ------------------------------------------------------------------ */

/* S1, more puts, S2 (latest), more puts, SIGKILL, S2 corrupted: the restore says S2 is not
 * valid, falls back to S1, replays the log from S1's sequence (so every object is back)
 * and renames S2 *.invalid. One cluster, restarted once per kind of corruption. */
static void test_corrupted_latest_falls_back(void **state) {
  (void)state;
  mc_cluster *c = start(k_strict, 3);
  mooncake_store_t a = connect_app(c, 0, 64 * MiB);
  const int n = 3000;
  const char *const phases[3] = {"s1", "s2", "tail"};
  for (int round = 0; round < 3; ++round) {
    char prefix[32], s1[128], s2[128], path[512];
    snprintf(prefix, sizeof(prefix), "r%d-%s", round, phases[0]);
    put_many(a, prefix, n, NULL);
    take_snapshot(c, s1, sizeof(s1), NULL);
    snprintf(prefix, sizeof(prefix), "r%d-%s", round, phases[1]);
    put_many(a, prefix, n, NULL);
    take_snapshot(c, s2, sizeof(s2), NULL);
    assert_string_not_equal(s1, s2);
    snprintf(prefix, sizeof(prefix), "r%d-%s", round, phases[2]);
    put_many(a, prefix, n, NULL);
    mc_cluster_kill_master(c, SIGKILL);
    corrupt(c, s2, (enum corruption)round);
    assert_int_equal(mc_cluster_restart_master(c), 0);
    await_reattached(c, 60);

    assert_int_equal(log_lines_naming(c, "is not valid", s2), 1);
    assert_int_equal(log_lines_naming(c, "falling back to the next older", s2), 1);
    assert_int_equal(log_lines_naming(c, "loaded", s1), 1);
    snap_path(path, sizeof(path), c, s2, NULL);
    strcat(path, ".invalid");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(master_stats(c).restored_objects, 3 * n * (round + 1));
    for (int r = 0; r <= round; ++r) {
      for (int p = 0; p < 3; ++p) {
        snprintf(prefix, sizeof(prefix), "r%d-%s", r, phases[p]);
        assert_all_read(a, prefix, n);
      }
    }
  }
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* ---- 6. every snapshot corrupted ---------------------------------------------------------- */

/* No log and no valid snapshot: the master says so, starts empty and serves. */
static void test_all_snapshots_corrupted(void **state) {
  (void)state;
  mc_cluster *c = start(k_disabled, 3);
  mooncake_store_t a = connect_app(c, 0, 64 * MiB);
  char s1[128], s2[128];
  put_many(a, "old1", 5000, NULL);
  take_snapshot(c, s1, sizeof(s1), NULL);
  put_many(a, "old2", 5000, NULL);
  take_snapshot(c, s2, sizeof(s2), NULL);
  mc_cluster_kill_master(c, SIGKILL);
  corrupt(c, s1, FLIP_BYTE);
  corrupt(c, s2, FLIP_BYTE);
  /* The first start, on an empty directory, said so too. */
  const char *log = mc_cluster_master_log(c);
  int none = count_log_lines(log, "restore: no valid snapshot", NULL);
  int empty = count_log_lines(log, "starting empty", NULL);
  assert_int_equal(mc_cluster_restart_master(c), 0);

  assert_int_equal(log_lines_naming(c, "is not valid", s1), 1);
  assert_int_equal(log_lines_naming(c, "is not valid", s2), 1);
  assert_int_equal(count_log_lines(log, "restore: no valid snapshot", NULL), none + 1);
  assert_int_equal(count_log_lines(log, "starting empty", NULL), empty + 1);
  mc_cluster_master_stats st = master_stats(c);
  assert_int_equal(st.objects, 0);
  assert_int_equal(st.restored_objects, 0);
  assert_int_equal(st.pending_segments, 0);
  assert_all_missing(a, "old1", 5000);
  assert_all_missing(a, "old2", 5000);
  for (int i = 0; i < 3; ++i) await_mounted(c, i, 60);
  put_many(a, "fresh", 5000, NULL);
  assert_all_read(a, "fresh", 5000);
  assert_all_missing(a, "old1", 5000);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* ---- 7. snapshots under load -------------------------------------------------------------- */

/* Puts prefix/i one by one, reading back each one and an older one, until told to stop;
 * counts every failure. */
typedef struct loader {
  mooncake_store_t s;
  const char *prefix;
  int stop; /* __atomic */
  int done; /* __atomic */
  int failures;
} loader;

static void *loader_main(void *arg) {
  loader *l = arg;
  char key[48], in[SIZE], out[SIZE];
  uint64_t rnd = 88172645463325252ull;
  for (int i = 0; i < FIRE_CAP && !__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE); ++i) {
    key_of(key, sizeof(key), l->prefix, i);
    fill_pattern(in, SIZE, seed_of(l->prefix, i));
    int rc = mooncake_store_put(l->s, key, in, SIZE, NULL);
    if (rc != 0) {
      print_message("put %s: %d\n", key, rc);
      ++l->failures;
    }
    __atomic_store_n(&l->done, i + 1, __ATOMIC_RELEASE);
    rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
    int older = (int)(rnd % (uint64_t)(i + 1));
    for (int k = 0; k < 2; ++k) {
      int j = k == 0 ? i : older;
      key_of(key, sizeof(key), l->prefix, j);
      int64_t got = mooncake_store_get_into(l->s, key, out, SIZE);
      if (got != (int64_t)SIZE || check_pattern(out, SIZE, seed_of(l->prefix, j)) != -1) {
        print_message("get %s: %lld\n", key, (long long)got);
        ++l->failures;
      }
    }
  }
  return NULL;
}

/* Ten snapshots while two applications put and get: no request fails, every snapshot is
 * published, their object counts never go down, and a restore brings every key back. */
static void test_snapshots_under_load(void **state) {
  (void)state;
  mc_cluster *c = start(k_strict, 3);
  loader l[2] = {{connect_app(c, 0, 16 * MiB), "load0", 0, 0, 0},
                 {connect_app(c, 1, 16 * MiB), "load1", 0, 0, 0}};
  pthread_t threads[2];
  for (int t = 0; t < 2; ++t) {
    assert_int_equal(pthread_create(&threads[t], NULL, loader_main, &l[t]), 0);
  }
  /* Each snapshot once both have put a dozen more (waited for: a loaded machine puts
   * slowly, and the snapshots must still fall among the puts). */
  int64_t last = 0;
  for (int k = 0; k < 10; ++k) {
    for (int t = 0; t < 2; ++t) {
      for (double until = now_seconds() + 60;
           __atomic_load_n(&l[t].done, __ATOMIC_ACQUIRE) < 12 * (k + 1);) {
        if (now_seconds() > until) fail_msg("%s: no progress before snapshot %d", l[t].prefix, k);
        usleep(10 * 1000);
      }
    }
    int64_t sequence = 0, objects = 0;
    assert_int_equal(mc_cluster_master_snapshot(c, &sequence, &objects), 0);
    assert_true(objects >= last);
    last = objects;
  }
  for (int t = 0; t < 2; ++t) __atomic_store_n(&l[t].stop, 1, __ATOMIC_RELEASE);
  for (int t = 0; t < 2; ++t) assert_int_equal(pthread_join(threads[t], NULL), 0);
  print_message("%d + %d puts around 10 snapshots (the last one of %lld objects)\n", l[0].done,
                l[1].done, (long long)last);
  assert_true(last > 0);
  for (int t = 0; t < 2; ++t) {
    assert_int_equal(l[t].failures, 0);
    assert_true(l[t].done > 100);
  }
  crash_and_restore(c);
  assert_int_equal(master_stats(c).restored_objects, l[0].done + l[1].done);
  for (int t = 0; t < 2; ++t) {
    assert_all_read(l[t].s, l[0].prefix, l[0].done);
    assert_all_read(l[t].s, l[1].prefix, l[1].done);
  }
  for (int t = 0; t < 2; ++t) mooncake_store_destroy(l[t].s);
  mc_cluster_stop(c);
}

/* ---- 8, 9. daemons that do not come back as they were -------------------------------------- */

/* n objects on each daemon: on<i>/0..n-1 has its only replica on daemon i. */
static void put_on_each(mc_cluster *c, mooncake_store_t s, int n) {
  for (int i = 0; i < 3; ++i) {
    char prefix[16], key[48];
    snprintf(prefix, sizeof(prefix), "on%d", i);
    placement p;
    steer(&p, c, &i, 1, 1);
    put_many(s, prefix, n, &p.config);
    key_of(key, sizeof(key), prefix, n / 2);
    assert_int_equal(replica_daemon(c, key, 0), i);
  }
}

/* A daemon dies while the master is down: its objects are not ready during the grace
 * period, then gone; the others' objects read throughout. */
static void test_daemon_dies_while_master_down(void **state) {
  (void)state;
  mc_cluster *c = start(k_strict, 3);
  mooncake_store_t a = connect_app(c, 0, 64 * MiB), b = connect_app(c, 1, 64 * MiB);
  const int n = 4000;
  put_on_each(c, a, n);
  mc_cluster_kill_master(c, SIGKILL);
  mc_cluster_kill_daemon_at(c, 2, SIGKILL);
  double restarted = now_seconds();
  assert_int_equal(mc_cluster_restart_master(c), 0);
  await_pending(c, 1, 60);
  assert_all_read(a, "on0", n);
  assert_all_read(b, "on1", n);
  tally t = read_all(a, "on2", n, NULL);
  double read_at = now_seconds() - restarted;
  print_message("on2 %.1f s after the restart: %d not ready, %d missing\n", read_at,
                t.not_ready, t.missing);
  assert_int_equal(t.good, 0);
  if (read_at < GRACE_S - 1) assert_int_equal(t.not_ready, n); /* detached, not dropped */
  assert_int_equal(master_stats(c).pending_segments, 1);

  await_pending(c, 0, GRACE_S + 30);
  double dropped_at = now_seconds() - restarted;
  print_message("daemon 2's segment dropped %.1f s after the restart\n", dropped_at);
  assert_true(dropped_at >= GRACE_S - 1); /* not before the grace period ran out */
  assert_true(count_log_lines(mc_cluster_master_log(c), "did not re-attach within", NULL) >= 1);
  assert_all_missing(a, "on2", n);
  assert_all_missing(b, "on2", n);
  assert_all_read(a, "on0", n);
  assert_all_read(b, "on1", n);
  assert_all_read(a, "on1", n);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mc_cluster_stop(c);
}

/* A daemon restarted while the master is down (same port, new process, new daemon id):
 * once it registers, the master drops its predecessor's restored segment at once, without
 * waiting for the grace period; the other daemons' objects read, and the new daemon takes
 * new puts. */
/* ---- a disk that fills ------------------------------------------------------------ */

/* The master's log cannot grow (RLIMIT_FSIZE at its end, as a full disk): the put whose
 * record cannot be written is not acknowledged, the next ones are refused at once, reads go
 * on; once there is room again puts work, and after a crash everything acknowledged, before
 * and after, reads back. */
static void test_full_disk_refuses_and_loses_nothing(void **state) {
  (void)state;
  mc_cluster *c = start(k_strict, 1);
  mooncake_store_t a = connect_app(c, 0, 16 * MiB);
  put_many(a, "before", 2000, NULL);
  struct rlimit full = {(rlim_t)oplog_written_end(c), RLIM_INFINITY};
  assert_int_equal(prlimit(mc_cluster_master_pid(c), RLIMIT_FSIZE, &full, NULL), 0);
  char value[SIZE];
  fill_pattern(value, SIZE, 99);
  assert_int_equal(mooncake_store_put(a, "unacknowledged", value, SIZE, NULL),
                   MOONCAKE_STORE_PERSISTENT_FAIL);
  double t0 = now_seconds();
  assert_int_equal(mooncake_store_put(a, "refused", value, SIZE, NULL),
                   MOONCAKE_STORE_PERSISTENT_FAIL);
  /* Refused, not waited for: a wait would last the daemon's 10 s RPC timeout. */
  assert_true(now_seconds() - t0 < 5.0);
  assert_all_read(a, "before", 2000);
  assert_true(count_log_lines(mc_cluster_master_log(c), "File too large", NULL) >= 1);

  struct rlimit room = {RLIM_INFINITY, RLIM_INFINITY};
  assert_int_equal(prlimit(mc_cluster_master_pid(c), RLIMIT_FSIZE, &room, NULL), 0);
  int rc = -1;
  for (double until = now_seconds() + 60; rc != 0 && now_seconds() < until; usleep(50 * 1000)) {
    rc = mooncake_store_put(a, "room-again", value, SIZE, NULL);
  }
  assert_int_equal(rc, 0);
  put_many(a, "after", 2000, NULL);
  crash_and_restore(c);
  assert_all_read(a, "before", 2000);
  assert_all_read(a, "after", 2000);
  char back[SIZE];
  assert_int_equal(mooncake_store_get_into(a, "room-again", back, SIZE), (int64_t)SIZE);
  assert_int_equal(check_pattern(back, SIZE, 99), -1);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

static void test_daemon_restarted_while_master_down(void **state) {
  (void)state;
  mc_cluster *c = start(k_strict, 3);
  mooncake_store_t a = connect_app(c, 0, 64 * MiB), b = connect_app(c, 1, 64 * MiB);
  const int n = 4000;
  put_on_each(c, a, n);
  mc_cluster_kill_master(c, SIGKILL);
  mc_cluster_kill_daemon_at(c, 2, SIGKILL);
  /* The new daemon starts now and retries its registration until the master is back (the
   * master is restarted once it has tried); it serves its socket once it has registered. */
  assert_int_equal(mc_cluster_spawn_daemon_at(c, 2), 0);
  for (double until = now_seconds() + 60;
       count_log_lines(mc_cluster_log_at(c, 2), "cannot register with the master", NULL) == 0;) {
    if (now_seconds() > until) fail_msg("the new daemon never tried to register");
    usleep(20 * 1000);
  }
  double restarted = now_seconds();
  assert_int_equal(mc_cluster_restart_master(c), 0);
  assert_int_equal(mc_cluster_await_daemon_at(c, 2, 60000), 0);
  /* It serves once it has registered, and its registration dropped the old segment. */
  assert_all_missing(a, "on2", n);
  double dropped = now_seconds() - restarted;
  assert_true(count_log_lines(mc_cluster_master_log(c), "replaced by daemon", NULL) >= 1);
  await_pending(c, 0, GRACE_S);
  double settled = now_seconds() - restarted;
  print_message("old segment dropped %.1f s, none pending %.1f s after the restart\n", dropped,
                settled);
  assert_true(settled < GRACE_S - 1); /* the grace period was not waited out */
  assert_all_missing(a, "on2", n);
  assert_all_read(a, "on0", n);
  assert_all_read(b, "on1", n);

  await_mounted(c, 2, 60);
  mooncake_store_t x = connect_app(c, 2, 64 * MiB);
  assert_all_missing(x, "on2", n);
  int two = 2;
  placement p;
  steer(&p, c, &two, 1, 1);
  put_many(a, "new2", n, &p.config);
  assert_int_equal(replica_daemon(c, "new2/00000000", 0), 2);
  assert_all_read(x, "new2", n);
  assert_all_read(b, "new2", n);
  assert_all_read(x, "on0", n);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mooncake_store_destroy(x);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strict_loses_nothing_acknowledged),
      cmocka_unit_test(test_strict_under_fire),
      cmocka_unit_test(test_relaxed_within_its_bound),
      cmocka_unit_test(test_snapshot_only),
      cmocka_unit_test(test_corrupted_latest_falls_back),
      cmocka_unit_test(test_all_snapshots_corrupted),
      cmocka_unit_test(test_snapshots_under_load),
      cmocka_unit_test(test_daemon_dies_while_master_down),
      cmocka_unit_test(test_daemon_restarted_while_master_down),
      cmocka_unit_test(test_full_disk_refuses_and_loses_nothing),
  };
  /* MC_TEST_FILTER=test_relaxed* runs only the tests whose names match. */
  if (getenv("MC_TEST_FILTER") != NULL) cmocka_set_test_filter(getenv("MC_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
