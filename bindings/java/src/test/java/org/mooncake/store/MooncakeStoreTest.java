package org.mooncake.store;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Rule;
import org.junit.Test;
import org.junit.function.ThrowingRunnable;
import org.junit.rules.Timeout;

/**
 * The Java binding against a real master and daemon (scripts/with-cluster.sh exports
 * MOONCAKE_SOCKET, MOONCAKE_MASTER and MOONCAKE_HOSTNAME). Every test uses its own keys.
 */
public class MooncakeStoreTest {
    @Rule
    public Timeout timeout = Timeout.seconds(60);

    private static final AtomicInteger COUNTER = new AtomicInteger();
    private static MooncakeStore store;

    @BeforeClass
    public static void connect() {
        assertNotNull("run under scripts/with-cluster.sh", System.getenv("MOONCAKE_SOCKET"));
        store = MooncakeStore.connect(null, 64 << 20);
    }

    @AfterClass
    public static void disconnect() {
        if (store != null) {
            store.close();
        }
    }

    /** A key no other test (or run) uses. */
    private static String key(String name) {
        return "java-test/" + ProcessHandle.current().pid() + "/" + COUNTER.incrementAndGet() + "/" + name;
    }

    private static byte[] bytes(int size, long seed) {
        byte[] b = new byte[size];
        new Random(seed).nextBytes(b);
        return b;
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** The code of the MooncakeStoreException that r throws; checks its message too. */
    private static int code(ThrowingRunnable r) {
        MooncakeStoreException e = assertThrows(MooncakeStoreException.class, r);
        String strerror = MooncakeStore.strerror(e.code());
        assertEquals(e.detail() == null ? strerror : strerror + ": " + e.detail(), e.getMessage());
        assertTrue(e.toString(), e.toString().contains(strerror + " (" + e.code() + ")"));
        assertTrue(e.toString(), e.detail() == null || e.toString().endsWith(": " + e.detail()));
        return e.code();
    }

    private static byte[] contents(ByteBuffer buffer, int offset, int length) {
        byte[] out = new byte[length];
        buffer.duplicate().position(offset).get(out);
        return out;
    }

    // ---- loading and lifecycle -------------------------------------------------------------

    @Test
    public void nativeLibraryComesFromLibraryPath() {
        assertEquals("java.library.path", MooncakeStore.nativeLibrarySource());
    }

    /** A JVM with only the jar (and this test's classes) extracts the native code from it. */
    @Test
    public void jarLoadsNativeLibrary() throws Exception {
        String jar = System.getProperty("mooncake.test.jar");
        assertNotNull("-Dmooncake.test.jar=.../mooncake-store.jar", jar);
        String tests = new File(JarLoadCheck.class.getProtectionDomain().getCodeSource().getLocation().toURI())
                .getPath();
        Path tmp = Files.createTempDirectory("mooncake-jar-load");
        try {
            Process p = new ProcessBuilder(
                    Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Xcheck:jni", "-Djava.library.path=/nonexistent", "-Djava.io.tmpdir=" + tmp,
                    "-cp", jar + File.pathSeparator + tests, JarLoadCheck.class.getName())
                    .redirectErrorStream(true).start();
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            try (InputStream in = p.getInputStream()) {
                in.transferTo(out);
            }
            assertTrue(p.waitFor(30, TimeUnit.SECONDS));
            String output = out.toString(StandardCharsets.UTF_8);
            assertEquals(output, 0, p.exitValue());
            assertTrue(output, output.contains("source=jar:org/mooncake/store/native/" + NativeLoader.platform() + "/"));
            assertTrue(output, output.contains("roundtrip=ok"));
            assertFalse(output, output.contains("WARNING"));
            try (var left = Files.list(tmp)) {
                assertEquals("extracted files are deleted", 0, left.count());
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    @Test
    public void connectDefaultExplicitAndEmptySocket() {
        String socket = System.getenv("MOONCAKE_SOCKET");
        for (String path : new String[] {socket, "", null}) {
            try (MooncakeStore s = MooncakeStore.connect(path, 1 << 20)) {
                assertEquals(MooncakeStore.HEALTH_OK, s.healthCheck());
                assertEquals(1 << 20, s.localBufferSize());
            }
        }
    }

    @Test
    public void connectFailures() {
        assertEquals(MooncakeStoreException.RPC_FAIL,
                code(() -> MooncakeStore.connect("/nonexistent/mooncaked.sock", 1 << 20)));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> MooncakeStore.connect(null, -1)));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> MooncakeStore.connect("a\0b", 1 << 20)));
    }

