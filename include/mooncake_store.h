/*
 * mooncake_store.h — the public C ABI of Mooncake Store.
 *
 * An application links libmooncake_store.so, creates a handle, connects it to the
 * mooncaked daemon on its host, and then puts and gets immutable byte objects by key.
 * Object bytes travel through shared memory (the handle's pool); control requests travel
 * over a Unix socket. Python, Java and Rust bindings wrap exactly this header.
 *
 * Conventions (apply to every function below):
 *  - Every function is thread-safe on one handle; many threads may share a handle and keep
 *    many requests in flight at once.
 *  - No pointer argument is kept after a call returns.
 *  - A NULL handle or a NULL required argument returns MOONCAKE_STORE_INTERNAL_ERROR (-1).
 *  - Functions return MOONCAKE_STORE_OK (0) or a negative code from the table below;
 *    mooncake_store_strerror() names any code.
 *  - Every refusal says why: after a call on a handle fails, mooncake_store_errmsg() on the
 *    same thread says why in words, with the fix where there is one (which rule a key
 *    broke, where no daemon listens, which daemon flag refused a segment: the daemon's own
 *    reason when it refused). A failed connect, setup or mount also writes that one line
 *    to stderr; other calls refused for their arguments (-600, -1, -1012) write it at most
 *    once a second per handle, so that a hot loop cannot flood stderr.
 *  - Batch calls return 0 and fill results_out with one entry per key, each as the single
 *    call would have returned it. An empty batch (count 0) returns 0 and writes nothing.
 *  - Keys are 1 to 4096 bytes (any byte but NUL); values are 1 byte to 4 GiB.
 *
 * Configuration by environment, read when a handle connects:
 *  - MOONCAKE_SOCKET: the daemon's socket when connect() names none.
 *  - MOONCAKE_STORE_TIMEOUT_MS: the bound on every wait of a request (default 30000).
 *  - MOONCAKE_STORE_SPIN_US: how long the thread waiting for the daemon's reply polls the
 *    socket before it sleeps, in microseconds, 0..10000 (default 200; 0: never spin). It
 *    trades a little CPU for the wake-up latency of a sleeping thread; adaptive, so an
 *    idle handle spins ~never. Another value is logged and the default used.
 *  - MOONCAKE_STORE_HUGE_PAGES: 0 keeps the handle's pool off the host's reserved huge
 *    pages; otherwise the pool takes them when free (copies to and from it then run at
 *    memcpy speed: docs/operations.md "Huge pages") and falls back to ordinary memory.
 *  - MOONCAKE_CUDA_DRIVER: the CUDA driver library for device memory (default
 *    libcuda.so.1; "none": no driver), read once per process ("device memory" below).
 */
