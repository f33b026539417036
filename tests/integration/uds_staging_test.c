/* Finding 7 of issue 11: pool memory the daemon may still write is never handed out again
 * before it is done (libmc/pool_quarantine.h), through the C ABI against a real master and
 * two real daemons, A (index 0, the application's) and B (index 1, which holds the
 * object). B is stopped (SIGSTOP) so that A's copy of the object into the application's
 * pool hangs in mid-transfer; the application then loses its connection to A while A is
 * still copying, or A dies, or the request times out. The memory the copy lands in must
 * not be given to anyone before the copy is over, and must come back once it is. */
#define _GNU_SOURCE /* struct ucred */
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define MiB ((size_t)1 << 20)
#define VALUE MiB
/* Room for exactly two VALUE-sized blocks: the one the hung copy lands in and one more. */
#define POOL (2 * MiB + 64 * 1024)

enum { A = 0, B = 1 };

static const char *const kDaemonFlags[] = {
    /* B stopped must stall A's transfer, not fail it, until the test resumes B. */
    "--transfer_timeout", "60s", NULL};

static mc_cluster *start_cluster(void) {
  mc_cluster_options opts = {2, 64 * MiB, 0, NULL, kDaemonFlags};
  mc_cluster *c = mc_cluster_start_with(&opts);
  assert_non_null(c);
  return c;
}

/* Puts key (VALUE bytes of pattern seed) with its one replica on B. */
static void put_on_b(mc_cluster *c, const char *key, uint64_t seed) {
  mooncake_store_t b = connect_app(c, B, 4 * MiB);
  placement on_b;
  const int target = B;
  steer(&on_b, c, &target, 1, 1);
  char *v = malloc(VALUE);
  fill_pattern(v, VALUE, seed);
  assert_int_equal(mooncake_store_put(b, key, v, VALUE, &on_b.config), 0);
  assert_int_equal(replica_daemon(c, key, 0), B);
  free(v);
  mooncake_store_destroy(b);
}

/* A get of key into memory outside the pool (so libmc stages it), on its own thread. */
typedef struct pending_get {
  mooncake_store_t store;
  const char *key;
  char *buffer; /* VALUE bytes, malloc'd; the test frees it */
  int64_t result;
  pthread_t thread;
} pending_get;

static void *run_get(void *arg) {
  pending_get *g = arg;
  g->result = mooncake_store_get_into(g->store, g->key, g->buffer, VALUE);
  return NULL;
}

/* Puts key (pattern seed) on B, stops B and starts A's get of it: the copy into A's
 * staging block hangs in mid-transfer until B resumes. Returns A's handle (pool POOL). */
static mooncake_store_t start_hung_get(pending_get *g, mc_cluster *c, const char *key,
                                       uint64_t seed) {
  put_on_b(c, key, seed);
  mooncake_store_t a = connect_app(c, A, POOL);
  assert_int_equal(mc_cluster_pause_daemon_at(c, B), 0);
  g->store = a;
  g->key = key;
  g->buffer = malloc(VALUE);
  g->result = 1;
  assert_int_equal(pthread_create(&g->thread, NULL, run_get, g), 0);
  /* A has asked the master and started reading from the stopped B: its request waits,
   * unread, at B's transfer port. */
  for (double until = now_seconds() + 60; !mc_cluster_unread_request_at(c, B);) {
    if (now_seconds() > until) fail_msg("A never started reading from the stopped B");
    usleep(10 * 1000);
  }
  return a;
}

/* Whether process pid's command line names socket_path (the daemon serving it). */
static int serves(pid_t pid, const char *socket_path) {
  char path[64], cmdline[4096];
  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(cmdline, 1, sizeof(cmdline) - 1, f);
  fclose(f);
  for (size_t at = 0; at < n; at += strlen(cmdline + at) + 1) {
    cmdline[n] = '\0';
    if (strcmp(cmdline + at, socket_path) == 0) return 1;
  }
  return 0;
}

/* The descriptor of this process's connection to the daemon serving socket_path, or -1.
 * (The peer's name is the one the daemon bound before linking it into place, so the
 * daemon is recognised by its credentials instead.) */
static int socket_connected_to(const char *socket_path) {
  DIR *d = opendir("/proc/self/fd");
  assert_non_null(d);
  int found = -1;
  for (struct dirent *e; found < 0 && (e = readdir(d)) != NULL;) {
    int fd = atoi(e->d_name);
    struct stat st;
    if (e->d_name[0] == '.' || fd == dirfd(d) || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
      continue;
    }
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0 &&
        serves(cred.pid, socket_path)) {
      found = fd;
    }
  }
  closedir(d);
  return found;
}

/* Allocations of VALUE bytes until one succeeds (the hung copy's block is back), for
 * timeout_s at most; NULL if none did. Each call also gives the handle a chance to use
 * its connection (any call that needs the daemon reconnects and fences). */
static void *alloc_when_back(mooncake_store_t s, double timeout_s, int touch_daemon) {
  double until = now_seconds() + timeout_s;
  for (;;) {
    void *p = mooncake_store_alloc(s, VALUE);
    if (p != NULL || now_seconds() > until) return p;
    if (touch_daemon) mooncake_store_is_exist(s, "uds-staging-any");
    usleep(20 * 1000);
  }
}

