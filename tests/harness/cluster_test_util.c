#define _GNU_SOURCE /* strcasestr */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness/cluster_test_util.h"

int count_log_lines(const char *path, const char *needle, const char *also) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strstr(line, needle) != NULL && (also == NULL || strcasestr(line, also) != NULL)) {
      print_message("%s: %s", path, line);
      ++n;
    }
  }
  fclose(f);
  return n;
}

double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* splitmix64's finalizer: nearby seeds give unrelated words. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Word k is base + (k + 1) * step: as cheap as memset to make and check (the 8 GiB stream
 * verifies every byte), yet every word of every object differs. */
void fill_pattern(void *buf, size_t n, uint64_t seed) {
  unsigned char *p = buf;
  uint64_t v = mix(seed), step = mix(~seed) | 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v += step;
    memcpy(p + i, &v, 8);
  }
  v += step;
  memcpy(p + i, &v, n - i);
}

int64_t check_pattern(const void *buf, size_t n, uint64_t seed) {
  const unsigned char *p = buf;
  uint64_t v = mix(seed), step = mix(~seed) | 1, w = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v += step;
    memcpy(&w, p + i, 8);
    if (w != v) break;
  }
  if (i + 8 > n) {
    v += step;
    if (memcmp(p + i, &v, n - i) == 0) return -1;
  }
  for (size_t k = 0; k < 8 && i + k < n; ++k) {
    if (p[i + k] != ((const unsigned char *)&v)[k]) return (int64_t)(i + k);
  }
  return -1;
}

mooncake_store_t connect_app(const mc_cluster *c, int i, uint64_t pool) {
  mooncake_store_t s = mooncake_store_create();
  assert_non_null(s);
  assert_int_equal(mooncake_store_connect(s, mc_cluster_socket_at(c, i), pool), 0);
  return s;
}

mooncake_put_config_t default_put_config(void) {
  mooncake_put_config_t c;
  assert_int_equal(mooncake_store_put_config_init(&c), 0);
  return c;
}

int store_fixture_setup(void **state, const mc_cluster *c, int i, uint64_t pool) {
  store_fixture *f = calloc(1, sizeof(*f));
  f->store = connect_app(c, i, pool);
  mooncake_store_remove_all(f->store, 1);
  *state = f;
  return 0;
}

int store_fixture_teardown(void **state) {
  store_fixture *f = *state;
  mooncake_store_destroy(f->store);
  free(f);
  return 0;
}

void steer(placement *p, const mc_cluster *c, const int *targets, size_t count,
           size_t replica_num) {
  assert_true(count <= 4);
  memset(p, 0, sizeof(*p));
  for (size_t k = 0; k < count; ++k) p->names[k] = mc_cluster_name_at(c, targets[k]);
  p->config.replica_num = replica_num;
  p->config.preferred_segments = count > 0 ? p->names : NULL;
  p->config.preferred_segments_count = count;
}

int replica_daemon(const mc_cluster *c, const char *key, int r) {
  int64_t segment = 0;
  uint64_t offset = 0;
  if (mc_cluster_replica_at(c, key, r, &segment, &offset) != 0) return -1;
  for (int i = 0; i < mc_cluster_daemon_count(c); ++i) {
    mc_cluster_segment s;
    if (mc_cluster_segment_at(c, i, &s) == 0 && s.id == segment) return i;
  }
  return -1;
}

int64_t poll_until_missing(mooncake_store_t s, const char *key, size_t capacity,
                           double timeout_s) {
  char *buf = malloc(capacity);
  int64_t rc = 0;
  for (double deadline = now_seconds() + timeout_s;;) {
    rc = mooncake_store_get_into(s, key, buf, capacity);
    assert_true(rc < 0); /* never readable, not even for a moment */
    if (rc == MOONCAKE_STORE_OBJECT_NOT_FOUND || now_seconds() > deadline) break;
    usleep(50 * 1000);
  }
  free(buf);
  return rc;
}

