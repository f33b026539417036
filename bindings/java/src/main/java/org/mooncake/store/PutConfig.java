package org.mooncake.store;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Mooncake's whole {@code ReplicateConfig}, as the C ABI's sized {@code mooncake_put_config_t}
 * carries it (docs/mooncake-api.md, "put-config"). The defaults are Mooncake's: one replica,
 * soft pin {@link #SOFT_PIN_PRESERVE}, no hard pin, no preference. Fields of features this
 * store lacks ({@link #nofReplicaNum}, {@link #dfsReplicaNum}, {@link #preferredNofSegments},
 * {@link #hostId}) make a put fail with
 * {@code NOT_SUPPORTED} (-1012) when set. A mutable value: build one per call site, or share
 * one that is no longer changed.
 */
public final class PutConfig {
    /** An upsert keeps the old value's soft pin until its deadline; a new object gets none. */
    public static final int SOFT_PIN_PRESERVE = 0;
    /** Pinned for the TTL (or the master's default) from the put's publication: a fixed deadline. */
    public static final int SOFT_PIN_ENABLE = 1;
    /** No soft pin (an upsert drops the old one). */
    public static final int SOFT_PIN_DISABLE = 2;

    /** Memory replicas on distinct segments, 1 to 64. */
    public long replicaNum = 1;
    /** NVMe-oF replicas: must be 0. */
    public long nofReplicaNum = 0;
    /** DFS (3FS) replicas: must be 0. */
    public long dfsReplicaNum = 0;
    /** One of the SOFT_PIN_ constants. */
    public int softPinAction = SOFT_PIN_PRESERVE;
    /** With {@link #SOFT_PIN_ENABLE} only: the pin's TTL in ms (0 pins nothing); null: the master's default. */
    public Long softPinTtlMs = null;
    /** Never evicted; removed only with force; survives upserts. */
    public boolean withHardPin = false;
    /** "host:port" of daemons to try first, in order. */
    public List<String> preferredSegments = new ArrayList<>();
    /** Mooncake's single preferred segment, used when preferredSegments is empty; "" for none. */
    public String preferredSegment = "";
    /** NVMe-oF segments: must be empty. */
    public List<String> preferredNofSegments = new ArrayList<>();
    /** The first replica on this store's daemon. */
    public boolean preferAllocInSameNode = false;
    /** Mooncake's writer host id: must be "" (the node is this store's daemon). */
    public String hostId = "";
    /**
     * Mooncake's object groups: null, or one group id per key of the call ("" for none;
     * another count is INVALID_PARAMS). Objects of one group are leased, aged and evicted
     * together (docs/mooncake-api.md, "Object groups").
     */
    public List<String> groupIds = null;
    /** Mooncake's ObjectDataType, 0 to 9. */
    public int dataType = 0;

    // The flattened form the JNI glue reads (bindings/java/src/main/native/mooncake_store_jni.c).
    long[] scalars() {
        return new long[] {replicaNum, nofReplicaNum, dfsReplicaNum,
                softPinTtlMs == null ? 0 : softPinTtlMs, softPinAction, softPinTtlMs == null ? 0 : 1,
                withHardPin ? 1 : 0, preferAllocInSameNode ? 1 : 0, dataType};
    }

    byte[][][] lists(String operation) {
        return new byte[][][] {utf8(preferredSegments, operation), utf8(preferredNofSegments, operation),
                groupIds == null ? null : utf8(groupIds, operation)};
    }

    byte[][] singles(String operation) {
        return new byte[][] {utf8(preferredSegment, operation), utf8(hostId, operation)};
    }

    private static byte[][] utf8(List<String> names, String operation) {
        if (names == null) {
            return new byte[0][];
        }
        byte[][] out = new byte[names.size()][];
        for (int i = 0; i < out.length; i++) {
            out[i] = utf8(names.get(i), operation);
            if (out[i] == null) {
                throw new MooncakeStoreException(MooncakeStoreException.INTERNAL_ERROR, operation, "a null name");
            }
        }
        return out;
    }

    private static byte[] utf8(String s, String operation) {
        if (s == null) {
            return null;
        }
        if (s.indexOf('\0') >= 0) {
            throw new MooncakeStoreException(MooncakeStoreException.INVALID_PARAMS, operation, "a name contains U+0000");
        }
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
