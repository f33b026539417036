/* Issue 11, finding 4: an application that lent memory (setup with a global_segment_size)
 * and leaves must not take other applications' acknowledged objects with it. A real master
 * and daemons A and B (16 MiB each of their own) on 127.0.0.1, then C, which has none.
 *
 *  - placement: puts that name no daemon stay off the lent memory while the daemons' own
 *    segments have room, and use it only once they are full;
 *  - a graceful close drains the lent segment (its objects moved to A's and B's memory, by
 *    memcpy or transfer) before it is unmounted: 0 acknowledged objects lost, every byte
 *    checked, and the segment gone from the master when close returns;
 *  - a client killed with SIGKILL: the daemon still maps the memory, drains it the same
 *    way, and nothing is lost either (docs/daemon.md, "Memory lent by applications");
 *  - upserts and removes of the objects being moved, while the drain runs: each key ends
 *    with its last acknowledged value, or stays removed;
 *  - no room anywhere: the objects go with the segment, as before, and the daemon's log
 *    says how many.
 *
 * Where a replica lies is asked of the master (tests/harness/cluster.h). */
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
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define OWN_SEGMENT (16 * MiB)
#define LENT_SEGMENT (8 * MiB)
#define VALUE (128 * KiB)

enum { A = 0, B = 1 };

static mc_cluster *g_c;
static int g_c_index = -1; /* daemon C: no memory of its own, added by the first test that needs it */

static int start_cluster(void **state) {
  (void)state;
  /* No eviction at a watermark: every object put stays unless the test removes it, so
   * one missing is one lost. */
  static const char *const master_flags[] = {"--eviction_high_watermark_ratio", "1.0", NULL};
  mc_cluster_options o = {2, OWN_SEGMENT, 0, master_flags, NULL};
  g_c = mc_cluster_start_with(&o);
  return g_c == NULL ? -1 : 0;
}

static int stop_cluster(void **state) {
  (void)state;
  mc_cluster_stop(g_c);
  g_c = NULL;
  return 0;
}

/* Daemon C, with no segment of its own: a put that names it lands in memory lent at it. */
static int daemon_c(void) {
  if (g_c_index < 0) {
    const char *const flags[] = {"--global_segment_size", "0", NULL};
    g_c_index = mc_cluster_add_daemon(g_c, flags);
    assert_true(g_c_index >= 0);
    assert_int_equal(mc_cluster_await_daemon_at(g_c, g_c_index, 20000), 0);
  }
  return g_c_index;
}

/* A handle on daemon i that lends size bytes (Mooncake's setup), and the id of the segment
 * the master lists for it. It names no client (local_hostname ""), so its memory carries
 * the daemon's name, by which mc_cluster_lent_segments_at finds it on a daemon that has no
 * memory of its own. */
static mooncake_store_t lend(int i, uint64_t size, int64_t *segment_id) {
  mc_cluster_segment before[4];
  int had = mc_cluster_lent_segments_at(g_c, i, before, 4);
  assert_true(had >= 0);
  setenv("MOONCAKE_SOCKET", mc_cluster_socket_at(g_c, i), 1);
  mooncake_store_t s = mooncake_store_create();
  assert_non_null(s);
  assert_int_equal(mooncake_store_setup(s, "", "P2PHANDSHAKE", size, 4 * MiB, "tcp", "", NULL),
                   0);
  mc_cluster_segment lent[4];
  assert_int_equal(mc_cluster_lent_segments_at(g_c, i, lent, 4), had + 1);
  assert_int_equal(lent[had].size, size);
  *segment_id = lent[had].id;
  return s;
}

static int64_t segment_of(const char *key) {
  int64_t segment = -1;
  uint64_t offset = 0;
  if (mc_cluster_replica_at(g_c, key, 0, &segment, &offset) != 0) return -1;
  return segment;
}

static int64_t own_segment(int i) {
  mc_cluster_segment s;
  assert_int_equal(mc_cluster_segment_at(g_c, i, &s), 0);
  return s.id;
}

static uint64_t own_used(void) {
  mc_cluster_segment a, b;
  assert_int_equal(mc_cluster_segment_at(g_c, A, &a), 0);
  assert_int_equal(mc_cluster_segment_at(g_c, B, &b), 0);
  return a.used + b.used;
}