#ifndef MOONCAKE_STORE_H_
#define MOONCAKE_STORE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a function's signature or meaning changes, or the socket protocol
 * between this library and the daemon changes in a way the other side would misread. The
 * library and the daemon compare it at connect time; a mismatch is an error, never silent
 * garbage. 3: puts carry the SSD offload choice (mooncake_store_set_ssd_offload), and the
 * replica descriptor calls exist. 4: Mooncake's client API (docs/mooncake-api.md): a sized
 * put config carrying the soft-pin TTL, ranged reads, segment mounting and replica
 * clearing (mooncake_store_batch_replica_clear, mooncake_store_mount_segment and its
 * family); setup's master_server_addr is compared as an endpoint (a HELLO's master is sent
 * resolved). 5: Mooncake's object groups (mooncake_put_config_t's group_ids name them, and
 * puts carry them to the daemon), put sessions (mooncake_store_put_session_start and its
 * family), mooncake_store_disk_read_count, setup's local_hostname naming the client and the
 * memory it lends (get_hostname answers it; the socket's SET_CLIENT_NAME), copy and move
 * tasks (mooncake_store_create_copy_task and its family) and mooncake_store_mount_file_segment.
 * Applications built against an older header keep working with this library (no struct or
 * signature of an older version changed); the library and the daemon must be of the same
 * version. mooncake_store_errmsg and the reasons refusals carry on the socket came without a
 * bump: a library or daemon that predates them misreads nothing. */
#define MOONCAKE_STORE_ABI_VERSION 5

#define MOONCAKE_STORE_MAX_KEY_LEN 4096
#define MOONCAKE_STORE_MAX_VALUE_SIZE (4ULL << 30)
/* The longest pattern mooncake_store_remove_by_regex takes, in bytes. */
#define MOONCAKE_STORE_MAX_PATTERN_LEN 4096

/*
 * Result codes. One table for every layer (master, daemon, this library, every binding);
 * the numeric values are Mooncake's. X(NAME, value, description).
 */
#define MOONCAKE_STORE_ERROR_TABLE(X)                                                      \
  X(OK, 0, "success")                                                                      \
  X(INTERNAL_ERROR, -1, "internal error (NULL argument or unexpected exception)")          \
  X(BUFFER_OVERFLOW, -10, "buffer overflow")                                               \
  X(SEGMENT_NOT_FOUND, -101, "segment not found")                                          \
  X(SEGMENT_ALREADY_EXISTS, -102, "segment already exists")                                \
  X(CLIENT_NOT_FOUND, -103, "client (daemon) not known to the master")                     \
  X(NO_AVAILABLE_HANDLE, -200, "no space for even one replica")                            \
  X(INVALID_KEY, -400, "invalid key")                                                      \
  X(INVALID_PARAMS, -600, "invalid parameters")                                            \
  X(ILLEGAL_CLIENT, -601, "request from a client that does not own the operation")         \
  X(REPLICA_IS_NOT_READY, -703, "object is still being written")                           \
  X(OBJECT_NOT_FOUND, -704, "object not found")                                            \
  X(OBJECT_ALREADY_EXISTS, -705, "object already exists")                                  \
  X(OBJECT_HAS_LEASE, -706, "object has an active read lease")                             \
  X(LEASE_EXPIRED, -707, "lease expired before the read finished")                         \
  X(TRANSFER_FAIL, -800, "transfer failed")                                                \
  X(CHECKSUM_MISMATCH, -801, "checksum mismatch")                                          \
  X(RPC_FAIL, -900, "master or daemon unreachable")                                        \
  X(RPC_TIMEOUT, -901, "master or daemon too slow to answer")                              \
  X(UNAVAILABLE_IN_CURRENT_STATUS, -1010, "unavailable in the current status")             \
  X(UNAVAILABLE_IN_CURRENT_MODE, -1011, "unavailable in the current mode")                 \
  X(NOT_SUPPORTED, -1012, "not supported")                                                 \
  X(FILE_NOT_FOUND, -1100, "file not found")                                               \
  X(FILE_OPEN_FAIL, -1101, "file open failed")                                             \
  X(FILE_READ_FAIL, -1102, "file read failed")                                             \
  X(FILE_WRITE_FAIL, -1103, "file write failed")                                           \
  X(FILE_INVALID_BUFFER, -1104, "invalid file buffer")                                     \
  X(FILE_LOCK_FAIL, -1105, "file lock failed")                                             \
  X(FILE_INVALID_HANDLE, -1106, "invalid file handle")                                     \
  X(BUCKET_NOT_FOUND, -1200, "bucket not found")                                           \
  X(BUCKET_ALREADY_EXISTS, -1201, "bucket already exists")                                 \
  X(KEYS_EXCEED_BUCKET_LIMIT, -1202, "keys exceed the bucket limit")                       \
  X(KEYS_ULTRA_LIMIT, -1203, "too many keys")                                              \
  X(RESOURCE_LIMIT_EXCEEDED, -1300, "a daemon resource limit would be exceeded")           \
  X(TOO_MANY_CONNECTIONS, -1305, "too many connections from one peer")                     \
  X(UNAUTHENTICATED, -1400, "peer not admitted: no or a wrong proof of the cluster key")   \
  X(PERMISSION_DENIED, -1401, "caller not allowed here (its uid or gid, or its tenant)")   \
  X(QUOTA_EXCEEDED, -1402, "the tenant's memory quota would be exceeded")                  \
  X(SERIALIZE_UNSUPPORTED, -1500, "serialization unsupported")                             \
  X(SERIALIZE_FAIL, -1501, "serialization failed")                                         \
  X(DESERIALIZE_FAIL, -1502, "deserialization failed")                                     \
  X(PERSISTENT_FAIL, -1503, "persisting failed")                                           \
  X(NOT_LEADER, -1600, "this master is not the leader (a standby, or deposed): ask the leader")

#define MOONCAKE_STORE_ERROR_ENUM_(name, value, text) MOONCAKE_STORE_##name = (value),
enum mooncake_store_result { MOONCAKE_STORE_ERROR_TABLE(MOONCAKE_STORE_ERROR_ENUM_) };
#undef MOONCAKE_STORE_ERROR_ENUM_

/* Returns a static, human-readable name for any code ("unknown error code" otherwise). */
const char *mooncake_store_strerror(int code);

/* Parses a size as the daemon's flags read it and writes the bytes to *out: "4096", "16MB",
 * "16 MB", "4 GB", "1GiB", "1.5G", "512k". K/M/G/T, with or without a trailing B or iB,
 * are binary multiples (1 MB = 2^20 bytes), as in Mooncake's setup(); case and blanks are
 * ignored. A bare number is whole bytes: a fraction needs a unit ("1.5GB", not "1.5").
 * -600 for anything else ("", "1.5", "50%", "-1", "12XB", 2^64 bytes or more), and *out
 * is then left unchanged. Needs no handle. */
int mooncake_store_parse_size(const char *text, uint64_t *out);

/* An opaque handle: one connection to the local daemon plus one shared-memory pool. */
typedef void *mooncake_store_t;

/* Why the calling thread's last call on store failed (SQLite's sqlite3_errmsg): one line,
 * for a person, naming the problem and the fix where there is one -- "mooncaked is not
 * running at /run/mooncake/mooncaked.sock (connect: No such file or directory): start it
 * (systemctl start mooncaked) or point MOONCAKE_SOCKET / connect()'s socket_path at its
 * --socket", "key longer than 4096 bytes (5000)", or the daemon's own reason when the
 * daemon refused. Never NULL.
 *  - Per handle and per thread: a thread sees only its own calls, so threads sharing a
 *    handle never read each other's messages. Ask on the thread that made the call.
 *  - After a call that succeeded it is "". A batch call returns 0 even when entries fail:
 *    after one it names the first entry the library refused itself, before sending
 *    anything ("entry 3: key is empty"), else it is "".
 *  - A failure nothing more specific explains reads as the code's description and number
 *    ("object not found (-704)").
 *  - store NULL: the message of the thread's last call made with a NULL handle, or with
 *    none (mooncake_store_parse_size). Otherwise store must be a live handle.
 *  - The string is the library's: valid until this thread's next call with the same
 *    handle (or the thread's exit; a thread keeps messages for its last 64 failing
 *    handles). Calling errmsg changes nothing, nor do create, destroy, free, strerror and
 *    put_config_init. */
const char *mooncake_store_errmsg(mooncake_store_t store);

/* How a put is placed. A NULL config means one replica, no pins, no preference. */
typedef struct mooncake_replicate_config {
  size_t replica_num;              /* memory replicas on distinct segments (>= 1) */
  int with_soft_pin;               /* evicted only when nothing else qualifies */
  int with_hard_pin;               /* never evicted; removed only with force */
  const char **preferred_segments; /* "host:port" of daemons to try first, in order */
  size_t preferred_segments_count; /* at most 65536 names of at most 4096 bytes (else -600) */
} mooncake_replicate_config_t;

/* ---- lifecycle ------------------------------------------------------------------- */

/* Creates an unconnected handle; NULL only when out of memory. */
mooncake_store_t mooncake_store_create(void);

/* Closes the handle if still connected and frees it. The pool's memory is unmapped:
 * pointers from mooncake_store_alloc() are invalid afterwards. */
void mooncake_store_destroy(mooncake_store_t store);

/* Names the tenant whose keys the handle's calls name (docs/security.md, "Tenants"). Each
 * tenant has a key space of its own: no other tenant sees, reads, removes or matches (by
 * remove_by_regex or remove_all) its keys, and the same key in two tenants is two objects.
 * tenant_id is 1 to 64 characters of [A-Za-z0-9_.-], or "" (or NULL) to name none: the
 * handle is then in the first tenant the daemon's --tenant_uids lists for the process's uid,
 * else in the default tenant, which holds the keys of every handle that names none (and
 * everything stored before tenants existed). Call it before connect or setup; it holds for
 * every later connect of the handle. -600 for a malformed id, or while connected. connect
 * and setup then answer -1401 when the daemon's --tenant_uids keeps the tenant for other
 * uids, or confines the process's uid to tenants of its own (--tenant_roaming_uids lifts
 * that), and puts answer -1402 when the master's --tenant_quota for it would be exceeded. */
int mooncake_store_set_tenant(mooncake_store_t store, const char *tenant_id);

/* The native entry. Connects to the daemon's Unix socket (NULL: $MOONCAKE_SOCKET, else
 * /run/mooncake/mooncaked.sock) and creates a pool of local_buffer_size bytes shared with
 * it. -900 when no daemon answers, -600 on an ABI version mismatch, -1401 when the daemon
 * does not admit this process's uid and groups (its --allowed_uids, --allowed_gids) or
 * the tenant (set_tenant) is not this process's to claim (its --tenant_uids), and before
 * anything is sent when the socket is not one to trust (its directory may be written by
 * others, or another user bound it: docs/security.md, "Local clients"), -901 when
 * the daemon does not answer in time. Any failure logs one line on stderr saying why and
 * what to do, which mooncake_store_errmsg() returns too. */
int mooncake_store_connect(mooncake_store_t store, const char *socket_path,
                           uint64_t local_buffer_size);

/* The Mooncake-compatible entry: connects to the local daemon like connect() (same codes).
 * local_buffer_size sizes the pool (0: every copying put fails with -600);
 * global_segment_size > 0 asks the daemon to mount that much extra memory for this handle,
 * lent to the cluster: the master places objects there only once the daemons' own memory
 * is full (or when a put names this daemon and its own memory is full), and at close it is
 * drained (see close) and unmounted; -1300 (nothing mapped) when the daemon's host cannot
 * back that much now (MemAvailable less a reserve, or free huge pages) or it is over a cap
 * the daemon's operator set (--client_segment_budget, --client_segment_budget_per_client;
 * none by default); master_server_addr, if not NULL or empty, must name
 * the daemon's master ("host:port", or "etcd://host:port,..." when the daemon follows etcd's
 * leader) or the call fails with -600. It is compared as an endpoint: its host is resolved
 * here (getaddrinfo; its first IPv4 address, else its first IPv6 one), so "localhost:P" and
 * "127.0.0.1:P" name one master; malformed text, or a host that does not resolve, is -600
 * and logged. local_hostname (ABI 5), if not NULL or "", names the client as Mooncake's
 * setup names it: "host:port" as given, or a host without a port with a free port of this
 * host appended (one of MC_STORE_CLIENT_MIN_PORT..MC_STORE_CLIENT_MAX_PORT, 12300..14300 by
 * default, held -- bound, never listened on -- until close). get_hostname answers the name,
 * and the memory the handle lends (global_segment_size, the mount_segment family) carries
 * it: preferred segments, copy and move targets and batch_replica_clear name that memory by
 * it; a handle that lends none is its daemon for placement. A name that another process's
 * (or another daemon's) lent memory carries, or that is a daemon's own, is -102 (a picked
 * port is tried again with another); one with a blank, over 255 bytes or with a port
 * outside 1..65535 is -600. metadata_server, protocol and device_name are accepted for
 * compatibility: what they configure in Mooncake (the transfer metadata service, the
 * transports) is the daemon's here. */
int mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
                         const char *metadata_server, uint64_t global_segment_size,
                         uint64_t local_buffer_size, const char *protocol,
                         const char *device_name, const char *master_server_addr);

