/* The SSD tier end to end (issue 14), through the C ABI on a real master and real daemons
 * with temp SSD directories (docs/ssd.md):
 *  - a working set three times the DRAM segment with --offload_on_evict: every object
 *    reads back with its own bytes, the evicted ones from SSD (100 % hits), and the master
 *    counts disk-only objects;
 *  - promotion on hit: a disk-only object that is read gets a memory replica back;
 *  - bucket eviction: fifo drops the oldest bucket, lru the least recently read one;
 *  - a disk replica read from another daemon (READ_DISK), and its owner killed -9 while
 *    it is read: right bytes or a clean error, never wrong bytes;
 *  - a byte flipped in a bucket file: the object is never served, and is dropped at the
 *    master;
 *  - ENOSPC (a small tmpfs under a larger --ssd_capacity): the offload fails cleanly, the
 *    memory replica stays readable, the daemon keeps serving;
 *  - a directory another daemon holds (exit status 1), or a path that cannot be a
 *    directory (exit status 2, as a missing one: issue 30): the start stops with a log
 *    line naming --ssd_path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_ssd_util.h"
#include "tests/harness/cluster_test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* Offload at put and on eviction; puts wait for an eviction's offload rather than fail. */
static const char *const kOffloadMaster[] = {"--enable_offload", "--offload_on_evict", NULL};

/* ---- three times the memory, all of it readable ------------------------------------- */

#define WS_SEGMENT (16 * MiB)
#define WS_OBJ (256 * KiB)
#define WS_COUNT ((int)(3 * WS_SEGMENT / WS_OBJ)) /* 192 */

static void test_working_set_three_times_memory(void **state) {
  (void)state;
  static const char *const master[] = {"--offload_on_evict", NULL};
  static const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "256m",
                                       "--ssd_bucket_size", "8m", "--put_no_space_wait",
                                       "10s", NULL};
  mc_cluster_options opts = {1, WS_SEGMENT, 1000, master, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, 0, 4 * MiB);
  double t0 = now_seconds();
  put_series(s, "ws", 0, WS_COUNT, WS_OBJ, NULL);
  double put_s = now_seconds() - t0;

  mc_cluster_disk_stats d = disk_stats(c);
  mc_cluster_eviction_stats e;
  assert_int_equal(mc_cluster_eviction_stats_get(c, &e), 0);
  /* The oldest object lives on disk only: its memory went to eviction, after the offload. */
  int memory = -1, disk = -1;
  assert_int_equal(kinds_of(c, "ws", 0, &memory, &disk), 0);
  assert_int_equal(memory, 0);
  assert_int_equal(disk, 1);
  assert_true(d.disk_only_objects >= WS_COUNT - (int)(WS_SEGMENT / WS_OBJ));
  assert_true(d.evict_offloads > 0);

  int hits = 0;
  t0 = now_seconds();
  for (int i = 0; i < WS_COUNT; ++i) {
    int64_t got = read_checked(s, "ws", i, WS_OBJ);
    if (got != (int64_t)WS_OBJ) fprintf(stderr, "ws/%d: %lld\n", i, (long long)got);
    hits += got == (int64_t)WS_OBJ;
  }
  double get_s = now_seconds() - t0;
  fprintf(stderr,
          "%d objects (%zu MiB, 3x the segment) put in %.2f s, read in %.2f s: %d hits; "
          "master: %lld disk-only, %lld offloads (%lld for eviction), %lld objects evicted\n",
          WS_COUNT, WS_COUNT * WS_OBJ / MiB, put_s, get_s, hits,
          (long long)d.disk_only_objects, (long long)d.offloads_done,
          (long long)d.evict_offloads, (long long)e.evicted_objects);
  assert_int_equal(hits, WS_COUNT);
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

/* ---- promotion on hit ------------------------------------------------------------------ */

