package org.mooncake.store;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Ranged reads through the Java binding (issue 17, part ranges): {@code getRanges} and
 * {@code batchGetRanges} over mooncake_store_get_ranges / _batch_get_ranges, against a real
 * master and daemon (scripts/with-cluster.sh): fragments into pool and plain direct memory,
 * a miss, fragments past the value or the buffer, argument rules, one writer with reader
 * threads.
 */
public class MooncakeStoreRangesTest {
    @Rule
    public Timeout timeout = Timeout.seconds(60);

    private static final String RUN = "java-ranges-" + ProcessHandle.current().pid();
    private static final long INVALID = MooncakeStoreException.INVALID_PARAMS;
    private static final long MISS = MooncakeStoreException.OBJECT_NOT_FOUND;

    private static byte[] value(long seed, int size) {
        byte[] v = new byte[size];
        new Random(seed).nextBytes(v);
        return v;
    }

    private static byte[] bytesAt(ByteBuffer b, int at, int n) {
        byte[] out = new byte[n];
        b.duplicate().position(b.position() + at).get(out);
        return out;
    }

    private static byte[] slice(byte[] v, int from, int n) {
        byte[] out = new byte[n];
        System.arraycopy(v, from, out, 0, n);
        return out;
    }

    @Test
    public void fragmentsIntoPoolAndPlainMemory() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            byte[] v = value(1, 1 << 20);
            s.put(RUN + "/a", v);
            long[] src = {0, 777, (1 << 20) - 4096, 5};
            long[] len = {4096, 1000, 4096, 0};
            long[] dst = {0, 8192, 20000, 3};
            for (ByteBuffer b : new ByteBuffer[] {s.allocate(64 << 10), ByteBuffer.allocateDirect(64 << 10)}) {
                b.position(16);  // destinations count from the position
                assertArrayEquals(new long[] {4096, 1000, 4096, 0}, s.getRanges(RUN + "/a", b, src, len, dst));
                assertEquals(16, b.position());
                for (int k = 0; k < 3; k++) {
                    assertArrayEquals(slice(v, (int) src[k], (int) len[k]), bytesAt(b, (int) dst[k], (int) len[k]));
                }
            }
        }
    }

    @Test
    public void missesAndBadFragments() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            s.put(RUN + "/bad", value(2, 4096));
            ByteBuffer b = ByteBuffer.allocateDirect(4096);
            assertArrayEquals(new long[] {MISS, MISS},
                    s.getRanges(RUN + "/never-put", b, new long[] {0, 1}, new long[] {1, 1}, new long[] {0, 1}));
            // past the value, past the buffer, fine
            assertArrayEquals(new long[] {INVALID, INVALID, 10},
                    s.getRanges(RUN + "/bad", b, new long[] {4090, 0, 0}, new long[] {10, 10, 10},
                            new long[] {0, 4090, 0}));
            assertEquals(0, s.getRanges(RUN + "/bad", b, new long[0], new long[0], new long[0]).length);
        }
    }

    @Test
    public void argumentRules() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            ByteBuffer b = ByteBuffer.allocateDirect(16);
            long[] one = {0};
            assertThrows(MooncakeStoreException.class, () -> s.getRanges(null, b, one, one, one));
            assertThrows(MooncakeStoreException.class, () -> s.getRanges("", b, one, one, one));
            assertThrows(MooncakeStoreException.class, () -> s.getRanges("k", ByteBuffer.allocate(16), one, one, one));
            assertThrows(MooncakeStoreException.class, () -> s.getRanges("k", b, one, new long[2], one));
            assertThrows(MooncakeStoreException.class, () -> s.getRanges("k", b, null, one, one));
            assertThrows(MooncakeStoreException.class,
                    () -> s.batchGetRanges(new String[] {"k"}, new ByteBuffer[] {b}, new long[0][], new long[0][],
                            new long[0][]));
        }
    }

    @Test
    public void batchOfSeveralKeys() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            byte[] a = value(3, 100_000), c = value(4, 50_000);
            s.put(RUN + "/ba", a);
            s.put(RUN + "/bc", c);
            ByteBuffer b0 = ByteBuffer.allocateDirect(8192), b1 = s.allocate(8192), b2 = ByteBuffer.allocateDirect(8);
            long[][] r = s.batchGetRanges(
                    new String[] {RUN + "/ba", RUN + "/bc", RUN + "/ba", ""},
                    new ByteBuffer[] {b0, b1, b2, b2},
                    new long[][] {{0, 99_000}, {49_000}, {99_992}, {0}},
                    new long[][] {{4096, 1000}, {1000}, {8}, {1}},
                    new long[][] {{0, 5000}, {0}, {0}, {0}});
            assertArrayEquals(new long[] {4096, 1000}, r[0]);
            assertArrayEquals(new long[] {1000}, r[1]);
            assertArrayEquals(new long[] {8}, r[2]);
            assertArrayEquals(new long[] {INVALID}, r[3]);  // a bad key refuses its fragments
            assertArrayEquals(slice(a, 0, 4096), bytesAt(b0, 0, 4096));
            assertArrayEquals(slice(a, 99_000, 1000), bytesAt(b0, 5000, 1000));
            assertArrayEquals(slice(c, 49_000, 1000), bytesAt(b1, 0, 1000));
            assertArrayEquals(slice(a, 99_992, 8), bytesAt(b2, 0, 8));
        }
    }

    @Test
    public void oneWriterManyReaders() throws Exception {
        final int keys = 16, size = 32 << 10, readers = 3;
        try (MooncakeStore s = MooncakeStore.connect(null, 32 << 20)) {
            AtomicInteger errors = new AtomicInteger();
            Thread writer = new Thread(() -> {
                for (int i = 0; i < keys; i++) {
                    s.put(RUN + "/w" + i, value(100 + i, size));
                }
            });
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < readers; t++) {
                final int id = t;
                threads.add(new Thread(() -> {
                    ByteBuffer b = ByteBuffer.allocateDirect(2048);
                    boolean[] done = new boolean[keys];
                    int left = keys;
                    long deadline = System.nanoTime() + 50_000_000_000L;
                    while (left > 0 && System.nanoTime() < deadline) {
                        for (int i = 0; i < keys; i++) {
                            if (done[i]) {
                                continue;
                            }
                            long src = (id * 131L + i) % (size - 1024);
                            long[] r = s.getRanges(RUN + "/w" + i, b, new long[] {src, size - 1024},
                                    new long[] {1024, 1024}, new long[] {0, 1024});
                            if (r[0] == MISS || r[0] == MooncakeStoreException.REPLICA_IS_NOT_READY) {
                                continue;
                            }
                            byte[] v = value(100 + i, size);
                            if (r[0] != 1024 || r[1] != 1024
                                    || !java.util.Arrays.equals(slice(v, (int) src, 1024), bytesAt(b, 0, 1024))
                                    || !java.util.Arrays.equals(slice(v, size - 1024, 1024), bytesAt(b, 1024, 1024))) {
                                errors.incrementAndGet();
                            }
                            done[i] = true;
                            left--;
                        }
                    }
                    if (left > 0) {
                        errors.incrementAndGet();
                    }
                }));
            }
            for (Thread t : threads) {
                t.start();
            }
            writer.start();
            writer.join();
            for (Thread t : threads) {
                t.join();
            }
            assertEquals(0, errors.get());
        }
    }
}
