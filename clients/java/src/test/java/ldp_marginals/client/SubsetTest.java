package ldp_marginals.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.commons.statistics.distribution.ChiSquaredDistribution;
import org.junit.jupiter.api.Test;

/**
 * The subset-randomized-response client (docs/client.md, section 12) against clients/test-vectors/subset.json
 * (the replay every whole-report kind shares: {@link WholeReportVectorsTest}),
 * which the Python reference and the TypeScript client read too: the same drawn coins, true bits, chosen
 * positions, keep decision, sent pattern, packed bits and Avro bytes on every positive vector, the same
 * refusal code on every negative one; then its draws against the mechanism by a chi-square test at
 * {@link ChannelStatisticsTest#ALPHA} (seeded, so deterministic).
 */
class SubsetTest extends WholeReportVectorsTest<SubsetDeviceClient.Choice> {
    SubsetTest() {
        super("subset.json", (config, secret, coins, state) -> SubsetDeviceClient.restored(SubsetSpec.fromObject(config), secret, coins, state));
    }

    @Override
    void chosen(SubsetDeviceClient.Choice chosen, Map<String, Object> got) {
        got.put("subset", longs(chosen.subset));
        got.put("kept", (long) chosen.kept);
        got.put("pattern", longs(chosen.pattern));
        if (chosen.permanentPattern != null) {
            got.put("permanent_pattern", longs(chosen.permanentPattern));
        }
    }

    /**
     * 5 answers, width 3, keep 0.3: over 8,000 reports of answers cycling through all 32 patterns, each
     * (subset, sent pattern XOR true pattern) cell follows the mechanism: the subset uniform over the
     * C(5, 3) = 10, the true pattern sent with probability keep and each of the 7 others with
     * {@code (1 - keep) / 7}.
     */
    @Test
    void drawsFollowTheMechanism() {
        SubsetSpec spec = SubsetSpec.fromJson(config("s", 5, "subset", "{\"max_order\": 2, \"width\": 3, \"keep\": 0.3}"));
        SubsetDeviceClient client = new SubsetDeviceClient(spec, DeviceSecret.of(new byte[32]), seeded("subset chi-square"));
        int n = 8_000;
        int s = 3;
        long[][] counts = new long[32][8];   // [subset mask][sent pattern XOR true pattern]
        for (int r = 0; r < n; r++) {
            int x = r % 32;
            WholeReportClient.Trace<SubsetDeviceClient.Choice> trace = client.trace(answers(x, 5), 0, null);
            int mask = 0;
            int flipped = 0;
            for (int j = 0; j < trace.chosen.subset.length; j++) {
                mask |= 1 << trace.chosen.subset[j];
                flipped |= (trace.chosen.pattern[j] ^ (x >> trace.chosen.subset[j] & 1)) << j;
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
