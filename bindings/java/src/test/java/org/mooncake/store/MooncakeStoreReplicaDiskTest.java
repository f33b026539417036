package org.mooncake.store;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assume.assumeTrue;

import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.Timeout;

/**
 * Disk replicas through the Java binding (issue 14): an offloading put is listed with a disk
 * replica. Runs only with {@code MC_TEST_SSD=1}, under a cluster whose daemon has
 * {@code --ssd_path} and whose master has {@code --enable_offload}: CTest's
 * java_binding_ssd_test (bindings/java/README.md).
 */
public class MooncakeStoreReplicaDiskTest {
    @Rule
    public Timeout timeout = Timeout.seconds(60);

    private static final String RUN = "java-replica-disk-" + ProcessHandle.current().pid();

    @Test
    public void diskReplicaAppearsWithOffload() throws InterruptedException {
        assumeTrue("needs MC_TEST_SSD=1 and a cluster with --ssd_path and --enable_offload",
                "1".equals(System.getenv("MC_TEST_SSD")));
        try (MooncakeStore s = MooncakeStore.connect(null, 16 << 20)) {
            s.setSsdOffload(MooncakeStore.SSD_OFFLOAD_ON);
            String key = RUN + "/disk";
            s.put(key, new byte[4096]);
            ReplicaDescriptor disk = null;
            // Generous: a loaded machine offloads late.
            for (long deadline = System.nanoTime() + 60_000_000_000L;
                    disk == null && System.nanoTime() < deadline; Thread.sleep(100)) {
                for (ReplicaDescriptor r : s.getReplicaDesc(key)) {
                    if (r.isDiskReplica()) {
                        disk = r;
                    }
                }
            }
            assertNotNull("no disk replica within 60 s", disk);
            assertEquals(s.getHostname(), disk.location());
            assertEquals(4096, disk.size());
        }
    }
}
