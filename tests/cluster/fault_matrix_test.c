/* The fault matrix (issue 33; docs/durability.md, "The fault matrix"): real master(s) and
 * daemons on 127.0.0.1, a workload of puts, upserts and removes through the C ABI whose
 * every value says which key and version it is (tests/cluster/fault_matrix_util.h), one fault per
 * cell in the middle of it, then every key ever written read back and classed. In every
 * cell no read may answer 0 with bytes that are not the key's (`wrong`), no key the store
 * lists may be unreadable for good (`stuck`), and a key that cannot be read must take a
 * new put; what may be lost, old or resurrected is the cell's mode's bound:
 *  - master kill -9 in strict mode: nothing; relaxed: only what was acknowledged in the
 *    last second before the kill (a flush interval and an fdatasync on a busy machine);
 *    disabled: only what was acknowledged after the snapshot began;
 *  - strict with the newest log file torn in its last record, cut 200 records before its
 *    end, or one byte flipped 200 records before its end: at most the keys of the records
 *    cut off;
 *  - the newest snapshot corrupted: nothing (the older one and the log); all of them
 *    corrupted, no log: anything, but never wrong bytes;
 *  - a daemon with an SSD tier in relaxed persist mode killed -9 and restarted on the same
 *    --ssd_path: its memory is gone, so anything only it held, but no phantom replica;
 *  - a daemon stopped (SIGSTOP) past --daemon_grace_period_sec, then continued: nothing (it
 *    re-offers what its memory still holds);
 *  - HA: the leader writing alone (its standbys stopped), then killed, a standby taking
 *    over: only what the leader acknowledged alone.
 * One summary line per cell and run ("cell=... acked=... lost=... wrong=..."). Knobs:
 * FAULT_MATRIX_RUNS (1), FAULT_MATRIX_KEYS (1500), FAULT_MATRIX_CSV (a file to append a
 * row per run to), FAULT_MATRIX_DAEMON_FLAG (one more flag for every daemon);
 * MC_TEST_FILTER=ha_* runs only the matching cells. `make fault-matrix` runs the long
 * version and prints the table in markdown. */
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
#include "tests/cluster/fault_matrix_util.h"
#include "tests/harness/restore_test_util.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define MAX_RUNS 16
#define FOREVER 1e18
#define RELAXED_LAG_S 1.0 /* as tests/cluster/cluster_ha_test.c: a flush interval + fdatasync, loaded */
#define RETRY_S 3.0       /* how long a failing read is retried before it counts */

static int runs(void) {
  int n = fm_env_int("FAULT_MATRIX_RUNS", 1);
  return n < 1 ? 1 : n > MAX_RUNS ? MAX_RUNS : n;
}
static int keys(void) { return fm_env_int("FAULT_MATRIX_KEYS", 1500); }

/* Each daemon's segment, so that the live values fill about half of the pool: freed
 * ranges are handed out again soon, and nothing is evicted (an eviction would count as a
 * loss). Values average 8.5 KiB; a tenth of the keys are removed at any time. */
static uint64_t segment_for(int daemons) {
  uint64_t bytes = (uint64_t)keys() * 16 * KiB / (uint64_t)daemons;
  return bytes < 4 * MiB ? 4 * MiB : (bytes + MiB - 1) / MiB * MiB;
}

static fm_options load_options(int first_daemon, int ndaemons, int target) {
  fm_options o;
  memset(&o, 0, sizeof(o));
  o.keys = keys();
  o.writers = 4;
  for (int i = 0; i < ndaemons; ++i) o.daemons[i] = first_daemon + i;
  o.ndaemons = ndaemons;
  o.target = target;
  o.remove_percent = 10;
  return o;
}

/* The bound's assertions, after every run has been reported (so that the table is whole
 * even when a cell fails). */
typedef struct judged {
  fm_verdict v;
  int max_undone; /* -1: no cap */
} judged;

