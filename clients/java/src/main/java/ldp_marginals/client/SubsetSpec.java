package ldp_marginals.client;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * What a device is told about a subset-randomized-response collection ({@code channel: {kind: subset}}):
 * the client config of docs/client.md, section 12 (its name, boolean features, window, and {@code subset}:
 * {@code max_order} k, {@code width} s and {@code keep} p, the probability of sending the true pattern of
 * the s bits). Read with {@link #fromJson}; anything the specification does not allow is refusal
 * {@code bad_config}, with the rules of the Python reference
 * ({@code ldp_marginals.ldp.subset_client.SubsetClientSpec}). Immutable and thread-safe.
 */
public final class SubsetSpec {
    /** The most features a subset collection may have (subsets and patterns are 64-bit masks). */
    public static final int MAX_FEATURES = WholeReportConfig.MAX_FEATURES;

    final String collection;
    final List<String> features;   // boolean feature names, in layout (bit) order
    final Window window;
    final int maxOrder;
    final int width;               // s: the bits a report carries
    final double keep;             // p: the probability of sending their true pattern

    private SubsetSpec(String collection, List<String> features, Window window, int maxOrder, int width, double keep) {
        this.collection = collection;
        this.features = features;
        this.window = window;
        this.maxOrder = maxOrder;
        this.width = width;
        this.keep = keep;
    }

    /** The spec from the JSON text of a client config; refusal {@code bad_config} when it is not one. */
    public static SubsetSpec fromJson(String json) {
        return fromObject(ClientSpec.parsed(json));
    }

    /** The collection's name. */
    public String collection() {
        return collection;
    }

    /** The feature names in layout order. */
    public List<String> featureNames() {
        return features;
    }

    /** The width s: how many of the bits each report carries. */
    public int width() {
        return width;
    }

    /** Coins per report: d subset coins, the keep coin, s mask coins. */
    int coins() {
        return features.size() + 1 + width;
    }

    /** The spec from a parsed JSON value ({@link Json}). */
    static SubsetSpec fromObject(Object config) {
        Map<String, Object> spec = ClientSpec.keys(config, "config", Arrays.asList("collection", "features", "window", "subset"),
                Collections.<String>emptyList());
        String collection = WholeReportConfig.collection(spec.get("collection"));
        List<String> names = WholeReportConfig.booleanFeatures(spec.get("features"));
        int d = names.size();
        Map<String, Object> s = ClientSpec.keys(spec.get("subset"), "subset", Arrays.asList("max_order", "width", "keep"),
                Collections.<String>emptyList());
        int maxOrder = WholeReportConfig.integer(s.get("max_order"), "subset", "max_order");
        int width = WholeReportConfig.integer(s.get("width"), "subset", "width");
        if (!(maxOrder <= width && width <= d)) {
            throw ClientSpec.refuse("subset.width must be in [max_order=" + maxOrder + ", " + d + " features], got width=" + width);
        }
        Object keep = s.get("keep");
        // 2^-s is exact in doubles for s <= 62
        if (!WholeReportConfig.isProbability(keep) || !(((Number) keep).doubleValue() > Math.scalb(1.0, -width))) {
            throw ClientSpec.refuse("subset.keep must be a number in (2^-width, 1], got keep=" + ClientSpec.show(keep));
        }
        Window window = ClientSpec.window(spec.get("window"));
        return new SubsetSpec(collection, names, window, maxOrder, width, ((Number) keep).doubleValue());
    }
}