static void test_promotion_on_hit(void **state) {
  (void)state;
  static const char *const master[] = {"--offload_on_evict", "--promotion_on_hit", NULL};
  static const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "256m",
                                       "--ssd_bucket_size", "8m", "--put_no_space_wait",
                                       "10s", NULL};
  mc_cluster_options opts = {1, WS_SEGMENT, 1000, master, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, 0, 4 * MiB);
  put_series(s, "pr", 0, WS_COUNT, WS_OBJ, NULL);
  int memory = -1, disk = -1;
  assert_int_equal(kinds_of(c, "pr", 0, &memory, &disk), 0);
  assert_int_equal(memory, 0); /* evicted to disk */
  assert_int_equal(disk, 1);
  /* A hit, served from disk, re-creates a memory replica in the background. Best effort:
   * with memory at its watermark the reservation may find no room until an eviction's
   * offload has landed, and the next hit offers the promotion again. */
  for (double deadline = now_seconds() + 10; memory < 1 && now_seconds() < deadline;) {
    assert_int_equal(read_checked(s, "pr", 0, WS_OBJ), (int64_t)WS_OBJ);
    usleep(50 * 1000);
    assert_int_equal(kinds_of(c, "pr", 0, &memory, &disk), 0);
  }
  assert_int_equal(memory, 1);
  assert_int_equal(disk, 1); /* the disk copy stays */
  assert_true(disk_stats(c).promotions >= 1);
  /* The promoted replica holds the same bytes (memory is read first). */
  assert_int_equal(read_checked(s, "pr", 0, WS_OBJ), (int64_t)WS_OBJ);
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

/* ---- which bucket goes ---------------------------------------------------------------- */

/* Four objects per 1 MiB bucket (with room for the store's own headers), four buckets of
 * capacity: the fourth bucket's writes pass the 0.9 watermark and one bucket goes. */
#define BK_OBJ (240 * KiB)

static void put_bucket(const mc_cluster *c, mooncake_store_t s, const char *prefix,
                       int64_t *done) {
  put_series(s, prefix, 0, 4, BK_OBJ, NULL);
  *done += 4;
  await_offloads_done(c, *done, 20);  /* in put order: one bucket per prefix */
}

static int on_disk(const mc_cluster *c, const char *prefix, int i) {
  int memory = 0, disk = 0;
  if (kinds_of(c, prefix, i, &memory, &disk) != 0) return 0;  /* gone with its last replica */
  return disk;
}

static void run_bucket_policy(const char *policy) {
  static const char *const master[] = {"--enable_offload", "--offload_on_evict", NULL};
  const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "4m",
                                "--ssd_bucket_size", "1m", "--ssd_eviction_policy", policy,
                                "--put_no_space_wait", "10s", NULL};
  /* DRAM for seven of them: older objects live on disk only, so their reads hit the SSD. */
  mc_cluster_options opts = {1, 2 * MiB, 1000, master, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, 0, 2 * MiB);
  int64_t done = 0;
  put_bucket(c, s, "A", &done);
  put_bucket(c, s, "B", &done);
  put_bucket(c, s, "C", &done);
  /* Bucket A read from the SSD: the most recently read bucket now. */
  for (int i = 0; i < 4; ++i) {
    int memory = -1, disk = -1;
    assert_int_equal(kinds_of(c, "A", i, &memory, &disk), 0);
    assert_int_equal(memory, 0);
    assert_int_equal(disk, 1);
    assert_int_equal(read_checked(s, "A", i, BK_OBJ), (int64_t)BK_OBJ);
  }
  mc_cluster_disk_stats before = disk_stats(c);
  put_bucket(c, s, "D", &done);
  double until = now_seconds() + 20;
  while (disk_stats(c).dropped < before.dropped + 4 && now_seconds() < until) usleep(20 * 1000);
  mc_cluster_disk_stats after = disk_stats(c);
  const char *gone = strcmp(policy, "fifo") == 0 ? "A" : "B"; /* oldest / least recently read */
  const char *kept = strcmp(policy, "fifo") == 0 ? "B" : "A";
  int gone_left = 0, kept_left = 0, newer_left = 0;
  for (int i = 0; i < 4; ++i) {
    gone_left += on_disk(c, gone, i);
    kept_left += on_disk(c, kept, i);
    newer_left += on_disk(c, "C", i) + on_disk(c, "D", i);
  }
  fprintf(stderr, "%s: %lld disk replicas dropped; on disk: %d of bucket %s, %d of %s, %d of C+D\n",
          policy, (long long)(after.dropped - before.dropped), gone_left, gone, kept_left, kept,
          newer_left);
  assert_true(after.dropped >= before.dropped + 4);
  assert_int_equal(gone_left, 0);
  assert_int_equal(kept_left, 4);
  assert_int_equal(newer_left, 8);
  /* What survives reads back; what went is gone cleanly (or still in memory). */
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(read_checked(s, kept, i, BK_OBJ), (int64_t)BK_OBJ);
    int64_t got = read_checked(s, gone, i, BK_OBJ);
    assert_true(got == (int64_t)BK_OBJ || got == MOONCAKE_STORE_OBJECT_NOT_FOUND);
  }
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