static void judge(const char *cell, const judged *j, int n) {
  int failures = 0;
  for (int r = 0; r < n; ++r) {
    const fm_verdict *v = &j[r].v;
    int undone = v->lost + v->old + v->resurrected + v->unreadable;
    if (v->wrong != 0) print_message("%s run %d: %d WRONG reads\n", cell, r, v->wrong), ++failures;
    if (v->stuck != 0) print_message("%s run %d: %d stuck keys\n", cell, r, v->stuck), ++failures;
    if (v->reput_bad != 0 || v->reput_failed != 0) {
      print_message("%s run %d: re-put of an unreadable key: %d not readable, %d refused\n",
                    cell, r, v->reput_bad, v->reput_failed);
      ++failures;
    }
    if (v->undone_outside != 0) {
      print_message("%s run %d: %d acknowledged operations undone outside the mode's bound\n",
                    cell, r, v->undone_outside);
      ++failures;
    }
    if (j[r].max_undone >= 0 && undone > j[r].max_undone) {
      print_message("%s run %d: %d acknowledged operations undone, at most %d allowed\n", cell, r,
                    undone, j[r].max_undone);
      ++failures;
    }
    if (v->acked_ops == 0) print_message("%s run %d: nothing acknowledged\n", cell, r), ++failures;
  }
  if (failures != 0) fail_msg("%s: %d violations of its bound (see above)", cell, failures);
}

/* A cell's daemon flags (NULL-terminated, may be NULL) with $FAULT_MATRIX_DAEMON_FLAG
 * appended when it is set (e.g. "--checksum" or "--nochecksum", to see a cell with and
 * without checksums). The array is static: one cell at a time. */
static const char *const *daemon_flags(const char *const *base) {
  static const char *flags[16];
  int n = 0;
  for (; base != NULL && base[n] != NULL && n < 14; ++n) flags[n] = base[n];
  const char *extra = getenv("FAULT_MATRIX_DAEMON_FLAG");
  if (extra != NULL && extra[0] != '\0') flags[n++] = extra;
  flags[n] = NULL;
  return flags;
}

/* Checks every key through daemon `daemon`, reports the run and ends the cluster. */
static judged finish(mc_cluster *c, fm_workload *w, const char *name, int run, double started,
                     int daemon, fm_window window, int max_undone, const char *bound) {
  judged j = {.max_undone = max_undone};
  j.v = fm_check(c, daemon, w, window, RETRY_S);
  j.v.seconds = now_seconds() - started;
  fm_report(name, run, &j.v, bound);
  fm_workload_free(w);
  mc_cluster_stop(c);
  return j;
}

/* Waits until the master lists daemon i's segment (it has registered and mounted again). */
static void await_segment(mc_cluster *c, int i, double timeout_s) {
  mc_cluster_segment seg;
  for (double until = now_seconds() + timeout_s; mc_cluster_segment_at(c, i, &seg) != 0;) {
    if (now_seconds() > until) fail_msg("daemon %d has no segment after %.0f s", i, timeout_s);
    usleep(50 * 1000);
  }
}

/* Until the master holds no parked object: the returned daemon has checked what it
 * re-offered, and each is adopted back or dropped. Reading before that
 * would find a parked key absent (-704), and a re-put of it race its adoption. */
static void await_settled(mc_cluster *c, double timeout_s) {
  mc_cluster_verify_stats v;
  for (double until = now_seconds() + timeout_s;;) {
    if (mc_cluster_verify_stats_get(c, &v) == 0 && v.parked_objects == 0) return;
    if (now_seconds() > until) fail_msg("parked objects not settled after %.0f s", timeout_s);
    usleep(50 * 1000);
  }
}

/* ---- the master killed ------------------------------------------------------------------ */

#define MASTER_FLAGS(mode)                                                          \
  "--enable_snapshot", "--snapshot_dir", "{dir}/snap", "--enable_snapshot_restore", \
      "--snapshot_interval_seconds", "3600", "--oplog_mode", mode,                  \
      "--reattach_grace_period_sec", "20"

enum damage { NO_DAMAGE, TORN_LAST, CUT_200, FLIP_200 };
enum snapshots { NO_SNAPSHOT, ONE_SNAPSHOT, NEWEST_CORRUPTED, ALL_CORRUPTED };

typedef struct kill_cell {
  const char *name;
  const char *mode;
  enum damage damage;
  enum snapshots snapshots;
} kill_cell;

