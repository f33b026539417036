package org.mooncake.store;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * The SSD tier through the Java binding (issue 14): {@code getReplicaDesc},
 * {@code batchGetReplicaDesc} and {@code setSsdOffload}, against a real master and daemon
 * (scripts/with-cluster.sh), which have no SSD tier: every replica is a memory one. Disk
 * replicas: MooncakeStoreReplicaDiskTest.
 */
public class MooncakeStoreReplicaTest {
    @Rule
    public Timeout timeout = Timeout.seconds(60);

    private static final String RUN = "java-replica-" + ProcessHandle.current().pid();

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static int code(org.junit.function.ThrowingRunnable r) {
        return assertThrows(MooncakeStoreException.class, r).code();
    }

    @Test
    public void memoryReplicaIsDescribed() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            String key = RUN + "/one";
            s.put(key, new byte[1000]);
            List<ReplicaDescriptor> replicas = s.getReplicaDesc(key);
            assertEquals(1, replicas.size());
            ReplicaDescriptor r = replicas.get(0);
            assertTrue(r.isMemoryReplica());
            assertFalse(r.isDiskReplica());
            assertEquals(ReplicaDescriptor.KIND_MEMORY, r.kind());
            assertEquals(ReplicaDescriptor.STATUS_COMPLETE, r.status());
            assertEquals(s.getHostname(), r.location());
            assertEquals(1000, r.size());
            assertThrows(UnsupportedOperationException.class, () -> replicas.add(r));
        }
    }

    @Test
    public void missesAndBadKeys() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            assertTrue(s.getReplicaDesc(RUN + "/never-put").isEmpty());
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.getReplicaDesc("")));
            assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> s.getReplicaDesc(null)));
            assertEquals(MooncakeStoreException.INTERNAL_ERROR, code(() -> s.batchGetReplicaDesc(null)));
            assertEquals(MooncakeStoreException.INVALID_PARAMS,
                    code(() -> s.batchGetReplicaDesc(new String[] {"ok", "a\0b"})));
            assertTrue(s.batchGetReplicaDesc(new String[0]).isEmpty());
        }
    }

    @Test
    public void batchMapsFoundKeysInOrder() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            String[] keys = new String[2100];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = RUN + "/batch-" + i;
            }
            int[] present = {0, 1023, 1024, 2099};
            for (int i : present) {
                s.put(keys[i], utf8(keys[i]));
            }
            Map<String, List<ReplicaDescriptor>> found = s.batchGetReplicaDesc(keys);
            assertArrayEquals(new String[] {keys[0], keys[1023], keys[1024], keys[2099]},
                    found.keySet().toArray(new String[0]));
            for (int i : present) {
                List<ReplicaDescriptor> replicas = found.get(keys[i]);
                assertEquals(1, replicas.size());
                assertEquals(utf8(keys[i]).length, replicas.get(0).size());
                assertTrue(replicas.get(0).isMemoryReplica());
            }
        }
    }

    @Test
    public void offloadModesKeepPutsWorking() {
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            for (int mode : new int[] {MooncakeStore.SSD_OFFLOAD_ON, MooncakeStore.SSD_OFFLOAD_OFF,
                    MooncakeStore.SSD_OFFLOAD_DEFAULT}) {
                s.setSsdOffload(mode);
                String key = RUN + "/mode-" + mode;
                s.put(key, utf8("value " + mode));
                assertArrayEquals(utf8("value " + mode), s.get(key));
                assertTrue(s.getReplicaDesc(key).get(0).isMemoryReplica());
            }
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.setSsdOffload(3)));
            assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.setSsdOffload(-1)));
        }
    }

    @Test
    public void closedStoreRefuses() {
        MooncakeStore s = MooncakeStore.connect(null, 1 << 20);
        s.close();
        assertEquals(MooncakeStoreException.INVALID_PARAMS, code(() -> s.getReplicaDesc("k")));
        assertEquals(MooncakeStoreException.INVALID_PARAMS,
                code(() -> s.setSsdOffload(MooncakeStore.SSD_OFFLOAD_ON)));
    }
}
