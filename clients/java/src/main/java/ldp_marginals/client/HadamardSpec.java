package ldp_marginals.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * What a device is told about a Hadamard-sampling collection ({@code channel: {kind: hadamard}}): the
 * client config of docs/client.md, section 11 (its name, boolean and categorical features, window, and {@code hadamard}:
 * {@code max_order} k, {@code slots} m, {@code keep}, one coefficient weight per order and, for a collection with
 * extra sets, {@code sets}: the pool is then every set of 1..k bits followed by the extra sets' subsets of more
 * bits, issue 48 item 1). Read with
 * {@link #fromJson}; anything the specification does not allow is refusal {@code bad_config}, with the
 * rules of the Python reference ({@code ldp_marginals.ldp.hadamard_client.HadamardClientSpec}).
 * Immutable and thread-safe.
 */
public final class HadamardSpec extends WholeReportSpec {
    /** The most features a Hadamard collection may have (the job holds a report's bits in 64-bit words). */
    public static final int MAX_FEATURES = WholeReportSpec.MAX_FEATURES;
    /** The most coefficients a pool may hold (the server's cap). */
    static final int MAX_COEFFICIENTS = 1 << 18;
    /** The most subsets of the extra sets a client enumerates (the sum of 2^|set|). */
    static final long MAX_POOL_WORK = 1L << 20;

    final int slots;
    final double[] weights;        // per order 1..top (maxOrder, or the widest extra set), each coefficient's probability
    final long[] masks;            // per coefficient (family order; index a at a - 1), the bit mask of its set
    final long[] thresholds;       // per coefficient, units(S_a); the last is 2^32
    final int indexBits;           // B: the bit length of the number of coefficients T

    private HadamardSpec(Block block, int slots, double keep, double[] weights, List<Long> sets) {
        super(block, keep);
        this.slots = slots;
        this.weights = weights;
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
        combinations(null, d, left, from, chosen, out);
    }

    /**
     * Appends the sets of {@code left} more of the bits {@code bits[from..]} (all bits {@code from..d-1} when
     * {@code bits} is null) to {@code chosen}, lexicographically.
     */
    private static void combinations(int[] bits, int d, int left, int from, long chosen, List<Long> out) {
        if (left == 0) {
            out.add(chosen);
            return;
        }
        int n = bits == null ? d : bits.length;
        for (int i = from; i <= n - left; i++) {
            combinations(bits, d, left - 1, i + 1, chosen | 1L << (bits == null ? i : bits[i]), out);
        }
    }

    /** Whether set {@code a} precedes set {@code b} (same size) in lexicographic order of their bit indices. */
    private static int lexicographic(long a, long b) {
        long x = a ^ b;
        if (x == 0) {
            return 0;
        }
        long low = Long.lowestOneBit(x);   // the smallest index where they differ: the set holding it comes first
        return (a & low) != 0 ? -1 : 1;
    }

    /** The extra sets of the block ({@code sets}, absent: none), checked as the specification says. */
    private static List<int[]> extraSets(Block h, int d, int maxOrder) {
        if (!h.values.containsKey("sets")) {
            return new ArrayList<>();
        }
        Object raw = h.values.get("sets");
        if (!(raw instanceof List) || ((List<?>) raw).isEmpty()) {
            throw ClientSpec.refuse("hadamard.sets must be a non-empty list, got sets=" + ClientSpec.show(raw));
        }
        List<int[]> out = new ArrayList<>();
        Set<Long> seen = new HashSet<>();
        long work = 0;
        for (Object s : (List<?>) raw) {
            String where = "hadamard.sets[" + out.size() + "]";
            if (!(s instanceof List) || ((List<?>) s).size() <= maxOrder) {
                throw ClientSpec.refuse(where + " must be a list of more than max_order=" + maxOrder + " increasing bit indices, got "
                        + ClientSpec.show(s));
            }
            List<?> list = (List<?>) s;
            int[] bits = new int[list.size()];
            long mask = 0;
            for (int i = 0; i < bits.length; i++) {
                Object b = list.get(i);
                if (!(b instanceof Long) || (Long) b < 0 || (Long) b >= d || (i > 0 && (Long) b <= bits[i - 1])) {
                    throw ClientSpec.refuse(where + " must be a list of more than max_order=" + maxOrder
                            + " increasing bit indices in [0, " + d + "), got " + ClientSpec.show(s));
                }
                bits[i] = (int) (long) (Long) b;
                mask |= 1L << bits[i];
            }
            if (!seen.add(mask)) {
                throw ClientSpec.refuse("hadamard.sets must be distinct, got " + ClientSpec.show(raw));
            }
            out.add(bits);
        }
        for (int[] bits : out) {
            work += 1L << bits.length;
        }
        if (work > MAX_POOL_WORK) {
            throw ClientSpec.refuse("hadamard.sets hold more than " + MAX_POOL_WORK + " subsets (sum of 2^|set|)");
        }
        return out;
    }

    /** The pool in family order: every set of 1..k bits, then per order the extra sets' distinct subsets. */
    private static List<Long> pool(int d, int maxOrder, List<int[]> extra) {
        List<Long> sets = new ArrayList<>();
        for (int j = 1; j <= maxOrder; j++) {
            combinations(d, j, 0, 0L, sets);
        }
        int top = maxOrder;
        for (int[] bits : extra) {
            top = Math.max(top, bits.length);
        }
        for (int j = maxOrder + 1; j <= top; j++) {
            List<Long> order = new ArrayList<>();
            for (int[] bits : extra) {
                if (bits.length >= j) {
                    combinations(bits, d, j, 0, 0L, order);
                }
            }
            List<Long> distinct = new ArrayList<>(new HashSet<>(order));
            Collections.sort(distinct, new Comparator<Long>() {
                @Override
                public int compare(Long a, Long b) {
                    return lexicographic(a, b);
                }
            });
            sets.addAll(distinct);
        }
        return sets;
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
        Block h = new Block(config, "hadamard", Arrays.asList("sets", "permanent_keep"), "max_order", "slots", "keep", "weights");
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
        if (!(w instanceof List)) {
            throw ClientSpec.refuse("hadamard.weights must be a list, got weights=" + ClientSpec.show(w));
        }
        List<int[]> extra = extraSets(h, d, maxOrder);
        int top = maxOrder;
        for (int[] bits : extra) {
            top = Math.max(top, bits.length);
        }
        if (((List<?>) w).size() != top) {
            throw ClientSpec.refuse("hadamard.weights must hold " + top + " probabilities, one per order, got weights="
                    + ClientSpec.show(w));
        }
        double[] weights = new double[top];
        for (int j = 0; j < top; j++) {
            Object wj = ((List<?>) w).get(j);
            if (!isProbability(wj) || !(((Number) wj).doubleValue() > 0)) {
                throw ClientSpec.refuse("hadamard.weights must hold probabilities in (0, 1], got weights=" + w);
            }
            weights[j] = ((Number) wj).doubleValue();
        }
        double total = 0.0;
        List<Long> sets;
        if (extra.isEmpty()) {
            double count = 0.0;
            for (int j = 0; j < top; j++) {
                total += binomial(d, j + 1) * weights[j];
                count += binomial(d, j + 1);
            }
            if (count > MAX_COEFFICIENTS) {
                throw ClientSpec.refuse("hadamard: the pool holds " + (long) count + " coefficients, over " + MAX_COEFFICIENTS);
            }
            sets = null;
        } else {
            sets = pool(d, maxOrder, extra);
            if (sets.size() > MAX_COEFFICIENTS) {
                throw ClientSpec.refuse("hadamard: the pool holds " + sets.size() + " coefficients, over " + MAX_COEFFICIENTS);
            }
            long[] sizes = new long[top];
            for (long s : sets) {
                sizes[Long.bitCount(s) - 1]++;
            }
            for (int j = 0; j < top; j++) {
                total += sizes[j] * weights[j];
            }
        }
        if (!(Math.abs(total - 1.0) <= 1e-9)) {
            throw ClientSpec.refuse("hadamard.weights must sum to 1 over the coefficients, got " + total);
        }
        return new HadamardSpec(h, slots, keep, weights, sets == null ? pool(d, maxOrder, extra) : sets);
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
