/* Issue 12, tenants: a real master and three real daemons. Tenants alice and bob use the
 * same key names on daemon 0 (and alice on daemon 1 too): neither sees, reads, removes,
 * batch-removes, regex-removes or removes-all the other's keys, the default tenant is a
 * third key space, and every value is intact afterwards. A tenant over its quota
 * (--tenant_quota) gets -1402 while another tenant's puts at the same time succeed, and
 * the master's per-tenant figures (GetStats) say what was put. Daemon 2 runs with
 * --tenant_uids: a child that setuid()s to 65534 cannot claim a tenant listed for other
 * uids (-1401), and one that names none lands in its uid's tenant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/cluster_test_util.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define POOL (16 * MiB)
#define VALUE 4096
#define QUOTA_VALUE (64 * KiB)
#define QUOTA_VALUES 4 /* --tenant_quota capped=256KB holds exactly four */

enum { D0 = 0, D1 = 1, GUARDED_DAEMON = 2 };

/* The unprivileged uid the child takes (Debian's nobody). */
#define OTHER_UID 65534

/* Daemon 2's policy: "guarded" only for root, and uid 65534's default tenant. Everything
 * a process of another uid needs to reach the daemon at all is here too, in one place: if
 * the daemon's admission of local uids (--allowed_uids or the like) would refuse uid
 * 65534, add its flag to this list. */
static const char *const kGuardedDaemonFlags[] = {
    "--tenant_uids", "guarded=0,nobodys=65534", "--socket_mode", "0666",
    "--allowed_uids", "65534", NULL};

static mc_cluster *g_c;

static int setup(void **state) {
  (void)state;
  static const char *const master_flags[] = {"--tenant_quota", "capped=256KB", NULL};
  mc_cluster_options opts = {2, 64 * MiB, 0, master_flags, NULL};
  g_c = mc_cluster_start_with(&opts);
  if (g_c == NULL) return -1;
  if (mc_cluster_add_daemon(g_c, kGuardedDaemonFlags) != GUARDED_DAEMON ||
      mc_cluster_await_daemon_at(g_c, GUARDED_DAEMON, 30000) != 0) {
    return -1;
  }
  /* The child of the uid test must reach the sockets in the cluster's directory. */
  return chmod(mc_cluster_dir(g_c), 0755);
}

static int teardown(void **state) {
  (void)state;
  mc_cluster_stop(g_c);
  return 0;
}

/* A handle of tenant ("" or NULL: none named) on daemon i. */
static mooncake_store_t connect_as(int i, const char *tenant) {
  mooncake_store_t s = mooncake_store_create();
  assert_non_null(s);
  assert_int_equal(mooncake_store_set_tenant(s, tenant), 0);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_c, i), POOL), 0);
  return s;
}

/* Each tenant's value of a key has its own seed: reading another's bytes fails the check. */
static uint64_t seed(const char *tenant, const char *key) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = tenant; *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  h = (h ^ '/') * 1099511628211ull;
  for (const char *p = key; *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h;
}

static void put_value(mooncake_store_t s, const char *tenant, const char *key) {
  char value[VALUE];
  fill_pattern(value, sizeof(value), seed(tenant, key));
  assert_int_equal(mooncake_store_put(s, key, value, sizeof(value), NULL), 0);
}

/* key reads back, through s, as tenant's value. */
static void assert_value(mooncake_store_t s, const char *tenant, const char *key) {
  char buf[VALUE];
  assert_int_equal(mooncake_store_get_into(s, key, buf, sizeof(buf)), VALUE);
  assert_int_equal(check_pattern(buf, sizeof(buf), seed(tenant, key)), -1);
  assert_int_equal(mooncake_store_is_exist(s, key), 1);
  assert_int_equal(mooncake_store_get_size(s, key), VALUE);
}

static void assert_missing(mooncake_store_t s, const char *key) {
  char buf[VALUE];
  assert_int_equal(mooncake_store_get_into(s, key, buf, sizeof(buf)),
                   MOONCAKE_STORE_OBJECT_NOT_FOUND);
  assert_int_equal(mooncake_store_is_exist(s, key), 0);
  assert_int_equal(mooncake_store_get_size(s, key), MOONCAKE_STORE_OBJECT_NOT_FOUND);
}

