package org.mooncake.store;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.LongFunction;

/**
 * A connection to the local mooncaked daemon: the Java face of {@code include/mooncake_store.h}
 * (every call goes through libmooncake_store.so; nothing here speaks the daemon's protocol).
 *
 * <p><b>Errors.</b> Every failure throws the unchecked {@link MooncakeStoreException}, whose
 * {@code code()} is the C ABI code and whose message is {@code mooncake_store_strerror(code)}
 * followed by why ({@code detail()}: the library's {@code mooncake_store_errmsg} for the call,
 * with the fix where there is one; a failed connect also writes it to stderr).
 * A <i>miss</i> is not a failure: {@link #get} returns null, {@link #getInto} -1,
 * {@link #getSize} -1, {@link #remove} false, {@link #isExist} false. Batch calls do not throw
 * for one bad entry: they return one result per entry, as the C ABI does.
 *
 * <p><b>Keys</b> are Java strings sent as UTF-8: 1 to 4096 bytes, no U+0000, no unpaired
 * surrogates (those would not survive the encoding); values are 1 byte or more.
 *
 * <p><b>Buffers.</b> {@link #putFrom} stores the bytes between a direct buffer's position and
 * limit; {@link #getInto} writes at its position, at most {@code remaining()} bytes. Neither
 * changes the buffer's position, limit or mark, so one buffer may be used by several threads
 * at once. A buffer from {@link #allocate} is memory of this store's pool, which the daemon
 * reads and writes itself: no copy on this side. Other direct buffers are copied through the
 * pool by the library; heap buffers are refused (use {@link #put}/{@link #get}).
 *
 * <p><b>Pool memory lifetime.</b> A buffer from {@link #allocate} stays valid until it is
 * passed to {@link #free} or the store is closed; {@link #close} frees (unmaps) the whole pool.
 * Touching such a buffer afterwards, or passing it to any store, is undefined and can crash
 * the JVM: a direct buffer cannot be revoked. Never let allocated buffers outlive their store.
 *
 * <p><b>Threads.</b> One store may be shared by any number of threads; calls run
 * concurrently. {@link #close} waits for the calls in flight (it first disconnects, so they
 * end quickly with an exception) and then frees the native handle; later calls throw
 * {@code INVALID_PARAMS} ("store is closed"). A store that is never closed leaks its handle and
 * pool: use try-with-resources.
 */
public final class MooncakeStore implements AutoCloseable {
    static {
        NativeLoader.load();
    }

    /** {@link #healthCheck()}: connected, and the daemon reaches its master. */
    public static final int HEALTH_OK = 0;
    /** {@link #healthCheck()}: not connected (closed, or the daemon is gone). */
    public static final int HEALTH_NOT_CONNECTED = 1;
    /** {@link #healthCheck()}: the daemon is up but cannot reach its master. */
    public static final int HEALTH_MASTER_UNREACHABLE = 2;

    /** {@link #setSsdOffload}: as the master's {@code --enable_offload} says (the default). */
    public static final int SSD_OFFLOAD_DEFAULT = 0;
    /** {@link #setSsdOffload}: every put asks for its value to be offloaded to the SSD tier. */
    public static final int SSD_OFFLOAD_ON = 1;
    /** {@link #setSsdOffload}: no put is offloaded at put time. */
    public static final int SSD_OFFLOAD_OFF = 2;

    private static final int MAX_HOSTNAME = 1100;
    // Descriptors per key on the first try: replica_num memory replicas (1 unless asked
    // otherwise) and at most a disk one. A key with more is asked again with room for all.
    private static final int FIRST_REPLICA_CAPACITY = 8;
    // Keys per native batch call, so the descriptors' room stays small for any batch.
    private static final int REPLICA_BATCH_KEYS = 1024;

    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private long handle; // guarded by lock: read under the read lock, cleared under the write lock
    private final long localBufferSize;
    private final ConcurrentHashMap<Long, Integer> allocations = new ConcurrentHashMap<>();

    private MooncakeStore(long handle, long localBufferSize) {
        this.handle = handle;
        this.localBufferSize = localBufferSize;
    }

    // ---- lifecycle -----------------------------------------------------------------------

    /**
     * Connects to the daemon's Unix socket and creates a pool of {@code localBufferSize} bytes
     * shared with it ({@code mooncake_store_connect}).
     *
     * @param socketPath the daemon's socket; null or empty means {@code $MOONCAKE_SOCKET}, else
     *     {@code /run/mooncake/mooncaked.sock}
     * @param localBufferSize bytes of pool: the memory {@link #allocate} hands out and through
     *     which other buffers are staged; 0 means no pool (then every put and get of a value
     *     fails with {@code INVALID_PARAMS}; queries and removes still work)
     * @throws MooncakeStoreException {@code RPC_FAIL} when no daemon answers
     */
    public static MooncakeStore connect(String socketPath, long localBufferSize) {
        return connect(socketPath, localBufferSize, null);
    }

