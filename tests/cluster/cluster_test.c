/* The cluster through the C ABI: a real master and three real daemons A, B, C (indices 0,
 * 1, 2) on 127.0.0.1. Puts from an application on one daemon are steered onto another
 * with preferred_segments ("127.0.0.1:<port>") and read from applications on every
 * daemon; daemons are killed, stopped and fed hostile frames on their transfer port.
 * Groups with different flags start clusters of their own, one at a time.
 *
 * Where a replica lies is asked of the master over Thrift (tests/harness/cluster.h) — the C ABI
 * does not show it, and without it a test could pass without crossing daemons at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define MiB ((size_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
/* A small pool, so that the biggest test value (3 pools) goes through the chunked path
 * (PUT_BEGIN / PUT_CHUNK / PUT_COMMIT and GET_BEGIN / GET_CHUNK) and the others are
 * staged whole. */
#define POOL (4 * MiB)

enum { A = 0, B = 1, C = 2 };

static mc_cluster *g_c;

static const size_t k_sizes[] = {1, 4096, MiB + 7, 3 * POOL + 5};
#define NSIZES (sizeof(k_sizes) / sizeof(k_sizes[0]))

static int start_cluster(uint64_t segment_size, const char *const *master_flags,
                         const char *const *daemon_flags) {
  mc_cluster_options o = {3, segment_size, 0, master_flags, daemon_flags};
  g_c = mc_cluster_start_with(&o);
  return g_c == NULL ? -1 : 0;
}

/* A waitpid status (or -1: none) of a process ended by sig. */
static int ended_by(int status, int sig) {
  return status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == sig;
}

static int stop_cluster(void **state) {
  (void)state;
  mc_cluster_stop(g_c);
  g_c = NULL;
  return 0;
}

/* Puts count values of sizes[] from s onto daemon target (seed base + i), each checked to
 * have exactly one replica, on target. */
static void put_values(mooncake_store_t s, int target, const char *prefix, const size_t *sizes,
                       size_t count, uint64_t seed) {
  placement to;
  steer(&to, g_c, &target, 1, 1);
  char key[64];
  for (size_t i = 0; i < count; ++i) {
    char *v = malloc(sizes[i]);
    fill_pattern(v, sizes[i], seed + i);
    snprintf(key, sizeof(key), "%s-%zu", prefix, i);
    assert_int_equal(mooncake_store_put(s, key, v, sizes[i], &to.config), 0);
    assert_int_equal(replica_daemon(g_c, key, 0), target);
    assert_int_equal(replica_daemon(g_c, key, 1), -1);
    free(v);
  }
}

/* Reads them back through s, every byte checked. */
static void check_values(mooncake_store_t s, const char *prefix, const size_t *sizes,
                         size_t count, uint64_t seed) {
  char key[64];
  for (size_t i = 0; i < count; ++i) {
    snprintf(key, sizeof(key), "%s-%zu", prefix, i);
    char *out = calloc(1, sizes[i]);
    assert_int_equal(mooncake_store_get_into(s, key, out, sizes[i]), (int64_t)sizes[i]);
    assert_int_equal(check_pattern(out, sizes[i], seed + i), -1);
    free(out);
  }
}

static void remove_values(mooncake_store_t s, const char *prefix, size_t count) {
  char key[64];
  for (size_t i = 0; i < count; ++i) {
    snprintf(key, sizeof(key), "%s-%zu", prefix, i);
    assert_int_equal(mooncake_store_remove(s, key, 1), 0);
  }
}

/* ---- the data path ------------------------------------------------------------------- */

static void test_cross_daemon_put_get(void **state) {
  (void)state;
  mooncake_store_t a = connect_app(g_c, A, POOL), b = connect_app(g_c, B, POOL);
  mooncake_store_t c = connect_app(g_c, C, POOL);
  put_values(a, B, "xd", k_sizes, NSIZES, 100);
  /* C and A read from B's memory over the transfer port; B reads its own. */
  mooncake_store_t readers[] = {c, b, a};
  for (int r = 0; r < 3; ++r) check_values(readers[r], "xd", k_sizes, NSIZES, 100);
  assert_int_equal(mooncake_store_get_size(c, "xd-3"), (int64_t)k_sizes[3]);
  assert_int_equal(mooncake_store_is_exist(c, "xd-3"), 1);

  /* Pool buffers on both ends: the daemons transfer from and into the pools directly. */
  size_t n = MiB + 7;
  char *src = mooncake_store_alloc(a, n), *dst = mooncake_store_alloc(c, n);
  assert_non_null(src);
  assert_non_null(dst);
  fill_pattern(src, n, 200);
  placement to_b;
  int target = B;
  steer(&to_b, g_c, &target, 1, 1);
  assert_int_equal(mooncake_store_put_from(a, "xd-pool", src, n, &to_b.config), 0);
  assert_int_equal(replica_daemon(g_c, "xd-pool", 0), B);
  memset(dst, 0, n);
  assert_int_equal(mooncake_store_get_into(c, "xd-pool", dst, n), (int64_t)n);
  assert_int_equal(check_pattern(dst, n, 200), -1);

  remove_values(a, "xd", NSIZES);
  assert_int_equal(mooncake_store_remove(a, "xd-pool", 1), 0);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mooncake_store_destroy(c);
}

