package dev.dhtcrawler.internal;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Loads libdhtcrawler and its JNI library once per class loader, and checks that the library's
 * ABI is the one this binding was generated against.
 *
 * <p>By default both libraries come out of the jar (resource directory
 * {@code dev/dhtcrawler/native/linux-x86_64/}) into a private temporary directory, with
 * whatever that directory's {@code files.txt} lists: a release jar's bundled libraries
 * (found through the libraries' $ORIGIN run path) and OpenSSL's legacy provider. The system
 * property {@code dhtcrawler.library.path} names a directory holding them instead (a build
 * tree, or an installation). The loader prints nothing; a failure is an
 * {@link UnsatisfiedLinkError} saying what was looked for and where.
 */
public final class NativeLoader {
    /** The system property naming a directory with the native libraries. */
    public static final String PATH_PROPERTY = "dhtcrawler.library.path";

    static final String JNI_LIBRARY = "libdhtcrawler_jni.so";
    static final String CORE_LIBRARY = "libdhtcrawler.so." + DhtcNativeConstants.DHTC_ABI_VERSION;
    private static final String RESOURCE_DIR = "/dev/dhtcrawler/native/" + platform() + "/";

    private static boolean loaded;

    private NativeLoader() {}

    /** Loads the libraries if this class loader has not yet; then checks the ABI version. */
    public static synchronized void load() {
        if (loaded) return;
        String dir = System.getProperty(PATH_PROPERTY);
        Path from = dir != null && !dir.isEmpty() ? Path.of(dir) : extractFromJar();
        // The core first: the JNI library's dependency on it is then resolved by its SONAME.
        loadFile(from.resolve(CORE_LIBRARY));
        loadFile(from.resolve(JNI_LIBRARY));
        loaded = true;
        int built = DhtcNativeConstants.DHTC_ABI_VERSION;
        int found = DhtcNative.dhtc_abi_version();
        if (found != built) {
            throw new UnsatisfiedLinkError("dhtcrawler: " + from.resolve(CORE_LIBRARY) + " has ABI version " + found
                    + ", this binding was built for ABI version " + built);
        }
    }

    private static void loadFile(Path file) {
        if (!Files.isRegularFile(file)) {
            throw new UnsatisfiedLinkError("dhtcrawler: native library not found: " + file
                    + (System.getProperty(PATH_PROPERTY) != null ? " (from -D" + PATH_PROPERTY + ")" : ""));
        }
        System.load(file.toAbsolutePath().toString());
    }

    /** The resource directory name of this platform: "linux-x86_64" is the one the jar carries. */
    private static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT).replace(' ', '_');
        String arch = System.getProperty("os.arch", "");
        if (arch.equals("amd64")) arch = "x86_64";
        return os + "-" + arch;
    }

    private static Path extractFromJar() {
        try {
            Path dir = Files.createTempDirectory("dhtcrawler-");
            dir.toFile().deleteOnExit();
            List<String> names = new ArrayList<>(List.of(CORE_LIBRARY, JNI_LIBRARY));
            try (InputStream list = NativeLoader.class.getResourceAsStream(RESOURCE_DIR + "files.txt")) {
                if (list != null) {
                    for (String line : new String(list.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
                        if (!line.isBlank() && !line.contains("..")) names.add(line.strip());
                    }
                }
            }
            for (String name : names) {
                try (InputStream in = NativeLoader.class.getResourceAsStream(RESOURCE_DIR + name)) {
                    if (in == null) {
                        throw new UnsatisfiedLinkError("dhtcrawler: the jar has no native library " + RESOURCE_DIR + name
                                + " for this platform; set -D" + PATH_PROPERTY + "=DIR to load it from DIR");
                    }
                    Path target = dir.resolve(name);
                    Files.createDirectories(target.getParent());
                    Files.copy(in, target, StandardCopyOption.REPLACE_EXISTING);
                    // Once loaded, the mapping outlives the file: it can go when the JVM exits
                    // (deleteOnExit runs in reverse order: files before their directories).
                    target.getParent().toFile().deleteOnExit();
                    target.toFile().deleteOnExit();
                }
            }
            return dir;
        } catch (IOException e) {
            throw new UncheckedIOException("dhtcrawler: cannot extract the native libraries", e);
        }
    }
}