static int all_bytes_are(const char *p, size_t n, char value) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != value) return 0;
  }
  return 1;
}

/* The connection dies while A copies into a staging block: the block stays out of the
 * pool until A has finished (its answer to POOL_FENCE on the next connection), so an
 * allocation made meanwhile cannot be overwritten by the late copy; the block comes back
 * afterwards, holding the copy's bytes (proof that A did write after the loss). */
static void test_lost_connection_keeps_the_block_until_the_daemon_is_done(void **state) {
  (void)state;
  mc_cluster *c = start_cluster();
  pending_get g;
  mooncake_store_t a = start_hung_get(&g, c, "staging-lost", 71);

  int fd = socket_connected_to(mc_cluster_socket_at(c, A));
  assert_true(fd >= 0);
  assert_int_equal(shutdown(fd, SHUT_RDWR), 0);  /* the connection is lost; A lives on */
  pthread_join(g.thread, NULL);
  assert_int_equal(g.result, MOONCAKE_STORE_RPC_FAIL);

  /* The one VALUE-sized range left: without the quarantine it would be the hung copy's. */
  char *mine = mooncake_store_alloc(a, VALUE);
  assert_non_null(mine);
  memset(mine, 0x5a, VALUE);
  assert_null(mooncake_store_alloc(a, VALUE));  /* the copy's block is still held */

  assert_int_equal(mc_cluster_resume_daemon_at(c, B), 0);  /* the copy completes now */
  char *back = alloc_when_back(a, 20.0, 1);
  assert_non_null(back);
  assert_true(all_bytes_are(mine, VALUE, 0x5a));
  assert_int_equal(check_pattern(back, VALUE, 71), -1);  /* where the late copy landed */

  /* The handle works on as before. */
  mooncake_store_free(a, back);
  mooncake_store_free(a, mine);
  assert_int_equal(mooncake_store_get_into(a, "staging-lost", g.buffer, VALUE), (int64_t)VALUE);
  assert_int_equal(check_pattern(g.buffer, VALUE, 71), -1);
  free(g.buffer);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* A dies (kill -9) while it copies into a staging block: a dead process writes nothing,
 * so the block comes back at once, without any new connection. */
static void test_daemon_death_gives_the_block_back(void **state) {
  (void)state;
  mc_cluster *c = start_cluster();
  pending_get g;
  mooncake_store_t a = start_hung_get(&g, c, "staging-death", 72);

  mc_cluster_kill_daemon_at(c, A, SIGKILL);
  pthread_join(g.thread, NULL);
  assert_int_equal(g.result, MOONCAKE_STORE_RPC_FAIL);
  char *first = alloc_when_back(a, 10.0, 0);
  char *second = alloc_when_back(a, 10.0, 0);
  assert_non_null(first);
  assert_non_null(second);  /* both halves: the staging block came back */

  assert_int_equal(mc_cluster_resume_daemon_at(c, B), 0);
  free(g.buffer);
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

/* A zero-copy get into the application's own allocation times out: the allocation,
 * freed by the application, is not handed out again until A's late answer says the copy
 * is over. */
static void test_timed_out_zero_copy_pins_the_allocation(void **state) {
  (void)state;
  mc_cluster *c = start_cluster();
  put_on_b(c, "staging-timeout", 73);
  setenv("MOONCAKE_STORE_TIMEOUT_MS", "700", 1);  /* read at connect */
  mooncake_store_t a = connect_app(c, A, POOL);
  unsetenv("MOONCAKE_STORE_TIMEOUT_MS");
  char *target = mooncake_store_alloc(a, VALUE);
  assert_non_null(target);
  assert_int_equal(mc_cluster_pause_daemon_at(c, B), 0);
  assert_int_equal(mooncake_store_get_into(a, "staging-timeout", target, VALUE),
                   MOONCAKE_STORE_RPC_TIMEOUT);
  mooncake_store_free(a, target);
  char *other = mooncake_store_alloc(a, VALUE);
  assert_non_null(other);
  assert_true(other != target);  /* target's range is still pinned */
  assert_null(mooncake_store_alloc(a, VALUE));

  assert_int_equal(mc_cluster_resume_daemon_at(c, B), 0);  /* the late answer unpins it */
  char *again = alloc_when_back(a, 20.0, 0);
  assert_true(again == target);
  assert_int_equal(check_pattern(again, VALUE, 73), -1);  /* the copy did land there */
  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

int main(void) {
  /* The tests count the blocks of pools of exact sizes: keep them off huge pages, which
   * would round a pool up to whole 2 MiB pages where the machine has some reserved. */
  setenv("MOONCAKE_STORE_HUGE_PAGES", "0", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lost_connection_keeps_the_block_until_the_daemon_is_done),
      cmocka_unit_test(test_daemon_death_gives_the_block_back),
      cmocka_unit_test(test_timed_out_zero_copy_pins_the_allocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
