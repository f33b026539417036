package org.mooncake.store;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Tenants through the Java binding ({@code MooncakeStore.connect(socket, size, tenantId)},
 * i.e. {@code mooncake_store_set_tenant}): the same key in two tenants is two objects, and no
 * removal of one reaches the other's keys or the default tenant's. Against a real master and
 * daemon (scripts/with-cluster.sh).
 */
public class MooncakeStoreTenantTest {
    @Rule
    public Timeout timeout = Timeout.seconds(60);

    private static final String RUN = "java-" + ProcessHandle.current().pid();

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static int code(org.junit.function.ThrowingRunnable r) {
        return assertThrows(MooncakeStoreException.class, r).code();
    }

    @Test
    public void sameKeyInTwoTenantsIsTwoObjects() {
        String key = RUN + "/shared";
        try (MooncakeStore a = MooncakeStore.connect(null, 16 << 20, RUN + "-a");
                MooncakeStore b = MooncakeStore.connect(null, 16 << 20, RUN + "-b");
                MooncakeStore plain = MooncakeStore.connect(null, 16 << 20)) {
            a.put(key, utf8("of a"));
            b.put(key, utf8("of b"));
            assertArrayEquals(utf8("of a"), a.get(key));
            assertArrayEquals(utf8("of b"), b.get(key));
            assertNull(plain.get(key)); // a miss in the default tenant
            assertFalse(plain.isExist(key));

            // Forced: the reads above hold read leases.
            assertTrue(a.remove(key, true));
            assertArrayEquals(utf8("of b"), b.get(key));
            a.put(key + "/2", utf8("of a"));
            assertEquals(1, a.removeByRegex("^" + java.util.regex.Pattern.quote(RUN) + "/", true));
            assertEquals(0, a.removeAll(true));
            assertArrayEquals(utf8("of b"), b.get(key));
            assertEquals(1, b.removeAll(true));
            assertFalse(b.isExist(key));
        }
    }

    @Test
    public void malformedTenantIdsAreRefused() {
        for (String bad : new String[] {"a b", "a/b", "é", "x".repeat(65), "a\0b"}) {
            assertEquals(bad, MooncakeStoreException.INVALID_PARAMS,
                    code(() -> MooncakeStore.connect(null, 1 << 20, bad)));
        }
        try (MooncakeStore s = MooncakeStore.connect(null, 1 << 20, "x".repeat(64))) {
            assertEquals(MooncakeStore.HEALTH_OK, s.healthCheck());
        }
        try (MooncakeStore s = MooncakeStore.connect(null, 1 << 20, "")) { // names none
            assertEquals(MooncakeStore.HEALTH_OK, s.healthCheck());
        }
    }
}
