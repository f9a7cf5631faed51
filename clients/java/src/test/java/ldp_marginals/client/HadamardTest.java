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
 * The Hadamard-sampling client (docs/client.md, section 11) against clients/test-vectors/hadamard.json,
 * which the Python reference and the TypeScript client read too: the same drawn coins, true bits,
 * coefficient indices, sent parities, packed bits and Avro bytes on every positive vector, the same
 * refusal code on every negative one; then its draws against the mechanism by a chi-square test at
 * {@link ChannelStatisticsTest#ALPHA} (seeded, so deterministic).
 */
class HadamardTest {
    private static final Map<String, Object> VECTORS = Vectors.load("hadamard.json");

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
        HadamardDeviceClient client = new HadamardDeviceClient(HadamardSpec.fromObject(c.get("config")),
                DeviceSecret.of(unhex((String) c.get("secret"))), new HmacDrbg(unhex((String) c.get("seed"))));
        List<Map<String, Object>> reports = (List<Map<String, Object>>) c.get("reports");
        assertTrue(reports.size() >= 2);
        for (Map<String, Object> item : reports) {
            HadamardDeviceClient.Trace trace = client.trace((Map<String, Object>) item.get("values"),
                    ((Number) item.get("event_ms")).longValue(), (Map<String, Object>) item.get("dimensions"));
            assertNull(trace.report.client());
            Map<String, Object> got = new LinkedHashMap<>();
            got.put("coins", hex(trace.coins));
            got.put("encoded", longs(trace.encoded));
            got.put("indices", longs(trace.indices));
            got.put("parities", longs(trace.parities));
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
        HadamardDeviceClient client = new HadamardDeviceClient(HadamardSpec.fromObject(c.get("config")),
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
        HadamardDeviceClient client = new HadamardDeviceClient(HadamardSpec.fromObject(c.get("config")),
                DeviceSecret.of(unhex((String) c.get("secret"))), new HmacDrbg(unhex((String) c.get("seed"))));
        Map<String, Object> first = ((List<Map<String, Object>>) c.get("reports")).get(0);
        Map<String, Object> values = (Map<String, Object>) first.get("values");
        Map<String, Object> dims = (Map<String, Object>) first.get("dimensions");
        assertThrows(Refusal.class, () -> client.trace(values, -1, dims));
        HadamardDeviceClient.Trace trace = client.trace(values, ((Number) first.get("event_ms")).longValue(), dims);
        assertEquals(((Map<String, Object>) first.get("expect")).get("coins"), hex(trace.coins));
    }

    /**
     * 4 answers, coefficients up to order 2 at unequal weights (0.16 each of order 1, 0.06 of order 2),
     * two slots at keep 0.8: over 8,000 reports of answers cycling through all 16 patterns, each
     * (coefficient, sent parity == true parity) cell follows {@code slots * n * weight * (keep or 1 - keep)}.
     */
    @Test
    void drawsFollowTheMechanism() {
        String config = "{\"collection\": \"h\", \"window\": {\"type\": \"global\"}, \"features\": ["
                + "{\"name\": \"q0\", \"type\": \"boolean\"}, {\"name\": \"q1\", \"type\": \"boolean\"},"
                + "{\"name\": \"q2\", \"type\": \"boolean\"}, {\"name\": \"q3\", \"type\": \"boolean\"}],"
                + " \"hadamard\": {\"max_order\": 2, \"slots\": 2, \"keep\": 0.8, \"weights\": [0.16, 0.06]}}";
        HadamardSpec spec = HadamardSpec.fromJson(config);
        HadamardDeviceClient client = new HadamardDeviceClient(spec, DeviceSecret.of(new byte[32]),
                new HmacDrbg(ChannelStatisticsTest.sha256("hadamard chi-square".getBytes(StandardCharsets.US_ASCII))));
        int n = 8_000;
        long[][] counts = new long[spec.coefficients()][2];   // [coefficient][0: true parity sent, 1: flipped]
        for (int r = 0; r < n; r++) {
            int x = r % 16;
            Map<String, Object> values = new LinkedHashMap<>();
            for (int i = 0; i < 4; i++) {
                values.put("q" + i, (x >> i & 1) == 1);
            }
            HadamardDeviceClient.Trace trace = client.trace(values, 0, null);
            for (int s = 0; s < spec.slots(); s++) {
                int a = trace.indices[s] - 1;
                int truth = Long.bitCount(x & spec.masks[a]) & 1;
                counts[a][trace.parities[s] == truth ? 0 : 1]++;
            }
        }
        double stat = 0;
        double total = (double) n * spec.slots();
        for (int a = 0; a < spec.coefficients(); a++) {
            double w = Long.bitCount(spec.masks[a]) == 1 ? 0.16 : 0.06;
            double[] expected = {total * w * 0.8, total * w * 0.2};
            for (int k = 0; k < 2; k++) {
                stat += (counts[a][k] - expected[k]) * (counts[a][k] - expected[k]) / expected[k];
            }
        }
        // all 2T cells in one multinomial, their total fixed: 2T - 1 degrees of freedom
        int df = 2 * spec.coefficients() - 1;
        double pValue = ChiSquaredDistribution.of(df).survivalProbability(stat);
        assertEquals(10, spec.coefficients());
        assertTrue(pValue > ChannelStatisticsTest.ALPHA, "chi-square " + stat + " on " + df + " df: p = " + pValue);
    }
}