static mc_cluster_tenant_stats tenant_stats(const char *tenant) {
  mc_cluster_tenant_stats t;
  assert_int_equal(mc_cluster_tenant_stats_get(g_c, tenant, &t), 0);
  return t;
}

/* ---- set_tenant --------------------------------------------------------------------- */

static void test_set_tenant_checks_the_id_and_the_moment(void **state) {
  (void)state;
  mooncake_store_t s = mooncake_store_create();
  char longest[65], over[66];
  memset(longest, 't', 64);
  longest[64] = '\0';
  memset(over, 't', 65);
  over[65] = '\0';
  assert_int_equal(mooncake_store_set_tenant(s, longest), 0);
  assert_int_equal(mooncake_store_set_tenant(s, "Team-7_prod.eu"), 0);
  assert_int_equal(mooncake_store_set_tenant(s, NULL), 0); /* none named */
  assert_int_equal(mooncake_store_set_tenant(s, ""), 0);
  const char *bad[] = {over, "a b", "a/b", "t\xc3\xa9", "a:b"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    assert_int_equal(mooncake_store_set_tenant(s, bad[i]), MOONCAKE_STORE_INVALID_PARAMS);
  }
  assert_int_equal(mooncake_store_set_tenant(NULL, "a"), MOONCAKE_STORE_INTERNAL_ERROR);
  assert_int_equal(mooncake_store_set_tenant(s, "a"), 0);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_c, D0), POOL), 0);
  assert_int_equal(mooncake_store_set_tenant(s, "b"), MOONCAKE_STORE_INVALID_PARAMS);
  /* Closed, it may be changed again for the next connect. */
  assert_int_equal(mooncake_store_close(s), 0);
  assert_int_equal(mooncake_store_set_tenant(s, "b"), 0);
  mooncake_store_destroy(s);
}

/* ---- isolation ---------------------------------------------------------------------- */

static const char *const kKeys[] = {"shared/1", "shared/2", "shared/3", "shared/4"};
#define KEYS (sizeof(kKeys) / sizeof(kKeys[0]))

/* The clients the isolation tests speak through: tenant alice at daemons 0 and 1, tenant
 * bob and the default tenant at daemon 0. */
typedef struct four_clients {
  mooncake_store_t alice, alice_on_1, bob, plain;
} four_clients;

static four_clients connect_four_clients(void) {
  four_clients c;
  c.alice = connect_as(D0, "alice");
  c.alice_on_1 = connect_as(D1, "alice");
  c.bob = connect_as(D0, "bob");
  c.plain = connect_as(D0, NULL);
  return c;
}

static void destroy_four_clients(four_clients *c) {
  mooncake_store_destroy(c->alice);
  mooncake_store_destroy(c->alice_on_1);
  mooncake_store_destroy(c->bob);
  mooncake_store_destroy(c->plain);
}