static void test_cross_daemon_batch(void **state) {
  (void)state;
  enum { N = 16 };
  mooncake_store_t a = connect_app(g_c, A, POOL), c = connect_app(g_c, C, POOL);
  char names[N][32];
  const char *keys[N];
  void *in[N], *out[N];
  size_t sizes[N];
  int put_rc[N], exist[N];
  int64_t got[N];
  for (int i = 0; i < N; ++i) {
    snprintf(names[i], sizeof(names[i]), "xb-%d", i);
    keys[i] = names[i];
    sizes[i] = 1 + (size_t)i * 4099;
    in[i] = malloc(sizes[i]);
    out[i] = calloc(1, sizes[i]);
    fill_pattern(in[i], sizes[i], 300 + i);
  }
  placement to_b;
  int target = B;
  steer(&to_b, g_c, &target, 1, 1);
  assert_int_equal(mooncake_store_batch_put_from(a, keys, in, sizes, N, &to_b.config, put_rc), 0);
  for (int i = 0; i < N; ++i) {
    assert_int_equal(put_rc[i], 0);
    assert_int_equal(replica_daemon(g_c, keys[i], 0), B);
  }
  assert_int_equal(mooncake_store_batch_get_into(c, keys, out, sizes, N, got), 0);
  assert_int_equal(mooncake_store_batch_is_exist(c, keys, N, exist), 0);
  for (int i = 0; i < N; ++i) {
    assert_int_equal(got[i], (int64_t)sizes[i]);
    assert_int_equal(check_pattern(out[i], sizes[i], 300 + i), -1);
    assert_int_equal(exist[i], 1);
    assert_int_equal(mooncake_store_remove(a, keys[i], 1), 0);
    free(in[i]);
    free(out[i]);
  }
  mooncake_store_destroy(a);
  mooncake_store_destroy(c);
}

/* The master's replica list names the segment of each replica; two replicas must name
 * segments of two different daemons, and each daemon's app (holder or not) reads the
 * value. test_daemon_killed shows that the second copy serves when a holder dies. */
static void test_two_replicas_on_distinct_daemons(void **state) {
  (void)state;
  mooncake_store_t apps[3];
  for (int i = 0; i < 3; ++i) apps[i] = connect_app(g_c, i, POOL);
  placement two;
  steer(&two, g_c, NULL, 0, 2);
  char key[32];
  size_t n = 2 * MiB + 3;
  char *v = malloc(n), *out = malloc(n);
  for (int k = 0; k < 6; ++k) {
    snprintf(key, sizeof(key), "r2-%d", k);
    fill_pattern(v, n, 400 + k);
    assert_int_equal(mooncake_store_put(apps[A], key, v, n, &two.config), 0);
    int d0 = replica_daemon(g_c, key, 0), d1 = replica_daemon(g_c, key, 1);
    assert_true(d0 >= 0 && d0 < 3 && d1 >= 0 && d1 < 3);
    assert_int_not_equal(d0, d1);
    assert_int_equal(replica_daemon(g_c, key, 2), -1);
    for (int r = 0; r < 3; ++r) {
      memset(out, 0, n);
      assert_int_equal(mooncake_store_get_into(apps[r], key, out, n), (int64_t)n);
      assert_int_equal(check_pattern(out, n, 400 + k), -1);
    }
    assert_int_equal(mooncake_store_remove(apps[A], key, 1), 0);
  }
  free(v);
  free(out);
  for (int i = 0; i < 3; ++i) mooncake_store_destroy(apps[i]);
}

/* No preference: the default (random) strategy puts single replicas on every daemon, not
 * only on the writer's. The group's master has a placement seed, so the placements are
 * the same every run (unseeded, all 24 on one daemon would have probability 3^-23). */