/* Disconnects: unfinished puts are revoked; the extra segment of setup() is drained first —
 * every object living only in it (other handles' puts too) is moved to another segment
 * where there is room, and close returns once that is done (waiting at most the handle's
 * timeout, MOONCAKE_STORE_TIMEOUT_MS; the daemon finishes it either way) — then unmounted.
 * Objects no segment had room for are dropped with it, and the daemon logs how many. A
 * process that dies without close is drained the same way. Safe to call twice. */
int mooncake_store_close(mooncake_store_t store);

/* 0 connected and the daemon reaches its master, 1 not connected (or daemon gone),
 * 2 the daemon is up but cannot reach the master. */
int mooncake_store_health_check(mooncake_store_t store);

/* Writes the client's name (setup's local_hostname, with its port: see setup) or, for a
 * handle that named none (connect, or setup with local_hostname ""), the daemon's transfer
 * endpoint "host:port" (NUL-terminated) into buf_out. -600 when buf_len is too small. */
int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out, size_t buf_len);

/* ---- shared memory ----------------------------------------------------------------- */

/* Allocates size bytes from the handle's pool. The daemon reads and writes this memory
 * directly, so puts from and gets into it cost one copy. NULL when the pool is full. */
void *mooncake_store_alloc(mooncake_store_t store, size_t size);

/* Returns a pointer from mooncake_store_alloc() to the pool. NULL is ignored. */
void mooncake_store_free(mooncake_store_t store, void *ptr);

/* Declares caller memory that will be used with put_from/get_into. Memory outside the
 * pool is staged through the pool in chunks; registering it is accepted for Mooncake
 * compatibility and lets the library validate ranges. */
int mooncake_store_register_buffer(mooncake_store_t store, void *buffer, size_t size);
int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer);

/* ---- put: never overwrites; an existing complete key returns 0 and keeps its value -- */

/* Copies size bytes from value into the store under key. -200 when the cluster has no
 * space for even one replica, after eviction and the daemon's --put_no_space_wait (1 s)
 * of asking again (back-pressure: retry later). -800 when a replica on another
 * daemon could not be written (that daemon died or stalled): nothing was stored. -1503
 * when the master cannot persist the put (its disk is full or failing, with its log on):
 * the put may or may not be kept; no new put is taken until the disk takes the log.
 * -1402 when size x replica_num more bytes would take the handle's tenant over its quota
 * (the master's --tenant_quota): nothing was stored; remove some of its keys first. */
int mooncake_store_put(mooncake_store_t store, const char *key, const void *value,
                       size_t size, const mooncake_replicate_config_t *config);

/* Like put, from a buffer (zero-copy when it lies in the handle's pool). */
int mooncake_store_put_from(mooncake_store_t store, const char *key, void *buffer,
                            size_t size, const mooncake_replicate_config_t *config);

/* count puts in one request; results_out[i] as put_from would return it. */
int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys, void **buffers,
                                  const size_t *sizes, size_t count,
                                  const mooncake_replicate_config_t *config, int *results_out);

/* Like put_from, but replaces an existing value. Readers see the old or the new value,
 * never a mix. */
int mooncake_store_upsert_from(mooncake_store_t store, const char *key, void *buffer,
                               size_t size, const mooncake_replicate_config_t *config);

/* ---- get: bytes read (> 0) or a negative code ---------------------------------------- */

/* Reads the value of key into buffer. -704 on a miss, -600 when size is smaller than the
 * value (see get_size), -703 while the object is still being written. Replicas are tried
 * local first, then on other daemons; -800 when none could be read, -801 when the object
 * carries a checksum (daemon flag --checksum) and no replica matched it. */
int64_t mooncake_store_get_into(mooncake_store_t store, const char *key, void *buffer,
                                size_t size);

/* count gets in one request; results_out[i] as get_into would return it. */
int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys, void **buffers,
                                  const size_t *sizes, size_t count, int64_t *results_out);

/* ---- query --------------------------------------------------------------------------- */

/* 1 present and readable, 0 missing or still being written, < 0 error. A hit takes no
 * read lease (a remove may follow at once); it counts as a use in eviction's order, once
 * until the next read. */
int mooncake_store_is_exist(mooncake_store_t store, const char *key);
int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys, size_t count,
                                  int *results_out);

/* The value's size in bytes, -704 on a miss. */
int64_t mooncake_store_get_size(mooncake_store_t store, const char *key);

/* ---- replicas and the SSD tier (docs/ssd.md) ------------------------------------------- */

/* The kinds of replica: a copy in a daemon's memory, or on a daemon's SSD tier (the
 * daemon's --ssd_path). Reads prefer local memory, then remote memory, local disk, remote
 * disk. Without an SSD tier anywhere every replica is a memory one. */
#define MOONCAKE_REPLICA_MEMORY 0
#define MOONCAKE_REPLICA_DISK 1

/* Replica states. Only complete replicas are listed, so a descriptor's status is always
 * MOONCAKE_REPLICA_COMPLETE today; the others are named for completeness. */
#define MOONCAKE_REPLICA_PROCESSING 0
#define MOONCAKE_REPLICA_COMPLETE 1
#define MOONCAKE_REPLICA_FAILED 2
#define MOONCAKE_REPLICA_REMOVED 3

/* Bytes of a descriptor's location, its NUL included: room for any DNS name and port. */
#define MOONCAKE_STORE_LOCATION_SIZE 264

/* One replica of an object. */
typedef struct mooncake_replica_desc {
  int kind;       /* MOONCAKE_REPLICA_MEMORY or MOONCAKE_REPLICA_DISK */
  int status;     /* MOONCAKE_REPLICA_COMPLETE */
  uint64_t size;  /* bytes of the value this replica holds */
  /* "host:port" (NUL-terminated) of the daemon holding it: its transfer endpoint, as
   * mooncake_store_get_hostname() reports it on that host */
  char location[MOONCAKE_STORE_LOCATION_SIZE];
} mooncake_replica_desc_t;

