package org.mooncake.store;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Tensors in Mooncake's layout (docs/mooncake-api.md, "Tensors") against a real master and
 * daemon: a round trip, the stored header field by field, put and upsert, misses, objects that
 * are not tensors, refusals that say why.
 */
public class MooncakeStoreTensorTest {
    @Rule
    public Timeout timeout = Timeout.seconds(60);

    private static MooncakeStore store;
    private static final String PREFIX = "java-tensor-" + ProcessHandle.current().pid() + "-";

    @BeforeClass
    public static void connect() {
        assertNotNull("run under scripts/with-cluster.sh", System.getenv("MOONCAKE_SOCKET"));
        store = MooncakeStore.connect(null, 16 << 20);
    }

    @AfterClass
    public static void disconnect() {
        if (store != null) {
            store.close();
        }
    }

    private static byte[] bytes(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 7 + 1);
        }
        return b;
    }

    @Test
    public void roundTripInMooncakesLayout() {
        Tensor t = new Tensor(Tensor.FLOAT32, new long[] {2, 3}, bytes(24));
        store.putTensor(PREFIX + "a", t);
        assertEquals(t, store.getTensor(PREFIX + "a"));
        ByteBuffer raw = ByteBuffer.wrap(store.get(PREFIX + "a")).order(ByteOrder.LITTLE_ENDIAN);
        assertEquals(304 + 24, raw.capacity());
        assertEquals(0x4d4f4f4e, raw.getInt(0)); // magic
        assertEquals(1, raw.getShort(4)); // version
        assertEquals(304, raw.getShort(6)); // header_size
        assertEquals(Tensor.FLOAT32, raw.getInt(8));
        assertEquals(2, raw.getInt(12)); // ndim
        assertEquals(0, raw.getInt(16)); // FULL
        assertEquals(304, raw.getLong(24)); // data_offset
        assertEquals(24, raw.getLong(32)); // data_bytes
        assertEquals(2, raw.getLong(40));
        assertEquals(3, raw.getLong(48));
        assertEquals(-1, raw.getLong(56)); // past ndim
        assertEquals(3, raw.getLong(112)); // local_shape[1]
        assertEquals(0, raw.getInt(168)); // no axes

        Tensor scalar = new Tensor(Tensor.INT64, new long[0], bytes(8));
        Tensor empty = new Tensor(Tensor.BFLOAT16, new long[] {0, 5}, new byte[0]);
        store.putTensor(PREFIX + "s", scalar);
        store.putTensor(PREFIX + "e", empty);
        assertEquals(scalar, store.getTensor(PREFIX + "s"));
        assertEquals(empty, store.getTensor(PREFIX + "e"));
        assertArrayEquals(new long[] {0, 5}, store.getTensor(PREFIX + "e").shape());
    }

    @Test
    public void putKeepsUpsertReplaces() {
        Tensor first = new Tensor(Tensor.INT8, new long[] {4}, bytes(4));
        Tensor second = new Tensor(Tensor.BOOL, new long[] {2}, new byte[] {1, 0});
        store.putTensor(PREFIX + "u", first);
        store.putTensor(PREFIX + "u", second);
        assertEquals(first, store.getTensor(PREFIX + "u"));
        store.upsertTensor(PREFIX + "u", second);
        assertEquals(second, store.getTensor(PREFIX + "u"));
    }

    @Test
    public void missesAndRefusalsSayWhy() {
        assertNull(store.getTensor(PREFIX + "missing"));
        store.put(PREFIX + "raw", new byte[500]);
        MooncakeStoreException e = assertThrows(MooncakeStoreException.class,
                () -> store.getTensor(PREFIX + "raw"));
        assertEquals(MooncakeStoreException.INVALID_PARAMS, e.code());
        assertTrue(e.detail(), e.detail().contains("magic"));

        Tensor wrongSize = new Tensor(Tensor.FLOAT64, new long[] {3}, bytes(16));
        e = assertThrows(MooncakeStoreException.class,
                () -> store.putTensor(PREFIX + "w", wrongSize));
        assertTrue(e.detail(), e.detail().contains("16 bytes"));
        assertNull(store.get(PREFIX + "w"));
        Tensor badType = new Tensor(99, new long[] {1}, bytes(1));
        e = assertThrows(MooncakeStoreException.class, badType::toBytes);
        assertTrue(e.detail(), e.detail().contains("dtype 99"));
        assertEquals(2, Tensor.elementSize(Tensor.FLOAT16));
        assertEquals(0, Tensor.elementSize(15));
    }
}
