/* Every refusal says why, on the client (issue 30), against a real master and daemons:
 * mooncake_store_errmsg() and the one stderr line of a failed connect, setup or mount --
 * no daemon at the socket (no file, a stale file, a path too long), a master that is not
 * the daemon's, a uid the daemon does not admit or whom the socket file's mode keeps out,
 * a tenant kept for other uids, a segment over the daemon's budget for clients (the
 * daemon's own reason) -- the rule a refused key broke, a batch's first refused entry, a
 * reason from the daemon on a data call, refusals of one handle logged at most once a
 * second while another handle's still show, and messages kept per handle and per thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_test_util.h"

#define POOL (8u << 20)
#define OTHER_UID 65534 /* Debian's nobody */

/* Daemon 0 lends applications at most 16 MiB each (a budget that does not depend on the
 * host); CLOSED admits nobody but root (its socket open to all by mode, so that only the
 * daemon's own rule refuses); GUARDED admits uid 65534 but keeps tenant "guarded" for root. */
enum { D0 = 0, CLOSED = 1, GUARDED = 2 };
static const char *const kDaemonFlags[] = {"--client_segment_budget", "32MB",
                                           "--client_segment_budget_per_client", "16MB", NULL};
static const char *const kClosedFlags[] = {"--socket_mode", "0666", NULL};
static const char *const kGuardedFlags[] = {"--socket_mode", "0666", "--allowed_uids", "65534",
                                            "--tenant_uids", "guarded=0", NULL};

static mc_cluster *g_c;

/* ---- stderr, captured --------------------------------------------------------------- */

typedef struct capture {
  int saved;
  char path[512];
} capture;

static void capture_start(capture *c) {
  snprintf(c->path, sizeof(c->path), "%s/stderr-XXXXXX", mc_cluster_dir(g_c));
  int fd = mkstemp(c->path);
  assert_true(fd >= 0);
  c->saved = dup(STDERR_FILENO);
  assert_true(c->saved >= 0);
  assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
  close(fd);
}

/* What was written to stderr since capture_start (malloc'd, NUL-terminated). */
static char *capture_read(const capture *c) {
  FILE *f = fopen(c->path, "r");
  assert_non_null(f);
  size_t cap = 4096, n = 0;
  char *text = malloc(cap);
  for (size_t got; (got = fread(text + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (cap - n < 2) text = realloc(text, cap *= 2);
  }
  text[n] = '\0';
  fclose(f);
  return text;
}

/* Ends the capture (stderr is the test's again) and returns what was written. */
static char *capture_end(capture *c) {
  assert_int_equal(dup2(c->saved, STDERR_FILENO), STDERR_FILENO);
  close(c->saved);
  char *text = capture_read(c);
  unlink(c->path);
  fprintf(stderr, "%s", text); /* shown with the test's output, as if never captured */
  return text;
}

static int count_lines(const char *text) {
  int n = 0;
  for (const char *p = text; *p != '\0'; ++p) n += *p == '\n';
  return n;
}

static int count_substr(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) ++n;
  return n;
}

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (strstr((text), (needle)) == NULL) {                                  \
      fail_msg("\"%s\"\n  does not contain \"%s\"", (text), (needle));       \
    }                                                                        \
  } while (0)

/* The failed call's one line: exactly one line was written, naming function and message. */
static void assert_one_line(const char *text, const char *function, const char *message) {
  assert_int_equal(count_lines(text), 1);
  char expected[2048];
  snprintf(expected, sizeof(expected), "%s: %s", function, message);
  assert_contains(text, expected);
}

/* ---- no daemon at the socket ---------------------------------------------------------- */

static void test_no_daemon_names_the_path_and_the_fix(void **state) {
  (void)state;
  char path[512], expected[1024];
  snprintf(path, sizeof(path), "%s/absent.sock", mc_cluster_dir(g_c));
  snprintf(expected, sizeof(expected),
           "mooncaked is not running at %s (connect: No such file or directory): start it "
           "(systemctl start mooncaked) or point MOONCAKE_SOCKET / connect()'s socket_path at "
           "its --socket",
           path);
  mooncake_store_t s = mooncake_store_create();
  capture cap;
  capture_start(&cap);
  assert_int_equal(mooncake_store_connect(s, path, POOL), MOONCAKE_STORE_RPC_FAIL);
  char *log = capture_end(&cap);
  assert_string_equal(mooncake_store_errmsg(s), expected);
  assert_one_line(log, "mooncake_store_connect", expected);
  free(log);

  /* setup() finds the daemon through $MOONCAKE_SOCKET: the same line, under its name. */
  setenv("MOONCAKE_SOCKET", path, 1);
  capture_start(&cap);
  assert_int_equal(mooncake_store_setup(s, "localhost", "P2PHANDSHAKE", 0, POOL, "tcp", "", ""),
                   MOONCAKE_STORE_RPC_FAIL);
  log = capture_end(&cap);
  unsetenv("MOONCAKE_SOCKET");
  assert_string_equal(mooncake_store_errmsg(s), expected);
  assert_one_line(log, "mooncake_store_setup", expected);
  free(log);

  /* A call that does not fail clears it. */
  assert_int_equal(mooncake_store_health_check(s), 1);
  assert_string_equal(mooncake_store_errmsg(s), "");
  mooncake_store_destroy(s);
}