/* Damages the newest log file as the cell says; how many records it cut off. */
static int damage_log(mc_cluster *c, enum damage how) {
  if (how == NO_DAMAGE) return 0;
  oplog_frames f = oplog_frames_read(c);
  int at = how == TORN_LAST ? f.count - 1 : f.count - 200;
  if (at < 0) fail_msg("%s holds %d records: too few to damage", f.path, f.count);
  off_t offset = f.offset[at];
  uint32_t length = f.length[at];
  if (how == FLIP_200) {
    FILE *file = fopen(f.path, "r+b");
    assert_non_null(file);
    off_t byte = offset + 12 + (length - 16) / 2; /* in the payload (or the CRC) */
    assert_int_equal(fseeko(file, byte, SEEK_SET), 0);
    int ch = fgetc(file);
    assert_true(ch != EOF);
    assert_int_equal(fseeko(file, byte, SEEK_SET), 0);
    assert_true(fputc(ch ^ 0x01, file) != EOF);
    assert_int_equal(fclose(file), 0);
  } else {
    assert_int_equal(truncate(f.path, how == TORN_LAST ? offset + length / 2 : offset), 0);
  }
  int cut = f.count - at;
  oplog_frames_free(&f);
  return cut;
}

static judged run_kill_cell(const void *arg, int run) {
  const kill_cell *cell = arg;
  double started = now_seconds();
  const char *const master[] = {MASTER_FLAGS(cell->mode), NULL};
  mc_cluster_options opts = {3, segment_for(3), 1000, master, daemon_flags(NULL)};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  fm_options o = load_options(0, 3, -1);
  fm_workload *w = fm_workload_start(c, &o);
  int64_t phase = o.keys;
  double snapshot_at = 0;
  char s1[128] = "", s2[128] = "";
  fm_await_ops(w, phase, 120);
  if (cell->snapshots != NO_SNAPSHOT) {
    snapshot_at = now_seconds();
    take_snapshot(c, s1, sizeof(s1), NULL);
    fm_await_ops(w, phase, 120);
  }
  if (cell->snapshots == NEWEST_CORRUPTED || cell->snapshots == ALL_CORRUPTED) {
    take_snapshot(c, s2, sizeof(s2), NULL);
    fm_await_ops(w, phase, 120);
  }
  fm_await_ops(w, phase, 120);
  double killed = now_seconds();
  mc_cluster_kill_master(c, SIGKILL);
  double dead = now_seconds(); /* an acknowledgement may land until the kill has */
  fm_workload_signal_stop(w);
  int cut = damage_log(c, cell->damage);
  if (cell->snapshots == NEWEST_CORRUPTED) corrupt(c, s2, FLIP_BYTE);
  if (cell->snapshots == ALL_CORRUPTED) {
    corrupt(c, s1, FLIP_BYTE);
    corrupt(c, s2, FLIP_BYTE);
  }
  assert_int_equal(mc_cluster_restart_master(c), 0);
  await_pending(c, 0, 60);
  fm_workload_stop(w, 60);

  /* What the fault may undo. */
  int max_undone = -1;
  fm_window window = {killed, killed, killed};
  char bound[96];
  if (cell->snapshots == ALL_CORRUPTED) {
    window = (fm_window){0, FOREVER, killed};
    snprintf(bound, sizeof(bound), "any loss (no valid snapshot%s)",
             strcmp(cell->mode, "disabled") == 0 ? ", no log" : "");
  } else if (cell->damage != NO_DAMAGE) {
    window = (fm_window){0, FOREVER, killed};
    max_undone = cut;
    snprintf(bound, sizeof(bound), "at most %d undone (records cut)", cut);
  } else if (strcmp(cell->mode, "relaxed") == 0) {
    window = (fm_window){killed - RELAXED_LAG_S, dead, killed};
    snprintf(bound, sizeof(bound), "undone only within %.0f ms of the kill",
             RELAXED_LAG_S * 1000);
  } else if (strcmp(cell->mode, "disabled") == 0) {
    window = (fm_window){snapshot_at, dead, killed};
    snprintf(bound, sizeof(bound), "undone only after the snapshot (%.0f ms before the kill)",
             (killed - snapshot_at) * 1000);
  } else {
    max_undone = 0;
    snprintf(bound, sizeof(bound), "nothing undone");
  }
  return finish(c, w, cell->name, run, started, 0, window, max_undone, bound);
}