static void test_fifo_evicts_the_oldest_bucket(void **state) {
  (void)state;
  run_bucket_policy("fifo");
}

static void test_lru_evicts_the_least_recently_read_bucket(void **state) {
  (void)state;
  run_bucket_policy("lru");
}

/* ---- another daemon reads the disk replica; its owner dies meanwhile ------------------- */

#define RM_SEGMENT (8 * MiB)
#define RM_OBJ (1 * MiB)
#define RM_COUNT 24 /* three times the owner's memory */

typedef struct reader {
  mooncake_store_t store;
  const int *keys; /* disk-only objects of the owner */
  int count;
  atomic_int stop;
  atomic_int good;
  atomic_int errors;
  atomic_int wrong; /* must stay 0 */
  atomic_int last_error;
} reader;

static void *read_loop(void *arg) {
  reader *r = arg;
  char *out = malloc(RM_OBJ);
  char key[SSD_KEY_LEN];
  for (int n = 0; !atomic_load(&r->stop); ++n) {
    int i = r->keys[n % r->count];
    key_of(key, sizeof(key), "rm", i);
    int64_t got = mooncake_store_get_into(r->store, key, out, RM_OBJ);
    if (got < 0) {
      atomic_fetch_add(&r->errors, 1);
      atomic_store(&r->last_error, (int)got);
    } else if (got != (int64_t)RM_OBJ || check_pattern(out, RM_OBJ, seed_of("rm", i)) != -1) {
      atomic_fetch_add(&r->wrong, 1);
    } else {
      atomic_fetch_add(&r->good, 1);
    }
  }
  free(out);
  return NULL;
}

static void test_remote_disk_read_and_owner_killed(void **state) {
  (void)state;
  static const char *const master[] = {"--offload_on_evict", NULL};
  static const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "128m",
                                       "--ssd_bucket_size", "8m", "--put_no_space_wait",
                                       "10s", NULL};
  mc_cluster_options opts = {1, RM_SEGMENT, 1000, master, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  /* The reader's daemon lends no memory: every object lives on the owner (daemon 0). */
  static const char *const no_segment[] = {"--global_segment_size", "0", NULL};
  int b = mc_cluster_add_daemon(c, no_segment);
  assert_int_equal(b, 1);
  assert_int_equal(mc_cluster_await_daemon_at(c, b, 10000), 0);
  mooncake_store_t owner = connect_app(c, 0, 4 * MiB);
  put_series(owner, "rm", 0, RM_COUNT, RM_OBJ, NULL);

  int disk_only[RM_COUNT], n_disk = 0;
  for (int i = 0; i < RM_COUNT; ++i) {
    int memory = -1, disk = -1;
    assert_int_equal(kinds_of(c, "rm", i, &memory, &disk), 0);
    if (memory == 0 && disk == 1) disk_only[n_disk++] = i;
  }
  assert_true(n_disk >= RM_COUNT / 2);
  mooncake_store_t other = connect_app(c, b, 4 * MiB);
  for (int i = 0; i < RM_COUNT; ++i) {
    assert_int_equal(read_checked(other, "rm", i, RM_OBJ), (int64_t)RM_OBJ);
  }

  reader r = {.store = other, .keys = disk_only, .count = n_disk};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, read_loop, &r), 0);
  double until = now_seconds() + 20;
  while (atomic_load(&r.good) < 2 * n_disk && now_seconds() < until) usleep(5 * 1000);
  int good_before = atomic_load(&r.good);
  mc_cluster_kill_daemon_at(c, 0, SIGKILL);
  int good_at_kill = atomic_load(&r.good);
  /* Reads go on against a dead owner for a while: each a clean error. */
  until = now_seconds() + 2;
  while (now_seconds() < until) usleep(10 * 1000);
  atomic_store(&r.stop, 1);
  pthread_join(thread, NULL);
  fprintf(stderr,
          "%d disk-only objects read remotely: %d good before the kill, %d in all, %d errors "
          "(last %d), %d wrong\n",
          n_disk, good_before, atomic_load(&r.good), atomic_load(&r.errors),
          atomic_load(&r.last_error), atomic_load(&r.wrong));
  assert_int_equal(atomic_load(&r.wrong), 0);
  assert_true(good_at_kill >= n_disk);
  assert_true(atomic_load(&r.errors) > 0);
  /* The reader's daemon is unharmed. */
  assert_int_equal(mooncake_store_health_check(other), 0);
  int64_t last = read_checked(other, "rm", disk_only[0], RM_OBJ);
  assert_true(last < 0);
  mooncake_store_destroy(other);
  mooncake_store_destroy(owner);
  mc_cluster_stop(c);
}