/* Lists key's replicas: writes up to capacity descriptors to descs_out and their number to
 * *count_out, and returns 0. When the object has more than capacity replicas nothing is
 * written, *count_out is set to the number needed, and -600 is returned (capacity 0 with
 * descs_out NULL asks just that). -704 on a miss (*count_out 0), -703 while the object is
 * still being written, -600 for a bad key. Reads no bytes; the master grants the same read
 * lease a get takes (its --default_kv_lease_ttl: a remove without force meanwhile answers
 * -706), and the object counts as used in eviction's order. Which replica a get would use
 * follows from the kinds and locations: local memory first, then remote memory, local
 * disk, remote disk. A location longer than MOONCAKE_STORE_LOCATION_SIZE - 1 bytes (no
 * valid host name is) makes the call fail with -600. */
int mooncake_store_get_replica_desc(mooncake_store_t store, const char *key,
                                    mooncake_replica_desc_t *descs_out, size_t capacity,
                                    size_t *count_out);

/* get_replica_desc for count keys in one request (or a few: the library splits large
 * batches). Key i's replicas go to descs_out[i * capacity_per_key ...], at most
 * capacity_per_key of them; counts_out[i] and results_out[i] are what *count_out and the
 * return value of get_replica_desc with that capacity would be. Returns 0 once every key has
 * its result, or -1 for a NULL argument (descs_out may be NULL when capacity_per_key is 0). */
int mooncake_store_batch_get_replica_desc(mooncake_store_t store, const char **keys,
                                          size_t count, mooncake_replica_desc_t *descs_out,
                                          size_t capacity_per_key, size_t *counts_out,
                                          int *results_out);

/* Whether the handle's puts ask for their values to be offloaded to the SSD tier of the
 * daemon holding their memory replica. */
#define MOONCAKE_SSD_OFFLOAD_DEFAULT 0 /* as the master's --enable_offload says (default) */
#define MOONCAKE_SSD_OFFLOAD_ON 1      /* offload every put's value */
#define MOONCAKE_SSD_OFFLOAD_OFF 2     /* offload none at put time */

/* Sets the offload choice of every later put, batch put and upsert of the handle (also
 * across reconnects); -600 for any other mode. May be called at any time. A put asking for
 * offload is stored (and answered) as any other: the copy to SSD follows in the background,
 * on a daemon that has an SSD tier (elsewhere the choice has no effect); get_replica_desc
 * shows the disk replica once it exists. Offload on eviction (the master's
 * --offload_on_evict) does not depend on this choice. */
int mooncake_store_set_ssd_offload(mooncake_store_t store, int mode);

/* ---- remove -------------------------------------------------------------------------- */

/* Removes key. Without force: -706 while a read lease is active, and hard-pinned objects
 * are kept. -703 for an object still being written, even with force. */
int mooncake_store_remove(mooncake_store_t store, const char *key, int force);

/* count removals in one request; results_out[i] as remove would return it for keys[i].
 * Returns 0 once every entry has its result, or -1 for a NULL argument. */
int mooncake_store_batch_remove(mooncake_store_t store, const char **keys, size_t count,
                                int force, int *results_out);

/* Removes every key of the handle's tenant in which the RE2 regular expression finds a
 * match (RE2 syntax: no backreferences or lookaround; keys and pattern are taken byte for
 * byte, as Latin-1, and the pattern sees keys as the tenant names them); returns how many
 * were removed (>= 0) or a negative code (-600 for a malformed pattern, one longer than
 * MOONCAKE_STORE_MAX_PATTERN_LEN, or one too large once compiled). RE2 runs in time linear
 * in the key, so no pattern can make the master hang. */
int64_t mooncake_store_remove_by_regex(mooncake_store_t store, const char *pattern, int force);

/* Removes every complete object of the handle's tenant (without force, leased and
 * hard-pinned ones are kept); returns how many were removed. */
int64_t mooncake_store_remove_all(mooncake_store_t store, int force);

/* ---- put configuration, version 4 (docs/mooncake-api.md) ------------------------------ */

/* Mooncake's ReplicateConfig, whole: a sized struct, so that a later version may add fields
 * at its end and a caller built against this one keeps working. Fill it with
 * mooncake_store_put_config_init() (or set struct_size = sizeof(mooncake_put_config_t) and
 * every field as documented), then change what you need. The library reads only the first
 * struct_size bytes and takes its defaults for fields beyond them; a struct_size smaller than
 * this first version's (MOONCAKE_PUT_CONFIG_SIZE_V1) or larger than
 * MOONCAKE_PUT_CONFIG_MAX_SIZE is -600, and bytes past the fields this library knows must be
 * zero (a later version's field set: -1012, a feature this library lacks). A NULL config
 * means the defaults. Semantics follow Mooncake's (docs/mooncake-api.md, "put-config"). */

/* soft_pin_action: what the put does to the object's soft pin. */
#define MOONCAKE_SOFT_PIN_PRESERVE 0 /* upsert keeps the old value's pin, until its deadline;
                                        a new object gets none (default) */
#define MOONCAKE_SOFT_PIN_ENABLE 1   /* pinned for soft_pin_ttl_ms (or the master's
                                        --default_kv_soft_pin_ttl) from the publication */
#define MOONCAKE_SOFT_PIN_DISABLE 2  /* no soft pin (an upsert removes the old one) */

typedef struct mooncake_put_config {
  size_t struct_size;       /* bytes of this struct the caller knows: sizeof() at its build */
  size_t replica_num;       /* memory replicas on distinct segments: 1 to 64 (default 1) */
  /* Replicas on NVMe-oF segments and on a DFS (3FS) tier: features this store lacks. Must
   * be 0 (default); anything else is -1012. */
  size_t nof_replica_num;
  size_t dfs_replica_num;
  /* With soft_pin_action ENABLE and has_soft_pin_ttl: the pin's TTL in ms. The deadline is
   * fixed at the put's publication (publication + TTL) and reads do not move it; 0 unpins,
   * more than the master's --max_kv_soft_pin_ttl is -600. has_soft_pin_ttl with PRESERVE or
   * DISABLE is -600 (Mooncake's rules). */
  uint64_t soft_pin_ttl_ms;
  int32_t soft_pin_action;  /* MOONCAKE_SOFT_PIN_* (else -600) */
  int32_t has_soft_pin_ttl; /* 0: ENABLE uses the master's default TTL */
  int32_t with_hard_pin;    /* never evicted; removed only with force. Sticky: an upsert
                               keeps an existing hard pin */
  /* Place the first replica on the caller's own daemon (its memory, then memory lent at
   * it), as the master's --allocation_strategy local_first does for every put; further
   * replicas go to other daemons. preferred segments still come first. */
  int32_t prefer_alloc_in_same_node;
  const char **preferred_segments; /* "host:port" of daemons to try first, in order */
  size_t preferred_segments_count; /* at most 65536 names of at most 4096 bytes (else -600) */
  /* Mooncake's older single preferred segment: used when preferred_segments_count is 0.
   * NULL or "": none. */
  const char *preferred_segment;
  /* Preferred NVMe-oF segments (a feature this store lacks): a count > 0 is -1012. */
  const char **preferred_nof_segments;
  size_t preferred_nof_segments_count;
  /* Mooncake's writer host id, naming which node "same node" is. The node here is always
   * the caller's daemon: NULL or "" only (else -1012). */
  const char *host_id;
  /* Mooncake's object groups (docs/mooncake-api.md, "groups"): NULL (count 0) names none;
   * else one group id per key of the call -- 1 for the single puts, count for the batch
   * ones (another count is -600) -- "" for a key in no group. A group id follows a key's
   * rules (at most 4096 bytes, else -600) and names a group of the handle's tenant. Objects
   * of one group are leased, aged and evicted together: a read of one renews every
   * member's read lease, and an eviction that takes one takes the others it may take. An
   * object stays in the group it was put in: an upsert naming another (or "" for a grouped
   * object) is -600; one naming none keeps it. A count > 0 with group_ids NULL is -1. (ABI
   * 4 refused any non-empty id with -1012.) */
  const char **group_ids;
  size_t group_ids_count;
  /* Mooncake's ObjectDataType, 0 (UNKNOWN, default) to 9 (GENERAL), else -600: validated
   * and accepted; the store keeps no per-type accounting. */
  int32_t data_type;
} mooncake_put_config_t;

