package ldp_marginals.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.Test;

/** The production client's promises beyond the vectors: fresh coins from the operating system, tokens
 *  that link nothing across slices, collections or devices, and nothing private in a message or a string. */
class DeviceClientTest {
    static final String CONFIG = "{\"collection\": \"c\", \"window\": {\"type\": \"fixed\", \"size_seconds\": 3600},"
            + " \"features\": [{\"name\": \"os\", \"type\": \"categorical\", \"values\": [\"mac\", \"win\"]},"
            + " {\"name\": \"minutes\", \"type\": \"numeric\", \"low\": 0, \"high\": 120}],"
            + " \"channels\": [{\"p\": 0.25, \"q\": 0.75}, {\"p\": 0.25, \"q\": 0.75}, {\"p\": 0.25, \"q\": 0.75}], \"token\": true}";

    static Map<String, Object> values(Object os, Object minutes) {
        Map<String, Object> v = new HashMap<>();
        v.put("os", os);
        v.put("minutes", minutes);
        return v;
    }

    @Test
    void theProductionClientDrawsFreshCoinsFromTheOperatingSystem() {
        byte[] secret = DeviceSecret.generate();
        assertEquals(32, secret.length);
        assertFalse(java.util.Arrays.equals(secret, DeviceSecret.generate()));
        DeviceClient client = DeviceClient.create(ClientSpec.fromJson(CONFIG), DeviceSecret.of(secret));
        Set<String> bits = new HashSet<>();
        Set<String> tokens = new HashSet<>();
        for (int i = 0; i < 64; i++) {
            NoisyReport r = client.report(values("mac", 60), 5000 + i);
            bits.add(Vectors.hex(r.bits()));
            tokens.add(r.client());
        }
        assertTrue(bits.size() > 1, "fresh coins every report");
        assertEquals(Collections.singleton(DeviceSecret.of(secret).token("c", 0)), tokens);
    }

    @Test
    void tokensDoNotRepeatAcrossSlicesCollectionsOrDevices() {
        DeviceSecret secret = DeviceSecret.of(new byte[32]);
        Set<String> tokens = new HashSet<>();
        for (String c : new String[] {"a", "b"}) {
            for (long s = 0; s < 100 * 3_600_000L; s += 3_600_000L) {
                tokens.add(secret.token(c, s));
            }
        }
        byte[] other = new byte[32];
        other[0] = 1;
        tokens.add(DeviceSecret.of(other).token("a", 0));
        assertEquals(201, tokens.size());
        assertEquals(22, secret.token("a", 0).length());
    }

    @Test
    void aKeyGivesTheSameReportsAsItsBytes() {
        byte[] raw = DeviceSecret.generate();
        ClientSpec spec = ClientSpec.fromJson(CONFIG);
        byte[] a = new DeviceClient(spec, DeviceSecret.of(raw), new HmacDrbg(new byte[32])).report(values("win", 3), 7).toAvro();
        byte[] b = new DeviceClient(spec, DeviceSecret.of(new SecretKeySpec(raw, "HmacSHA256")), new HmacDrbg(new byte[32]))
                .report(values("win", 3), 7).toAvro();
        assertArrayEquals(a, b);
        assertEquals(Refusal.Code.BAD_SECRET,
                assertThrows(Refusal.class, () -> DeviceSecret.of(new SecretKeySpec(new byte[16], "HmacSHA256"))).code());
        assertEquals(Refusal.Code.BAD_SECRET,
                assertThrows(Refusal.class, () -> DeviceSecret.of(new SecretKeySpec(raw, "AES"))).code());
    }

    @Test
    void nothingPrivateIsInAMessageOrAString() {
        byte[] raw = new byte[32];
        raw[5] = 0x5a;
        DeviceSecret secret = DeviceSecret.of(raw);
        DeviceClient client = new DeviceClient(ClientSpec.fromJson(CONFIG), secret, new HmacDrbg(new byte[32]));
        // refusals name the feature, never the value given
        Refusal bad = assertThrows(Refusal.class, () -> client.report(values("linux-private-value", 3), 0));
        assertEquals(Refusal.Code.BAD_VALUE, bad.code());
        assertFalse(bad.getMessage().contains("linux-private-value"), bad.getMessage());
        Refusal range = assertThrows(Refusal.class, () -> client.report(values("mac", 1234.5678), 0));
        assertEquals(Refusal.Code.OUT_OF_RANGE, range.code());
        assertFalse(range.getMessage().contains("1234.5678"), range.getMessage());
        // a report's string shows neither its bits nor its token; the secret's shows nothing
        NoisyReport r = client.report(values("mac", 3), 0);
        String shown = r.toString() + client + secret;
        assertFalse(shown.contains(r.client()), shown);
        assertFalse(shown.contains(Vectors.hex(r.bits())) || shown.contains(java.util.Arrays.toString(r.bits())), shown);
        assertFalse(shown.toLowerCase().contains("5a"), shown);
        assertTrue(shown.contains("c"));
    }