void assert_round_trip(const mc_cluster *c, mooncake_store_t a, mooncake_store_t b,
                       int target, const char *key, size_t size, uint64_t seed,
                       double timeout_s) {
  placement p;
  steer(&p, c, &target, 1, 1);
  char *in = malloc(size), *out = malloc(size);
  fill_pattern(in, size, seed);
  int rc = -1;
  for (double deadline = now_seconds() + timeout_s;;) {
    rc = mooncake_store_put(a, key, in, size, &p.config);
    if (rc == 0 || now_seconds() > deadline) break;
    usleep(100 * 1000);
  }
  assert_int_equal(rc, 0);
  assert_int_equal(replica_daemon(c, key, 0), target);
  memset(out, 0, size);
  assert_int_equal(mooncake_store_get_into(b, key, out, size), (int64_t)size);
  assert_int_equal(check_pattern(out, size, seed), -1);
  assert_int_equal(mooncake_store_remove(a, key, 1), 0);
  free(in);
  free(out);
}

/* ---- raw transfer-port client ------------------------------------------------------ */

tp_request tp_make(uint16_t op, uint64_t id, int64_t segment, uint64_t offset, uint64_t length) {
  tp_request r = {TP_REQUEST_MAGIC, 1, op, id, segment, offset, length, 0};
  return r;
}

int tp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
  return fd;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) p[k] = (unsigned char)(v >> (8 * k));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

void tp_encode(const tp_request *r, unsigned char out[48]) {
  put_le(out, r->magic, 4);
  put_le(out + 4, r->version, 2);
  put_le(out + 6, r->op, 2);
  put_le(out + 8, r->request_id, 8);
  put_le(out + 16, (uint64_t)r->segment_id, 8);
  put_le(out + 24, r->offset, 8);
  put_le(out + 32, r->length, 8);
  put_le(out + 40, (uint64_t)r->master_epoch, 8);
}

int tp_send(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Bytes read before end of stream or error (which stops it early). */
static size_t read_upto(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
    if (r <= 0) break;
    got += (size_t)r;
  }
  return got;
}

int tp_read_exact(int fd, void *buf, size_t n) { return read_upto(fd, buf, n) == n ? 0 : -1; }

int tp_read_reply(int fd, tp_reply *out) {
  unsigned char b[24];
  size_t got = read_upto(fd, b, sizeof(b));
  if (got == 0) {
    char probe;
    return recv(fd, &probe, 1, MSG_PEEK) == 0 ? 0 : -1;
  }
  if (got != sizeof(b)) return -1;
  out->magic = (uint32_t)get_le(b, 4);
  out->code = (int32_t)(uint32_t)get_le(b + 4, 4);
  out->request_id = get_le(b + 8, 8);
  out->length = get_le(b + 16, 8);
  return 1;
}

int tp_closed_by_peer(int fd) {
  char c;
  ssize_t r = recv(fd, &c, 1, 0);
  return r == 0 || (r < 0 && errno == ECONNRESET);
}

/* ---- a put paused half-way --------------------------------------------------------- */

/* One paused put at a time: the fault handler finds it through these. */
static int g_events[2] = {-1, -1}; /* put thread -> test: 'p' paused, 'd' done */
static int g_resume[2] = {-1, -1}; /* test -> fault handler */
static char *g_guard;
static size_t g_guard_len;
static struct sigaction g_old_segv, g_old_bus;

struct paused_put {
  mooncake_store_t store;
  char key[256];
  char *buf;
  size_t size, mapped;
  placement where;
  int rc;
  int done;
  pthread_t thread;
};

/* Runs on the put's thread at its first touch of the guarded half: tell the test, wait for
 * it, make the memory readable and return, so the copy resumes where it stopped. A fault
 * anywhere else is a real crash: give it back to whoever handled it before. */
