package ldp_marginals.client;

/**
 * What a device is told about a subset-randomized-response collection ({@code channel: {kind: subset}}):
 * the client config of docs/client.md, section 12 (its name, boolean and categorical features, window, and {@code subset}:
 * {@code max_order} k, {@code width} s and {@code keep} p, the probability of sending the true pattern of
 * the s bits). Read with {@link #fromJson}; anything the specification does not allow is refusal
 * {@code bad_config}, with the rules of the Python reference
 * ({@code ldp_marginals.ldp.subset_client.SubsetClientSpec}). Immutable and thread-safe.
 */
public final class SubsetSpec extends WholeReportSpec {
    /** The most features a subset collection may have (subsets and patterns are 64-bit masks). */
    public static final int MAX_FEATURES = WholeReportSpec.MAX_FEATURES;

    final int width;               // s: the bits a report carries

    private SubsetSpec(Block block, int width, double keep) {
        super(block, keep);
        this.width = width;
    }

    /** The spec from the JSON text of a client config; refusal {@code bad_config} when it is not one. */
    public static SubsetSpec fromJson(String json) {
        return fromObject(ClientSpec.parsed(json));
    }

    /** The width s: how many of the bits each report carries. */
    public int width() {
        return width;
    }

    /** Coins per report: d subset coins, the keep coin, s mask coins. */
    @Override
    int coinBytes() {
        return Coins.COIN_BYTES * (bits + 1 + width);
    }

    /** Fresh coins per memoized report: the keep coin, s mask coins. */
    @Override
    int freshBytes() {
        return Coins.COIN_BYTES * (1 + width);
    }

    /** The d-bit subset mask, then the s pattern bits. */
    @Override
    int reportBits() {
        return bits + width;
    }

    /** The spec from a parsed JSON value ({@link Json}). */
    static SubsetSpec fromObject(Object config) {
        Block s = new Block(config, "subset", "max_order", "width", "keep");
        int d = s.featureCount();
        int maxOrder = s.maxOrder;
        int width = s.integer("width");
        if (!(maxOrder <= width && width <= d)) {
            throw ClientSpec.refuse("subset.width must be in [max_order=" + maxOrder + ", " + d + " features], got width=" + width);
        }
        // 2^-s is exact in doubles for s <= 62
        double keep = s.keep(Math.scalb(1.0, -width), "2^-width");
        return new SubsetSpec(s, width, keep);
    }
}
