package org.mooncake.store;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Run by MooncakeStoreTest.jarLoadsNativeLibrary in a second JVM whose java.library.path holds
 * no JNI library: prints where the native code came from and does one round trip.
 */
public final class JarLoadCheck {
    private JarLoadCheck() {}

    public static void main(String[] args) {
        System.out.println("source=" + MooncakeStore.nativeLibrarySource());
        byte[] value = "from the jar".getBytes(StandardCharsets.UTF_8);
        try (MooncakeStore store = MooncakeStore.connect(null, 1 << 20)) {
            String key = "jar-load-check-" + ProcessHandle.current().pid();
            store.put(key, value);
            boolean same = Arrays.equals(value, store.get(key));
            store.remove(key, true);
            System.out.println("roundtrip=" + (same ? "ok" : "mismatch"));
        }
    }
}
