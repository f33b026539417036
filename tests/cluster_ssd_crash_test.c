/* Issue 33 for the SSD tier: no disk replica is listed that cannot be read. On a real
 * master and three real daemons with their SSDs in relaxed mode (which may lose what was
 * written in its last second), the owner (0) holds every object's memory replica and
 * offloads it; a writer (1) and a reader (2) never go down.
 *  - kill -9 of the owner in the middle of a burst of puts, restart with the same
 *    --ssd_path: once its reconciliation is complete every object offloaded longer than
 *    the bound before reads back, and every acknowledged key of the burst reads back its
 *    exact bytes or answers -704, never -800 nor another answer; exist says present only
 *    for what reads; a re-put of a lost key succeeds and reads back;
 *  - an SSD that lost the records of its newest bucket (as a relaxed-mode crash loses its
 *    last second, made certain here): the master drops exactly the disk replicas the SSD
 *    no longer holds, counts them in mooncake_master_objects_dropped_total{reason=
 *    "disk_reconcile"}, and a second restart (a reconciliation repeated) drops nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
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
#define OBJ (64 * KiB)
#define BURST 192 /* 12 MiB: in the owner's memory, three buckets' worth on its SSD */
#define OLD 32    /* put before the burst, older than the bound at the kill */
#define BOUND_S 1.0 /* relaxed mode's bound (daemon/ssd_store/ssd_store.h, kRelaxedSyncMs) */

enum { OWNER = 0, WRITER = 1, READER = 2 };

static const char *const kDropped =
    "mooncake_master_objects_dropped_total{reason=\"disk_reconcile\"}";

static mc_cluster *start(void) {
  static const char *const master[] = {"--enable_offload", NULL};
  static const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "64m",
                                       "--ssd_bucket_size", "4m", "--ssd_persist_mode",
                                       "relaxed", NULL};
  mc_cluster_options opts = {3, 32 * MiB, 1000, master, daemon};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  return c;
}

static double dropped_metric(const mc_cluster *c) {
  double v = -1;
  assert_int_equal(mc_cluster_master_metric(c, kDropped, &v), 0);
  return v;
}

/* kill -9 of the owner, restart on the same --ssd_path, and wait for the log line of its
 * completed reconciliation (after which nothing of its SSD is in doubt at the master). */
static void restart_owner_reconciled(mc_cluster *c) {
  int before = reconciliations(c, OWNER);
  if (mc_cluster_daemon_alive(c, OWNER)) mc_cluster_kill_daemon_at(c, OWNER, SIGKILL);
  assert_int_equal(mc_cluster_restart_daemon_at(c, OWNER), 0);
  await_reconciliation(c, OWNER, before, 30);
}

typedef struct burst {
  mooncake_store_t store;
  mooncake_replicate_config_t config;
  int acked[BURST]; /* 1: the put answered 0 */
} burst;

/* The writer's puts, one after another, none asserted (the owner dies under some). */
static void *run_burst(void *arg) {
  burst *b = arg;
  char *value = malloc(OBJ);
  char key[SSD_KEY_LEN];
  for (int i = 0; value != NULL && i < BURST; ++i) {
    key_of(key, sizeof(key), "burst", i);
    fill_pattern(value, OBJ, seed_of("burst", i));
    b->acked[i] = mooncake_store_put(b->store, key, value, OBJ, &b->config) == 0;
  }
  free(value);
  return NULL;
}

/* Every acknowledged key through the reader: its bytes (read_checked fails the test on a
 * wrong one) or -704, in which case a re-put (placed by reput) succeeds and reads back.
 * Returns the lost. */
static int check_acked(mooncake_store_t reader, const int *acked, int count,
                       const mooncake_replicate_config_t *reput) {
  int lost = 0;
  char key[SSD_KEY_LEN];
  for (int i = 0; i < count; ++i) {
    if (!acked[i]) continue;
    key_of(key, sizeof(key), "burst", i);
    int64_t got = read_checked(reader, "burst", i, OBJ);
    int exists = mooncake_store_is_exist(reader, key);
    if (got != (int64_t)OBJ && got != MOONCAKE_STORE_OBJECT_NOT_FOUND) {
      fail_msg("%s answers %lld (%s): neither its bytes nor -704", key, (long long)got,
               mooncake_store_strerror((int)got));
    }
    assert_int_equal(exists, got == (int64_t)OBJ);
    if (got == (int64_t)OBJ) continue;
    ++lost;
    put_series(reader, "burst", i, 1, OBJ, reput);
    assert_int_equal(read_checked(reader, "burst", i, OBJ), (int64_t)OBJ);
  }
  return lost;
}