/* The size of the first version of mooncake_put_config_t (ABI 4): the smallest accepted. */
#define MOONCAKE_PUT_CONFIG_SIZE_V1 (offsetof(mooncake_put_config_t, data_type) + sizeof(int32_t))
/* The largest struct_size accepted: anything above is taken for garbage. */
#define MOONCAKE_PUT_CONFIG_MAX_SIZE 4096

/* Fills *config with the defaults (one replica, soft pin PRESERVE, no hard pin, no
 * preference) and struct_size = sizeof(mooncake_put_config_t). -1 for NULL. */
int mooncake_store_put_config_init(mooncake_put_config_t *config);

/* put, put_from, upsert_from and batch_put_from with a mooncake_put_config_t: the same
 * arguments, codes and thread rules as the calls they extend, plus the config's codes
 * (-600 for a bad value or struct_size, -1012 for a feature this store lacks); an invalid
 * config stores nothing (for a batch: every entry gets the config's code). */
int mooncake_store_put_ex(mooncake_store_t store, const char *key, const void *value,
                          size_t size, const mooncake_put_config_t *config);
int mooncake_store_put_from_ex(mooncake_store_t store, const char *key, void *buffer,
                               size_t size, const mooncake_put_config_t *config);
int mooncake_store_upsert_from_ex(mooncake_store_t store, const char *key, void *buffer,
                                  size_t size, const mooncake_put_config_t *config);
int mooncake_store_batch_put_from_ex(mooncake_store_t store, const char **keys, void **buffers,
                                     const size_t *sizes, size_t count,
                                     const mooncake_put_config_t *config, int *results_out);

/* count upserts in one request: results_out[i] as upsert_from_ex would return it for
 * keys[i] (each entry replaces its key's value on its own: readers see the old or the new
 * value of each key, never a mix). A key named twice in one batch is upserted twice, in
 * order. Returns 0 once every entry has its result, or -1 for a NULL argument. */
int mooncake_store_batch_upsert_from(mooncake_store_t store, const char **keys, void **buffers,
                                     const size_t *sizes, size_t count,
                                     const mooncake_put_config_t *config, int *results_out);

/* ---- ranged reads (docs/mooncake-api.md) --------------------------------------------- */

/* One fragment of a ranged read: the length bytes at src_offset in the object go to
 * dst_offset in the destination buffer. */
typedef struct mooncake_range {
  uint64_t src_offset;
  uint64_t length;
  uint64_t dst_offset;
} mooncake_range_t;

/* Reads only the given fragments of key's value into buffer (buffer_size bytes): the daemon
 * copies just those bytes, from local memory, from another daemon's memory over the
 * transfer port, or from an SSD replica (which reads just the 256 KiB blocks the fragments
 * touch). results_out[k] is fragment k's length, or a negative code: -600 when it runs past
 * the value or past buffer_size (nothing is read for it), -704 on a miss, -703 while the
 * object is being written, -707 when the read overran the lease, -800 when no replica could
 * be read, -801 when the object carries a checksum and a fragment that is the whole value,
 * or fragments that cover it exactly once, did not match (other fragments cannot be
 * checked against it: docs/mooncake-api.md). A fragment of length 0 inside the value reads
 * nothing and answers 0. Fragments may overlap in the value; their destinations should
 * not. Returns the sum of the lengths when every fragment succeeded, else the code of the
 * first one that failed; 0 for range_count 0 (ranges and results_out may then be NULL);
 * -600 for a bad key (every fragment -600), or when buffer lies in a registered range
 * (register_buffer) but buffer_size runs past its end. Zero copy for a buffer in the
 * handle's pool; other memory is staged through the pool. Any number of fragments. */
int64_t mooncake_store_get_ranges(mooncake_store_t store, const char *key, void *buffer,
                                  size_t buffer_size, const mooncake_range_t *ranges,
                                  size_t range_count, int64_t *results_out);

/* One key of mooncake_store_batch_get_ranges: get_ranges' arguments. */
typedef struct mooncake_ranged_get {
  const char *key;
  void *buffer;
  size_t buffer_size;
  const mooncake_range_t *ranges;
  size_t range_count;
  int64_t *results_out; /* range_count entries: one per fragment */
} mooncake_ranged_get_t;

/* get_ranges for count keys in as few requests as fit (one for up to 16384 fragments):
 * gets[i].results_out as get_ranges fills it, results_out[i] what it returns. The same key
 * may appear several times (its replicas are asked for once per request). Returns 0 once
 * every get has its results, -1 for a NULL argument. */
int mooncake_store_batch_get_ranges(mooncake_store_t store, const mooncake_ranged_get_t *gets,
                                    size_t count, int64_t *results_out);

/* ---- segments and replica clearing (docs/mooncake-api.md) ---------------------------- */

/* Clears the replicas of count keys whose read lease has run out (Mooncake's
 * batch_replica_clear): every replica when segment_name is NULL or "" (the object goes, as
 * a remove without force would take it), else only those held by the daemon of that name
 * (the "host:port" of its transfer endpoint, as get_hostname and replica descriptors'
 * location say it: its memory and its SSD tier), the object going when none is left.
 * results_out[i]: 0 cleared; -704 missing; -703 still being written; -706 a read lease
 * runs (a get, get_replica_desc: skipped, as Mooncake skips it); -1010 hard-pinned; -101
 * no replica on segment_name; -600 a bad key. Returns 0 once every key has its result, -600
 * (and writes nothing) for a segment_name of MOONCAKE_STORE_LOCATION_SIZE bytes or more,
 * -1 for a NULL argument. Any handle of the key's tenant may clear it, as with remove. */
int mooncake_store_batch_replica_clear(mooncake_store_t store, const char **keys, size_t count,
                                       const char *segment_name, int *results_out);

/* Segments an application lends to the cluster (Mooncake's mount_segment family). The
 * daemon is what Mooncake calls the real client: lent memory must be memory the daemon
 * shares, so it is either a range of this handle's pool (mount_segment) or memory the
 * daemon maps itself (allocate_and_mount_segment). A segment belongs to the connection:
 * unmount_segment, close, or the end of the process (a crash too) drains it -- every object
 * living only there is moved to another segment where there is room -- and unmounts it; a
 * lost connection (the daemon restarted) loses it, and its id then answers -101. The
 * master places objects in lent segments last, as in setup()'s global segment. */

/* Lends [buffer, buffer + size) of the handle's pool (memory from mooncake_store_alloc:
 * keep it allocated, and do not write it, while the segment is mounted -- the cluster's
 * objects live there) and writes the new segment's id to *segment_id_out. -600 when the
 * range is empty or not wholly inside the pool (memory the daemon does not share cannot
 * be lent; logged), -1401 when the daemon has tenants (--tenant_uids: the lender could
 * read other tenants' objects in its pool; allocate_and_mount_segment lends daemon memory
 * instead). */