static void test_stale_socket_and_long_path(void **state) {
  (void)state;
  /* A socket file nobody listens on: what a daemon that died leaves behind. */
  char path[512];
  snprintf(path, sizeof(path), "%s/stale.sock", mc_cluster_dir(g_c));
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  assert_true(strlen(path) < sizeof(addr.sun_path));
  memcpy(addr.sun_path, path, strlen(path) + 1);
  assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
  close(fd);
  mooncake_store_t s = mooncake_store_create();
  capture cap;
  capture_start(&cap);
  assert_int_equal(mooncake_store_connect(s, path, POOL), MOONCAKE_STORE_RPC_FAIL);
  char *log = capture_end(&cap);
  char expected[1024];
  snprintf(expected, sizeof(expected),
           "mooncaked is not running at %s (connect: Connection refused)", path);
  assert_contains(mooncake_store_errmsg(s), expected);
  assert_one_line(log, "mooncake_store_connect", expected);
  free(log);

  char long_path[300];
  memset(long_path, 'p', sizeof(long_path) - 1);
  long_path[0] = '/';
  long_path[sizeof(long_path) - 1] = '\0';
  assert_int_equal(mooncake_store_connect(s, long_path, POOL), MOONCAKE_STORE_INVALID_PARAMS);
  assert_contains(mooncake_store_errmsg(s),
                  "socket path of 299 bytes: a Unix socket's path is 1 to 107 bytes");
  mooncake_store_destroy(s);
}

/* ---- the daemon refuses the handshake -------------------------------------------------- */

static void test_other_master_names_both(void **state) {
  (void)state;
  int port = mc_cluster_master_port(g_c);
  char theirs[64], expected[256];
  snprintf(theirs, sizeof(theirs), "127.0.0.2:%d", port);
  snprintf(expected, sizeof(expected),
           "client expects master 127.0.0.2:%d, daemon uses 127.0.0.1:%d", port, port);
  setenv("MOONCAKE_SOCKET", mc_cluster_socket_at(g_c, D0), 1);
  mooncake_store_t s = mooncake_store_create();
  capture cap;
  capture_start(&cap);
  assert_int_equal(mooncake_store_setup(s, "localhost", "P2PHANDSHAKE", 0, POOL, "tcp", "", theirs),
                   MOONCAKE_STORE_INVALID_PARAMS);
  char *log = capture_end(&cap);
  unsetenv("MOONCAKE_SOCKET");
  const char *msg = mooncake_store_errmsg(s);
  assert_contains(msg, "refused the handshake (-600 INVALID_PARAMS)");
  assert_contains(msg, expected);
  assert_contains(msg, "pass setup() the daemon's master as master_server_addr");
  assert_one_line(log, "mooncake_store_setup", msg);
  free(log);
  mooncake_store_destroy(s);
}

/* In a child that has become OTHER_UID: connect to daemon i naming tenant (NULL: none) and
 * report the code and the message through fd. */
static void child_connect(int fd, int i, const char *tenant) {
  int rc = -12345;
  char msg[2048] = "(setuid failed)";
  if (setgid(OTHER_UID) == 0 && setuid(OTHER_UID) == 0) {
    mooncake_store_t s = mooncake_store_create();
    rc = mooncake_store_set_tenant(s, tenant);
    if (rc == 0) rc = mooncake_store_connect(s, mc_cluster_socket_at(g_c, i), POOL);
    snprintf(msg, sizeof(msg), "%s", mooncake_store_errmsg(s));
    mooncake_store_destroy(s);
  }
  if (write(fd, &rc, sizeof(rc)) != (ssize_t)sizeof(rc) || write(fd, msg, sizeof(msg)) < 0) {
    _exit(2);
  }
  _exit(0);
}