/* ---- a flipped byte -------------------------------------------------------------------- */

#define FL_OBJ (1 * MiB)

static void test_flipped_byte_is_never_served(void **state) {
  (void)state;
  static const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "64m",
                                       "--ssd_bucket_size", "8m", "--put_no_space_wait",
                                       "10s", NULL};
  mc_cluster_options opts = {1, 4 * MiB, 1000, kOffloadMaster, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, 0, 4 * MiB);
  put_series(s, "flip", 0, 1, FL_OBJ, NULL);
  put_series(s, "fill", 0, 12, FL_OBJ, NULL); /* three times the memory: flip/0 to disk only */
  await_offloads_done(c, 13, 20);
  int memory = -1, disk = -1;
  assert_int_equal(kinds_of(c, "flip", 0, &memory, &disk), 0);
  assert_int_equal(memory, 0);
  assert_int_equal(disk, 1);

  char *value = malloc(FL_OBJ);
  fill_pattern(value, FL_OBJ, seed_of("flip", 0));
  assert_int_equal(mc_cluster_flip_ssd_byte_at(c, 0, value + FL_OBJ / 2, 4096, 100), 0);
  free(value);
  int64_t got = read_checked(s, "flip", 0, FL_OBJ);
  fprintf(stderr, "flipped object read: %lld (%s)\n", (long long)got,
          got < 0 ? mooncake_store_strerror((int)got) : "served");
  assert_true(got < 0);
  /* Dropped at the master: it was its only replica, so the object goes. */
  mc_cluster_disk_stats d = disk_stats(c);
  double until = now_seconds() + 10;
  while (kinds_of(c, "flip", 0, NULL, NULL) == 0 && now_seconds() < until) usleep(20 * 1000);
  assert_int_equal(kinds_of(c, "flip", 0, NULL, NULL), -1);
  assert_true(disk_stats(c).dropped >= d.dropped);
  assert_true(disk_stats(c).dropped >= 1);
  assert_int_equal(read_checked(s, "flip", 0, FL_OBJ), MOONCAKE_STORE_OBJECT_NOT_FOUND);
  /* Its neighbours in the bucket read back intact. */
  for (int i = 0; i < 12; ++i) assert_int_equal(read_checked(s, "fill", i, FL_OBJ), (int64_t)FL_OBJ);
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

/* ---- ENOSPC --------------------------------------------------------------------------- */