int mooncake_store_mount_segment(mooncake_store_t store, void *buffer, uint64_t size,
                                 uint64_t *segment_id_out);

/* Has the daemon map size bytes and lend them (as setup's global_segment_size does, under
 * the same rule: -1300 when the daemon's host cannot back them now or over the daemon's
 * --client_segment_budget or per-client cap, -200 when the memory cannot be had after
 * all); writes the segment's id and its size (may be NULL) in bytes. -600 for size 0. */
int mooncake_store_allocate_and_mount_segment(mooncake_store_t store, uint64_t size,
                                              uint64_t *segment_id_out,
                                              uint64_t *allocated_size_out);

/* Drains and unmounts one of the handle's segments (from either call above), returning
 * once done; *moved_out and *dropped_out (each may be NULL) count the objects moved to
 * other segments and those no segment had room for, dropped with it. -101 when segment_id
 * is not one of this connection's segments. */
int mooncake_store_unmount_segment(mooncake_store_t store, uint64_t segment_id,
                                   uint64_t *moved_out, uint64_t *dropped_out);

/* Mooncake's unmount_local_disk_segment: 0 when the daemon has no SSD tier (nothing to
 * unmount), -1012 when it has one: the tier is the daemon's (--ssd_path), shared by every
 * application on the host, not this handle's to take away. */
int mooncake_store_unmount_local_disk_segment(mooncake_store_t store);

/* Lends [offset, offset + size) of the file open as fd (Mooncake's mount_segment of a path;
 * ABI 5): the descriptor goes to the daemon, which maps the range (MAP_SHARED: the file's
 * pages hold the cluster's objects) and keeps its own reference; fd stays the caller's.
 * The file must not shrink while the daemon maps it (that would crash the daemon): a
 * device (DAX), or a regular file sealed against shrinking -- a memfd the daemon seals
 * itself when it allows sealing (memfd_create with MFD_ALLOW_SEALING); any other regular
 * file (tmpfs, hugetlbfs, disk) is -1012. -600 for an empty range, one past a regular
 * file's end, or an offset not a multiple of the page size; -1401 when the daemon has
 * tenants (as mount_segment); -102 as for setup's name. Unmounted as the calls above. */
int mooncake_store_mount_file_segment(mooncake_store_t store, int fd, uint64_t offset,
                                      uint64_t size, uint64_t *segment_id_out);

/* ---- device memory (docs/libmc.md, "Device memory") ---------------------------------- */

/* Every buffer of the data calls (put, put_from, upsert_from, get_into, get_ranges, their
 * batch and _ex forms, register_buffer) may be host memory or CUDA device memory
 * (cudaMalloc, cuMemAlloc, cuMemMap, managed memory: a CUDA tensor's data_ptr()). The library
 * asks the CUDA driver where a buffer lives and moves device bytes through its pool with the
 * driver's copies, never dereferencing them. The driver is loaded at run time: libcuda.so.1,
 * or the library the environment variable MOONCAKE_CUDA_DRIVER names ("none": no driver);
 * the library never initializes CUDA itself (an application that did not has no device
 * memory). A buffer that is neither host memory this process may access nor device memory
 * the driver knows is refused with -600, never dereferenced, and mooncake_store_errmsg()
 * says why ("buffer at 0x7f2a... is not host memory and no CUDA driver is loaded: ..."); so
 * is a get into read-only memory. Register device memory (register_buffer) to skip the
 * per-call question to the driver. Finish writing device memory (synchronize the stream that
 * wrote it) before a put of it; a get's bytes are in device memory when it returns. A failed
 * driver copy is -800: a put stores nothing, a get's buffer may hold part of the value. */

/* What mooncake_store_memory_kind answers. */
#define MOONCAKE_MEMORY_HOST 0 /* memory of this process: copied with memcpy */
#define MOONCAKE_MEMORY_CUDA 1 /* CUDA device memory: copied by the CUDA driver */

/* Where buffer lives, as the data calls see it: MOONCAKE_MEMORY_HOST, MOONCAKE_MEMORY_CUDA
 * (inside a registered range: what register_buffer found), or -600 when it is neither
 * (errmsg says why); -1 for NULL. Needs no connection. */
int mooncake_store_memory_kind(mooncake_store_t store, const void *buffer);

/* Copies size bytes from src to dst, each host or CUDA device memory (as memory_kind says):
 * memcpy between host memory, else the CUDA driver's copy, finished when the call returns.
 * For bindings that gather a value's parts into one buffer before a put, or scatter one
 * after a get. 0 (also for size 0); -600 when a buffer is neither kind or dst is read-only
 * memory, or when either runs past the end of a registered range it starts in; -800 when
 * the driver's copy fails; -1 for NULL. Needs no connection. */
int mooncake_store_copy_memory(mooncake_store_t store, void *dst, const void *src, size_t size);
/* ---- tensors (docs/mooncake-api.md, "Tensors") --------------------------------------- */

/* Mooncake's tensor objects, so that a tensor stored by Mooncake's client is read by every
 * binding here and the other way round. A tensor object is one value: a header of
 * MOONCAKE_TENSOR_HEADER_SIZE bytes, then the elements (row-major, little-endian, packed).
 * A tensor split for parallelism is stored as one object per shard, under keys derived
 * from the tensor's key (mooncake_store_tensor_key), with a manifest object saying how the
 * whole tensor was split. These functions encode and decode both layouts and derive the
 * keys; they need no handle (errmsg(NULL) says why one failed: -1 for a NULL argument,
 * -600 for anything the layout forbids, naming the field). The byte layouts, field by
 * field: docs/mooncake-api.md, "Tensors". Storing the bytes is an ordinary put. */

#define MOONCAKE_TENSOR_HEADER_SIZE 304
#define MOONCAKE_TENSOR_MANIFEST_SIZE 96
#define MOONCAKE_TENSOR_MAX_DIMS 8
#define MOONCAKE_TENSOR_MAX_AXES 4

/* Element types (Mooncake's TensorDtype codes). */
#define MOONCAKE_DTYPE_FLOAT32 0
#define MOONCAKE_DTYPE_FLOAT64 1
#define MOONCAKE_DTYPE_INT8 2
#define MOONCAKE_DTYPE_UINT8 3
#define MOONCAKE_DTYPE_INT16 4
#define MOONCAKE_DTYPE_UINT16 5
#define MOONCAKE_DTYPE_INT32 6
#define MOONCAKE_DTYPE_UINT32 7
#define MOONCAKE_DTYPE_INT64 8
#define MOONCAKE_DTYPE_UINT64 9
#define MOONCAKE_DTYPE_BOOL 10 /* one byte, 0 or 1 */
#define MOONCAKE_DTYPE_FLOAT16 11
#define MOONCAKE_DTYPE_BFLOAT16 12
#define MOONCAKE_DTYPE_FLOAT8_E4M3 13
#define MOONCAKE_DTYPE_FLOAT8_E5M2 14
#define MOONCAKE_DTYPE_COUNT 15

/* What an object holds: the whole tensor, or one shard of it. */
#define MOONCAKE_TENSOR_FULL 0
#define MOONCAKE_TENSOR_SHARD 1