static void test_default_strategy_spreads(void **state) {
  (void)state;
  enum { N = 24 };
  mooncake_store_t a = connect_app(g_c, A, POOL), c = connect_app(g_c, C, POOL);
  size_t n = 64 * 1024;
  char *v = malloc(n), *out = malloc(n);
  int per_daemon[3] = {0, 0, 0};
  char key[32];
  for (int k = 0; k < N; ++k) {
    snprintf(key, sizeof(key), "spread-%d", k);
    fill_pattern(v, n, 500 + k);
    assert_int_equal(mooncake_store_put(a, key, v, n, NULL), 0);
    int d = replica_daemon(g_c, key, 0);
    assert_true(d >= 0 && d < 3);
    per_daemon[d]++;
    assert_int_equal(mooncake_store_get_into(c, key, out, n), (int64_t)n);
    assert_int_equal(check_pattern(out, n, 500 + k), -1);
    assert_int_equal(mooncake_store_remove(a, key, 1), 0);
  }
  int holders = (per_daemon[0] > 0) + (per_daemon[1] > 0) + (per_daemon[2] > 0);
  assert_true(holders >= 2);
  free(v);
  free(out);
  mooncake_store_destroy(a);
  mooncake_store_destroy(c);
}

/* ---- hostile frames to a transfer port ------------------------------------------------ */

/* What the owner does with the connection after its error reply (docs/protocol.md). */
enum after_reply {
  CLOSED,  /* a refusal before a payload it cannot trust: it closes */
  IN_STEP, /* nothing unread is left (a READ, a payload read): the next request is served */
  EITHER,  /* the protocol leaves it open */
};

typedef struct hostile_case {
  const char *name;
  tp_request req;
  const char *raw; /* sent instead of req's header when set */
  size_t sent;     /* bytes of the header sent (48 unless truncated) */
  size_t payload;  /* garbage bytes sent after the header */
  int reply;       /* the protocol answers it with an error ... */
  int32_t code;    /* ... this one (0: the protocol names none, any negative) */
  enum after_reply after;
} hostile_case;

/* A READ of 64 bytes at offset 0 of B's segment must be answered in full on fd. */
static void assert_valid_read(int fd, int64_t segment, uint64_t id) {
  unsigned char h[48], data[64];
  tp_request r = tp_make(TP_READ, id, segment, 0, sizeof(data));
  tp_encode(&r, h);
  assert_int_equal(tp_send(fd, h, sizeof(h)), 0);
  tp_reply rep;
  assert_int_equal(tp_read_reply(fd, &rep), 1);
  assert_int_equal(rep.magic, TP_REPLY_MAGIC);
  assert_int_equal(rep.code, 0);
  assert_int_equal(rep.request_id, id);
  assert_int_equal(rep.length, sizeof(data));
  assert_int_equal(tp_read_exact(fd, data, sizeof(data)), 0);
}

static void run_hostile_case(const hostile_case *hc, int port, int64_t segment) {
  print_message("hostile frame: %s\n", hc->name);
  /* From a peer that holds the key: what it sends next is checked all the same. */
  int fd = tp_connect(port);
  assert_int_equal(mc_cluster_transfer_handshake(fd, "hostile:1"), 0);
  unsigned char h[48];
  tp_encode(&hc->req, h);
  assert_int_equal(tp_send(fd, hc->raw ? (const void *)hc->raw : h, hc->sent), 0);
  if (hc->payload > 0) {
    char *junk = malloc(hc->payload);
    memset(junk, 0x5c, hc->payload);
    assert_int_equal(tp_send(fd, junk, hc->payload), 0);
    free(junk);
  }
  if (hc->reply) {
    tp_reply rep;
    assert_int_equal(tp_read_reply(fd, &rep), 1);
    assert_int_equal(rep.magic, TP_REPLY_MAGIC);
    assert_true(rep.code < 0);
    if (hc->code != 0) assert_int_equal(rep.code, hc->code);
    if (hc->raw == NULL) assert_int_equal(rep.request_id, hc->req.request_id);
    if (hc->after == CLOSED) assert_true(tp_closed_by_peer(fd));
    if (hc->after == IN_STEP) assert_valid_read(fd, segment, hc->req.request_id + 1);
  }
  close(fd);
}