/* Waits for the space the previous test removed (held for its read leases) to be free. */
static void await_empty_daemons(void) {
  double deadline = now_seconds() + 10;
  while (own_used() > 0 && now_seconds() < deadline) usleep(50 * 1000);
  assert_int_equal(own_used(), 0);
}

/* The acknowledged objects of a test: key i holds VALUE bytes of fill_pattern(seed + i). */
typedef struct objects {
  char keys[512][32];
  int removed[512];
  int count;
  uint64_t seed;
} objects;

static const char *put_one(mooncake_store_t s, objects *o, const char *prefix,
                           const mooncake_replicate_config_t *config, char *value) {
  int i = o->count;
  assert_true(i < 512);
  snprintf(o->keys[i], sizeof(o->keys[i]), "%s-%d", prefix, i);
  fill_pattern(value, VALUE, o->seed + (uint64_t)i);
  assert_int_equal(mooncake_store_put(s, o->keys[i], value, VALUE, config), 0);
  o->removed[i] = 0;
  o->count++;
  return o->keys[i];
}

/* Every acknowledged object not removed is readable through s, byte for byte. */
static void assert_all_readable(mooncake_store_t s, const objects *o, char *buf) {
  int lost = 0;
  for (int i = 0; i < o->count; ++i) {
    if (o->removed[i]) continue;
    int64_t n = mooncake_store_get_into(s, o->keys[i], buf, VALUE);
    if (n != (int64_t)VALUE || check_pattern(buf, VALUE, o->seed + (uint64_t)i) != -1) {
      print_message("lost: %s (%lld)\n", o->keys[i], (long long)n);
      ++lost;
    }
  }
  assert_int_equal(lost, 0);
}

/* The daemon's log line about the drain of segment, with " <dropped> dropped with it" in
 * it: how many such lines there are. */
static int drain_lines(int i, int64_t segment, unsigned dropped) {
  char needle[64], also[64];
  snprintf(needle, sizeof(needle), "segment %lld drained", (long long)segment);
  snprintf(also, sizeof(also), " %u dropped with it", dropped);
  return count_log_lines(mc_cluster_log_at(g_c, i), needle, also);
}

static void test_graceful_close_keeps_every_object(void **state) {
  (void)state;
  char *value = malloc(VALUE), *buf = malloc(VALUE);
  objects *o = calloc(1, sizeof(*o));
  o->seed = 1000;
  await_empty_daemons();
  int64_t lent = 0;
  mooncake_store_t x = lend(A, LENT_SEGMENT, &lent);
  mooncake_store_t y = connect_app(g_c, B, 8 * MiB);

  /* 64 puts, 8 of the daemons' 32 MiB: none in the lent memory. */
  for (int i = 0; i < 64; ++i) {
    const char *key = put_one(y, o, "early", NULL, value);
    int64_t at = segment_of(key);
    assert_true(at == own_segment(A) || at == own_segment(B));
  }
  /* Filled up: the puts that no longer fit the daemons' memory go to the lent memory. */
  int in_lent = 0;
  while (in_lent < 24) {
    const char *key = put_one(y, o, "fill", NULL, value);
    in_lent += segment_of(key) == lent;
    assert_true(o->count < 400);
  }
  print_message("%d puts until 24 landed in the lent segment\n", o->count - 64);
  /* And asked for explicitly: A's name, whose own memory is full, is the lent memory. */
  placement on_a;
  int target = A;
  steer(&on_a, g_c, &target, 1, 1);
  for (int i = 0; i < 8; ++i) {
    const char *key = put_one(y, o, "on-a", &on_a.config, value);
    assert_int_equal(segment_of(key), lent);
  }
  /* Room for the drain: half the fillers go (forced: the placement checks leased them). */
  int moving = 0;
  for (int i = 64; i < o->count; ++i) {
    if (segment_of(o->keys[i]) == lent) {
      ++moving;
    } else if (i % 2 == 0) {
      assert_int_equal(mooncake_store_remove(y, o->keys[i], 1), 0);
      o->removed[i] = 1;
    }
  }
  assert_int_equal(moving, 32);
  uint64_t room_needed = 2 * OWN_SEGMENT - (uint64_t)moving * VALUE - 2 * MiB;
  double deadline = now_seconds() + 10;
  while (own_used() > room_needed && now_seconds() < deadline) usleep(50 * 1000);
  assert_true(own_used() <= room_needed);

  /* X leaves: close returns once its segment is drained and unmounted. */
  double t0 = now_seconds();
  assert_int_equal(mooncake_store_close(x), 0);
  print_message("close with %d objects to move: %.0f ms\n", moving, (now_seconds() - t0) * 1e3);
  mc_cluster_segment left[4];
  assert_int_equal(mc_cluster_lent_segments_at(g_c, A, left, 4), 0);
  for (int i = 0; i < o->count; ++i) {
    if (o->removed[i]) continue;
    int64_t at = segment_of(o->keys[i]);
    assert_true(at == own_segment(A) || at == own_segment(B));
  }
  assert_all_readable(y, o, buf);
  mooncake_store_t other = connect_app(g_c, A, 8 * MiB);
  assert_all_readable(other, o, buf);
  assert_int_equal(drain_lines(A, lent, 0), 1);

  for (int i = 0; i < o->count; ++i) {
    if (!o->removed[i]) assert_int_equal(mooncake_store_remove(y, o->keys[i], 1), 0);
  }
  mooncake_store_destroy(other);
  mooncake_store_destroy(x);
  mooncake_store_destroy(y);
  free(o);
  free(value);
  free(buf);
}