/* The kinds of parallelism a shard is split by (Mooncake's LayoutAxisKind). */
#define MOONCAKE_TENSOR_AXIS_DP 0 /* data parallel: a replica, no split */
#define MOONCAKE_TENSOR_AXIS_TP 1 /* tensor parallel: split along split_dim */
#define MOONCAKE_TENSOR_AXIS_EP 2 /* expert parallel: one expert's tensor */
#define MOONCAKE_TENSOR_AXIS_PP 3 /* pipeline parallel: one stage's tensor */

/* One axis of a shard: its rank among size shards along the axis. */
typedef struct mooncake_tensor_axis {
  int32_t kind;      /* MOONCAKE_TENSOR_AXIS_* */
  int32_t rank;      /* 0 <= rank < size */
  int32_t size;      /* > 0 */
  int32_t split_dim; /* the dimension the axis splits (TP), -1 for none */
  int32_t expert_id; /* EP's expert, -1 for none */
  int32_t stage_id;  /* PP's stage, -1 for none */
} mooncake_tensor_axis_t;

/* A tensor object's header, decoded. */
typedef struct mooncake_tensor_header {
  int32_t dtype;  /* MOONCAKE_DTYPE_* */
  int32_t ndim;   /* 0 to MOONCAKE_TENSOR_MAX_DIMS */
  int32_t layout; /* MOONCAKE_TENSOR_FULL or MOONCAKE_TENSOR_SHARD */
  /* The whole tensor's shape, and the shape of the elements this object holds (the same
   * for a FULL object). Dimensions past ndim are ignored here and stored as -1. */
  int64_t global_shape[MOONCAKE_TENSOR_MAX_DIMS];
  int64_t local_shape[MOONCAKE_TENSOR_MAX_DIMS];
  uint32_t axis_count; /* 0 to MOONCAKE_TENSOR_MAX_AXES: the axes a SHARD is split by */
  mooncake_tensor_axis_t axes[MOONCAKE_TENSOR_MAX_AXES];
  uint64_t data_offset; /* where the elements start: MOONCAKE_TENSOR_HEADER_SIZE */
  uint64_t data_bytes;  /* bytes of elements: local_shape's product x the element size */
} mooncake_tensor_header_t;

/* The bytes of one element of dtype; 0 for a code that names none. */
size_t mooncake_store_tensor_dtype_size(int32_t dtype);

/* Fills *header for a FULL tensor of ndim dimensions of the given shape: both shapes set,
 * no axes, data_offset MOONCAKE_TENSOR_HEADER_SIZE, data_bytes computed. -600 for an unknown
 * dtype, ndim out of range, a negative dimension, or a size that overflows 64 bits. */
int mooncake_store_tensor_header_init(mooncake_tensor_header_t *header, int32_t dtype,
                                      int32_t ndim, const int64_t *shape);

/* Writes *header's MOONCAKE_TENSOR_HEADER_SIZE bytes into out (out_size bytes at least).
 * The header must be one decode accepts (below; for a header of an object of
 * data_offset + data_bytes bytes), else -600 naming the field: what is encoded always
 * decodes. A SHARD's axes are written in their order; an axis's extent on the wire (its
 * dimension's length in local_shape) is derived, as Mooncake derives it. */
int mooncake_store_tensor_header_encode(const mooncake_tensor_header_t *header, void *out,
                                        size_t out_size);

/* Reads the header at buf (buf_size bytes, at least MOONCAKE_TENSOR_HEADER_SIZE) of an
 * object of object_size bytes (0 when only its first bytes are at hand: the header's own
 * data_offset + data_bytes is taken). -600, naming the field, unless Mooncake's reader
 * would accept it too: magic, version and header size; a known dtype; ndim, axis count
 * and layout in range; dimensions >= 0 (and -1 past ndim); data_offset at least the
 * header size; data_offset + data_bytes == object_size; data_bytes the elements of
 * local_shape; each axis of a known kind (or Mooncake's reserved kind 4) with 0 <= rank <
 * size and split_dim -1 or a dimension. */
int mooncake_store_tensor_header_decode(const void *buf, size_t buf_size, uint64_t object_size,
                                        mooncake_tensor_header_t *out);

/* How a split tensor was written: its whole shape and element type, the dimension split
 * and into how many shards. Stored under the tensor key's MOONCAKE_TENSOR_KEY_*_MANIFEST. */
typedef struct mooncake_tensor_manifest {
  int32_t dtype;
  int32_t ndim;
  int32_t split_dim;   /* 0 <= split_dim < ndim */
  int32_t shard_count; /* > 0 */
  int64_t global_shape[MOONCAKE_TENSOR_MAX_DIMS];
} mooncake_tensor_manifest_t;

/* Writes / reads a manifest's MOONCAKE_TENSOR_MANIFEST_SIZE bytes; -600 naming the field
 * for one out of range (an unknown dtype is accepted, as Mooncake's reader does). */
int mooncake_store_tensor_manifest_encode(const mooncake_tensor_manifest_t *manifest, void *out,
                                          size_t out_size);
int mooncake_store_tensor_manifest_decode(const void *buf, size_t buf_size,
                                          mooncake_tensor_manifest_t *out);

/* Mooncake's uniform split: shard rank of count along a dimension of dim_size elements is
 * [*start, *start + *extent). -600 unless count > 0, 0 <= rank < count, dim_size >= 0 and
 * count divides dim_size (only uniform splits are stored). */
int mooncake_store_tensor_shard_range(int64_t dim_size, int32_t rank, int32_t count,
                                      int64_t *start, int64_t *extent);

/* The keys of a split tensor's objects, derived from its key base (kind below). */
#define MOONCAKE_TENSOR_KEY_SHARD 0 /* the shard the axes name: a lone TP axis gives
                                       "<base>_tp_<rank>", else every axis in the order DP,
                                       TP, EP, PP: "<base>__dp_0of2__tp_1of4_sd1"
                                       ("_eid<id>", "_sid<id>" for set ids) */
#define MOONCAKE_TENSOR_KEY_WRITER_SHARD 1 /* a writer partition's shard, one TP axis:
                                              "<base>__writer_<rank>of<size>_sd<dim>" */
#define MOONCAKE_TENSOR_KEY_WRITER_MANIFEST 2      /* "<base>__writer_manifest" */
#define MOONCAKE_TENSOR_KEY_PARALLELISM_MANIFEST 3 /* "<base>__parallelism_manifest" */

/* Writes the key of kind for base (NUL-terminated) into out, out_size bytes, and returns
 * its length. axes: 1 to MOONCAKE_TENSOR_MAX_AXES of distinct kinds for the shard kinds
 * (ignored, and may be NULL, for the manifests). -600 for an axis of an unknown kind, two
 * axes of one kind, a rank out of [0, size), or when out is too small (nothing written
 * then but, when out_size > 0, an empty string). The key's own rules (its length) are the
 * put's to check. */
int64_t mooncake_store_tensor_key(int kind, const char *base, const mooncake_tensor_axis_t *axes,
                                  size_t axis_count, char *out, size_t out_size);

/* ---- put sessions, version 5 (docs/mooncake-api.md, "sessions") ---------------------- */