/* ---- a daemon with an SSD tier killed --------------------------------------------------- */

/* Two daemons with SSD tiers in relaxed persist mode, every value offloaded at put; the
 * writers on daemon 1 steer every value to daemon 0, which is killed -9 mid-workload and
 * started again on the same --ssd_path. */
static judged run_ssd_cell(const void *arg, int run) {
  (void)arg;
  static const char *const master[] = {"--enable_offload", NULL};
  static const char *const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "256m",
                                       "--ssd_bucket_size", "4m", "--ssd_persist_mode",
                                       "relaxed", NULL};
  double started = now_seconds();
  mc_cluster_options opts = {2, segment_for(1), 1000, master, daemon_flags(daemon)};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  fm_options o = load_options(1, 1, 0);
  fm_workload *w = fm_workload_start(c, &o);
  fm_await_ops(w, 2 * (int64_t)o.keys, 120);
  double killed = now_seconds();
  mc_cluster_kill_daemon_at(c, 0, SIGKILL);
  fm_workload_stop(w, 60);
  assert_int_equal(mc_cluster_restart_daemon_at(c, 0), 0);
  await_segment(c, 0, 60);
  fm_window window = {0, FOREVER, killed};
  return finish(c, w, "ssd_relaxed_daemon_kill", run, started, 1, window, -1,
                "any loss (its memory died), no phantom");
}

/* ---- a daemon stopped past its grace period --------------------------------------------- */

/* Three daemons, the writers on 0 and 1, the master placing replicas on all three; daemon
 * 2 is stopped until the master has declared it dead, then continued. */
static judged run_sigstop_cell(const void *arg, int run) {
  (void)arg;
  /* Heartbeats five times a TTL: a daemon that runs is never found silent on a busy
   * machine, the stopped one is within seconds. */
  static const char *const master[] = {"--client_live_ttl_sec", "2", "--daemon_grace_period_sec",
                                       "2", NULL};
  static const char *const daemon[] = {"--heartbeat_interval", "400", NULL};
  double started = now_seconds();
  mc_cluster_options opts = {3, segment_for(3), 1000, master, daemon_flags(daemon)};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  fm_options o = load_options(0, 2, -1);
  fm_workload *w = fm_workload_start(c, &o);
  fm_await_ops(w, 2 * (int64_t)o.keys, 120);
  const char *log = mc_cluster_master_log(c);
  int dead = count_log_lines(log, "is dead: dropping", NULL);
  double stopped = now_seconds();
  assert_int_equal(mc_cluster_pause_daemon_at(c, 2), 0);
  for (double until = now_seconds() + 60;
       count_log_lines(log, "is dead: dropping", NULL) == dead;) {
    if (now_seconds() > until) fail_msg("daemon 2 was not declared dead within 60 s");
    usleep(100 * 1000);
  }
  assert_int_equal(mc_cluster_resume_daemon_at(c, 2), 0);
  fm_workload_stop(w, 60);
  await_segment(c, 2, 60);
  await_settled(c, 60);
  fm_window window = {stopped, stopped, stopped};
  return finish(c, w, "daemon_sigstop_past_grace", run, started, 0, window, 0,
                "nothing undone (its memory kept them)");
}

/* ---- HA: the leader alone ----------------------------------------------------------------- */

/* Three HA masters (strict), three daemons, the writers on 0 and 1. Both standbys are
 * stopped; the leader goes on alone (its sync set empties after --ha_sync_timeout), is
 * killed, the standbys continued; one of them takes over without the leader's last
 * records. */