    @Test
    public void hostnameAndHealth() {
        assertEquals(System.getenv("MOONCAKE_HOSTNAME"), store.getHostname());
        assertEquals(MooncakeStore.HEALTH_OK, store.healthCheck());
    }

    @Test
    public void closedStore() {
        MooncakeStore s = MooncakeStore.connect(null, 1 << 20);
        ByteBuffer buffer = s.allocate(64);
        s.close();
        s.close(); // safe twice
        assertEquals(MooncakeStore.HEALTH_NOT_CONNECTED, s.healthCheck());
        MooncakeStoreException e = assertThrows(MooncakeStoreException.class, () -> s.put(key("closed"), utf8("x")));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, e.code());
        assertEquals("put", e.operation());
        assertEquals("store is closed", e.detail());
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.get("k")));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(s::getHostname));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.allocate(64)));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.removeAll(false)));
        s.free(buffer); // no-op: close freed the pool
    }

    @Test
    public void errorCodesMatchTheCLibrary() throws Exception {
        int seen = 0;
        for (Field f : MooncakeStoreException.class.getFields()) {
            if (f.getType() == int.class && Modifier.isStatic(f.getModifiers())) {
                int code = f.getInt(null);
                assertNotEquals(f.getName(), "unknown error code", MooncakeStore.strerror(code));
                seen++;
            }
        }
        assertEquals(43, seen);
        assertEquals("object not found", MooncakeStore.strerror(MooncakeStoreException.OBJECT_NOT_FOUND));
        assertEquals("unknown error code", MooncakeStore.strerror(12345));
        MooncakeStoreException e = new MooncakeStoreException(-600, "op", "why");
        assertEquals("org.mooncake.store.MooncakeStoreException: op: invalid parameters (-600): why", e.toString());
        assertTrue(e instanceof RuntimeException);
    }

    // ---- put / get -------------------------------------------------------------------------

    @Test
    public void putGetAndMiss() {
        String k = key("put-get");
        assertNull(store.get(k));
        byte[] value = bytes(1000, 1);
        store.put(k, value);
        assertArrayEquals(value, store.get(k));
        store.put(k, bytes(10, 2)); // puts never overwrite: returns normally, keeps the value
        assertArrayEquals(value, store.get(k));
        assertEquals(1000, store.getSize(k));
        byte[] one = {42};
        String k1 = key("one-byte");
        store.put(k1, one);
        assertArrayEquals(one, store.get(k1));
    }

    @Test
    public void keysAreUtf8() {
        String k = key("ключ-日本-🚀-é");
        byte[] value = utf8("unicode key");
        store.put(k, value);
        assertArrayEquals(value, store.get(k));
        assertTrue(store.isExist(k));
        assertFalse(store.isExist(k.replace("é", "e")));
        // the C library sees the UTF-8 bytes: a key of exactly 4096 bytes with 2-byte characters
        String prefix = key("");
        StringBuilder sb = new StringBuilder(prefix);
        while (utf8(sb.toString()).length + 2 <= 4096) {
            sb.append('é');
        }
        while (utf8(sb.toString()).length < 4096) {
            sb.append('x');
        }
        String longest = sb.toString();
        assertEquals(4096, utf8(longest).length);
        store.put(longest, value);
        assertArrayEquals(value, store.get(longest));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.put(longest + "x", value)));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.put("", value)));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.put("a\0b", value)));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.get("lone\ud800surrogate")));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.isExist("\udc00")));
    }

    @Test
    public void invalidArguments() {
        String k = key("invalid");
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.put(k, new byte[0])));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.put(null, utf8("v"))));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.put(k, null)));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.get(null)));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.putFrom(k, null)));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.getInto(k, null)));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.removeByRegex(null, false)));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.free(null)));
        assertFalse(store.isExist(k));
    }

    /** Values larger than the pool go through the library's chunked staging. */
    @Test
    public void valuesLargerThanThePool() {
        try (MooncakeStore small = MooncakeStore.connect(null, 1 << 20)) {
            String k = key("large");
            byte[] value = bytes(5 << 20, 3);
            small.put(k, value);
            assertEquals(value.length, small.getSize(k));
            assertArrayEquals(value, small.get(k));
            ByteBuffer direct = ByteBuffer.allocateDirect(value.length);
            assertEquals(value.length, small.getInto(k, direct));
            assertArrayEquals(value, contents(direct, 0, value.length));
            String k2 = key("large-from");
            small.putFrom(k2, direct);
            assertArrayEquals(value, store.get(k2));
        }
    }

    @Test
    public void storeWithoutPool() {
        try (MooncakeStore none = MooncakeStore.connect(null, 0)) {
            String k = key("no-pool");
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> none.put(k, utf8("v"))));
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> none.allocate(64)));
            store.put(k, utf8("v"));
            assertTrue(none.isExist(k));
            assertEquals(1, none.getSize(k));
            assertTrue(none.remove(k, true)); // getSize took a read lease
        }
    }

    // ---- direct buffers and pool memory ------------------------------------------------------

    @Test
    public void allocateIsZeroCopyPoolMemory() {
        ByteBuffer src = store.allocate(4096);
        ByteBuffer dst = store.allocate(4096);
        try {
            assertTrue(src.isDirect());
            assertEquals(4096, src.capacity());
            assertEquals(0, src.position());
            assertEquals(4096, src.limit());
            byte[] data = bytes(4096, 4);
            src.put(data).clear();
            // putFrom stores position..limit and leaves the buffer as it was
            src.position(10).limit(110);
            String k = key("pool");
            store.putFrom(k, src);
            assertEquals(10, src.position());
            assertEquals(110, src.limit());
            assertEquals(100, store.getSize(k));
            assertArrayEquals(Arrays.copyOfRange(data, 10, 110), store.get(k));
            // getInto writes at the position and does not move it
            dst.position(5);
            assertEquals(100, store.getInto(k, dst));
            assertEquals(5, dst.position());
            assertArrayEquals(Arrays.copyOfRange(data, 10, 110), contents(dst, 5, 100));
            // a slice of pool memory is pool memory too
            ByteBuffer slice = dst.duplicate().position(1000).limit(1100).slice();
            assertEquals(100, store.getInto(k, slice));
            assertArrayEquals(Arrays.copyOfRange(data, 10, 110), contents(dst, 1000, 100));
        } finally {
            store.free(src);
            store.free(dst);
        }
    }

    @Test
    public void allocateAndFreeRules() {
        try (MooncakeStore s = MooncakeStore.connect(null, 1 << 20)) {
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.allocate(0)));
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.allocate(-1)));
            assertEquals(MooncakeStoreException.NO_AVAILABLE_HANDLE, code(() -> s.allocate(2 << 20)));
            ByteBuffer a = s.allocate(512 << 10);
            ByteBuffer b = s.allocate(512 << 10);
            assertEquals(MooncakeStoreException.NO_AVAILABLE_HANDLE, code(() -> s.allocate(512 << 10)));
            s.free(a);
            ByteBuffer c = s.allocate(512 << 10); // the freed block is available again
            s.free(c);
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.free(c))); // double free
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.free(ByteBuffer.allocateDirect(64))));
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.free(ByteBuffer.allocate(64))));
            ByteBuffer offset = b.duplicate().position(64).slice();
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.free(offset)));
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.free(b))); // another store's
            s.free(b.duplicate()); // a duplicate starts at the same byte
            ByteBuffer whole = s.allocate(1 << 20);
            s.free(whole);
        }
    }

    @Test
    public void directBuffersOutsideThePool() {
        String k = key("direct");
        byte[] data = bytes(70_000, 5);
        ByteBuffer src = ByteBuffer.allocateDirect(data.length).put(data).flip();
        store.putFrom(k, src);
        assertEquals(0, src.position());
        ByteBuffer dst = ByteBuffer.allocateDirect(data.length + 100);
        assertEquals(data.length, store.getInto(k, dst));
        assertArrayEquals(data, contents(dst, 0, data.length));
        // read-only direct buffers can be stored but not read into
        String k2 = key("read-only");
        store.putFrom(k2, src.asReadOnlyBuffer());
        assertArrayEquals(data, store.get(k2));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.getInto(k, dst.asReadOnlyBuffer())));
        // heap buffers are refused
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.putFrom(key("heap"), ByteBuffer.wrap(data))));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.getInto(k, ByteBuffer.allocate(data.length))));
        // too small: INVALID_PARAMS; a miss: -1; nothing to store: INVALID_PARAMS
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.getInto(k, ByteBuffer.allocateDirect(10))));
        assertEquals(-1, store.getInto(key("missing"), dst));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.putFrom(key("empty"), dst.duplicate().limit(0))));
    }

    // ---- batches ------------------------------------------------------------------------------

    @Test
    public void batchPutGetAndExist() {
        int n = 6;
        String[] keys = new String[n];
        ByteBuffer[] src = new ByteBuffer[n];
        byte[][] data = new byte[n][];
        for (int i = 0; i < n; i++) {
            keys[i] = key("batch-" + i);
            data[i] = bytes(100 + 1000 * i, 10 + i);
            // half from the pool, half plain direct buffers
            src[i] = i % 2 == 0 ? store.allocate(data[i].length) : ByteBuffer.allocateDirect(data[i].length);
            src[i].put(data[i]).flip();
        }
        try {
            assertArrayEquals(new int[n], store.batchPutFrom(keys, src));
            boolean[] expected = new boolean[n + 1];
            Arrays.fill(expected, 0, n, true);
            String[] withMissing = Arrays.copyOf(keys, n + 1);
            withMissing[n] = key("batch-missing");
            assertArrayEquals(expected, store.batchIsExist(withMissing));

            ByteBuffer[] dst = new ByteBuffer[n];
            for (int i = 0; i < n; i++) {
                dst[i] = ByteBuffer.allocateDirect(data[i].length + 7);
            }
            int[] read = store.batchGetInto(keys, dst);
            for (int i = 0; i < n; i++) {
                assertEquals(data[i].length, read[i]);
                assertArrayEquals(data[i], contents(dst[i], 0, data[i].length));
            }
        } finally {
            for (int i = 0; i < n; i += 2) {
                store.free(src[i]);
            }
        }
    }

    @Test
    public void batchEntriesFailAlone() {
        String good = key("batch-good");
        byte[] data = bytes(500, 20);
        ByteBuffer buf = ByteBuffer.allocateDirect(500).put(data).flip();
        String[] keys = {good, null, "bad\0key", key("batch-heap"), key("batch-null-buffer"), key("batch-empty")};
        ByteBuffer[] bufs = {buf, buf, buf, ByteBuffer.wrap(data), null, buf.duplicate().limit(0)};
        int[] put = store.batchPutFrom(keys, bufs);
        assertArrayEquals(new int[] {0, -1, -600, -600, -1, -600}, put);
        assertArrayEquals(data, store.get(good));

        String[] getKeys = {good, key("batch-miss"), good, null, good, good};
        ByteBuffer[] dsts = {ByteBuffer.allocateDirect(600), ByteBuffer.allocateDirect(600), ByteBuffer.allocateDirect(10),
            ByteBuffer.allocateDirect(600), ByteBuffer.allocateDirect(600).asReadOnlyBuffer(), null};
        int[] got = store.batchGetInto(getKeys, dsts);
        assertArrayEquals(new int[] {500, MooncakeStoreException.OBJECT_NOT_FOUND, -600, -1, -600, -1}, got);
        assertArrayEquals(data, contents(dsts[0], 0, 500));

        assertEquals(0, store.batchPutFrom(new String[0], new ByteBuffer[0]).length);
        assertEquals(0, store.batchGetInto(new String[0], new ByteBuffer[0]).length);
        assertEquals(0, store.batchIsExist(new String[0]).length);
        assertEquals(MooncakeStoreException.INVALID_PARAMS,
                code(() -> store.batchPutFrom(new String[] {good}, new ByteBuffer[0])));
        assertEquals(MooncakeStoreException.INVALID_PARAMS,
                code(() -> store.batchGetInto(new String[0], new ByteBuffer[] {buf})));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.batchPutFrom(null, new ByteBuffer[0])));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.batchIsExist(null)));
        assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> store.batchIsExist(new String[] {good, null})));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.batchIsExist(new String[] {good, ""})));
    }

    // ---- query and remove ----------------------------------------------------------------------

    @Test
    public void existSizeAndRemove() {
        String k = key("remove");
        assertFalse(store.isExist(k));
        assertEquals(-1, store.getSize(k));
        assertFalse(store.remove(k, false));
        store.put(k, bytes(321, 6));
        assertTrue(store.remove(k, false)); // never read: no lease
        assertFalse(store.isExist(k));
        store.put(k, bytes(321, 6));
        assertTrue(store.isExist(k)); // no read lease: only eviction is held off, briefly
        assertEquals(321, store.getSize(k));
        assertTrue(store.remove(k, true));
        assertFalse(store.isExist(k));
        assertNull(store.get(k));
        assertFalse(store.remove(k, true));
        store.put(k, utf8("again")); // the key is free again
        assertArrayEquals(utf8("again"), store.get(k));
        assertTrue(store.remove(k, true));
    }

    @Test
    public void removeByRegexAndRemoveAll() {
        String prefix = key("regex");
        for (int i = 0; i < 5; i++) {
            store.put(prefix + "/a/" + i, utf8("a" + i));
        }
        for (int i = 0; i < 3; i++) {
            store.put(prefix + "/b/" + i, utf8("b" + i));
        }
        String quoted = prefix.replaceAll("[^A-Za-z0-9]", "\\\\$0");
        assertEquals(5, store.removeByRegex("^" + quoted + "/a/", false));
        assertFalse(store.isExist(prefix + "/a/0"));
        assertTrue(store.isExist(prefix + "/b/0"));
        assertEquals(0, store.removeByRegex("^" + quoted + "/a/", false));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> store.removeByRegex("(", false)));
        assertTrue(store.removeAll(false) >= 2); // b/1 and b/2 were never queried: no lease
        assertFalse(store.isExist(prefix + "/b/2"));
        String read = key("read");
        store.put(read, utf8("leased"));
        assertArrayEquals(utf8("leased"), store.get(read));
        store.removeAll(false); // keeps the leased key
        assertTrue(store.isExist(read));
        assertTrue(store.removeAll(true) >= 1);
        assertFalse(store.isExist(read));
    }

    /** A read takes a lease (the suite's master: --default_kv_lease_ttl=300ms). */
    @Test
    public void leaseBlocksRemoveWithoutForce() throws Exception {
        String k = key("lease");
        store.put(k, utf8("v"));
        assertArrayEquals(utf8("v"), store.get(k));
        assertEquals(MooncakeStoreException.OBJECT_HAS_LEASE, code(() -> store.remove(k, false)));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                assertTrue(store.remove(k, false));
                break;
            } catch (MooncakeStoreException e) {
                assertEquals(MooncakeStoreException.OBJECT_HAS_LEASE, e.code());
                assertTrue("the lease never expired", System.nanoTime() < deadline);
                Thread.sleep(50);
            }
        }
        assertFalse(store.isExist(k));
    }

    // ---- threads ---------------------------------------------------------------------------------

    /** 8 threads share one store and use every data path at once. */
    @Test
    public void eightThreadsShareOneStore() throws Exception {
        int threads = 8;
        int rounds = 150;
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong operations = new AtomicLong();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int id = t;
            Thread w = new Thread(() -> {
                try {
                    start.await();
                    Random random = new Random(id);
                    for (int r = 0; r < rounds; r++) {
                        String base = key("mt-" + id + "-" + r);
                        byte[] value = bytes(1 + random.nextInt(200_000), id * 1000L + r);
                        store.put(base, value);
                        assertArrayEquals(value, store.get(base));
                        assertTrue(store.isExist(base));
                        assertEquals(value.length, store.getSize(base));

                        ByteBuffer pool = store.allocate(value.length);
                        try {
                            pool.put(value).flip();
                            store.putFrom(base + "/z", pool);
                            pool.clear();
                            pool.put(0, (byte) ~value[0]);
                            assertEquals(value.length, store.getInto(base + "/z", pool));
                            assertArrayEquals(value, contents(pool, 0, value.length));
                        } finally {
                            store.free(pool);
                        }

                        String[] keys = {base + "/b0", base + "/b1", base + "/b2"};
                        ByteBuffer[] bufs = new ByteBuffer[3];
                        for (int i = 0; i < 3; i++) {
                            bufs[i] = ByteBuffer.allocateDirect(100 + i).put(bytes(100 + i, r + i)).flip();
                        }
                        assertArrayEquals(new int[3], store.batchPutFrom(keys, bufs));
                        ByteBuffer[] outs = {ByteBuffer.allocateDirect(200), ByteBuffer.allocateDirect(200),
                            ByteBuffer.allocateDirect(200)};
                        assertArrayEquals(new int[] {100, 101, 102}, store.batchGetInto(keys, outs));
                        for (int i = 0; i < 3; i++) {
                            assertArrayEquals(bytes(100 + i, r + i), contents(outs[i], 0, 100 + i));
                        }
                        assertArrayEquals(new boolean[] {true, true, true}, store.batchIsExist(keys));
                        assertTrue(store.remove(base, true)); // the get above holds a read lease
                        assertNull(store.get(base));
                        assertEquals(System.getenv("MOONCAKE_HOSTNAME"), store.getHostname());
                        operations.addAndGet(15);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            });
            workers.add(w);
            w.start();
        }
        long t0 = System.nanoTime();
        start.countDown();
        for (Thread w : workers) {
            w.join();
        }
        if (failure.get() != null) {
            throw new AssertionError("a worker failed", failure.get());
        }
        System.out.printf("eightThreadsShareOneStore: %d operations in %.2f s%n", operations.get(),
                (System.nanoTime() - t0) / 1e9);
        assertEquals((long) threads * rounds * 15, operations.get());
    }

    /**
     * get() while another thread replaces the key with values of other sizes: every read is a
     * miss or one whole value (get retries when the size changes between its two calls).
     * The race runs 1.5 s, and on a loaded machine on until a read has seen a value (30 s at
     * most), so that the check is never vacuous.
     */
    @Test
    public void getRacesWithReplacement() throws Exception {
        String k = key("race");
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicInteger hits = new AtomicInteger();
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
        long last = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        BooleanSupplier racing = () -> {
            long now = System.nanoTime();
            return now < end || (hits.get() == 0 && now < last);
        };
        Thread writer = new Thread(() -> {
            Random random = new Random(7);
            try {
                while (racing.getAsBoolean()) {
                    int size = 1 + random.nextInt(100_000);
                    byte[] value = new byte[size];
                    Arrays.fill(value, (byte) size);
                    store.put(k, value);
                    store.remove(k, true);
                }
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            }
        });
        List<Thread> readers = new ArrayList<>();
        for (int t = 0; t < 3; t++) {
            readers.add(new Thread(() -> {
                try {
                    while (racing.getAsBoolean()) {
                        byte[] v;
                        try {
                            v = store.get(k);
                        } catch (MooncakeStoreException e) {
                            assertEquals(MooncakeStoreException.REPLICA_IS_NOT_READY, e.code());
                            continue;
                        }
                        if (v != null) {
                            for (byte b : v) {
                                assertEquals((byte) v.length, b);
                            }
                            hits.incrementAndGet();
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        TestThreads.runAll(writer, readers, failure);
        assertTrue("no read saw a value", hits.get() > 0);
    }

    /** close() while 8 threads are busy: they end with MooncakeStoreException, never a crash. */
    @Test
    public void closeWhileThreadsRun() throws Exception {
        MooncakeStore s = MooncakeStore.connect(null, 8 << 20);
        int threads = 8;
        CountDownLatch running = new CountDownLatch(threads);
        AtomicReference<Throwable> unexpected = new AtomicReference<>();
        AtomicInteger ended = new AtomicInteger();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int id = t;
            Thread w = new Thread(() -> {
                byte[] value = bytes(64 << 10, id);
                ByteBuffer direct = ByteBuffer.allocateDirect(64 << 10);
                boolean first = true;
                try {
                    for (int i = 0; ; i++) {
                        String k = key("close-" + id + "-" + i);
                        s.put(k, value);
                        s.getInto(k, direct);
                        s.remove(k, true);
                        if (first) {
                            running.countDown();
                            first = false;
                        }
                    }
                } catch (MooncakeStoreException e) {
                    int c = e.code();
                    if (c != MooncakeStoreException.INVALID_PARAMS && c != MooncakeStoreException.RPC_FAIL) {
                        unexpected.compareAndSet(null, e);
                    }
                    ended.incrementAndGet();
                } catch (Throwable e) {
                    unexpected.compareAndSet(null, e);
                } finally {
                    if (first) {
                        running.countDown();
                    }
                }
            });
            workers.add(w);
            w.start();
        }
        assertTrue(running.await(20, TimeUnit.SECONDS));
        s.close();
        for (Thread w : workers) {
            w.join(20_000);
            assertFalse(w.isAlive());
        }
        if (unexpected.get() != null) {
            throw new AssertionError("unexpected failure", unexpected.get());
        }
        assertEquals(threads, ended.get());
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.get("x")));
        assertEquals(MooncakeStore.HEALTH_OK, store.healthCheck()); // other stores are unaffected
    }
}