static void test_same_key_names_are_separate_objects(void **state) {
  (void)state;
  four_clients c = connect_four_clients();
  /* Only alice has shared/4, written through daemon 1. */
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    put_value(c.alice, "alice", kKeys[k]);
    put_value(c.bob, "bob", kKeys[k]);
    put_value(c.plain, "", kKeys[k]);
  }
  put_value(c.alice_on_1, "alice", kKeys[3]);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_value(c.alice, "alice", kKeys[k]);
    assert_value(c.alice_on_1, "alice", kKeys[k]); /* one tenant, any daemon */
    assert_value(c.bob, "bob", kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  assert_value(c.alice, "alice", kKeys[3]);
  assert_missing(c.bob, kKeys[3]);
  assert_missing(c.plain, kKeys[3]);
  /* The batch forms too. */
  int exist[KEYS];
  assert_int_equal(mooncake_store_batch_is_exist(c.bob, (const char **)kKeys, KEYS, exist), 0);
  assert_int_equal(exist[0] + exist[1] + exist[2], 3);
  assert_int_equal(exist[3], 0);
  char *bufs[KEYS];
  size_t sizes[KEYS];
  int64_t got[KEYS];
  for (size_t k = 0; k < KEYS; ++k) {
    bufs[k] = malloc(VALUE);
    sizes[k] = VALUE;
  }
  assert_int_equal(mooncake_store_batch_get_into(c.plain, (const char **)kKeys, (void **)bufs,
                                                 sizes, KEYS, got),
                   0);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_int_equal(got[k], VALUE);
    assert_int_equal(check_pattern(bufs[k], VALUE, seed("", kKeys[k])), -1);
  }
  assert_int_equal(got[3], MOONCAKE_STORE_OBJECT_NOT_FOUND);
  for (size_t k = 0; k < KEYS; ++k) free(bufs[k]);
  /* What the master counts: alice 4, bob 3, the default tenant at least its 3. */
  assert_int_equal(tenant_stats("alice").objects, 4);
  assert_int_equal(tenant_stats("alice").bytes, 4 * VALUE);
  assert_int_equal(tenant_stats("bob").objects, 3);
  assert_int_equal(tenant_stats("bob").bytes, 3 * VALUE);
  assert_true(tenant_stats("").objects >= 3);
  destroy_four_clients(&c);
}