/* What child_connect answered: its code, and its message in msg (2048 bytes). */
static int connect_as_other(int i, const char *tenant, char *msg) {
  int fds[2];
  pid_t child = fork_with_pipe(fds);
  if (child == 0) child_connect(fds[1], i, tenant);
  int rc = 0;
  assert_int_equal(read(fds[0], &rc, sizeof(rc)), (ssize_t)sizeof(rc));
  size_t got = 0;
  for (ssize_t n; got < 2048 && (n = read(fds[0], msg + got, 2048 - got)) > 0;) got += (size_t)n;
  assert_int_equal(got, 2048);
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return rc;
}

static void test_uid_refusals_say_who_and_which_flag(void **state) {
  (void)state;
  if (geteuid() != 0) skip(); /* setuid() needs root; ctest runs as root here */
  char msg[2048];
  /* The daemon's own rule: it names the uid and gid it saw, and its flags. */
  assert_int_equal(connect_as_other(CLOSED, NULL, msg), MOONCAKE_STORE_PERMISSION_DENIED);
  assert_contains(msg, "uid 65534 gid 65534 is not admitted");
  assert_contains(msg, "--allowed_uids and --allowed_gids");
  /* The socket file's mode (0660, group root) keeps uid 65534 out before the daemon sees it. */
  assert_int_equal(connect_as_other(D0, NULL, msg), MOONCAKE_STORE_RPC_FAIL);
  assert_contains(msg, "permission denied on mooncaked's socket");
  assert_contains(msg, "(connect: Permission denied)");
  assert_contains(msg, "uid 65534, gid 65534");
  /* A tenant the daemon keeps for other uids. */
  assert_int_equal(connect_as_other(GUARDED, "guarded", msg), MOONCAKE_STORE_PERMISSION_DENIED);
  assert_contains(msg, "uid 65534 may not claim tenant 'guarded' (--tenant_uids lists it for "
                       "other uids)");
  /* Admitted, in no tenant: connected, and nothing to say. */
  assert_int_equal(connect_as_other(GUARDED, NULL, msg), 0);
  assert_string_equal(msg, "");
}

/* ---- segments over the daemon's budget ---------------------------------------------------- */

static void test_segment_over_budget_carries_the_daemons_reason(void **state) {
  (void)state;
  setenv("MOONCAKE_SOCKET", mc_cluster_socket_at(g_c, D0), 1);
  mooncake_store_t s = mooncake_store_create();
  capture cap;
  capture_start(&cap);
  assert_int_equal(mooncake_store_setup(s, "localhost", "P2PHANDSHAKE", 64u << 20, POOL, "tcp", "",
                                        ""),
                   MOONCAKE_STORE_RESOURCE_LIMIT_EXCEEDED);
  char *log = capture_end(&cap);
  unsetenv("MOONCAKE_SOCKET");
  const char *msg = mooncake_store_errmsg(s);
  assert_contains(msg, "refused to mount the handle's segment of 64.0 MiB (setup's "
                       "global_segment_size) (-1300 RESOURCE_LIMIT_EXCEEDED): ");
  /* The rest is the daemon's reason, which names the flag that decides. */
  assert_contains(msg, "--client_segment_budget");
  assert_one_line(log, "mooncake_store_setup", msg);
  free(log);
  assert_int_equal(mooncake_store_health_check(s), 1); /* not connected */

  /* The same budget for a segment asked for later. */
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_c, D0), POOL), 0);
  uint64_t id = 0;
  capture_start(&cap);
  assert_int_equal(mooncake_store_allocate_and_mount_segment(s, 64u << 20, &id, NULL),
                   MOONCAKE_STORE_RESOURCE_LIMIT_EXCEEDED);
  log = capture_end(&cap);
  msg = mooncake_store_errmsg(s);
  assert_contains(msg, "refused to mount a segment of 64.0 MiB (RESOURCE_LIMIT_EXCEEDED): ");
  assert_contains(msg, "--client_segment_budget");
  assert_one_line(log, "mooncake_store_allocate_and_mount_segment", msg);
  free(log);
  mooncake_store_destroy(s);
}

/* ---- arguments --------------------------------------------------------------------------- */