static judged run_ha_cell(const void *arg, int run) {
  (void)arg;
  double started = now_seconds();
  mc_cluster_options opts = {3, segment_for(3), 1000, NULL, daemon_flags(NULL)};
  mc_cluster_ha_options ha = {3, 2000, "strict"};
  mc_cluster *c = mc_cluster_start_ha(&opts, &ha);
  assert_non_null(c);
  int leader = mc_cluster_ha_leader(c);
  assert_true(leader >= 0);
  fm_options o = load_options(0, 2, -1);
  fm_workload *w = fm_workload_start(c, &o);
  fm_await_ops(w, o.keys, 120);
  for (int i = 0; i < 3; ++i) {
    if (i != leader) assert_int_equal(mc_cluster_ha_pause_master_at(c, i), 0);
  }
  double alone = now_seconds();
  fm_await_ops(w, o.keys, 120);
  double killed = now_seconds();
  mc_cluster_ha_kill_master_at(c, leader, SIGKILL);
  double dead = now_seconds();
  fm_workload_signal_stop(w);
  for (int i = 0; i < 3; ++i) {
    if (i != leader) assert_int_equal(mc_cluster_ha_resume_master_at(c, i), 0);
  }
  int next = mc_cluster_ha_await_leader(c, leader, 60000);
  if (next < 0) fail_msg("no standby took over within 60 s of the leader's kill");
  fm_workload_stop(w, 60);
  await_pending(c, 0, 60);
  fm_window window = {alone, dead, killed};
  char bound[96];
  snprintf(bound, sizeof(bound), "undone only what the leader acknowledged alone (%.0f ms)",
           (killed - alone) * 1000);
  return finish(c, w, "ha_leader_alone_killed", run, started, 0, window, -1, bound);
}


/* ---- the cells --------------------------------------------------------------------------- */

typedef struct cell {
  const char *name;
  judged (*run)(const void *arg, int run);
  const void *arg;
} cell;

static const kill_cell k_strict_kill = {"strict_kill", "strict", NO_DAMAGE, NO_SNAPSHOT};
static const kill_cell k_relaxed_kill = {"relaxed_kill", "relaxed", NO_DAMAGE, NO_SNAPSHOT};
static const kill_cell k_disabled_kill = {"disabled_kill", "disabled", NO_DAMAGE, ONE_SNAPSHOT};
static const kill_cell k_torn = {"strict_log_torn", "strict", TORN_LAST, NO_SNAPSHOT};
static const kill_cell k_cut = {"strict_log_cut_200", "strict", CUT_200, NO_SNAPSHOT};
static const kill_cell k_flip = {"strict_log_flip_200", "strict", FLIP_200, NO_SNAPSHOT};
static const kill_cell k_newest = {"newest_snapshot_corrupted", "strict", NO_DAMAGE,
                                   NEWEST_CORRUPTED};
static const kill_cell k_all = {"all_snapshots_corrupted", "disabled", NO_DAMAGE, ALL_CORRUPTED};

static const cell k_cells[] = {
    {"strict_kill", run_kill_cell, &k_strict_kill},
    {"relaxed_kill", run_kill_cell, &k_relaxed_kill},
    {"disabled_kill", run_kill_cell, &k_disabled_kill},
    {"strict_log_torn", run_kill_cell, &k_torn},
    {"strict_log_cut_200", run_kill_cell, &k_cut},
    {"strict_log_flip_200", run_kill_cell, &k_flip},
    {"newest_snapshot_corrupted", run_kill_cell, &k_newest},
    {"all_snapshots_corrupted", run_kill_cell, &k_all},
    {"ssd_relaxed_daemon_kill", run_ssd_cell, NULL},
    {"daemon_sigstop_past_grace", run_sigstop_cell, NULL},
    {"ha_leader_alone_killed", run_ha_cell, NULL},
};
#define CELLS ((int)(sizeof(k_cells) / sizeof(k_cells[0])))

/* FAULT_MATRIX_RUNS runs of the cell, every one reported, then judged. */
static void test_cell(void **state) {
  const cell *c = *state;
  judged j[MAX_RUNS];
  int n = runs();
  for (int r = 0; r < n; ++r) j[r] = c->run(c->arg, r);
  judge(c->name, j, n);
}

int main(void) {
  struct CMUnitTest tests[CELLS];
  for (int i = 0; i < CELLS; ++i) {
    tests[i] = (struct CMUnitTest){k_cells[i].name, test_cell, NULL, NULL, (void *)&k_cells[i]};
  }
  /* MC_TEST_FILTER=strict_* runs only the cells whose names match. */
  if (getenv("MC_TEST_FILTER") != NULL) cmocka_set_test_filter(getenv("MC_TEST_FILTER"));
  int failed = _cmocka_run_group_tests("fault_matrix", tests, CELLS, NULL, NULL);
  fm_print_table();
  return failed;
}