static void test_hostile_frames(void **state) {
  (void)state;
  mc_cluster_segment seg, others[2];
  assert_int_equal(mc_cluster_segment_at(g_c, B, &seg), 0);
  assert_int_equal(mc_cluster_segment_at(g_c, A, &others[0]), 0);
  assert_int_equal(mc_cluster_segment_at(g_c, C, &others[1]), 0);
  int64_t unknown = seg.id ^ 0x5a5a5a5a;
  while (unknown == others[0].id || unknown == others[1].id || unknown == seg.id) {
    unknown = (unknown + 1) & INT64_MAX;
  }
  const int port = mc_cluster_port_at(g_c, B);
  const uint64_t end = seg.size, top = UINT64_MAX;
  char garbage[48];
  for (size_t k = 0; k < sizeof(garbage); ++k) garbage[k] = (char)(0xa5 ^ (k * 37));
  tp_request bad_version = tp_make(TP_READ, 20, seg.id, 0, 64);
  bad_version.version = 2;
  /* A READ under the lease of a master B is not mounted at (after a master restart). */
  tp_request other_epoch = tp_make(TP_READ, 21, seg.id, 0, 64);
  other_epoch.master_epoch = 1;
  const int32_t invalid = MOONCAKE_STORE_INVALID_PARAMS, no_segment = MOONCAKE_STORE_SEGMENT_NOT_FOUND;
  const hostile_case cases[] = {
      {"truncated header, then close", tp_make(TP_READ, 1, seg.id, 0, 64), NULL, 20, 0, 0, 0,
       CLOSED},
      /* The last 4 KiB of B's segment: no live object there (B holds none at this point). */
      {"WRITE, payload cut short, then close", tp_make(TP_WRITE, 2, seg.id, end - 4096, 4096),
       NULL, 48, 1000, 0, 0, CLOSED},
      {"garbage bytes", tp_make(0, 0, 0, 0, 0), garbage, sizeof(garbage), 0, 1, invalid, CLOSED},
      {"wrong version", bad_version, NULL, 48, 0, 1, invalid, CLOSED},
      {"unknown op", tp_make(9, 22, seg.id, 0, 64), NULL, 48, 0, 1, invalid, CLOSED},
      {"READ under another master's lease", other_epoch, NULL, 48, 0, 1,
       MOONCAKE_STORE_LEASE_EXPIRED, IN_STEP},
      {"READ, unknown segment", tp_make(TP_READ, 30, unknown, 0, 64), NULL, 48, 0, 1, no_segment,
       IN_STEP},
      {"WRITE, unknown segment", tp_make(TP_WRITE, 31, unknown, 0, 4096), NULL, 48, 0, 1,
       no_segment, CLOSED},
      {"READ past the segment end", tp_make(TP_READ, 40, seg.id, end + 4096, 16), NULL, 48, 0, 1,
       invalid, IN_STEP},
      {"READ across the segment end", tp_make(TP_READ, 41, seg.id, end - 8, 16), NULL, 48, 0, 1,
       invalid, IN_STEP},
      {"WRITE past the segment end", tp_make(TP_WRITE, 42, seg.id, end, 16), NULL, 48, 0, 1,
       invalid, CLOSED},
      {"READ, offset + length overflows", tp_make(TP_READ, 50, seg.id, top - 7, 16), NULL, 48, 0,
       1, invalid, IN_STEP},
      {"WRITE, offset + length overflows", tp_make(TP_WRITE, 51, seg.id, top - 7, 16), NULL, 48,
       0, 1, invalid, CLOSED},
      {"READ, huge length", tp_make(TP_READ, 60, seg.id, 0, (uint64_t)1 << 62), NULL, 48, 0, 1,
       invalid, IN_STEP},
      {"READ, length 0", tp_make(TP_READ, 61, seg.id, 0, 0), NULL, 48, 0, 1, invalid, IN_STEP},
      {"WRITE, huge length", tp_make(TP_WRITE, 62, seg.id, 0, top), NULL, 48, 0, 1, invalid,
       CLOSED},
      {"CONTROL, payload over 64 KiB", tp_make(TP_CONTROL, 70, 1, 0, (64 << 10) + 1), NULL, 48, 0,
       1, invalid, CLOSED},
      /* Whatever handles channel 1 (RDMA set-up, or nobody on TCP) must refuse junk. */
      {"CONTROL, junk for the RDMA channel", tp_make(TP_CONTROL, 71, 1, 0, 64), NULL, 48, 64, 1,
       0, EITHER},
      {"CONTROL, unknown channel", tp_make(TP_CONTROL, 72, 99, 0, 16), NULL, 48, 16, 1, 0,
       EITHER},
  };
  mooncake_store_t a = connect_app(g_c, A, POOL), c = connect_app(g_c, C, POOL);
  /* First, that this raw client speaks the protocol: a valid READ is served. */
  int fd = tp_connect(port);
  assert_int_equal(mc_cluster_transfer_handshake(fd, "hostile:1"), 0);
  assert_valid_read(fd, seg.id, 7);
  close(fd);
  char key[64];
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    run_hostile_case(&cases[i], port, seg.id);
    /* B is alive and still serves the transfer port to its peers. */
    assert_int_equal(mc_cluster_daemon_alive(g_c, B), 1);
    snprintf(key, sizeof(key), "after-hostile-%zu", i);
    assert_round_trip(g_c, a, c, B, key, 64 * 1024 + i, 600 + i, 0);
  }
  mooncake_store_destroy(a);
  mooncake_store_destroy(c);
}

/* ---- --protocol ---------------------------------------------------------------------- */

