package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The native loader, each case in a JVM of its own (a class loader loads the library once). */
class LoaderTest {
    /** Run in the child JVM: loads the library and prints its versions. */
    public static void main(String[] args) {
        System.out.println("abi " + Crawler.abiVersion() + " version " + Crawler.version());
    }

    private static String runChild(String... properties) throws Exception {
        String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        var command = new ArrayList<String>();
        command.add(javaBin);
        command.addAll(List.of(properties));
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), LoaderTest.class.getName()));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        return "exit " + p.exitValue() + "\n" + out;
    }

    @Test
    void loadsTheLibrariesCarriedAsResources() throws Exception {
        String out = runChild();
        assertTrue(out.startsWith("exit 0\n"), out);
        assertTrue(out.contains("abi " + Crawler.bindingAbiVersion() + " version "), out);
    }

    @Test
    void aLibraryPathWithoutTheLibrariesFailsClearly() throws Exception {
        Path empty = Files.createTempDirectory("dhtc-no-libs-");
        try {
            String out = runChild("-Ddhtcrawler.library.path=" + empty);
            assertTrue(out.startsWith("exit 1\n"), out);
            assertTrue(out.contains("native library not found: " + empty.resolve("libdhtcrawler.so." + Crawler.bindingAbiVersion())), out);
            assertTrue(out.contains("-Ddhtcrawler.library.path"), out);
        } finally {
            Files.delete(empty);
        }
    }

    @Test
    void aLibraryPathWithTheLibrariesIsUsed() throws Exception {
        // The directory the build staged the pair in, found through the resources this JVM loaded.
        Path classes = Path.of(LoaderTest.class.getResource("/dev/dhtcrawler/native/linux-x86_64/libdhtcrawler_jni.so").toURI()).getParent();
        String out = runChild("-Ddhtcrawler.library.path=" + classes);
        assertEquals("exit 0", out.lines().findFirst().orElse(""), out);
    }
}