/* In the child: lend memory at daemon c, say so on fd, and wait to be killed. */
static void child_lend_and_wait(int c, int fd) {
  int64_t segment = 0;
  mooncake_store_t s = lend(c, LENT_SEGMENT, &segment);
  (void)s;
  ssize_t ignored = write(fd, &segment, sizeof(segment));
  (void)ignored;
  for (;;) pause();
}

static void test_crashed_client_is_drained_too(void **state) {
  (void)state;
  int c = daemon_c();
  await_empty_daemons();
  int fds[2];
  pid_t child = fork_with_pipe(fds);
  if (child == 0) child_lend_and_wait(c, fds[1]);
  int64_t lent = 0;
  assert_int_equal(read(fds[0], &lent, sizeof(lent)), (ssize_t)sizeof(lent));
  close(fds[0]);

  char *value = malloc(VALUE), *buf = malloc(VALUE);
  objects *o = calloc(1, sizeof(*o));
  o->seed = 5000;
  mooncake_store_t y = connect_app(g_c, B, 8 * MiB);
  placement on_c;
  steer(&on_c, g_c, &c, 1, 1);
  for (int i = 0; i < 24; ++i) {
    const char *key = put_one(y, o, "crash", &on_c.config, value);
    assert_int_equal(segment_of(key), lent);
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  assert_true(WIFSIGNALED(status));
  /* The daemon notices the connection gone and drains what it still maps. */
  mc_cluster_segment left[4];
  double deadline = now_seconds() + 30;
  while (mc_cluster_lent_segments_at(g_c, c, left, 4) != 0 && now_seconds() < deadline) {
    usleep(50 * 1000);
  }
  assert_int_equal(mc_cluster_lent_segments_at(g_c, c, left, 4), 0);
  for (int i = 0; i < o->count; ++i) {
    int64_t at = segment_of(o->keys[i]);
    assert_true(at == own_segment(A) || at == own_segment(B));
  }
  assert_all_readable(y, o, buf);
  assert_int_equal(drain_lines(c, lent, 0), 1);
  for (int i = 0; i < o->count; ++i) assert_int_equal(mooncake_store_remove(y, o->keys[i], 1), 0);
  mooncake_store_destroy(y);
  free(o);
  free(value);
  free(buf);
}

/* The writer racing a drain: upserts (new versions) and removes of the keys in the lent
 * memory, from its own handle, until told to stop; remembers what was acknowledged. */
#define RACED 96
typedef struct racer {
  mooncake_store_t s;
  char keys[RACED][32];
  int version[RACED]; /* last acknowledged (0: the first put); -1 removed */
  volatile int stop;
  volatile int ops;  /* upserts and removes done */
  int rounds;
} racer;

static uint64_t raced_seed(int key, int version) { return 20000 + (uint64_t)key * 1000 + (uint64_t)version; }

static void *race(void *arg) {
  racer *r = arg;
  char *value = malloc(VALUE);
  for (int round = 1; !r->stop && round < 1000; ++round) {
    for (int i = 0; i < RACED; ++i) {
      if (r->version[i] < 0) continue;
      if (i % 4 == 0) {
        if (mooncake_store_remove(r->s, r->keys[i], 1) == 0) r->version[i] = -1;
      } else {
        fill_pattern(value, VALUE, raced_seed(i, round));
        if (mooncake_store_upsert_from(r->s, r->keys[i], value, VALUE, NULL) == 0) {
          r->version[i] = round;
        }
      }
      r->ops++;
    }
    r->rounds = round;
  }
  free(value);
  return NULL;
}

static void test_upserts_and_removes_during_the_drain(void **state) {
  (void)state;
  int c = daemon_c();
  await_empty_daemons();
  char *value = malloc(VALUE), *buf = malloc(VALUE);
  int64_t lent = 0;
  mooncake_store_t x = lend(c, 16 * MiB, &lent);
  racer *r = calloc(1, sizeof(*r));
  r->s = connect_app(g_c, B, 8 * MiB);
  placement on_c;
  steer(&on_c, g_c, &c, 1, 1);
  for (int i = 0; i < RACED; ++i) {
    snprintf(r->keys[i], sizeof(r->keys[i]), "raced-%d", i);
    fill_pattern(value, VALUE, raced_seed(i, 0));
    assert_int_equal(mooncake_store_put(r->s, r->keys[i], value, VALUE, &on_c.config), 0);
    assert_int_equal(segment_of(r->keys[i]), lent);
  }
  pthread_t writer;
  assert_int_equal(pthread_create(&writer, NULL, race, r), 0);
  /* Closed while the writer is in the middle of its first round: the drain moves the
   * keys it has not reached yet, and it reaches some of them meanwhile. */
  while (r->ops < 8) usleep(200);
  assert_int_equal(mooncake_store_close(x), 0);
  int rounds_at_close = r->rounds;
  r->stop = 1;
  pthread_join(writer, NULL);
  print_message("writer rounds: %d by the end of close, %d in all\n", rounds_at_close, r->rounds);
  mc_cluster_segment left[4];
  assert_int_equal(mc_cluster_lent_segments_at(g_c, c, left, 4), 0);
  int wrong = 0, removed = 0;
  for (int i = 0; i < RACED; ++i) {
    int64_t n = mooncake_store_get_into(r->s, r->keys[i], buf, VALUE);
    if (r->version[i] < 0) {
      ++removed;
      wrong += n != -704;
    } else if (n != (int64_t)VALUE || check_pattern(buf, VALUE, raced_seed(i, r->version[i])) != -1) {
      print_message("%s: %lld, not version %d\n", r->keys[i], (long long)n, r->version[i]);
      ++wrong;
    }
  }
  assert_int_equal(wrong, 0);
  assert_true(removed > 0);
  for (int i = 0; i < RACED; ++i) mooncake_store_remove(r->s, r->keys[i], 1);
  mooncake_store_destroy(r->s);
  mooncake_store_destroy(x);
  free(r);
  free(value);
  free(buf);
}

static void test_no_room_drops_and_says_how_many(void **state) {
  (void)state;
  int c = daemon_c();
  char *value = malloc(VALUE);
  objects *o = calloc(1, sizeof(*o));
  o->seed = 9000;
  await_empty_daemons();
  int64_t lent = 0;
  mooncake_store_t x = lend(c, 2 * MiB, &lent);
  mooncake_store_t y = connect_app(g_c, B, 8 * MiB);
  /* The daemons' memory full, then 8 objects in the lent memory: nowhere to go. */
  int in_lent = 0;
  while (in_lent < 8) {
    const char *key = put_one(y, o, "full", NULL, value);
    in_lent += segment_of(key) == lent;
    assert_true(o->count < 400);
  }
  assert_int_equal(mooncake_store_close(x), 0);
  mc_cluster_segment left[4];
  assert_int_equal(mc_cluster_lent_segments_at(g_c, c, left, 4), 0);
  assert_int_equal(drain_lines(c, lent, 8), 1);
  int gone = 0;
  for (int i = 0; i < o->count; ++i) gone += mooncake_store_is_exist(y, o->keys[i]) == 0;
  assert_int_equal(gone, 8);
  mooncake_store_destroy(x);
  mooncake_store_destroy(y);
  free(o);
  free(value);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graceful_close_keeps_every_object),
      cmocka_unit_test(test_crashed_client_is_drained_too),
      cmocka_unit_test(test_upserts_and_removes_during_the_drain),
      cmocka_unit_test(test_no_room_drops_and_says_how_many),
  };
  return cmocka_run_group_tests(tests, start_cluster, stop_cluster);
}
