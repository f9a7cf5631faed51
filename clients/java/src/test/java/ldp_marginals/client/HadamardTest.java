package ldp_marginals.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.apache.commons.statistics.distribution.ChiSquaredDistribution;
import org.junit.jupiter.api.Test;

/**
 * The Hadamard-sampling client (docs/client.md, section 11) against clients/test-vectors/hadamard.json
 * (the replay every whole-report kind shares: {@link WholeReportVectorsTest}),
 * which the Python reference and the TypeScript client read too: the same drawn coins, true bits,
 * coefficient indices, sent parities, packed bits and Avro bytes on every positive vector, the same
 * refusal code on every negative one; then its draws against the mechanism by a chi-square test at
 * {@link ChannelStatisticsTest#ALPHA} (seeded, so deterministic).
 */
class HadamardTest extends WholeReportVectorsTest<HadamardDeviceClient.Slots> {
    HadamardTest() {
        super("hadamard.json", (config, secret, coins, state) -> HadamardDeviceClient.restored(HadamardSpec.fromObject(config), secret, coins, state));
    }

    @Override
    void chosen(HadamardDeviceClient.Slots chosen, Map<String, Object> got) {
        got.put("indices", longs(chosen.indices));
        got.put("parities", longs(chosen.parities));
        if (chosen.permanentParities != null) {
            got.put("permanent_parities", longs(chosen.permanentParities));
        }
    }

    /**
     * 4 answers, coefficients up to order 2 at unequal weights (0.16 each of order 1, 0.06 of order 2),
     * two slots at keep 0.8: over 8,000 reports of answers cycling through all 16 patterns, each
     * (coefficient, sent parity == true parity) cell follows {@code slots * n * weight * (keep or 1 - keep)}.
     */
    @Test
    void drawsFollowTheMechanism() {
        HadamardSpec spec = HadamardSpec.fromJson(config("h", 4, "hadamard",
                "{\"max_order\": 2, \"slots\": 2, \"keep\": 0.8, \"weights\": [0.16, 0.06]}"));
        HadamardDeviceClient client = new HadamardDeviceClient(spec, DeviceSecret.of(new byte[32]), seeded("hadamard chi-square"));
        int n = 8_000;
        long[][] counts = new long[spec.coefficients()][2];   // [coefficient][0: true parity sent, 1: flipped]
        for (int r = 0; r < n; r++) {
            int x = r % 16;
            WholeReportClient.Trace<HadamardDeviceClient.Slots> trace = client.trace(answers(x, 4), 0, null);
            for (int s = 0; s < spec.slots(); s++) {
                int a = trace.chosen.indices[s] - 1;
                int truth = Long.bitCount(x & spec.masks[a]) & 1;
                counts[a][trace.chosen.parities[s] == truth ? 0 : 1]++;
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