static void test_no_removal_reaches_another_tenant(void **state) {
  (void)state;
  four_clients c = connect_four_clients();
  /* Read by everyone first, so that every read cache holds the values a removal could
   * wrongly forget or keep. */
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_value(c.bob, "bob", kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  /* remove and batch_remove name alice's own keys only. */
  assert_int_equal(mooncake_store_remove(c.alice, kKeys[0], 1), 0);
  assert_int_equal(mooncake_store_remove(c.alice, kKeys[0], 1), MOONCAKE_STORE_OBJECT_NOT_FOUND);
  const char *batch[] = {kKeys[1], "shared/absent"};
  int codes[2];
  assert_int_equal(mooncake_store_batch_remove(c.alice, batch, 2, 1, codes), 0);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], MOONCAKE_STORE_OBJECT_NOT_FOUND);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_value(c.bob, "bob", kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  assert_missing(c.alice, kKeys[0]);
  assert_missing(c.alice_on_1, kKeys[1]);
  /* A pattern matching every key counts alice's only: shared/3 and shared/4. */
  assert_int_equal(mooncake_store_remove_by_regex(c.alice_on_1, "^shared/", 1), 2);
  /* Nor can a pattern spell another tenant's stored key. */
  assert_int_equal(mooncake_store_remove_by_regex(c.alice, "bob", 1), 0);
  assert_int_equal(mooncake_store_remove_by_regex(c.alice, "\\x00", 1), 0);
  for (size_t k = 0; k < KEYS; ++k) assert_missing(c.alice, kKeys[k]);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_value(c.bob, "bob", kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  /* remove_all: alice has nothing left to remove, bob loses his, the default tenant keeps
   * its keys through both. */
  put_value(c.alice, "alice", "mine");
  assert_int_equal(mooncake_store_remove_all(c.alice, 1), 1);
  assert_int_equal(mooncake_store_remove_all(c.bob, 1), 3);
  for (size_t k = 0; k + 1 < KEYS; ++k) {
    assert_missing(c.bob, kKeys[k]);
    assert_value(c.plain, "", kKeys[k]);
  }
  assert_int_equal(tenant_stats("alice").objects, 0);
  assert_int_equal(tenant_stats("bob").objects, 0);
  /* And the default tenant's remove_all leaves a tenant's keys alone. */
  put_value(c.bob, "bob", kKeys[0]);
  assert_true(mooncake_store_remove_all(c.plain, 1) >= 3);
  assert_value(c.bob, "bob", kKeys[0]);
  assert_missing(c.plain, kKeys[0]);
  assert_int_equal(mooncake_store_remove(c.bob, kKeys[0], 1), 0);
  destroy_four_clients(&c);
}

/* ---- quota -------------------------------------------------------------------------- */

typedef struct other_puts {
  mooncake_store_t s;
  int ok;
  int done;
} other_puts;

#define OTHER_PUTS 24

static void *put_as_other(void *arg) {
  other_puts *o = arg;
  char *value = malloc(QUOTA_VALUE);
  fill_pattern(value, QUOTA_VALUE, 7);
  for (int i = 0; i < OTHER_PUTS; ++i) {
    char key[32];
    snprintf(key, sizeof(key), "other/%d", i);
    o->ok += mooncake_store_put(o->s, key, value, QUOTA_VALUE, NULL) == 0;
  }
  free(value);
  return NULL;
}

static void test_quota_refuses_one_tenant_only(void **state) {
  (void)state;
  mooncake_store_t capped = connect_as(D0, "capped");
  mooncake_store_t capped_on_1 = connect_as(D1, "capped");
  mooncake_store_t other = connect_as(D1, "uncapped");
  char *value = malloc(QUOTA_VALUE);
  fill_pattern(value, QUOTA_VALUE, 3);
  other_puts o = {other, 0, 0};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, put_as_other, &o), 0);
  /* Exactly its quota goes in, through either daemon; then every put is refused. */
  int accepted = 0, refused = 0;
  for (int i = 0; i < 3 * QUOTA_VALUES; ++i) {
    char key[32];
    snprintf(key, sizeof(key), "capped/%d", i);
    int rc = mooncake_store_put(i % 2 ? capped_on_1 : capped, key, value, QUOTA_VALUE, NULL);
    if (rc == 0) {
      ++accepted;
    } else {
      assert_int_equal(rc, MOONCAKE_STORE_QUOTA_EXCEEDED);
      ++refused;
    }
  }
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_int_equal(accepted, QUOTA_VALUES);
  assert_int_equal(refused, 2 * QUOTA_VALUES);
  assert_int_equal(o.ok, OTHER_PUTS); /* the quota of one tenant is nobody else's */

  mc_cluster_tenant_stats t = tenant_stats("capped");
  assert_int_equal(t.objects, QUOTA_VALUES);
  assert_int_equal(t.bytes, QUOTA_VALUES * QUOTA_VALUE);
  assert_int_equal(t.quota_bytes, 256 * KiB);
  assert_int_equal(t.refused_puts, 2 * QUOTA_VALUES);
  t = tenant_stats("uncapped");
  assert_int_equal(t.objects, OTHER_PUTS);
  assert_int_equal(t.bytes, OTHER_PUTS * QUOTA_VALUE);
  assert_int_equal(t.quota_bytes, 0);
  assert_int_equal(t.refused_puts, 0);

  /* Room for one more after a removal: in a batch, the first entry fits, the second not. */
  assert_int_equal(mooncake_store_remove(capped, "capped/0", 1), 0);
  const char *keys[] = {"capped/batch-1", "capped/batch-2"};
  void *buffers[] = {value, value};
  size_t sizes[] = {QUOTA_VALUE, QUOTA_VALUE};
  int results[2];
  assert_int_equal(
      mooncake_store_batch_put_from(capped, keys, buffers, sizes, 2, NULL, results), 0);
  assert_int_equal(results[0], 0);
  assert_int_equal(results[1], MOONCAKE_STORE_QUOTA_EXCEEDED);
  /* Two replicas count twice: one 64 KiB value needs 128 KiB of quota. */
  assert_int_equal(mooncake_store_remove_all(capped, 1), QUOTA_VALUES);
  mooncake_replicate_config_t two = {2, 0, 0, NULL, 0};
  for (int i = 0; i < QUOTA_VALUES / 2; ++i) {
    char key[32];
    snprintf(key, sizeof(key), "capped/two-%d", i);
    assert_int_equal(mooncake_store_put(capped, key, value, QUOTA_VALUE, &two), 0);
  }
  assert_int_equal(mooncake_store_put(capped, "capped/one-more", value, QUOTA_VALUE, NULL),
                   MOONCAKE_STORE_QUOTA_EXCEEDED);
  assert_int_equal(tenant_stats("capped").bytes, QUOTA_VALUES * QUOTA_VALUE);
  assert_int_equal(mooncake_store_remove_all(capped, 1), QUOTA_VALUES / 2);
  assert_int_equal(mooncake_store_remove_all(other, 1), OTHER_PUTS);
  assert_int_equal(tenant_stats("capped").bytes, 0);
  free(value);
  mooncake_store_destroy(capped);
  mooncake_store_destroy(capped_on_1);
  mooncake_store_destroy(other);
}