static void test_protocol_rdma_refused_without_device(void **state) {
  (void)state;
  const char *flags[] = {"--protocol", "rdma", "--global_segment_size", "64MB", NULL};
  double start = now_seconds();
  int i = mc_cluster_add_daemon(g_c, flags);
  assert_true(i >= 0);
  /* It ends by itself (a generous wait: a loaded machine starts it slowly). */
  int status = mc_cluster_wait_daemon_at(g_c, i, 30000);
  assert_int_not_equal(status, -1);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  assert_true(now_seconds() - start < 30.0);
  assert_true(count_log_lines(mc_cluster_log_at(g_c, i), "RDMA", NULL) >= 1);
}

static void test_protocol_auto_falls_back_to_tcp(void **state) {
  (void)state;
  const char *flags[] = {"--protocol", "auto", "--global_segment_size", "64MB", NULL};
  int i = mc_cluster_add_daemon(g_c, flags);
  assert_true(i >= 0);
  assert_int_equal(mc_cluster_daemon_alive(g_c, i), 1);
  /* One line says there is no RDMA device and TCP is used; nothing else talks of RDMA. */
  const char *log = mc_cluster_log_at(g_c, i);
  assert_int_equal(count_log_lines(log, "RDMA", NULL), 1);
  assert_int_equal(count_log_lines(log, "RDMA", "tcp"), 1);
  /* And it moves bytes: a value put onto it from A is read from C. */
  mooncake_store_t a = connect_app(g_c, A, POOL), c = connect_app(g_c, C, POOL);
  assert_round_trip(g_c, a, c, i, "protocol-auto", MiB + 7, 650, 5);
  mooncake_store_destroy(a);
  mooncake_store_destroy(c);
  /* Gone again (unmounted at the master), so later placement tests see three daemons. */
  int status = mc_cluster_kill_daemon_at(g_c, i, SIGTERM);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- 8 GiB between two daemons ------------------------------------------------------- */

#define STREAM_OBJECT (64 * MiB)
#define STREAM_TOTAL (8 * GiB)

/* Removed objects keep their space until their read lease ends, and the master evicts
 * from a segment more than 90% full — maybe the object about to be read. Keep B under 75%. */
static void wait_for_room(int daemon, uint64_t bytes) {
  double deadline = now_seconds() + 30;
  for (;;) {
    mc_cluster_segment s;
    assert_int_equal(mc_cluster_segment_at(g_c, daemon, &s), 0);
    if (s.used + bytes <= s.size / 4 * 3) return;
    assert_true(now_seconds() < deadline);
    usleep(10 * 1000);
  }
}

/* 128 objects of 64 MiB, each put from A onto B, read back on A (both directions cross
 * the transfer port), every byte checked and removed. The pace is bounded by the space
 * that removed objects hold for their 1 s lease (B's 768 MiB budget per second). A read
 * that a loaded machine stretches past that lease is refused with -707, never answered
 * with bytes that may have changed: it is asked again, as an application would. */
static void test_stream_8gib_between_two_daemons(void **state) {
  (void)state;
  mooncake_store_t a = connect_app(g_c, A, 2 * STREAM_OBJECT + 4 * MiB);
  char *src = mooncake_store_alloc(a, STREAM_OBJECT), *dst = mooncake_store_alloc(a, STREAM_OBJECT);
  assert_non_null(src);
  assert_non_null(dst);
  placement to_b;
  int target = B;
  steer(&to_b, g_c, &target, 1, 1);
  char key[32];
  double start = now_seconds();
  int overran = 0;
  for (uint64_t k = 0, moved = 0; moved < STREAM_TOTAL; ++k) {
    snprintf(key, sizeof(key), "stream-%llu", (unsigned long long)k);
    wait_for_room(B, STREAM_OBJECT);
    fill_pattern(src, STREAM_OBJECT, 10000 + k);
    assert_int_equal(mooncake_store_put_from(a, key, src, STREAM_OBJECT, &to_b.config), 0);
    if (k == 0) assert_int_equal(replica_daemon(g_c, key, 0), B);
    int64_t got = mooncake_store_get_into(a, key, dst, STREAM_OBJECT);
    for (int tries = 1; got == MOONCAKE_STORE_LEASE_EXPIRED && tries < 20; ++tries) {
      ++overran;
      got = mooncake_store_get_into(a, key, dst, STREAM_OBJECT);
    }
    assert_int_equal(got, (int64_t)STREAM_OBJECT);
    assert_int_equal(check_pattern(dst, STREAM_OBJECT, 10000 + k), -1);
    assert_int_equal(mooncake_store_remove(a, key, 1), 0);
    moved += STREAM_OBJECT;
    if (moved % GiB == 0) {
      double s = now_seconds() - start;
      fprintf(stderr, "stream A<->B: %llu GiB each way in %.1f s (%.2f GB/s each way), "
              "%d reads past the lease asked again\n",
              (unsigned long long)(moved / GiB), s, (double)moved / s / 1e9, overran);
    }
  }
  mooncake_store_destroy(a);
}

/* ---- a daemon dies ------------------------------------------------------------------- */

static void test_daemon_killed(void **state) {
  (void)state;
  mooncake_store_t a = connect_app(g_c, A, POOL), c = connect_app(g_c, C, POOL);
  /* "dual" values have replicas on B then C; "solo" values only on B. */
  placement both;
  const int bc[] = {B, C};
  steer(&both, g_c, bc, 2, 2);
  char key[32];
  for (size_t i = 0; i < NSIZES; ++i) {
    char *v = malloc(k_sizes[i]);
    fill_pattern(v, k_sizes[i], 700 + i);
    snprintf(key, sizeof(key), "dual-%zu", i);
    assert_int_equal(mooncake_store_put(a, key, v, k_sizes[i], &both.config), 0);
    assert_int_equal(replica_daemon(g_c, key, 0), B);
    assert_int_equal(replica_daemon(g_c, key, 1), C);
    free(v);
  }
  put_values(a, B, "solo", k_sizes, NSIZES, 800);

  assert_true(ended_by(mc_cluster_kill_daemon_at(g_c, B, SIGKILL), SIGKILL));
  /* Before the master notices, a read of B's replica fails and the get goes on to C's. */
  check_values(a, "dual", k_sizes, NSIZES, 700);
  check_values(c, "dual", k_sizes, NSIZES, 700);
  /* Values only B held are never read again, and are gone once the master's TTL and grace
   * (3 + 2 s here) have declared B dead. */
  for (size_t i = 0; i < NSIZES; ++i) {
    snprintf(key, sizeof(key), "solo-%zu", i);
    assert_int_equal(poll_until_missing(a, key, k_sizes[i], 20), MOONCAKE_STORE_OBJECT_NOT_FOUND);
    assert_int_equal(mooncake_store_is_exist(a, key), 0);
    assert_int_equal(mooncake_store_is_exist(c, key), 0);
  }
  /* The survivors now have one replica, on C, and still read whole. */
  for (size_t i = 0; i < NSIZES; ++i) {
    snprintf(key, sizeof(key), "dual-%zu", i);
    assert_int_equal(replica_daemon(g_c, key, 0), C);
    assert_int_equal(replica_daemon(g_c, key, 1), -1);
  }
  check_values(a, "dual", k_sizes, NSIZES, 700);

  /* B comes back by itself: registers, mounts a fresh (empty) segment, takes puts. */
  assert_int_equal(mc_cluster_restart_daemon_at(g_c, B), 0);
  mc_cluster_segment s;
  int listed = -1;
  for (double deadline = now_seconds() + 10; listed != 0 && now_seconds() < deadline;) {
    listed = mc_cluster_segment_at(g_c, B, &s);
    if (listed != 0) usleep(50 * 1000);
  }
  assert_int_equal(listed, 0);
  assert_int_equal(s.used, 0);
  mooncake_store_t b = connect_app(g_c, B, POOL);
  for (size_t i = 0; i < NSIZES; ++i) {
    snprintf(key, sizeof(key), "solo-%zu", i);
    assert_int_equal(mooncake_store_is_exist(b, key), 0);
  }
  assert_round_trip(g_c, a, b, B, "after-rejoin-1", MiB + 7, 900, 10);
  assert_round_trip(g_c, c, a, B, "after-rejoin-2", 3 * POOL + 5, 901, 10);
  remove_values(a, "dual", NSIZES);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
  mooncake_store_destroy(c);
}

/* ---- a replica's owner fails in the middle of a put ---------------------------------- */

#define BIG_PUT (256 * MiB)

/* A 256 MiB put from A onto B, staged through an 8 MiB pool, paused half-way; hurt(B)
 * runs then. The put must fail, and its key must never be seen anywhere. Returns the
 * seconds from resuming the put to its end. */
static double torn_put(const char *key, int (*hurt)(mc_cluster *, int)) {
  mooncake_store_t a = connect_app(g_c, A, 8 * MiB), c = connect_app(g_c, C, POOL);
  int reached = 0, listed = -1, hurt_rc = -1;
  mc_cluster_segment seg = {0, 0, 0};
  paused_put *p = paused_put_start(g_c, a, B, key, BIG_PUT, 1000, &reached);
  if (reached) {
    listed = mc_cluster_segment_at(g_c, B, &seg);
    hurt_rc = hurt(g_c, B);
  }
  double resumed = now_seconds();
  int rc = paused_put_finish(p, 60);
  double took = now_seconds() - resumed;
  assert_true(reached);            /* it was in flight, not failed before */
  assert_int_equal(listed, 0);
  assert_true(seg.used >= BIG_PUT); /* its replica was reserved on B */
  assert_int_equal(hurt_rc, 0);
  assert_int_not_equal(rc, -1000); /* it ended */
  assert_true(rc < 0);
  /* Revoked at the master: no live daemon shows it, not even as being written. */
  mooncake_store_t readers[] = {a, c};
  for (int r = 0; r < 2; ++r) {
    assert_int_equal(mooncake_store_is_exist(readers[r], key), 0);
    assert_int_equal(poll_until_missing(readers[r], key, BIG_PUT, 5),
                     MOONCAKE_STORE_OBJECT_NOT_FOUND);
  }
  mooncake_store_destroy(a);
  mooncake_store_destroy(c);
  return took;
}

static int kill_owner(mc_cluster *c, int i) {
  return ended_by(mc_cluster_kill_daemon_at(c, i, SIGKILL), SIGKILL) ? 0 : -1;
}

static int stop_owner(mc_cluster *c, int i) { return mc_cluster_pause_daemon_at(c, i); }

/* B is back (restarted or continued): the key is not there either, and B takes puts. */
static void assert_owner_serves(const char *key) {
  mooncake_store_t a = connect_app(g_c, A, POOL), b = connect_app(g_c, B, POOL);
  assert_int_equal(mooncake_store_is_exist(b, key), 0);
  assert_round_trip(g_c, a, b, B, "owner-back", MiB + 7, 1100, 10);
  assert_int_equal(mc_cluster_daemon_alive(g_c, B), 1);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
}

static void test_put_revoked_when_owner_killed(void **state) {
  (void)state;
  torn_put("torn-by-kill", kill_owner);
  assert_int_equal(mc_cluster_restart_daemon_at(g_c, B), 0);
  assert_owner_serves("torn-by-kill");
}

/* A stopped owner neither answers nor closes: only --transfer_timeout (2 s here) ends
 * the put — once, not once per connection tried; libmc's own timeout would take 30 s. */
static void test_put_revoked_when_owner_stopped(void **state) {
  (void)state;
  double took = torn_put("torn-by-stop", stop_owner);
  print_message("put failed %.1f s after the owner stopped\n", took);
  /* The transfer timeout, once, with a margin for a loaded machine; far below libmc's. */
  assert_true(took < 2.0 + 8.0);
  assert_int_equal(mc_cluster_resume_daemon_at(g_c, B), 0);
  assert_owner_serves("torn-by-stop");
}

/* ---- --checksum ---------------------------------------------------------------------- */

static void test_checksum_across_daemons(void **state) {
  (void)state;
  mooncake_store_t apps[3];
  for (int i = 0; i < 3; ++i) apps[i] = connect_app(g_c, i, POOL);
  put_values(apps[A], B, "cs", k_sizes, NSIZES, 1200);
  for (int r = 0; r < 3; ++r) check_values(apps[r], "cs", k_sizes, NSIZES, 1200);
  remove_values(apps[A], "cs", NSIZES);
  for (int i = 0; i < 3; ++i) mooncake_store_destroy(apps[i]);
}

/* One byte of a replica flipped in B's memory (through B's transfer port, as a peer's
 * WRITE would) makes every get of it fail with -801 instead of returning it; the first
 * reader's daemon reports the replica, and once the master has dropped it (its only one)
 * the key answers -704. */
static void test_checksum_detects_corruption(void **state) {
  (void)state;
  mooncake_store_t apps[3];
  for (int i = 0; i < 3; ++i) apps[i] = connect_app(g_c, i, POOL);
  const size_t sizes[] = {64 * 1024};
  put_values(apps[A], B, "cs-bad", sizes, 1, 1300);
  int64_t segment = 0;
  uint64_t offset = 0;
  assert_int_equal(mc_cluster_replica_at(g_c, "cs-bad-0", 0, &segment, &offset), 0);

  int fd = tp_connect(mc_cluster_port_at(g_c, B));
  assert_int_equal(mc_cluster_transfer_handshake(fd, "corrupter:1"), 0);
  unsigned char h[48], byte = 0;
  tp_request r = tp_make(TP_READ, 1, segment, offset + 100, 1);
  tp_encode(&r, h);
  tp_reply rep;
  assert_int_equal(tp_send(fd, h, sizeof(h)), 0);
  assert_int_equal(tp_read_reply(fd, &rep), 1);
  assert_int_equal(rep.code, 0);
  assert_int_equal(tp_read_exact(fd, &byte, 1), 0);
  byte ^= 0x40;
  r = tp_make(TP_WRITE, 2, segment, offset + 100, 1);
  tp_encode(&r, h);
  assert_int_equal(tp_send(fd, h, sizeof(h)), 0);
  assert_int_equal(tp_send(fd, &byte, 1), 0);
  assert_int_equal(tp_read_reply(fd, &rep), 1);
  assert_int_equal(rep.code, 0);
  close(fd);

  char *out = malloc(sizes[0]);
  mooncake_store_t readers[] = {apps[C], apps[A], apps[B]};
  assert_int_equal(mooncake_store_get_into(readers[0], "cs-bad-0", out, sizes[0]),
                   MOONCAKE_STORE_CHECKSUM_MISMATCH);
  for (int k = 1; k < 3; ++k) {
    /* The report travels in the background: dropped already, or not yet. */
    int64_t rc = mooncake_store_get_into(readers[k], "cs-bad-0", out, sizes[0]);
    assert_true(rc == MOONCAKE_STORE_CHECKSUM_MISMATCH || rc == MOONCAKE_STORE_OBJECT_NOT_FOUND);
  }
  free(out);
  assert_int_equal(poll_until_missing(apps[A], "cs-bad-0", sizes[0], 20.0),
                   MOONCAKE_STORE_OBJECT_NOT_FOUND);
  for (int i = 0; i < 3; ++i) mooncake_store_destroy(apps[i]);
}

/* ---- groups -------------------------------------------------------------------------- */

/* 1 GiB segments: the stream keeps up to 75% of B's in use while leases run out. */
/* With a placement seed: where unsteered replicas land is the same every run (for
 * test_default_strategy_spreads, and for reading a failure again). */
static int start_plain(void **state) {
  (void)state;
  static const char *const master[] = {"--placement_seed", "34", NULL};
  return start_cluster(GiB, master, NULL);
}

/* The master detaches a silent daemon after 3 s and declares it dead 2 s later; daemons
 * heartbeat every 500 ms so that a loaded machine delaying one or two does not detach a
 * live one. */
static int start_short_ttl(void **state) {
  (void)state;
  static const char *const master[] = {"--client_live_ttl_sec", "3", "--daemon_grace_period_sec",
                                       "2", NULL};
  static const char *const daemon[] = {"--heartbeat_interval", "500ms", NULL};
  return start_cluster(256 * MiB, master, daemon);
}

static int start_transfer_timeout(void **state) {
  (void)state;
  static const char *const daemon[] = {"--transfer_timeout", "2s", NULL};
  return start_cluster(512 * MiB, NULL, daemon);
}

static int start_checksum(void **state) {
  (void)state;
  static const char *const daemon[] = {"--checksum", NULL};
  return start_cluster(256 * MiB, NULL, daemon);
}

/* Whether any test of the group matches pattern (NULL: every test runs), so that a group
 * whose tests are all filtered out does not even start its cluster. */
static int any_selected(const struct CMUnitTest *tests, size_t n, const char *pattern) {
  for (size_t i = 0; i < n; ++i) {
    if (pattern == NULL || fnmatch(pattern, tests[i].name, 0) == 0) return 1;
  }
  return 0;
}

#define RUN_GROUP(name, tests, setup)                                             \
  (any_selected(tests, sizeof(tests) / sizeof(tests[0]), pattern)                \
       ? cmocka_run_group_tests_name(name, tests, setup, stop_cluster)            \
       : 0)

/* cluster_test [PATTERN]: only the tests whose names match the glob PATTERN. */
int main(int argc, char **argv) {
  const char *pattern = argc > 1 ? argv[1] : NULL;
  if (pattern != NULL) cmocka_set_test_filter(pattern);
  const struct CMUnitTest data_path[] = {
      cmocka_unit_test(test_cross_daemon_put_get),
      cmocka_unit_test(test_cross_daemon_batch),
      cmocka_unit_test(test_two_replicas_on_distinct_daemons),
      cmocka_unit_test(test_default_strategy_spreads),
      cmocka_unit_test(test_hostile_frames),
      cmocka_unit_test(test_protocol_rdma_refused_without_device),
      cmocka_unit_test(test_protocol_auto_falls_back_to_tcp),
      cmocka_unit_test(test_stream_8gib_between_two_daemons),
  };
  const struct CMUnitTest daemon_death[] = {
      cmocka_unit_test(test_daemon_killed),
  };
  const struct CMUnitTest torn_puts[] = {
      cmocka_unit_test(test_put_revoked_when_owner_killed),
      cmocka_unit_test(test_put_revoked_when_owner_stopped),
  };
  const struct CMUnitTest checksum[] = {
      cmocka_unit_test(test_checksum_across_daemons),
      cmocka_unit_test(test_checksum_detects_corruption),
  };
  int failed = 0;
  failed += RUN_GROUP("data path", data_path, start_plain);
  failed += RUN_GROUP("daemon death", daemon_death, start_short_ttl);
  failed += RUN_GROUP("torn puts", torn_puts, start_transfer_timeout);
  failed += RUN_GROUP("checksum", checksum, start_checksum);
  return failed;
}