    @Test
    void aRefusedReportDrawsNoCoins() {
        int[] drawn = {0};
        Coins counting = n -> {
            drawn[0] += n;
            return new byte[n];
        };
        DeviceClient client = new DeviceClient(ClientSpec.fromJson(CONFIG), DeviceSecret.of(new byte[32]), counting);
        assertThrows(Refusal.class, () -> client.report(values("mac", -1), 0));
        assertThrows(Refusal.class, () -> client.report(values("mac", 1), -1));
        assertThrows(Refusal.class, () -> client.report(values("mac", 1), 0, Collections.singletonMap("k", 3)));
        assertEquals(0, drawn[0]);
        client.report(values("mac", 1), 0);
        assertEquals(4 * (1 + 3), drawn[0]);   // the numeric feature's coin, then one per bit
    }

    @Test
    void eventTimesAreIntegersInRange() {
        DeviceClient client = new DeviceClient(ClientSpec.fromJson(CONFIG), DeviceSecret.of(new byte[32]), new HmacDrbg(new byte[32]));
        for (Number t : new Number[] {1.0, 1.5f, new java.math.BigDecimal(1), null, new java.math.BigInteger("99999999999999999999"),
                DeviceClient.MAX_EVENT_MS, -1}) {
            assertEquals(Refusal.Code.BAD_EVENT_TIME,
                    assertThrows(Refusal.class, () -> client.report(values("mac", 1), t, null)).code(), String.valueOf(t));
        }
        assertEquals(DeviceClient.MAX_EVENT_MS - 1, client.report(values("mac", 1), (Number) (DeviceClient.MAX_EVENT_MS - 1), null).eventTime());
        assertEquals(3, client.report(values("mac", 1), (Number) 3, null).eventTime());
    }

    @Test
    void theSpecificationsConfigExampleIsReadAsItSays() {
        String doc = Vectors.read(Vectors.repository("ldp.docs").resolve("client.md"));
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("```json\n(.*?)```", java.util.regex.Pattern.DOTALL).matcher(doc);
        assertTrue(m.find());
        ClientSpec spec = ClientSpec.fromJson(m.group(1));
        assertEquals(5, spec.bitCount());
        assertTrue(spec.carriesToken());
        assertEquals(java.util.Arrays.asList("dark_mode", "os", "minutes"), spec.featureNames());
        assertEquals(3_600_000L, spec.window.periodMs);
        assertEquals(1 + 5, spec.drawnCoins);   // minutes does not memoize: its encoding coin is drawn, then 5 bits
        assertNotEquals(null, spec.permanent[3]);
        assertEquals(null, spec.permanent[4]);
    }

    @Test
    void theRateStateIsTextTheAppPersistsAndRestores() {
        // reports_per_day 2 (docs/client.md section 3): a client restored from the text refuses what the
        // first would, and an app that lost its state would not; a bad text is refused as bad_state
        ClientSpec spec = ClientSpec.fromJson(CONFIG.replace("\"token\": true", "\"token\": true, \"reports_per_day\": 2"));
        assertEquals(2, spec.reportsPerDay());
        DeviceClient first = DeviceClient.create(spec, DeviceSecret.of(new byte[32]));
        long day = 20_454L * 86_400_000L;
        first.report(values("mac", 60), day);
        first.report(values("win", 60), day + 86_399_999L);
        assertEquals("{\"20454\":2}", first.rateState());
        DeviceClient restored = DeviceClient.create(spec, DeviceSecret.of(new byte[32]), first.rateState());
        Refusal r = assertThrows(Refusal.class, () -> restored.report(values("mac", 37.5), day + 1));
        assertEquals(Refusal.Code.RATE_EXCEEDED, r.code());
        assertFalse(r.getMessage().contains("37.5") || r.getMessage().contains("mac"), r.getMessage());
        restored.report(values("mac", 60), day + 86_400_000L);
        assertEquals("{\"20454\":2,\"20455\":1}", restored.rateState());
        DeviceClient.create(spec, DeviceSecret.of(new byte[32])).report(values("mac", 60), day + 1);   // state lost
        for (String bad : new String[] {"", "{", "[]", "{\"20454\": 1.0}", "{\"x\": 1}", "null"}) {
            Refusal b = assertThrows(Refusal.class, () -> DeviceClient.create(spec, DeviceSecret.of(new byte[32]), bad), bad);
            assertEquals(Refusal.Code.BAD_STATE, b.code(), bad);
        }
        assertFalse(assertThrows(Refusal.class, () -> DeviceClient.create(spec, DeviceSecret.of(new byte[32]),
                "{\"20454\": 98765432109}")).getMessage().contains("98765432109"), "a count is never echoed");
    }
}