static void on_guard_fault(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  char *at = si->si_addr;
  if (at < g_guard || at >= g_guard + g_guard_len) {
    sigaction(sig, sig == SIGSEGV ? &g_old_segv : &g_old_bus, NULL);
    return;
  }
  char c = 'p';
  ssize_t ignored = write(g_events[1], &c, 1);
  while (read(g_resume[0], &c, 1) < 0 && errno == EINTR) {
  }
  mprotect(g_guard, g_guard_len, PROT_READ | PROT_WRITE);
  (void)ignored;
}

static void *put_thread(void *arg) {
  paused_put *p = arg;
  p->rc = mooncake_store_put(p->store, p->key, p->buf, p->size, &p->where.config);
  char c = 'd';
  ssize_t ignored = write(g_events[1], &c, 1);
  (void)ignored;
  return NULL;
}

/* The next event of the put thread, or 0 when none came within timeout_s. */
static char next_event(double timeout_s) {
  struct pollfd pfd = {g_events[0], POLLIN, 0};
  char c = 0;
  if (poll(&pfd, 1, (int)(timeout_s * 1000)) == 1 && read(g_events[0], &c, 1) == 1) return c;
  return 0;
}

paused_put *paused_put_start(const mc_cluster *c, mooncake_store_t s, int target,
                             const char *key, size_t size, uint64_t seed, int *reached_half) {
  paused_put *p = calloc(1, sizeof(*p));
  p->store = s;
  snprintf(p->key, sizeof(p->key), "%s", key);
  p->size = size;
  steer(&p->where, c, &target, 1, 1);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  p->mapped = (size + page - 1) / page * page;
  p->buf = mmap(NULL, p->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p->buf != MAP_FAILED);
  fill_pattern(p->buf, size, seed);
  assert_int_equal(pipe(g_events), 0);
  assert_int_equal(pipe(g_resume), 0);
  g_guard = p->buf + p->mapped / 2 / page * page;
  g_guard_len = (size_t)(p->buf + p->mapped - g_guard);
  assert_int_equal(mprotect(g_guard, g_guard_len, PROT_NONE), 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_guard_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_old_segv);
  sigaction(SIGBUS, &sa, &g_old_bus);
  assert_int_equal(pthread_create(&p->thread, NULL, put_thread, p), 0);
  char e = next_event(60);
  p->done = e == 'd';
  *reached_half = e == 'p';
  return p;
}

int paused_put_finish(paused_put *p, double timeout_s) {
  if (!p->done) {
    char c = 'r';
    assert_int_equal(write(g_resume[1], &c, 1), 1);
    if (next_event(timeout_s) != 'd') {
      pthread_detach(p->thread);
      return -1000;
    }
  }
  pthread_join(p->thread, NULL);
  int rc = p->rc;
  sigaction(SIGSEGV, &g_old_segv, NULL);
  sigaction(SIGBUS, &g_old_bus, NULL);
  munmap(p->buf, p->mapped);
  for (int k = 0; k < 2; ++k) {
    close(g_events[k]);
    close(g_resume[k]);
  }
  free(p);
  return rc;
}

/* ---- many small objects ------------------------------------------------------------ */

#define MANY_BATCH 128

void key_of(char *out, size_t n, const char *prefix, int i) {
  snprintf(out, n, "%s/%08d", prefix, i);
}

uint64_t seed_of(const char *prefix, int i) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char *p = prefix; *p != '\0'; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h + (uint64_t)i;
}

/* One batch of put_many or read_all: the keys prefix/base.. and their slots of a pool. */
typedef struct many_batch {
  char names[MANY_BATCH][48];
  const char *keys[MANY_BATCH];
  void *bufs[MANY_BATCH];
  size_t sizes[MANY_BATCH];
} many_batch;

/* Fills b for the keys from base on (MANY_BATCH of them at most, below count); how many. */
static int name_batch(many_batch *b, char *pool, const char *prefix, int base, int count) {
  int n = count - base < MANY_BATCH ? count - base : MANY_BATCH;
  for (int j = 0; j < n; ++j) {
    key_of(b->names[j], sizeof(b->names[j]), prefix, base + j);
    b->keys[j] = b->names[j];
    b->bufs[j] = pool + (size_t)j * MANY_SIZE;
    b->sizes[j] = MANY_SIZE;
  }
  return n;
}

