package dev.dhtcrawler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dhtcrawler.internal.DhtcNative;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The binding's status names and answers against the C header itself (capi/include/dhtcrawler.h,
 * path from the system property dhtc.header.file that the pom sets): a status or an answer added
 * to the header and missing here fails.
 */
class StatusTest {
    private static String header() throws Exception {
        Path p = Path.of(System.getProperty("dhtc.header.file", "../capi/include/dhtcrawler.h"));
        assertTrue(Files.isRegularFile(p), "the C header is not at " + p.toAbsolutePath() + " (system property dhtc.header.file)");
        return Files.readString(p, StandardCharsets.UTF_8);
    }

    /** NAME = value pairs of one `typedef enum name {...}` of the header. */
    private static Map<String, Integer> enumOf(String header, String name) {
        Matcher body = Pattern.compile("typedef\\s+enum\\s+" + name + "\\s*\\{(.*?)\\}\\s*" + name + "\\s*;", Pattern.DOTALL).matcher(header);
        assertTrue(body.find(), "no typedef enum " + name + " in the header");
        String text = body.group(1).replaceAll("/\\*.*?\\*/", " ").replaceAll("//[^\\n]*", " ");
        Map<String, Integer> out = new LinkedHashMap<>();
        Matcher m = Pattern.compile("(DHTC_[A-Z0-9_]+)\\s*=\\s*(-?\\d+)").matcher(text);
        while (m.find()) out.put(m.group(1), Integer.parseInt(m.group(2)));
        assertTrue(!out.isEmpty(), "no values parsed from " + name);
        return out;
    }

    @Test
    void everyStatusOfTheHeaderIsKnownToTheBinding() throws Exception {
        Map<String, Integer> statuses = enumOf(header(), "dhtc_status");
        assertEquals(-10, statuses.get("DHTC_ERR_STORE"), "DHTC_ERR_STORE must be -10");
        Map<Integer, String> binding = DhtcException.statusNames();
        statuses.forEach((name, code) -> {
            assertEquals(name, binding.get(code), "status " + name + " (" + code + ") is missing from DhtcException.statusNames()");
            assertEquals(name, DhtcException.statusName(code));
            assertEquals(name, DhtcNative.dhtc_status_name(code), "the library's name for " + code);
        });
        assertEquals(statuses.size(), binding.size(), "the binding knows statuses the header does not: " + binding);
        assertEquals("DHTC_UNKNOWN(-999)", DhtcException.statusName(-999));
    }

    @Test
    void theThreeAnswersAreTheHeaders() throws Exception {
        Map<String, Integer> answers = enumOf(header(), "dhtc_answer");
        assertEquals(Answer.values().length, answers.size(), answers.toString());
        for (Answer a : Answer.values()) assertEquals(answers.get("DHTC_ANSWER_" + a.name()), a.code(), a.name());
        assertEquals(Answer.ACCEPT, Answer.of(true));
        assertEquals(Answer.REJECT, Answer.of(false));
    }

    @Test
    void theVersionMacrosMatchTheLibrary() throws Exception {
        Matcher m = Pattern.compile("#define\\s+DHTC_VERSION_STRING\\s+\"([^\"]+)\"").matcher(header());
        assertTrue(m.find());
        assertEquals(m.group(1), Crawler.version());
    }
}
