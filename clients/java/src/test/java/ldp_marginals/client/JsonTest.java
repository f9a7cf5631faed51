package ldp_marginals.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigInteger;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The config reader: JSON as RFC 8259 writes it, numbers typed as the reference reads them. */
class JsonTest {
    @Test
    void valuesAndNumberTypes() {
        Map<?, ?> m = (Map<?, ?>) Json.parse(" {\"a\": [1, -0, 1.0, 1e2, 2.5E-1, 123456789012345678901234567890, true, false, null],"
                + " \"s\": \"\\u00e9\\ud83d\\ude00\\n\\\"\\/\", \"a\": {}} ");
        assertEquals(Map.of(), m.get("a"));   // a repeated key keeps its last value
        Map<?, ?> first = (Map<?, ?>) Json.parse("{\"a\": [1, -0, 1.0, 1e2, 2.5E-1, 123456789012345678901234567890, true, false, null]}");
        List<Object> expected = Arrays.asList(1L, 0L, 1.0, 100.0, 0.25, new BigInteger("123456789012345678901234567890"),
                true, false, null);
        assertEquals(expected, first.get("a"));
        assertEquals("é😀\n\"/", m.get("s"));
        assertEquals(Long.MAX_VALUE, Json.parse("9223372036854775807"));
        assertEquals(new BigInteger("9223372036854775808"), Json.parse("9223372036854775808"));
    }

    @Test
    void anythingElseIsRefused() {
        for (String bad : new String[] {"", "NaN", "Infinity", "-Infinity", "[1,]", "{\"a\":1,}", "{a:1}", "'a'", "01", "1.",
                ".5", "+1", "[1] 2", "\"\t\"", "\"\\x\"", "\"\\u12\"", "{\"a\" 1}", "// c\n1", "[" .repeat(100) + "]".repeat(100),
                "tru", "nul", "\"open"}) {
            assertThrows(IllegalArgumentException.class, () -> Json.parse(bad), bad);
        }
        assertEquals(Refusal.Code.BAD_CONFIG, assertThrows(Refusal.class, () -> ClientSpec.fromJson("{\"collection\": NaN}")).code());
    }
}