void put_many(mooncake_store_t s, const char *prefix, int count,
              const mooncake_replicate_config_t *config) {
  char *pool = mooncake_store_alloc(s, MANY_BATCH * MANY_SIZE);
  assert_non_null(pool);
  many_batch b;
  int results[MANY_BATCH];
  for (int base = 0; base < count; base += MANY_BATCH) {
    int n = name_batch(&b, pool, prefix, base, count);
    for (int j = 0; j < n; ++j) fill_pattern(b.bufs[j], MANY_SIZE, seed_of(prefix, base + j));
    assert_int_equal(mooncake_store_batch_put_from(s, b.keys, b.bufs, b.sizes, (size_t)n,
                                                   config, results),
                     0);
    for (int j = 0; j < n; ++j) {
      if (results[j] != 0) fail_msg("put %s: %d", b.keys[j], results[j]);
    }
  }
  mooncake_store_free(s, pool);
}

tally read_all(mooncake_store_t s, const char *prefix, int count, int64_t *codes) {
  char *pool = mooncake_store_alloc(s, MANY_BATCH * MANY_SIZE);
  assert_non_null(pool);
  many_batch b;
  int64_t results[MANY_BATCH];
  tally t = {0, 0, 0};
  for (int base = 0; base < count; base += MANY_BATCH) {
    int n = name_batch(&b, pool, prefix, base, count);
    /* Zeroed, so that a get that claims the size without writing cannot pass on what
     * put_many left in the same pool. */
    memset(pool, 0, (size_t)n * MANY_SIZE);
    assert_int_equal(
        mooncake_store_batch_get_into(s, b.keys, b.bufs, b.sizes, (size_t)n, results), 0);
    for (int j = 0; j < n; ++j) {
      if (codes != NULL) codes[base + j] = results[j];
      if (results[j] == MOONCAKE_STORE_OBJECT_NOT_FOUND) {
        ++t.missing;
      } else if (results[j] == MOONCAKE_STORE_REPLICA_IS_NOT_READY) {
        ++t.not_ready;
      } else if (results[j] != (int64_t)MANY_SIZE) {
        fail_msg("get %s: %lld", b.keys[j], (long long)results[j]);
      } else {
        int64_t bad = check_pattern(b.bufs[j], MANY_SIZE, seed_of(prefix, base + j));
        if (bad != -1) fail_msg("get %s: wrong byte at %lld", b.keys[j], (long long)bad);
        ++t.good;
      }
    }
  }
  mooncake_store_free(s, pool);
  return t;
}

void assert_all_read(mooncake_store_t s, const char *prefix, int count) {
  tally t = read_all(s, prefix, count, NULL);
  if (t.good != count) {
    fail_msg("%s: %d of %d read, %d missing, %d not ready", prefix, t.good, count, t.missing,
             t.not_ready);
  }
}

mc_cluster_master_stats master_stats(const mc_cluster *c) {
  mc_cluster_master_stats st;
  assert_int_equal(mc_cluster_master_stats_get(c, &st), 0);
  return st;
}

void await_pending(const mc_cluster *c, int64_t n, double timeout_s) {
  double until = now_seconds() + timeout_s;
  mc_cluster_master_stats st = {0};
  for (;;) {
    if (mc_cluster_master_stats_get(c, &st) == 0 && st.pending_segments == n) return;
    if (now_seconds() > until) {
      fail_msg("pending_segments %lld, not %lld, after %.0f s", (long long)st.pending_segments,
               (long long)n, timeout_s);
    }
    usleep(50 * 1000);
  }
}

/* ---- a child process --------------------------------------------------------------- */

pid_t fork_with_pipe(int fds[2]) {
  assert_int_equal(pipe(fds), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  close(child == 0 ? fds[0] : fds[1]);
  return child;
}