static void test_key_errors_name_the_rule(void **state) {
  (void)state;
  mooncake_store_t s = connect_app(g_c, D0, POOL);
  char long_key[4098];
  memset(long_key, 'k', 4097);
  long_key[4097] = '\0';
  char value[64] = "v", out[64];
  assert_int_equal(mooncake_store_put(s, "", value, sizeof(value), NULL), -600);
  assert_string_equal(mooncake_store_errmsg(s), "key is empty");
  assert_int_equal(mooncake_store_put(s, long_key, value, sizeof(value), NULL), -600);
  assert_string_equal(mooncake_store_errmsg(s), "key longer than 4096 bytes (4097)");
  assert_int_equal(mooncake_store_get_into(s, "", out, sizeof(out)), -600);
  assert_string_equal(mooncake_store_errmsg(s), "key is empty");
  assert_int_equal(mooncake_store_is_exist(s, long_key), -600);
  assert_string_equal(mooncake_store_errmsg(s), "key longer than 4096 bytes (4097)");
  assert_int_equal(mooncake_store_remove(s, "", 0), -600);
  assert_string_equal(mooncake_store_errmsg(s), "key is empty");
  /* The longest key is fine, and a call that succeeds leaves no message. */
  long_key[4096] = '\0';
  assert_int_equal(mooncake_store_put(s, long_key, value, sizeof(value), NULL), 0);
  assert_string_equal(mooncake_store_errmsg(s), "");

  /* Values and pointers. */
  assert_int_equal(mooncake_store_put(s, "k", value, 0, NULL), -600);
  assert_string_equal(mooncake_store_errmsg(s), "value size 0: a value is 1 byte to 4 GiB");
  assert_int_equal(mooncake_store_put(s, "k", NULL, 1, NULL), -1);
  assert_string_equal(mooncake_store_errmsg(s), "value is NULL");

  /* A batch answers 0; its message names the first entry refused before anything was sent. */
  const char *keys[3] = {"k", "", long_key};
  int results[3];
  long_key[4096] = 'k';
  assert_int_equal(mooncake_store_batch_is_exist(s, keys, 3, results), 0);
  assert_int_equal(results[1], -600);
  assert_int_equal(results[2], -600);
  assert_string_equal(mooncake_store_errmsg(s), "entry 1: key is empty");

  /* Without a handle: errmsg(NULL). */
  assert_int_equal(mooncake_store_put(NULL, "k", value, 1, NULL), -1);
  assert_string_equal(mooncake_store_errmsg(NULL), "the handle (mooncake_store_t) is NULL");
  uint64_t bytes = 0;
  assert_int_equal(mooncake_store_parse_size("12XB", &bytes), -600);
  assert_contains(mooncake_store_errmsg(NULL), "\"12XB\" is not a size");
  mooncake_store_destroy(s);
}

static void test_daemon_reasons_reach_data_calls(void **state) {
  (void)state;
  mooncake_store_t s = connect_app(g_c, D0, POOL);
  char value[8192], out[100];
  fill_pattern(value, sizeof(value), 7);
  assert_int_equal(mooncake_store_put(s, "eight-kib", value, sizeof(value), NULL), 0);
  assert_int_equal(mooncake_store_get_into(s, "eight-kib", out, sizeof(out)), -600);
  assert_string_equal(mooncake_store_errmsg(s),
                      "the value is larger than the buffer of 100 bytes (get_size says how large)");
  assert_int_equal(mooncake_store_unmount_segment(s, 12345, NULL, NULL),
                   MOONCAKE_STORE_SEGMENT_NOT_FOUND);
  assert_contains(mooncake_store_errmsg(s), "segment 12345 is not one this connection mounted");
  /* A miss is no refusal: the code's description says all. */
  assert_int_equal(mooncake_store_get_into(s, "no-such-key", out, sizeof(out)), -704);
  assert_string_equal(mooncake_store_errmsg(s), "object not found (-704)");
  assert_int_equal(mooncake_store_remove(s, "eight-kib", 1), 0);
  mooncake_store_destroy(s);
}

/* ---- how often refusals are logged -------------------------------------------------------- */

static void test_refusals_log_once_a_second_per_handle(void **state) {
  (void)state;
  mooncake_store_t a = connect_app(g_c, D0, POOL);
  mooncake_store_t b = connect_app(g_c, D0, POOL);
  char value[16] = "v";
  capture cap;
  capture_start(&cap);
  double start = now_seconds();
  for (int i = 0; i < 10000; ++i) {
    assert_int_equal(mooncake_store_put(a, "", value, sizeof(value), NULL), -600);
  }
  double elapsed = now_seconds() - start;
  char *text = capture_read(&cap);
  int lines = count_lines(text);
  /* One line, plus one for every second the loop took (a loaded machine is slow). */
  assert_true(lines >= 1);
  assert_true(lines <= 1 + (int)elapsed);
  assert_int_equal(count_substr(text, "mooncake_store_put: key is empty"), lines);
  free(text);
  /* Another handle's refusal is its own: logged at once. */
  assert_int_equal(mooncake_store_remove(b, "", 0), -600);
  text = capture_read(&cap);
  assert_int_equal(count_substr(text, "mooncake_store_remove: key is empty"), 1);
  free(text);
  /* Handle a's next line, once its second is over, says how many were not logged. */
  int found = 0;
  for (double deadline = now_seconds() + 10; !found && now_seconds() < deadline;) {
    assert_int_equal(mooncake_store_put(a, "", value, sizeof(value), NULL), -600);
    text = capture_read(&cap);
    found = strstr(text, "more refused calls on this handle since the last such line)") != NULL;
    free(text);
    if (!found) usleep(10 * 1000);
  }
  text = capture_end(&cap);
  assert_true(found);
  free(text);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
}

