package org.mooncake.store;

/**
 * One replica of an object, as {@link MooncakeStore#getReplicaDesc} lists it
 * ({@code mooncake_replica_desc_t}): in a daemon's memory, or on a daemon's SSD tier (its
 * {@code --ssd_path}). Without an SSD tier anywhere every replica is a memory one. Reads
 * prefer local memory, then remote memory, local disk, remote disk. Immutable.
 */
public final class ReplicaDescriptor {
    /** {@link #kind()}: a copy in a daemon's memory ({@code MOONCAKE_REPLICA_MEMORY}). */
    public static final int KIND_MEMORY = 0;
    /** {@link #kind()}: a copy on a daemon's SSD tier ({@code MOONCAKE_REPLICA_DISK}). */
    public static final int KIND_DISK = 1;

    /** {@link #status()}: complete, the only state listed ({@code MOONCAKE_REPLICA_COMPLETE}). */
    public static final int STATUS_COMPLETE = 1;

    private final int kind;
    private final int status;
    private final String location;
    private final long size;

    ReplicaDescriptor(int kind, int status, String location, long size) {
        this.kind = kind;
        this.status = status;
        this.location = location;
        this.size = size;
    }

    /** {@link #KIND_MEMORY} or {@link #KIND_DISK}. */
    public int kind() {
        return kind;
    }

    /** {@link #STATUS_COMPLETE}. */
    public int status() {
        return status;
    }

    /** "host:port" of the daemon holding the replica, as its {@link MooncakeStore#getHostname}. */
    public String location() {
        return location;
    }

    /** Bytes of the value. */
    public long size() {
        return size;
    }

    /** Mooncake's {@code is_memory_replica()}. */
    public boolean isMemoryReplica() {
        return kind == KIND_MEMORY;
    }

    /** Mooncake's {@code is_disk_replica()}: a replica on a daemon's SSD tier. */
    public boolean isDiskReplica() {
        return kind == KIND_DISK;
    }

    @Override
    public String toString() {
        return "ReplicaDescriptor(" + (isMemoryReplica() ? "memory" : "disk") + ", status " + status
                + ", " + location + ", " + size + " bytes)";
    }
}
