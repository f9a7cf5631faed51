package ldp_marginals.client;

import static ldp_marginals.client.Vectors.hex;
import static ldp_marginals.client.Vectors.unhex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * What every whole-report kind's client test runs against its clients/test-vectors file (which the Python
 * reference and the TypeScript client read too): the same drawn coins, true bits, the kind's choices
 * ({@link #chosen}), device token, packed bits and Avro bytes on every positive vector (and the refusal of a
 * report past the declared rate, with no coin drawn), the same refusal code on every
 * negative one, and no coin drawn by a refused report. A kind's test adds its file, its client and its
 * choices, and its chi-square test of the mechanism.
 *
 * @param <D> what the kind's randomizer chooses
 */
abstract class WholeReportVectorsTest<D> {
    /** A kind's client of a parsed client config. */
    interface Factory<D> {
        /** The client of a parsed config, restored from a parsed rate state (null: none). */
        WholeReportClient<?, D> client(Object config, DeviceSecret secret, Coins coins, Object rateState);
    }

    private final Map<String, Object> vectors;
    private final Factory<D> factory;

    /** The test of the kind whose vectors are {@code file} in clients/test-vectors/ and whose clients {@code factory} makes. */
    WholeReportVectorsTest(String file, Factory<D> factory) {
        this.vectors = Vectors.load(file);
        this.factory = factory;
    }

    /** Writes the kind's choices under their names in the vectors' {@code expect}. */
    abstract void chosen(D chosen, Map<String, Object> got);

    /** The client config of a collection of {@code d} boolean answers q0.., global window, the kind's block (JSON). */
    static String config(String collection, int d, String kind, String block) {
        StringBuilder features = new StringBuilder();
        for (int i = 0; i < d; i++) {
            features.append(i == 0 ? "" : ", ").append("{\"name\": \"q").append(i).append("\", \"type\": \"boolean\"}");
        }
        return "{\"collection\": \"" + collection + "\", \"window\": {\"type\": \"global\"}, \"features\": [" + features
                + "], \"" + kind + "\": " + block + "}";
    }

    /** Answers q0..q{d-1}: the bits of {@code x}, least significant first. */
    static Map<String, Object> answers(int x, int d) {
        Map<String, Object> values = new LinkedHashMap<>();
        for (int i = 0; i < d; i++) {
            values.put("q" + i, (x >> i & 1) == 1);
        }
        return values;
    }

    /** A generator seeded with the SHA-256 of a label (the chi-square tests'). */
    static Coins seeded(String label) {
        return new HmacDrbg(ChannelStatisticsTest.sha256(label.getBytes(StandardCharsets.US_ASCII)));
    }

    static List<Long> longs(int[] values) {
        List<Long> out = new ArrayList<>();
        for (int v : values) {
            out.add((long) v);
        }
        return out;
    }

    @SuppressWarnings("unchecked")
    private List<Map<String, Object>> list(String key) {
        return (List<Map<String, Object>>) vectors.get(key);
    }

    private WholeReportClient<?, D> seeded(Map<String, Object> c) {
        return factory.client(c.get("config"), DeviceSecret.of(unhex((String) c.get("secret"))), new HmacDrbg(unhex((String) c.get("seed"))),
                null);
    }

    @TestFactory
    Stream<DynamicTest> positiveVectorsAreReproducedByteForByte() {
        List<Map<String, Object>> cases = list("cases");
        assertTrue(cases.size() >= 3);
        return cases.stream().map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> reproduce(c)));
    }

    @SuppressWarnings("unchecked")
    private void reproduce(Map<String, Object> c) {
        WholeReportClient<?, D> client = seeded(c);
        List<Map<String, Object>> reports = (List<Map<String, Object>>) c.get("reports");
        assertTrue(reports.size() >= 2);
        for (Map<String, Object> item : reports) {
            Map<String, Object> values = (Map<String, Object>) item.get("values");
            long eventMs = ((Number) item.get("event_ms")).longValue();
            Map<String, Object> dims = (Map<String, Object>) item.get("dimensions");
            Map<String, Object> expect = (Map<String, Object>) item.get("expect");
            if (expect.containsKey("refusal")) {   // past the declared rate: refused, drawing no coin
                Refusal r = assertThrows(Refusal.class, () -> client.trace(values, eventMs, dims));
                assertEquals(expect.get("refusal"), r.code().wire(), r.getMessage());
                continue;
            }
            WholeReportClient.Trace<D> trace = client.trace(values, eventMs, dims);
            Map<String, Object> got = new LinkedHashMap<>();
            got.put("coins", hex(trace.coins));
            got.put("encoded", longs(trace.encoded));
            chosen(trace.chosen, got);
            if (trace.permanent != null) {   // memoized (section 13)
                got.put("permanent_coins", hex(trace.permanent));
            }
            if (trace.report.client() != null) {   // the device token (section 5)
                got.put("client", trace.report.client());
            }
            got.put("bits", hex(trace.report.bits()));
            got.put("avro", hex(trace.report.toAvro()));
            assertEquals(item.get("expect"), got, item.toString());
        }
        if (c.containsKey("rate_state_after")) {   // the rate state the app persists (section 3)
            assertEquals(c.get("rate_state_after"), Json.parse(client.rateState()));
        }
    }

    @TestFactory
    Stream<DynamicTest> negativeVectorsAreRefusedWithTheirCode() {
        List<Map<String, Object>> cases = list("refusals");
        assertTrue(cases.size() >= 10);
        return cases.stream().map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
            Refusal r = assertThrows(Refusal.class, () -> attempt(c));
            assertEquals(c.get("refusal"), r.code().wire(), r.getMessage());
        }));
    }

    @SuppressWarnings("unchecked")
    private void attempt(Map<String, Object> c) {
        WholeReportClient<?, D> client = factory.client(c.get("config"), DeviceSecret.of(new byte[32]), new HmacDrbg(new byte[32]),
                c.get("rate_state"));
        Map<String, Object> input = (Map<String, Object>) c.get("input");
        if (input != null) {
            client.report((Map<String, Object>) input.get("values"), (Number) input.get("event_ms"),
                    (Map<String, Object>) input.get("dimensions"));
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void aRefusedReportDrawsNoCoin() {
        Map<String, Object> c = list("cases").get(0);
        WholeReportClient<?, D> client = seeded(c);
        Map<String, Object> first = ((List<Map<String, Object>>) c.get("reports")).get(0);
        Map<String, Object> values = (Map<String, Object>) first.get("values");
        Map<String, Object> dims = (Map<String, Object>) first.get("dimensions");
        assertThrows(Refusal.class, () -> client.trace(values, -1, dims));
        WholeReportClient.Trace<D> trace = client.trace(values, ((Number) first.get("event_ms")).longValue(), dims);
        assertEquals(((Map<String, Object>) first.get("expect")).get("coins"), hex(trace.coins));
    }
}