static void test_relaxed_kill_mid_burst(void **state) {
  (void)state;
  mc_cluster *c = start();
  burst *b = calloc(1, sizeof(*b));
  assert_non_null(b);
  b->store = connect_app(c, WRITER, 4 * MiB);
  placement p;
  const int target[] = {OWNER};
  steer(&p, c, target, 1, 1);
  b->config = p.config;
  /* Older than relaxed mode's bound when the owner dies: these must all survive. */
  put_series(b->store, "old", 0, OLD, OBJ, &p.config);
  await_offloads_done(c, OLD, 60);
  usleep((useconds_t)((BOUND_S + 0.5) * 1e6));
  pthread_t writer;
  assert_int_equal(pthread_create(&writer, NULL, run_burst, b), 0);
  await_offloads_done(c, OLD + BURST / 3, 60); /* mid-burst: offloads reported, more coming */
  mc_cluster_kill_daemon_at(c, OWNER, SIGKILL);
  assert_int_equal(pthread_join(writer, NULL), 0);
  restart_owner_reconciled(c);
  mooncake_store_t reader = connect_app(c, READER, 4 * MiB);
  int acked = 0;
  for (int i = 0; i < BURST; ++i) acked += b->acked[i];
  placement here;
  const int reader_only[] = {READER};
  steer(&here, c, reader_only, 1, 1);
  for (int i = 0; i < OLD; ++i) {
    assert_int_equal(read_checked(reader, "old", i, OBJ), (int64_t)OBJ);
  }
  int lost = check_acked(reader, b->acked, BURST, &here.config);
  fprintf(stderr, "kill -9 mid-burst: %d of %d puts acknowledged, %d lost (-704, put again), "
          "%.0f disk replicas dropped at reconciliation\n",
          acked, BURST, lost, dropped_metric(c));
  assert_true(acked >= BURST / 3);
  mooncake_store_destroy(reader);
  mooncake_store_destroy(b->store);
  free(b);
  mc_cluster_stop(c);
}

/* Cuts daemon i's newest .meta file back to its header: the records of its newest bucket
 * are gone, as a relaxed-mode crash loses those of its last second. */
static void lose_newest_records(const mc_cluster *c, int i) {
  const char *dir = mc_cluster_ssd_dir_at(c, i);
  DIR *d = opendir(dir);
  assert_non_null(d);
  long newest = -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end = NULL;
    long id = strtol(e->d_name, &end, 10);
    if (end != e->d_name && strcmp(end, ".meta") == 0 && id > newest) newest = id;
  }
  closedir(d);
  assert_true(newest > 0);
  char path[4096];
  snprintf(path, sizeof(path), "%s/%ld.meta", dir, newest);
  assert_int_equal(truncate(path, 16), 0); /* the header: "MCSSDMT1" and the bucket id */
}

static void test_lost_records_dropped_and_counted(void **state) {
  (void)state;
  mc_cluster *c = start();
  mooncake_store_t writer = connect_app(c, WRITER, 4 * MiB);
  placement p;
  const int target[] = {OWNER};
  steer(&p, c, target, 1, 1);
  put_series(writer, "burst", 0, BURST, OBJ, &p.config);
  await_offloads_done(c, BURST, 60);
  usleep((useconds_t)((BOUND_S + 0.5) * 1e6)); /* every record on disk: only the cut loses */
  int listed = 0;
  for (int i = 0; i < BURST; ++i) {
    int memory = -1, disk = -1;
    assert_int_equal(kinds_of(c, "burst", i, &memory, &disk), 0);
    listed += disk == 1;
  }
  assert_int_equal(listed, BURST);
  double before = dropped_metric(c);
  mc_cluster_kill_daemon_at(c, OWNER, SIGKILL);
  lose_newest_records(c, OWNER);
  restart_owner_reconciled(c);
  mooncake_store_t reader = connect_app(c, READER, 4 * MiB);
  int acked[BURST];
  for (int i = 0; i < BURST; ++i) acked[i] = 1;
  /* The owner's memory went with its process: what reads, reads from its SSD. Keys put
   * again go to the reader's memory, out of the way of the next restart. */
  placement here;
  const int reader_only[] = {READER};
  steer(&here, c, reader_only, 1, 1);
  int lost = check_acked(reader, acked, BURST, &here.config);
  double dropped = dropped_metric(c) - before;
  fprintf(stderr, "newest bucket's records lost: %d of %d keys answered -704; %.0f disk "
          "replicas dropped at reconciliation\n", lost, BURST, dropped);
  assert_true(lost > 0 && lost < BURST);
  assert_true(dropped == (double)lost); /* exactly the replicas the SSD no longer held */
  assert_true(count_log_lines(mc_cluster_master_log(c), "objects dropped (disk_reconcile)",
                              NULL) >= 1);
  /* A second restart reconciles again: nothing more goes, everything reads. */
  restart_owner_reconciled(c);
  for (int i = 0; i < BURST; ++i) {
    assert_int_equal(read_checked(reader, "burst", i, OBJ), (int64_t)OBJ);
  }
  assert_true(dropped_metric(c) - before == dropped);
  mooncake_store_destroy(reader);
  mooncake_store_destroy(writer);
  mc_cluster_stop(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_relaxed_kill_mid_burst),
      cmocka_unit_test(test_lost_records_dropped_and_counted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
