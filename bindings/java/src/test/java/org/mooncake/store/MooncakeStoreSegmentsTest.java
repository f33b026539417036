package org.mooncake.store;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Mooncake's segment calls and replica clearing through the Java binding (issue 17):
 * {@code batchReplicaClear}, {@code mountSegment}, {@code allocateAndMountSegment},
 * {@code unmountSegment} and {@code unmountLocalDiskSegment}, against a real master (its
 * read lease 300 ms) and daemon without an SSD tier (scripts/with-cluster.sh).
 */
public class MooncakeStoreSegmentsTest {
    @Rule
    public Timeout timeout = Timeout.seconds(60);

    private static final String RUN = "java-segments-" + ProcessHandle.current().pid();

    private static int code(org.junit.function.ThrowingRunnable r) {
        return assertThrows(MooncakeStoreException.class, r).code();
    }

    /** Clears key until its read lease has run out; the last code. */
    private static int clearWhenUnleased(MooncakeStore s, String key, String segment)
            throws InterruptedException {
        int rc = 0;
        for (long deadline = System.nanoTime() + 10_000_000_000L; System.nanoTime() < deadline;) {
            rc = s.batchReplicaClear(new String[] {key}, segment)[0];
            if (rc != MooncakeStoreException.OBJECT_HAS_LEASE) {
                break;
            }
            Thread.sleep(20);
        }
        return rc;
    }

    @Test
    public void replicaClearSkipsLeasedKeys() throws InterruptedException {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            String idle = RUN + "/idle", read = RUN + "/read";
            s.put(idle, new byte[100]);
            s.put(read, new byte[100]);
            s.get(read); // a read lease
            int[] codes = s.batchReplicaClear(new String[] {idle, read, RUN + "/missing"}, null);
            // A put a moment ago is in use for one lease too (docs/mooncake-api.md, "leases").
            assertArrayEquals(new int[] {MooncakeStoreException.OBJECT_HAS_LEASE,
                MooncakeStoreException.OBJECT_HAS_LEASE, MooncakeStoreException.OBJECT_NOT_FOUND},
                codes);
            assertEquals(0, clearWhenUnleased(s, idle, null));
            assertFalse(s.isExist(idle));
            assertEquals(0, clearWhenUnleased(s, read, ""));
            assertFalse(s.isExist(read));
            assertEquals(0, s.batchReplicaClear(new String[0], null).length);
        }
    }

    @Test
    public void replicaClearOnOneDaemon() throws InterruptedException {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            String key = RUN + "/one";
            s.put(key, new byte[100]);
            assertEquals(MooncakeStoreException.SEGMENT_NOT_FOUND, clearWhenUnleased(s, key, "127.0.0.1:1"));
            assertTrue(s.isExist(key));
            assertEquals(0, clearWhenUnleased(s, key, s.getHostname()));
            assertFalse(s.isExist(key));
        }
    }

    @Test
    public void replicaClearBadArguments() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> s.batchReplicaClear(null, null)));
            assertArrayEquals(new int[] {MooncakeStoreException.INVALID_PARAMS},
                    s.batchReplicaClear(new String[] {""}, null)); // a bad key: its own code
            assertEquals(MooncakeStoreException.INVALID_PARAMS,
                    code(() -> s.batchReplicaClear(new String[] {"k"}, "h".repeat(300))));
        }
    }

    /** Puts a few objects, unmounts the segment: every object is still there afterwards. */
    private static void lendAndUnmount(MooncakeStore s, long id, String prefix) {
        for (int i = 0; i < 8; i++) {
            s.put(prefix + i, new byte[4096]);
        }
        long[] drained = s.unmountSegment(id);
        assertEquals(2, drained.length);
        assertEquals(0, drained[1]); // the daemon's own 256 MB had room for whatever moved
        for (int i = 0; i < 8; i++) {
            assertEquals(4096, s.getSize(prefix + i));
        }
        assertEquals(MooncakeStoreException.SEGMENT_NOT_FOUND, code(() -> s.unmountSegment(id)));
    }

    @Test
    public void poolMemoryIsLent() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            ByteBuffer lent = s.allocate(4 << 20);
            long id = s.mountSegment(lent);
            assertTrue(id != 0);
            lendAndUnmount(s, id, RUN + "/pool-");
            s.free(lent);
        }
    }

    @Test
    public void daemonMemoryIsLent() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            long id = s.allocateAndMountSegment(4 << 20);
            lendAndUnmount(s, id, RUN + "/daemon-");
        }
    }

    @Test
    public void mountRefusals() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            ByteBuffer outside = ByteBuffer.allocateDirect(4096);
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.mountSegment(outside)));
            assertEquals(MooncakeStoreException.INVALID_PARAMS,
                    code(() -> s.mountSegment(ByteBuffer.allocate(4096)))); // not direct
            assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> s.mountSegment(null)));
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.allocateAndMountSegment(0)));
            assertEquals(MooncakeStoreException.SEGMENT_NOT_FOUND, code(() -> s.unmountSegment(12345)));
            s.unmountLocalDiskSegment(); // no SSD tier: nothing to unmount
            // Another store's segment is not this one's.
            long id = s.allocateAndMountSegment(1 << 20);
            try (MooncakeStore other = MooncakeStore.connect(null, 1 << 20)) {
                assertEquals(MooncakeStoreException.SEGMENT_NOT_FOUND, code(() -> other.unmountSegment(id)));
            }
            s.unmountSegment(id);
        }
    }

    @Test
    public void closedStoreRefuses() {
        MooncakeStore s = MooncakeStore.connect(null, 1 << 20);
        s.close();
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.allocateAndMountSegment(4096)));
        assertEquals(MooncakeStoreException.INVALID_PARAMS,
                code(() -> s.batchReplicaClear(new String[] {"k"}, null)));
    }
}
