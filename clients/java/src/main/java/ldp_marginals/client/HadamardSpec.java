package ldp_marginals.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;

/**
 * What a device is told about a Hadamard-sampling collection ({@code channel: {kind: hadamard}}): the
 * client config of docs/client.md, section 11 (its name, boolean features, window, and {@code hadamard}:
 * {@code max_order} k, {@code slots} m, {@code keep} and one coefficient weight per order). Read with
 * {@link #fromJson}; anything the specification does not allow is refusal {@code bad_config}, with the
 * rules of the Python reference ({@code ldp_marginals.ldp.hadamard_client.HadamardClientSpec}).
 * Immutable and thread-safe.
 */
public final class HadamardSpec extends WholeReportSpec {
    /** The most features a Hadamard collection may have (the job holds a report's bits in 64-bit words). */
    public static final int MAX_FEATURES = WholeReportSpec.MAX_FEATURES;

    final int slots;
    final double[] weights;        // per order 1..maxOrder, each coefficient's probability
    final long[] masks;            // per coefficient (family order; index a at a - 1), the bit mask of its set
    final long[] thresholds;       // per coefficient, units(S_a); the last is 2^32
    final int indexBits;           // B: the bit length of the number of coefficients T

    private HadamardSpec(Block block, int slots, double keep, double[] weights) {
        super(block, keep);
        this.slots = slots;
        this.weights = weights;
        int d = features.size();
        List<Long> sets = new ArrayList<>();
        for (int j = 1; j <= maxOrder; j++) {
            combinations(d, j, 0, 0L, sets);
        }
        this.masks = new long[sets.size()];
        this.thresholds = new long[sets.size()];
        double running = 0.0;
        for (int a = 0; a < masks.length; a++) {
            masks[a] = sets.get(a);
            running += weights[Long.bitCount(masks[a]) - 1];
            thresholds[a] = Coins.units(Math.min(running, 1.0));
        }
        thresholds[masks.length - 1] = 1L << 32;
        this.indexBits = 32 - Integer.numberOfLeadingZeros(masks.length);
    }

    /** Appends the sets of {@code left} more bits from {@code from..d-1} to {@code chosen}, lexicographically. */
    private static void combinations(int d, int left, int from, long chosen, List<Long> out) {
        if (left == 0) {
            out.add(chosen);
            return;
        }
        for (int i = from; i <= d - left; i++) {
            combinations(d, left - 1, i + 1, chosen | 1L << i, out);
        }
    }

    /** The spec from the JSON text of a client config; refusal {@code bad_config} when it is not one. */
    public static HadamardSpec fromJson(String json) {
        return fromObject(ClientSpec.parsed(json));
    }

    /** The number of coefficients T (the sets of 1 to {@code max_order} features). */
    public int coefficients() {
        return masks.length;
    }

    /** Slots per report. */
    public int slots() {
        return slots;
    }

    /** Per slot, the index coin and the parity coin. */
    @Override
    int coinBytes() {
        return 2 * Coins.COIN_BYTES * slots;
    }

    /** Per slot, the coefficient's index in {@code B} bits and its parity bit. */
    @Override
    int freshBytes() {
        return Coins.COIN_BYTES * slots;
    }

    @Override
    int reportBits() {
        return slots * (indexBits + 1);
    }

    /** The spec from a parsed JSON value ({@link Json}). */
    static HadamardSpec fromObject(Object config) {
        Block h = new Block(config, "hadamard", "max_order", "slots", "keep", "weights");
        int d = h.featureCount();
        int maxOrder = h.maxOrder;
        int slots = h.integer("slots");
        if (maxOrder > d) {
            throw ClientSpec.refuse("hadamard.max_order must be <= the " + d + " features, got max_order=" + maxOrder);
        }
        if (2L * slots * Coins.COIN_BYTES > HmacDrbg.MAX_REQUEST_BYTES) {
            throw ClientSpec.refuse("hadamard.slots draws too many coins, got slots=" + slots);
        }
        double keep = h.keep(0.5, "0.5");
        Object w = h.values.get("weights");
        if (!(w instanceof List) || ((List<?>) w).size() != maxOrder) {
            throw ClientSpec.refuse("hadamard.weights must hold " + maxOrder + " probabilities, one per order, got weights="
                    + ClientSpec.show(w));
        }
        double[] weights = new double[maxOrder];
        double total = 0.0;
        for (int j = 0; j < maxOrder; j++) {
            Object wj = ((List<?>) w).get(j);
            if (!isProbability(wj) || !(((Number) wj).doubleValue() > 0)) {
                throw ClientSpec.refuse("hadamard.weights must hold probabilities in (0, 1], got weights=" + w);
            }
            weights[j] = ((Number) wj).doubleValue();
            total += binomial(d, j + 1) * weights[j];
        }
        if (!(Math.abs(total - 1.0) <= 1e-9)) {
            throw ClientSpec.refuse("hadamard.weights must sum to 1 over the coefficients, got " + total);
        }
        return new HadamardSpec(h, slots, keep, weights);
    }

    /** {@code C(n, k)} rounded to a double, as Python's {@code math.comb(n, k) * w} rounds it. */
    private static double binomial(int n, int k) {
        BigInteger out = BigInteger.ONE;
        for (int i = 1; i <= k; i++) {
            out = out.multiply(BigInteger.valueOf(n - k + i)).divide(BigInteger.valueOf(i));
        }
        return out.doubleValue();
    }
}
