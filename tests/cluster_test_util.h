/* Helpers of tests/cluster_test.c: value patterns, handles on daemon i, placement configs,
 * bounded polling, a raw client of a daemon's transfer port (daemon/transfer/transfer_protocol.h),
 * a put that pauses half-way through its value so a test can hurt the replica's owner
 * while the put is in flight, many small objects put and read back in batches, and a
 * forked child. Failures are CMocka assertions. */
#ifndef MOONCAKE_TESTS_CLUSTER_TEST_UTIL_H_
#define MOONCAKE_TESTS_CLUSTER_TEST_UTIL_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "include/mooncake_store.h"
#include "tests/cluster.h"

double now_seconds(void);

/* How many lines of the file contain needle (and, when also is set, that word in any
 * case); they are printed, so that a failure shows them. -1 when it cannot be read. */
int count_log_lines(const char *path, const char *needle, const char *also);

/* A value whose bytes are a function of (seed, position): another object's bytes, a
 * shifted copy or a stale range fail the check. check_pattern returns the index of the
 * first wrong byte, or -1. */
void fill_pattern(void *buf, size_t n, uint64_t seed);
int64_t check_pattern(const void *buf, size_t n, uint64_t seed);

/* A connected handle on daemon i with a pool of pool bytes. */
mooncake_store_t connect_app(const mc_cluster *c, int i, uint64_t pool);

/* The CMocka state of a test that needs one handle on a store that starts empty. */
typedef struct store_fixture {
  mooncake_store_t store;
} store_fixture;
/* A setup function's body: *state becomes a store_fixture whose handle is connect_app(c, i,
 * pool), after every object is removed (forced). Returns 0. */
int store_fixture_setup(void **state, const mc_cluster *c, int i, uint64_t pool);
/* A teardown function: destroys the handle and frees the fixture. Returns 0. */
int store_fixture_teardown(void **state);

/* A put config with every default (mooncake_store_put_config_init, asserted to succeed). */
mooncake_put_config_t default_put_config(void);

/* One replica (replica_num) per daemon named in targets, in order; targets[k] are daemon
 * indices of c. The names must outlive the config: they point into the cluster. */
typedef struct placement {
  const char *names[4];
  mooncake_replicate_config_t config;
} placement;
void steer(placement *p, const mc_cluster *c, const int *targets, size_t count,
           size_t replica_num);

/* The index of the daemon whose segment holds COMPLETE replica r of key, or -1. */
int replica_daemon(const mc_cluster *c, const char *key, int r);

/* Polls get_into (capacity bytes) until it answers -704, for timeout_s at most; returns
 * the last answer. Asserts that no attempt reads the object. */
int64_t poll_until_missing(mooncake_store_t s, const char *key, size_t capacity,
                           double timeout_s);

/* A put from a to daemon target, read back from b, every byte checked; retried until
 * timeout_s passes (a daemon that just came back may still be registering). */
void assert_round_trip(const mc_cluster *c, mooncake_store_t a, mooncake_store_t b,
                       int target, const char *key, size_t size, uint64_t seed,
                       double timeout_s);

/* ---- raw transfer-port client ------------------------------------------------------ */

enum { TP_WRITE = 1, TP_READ = 2, TP_CONTROL = 3 };
#define TP_REQUEST_MAGIC 0x5054434du /* "MCTP" */
#define TP_REPLY_MAGIC 0x5254434du   /* "MCTR" */

typedef struct tp_request {
  uint32_t magic;
  uint16_t version;
  uint16_t op;
  uint64_t request_id;
  int64_t segment_id;
  uint64_t offset;
  uint64_t length;
  int64_t master_epoch; /* READ: the lease's master; 0 unchecked */
} tp_request;

typedef struct tp_reply {
  uint32_t magic;
  int32_t code;
  uint64_t request_id;
  uint64_t length;
} tp_reply;

/* A valid request header (magic, version 1). */
tp_request tp_make(uint16_t op, uint64_t id, int64_t segment, uint64_t offset, uint64_t length);
/* A TCP connection to 127.0.0.1:port whose reads and writes give up after 5 s. */
int tp_connect(int port);
/* The 48 wire bytes of r, little-endian. */
void tp_encode(const tp_request *r, unsigned char out[48]);
/* Writes n bytes; 0 when they all went (the peer may have closed: no SIGPIPE). */
int tp_send(int fd, const void *buf, size_t n);
/* 1 with *out filled, 0 on end of stream (nothing read), -1 on timeout or a torn reply. */
int tp_read_reply(int fd, tp_reply *out);
/* Reads exactly n bytes; 0 on success. */
int tp_read_exact(int fd, void *buf, size_t n);
/* 1 when the peer closes (or resets) the connection within 5 s without sending anything. */
int tp_closed_by_peer(int fd);

/* ---- a put paused half-way --------------------------------------------------------- */

/* put(key, size bytes of fill_pattern(seed)) from s to daemon target on its own thread,
 * from memory whose second half faults: the first fault stops the put's thread until
 * paused_put_finish. Deterministic where a timer would race a fast put. One at a time
 * (the fault handler is process-wide). */
typedef struct paused_put paused_put;
/* Starts the put; returns once it has copied half its value (1), or ended first (0). */
paused_put *paused_put_start(const mc_cluster *c, mooncake_store_t s, int target,
                             const char *key, size_t size, uint64_t seed, int *reached_half);
/* Lets it go on and waits (timeout_s at most) for its result; frees p. -1000 when it did
 * not end in time (its thread is then left behind). */
int paused_put_finish(paused_put *p, double timeout_s);

/* ---- many small objects ------------------------------------------------------------ */

/* Object prefix/i (the key key_of writes) holds MANY_SIZE bytes of
 * fill_pattern(seed_of(prefix, i)): every key its own bytes. */
#define MANY_SIZE ((size_t)1024)
void key_of(char *out, size_t n, const char *prefix, int i);
uint64_t seed_of(const char *prefix, int i);

/* Puts prefix/0..count-1 from s in batches (config may be NULL); every result must be 0. */
void put_many(mooncake_store_t s, const char *prefix, int count,
              const mooncake_replicate_config_t *config);

typedef struct tally {
  int good;      /* read with exactly their bytes */
  int missing;   /* -704 */
  int not_ready; /* -703 */
} tally;

/* Reads prefix/0..count-1 back in batches; codes (may be NULL) gets every answer. Any
 * answer but the size, -704 or -703, and any wrong byte, fails the test. */
tally read_all(mooncake_store_t s, const char *prefix, int count, int64_t *codes);

/* Every one of prefix/0..count-1 reads back with exactly its bytes. */
void assert_all_read(mooncake_store_t s, const char *prefix, int count);

/* The master's figures (asserted to be fetched). */
mc_cluster_master_stats master_stats(const mc_cluster *c);

/* Waits until exactly n restored segments still wait for their daemon; fails after
 * timeout_s. */
void await_pending(const mc_cluster *c, int64_t n, double timeout_s);

/* ---- a child process --------------------------------------------------------------- */

/* Forks with a pipe from the child to the parent: 0 in the child, which keeps the write
 * end fds[1], the child's pid in the parent, which keeps the read end fds[0]. */
pid_t fork_with_pipe(int fds[2]);

#endif /* MOONCAKE_TESTS_CLUSTER_TEST_UTIL_H_ */
