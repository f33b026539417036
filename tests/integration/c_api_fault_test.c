/* Faults through the C ABI, with the real processes: a client killed in the middle of a
 * large put, the daemon killed with SIGKILL and restarted, the master restarted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define SEGMENT_SIZE (384u << 20)
#define CHILD_VALUE (256u << 20)

static mc_cluster *g_cluster;
static int g_fault_pipe = -1;

static mooncake_store_t connect_store(uint64_t pool) {
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket(g_cluster), pool), 0);
  return s;
}

/* In the child: the put has reached the unreadable half of its source buffer. Tell the
 * parent and wait to be killed. Only async-signal-safe calls here. */
static void on_fault(int sig) {
  (void)sig;
  char c = 'x';
  ssize_t ignored = write(g_fault_pipe, &c, 1);
  (void)ignored;
  for (;;) pause();
}

static void child_put_until_fault(void) {
  mooncake_store_t s = mooncake_store_create();
  if (mooncake_store_connect(s, mc_cluster_socket(g_cluster), 1u << 20) != 0) _exit(3);
  /* The second half of the value is unreadable: the library stages it through the 1 MiB
   * pool chunk by chunk, so the copy faults half-way through the put, deterministically. */
  char *value = mmap(NULL, CHILD_VALUE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
  if (value == MAP_FAILED) _exit(4);
  memset(value, 'v', CHILD_VALUE / 2);
  mprotect(value + CHILD_VALUE / 2, CHILD_VALUE / 2, PROT_NONE);
  signal(SIGSEGV, on_fault);
  signal(SIGBUS, on_fault);
  mooncake_store_put(s, "killed-mid-put", value, CHILD_VALUE, NULL);
  _exit(5); /* not reached: the put cannot finish */
}

static void test_client_killed_mid_put(void **state) {
  (void)state;
  int fds[2];
  pid_t child = fork_with_pipe(fds);
  if (child == 0) {
    g_fault_pipe = fds[1];
    child_put_until_fault();
  }
  char c = 0;
  assert_int_equal(read(fds[0], &c, 1), 1); /* the child is in the middle of its put */
  close(fds[0]);
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  assert_true(WIFSIGNALED(status));

  mooncake_store_t s = connect_store(64u << 20);
  /* Never readable. Until the daemon has noticed the dead client the reservation may still
   * be there (-703, being written); once it is revoked, the key is gone (-704, below). */
  assert_int_equal(mooncake_store_is_exist(s, "killed-mid-put"), 0);
  int64_t early = mooncake_store_get_into(s, "killed-mid-put", &c, 1);
  assert_true(early == -703 || early == -704);
  /* Its reservation is freed: a value that fits only if those 256 MiB came back goes in
   * (the daemon notices the dead client asynchronously, so allow it a moment). */
  size_t n = SEGMENT_SIZE - (64u << 20);
  char *value = malloc(n);
  memset(value, 'p', n);
  int rc = -1;
  for (double deadline = now_seconds() + 5; now_seconds() < deadline;) {
    rc = mooncake_store_put(s, "after-the-crash", value, n, NULL);
    if (rc == 0) break;
    usleep(100 * 1000);
  }
  assert_int_equal(rc, 0);
  assert_int_equal(mooncake_store_is_exist(s, "killed-mid-put"), 0);
  assert_int_equal(mooncake_store_get_into(s, "killed-mid-put", &c, 1), -704);
  assert_int_equal(mooncake_store_remove(s, "after-the-crash", 1), 0);
  free(value);
  mooncake_store_destroy(s);
}

static void test_daemon_killed_and_restarted(void **state) {
  (void)state;
  mooncake_store_t s = connect_store(16u << 20);
  size_t n = 1u << 20;
  char *buf = mooncake_store_alloc(s, n);
  char *out = mooncake_store_alloc(s, n);
  assert_non_null(buf);
  memset(buf, 'd', n);
  assert_int_equal(mooncake_store_put_from(s, "before-daemon-kill", buf, n, NULL), 0);

  mc_cluster_kill_daemon(g_cluster, SIGKILL);
  /* Calls fail fast with -900 while it is gone; nothing hangs. */
  double start = now_seconds();
  assert_int_equal(mooncake_store_put_from(s, "while-gone", buf, n, NULL), -900);
  assert_int_equal(mooncake_store_is_exist(s, "while-gone"), -900);
  assert_int_equal(mooncake_store_get_into(s, "before-daemon-kill", out, n), -900);
  assert_int_equal(mooncake_store_health_check(s), 1);
  assert_true(now_seconds() - start < 10.0); /* generous for a loaded machine, far from a hang */

  assert_int_equal(mc_cluster_restart_daemon(g_cluster), 0);
  /* The next calls reconnect and hand over the same pool: its pointers stay valid. */
  int rc = -1;
  for (double deadline = now_seconds() + 10; now_seconds() < deadline;) {
    rc = mooncake_store_put_from(s, "after-daemon-restart", buf, n, NULL);
    if (rc == 0) break;
    usleep(100 * 1000);
  }
  assert_int_equal(rc, 0);
  memset(out, 0, n);
  assert_int_equal(mooncake_store_get_into(s, "after-daemon-restart", out, n), (int64_t)n);
  assert_memory_equal(out, buf, n);
  assert_int_equal(mooncake_store_health_check(s), 0);
  mooncake_store_free(s, buf);
  mooncake_store_free(s, out);
  mooncake_store_destroy(s);
}

static void test_master_restarted(void **state) {
  (void)state;
  mooncake_store_t s = connect_store(16u << 20);
  char value[4096], out[4096];
  memset(value, 'm', sizeof(value));
  assert_int_equal(mooncake_store_put(s, "before-master-restart", value, sizeof(value), NULL), 0);

  mc_cluster_kill_master(g_cluster, SIGKILL);
  assert_int_equal(mc_cluster_restart_master(g_cluster), 0);
  /* The new master knows nothing; the daemon re-registers and re-mounts by itself. */
  int rc = -1;
  for (double deadline = now_seconds() + 60; now_seconds() < deadline;) {
    rc = mooncake_store_put(s, "after-master-restart", value, sizeof(value), NULL);
    if (rc == 0) break;
    usleep(200 * 1000);
  }
  assert_int_equal(rc, 0);
  assert_int_equal(mooncake_store_get_into(s, "after-master-restart", out, sizeof(out)),
                   (int64_t)sizeof(out));
  assert_memory_equal(out, value, sizeof(value));
  assert_int_equal(mooncake_store_health_check(s), 0);
  mooncake_store_destroy(s);
}

int main(void) {
  g_cluster = mc_cluster_start(SEGMENT_SIZE);
  if (g_cluster == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_client_killed_mid_put),
      cmocka_unit_test(test_daemon_killed_and_restarted),
      cmocka_unit_test(test_master_restarted),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mc_cluster_stop(g_cluster);
  return failed;
}