/* Mooncake's put sessions (batch_put_session_start and its family): a put is reserved
 * whole without its bytes, written by ranges at any offsets of the value, in any order and
 * over any number of calls, then published at once -- readers never see it before -- or
 * dropped. Sessions are the handle's, by key (one open per key), on the daemon connection
 * they began on. A session whose connection is lost, whose handle is closed, or whose
 * process ends without ending it is revoked by the daemon at once (its space freed, its
 * key free again; were the daemon itself to die, the master frees it after its
 * --put_start_release_timeout). A daemon keeps at most 4096 staged puts open per
 * connection: sessions past that answer -600. */

/* Opens a session per key for a value of sizes[i] bytes (1 byte to 4 GiB): the replicas
 * are reserved as put_ex reserves them (config: as put_ex's, NULL the defaults; its group
 * ids one per key). results_out[i]: 0 open; -705 a complete object has the key (a put
 * never overwrites); -600 a bad key or size, or a session for the key is open already
 * (also when the key appears twice: the second); -200 no space; or the code put_ex would
 * have answered. An invalid config gives every key its code. Returns 0 once every key has
 * its result, -1 for a NULL argument. */
int mooncake_store_put_session_start(mooncake_store_t store, const char **keys,
                                     const size_t *sizes, size_t count,
                                     const mooncake_put_config_t *config, int *results_out);

/* One range of a session's value: the length bytes at src go to dst_offset in the value. */
typedef struct mooncake_put_fragment {
  const void *src;
  uint64_t length;
  uint64_t dst_offset;
} mooncake_put_fragment_t;

/* One key's ranges for mooncake_store_put_session_write. */
typedef struct mooncake_session_write {
  const char *key;
  const mooncake_put_fragment_t *fragments;
  size_t fragment_count;
} mooncake_session_write_t;

/* Writes each entry's fragments into its key's open session (zero copy from the handle's
 * pool; other memory is staged through it). results_out[i]: the bytes written for
 * writes[i] (the sum of its lengths), or -600 -- and nothing written for it -- when its key
 * has no open session or a fragment runs past the value (or past a registered buffer);
 * -800 when a replica could not be written (the session's end then answers -800 and
 * publishes nothing); -900 when the session's connection was lost. Ranges may overlap:
 * the last written wins. Returns 0 once every entry has its result, -1 for a NULL
 * argument. */
int mooncake_store_put_session_write(mooncake_store_t store,
                                     const mooncake_session_write_t *writes, size_t count,
                                     int64_t *results_out);

/* Publishes each key's session, once its writes in flight are done: the value becomes
 * readable whole, with every replica, as a put's does (bytes never written read as
 * whatever the reserved memory held). results_out[i]: 0; -600 no open session; -800 a
 * write to it failed (nothing published); -900 its connection was lost; or what a put's
 * publication answers. The session ends whatever the result. Returns 0 once every key has
 * its result, -1 for a NULL argument. */
int mooncake_store_put_session_end(mooncake_store_t store, const char **keys, size_t count,
                                   int *results_out);

/* Drops each key's session and frees what it reserved. results_out[i]: 0 (also when the
 * reservation was gone already); -600 no open session; -900 its connection was lost (the
 * daemon dropped it then). Returns 0 once every key has its result, -1 for a NULL
 * argument. */
int mooncake_store_put_session_revoke(mooncake_store_t store, const char **keys, size_t count,
                                      int *results_out);

/* ---- what the daemon counted for this handle, version 5 ------------------------------ */

/* Reads of this handle served from an SSD replica (the daemon's SSD tier, its own or
 * another daemon's: docs/ssd.md) since it connected (a reconnect starts again from 0):
 * a get's value, each fragment of a ranged read, and each chunk of a value larger than the
 * pool count once. Mooncake's get_offload_rpc_read_count. >= 0, or -600 when not connected,
 * -900 when the daemon does not answer. */
int64_t mooncake_store_disk_read_count(mooncake_store_t store);

/* ---- copy and move tasks, ABI 5 (docs/mooncake-api.md, "tasks") -------------------- */

/* Mooncake's copy and move tasks: the master queues a task for the daemon that holds the
 * object's source replica, which copies the bytes into the targets the master reserves
 * (a memcpy on its host, a transfer to another daemon) and reports; the master then
 * publishes the new replicas (a move's target replaces its source, which is freed once no
 * read lease covers it). Segments are named as replica descriptors' location names them:
 * a daemon's "host:port" for its own memory, a client's name (setup's local_hostname) for
 * the memory it lends. A task belongs to the handle's tenant. The task table is the
 * leader master's, in memory: a master restart or failover forgets it (a task's id then
 * answers -704; its copy may or may not have been published). */

/* A task's id: Mooncake's UUID, two 64-bit halves. */
typedef struct mooncake_task_id {
  uint64_t high;
  uint64_t low;
} mooncake_task_id_t;

/* Task types and states, Mooncake's TaskType and TaskStatus values. */
#define MOONCAKE_TASK_REPLICA_COPY 0
#define MOONCAKE_TASK_REPLICA_MOVE 1
#define MOONCAKE_TASK_PENDING 0    /* waiting for its daemon */
#define MOONCAKE_TASK_PROCESSING 1 /* its targets reserved, the bytes on their way */
#define MOONCAKE_TASK_FAILED 2     /* message says why; nothing was published */
#define MOONCAKE_TASK_SUCCESS 3

/* Bytes of a task's message, its NUL included (a longer one is cut). */
#define MOONCAKE_TASK_MESSAGE_SIZE 512

/* What query_task answers: Mooncake's QueryTaskResponse. */
typedef struct mooncake_task_info {
  mooncake_task_id_t id;
  int type;                              /* MOONCAKE_TASK_REPLICA_* */
  int status;                            /* MOONCAKE_TASK_PENDING .. _SUCCESS */
  int64_t created_at_ms_epoch;           /* Unix-epoch ms */
  int64_t last_updated_at_ms_epoch;
  mooncake_task_id_t assigned_client;    /* {0, id of the daemon that runs it} */
  char message[MOONCAKE_TASK_MESSAGE_SIZE]; /* "" while it runs; why it failed, or
                                               "Task completed successfully" */
} mooncake_task_info_t;

/* Queues a copy of key's value into a new replica in each of the count segments named in
 * targets that holds none yet (a name given twice counts once), from a replica chosen at
 * random; writes its id. -600 for count 0 or over 64, or a target that names no segment;
 * -1010 a target that takes no allocation now (draining, or its daemon silent); -704 key
 * missing; -703 still being written; -1300 the master has --max_total_pending_tasks
 * tasks waiting. A target with no room makes the task wait and try again (the master's
 * --max_retry_attempts times) before it fails. Mooncake's order of checks. */
int mooncake_store_create_copy_task(mooncake_store_t store, const char *key,
                                    const char **targets, size_t count,
                                    mooncake_task_id_t *id_out);

/* Queues a move of key's replica in segment source to segment target (a target that holds
 * one already: the source is dropped); writes its id. -704 key missing; -600 source =
 * target, a target that names no segment, or no replica of key in source; -1010, -1300 as
 * for a copy. */
int mooncake_store_create_move_task(mooncake_store_t store, const char *key, const char *source,
                                    const char *target, mooncake_task_id_t *id_out);

/* Fills *out with the task's state. -704 for an id the master does not know: never
 * created, another tenant's, finished long enough ago to be forgotten (the master keeps
 * the newest --max_total_finished_tasks), or from before a master restart. */
int mooncake_store_query_task(mooncake_store_t store, mooncake_task_id_t id,
                              mooncake_task_info_t *out);

#ifdef __cplusplus
}
#endif

#endif /* MOONCAKE_STORE_H_ */
