package ldp_marginals.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.commons.statistics.distribution.BinomialDistribution;
import org.apache.commons.statistics.distribution.ChiSquaredDistribution;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The client's randomizer, statistically (the JVM twin of tests/ldp/test_client.py): over 4,000 seeded
 * devices with their own secrets, each sending two reports of one value in one window, (1) the
 * transition frequencies true input -> noisy bit follow the effective channel the server inverts
 * (permanent then instantaneous: {@code p* = p_I + p_P (q_I - p_I)}, {@code q* = p_I + q_P (q_I - p_I)}),
 * a chi-square test over every (bit, input) group; (2) how often a device's two reports agree on a bit
 * follows the memoized law (a shared permanent response) for memoized bits and independence for the
 * others, a binomial test per group. False alarms: each assertion fails a correct client with
 * probability {@link #ALPHA} = 1e-6, the rate of tests/stats.py (Bonferroni over the groups of the second),
 * and the seed is fixed, so the test is deterministic.
 */
class ChannelStatisticsTest {
    static final double ALPHA = 1e-6;
    static final int DEVICES = 4000;
    static final String CONFIG = "{\"collection\": \"c\", \"window\": {\"type\": \"fixed\", \"size_seconds\": 3600}, \"token\": true,"
            + " \"features\": [{\"name\": \"a\", \"type\": \"boolean\"},"
            + "  {\"name\": \"os\", \"type\": \"categorical\", \"values\": [\"x\", \"y\", \"z\"]},"
            + "  {\"name\": \"m\", \"type\": \"numeric\", \"low\": 0, \"high\": 10}, {\"name\": \"plain\", \"type\": \"boolean\"}],"
            + " \"channels\": [" + rappor() + ", " + rappor() + ", " + rappor() + ","
            + "  {\"p\": 0.2, \"q\": 0.6, \"permanent\": {\"p\": 0.4, \"q\": 0.95}},"
            + "  {\"p\": 0.1, \"q\": 0.7, \"permanent\": {\"p\": 0.2, \"q\": 0.9}}, {\"p\": 0.2, \"q\": 0.6}]}";

    private static ClientSpec spec;
    private static int[][] truth;       // [device][bit]
    private static int[][][] noisy;     // [device][report][bit]

    private static String rappor() {
        return "{\"p\": 0.5, \"q\": 0.75, \"permanent\": {\"p\": 0.25, \"q\": 0.75}}";
    }

    static Map<String, Object> deviceValues(int i) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("a", i % 2 == 0);
        v.put("os", String.valueOf("xyz".charAt(i % 3)));
        v.put("m", i % 4 < 2 ? 2.5 : 10);
        v.put("plain", i % 5 < 2);
        return v;
    }

    static byte[] sha256(byte[] data) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(data);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    @BeforeAll
    static void simulate() {
        spec = ClientSpec.fromJson(CONFIG);
        HmacDrbg drbg = new HmacDrbg(sha256("chi-square".getBytes(StandardCharsets.US_ASCII)));
        truth = new int[DEVICES][];
        noisy = new int[DEVICES][2][spec.bitCount()];
        for (int i = 0; i < DEVICES; i++) {
            byte[] secret = sha256(new byte[] {(byte) (i >>> 24), (byte) (i >>> 16), (byte) (i >>> 8), (byte) i});
            DeviceClient client = new DeviceClient(spec, DeviceSecret.of(secret), drbg);
            for (int r = 0; r < 2; r++) {
                DeviceClient.Trace trace = client.trace(deviceValues(i), r * 1000L, Map.of());
                byte[] bits = trace.report.bits();
                for (int b = 0; b < spec.bitCount(); b++) {
                    noisy[i][r][b] = (bits[b / 8] >> (b % 8)) & 1;
                }
                truth[i] = trace.encoded;
            }
        }
    }

    /** A group of devices whose bit {@code bit} has the same input: true bit 1 with probability u (0 or 1,
     *  or a numeric value's unit value, drawn once per device when the bit memoizes). */
    static final class Group {
        final int bit;
        final double u;
        final boolean[] rows = new boolean[DEVICES];
        int size;

        Group(int bit, double u) {
            this.bit = bit;
            this.u = u;
        }
    }

    static List<Group> groups() {
        List<Group> out = new ArrayList<>();
        int numericBit = 4;   // a (1), os (3), then m
        for (int bit = 0; bit < spec.bitCount(); bit++) {
            if (bit == numericBit) {
                for (double[] vu : new double[][] {{2.5, 0.25}, {10, 1.0}}) {
                    Group g = new Group(bit, vu[1]);
                    for (int i = 0; i < DEVICES; i++) {
                        g.rows[i] = ((Number) deviceValues(i).get("m")).doubleValue() == vu[0];
                    }
                    out.add(g);
                }
            } else {
                for (int x = 0; x < 2; x++) {
                    Group g = new Group(bit, x);
                    for (int i = 0; i < DEVICES; i++) {
                        g.rows[i] = truth[i][bit] == x;
                    }
                    out.add(g);
                }
            }
        }
        for (Group g : out) {
            for (boolean r : g.rows) {
                g.size += r ? 1 : 0;
            }
            assertTrue(g.size >= 1000, "every group holds many devices");
        }
        return out;
    }

    /** P(noisy 1) of the effective channel: permanent then instantaneous where the bit memoizes. */
    static double[] effective(int bit) {
        ClientSpec.Channel inst = spec.instantaneous[bit];
        ClientSpec.Channel perm = spec.permanent[bit];
        if (perm == null) {
            return new double[] {inst.p, inst.q};
        }
        double gap = inst.q - inst.p;
        return new double[] {inst.p + perm.p * gap, inst.p + perm.q * gap};
    }

    @Test
    void transitionFrequenciesFollowTheEffectiveChannel() {
        List<Group> groups = groups();
        double stat = 0;
        for (Group g : groups) {
            double[] eff = effective(g.bit);
            double p1 = g.u * eff[1] + (1 - g.u) * eff[0];
            int ones = 0;
            for (int i = 0; i < DEVICES; i++) {
                ones += g.rows[i] ? noisy[i][0][g.bit] : 0;
            }
            double e1 = g.size * p1;
            double e0 = g.size * (1 - p1);
            stat += (ones - e1) * (ones - e1) / e1 + (g.size - ones - e0) * (g.size - ones - e0) / e0;
        }
        // one degree of freedom per group: two cells, their total fixed
        double pValue = ChiSquaredDistribution.of(groups.size()).survivalProbability(stat);
        assertEquals(12, groups.size());
        assertTrue(pValue > ALPHA, "chi-square " + stat + " on " + groups.size() + " df: p = " + pValue);
    }

    /** {@code [(weight, P(noisy 1)), ...]}: the latent states of a device's bit given its input. */
    static double[][] states(int bit, double u) {
        ClientSpec.Channel inst = spec.instantaneous[bit];
        ClientSpec.Channel perm = spec.permanent[bit];
        if (perm == null) {
            return new double[][] {{u, inst.q}, {1 - u, inst.p}};
        }
        return new double[][] {{u * perm.q, inst.q}, {u * (1 - perm.q), inst.p}, {(1 - u) * perm.p, inst.q},
                {(1 - u) * (1 - perm.p), inst.p}};
    }

    @Test
    void twoReportsOfOneDeviceShareThePermanentResponse() {
        List<Group> groups = groups();
        for (Group g : groups) {
            double agree = 0;
            if (spec.permanent[g.bit] == null) {   // fresh draws: independent given the true bit
                double one = 0;
                for (double[] s : states(g.bit, g.u)) {
                    one += s[0] * s[1];
                }
                agree = one * one + (1 - one) * (1 - one);
            } else {
                for (double[] s : states(g.bit, g.u)) {
                    agree += s[0] * (s[1] * s[1] + (1 - s[1]) * (1 - s[1]));
                }
            }
            int seen = 0;
            for (int i = 0; i < DEVICES; i++) {
                seen += g.rows[i] && noisy[i][0][g.bit] == noisy[i][1][g.bit] ? 1 : 0;
            }
            BinomialDistribution law = BinomialDistribution.of(g.size, agree);
            double pValue = 2 * Math.min(law.cumulativeProbability(seen), law.survivalProbability(seen - 1));
            assertTrue(pValue > ALPHA / groups.size(), "bit " + g.bit + ", input " + g.u + ": agree "
                    + (double) seen / g.size + " against " + agree + " (p = " + pValue + ")");
        }
    }
}
