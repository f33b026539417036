package org.mooncake.store;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads libmooncake_store_jni.so: from {@code java.library.path} when it is there (and its
 * dependency libmooncake_store.so.1 resolves), otherwise from the copies bundled in the jar
 * under {@code org/mooncake/store/native/<os>-<arch>/}. The bundled libmooncake_store.so.1 is
 * loaded first, by absolute path, so the dynamic linker satisfies the JNI library's
 * dependency with it. The extracted files are deleted right after loading (Linux keeps the
 * mappings), so nothing is left in the temp directory.
 */
final class NativeLoader {
    static final String JNI_LIBRARY = "mooncake_store_jni";
    static final String CORE_LIBRARY_FILE = "libmooncake_store.so.1";

    private static String source;

    private NativeLoader() {}

    static synchronized void load() {
        if (source != null) {
            return;
        }
        UnsatisfiedLinkError fromPath;
        try {
            System.loadLibrary(JNI_LIBRARY);
            source = "java.library.path";
            return;
        } catch (UnsatisfiedLinkError e) {
            fromPath = e;
        }
        try {
            source = loadFromJar();
        } catch (IOException | UnsatisfiedLinkError e) {
            UnsatisfiedLinkError error = new UnsatisfiedLinkError(
                    "cannot load " + System.mapLibraryName(JNI_LIBRARY) + " from java.library.path ("
                            + fromPath.getMessage() + ") nor from the jar (" + e + ")");
            error.addSuppressed(fromPath);
            throw error;
        }
    }

    /** "java.library.path", or "jar:" and the resource directory the library came from. */
    static synchronized String source() {
        return source;
    }

    static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]", "");
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (arch.equals("x86_64")) {
            arch = "amd64";
        }
        return os + "-" + arch;
    }

    private static String loadFromJar() throws IOException {
        String dir = "native/" + platform() + "/";
        String jni = System.mapLibraryName(JNI_LIBRARY);
        Path tmp = Files.createTempDirectory("mooncake-store-jni");
        try {
            Path core = extract(dir + CORE_LIBRARY_FILE, tmp);
            Path glue = extract(dir + jni, tmp);
            System.load(core.toAbsolutePath().toString());
            System.load(glue.toAbsolutePath().toString());
        } finally {
            deleteTree(tmp);
        }
        return "jar:org/mooncake/store/" + dir;
    }

    private static Path extract(String resource, Path tmp) throws IOException {
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException("resource org/mooncake/store/" + resource + " not in the jar");
            }
            Path out = tmp.resolve(resource.substring(resource.lastIndexOf('/') + 1));
            Files.copy(in, out, StandardCopyOption.REPLACE_EXISTING);
            return out;
        }
    }

    private static void deleteTree(Path dir) {
        try (var entries = Files.list(dir)) {
            for (Path p : (Iterable<Path>) entries::iterator) {
                Files.deleteIfExists(p);
            }
            Files.deleteIfExists(dir);
        } catch (IOException e) {
            dir.toFile().deleteOnExit();
        }
    }
}