/* ---- who may claim a tenant (--tenant_uids) ----------------------------------------- */

/* In a child that has become OTHER_UID: connect naming tenant (NULL: none) and, if that
 * worked, put key. Reports the connect's code. */
static void child_connect_as_other(int fd, const char *tenant, const char *key) {
  int rc = -1;
  if (setgid(OTHER_UID) == 0 && setuid(OTHER_UID) == 0) {
    mooncake_store_t s = mooncake_store_create();
    rc = mooncake_store_set_tenant(s, tenant);
    if (rc == 0) {
      rc = mooncake_store_connect(s, mc_cluster_socket_at(g_c, GUARDED_DAEMON), POOL);
    }
    if (rc == 0 && key != NULL) {
      char value[VALUE];
      fill_pattern(value, sizeof(value), seed("child", key));
      rc = mooncake_store_put(s, key, value, sizeof(value), NULL);
    }
    mooncake_store_destroy(s);
  }
  if (write(fd, &rc, sizeof(rc)) != (ssize_t)sizeof(rc)) _exit(2);
  _exit(0);
}

/* What child_connect_as_other answered. */
static int as_other(const char *tenant, const char *key) {
  int fds[2];
  pid_t child = fork_with_pipe(fds);
  if (child == 0) child_connect_as_other(fds[1], tenant, key);
  int rc = -12345;
  assert_int_equal(read(fds[0], &rc, sizeof(rc)), (ssize_t)sizeof(rc));
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return rc;
}

static void test_listed_tenants_only_for_their_uids(void **state) {
  (void)state;
  if (geteuid() != 0) {
    skip(); /* setuid() needs root; ctest runs as root here */
  }
  /* Another uid cannot claim "guarded", and is told so at connect. */
  assert_int_equal(as_other("guarded", NULL), MOONCAKE_STORE_PERMISSION_DENIED);
  assert_true(count_log_lines(mc_cluster_log_at(g_c, GUARDED_DAEMON),
                              "may not claim tenant 'guarded'", NULL) >= 1);
  /* Naming none, it lands in the tenant listing its uid. */
  int before = (int)tenant_stats("nobodys").objects;
  assert_int_equal(as_other(NULL, "by-nobody"), 0);
  assert_int_equal(tenant_stats("nobodys").objects, before + 1);
  /* An unlisted tenant is anyone's. */
  assert_int_equal(as_other("anyones", "by-nobody"), 0);
  assert_int_equal(tenant_stats("anyones").objects, 1);

  /* Root may claim "guarded", not "nobodys"; naming none, it is in "guarded". */
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_set_tenant(s, "nobodys"), 0);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(g_c, GUARDED_DAEMON), POOL),
                   MOONCAKE_STORE_PERMISSION_DENIED);
  mooncake_store_destroy(s);
  mooncake_store_t root = connect_as(GUARDED_DAEMON, NULL);
  mooncake_store_t guarded = connect_as(D0, "guarded"); /* daemon 0 lists nobody */
  put_value(root, "root", "by-root");
  char buf[VALUE];
  assert_int_equal(mooncake_store_get_into(guarded, "by-root", buf, sizeof(buf)), VALUE);
  assert_int_equal(check_pattern(buf, sizeof(buf), seed("root", "by-root")), -1);
  assert_int_equal(mooncake_store_remove_all(guarded, 1), 1);
  mooncake_store_destroy(root);
  mooncake_store_destroy(guarded);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_set_tenant_checks_the_id_and_the_moment),
      cmocka_unit_test(test_same_key_names_are_separate_objects),
      cmocka_unit_test(test_no_removal_reaches_another_tenant),
      cmocka_unit_test(test_quota_refuses_one_tenant_only),
      cmocka_unit_test(test_listed_tenants_only_for_their_uids),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