    /**
     * {@link #connect(String, long)} in a tenant: the store's keys are the tenant's, a key
     * space no other tenant sees, reads, removes or matches ({@code mooncake_store_set_tenant};
     * the same key in two tenants is two objects).
     *
     * @param tenantId 1 to 64 characters of {@code [A-Za-z0-9_.-]}; null or empty names none
     *     (the daemon's tenant for this process's uid, if its {@code --tenant_uids} lists one,
     *     else the default tenant)
     * @throws MooncakeStoreException {@code INVALID_PARAMS} for a malformed id,
     *     {@code PERMISSION_DENIED} when the daemon keeps the tenant for other uids
     */
    public static MooncakeStore connect(String socketPath, long localBufferSize, String tenantId) {
        if (localBufferSize < 0) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, "connect",
                    "localBufferSize " + localBufferSize + " is negative");
        }
        byte[] path = socketPath == null ? null : encode(socketPath, "connect", "socketPath");
        byte[] tenant = tenantId == null ? null : encode(tenantId, "connect", "tenantId");
        long h = nCreate();
        if (h == 0) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "connect",
                    "mooncake_store_create failed");
        }
        int rc = nSetTenant(h, tenant);
        if (rc == 0) {
            rc = nConnect(h, path, localBufferSize);
        }
        if (rc != 0) {
            String why = errmsg(h); // the handle's, on this thread: read before it goes
            nDestroy(h);
            throw new MooncakeStoreException(rc, "connect", why);
        }
        return new MooncakeStore(h, localBufferSize);
    }

    /**
     * Disconnects and frees the handle and its pool (every buffer from {@link #allocate}
     * becomes invalid). Waits for calls in flight. Safe to call more than once.
     */
    @Override
    public void close() {
        lock.readLock().lock();
        try {
            if (handle != 0) {
                nClose(handle); // wakes calls in flight: they fail instead of running on
            }
        } finally {
            lock.readLock().unlock();
        }
        lock.writeLock().lock();
        try {
            if (handle != 0) {
                nDestroy(handle);
                handle = 0;
                allocations.clear();
            }
        } finally {
            lock.writeLock().unlock();
        }
    }

    /**
     * {@link #HEALTH_OK}, {@link #HEALTH_NOT_CONNECTED} (also after {@link #close}) or
     * {@link #HEALTH_MASTER_UNREACHABLE}.
     */
    public int healthCheck() {
        lock.readLock().lock();
        try {
            if (handle == 0) {
                return HEALTH_NOT_CONNECTED;
            }
            return check(nHealthCheck(handle), "healthCheck");
        } finally {
            lock.readLock().unlock();
        }
    }

    /** The daemon's transfer endpoint, "host:port". */
    public String getHostname() {
        int[] status = new int[1];
        String hostname = call("getHostname", h -> nGetHostname(h, MAX_HOSTNAME, status));
        if (hostname == null) {
            throw new MooncakeStoreException(status[0], "getHostname", takeDetail());
        }
        return hostname;
    }

    /** The pool size this store was connected with. */
    public long localBufferSize() {
        return localBufferSize;
    }

    // ---- pool memory ---------------------------------------------------------------------

    /**
     * Returns {@code size} bytes of pool memory as a direct buffer (position 0, limit
     * {@code size}, contents unspecified). {@link #putFrom} and {@link #getInto} on it copy
     * nothing on this side. Valid until {@link #free} or {@link #close}, whichever comes first.
     *
     * @throws MooncakeStoreException {@code NO_AVAILABLE_HANDLE} when the pool has no free block
     *     that large (back-pressure: free buffers or retry); {@code INVALID_PARAMS} for
     *     {@code size <= 0} or a store connected without a pool
     */
    public ByteBuffer allocate(int size) {
        if (size <= 0) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, "allocate",
                    "size " + size + " is not positive");
        }
        if (localBufferSize == 0) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, "allocate",
                    "the store was connected with localBufferSize 0 (no pool)");
        }
        long h = enter("allocate");
        try {
            long address = nAlloc(h, size);
            if (address == 0) {
                throw new MooncakeStoreException(MooncakeStoreException.NO_AVAILABLE_HANDLE, "allocate",
                        "the pool has no free block of " + size + " bytes");
            }
            ByteBuffer buffer;
            try {
                buffer = nWrap(address, size);
            } catch (Throwable t) {
                nFree(h, address);
                throw t;
            }
            allocations.put(address, size);
            return buffer;
        } finally {
            exit();
        }
    }

    /**
     * Returns a buffer from {@link #allocate} (or a duplicate or slice starting at its first
     * byte) to the pool; it must not be used afterwards. After {@link #close} this does
     * nothing: closing freed every buffer.
     *
     * @throws MooncakeStoreException {@code INVALID_PARAMS} when the buffer is not a live
     *     allocation of this store (never allocated here, or already freed)
     */
    public void free(ByteBuffer buffer) {
        if (buffer == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "free", "buffer is null");
        }
        lock.readLock().lock();
        try {
            if (handle == 0) {
                return;
            }
            long address = buffer.isDirect() ? nAddress(buffer) : 0;
            if (address == 0 || allocations.remove(address) == null) {
                throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, "free",
                        "not a live buffer from allocate() of this store");
            }
            nFree(handle, address);
        } finally {
            lock.readLock().unlock();
        }
    }

    // ---- put -----------------------------------------------------------------------------

    /**
     * Stores {@code value} under {@code key}. Never overwrites: when the key already holds a
     * complete value this returns normally and the old value stays.
     *
     * @throws MooncakeStoreException {@code NO_AVAILABLE_HANDLE} when the cluster has no space
     *     (back-pressure), {@code INVALID_PARAMS} for an empty value or a bad key
     */
    public void put(String key, byte[] value) {
        byte[] k = key(key, "put");
        if (value == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "put", "value is null");
        }
        int rc = call("put", h -> nPut(h, k, value));
        check(rc, "put");
    }

    /**
     * Stores the bytes between {@code buffer}'s position and limit under {@code key}, like
     * {@link #put}. Zero copy when the buffer comes from {@link #allocate}.
     */
    public void putFrom(String key, ByteBuffer buffer) {
        byte[] k = key(key, "putFrom");
        direct(buffer, "putFrom", false);
        int rc = call("putFrom", h -> nPutFrom(h, k, buffer, buffer.position(), buffer.remaining()));
        check(rc, "putFrom");
    }

    /**
     * Stores {@code buffers[i]} (position to limit) under {@code keys[i]} in one request.
     *
     * @return per entry: 0, or the negative code {@link #putFrom} would have thrown (a null or
     *     invalid key or a null buffer: {@code INTERNAL_ERROR} / {@code INVALID_PARAMS}; a heap
     *     buffer: {@code INVALID_PARAMS}). An empty batch returns an empty array.
     * @throws MooncakeStoreException when the arrays are null or differ in length
     */
    public int[] batchPutFrom(String[] keys, ByteBuffer[] buffers) {
        Batch b = new Batch(keys, buffers, false, "batchPutFrom");
        int[] results = new int[b.count];
        if (b.count == 0) {
            return results;
        }
        int rc = call("batchPutFrom", h -> nBatchPutFrom(h, b.keys, b.buffers, b.offsets, b.lengths, results));
        check(rc, "batchPutFrom");
        for (int i = 0; i < b.count; i++) {
            if (b.preset[i] != 0) {
                results[i] = b.preset[i];
            }
        }
        return results;
    }

    // ---- put configuration, version 4 (PutConfig) -------------------------------------------

    /**
     * {@link #put} with Mooncake's whole config ({@code mooncake_store_put_ex}).
     *
     * @throws MooncakeStoreException as put, plus {@code INVALID_PARAMS} for a bad config
     *     value and {@code NOT_SUPPORTED} for a field of a feature this store lacks
     */
    public void put(String key, byte[] value, PutConfig config) {
        putEx("put", key, value, config, false);
    }

    /** Like {@link #put(String, byte[], PutConfig)} but replaces an existing value ({@code mooncake_store_upsert_from_ex}). */
    public void upsert(String key, byte[] value, PutConfig config) {
        putEx("upsert", key, value, config, true);
    }

    private void putEx(String operation, String key, byte[] value, PutConfig config, boolean upsert) {
        byte[] k = key(key, operation);
        if (value == null || config == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, operation,
                    value == null ? "value is null" : "config is null");
        }
        long[] scalars = config.scalars();
        byte[][][] lists = config.lists(operation);
        byte[][] singles = config.singles(operation);
        int rc = call(operation, h -> nPutEx(h, k, value, scalars, lists, singles, upsert));
        check(rc, operation);
    }

    /** {@link #putFrom} with Mooncake's whole config ({@code mooncake_store_put_from_ex}). */
    public void putFrom(String key, ByteBuffer buffer, PutConfig config) {
        putFromEx("putFrom", key, buffer, config, false);
    }

    /**
     * Replaces (or creates) key's value with the bytes between {@code buffer}'s position and
     * limit ({@code mooncake_store_upsert_from_ex}): readers see the old or the new value.
     */
    public void upsertFrom(String key, ByteBuffer buffer, PutConfig config) {
        putFromEx("upsertFrom", key, buffer, config, true);
    }

    private void putFromEx(String operation, String key, ByteBuffer buffer, PutConfig config, boolean upsert) {
        byte[] k = key(key, operation);
        direct(buffer, operation, false);
        if (config == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, operation, "config is null");
        }
        long[] scalars = config.scalars();
        byte[][][] lists = config.lists(operation);
        byte[][] singles = config.singles(operation);
        int rc = call(operation, h -> nPutFromEx(h, k, buffer, buffer.position(), buffer.remaining(), scalars,
                lists, singles, upsert));
        check(rc, operation);
    }

    /** {@link #batchPutFrom} with Mooncake's whole config ({@code mooncake_store_batch_put_from_ex}). */
    public int[] batchPutFrom(String[] keys, ByteBuffer[] buffers, PutConfig config) {
        return batchEx("batchPutFrom", keys, buffers, config, false);
    }

    /**
     * Upserts {@code buffers[i]} under {@code keys[i]} in one request, in order
     * ({@code mooncake_store_batch_upsert_from}).
     *
     * @return per entry: 0, or the negative code an upsert of it would have thrown
     */
    public int[] batchUpsertFrom(String[] keys, ByteBuffer[] buffers, PutConfig config) {
        return batchEx("batchUpsertFrom", keys, buffers, config, true);
    }

    private int[] batchEx(String operation, String[] keys, ByteBuffer[] buffers, PutConfig config, boolean upsert) {
        Batch b = new Batch(keys, buffers, false, operation);
        if (config == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, operation, "config is null");
        }
        int[] results = new int[b.count];
        if (b.count == 0) {
            return results;
        }
        long[] scalars = config.scalars();
        byte[][][] lists = config.lists(operation);
        byte[][] singles = config.singles(operation);
        int rc = call(operation, h -> nBatchPutFromEx(h, b.keys, b.buffers, b.offsets, b.lengths, results,
                scalars, lists, singles, upsert));
        check(rc, operation);
        for (int i = 0; i < b.count; i++) {
            if (b.preset[i] != 0) {
                results[i] = b.preset[i];
            }
        }
        return results;
    }

    // ---- get -----------------------------------------------------------------------------

    /** The value of {@code key}, or null when there is none. */
    public byte[] get(String key) {
        byte[] k = key(key, "get");
        int[] status = new int[1];
        byte[] value = call("get", h -> nGet(h, k, status));
        if (value == null && status[0] != MooncakeStoreException.OBJECT_NOT_FOUND) {
            throw new MooncakeStoreException(status[0], "get", takeDetail());
        }
        return value;
    }

    /**
     * Reads the value of {@code key} into {@code buffer} at its position (the position does
     * not move). Zero copy when the buffer comes from {@link #allocate}.
     *
     * @return the value's size in bytes, or -1 when there is no such key
     * @throws MooncakeStoreException {@code INVALID_PARAMS} when {@code buffer.remaining()} is
     *     smaller than the value (see {@link #getSize}) or the buffer is read-only or on the
     *     heap; {@code REPLICA_IS_NOT_READY} while the value is still being written
     */
    public int getInto(String key, ByteBuffer buffer) {
        byte[] k = key(key, "getInto");
        direct(buffer, "getInto", true);
        long n = call("getInto", h -> nGetInto(h, k, buffer, buffer.position(), buffer.remaining()));
        if (n == MooncakeStoreException.OBJECT_NOT_FOUND) {
            return -1;
        }
        return (int) check(n, "getInto");
    }

    /**
     * Reads the value of {@code keys[i]} into {@code buffers[i]} (at its position) for every i,
     * in one request.
     *
     * @return per entry: the bytes read, or a negative code: {@code OBJECT_NOT_FOUND} (-704) on a
     *     miss, {@code INVALID_PARAMS} when the buffer is too small, read-only or on the heap or
     *     the key is invalid, {@code INTERNAL_ERROR} for a null key or buffer. An empty batch
     *     returns an empty array.
     * @throws MooncakeStoreException when the arrays are null or differ in length
     */
    public int[] batchGetInto(String[] keys, ByteBuffer[] buffers) {
        Batch b = new Batch(keys, buffers, true, "batchGetInto");
        int[] results = new int[b.count];
        if (b.count == 0) {
            return results;
        }
        long[] raw = new long[b.count];
        int rc = call("batchGetInto", h -> nBatchGetInto(h, b.keys, b.buffers, b.offsets, b.lengths, raw));
        check(rc, "batchGetInto");
        for (int i = 0; i < b.count; i++) {
            results[i] = b.preset[i] != 0 ? b.preset[i] : (int) raw[i];
        }
        return results;
    }

    // ---- query ---------------------------------------------------------------------------

    /**
     * Stores {@code tensor} under {@code key} as Mooncake's tensor object (its 304-byte header,
     * then the elements), which Mooncake's Python {@code get_tensor} reads. Never overwrites,
     * as {@link #put(String, byte[])}.
     *
     * @throws MooncakeStoreException those of {@link Tensor#toBytes} and of {@link #put}
     */
    public void putTensor(String key, Tensor tensor) {
        put(key, tensor.toBytes());
    }

    /** Like {@link #putTensor} but replaces an existing value. */
    public void upsertTensor(String key, Tensor tensor) {
        upsert(key, tensor.toBytes(), new PutConfig());
    }

    /**
     * The tensor under {@code key} (any client's {@code put_tensor}), or null when there is no
     * such key.
     *
     * @throws MooncakeStoreException {@code INVALID_PARAMS}, saying which field, when the object
     *     is not a tensor; those of {@link #get}
     */
    public Tensor getTensor(String key) {
        byte[] object = get(key);
        return object == null ? null : Tensor.fromBytes(object);
    }

    /** True when {@code key} holds a complete, readable value (false while it is being written). */
    public boolean isExist(String key) {
        byte[] k = key(key, "isExist");
        int r = call("isExist", h -> nIsExist(h, k));
        return check(r, "isExist") == 1;
    }

    /**
     * {@link #isExist} for every key, in one request.
     *
     * @throws MooncakeStoreException when any key is null or invalid or any entry fails (the
     *     detail names the entry)
     */
    public boolean[] batchIsExist(String[] keys) {
        if (keys == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "batchIsExist", "keys is null");
        }
        byte[][] k = new byte[keys.length][];
        for (int i = 0; i < keys.length; i++) {
            k[i] = key(keys[i], "batchIsExist");
        }
        boolean[] exists = new boolean[keys.length];
        if (keys.length == 0) {
            return exists;
        }
        int[] results = new int[keys.length];
        int rc = call("batchIsExist", h -> nBatchIsExist(h, k, results));
        check(rc, "batchIsExist");
        for (int i = 0; i < keys.length; i++) {
            if (results[i] < 0) {
                throw new MooncakeStoreException(results[i], "batchIsExist", "keys[" + i + "]");
            }
            exists[i] = results[i] == 1;
        }
        return exists;
    }

    /** The size in bytes of {@code key}'s value, or -1 when there is no such key. */
    public long getSize(String key) {
        byte[] k = key(key, "getSize");
        long size = call("getSize", h -> nGetSize(h, k));
        if (size == MooncakeStoreException.OBJECT_NOT_FOUND) {
            return -1;
        }
        return check(size, "getSize");
    }

    // ---- replicas and the SSD tier ---------------------------------------------------------

    /**
     * The replicas of {@code key} ({@code mooncake_store_get_replica_desc}): memory and SSD ones,
     * with the daemon holding each. Reads no bytes, but takes the read lease a get takes (a
     * {@link #remove} without force meanwhile throws {@code OBJECT_HAS_LEASE}).
     *
     * @return the replicas; an empty list when there is no such key
     * @throws MooncakeStoreException {@code INVALID_PARAMS} for a bad key,
     *     {@code REPLICA_IS_NOT_READY} while the value is being written
     */
    public List<ReplicaDescriptor> getReplicaDesc(String key) {
        return replicasOf(key(key, "getReplicaDesc"), FIRST_REPLICA_CAPACITY);
    }

    /** One key's replicas with room for capacity of them, growing it as the library says. */
    private List<ReplicaDescriptor> replicasOf(byte[] k, int capacity) {
        for (int attempt = 0; ; attempt++) { // a few: replicas may come and go between two asks
            final int room = capacity;
            Room r = new Room(room, 1);
            int rc = call("getReplicaDesc",
                    h -> nGetReplicaDesc(h, k, room, r.kinds, r.statuses, r.sizes, r.locations, r.counts));
            if (rc == MooncakeStoreException.INVALID_PARAMS && r.counts[0] > room && attempt < 3) {
                capacity = r.counts[0];
                continue;
            }
            if (rc == MooncakeStoreException.OBJECT_NOT_FOUND) {
                return Collections.emptyList();
            }
            check(rc, "getReplicaDesc");
            return r.replicas(0, r.counts[0]);
        }
    }

    /**
     * {@link #getReplicaDesc} for every key, in as few requests as the library needs.
     *
     * @return key to its replicas, in the keys' order, for the keys that exist (as Mooncake's
     *     {@code batch_get_replica_desc}: a missing key is left out)
     * @throws MooncakeStoreException when any key is null or invalid, or an entry fails other
     *     than by a miss (the detail names the entry)
     */
    public Map<String, List<ReplicaDescriptor>> batchGetReplicaDesc(String[] keys) {
        if (keys == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "batchGetReplicaDesc",
                    "keys is null");
        }
        byte[][] k = new byte[keys.length][];
        for (int i = 0; i < keys.length; i++) {
            k[i] = key(keys[i], "batchGetReplicaDesc");
        }
        Map<String, List<ReplicaDescriptor>> found = new LinkedHashMap<>();
        for (int first = 0; first < keys.length; first += REPLICA_BATCH_KEYS) {
            int n = Math.min(REPLICA_BATCH_KEYS, keys.length - first);
            byte[][] chunk = new byte[n][];
            System.arraycopy(k, first, chunk, 0, n);
            Room room = new Room(n * FIRST_REPLICA_CAPACITY, n);
            int[] results = new int[n];
            int rc = call("batchGetReplicaDesc",
                    h -> nBatchGetReplicaDesc(h, chunk, FIRST_REPLICA_CAPACITY, room.kinds, room.statuses,
                            room.sizes, room.locations, room.counts, results));
            check(rc, "batchGetReplicaDesc");
            for (int j = 0; j < n; j++) {
                String name = keys[first + j];
                if (results[j] == MooncakeStoreException.OBJECT_NOT_FOUND) {
                    continue;
                }
                if (results[j] == MooncakeStoreException.INVALID_PARAMS
                        && room.counts[j] > FIRST_REPLICA_CAPACITY) {
                    List<ReplicaDescriptor> all = replicasOf(chunk[j], room.counts[j]);
                    if (!all.isEmpty()) {
                        found.put(name, all);
                    }
                    continue;
                }
                if (results[j] < 0) {
                    throw new MooncakeStoreException(results[j], "batchGetReplicaDesc",
                            "keys[" + (first + j) + "]");
                }
                found.put(name, room.replicas(j * FIRST_REPLICA_CAPACITY, room.counts[j]));
            }
        }
        return found;
    }

    /**
     * Whether this store's later puts ask for their values to be offloaded to the SSD tier of
     * the daemon holding them ({@code mooncake_store_set_ssd_offload}): {@link #SSD_OFFLOAD_DEFAULT}
     * (the master's {@code --enable_offload} decides), {@link #SSD_OFFLOAD_ON} or
     * {@link #SSD_OFFLOAD_OFF}. Such a put is stored and answered as any other; the copy to SSD
     * follows in the background, where the daemon has an SSD tier.
     *
     * @throws MooncakeStoreException {@code INVALID_PARAMS} for another mode
     */
    public void setSsdOffload(int mode) {
        int rc = call("setSsdOffload", h -> nSetSsdOffload(h, mode));
        check(rc, "setSsdOffload");
    }

    /** Arrays the native replica calls fill: per descriptor, and per key (counts). */
    private static final class Room {
        final int[] kinds;
        final int[] statuses;
        final long[] sizes;
        final String[] locations;
        final int[] counts;

        Room(int descriptors, int keys) {
            kinds = new int[descriptors];
            statuses = new int[descriptors];
            sizes = new long[descriptors];
            locations = new String[descriptors];
            counts = new int[keys];
        }

        List<ReplicaDescriptor> replicas(int from, int count) {
            List<ReplicaDescriptor> out = new ArrayList<>(count);
            for (int i = from; i < from + count; i++) {
                out.add(new ReplicaDescriptor(kinds[i], statuses[i], locations[i], sizes[i]));
            }
            return Collections.unmodifiableList(out);
        }
    }

    // ---- remove --------------------------------------------------------------------------

    /**
     * Removes {@code key}.
     *
     * @param force also remove while a read lease is active, and hard-pinned objects (the
     *     master keeps a forced-out object's space until its lease ends)
     * @return true when removed, false when there was no such key
     * @throws MooncakeStoreException {@code OBJECT_HAS_LEASE} (without force) while a read
     *     lease is active: every get and query takes one, for the master's
     *     {@code --default_kv_lease_ttl}; {@code REPLICA_IS_NOT_READY} while it is being written
     */
    public boolean remove(String key, boolean force) {
        byte[] k = key(key, "remove");
        int rc = call("remove", h -> nRemove(h, k, force));
        if (rc == MooncakeStoreException.OBJECT_NOT_FOUND) {
            return false;
        }
        check(rc, "remove");
        return true;
    }

    /**
     * Removes every key matching an ECMAScript regular expression.
     *
     * @return how many were removed
     * @throws MooncakeStoreException {@code INVALID_PARAMS} for a malformed pattern
     */
    public long removeByRegex(String pattern, boolean force) {
        if (pattern == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "removeByRegex",
                    "pattern is null");
        }
        byte[] p = encode(pattern, "removeByRegex", "pattern");
        long n = call("removeByRegex", h -> nRemoveByRegex(h, p, force));
        return check(n, "removeByRegex");
    }

    /**
     * Removes every complete object (without force, leased and hard-pinned ones are kept).
     *
     * @return how many were removed
     */
    public long removeAll(boolean force) {
        long n = call("removeAll", h -> nRemoveAll(h, force));
        return check(n, "removeAll");
    }

    // ---- segments and replica clearing (docs/mooncake-api.md, "segments") ---------------

    /**
     * Clears the replicas of keys whose read lease has run out (Mooncake's
     * batch_replica_clear): every replica when {@code segmentName} is null or empty, else
     * only those on the daemon of that name ("host:port", as {@link #getHostname} and
     * {@link ReplicaDescriptor} name it).
     *
     * @return one code per key: 0 cleared, {@code OBJECT_HAS_LEASE} (skipped: a read lease
     *     runs), {@code OBJECT_NOT_FOUND}, {@code REPLICA_IS_NOT_READY},
     *     {@code UNAVAILABLE_IN_CURRENT_STATUS} (hard-pinned), {@code SEGMENT_NOT_FOUND} (no
     *     replica there), {@code INVALID_PARAMS} (a bad key)
     * @throws MooncakeStoreException {@code INVALID_PARAMS} for a segment name no daemon can
     *     have (264 bytes or more, or U+0000)
     */
    public int[] batchReplicaClear(String[] keys, String segmentName) {
        if (keys == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "batchReplicaClear",
                    "keys is null");
        }
        byte[][] k = new byte[keys.length][];
        for (int i = 0; i < keys.length; i++) {
            k[i] = key(keys[i], "batchReplicaClear");
        }
        byte[] name = encode(segmentName == null ? "" : segmentName, "batchReplicaClear", "segmentName");
        int[] results = new int[keys.length];
        if (keys.length == 0) {
            return results;
        }
        check(call("batchReplicaClear", h -> nBatchReplicaClear(h, k, name, results)), "batchReplicaClear");
        return results;
    }

    /**
     * Lends a buffer from {@link #allocate} (its bytes from position to limit) to the cluster
     * as a segment of this store: keep it allocated, and do not touch it, until
     * {@link #unmountSegment} or {@link #close}. Memory the daemon does not share cannot be
     * lent.
     *
     * @return the segment's id
     * @throws MooncakeStoreException {@code INVALID_PARAMS} for a buffer that is not in this
     *     store's pool (or empty); {@code PERMISSION_DENIED} when the daemon has tenants
     */
    public long mountSegment(ByteBuffer buffer) {
        direct(buffer, "mountSegment", true);
        long[] id = new long[1];
        int offset = buffer.position();
        int length = buffer.remaining();
        check(call("mountSegment", h -> nMountSegment(h, buffer, offset, length, id)), "mountSegment");
        return id[0];
    }

    /**
     * Has the daemon map {@code size} bytes and lend them as a segment of this store.
     *
     * @return the segment's id
     * @throws MooncakeStoreException {@code INVALID_PARAMS} for {@code size <= 0};
     *     {@code RESOURCE_LIMIT_EXCEEDED} when the daemon's host cannot back it, or over
     *     the daemon's caps on client segments
     */
    public long allocateAndMountSegment(long size) {
        if (size <= 0) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, "allocateAndMountSegment",
                    "size " + size + " is not positive");
        }
        long[] out = new long[2];
        check(call("allocateAndMountSegment", h -> nAllocateAndMountSegment(h, size, out)),
                "allocateAndMountSegment");
        return out[0];
    }

    /**
     * Drains (moves every object living only there to another segment with room) and
     * unmounts one of this store's segments.
     *
     * @return {moved, dropped}: objects moved, and those no segment had room for
     * @throws MooncakeStoreException {@code SEGMENT_NOT_FOUND} when it is not this store's
     */
    public long[] unmountSegment(long segmentId) {
        long[] out = new long[2];
        check(call("unmountSegment", h -> nUnmountSegment(h, segmentId, out)), "unmountSegment");
        return out;
    }

    /**
     * Mooncake's unmount_local_disk_segment: returns when the daemon has no SSD tier.
     *
     * @throws MooncakeStoreException {@code NOT_SUPPORTED} when it has one (the daemon's, not
     *     this store's to take away)
     */
    public void unmountLocalDiskSegment() {
        check(call("unmountLocalDiskSegment", h -> nUnmountLocalDiskSegment(h)), "unmountLocalDiskSegment");
    }

    // ---- misc ----------------------------------------------------------------------------

    /** {@code mooncake_store_strerror(code)}: the name of any result code. */
    public static String strerror(int code) {
        return nStrerror(code);
    }

    /**
     * Where the JNI library was loaded from: "java.library.path", or "jar:" followed by the
     * resource directory it was extracted from.
     */
    public static String nativeLibrarySource() {
        return NativeLoader.source();
    }

    // ---- helpers -------------------------------------------------------------------------

    /** Takes the read lock and returns the live handle, or throws when closed. */
    private long enter(String operation) {
        lock.readLock().lock();
        if (handle == 0) {
            lock.readLock().unlock();
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, operation, "store is closed");
        }
        return handle;
    }

    private void exit() {
        lock.readLock().unlock();
    }

    /**
     * {@code call(handle)} between {@link #enter} and {@link #exit}. When it fails (a negative
     * code, or null), the library's message for it is read at once -- on this thread, as
     * {@code mooncake_store_errmsg} keeps it, and while the handle surely lives -- and kept
     * for the exception {@link #check} or the caller then throws ({@link #takeDetail}).
     */
    private <T> T call(String operation, LongFunction<T> call) {
        long h = enter(operation);
        try {
            T result = call.apply(h);
            boolean failed = result == null || (result instanceof Number && ((Number) result).longValue() < 0);
            DETAIL.set(failed ? errmsg(h) : null);
            return result;
        } finally {
            exit();
        }
    }

    /** The library's message for the last failed {@link #call} of this thread, or null. */
    private static final ThreadLocal<String> DETAIL = new ThreadLocal<>();

    private static String takeDetail() {
        String detail = DETAIL.get();
        DETAIL.remove();
        return detail;
    }

    /** {@code mooncake_store_errmsg(h)} on this thread; null when it is "". */
    private static String errmsg(long h) {
        String text = new String(nErrmsg(h), StandardCharsets.UTF_8);
        return text.isEmpty() ? null : text;
    }

    private static int check(int rc, String operation) {
        if (rc < 0) {
            throw new MooncakeStoreException(rc, operation, takeDetail());
        }
        return rc;
    }

    private static long check(long rc, String operation) {
        if (rc < 0) {
            throw new MooncakeStoreException((int) rc, operation, takeDetail());
        }
        return rc;
    }

    /** Why s cannot be sent as a C string (U+0000, an unpaired surrogate), or null. */
    private static String invalidText(String s) {
        for (int i = 0, n = s.length(); i < n; i++) {
            char c = s.charAt(i);
            if (c == '\0') {
                return "contains U+0000";
            }
            if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return "contains an unpaired surrogate at index " + i;
            }
        }
        return null;
    }

    private static byte[] encode(String s, String operation, String what) {
        String invalid = invalidText(s);
        if (invalid != null) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, operation, what + " " + invalid);
        }
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static byte[] key(String key, String operation) {
        if (key == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, operation, "key is null");
        }
        return encode(key, operation, "key");
    }

    private static void direct(ByteBuffer buffer, String operation, boolean writable) {
        if (buffer == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, operation, "buffer is null");
        }
        String invalid = invalidBuffer(buffer, writable);
        if (invalid != null) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, operation, invalid);
        }
    }

    private static String invalidBuffer(ByteBuffer buffer, boolean writable) {
        if (!buffer.isDirect()) {
            return "not a direct ByteBuffer";
        }
        if (writable && buffer.isReadOnly()) {
            return "read-only ByteBuffer";
        }
        return null;
    }

    /**
     * The arguments of a batch put or get, checked: entries the binding refuses are passed to
     * the library as NULL and get their code in preset.
     */
    private static final class Batch {
        final int count;
        final byte[][] keys;
        final ByteBuffer[] buffers;
        final int[] offsets;
        final int[] lengths;
        final int[] preset;

        Batch(String[] keys, ByteBuffer[] buffers, boolean writable, String operation) {
            if (keys == null || buffers == null) {
                throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, operation,
                        keys == null ? "keys is null" : "buffers is null");
            }
            if (keys.length != buffers.length) {
                throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, operation,
                        keys.length + " keys but " + buffers.length + " buffers");
            }
            count = keys.length;
            this.keys = new byte[count][];
            this.buffers = new ByteBuffer[count];
            offsets = new int[count];
            lengths = new int[count];
            preset = new int[count];
            for (int i = 0; i < count; i++) {
                ByteBuffer buffer = buffers[i];
                if (keys[i] != null && invalidText(keys[i]) != null) {
                    preset[i] = MooncakeStoreException.INVALID_PARAMS;
                } else if (buffer != null && invalidBuffer(buffer, writable) != null) {
                    preset[i] = MooncakeStoreException.INVALID_PARAMS;
                } else {
                    // a null key or buffer goes through as NULL: the library answers -1
                    this.keys[i] = keys[i] == null ? null : keys[i].getBytes(StandardCharsets.UTF_8);
                    this.buffers[i] = buffer;
                    if (buffer != null) {
                        offsets[i] = buffer.position();
                        lengths[i] = buffer.remaining();
                    }
                }
            }
        }
    }

    // ---- ranged reads (docs/mooncake-api.md, "ranges") -------------------------------------

    /** MOONCAKE_STORE_MAX_KEY_LEN: the longest key, in UTF-8 bytes. */
    private static final int MAX_KEY_BYTES = 4096;

    /**
     * Reads only some bytes of {@code key}'s value: fragment k is {@code lengths[k]} bytes at
     * {@code srcOffsets[k]} in the value, written at {@code dstOffsets[k]} from the buffer's
     * position (which does not move). Only those bytes move, from whichever replica serves
     * them (this daemon's memory, another daemon's, an SSD). Zero copy when the buffer comes
     * from {@link #allocate}.
     *
     * @return per fragment: its length, or a negative code: {@code OBJECT_NOT_FOUND} (-704) on
     *     a miss, {@code INVALID_PARAMS} (-600) when it runs past the value or past the
     *     buffer's {@code remaining()} bytes, {@code REPLICA_IS_NOT_READY} (-703) while the
     *     value is being written. No fragments: an empty array.
     * @throws MooncakeStoreException when an argument is null, the arrays differ in length, the
     *     buffer is read-only or on the heap, or the key is invalid
     */
    public long[] getRanges(String key, ByteBuffer buffer, long[] srcOffsets, long[] lengths,
            long[] dstOffsets) {
        byte[] k = key(key, "getRanges");
        if (k.length == 0 || k.length > MAX_KEY_BYTES) {
            // the library would answer -600 for every fragment: say it as the other calls do
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, "getRanges",
                    "a key is 1 to " + MAX_KEY_BYTES + " bytes");
        }
        direct(buffer, "getRanges", true);
        int n = fragments(srcOffsets, lengths, dstOffsets, "getRanges", "");
        long[] results = new long[n];
        if (n == 0) {
            return results;
        }
        long rc = call("getRanges", h -> nGetRanges(h, k, buffer, buffer.position(), buffer.remaining(),
                srcOffsets, lengths, dstOffsets, results));
        if (rc == MooncakeStoreException.INTERNAL_ERROR) {
            throw new MooncakeStoreException((int) rc, "getRanges");
        }
        return results;
    }

    /**
     * {@link #getRanges} for every i: {@code keys[i]} into {@code buffers[i]}, fragments
     * {@code srcOffsets[i]}, {@code lengths[i]}, {@code dstOffsets[i]}, in as few requests as
     * fit (the same key may appear several times).
     *
     * @return per entry, per fragment: as {@link #getRanges}; an entry whose key is invalid or
     *     whose buffer is read-only or on the heap gets {@code INVALID_PARAMS} for each fragment
     * @throws MooncakeStoreException when an array is null or the arrays differ in length
     */
    public long[][] batchGetRanges(String[] keys, ByteBuffer[] buffers, long[][] srcOffsets,
            long[][] lengths, long[][] dstOffsets) {
        Batch b = new Batch(keys, buffers, true, "batchGetRanges");
        if (srcOffsets == null || lengths == null || dstOffsets == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, "batchGetRanges",
                    "a fragment array is null");
        }
        if (srcOffsets.length != b.count || lengths.length != b.count || dstOffsets.length != b.count) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, "batchGetRanges",
                    "fragment arrays for " + b.count + " keys expected");
        }
        long[][] results = new long[b.count][];
        long[][] src = new long[b.count][], len = new long[b.count][], dst = new long[b.count][];
        for (int i = 0; i < b.count; i++) {
            int n = fragments(srcOffsets[i], lengths[i], dstOffsets[i], "batchGetRanges", "[" + i + "]");
            results[i] = new long[n];
            boolean refused = b.preset[i] != 0 || b.keys[i] == null || b.buffers[i] == null;
            src[i] = refused ? new long[0] : srcOffsets[i];
            len[i] = refused ? new long[0] : lengths[i];
            dst[i] = refused ? new long[0] : dstOffsets[i];
            if (refused) {
                java.util.Arrays.fill(results[i], b.preset[i] != 0 ? b.preset[i]
                        : MooncakeStoreException.INTERNAL_ERROR);
            }
        }
        if (b.count == 0) {
            return results;
        }
        long[] totals = new long[b.count];
        int rc = call("batchGetRanges", h -> nBatchGetRanges(h, b.keys, b.buffers, b.offsets, b.lengths,
                src, len, dst, results, totals));
        check(rc, "batchGetRanges");
        return results;
    }

    /** The fragment count of three parallel arrays, checked. */
    private static int fragments(long[] src, long[] len, long[] dst, String operation, String which) {
        if (src == null || len == null || dst == null) {
            throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, operation,
                    "fragment array" + which + " is null");
        }
        if (src.length != len.length || dst.length != len.length) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, operation,
                    "fragment arrays" + which + " differ in length");
        }
        return len.length;
    }

    // ---- native (bindings/java/src/main/native/mooncake_store_jni.c) -----------------------

    private static native long nCreate();
    private static native void nDestroy(long h);
    private static native int nSetTenant(long h, byte[] tenantId);
    private static native int nConnect(long h, byte[] socketPath, long localBufferSize);
    private static native int nClose(long h);
    private static native int nHealthCheck(long h);
    private static native String nGetHostname(long h, int capacity, int[] status);
    private static native String nStrerror(int code);
    private static native byte[] nErrmsg(long h);

    private static native long nAlloc(long h, long size);
    private static native void nFree(long h, long address);
    private static native ByteBuffer nWrap(long address, long size);
    private static native long nAddress(ByteBuffer buffer);

    private static native int nPut(long h, byte[] key, byte[] value);
    private static native int nPutFrom(long h, byte[] key, ByteBuffer buffer, int offset, int length);
    private static native int nBatchPutFrom(long h, byte[][] keys, ByteBuffer[] buffers, int[] offsets,
            int[] lengths, int[] results);
    private static native byte[] nGet(long h, byte[] key, int[] status);
    private static native long nGetInto(long h, byte[] key, ByteBuffer buffer, int offset, int length);
    private static native int nBatchGetInto(long h, byte[][] keys, ByteBuffer[] buffers, int[] offsets,
            int[] lengths, long[] results);

    private static native int nIsExist(long h, byte[] key);
    private static native int nBatchIsExist(long h, byte[][] keys, int[] results);
    private static native long nGetSize(long h, byte[] key);
    private static native int nRemove(long h, byte[] key, boolean force);
    private static native long nRemoveByRegex(long h, byte[] pattern, boolean force);
    private static native long nRemoveAll(long h, boolean force);

    private static native int nGetReplicaDesc(long h, byte[] key, int capacity, int[] kinds, int[] statuses,
            long[] sizes, String[] locations, int[] count);
    private static native int nBatchGetReplicaDesc(long h, byte[][] keys, int capacityPerKey, int[] kinds,
            int[] statuses, long[] sizes, String[] locations, int[] counts, int[] results);
    private static native int nSetSsdOffload(long h, int mode);

    private static native long nGetRanges(long h, byte[] key, ByteBuffer buffer, int offset, int length,
            long[] srcOffsets, long[] lengths, long[] dstOffsets, long[] results);
    private static native int nBatchGetRanges(long h, byte[][] keys, ByteBuffer[] buffers, int[] offsets,
            int[] lengths, long[][] srcOffsets, long[][] fragmentLengths, long[][] dstOffsets,
            long[][] results, long[] totals);
    private static native int nPutEx(long h, byte[] key, byte[] value, long[] scalars, byte[][][] lists,
            byte[][] singles, boolean upsert);
    private static native int nPutFromEx(long h, byte[] key, ByteBuffer buffer, int offset, int length,
            long[] scalars, byte[][][] lists, byte[][] singles, boolean upsert);
    private static native int nBatchPutFromEx(long h, byte[][] keys, ByteBuffer[] buffers, int[] offsets,
            int[] lengths, int[] results, long[] scalars, byte[][][] lists, byte[][] singles, boolean upsert);
    private static native int nBatchReplicaClear(long h, byte[][] keys, byte[] segmentName, int[] results);
    private static native int nMountSegment(long h, ByteBuffer buffer, int offset, int length, long[] id);
    private static native int nAllocateAndMountSegment(long h, long size, long[] out);
    private static native int nUnmountSegment(long h, long segmentId, long[] out);
    private static native int nUnmountLocalDiskSegment(long h);
}
