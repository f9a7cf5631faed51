package ldp_marginals.client;

import static ldp_marginals.client.Vectors.hex;
import static ldp_marginals.client.Vectors.unhex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.commons.statistics.distribution.ChiSquaredDistribution;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The subset-randomized-response client (docs/client.md, section 12) against clients/test-vectors/subset.json,
 * which the Python reference and the TypeScript client read too: the same drawn coins, true bits, chosen
 * positions, keep decision, sent pattern, packed bits and Avro bytes on every positive vector, the same
 * refusal code on every negative one; then its draws against the mechanism by a chi-square test at
 * {@link ChannelStatisticsTest#ALPHA} (seeded, so deterministic).
 */
class SubsetTest {
    private static final Map<String, Object> VECTORS = Vectors.load("subset.json");

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> list(String key) {
        return (List<Map<String, Object>>) VECTORS.get(key);
    }

    private static List<Long> longs(int[] values) {
        List<Long> out = new ArrayList<>();
        for (int v : values) {
            out.add((long) v);
        }
        return out;
    }

    @TestFactory
    Stream<DynamicTest> positiveVectorsAreReproducedByteForByte() {
        List<Map<String, Object>> cases = list("cases");
        assertTrue(cases.size() >= 3);
        return cases.stream().map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> reproduce(c)));
    }

    @SuppressWarnings("unchecked")
    private static void reproduce(Map<String, Object> c) {
        SubsetDeviceClient client = new SubsetDeviceClient(SubsetSpec.fromObject(c.get("config")),
                DeviceSecret.of(unhex((String) c.get("secret"))), new HmacDrbg(unhex((String) c.get("seed"))));
        List<Map<String, Object>> reports = (List<Map<String, Object>>) c.get("reports");
        assertTrue(reports.size() >= 2);
        for (Map<String, Object> item : reports) {
            SubsetDeviceClient.Trace trace = client.trace((Map<String, Object>) item.get("values"),
                    ((Number) item.get("event_ms")).longValue(), (Map<String, Object>) item.get("dimensions"));
            assertNull(trace.report.client());
            Map<String, Object> got = new LinkedHashMap<>();
            got.put("coins", hex(trace.coins));
            got.put("encoded", longs(trace.encoded));
            got.put("subset", longs(trace.subset));
            got.put("kept", (long) trace.kept);
            got.put("pattern", longs(trace.pattern));
            got.put("bits", hex(trace.report.bits()));
            got.put("avro", hex(trace.report.toAvro()));
            assertEquals(item.get("expect"), got, item.toString());
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
    private static void attempt(Map<String, Object> c) {
        SubsetDeviceClient client = new SubsetDeviceClient(SubsetSpec.fromObject(c.get("config")),
                DeviceSecret.of(new byte[32]), new HmacDrbg(new byte[32]));
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
        SubsetDeviceClient client = new SubsetDeviceClient(SubsetSpec.fromObject(c.get("config")),
                DeviceSecret.of(unhex((String) c.get("secret"))), new HmacDrbg(unhex((String) c.get("seed"))));
        Map<String, Object> first = ((List<Map<String, Object>>) c.get("reports")).get(0);
        Map<String, Object> values = (Map<String, Object>) first.get("values");
        Map<String, Object> dims = (Map<String, Object>) first.get("dimensions");
        assertThrows(Refusal.class, () -> client.trace(values, -1, dims));
        SubsetDeviceClient.Trace trace = client.trace(values, ((Number) first.get("event_ms")).longValue(), dims);
        assertEquals(((Map<String, Object>) first.get("expect")).get("coins"), hex(trace.coins));
    }

    /**
     * 5 answers, width 3, keep 0.3: over 8,000 reports of answers cycling through all 32 patterns, each
     * (subset, sent pattern XOR true pattern) cell follows the mechanism: the subset uniform over the
     * C(5, 3) = 10, the true pattern sent with probability keep and each of the 7 others with
     * {@code (1 - keep) / 7}.
     */
    @Test
    void drawsFollowTheMechanism() {
        String config = "{\"collection\": \"s\", \"window\": {\"type\": \"global\"}, \"features\": ["
                + "{\"name\": \"q0\", \"type\": \"boolean\"}, {\"name\": \"q1\", \"type\": \"boolean\"},"
                + "{\"name\": \"q2\", \"type\": \"boolean\"}, {\"name\": \"q3\", \"type\": \"boolean\"},"
                + "{\"name\": \"q4\", \"type\": \"boolean\"}], \"subset\": {\"max_order\": 2, \"width\": 3, \"keep\": 0.3}}";
        SubsetSpec spec = SubsetSpec.fromJson(config);
        SubsetDeviceClient client = new SubsetDeviceClient(spec, DeviceSecret.of(new byte[32]),
                new HmacDrbg(ChannelStatisticsTest.sha256("subset chi-square".getBytes(StandardCharsets.US_ASCII))));
        int n = 8_000;
        int s = 3;
        long[][] counts = new long[32][8];   // [subset mask][sent pattern XOR true pattern]
        for (int r = 0; r < n; r++) {
            int x = r % 32;
            Map<String, Object> values = new LinkedHashMap<>();
            for (int i = 0; i < 5; i++) {
                values.put("q" + i, (x >> i & 1) == 1);
            }
            SubsetDeviceClient.Trace trace = client.trace(values, 0, null);
            int mask = 0;
            int flipped = 0;
            for (int j = 0; j < trace.subset.length; j++) {
                mask |= 1 << trace.subset[j];
                flipped |= (trace.pattern[j] ^ (x >> trace.subset[j] & 1)) << j;
            }
            counts[mask][flipped]++;
        }
        double stat = 0;
        int cells = 0;
        for (int mask = 0; mask < 32; mask++) {
            if (Integer.bitCount(mask) != s) {
                assertEquals(0, java.util.Arrays.stream(counts[mask]).sum(), "a subset of " + Integer.bitCount(mask) + " bits");
                continue;
            }
            for (int f = 0; f < 8; f++) {
                double expected = n / 10.0 * (f == 0 ? 0.3 : 0.7 / 7);
                stat += (counts[mask][f] - expected) * (counts[mask][f] - expected) / expected;
                cells++;
            }
        }
        // all 80 cells in one multinomial, their total fixed: 79 degrees of freedom
        int df = cells - 1;
        double pValue = ChiSquaredDistribution.of(df).survivalProbability(stat);
        assertEquals(80, cells);
        assertTrue(pValue > ChannelStatisticsTest.ALPHA, "chi-square " + stat + " on " + df + " df: p = " + pValue);
    }
}