static void test_enospc_keeps_the_memory_replica(void **state) {
  (void)state;
  static const char *const master[] = {"--enable_offload", NULL};
  mc_cluster_options opts = {0, 64 * MiB, 1000, master, NULL};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  const char *small = NULL;
  int mounted = mc_cluster_mount_small_fs(c, "small-ssd", 8 * MiB, &small);
  if (mounted == 1) {
    mc_cluster_stop(c);
    fprintf(stderr, "cannot mount a tmpfs here (not root?): the ENOSPC case is skipped\n");
    skip();
  }
  assert_int_equal(mounted, 0);
  /* The store believes it has 64 MiB; the filesystem holds 8. */
  const char *const flags[] = {"--ssd_path", small, "--ssd_capacity", "64m",
                               "--ssd_bucket_size", "32m", NULL};
  int d = mc_cluster_add_daemon(c, flags);
  assert_int_equal(d, 0);
  assert_int_equal(mc_cluster_await_daemon_at(c, d, 10000), 0);
  mooncake_store_t s = connect_app(c, d, 16 * MiB);

  put_series(s, "big", 0, 1, 12 * MiB, NULL); /* more than the filesystem holds */
  double until = now_seconds() + 20;
  while (disk_stats(c).offloads_failed < 1 && now_seconds() < until) usleep(20 * 1000);
  mc_cluster_disk_stats st = disk_stats(c);
  fprintf(stderr, "ENOSPC: %lld offloads failed, %lld done\n", (long long)st.offloads_failed,
          (long long)st.offloads_done);
  assert_true(st.offloads_failed >= 1);
  int memory = -1, disk = -1;
  assert_int_equal(kinds_of(c, "big", 0, &memory, &disk), 0);
  assert_int_equal(memory, 1);
  assert_int_equal(disk, 0);
  assert_int_equal(read_checked(s, "big", 0, 12 * MiB), (int64_t)(12 * MiB));
  /* The daemon keeps serving: new puts and gets. */
  put_series(s, "after", 0, 4, 256 * KiB, NULL);
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(read_checked(s, "after", i, 256 * KiB), (int64_t)(256 * KiB));
  }
  assert_int_equal(mc_cluster_daemon_alive(c, d), 1);
  assert_int_equal(count_log_lines(mc_cluster_log_at(c, d), "not stored", NULL) >= 1, 1);
  /* And the SSD takes what fits again: the failed write left no space taken. */
  await_offloads_done(c, 4, 20);
  assert_int_equal(kinds_of(c, "after", 3, &memory, &disk), 0);
  assert_int_equal(disk, 1);
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

/* ---- a directory the daemon cannot have ------------------------------------------------ */

static void test_unusable_ssd_path_stops_the_start(void **state) {
  (void)state;
  static const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "64m",
                                       "--ssd_bucket_size", "4m", NULL};
  mc_cluster_options opts = {1, 4 * MiB, 1000, NULL, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  /* Daemon 0's directory, locked by it. */
  const char *const same[] = {"--ssd_path", mc_cluster_ssd_dir_at(c, 0), NULL};
  int held = mc_cluster_add_daemon(c, same);
  assert_true(held > 0);
  int status = mc_cluster_wait_daemon_at(c, held, 10000);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  assert_true(count_log_lines(mc_cluster_log_at(c, held), "--ssd_path", NULL) >= 1);
  /* A path that cannot be a directory: refused with the flags, as a missing one is. */
  char under_file[512];
  snprintf(under_file, sizeof(under_file), "%s/ssd-0/LOCK/ssd", mc_cluster_dir(c));
  const char *const bad[] = {"--ssd_path", under_file, NULL};
  int refused = mc_cluster_add_daemon(c, bad);
  assert_true(refused > 0);
  status = mc_cluster_wait_daemon_at(c, refused, 10000);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 2);
  assert_true(count_log_lines(mc_cluster_log_at(c, refused), "--ssd_path", NULL) >= 1);
  /* The daemon that holds it serves on. */
  mooncake_store_t s = connect_app(c, 0, 2 * MiB);
  put_series(s, "held", 0, 1, 64 * KiB, NULL);
  assert_int_equal(read_checked(s, "held", 0, 64 * KiB), (int64_t)(64 * KiB));
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_working_set_three_times_memory),
      cmocka_unit_test(test_promotion_on_hit),
      cmocka_unit_test(test_fifo_evicts_the_oldest_bucket),
      cmocka_unit_test(test_lru_evicts_the_least_recently_read_bucket),
      cmocka_unit_test(test_remote_disk_read_and_owner_killed),
      cmocka_unit_test(test_flipped_byte_is_never_served),
      cmocka_unit_test(test_enospc_keeps_the_memory_replica),
      cmocka_unit_test(test_unusable_ssd_path_stops_the_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