/* ---- per handle, per thread ------------------------------------------------------------- */

typedef struct thread_case {
  mooncake_store_t store;
  int failed[2];   /* the thread -> main: its call failed */
  int go_on[2];    /* main -> the thread: main's call succeeded */
  char seen[256];  /* the thread's errmsg after that */
} thread_case;

static void *failing_thread(void *arg) {
  thread_case *t = arg;
  char value[16] = "v", c = 'x';
  int rc = mooncake_store_put(t->store, "", value, sizeof(value), NULL);
  if (rc != -600 || write(t->failed[1], &c, 1) != 1 || read(t->go_on[0], &c, 1) != 1) {
    return NULL;
  }
  snprintf(t->seen, sizeof(t->seen), "%s", mooncake_store_errmsg(t->store));
  return NULL;
}

static void test_messages_are_per_thread_and_per_handle(void **state) {
  (void)state;
  thread_case t = {.store = connect_app(g_c, D0, POOL)};
  assert_int_equal(pipe(t.failed), 0);
  assert_int_equal(pipe(t.go_on), 0);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, failing_thread, &t), 0);
  char c;
  assert_int_equal(read(t.failed[0], &c, 1), 1);
  /* This thread has its own message: none; the other's failure is not this thread's. */
  assert_string_equal(mooncake_store_errmsg(t.store), "");
  assert_int_equal(mooncake_store_is_exist(t.store, "anything"), 0);
  assert_int_equal(write(t.go_on[1], &c, 1), 1);
  assert_int_equal(pthread_join(thread, NULL), 0);
  /* ... and this thread's success did not clear the other's. */
  assert_string_equal(t.seen, "key is empty");

  /* Two handles on one thread: a success on one leaves the other's message. */
  mooncake_store_t other = connect_app(g_c, D0, POOL);
  char value[16] = "v";
  assert_int_equal(mooncake_store_put(t.store, "", value, sizeof(value), NULL), -600);
  assert_int_equal(mooncake_store_is_exist(other, "anything"), 0);
  assert_string_equal(mooncake_store_errmsg(t.store), "key is empty");
  assert_string_equal(mooncake_store_errmsg(other), "");
  for (int i = 0; i < 2; ++i) {
    close(t.failed[i]);
    close(t.go_on[i]);
  }
  mooncake_store_destroy(other);
  mooncake_store_destroy(t.store);
}

static int group_setup(void **state) {
  (void)state;
  mc_cluster_options opts = {1, 64u << 20, 0, NULL, kDaemonFlags};
  g_c = mc_cluster_start_with(&opts);
  if (g_c == NULL) return -1;
  if (mc_cluster_add_daemon(g_c, kClosedFlags) != CLOSED ||
      mc_cluster_await_daemon_at(g_c, CLOSED, 30000) != 0 ||
      mc_cluster_add_daemon(g_c, kGuardedFlags) != GUARDED ||
      mc_cluster_await_daemon_at(g_c, GUARDED, 30000) != 0) {
    return -1;
  }
  /* The children of the uid test must reach the sockets in the cluster's directory. */
  return chmod(mc_cluster_dir(g_c), 0755);
}

static int group_teardown(void **state) {
  (void)state;
  mc_cluster_stop(g_c);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_daemon_names_the_path_and_the_fix),
      cmocka_unit_test(test_stale_socket_and_long_path),
      cmocka_unit_test(test_other_master_names_both),
      cmocka_unit_test(test_uid_refusals_say_who_and_which_flag),
      cmocka_unit_test(test_segment_over_budget_carries_the_daemons_reason),
      cmocka_unit_test(test_key_errors_name_the_rule),
      cmocka_unit_test(test_daemon_reasons_reach_data_calls),
      cmocka_unit_test(test_refusals_log_once_a_second_per_handle),
      cmocka_unit_test(test_messages_are_per_thread_and_per_handle),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
