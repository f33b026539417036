package org.mooncake.store;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The sized put config of ABI 4 through the Java binding ({@link PutConfig}): the puts and
 * upserts that take it and {@code batchUpsertFrom}, against a real master and daemon
 * (scripts/with-cluster.sh).
 */
public class MooncakeStorePutConfigTest {
    @Rule
    public Timeout timeout = Timeout.seconds(120);

    private static final String RUN = "java-putcfg-" + ProcessHandle.current().pid();

    private static int code(org.junit.function.ThrowingRunnable r) {
        return assertThrows(MooncakeStoreException.class, r).code();
    }

    private static byte[] bytes(int n, int value) {
        byte[] b = new byte[n];
        Arrays.fill(b, (byte) value);
        return b;
    }

    @Test
    public void putsAndUpsertsWithAConfig() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            PutConfig c = new PutConfig();
            s.put(RUN + "/a", bytes(1000, 1), c);
            assertArrayEquals(bytes(1000, 1), s.get(RUN + "/a"));
            s.upsert(RUN + "/a", bytes(10, 2), c);
            assertArrayEquals(bytes(10, 2), s.get(RUN + "/a"));
            ByteBuffer buf = s.allocate(4096);
            buf.put(bytes(4096, 3)).flip();
            c.softPinAction = PutConfig.SOFT_PIN_ENABLE;
            c.softPinTtlMs = 60000L;
            c.withHardPin = true;
            c.preferAllocInSameNode = true;
            c.preferredSegments = Collections.singletonList(s.getHostname());
            c.groupIds = Collections.singletonList("");
            c.dataType = 1;
            s.putFrom(RUN + "/b", buf, c);
            assertArrayEquals(bytes(4096, 3), s.get(RUN + "/b"));
            s.upsertFrom(RUN + "/b", buf, new PutConfig());
            assertEquals(s.getHostname(), s.getReplicaDesc(RUN + "/b").get(0).location());
        }
    }

    @Test
    public void badAndUnsupportedConfigsAreRefused() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            String k = RUN + "/bad";
            PutConfig ttlWithoutEnable = new PutConfig();
            ttlWithoutEnable.softPinTtlMs = 5L;
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.put(k, bytes(10, 0), ttlWithoutEnable)));
            PutConfig zero = new PutConfig();
            zero.replicaNum = 0;
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.put(k, bytes(10, 0), zero)));
            List<PutConfig> unsupported = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                unsupported.add(new PutConfig());
            }
            unsupported.get(0).nofReplicaNum = 1;
            unsupported.get(1).dfsReplicaNum = 1;
            unsupported.get(2).preferredNofSegments = Collections.singletonList("nof");
            unsupported.get(3).hostId = "node";
            for (PutConfig c : unsupported) {
                assertEquals(-1012, code(() -> s.put(k, bytes(10, 0), c)));
            }
            PutConfig twoGroups = new PutConfig();
            twoGroups.groupIds = Arrays.asList("g", "h"); // two group ids for one key
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.put(k, bytes(10, 0), twoGroups)));
            assertFalse(s.isExist(k));
            assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> s.put(k, bytes(10, 0), null)));
            PutConfig nul = new PutConfig();
            nul.preferredSegment = "a\0b";
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.put(k, bytes(10, 0), nul)));
        }
    }

    @Test
    public void batchPutAndUpsertFrom() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            String[] keys = {RUN + "/b0", RUN + "/b1", RUN + "/b0"};
            ByteBuffer[] buffers = new ByteBuffer[3];
            for (int i = 0; i < 3; i++) {
                buffers[i] = s.allocate(100);
                buffers[i].put(bytes(100, 10 + i)).flip();
            }
            PutConfig c = new PutConfig();
            assertArrayEquals(new int[] {0, 0}, s.batchPutFrom(Arrays.copyOf(keys, 2), Arrays.copyOf(buffers, 2), c));
            assertArrayEquals(new int[] {0, 0, 0}, s.batchUpsertFrom(keys, buffers, c));
            assertArrayEquals(bytes(100, 12), s.get(keys[0])); // the later entry of the same key wins
            assertArrayEquals(bytes(100, 11), s.get(keys[1]));
            assertArrayEquals(new int[0], s.batchUpsertFrom(new String[0], new ByteBuffer[0], c));
            int[] r = s.batchUpsertFrom(new String[] {keys[1], ""}, Arrays.copyOf(buffers, 2), c);
            assertArrayEquals(new int[] {0, MooncakeStoreException.INVALID_PARAMS}, r);
            PutConfig dfs = new PutConfig();
            dfs.dfsReplicaNum = 1;
            assertArrayEquals(new int[] {-1012, -1012}, s.batchUpsertFrom(Arrays.copyOf(keys, 2),
                    Arrays.copyOf(buffers, 2), dfs));
            assertEquals(MooncakeStoreException.INVALID_PARAMS,
                    code(() -> s.batchUpsertFrom(keys, Arrays.copyOf(buffers, 2), c)));
        }
    }

    @Test
    public void oneWriterManyReadersSeeWholeValues() throws Exception {
        try (MooncakeStore s = MooncakeStore.connect(null, 32 << 20)) {
            int size = 32 * 1024;
            String[] keys = {RUN + "/t0", RUN + "/t1", RUN + "/t2"};
            PutConfig c = new PutConfig();
            for (String k : keys) {
                s.upsert(k, bytes(size, 0), c);
            }
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread writer = new Thread(() -> {
                try {
                    ByteBuffer[] buffers = new ByteBuffer[keys.length];
                    for (int v = 1; v <= 30; v++) {
                        for (int i = 0; i < keys.length; i++) {
                            buffers[i] = ByteBuffer.allocateDirect(size).put(bytes(size, v));
                            buffers[i].flip();
                        }
                        for (int r : s.batchUpsertFrom(keys, buffers, c)) {
                            assertEquals(0, r);
                        }
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            });
            List<Thread> readers = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                readers.add(new Thread(() -> {
                    try {
                        for (int n = 0; n < 40; n++) {
                            for (String k : keys) {
                                byte[] v = s.get(k);
                                assertEquals(size, v.length);
                                for (byte b : v) {
                                    assertEquals(v[0], b);
                                }
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            TestThreads.runAll(writer, readers, failure);
            assertArrayEquals(bytes(size, 30), s.get(keys[0]));
            assertTrue(s.isExist(keys[2]));
        }
    }
}
