package org.mooncake.store;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Every refusal says why (issue 30): a MooncakeStoreException carries the library's message
 * for the failed call (mooncake_store_errmsg) as its detail and in its message, against a
 * real master and daemon (scripts/with-cluster.sh).
 */
public class MooncakeStoreErrorsTest {
    @Rule
    public Timeout timeout = Timeout.seconds(60);

    private static MooncakeStore store;

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

    private static void assertCarries(MooncakeStoreException e, int code, String detail) {
        assertEquals(code, e.code());
        assertEquals(detail, e.detail());
        assertEquals(MooncakeStore.strerror(code) + ": " + detail, e.getMessage());
        assertTrue(e.toString(), e.toString().contains(detail));
    }

    @Test
    public void connectWithoutADaemonSaysWhereAndWhatToDo() throws Exception {
        Path dir = Files.createTempDirectory("mc-java-errors");
        String socket = dir.resolve("absent.sock").toString();
        try {
            MooncakeStoreException e = assertThrows(MooncakeStoreException.class,
                    () -> MooncakeStore.connect(socket, 1 << 20));
            assertCarries(e, MooncakeStoreException.RPC_FAIL, "mooncaked is not running at " + socket
                    + " (connect: No such file or directory): start it (systemctl start mooncaked) or "
                    + "point MOONCAKE_SOCKET / connect()'s socket_path at its --socket");
            assertEquals("connect", e.operation());
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    @Test
    public void keyErrorsNameTheRule() {
        byte[] value = "v".getBytes(StandardCharsets.UTF_8);
        assertCarries(assertThrows(MooncakeStoreException.class, () -> store.put("", value)),
                MooncakeStoreException.INVALID_PARAMS, "key is empty");
        char[] longKey = new char[4097];
        Arrays.fill(longKey, 'k');
        assertCarries(assertThrows(MooncakeStoreException.class, () -> store.put(new String(longKey), value)),
                MooncakeStoreException.INVALID_PARAMS, "key longer than 4096 bytes (4097)");
        assertCarries(assertThrows(MooncakeStoreException.class, () -> store.isExist("")),
                MooncakeStoreException.INVALID_PARAMS, "key is empty");
    }

    @Test
    public void theDaemonsReasonReachesTheException() {
        String key = "java-errors/" + ProcessHandle.current().pid() + "/eight-kib";
        store.put(key, new byte[8192]);
        try {
            ByteBuffer small = ByteBuffer.allocateDirect(100);
            assertCarries(assertThrows(MooncakeStoreException.class, () -> store.getInto(key, small)),
                    MooncakeStoreException.INVALID_PARAMS,
                    "the value is larger than the buffer of 100 bytes (get_size says how large)");
        } finally {
            store.remove(key, true);
        }
    }
}
