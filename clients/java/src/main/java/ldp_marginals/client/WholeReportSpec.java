package ldp_marginals.client;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;

/**
 * What the client configs of the kinds that randomize a whole report share ({@link HadamardSpec},
 * {@link SubsetSpec}: docs/client.md, sections 11 and 12): the collection's name, its boolean and
 * categorical features (a categorical one-hot, one bit per value; at most {@link #MAX_FEATURES} bits), its window, the kind's block with its {@code max_order} and its
 * {@code keep}, the device unit's optional {@code token} and {@code reports_per_day} (as the per-bit
 * config's: docs/client.md, sections 3 and 5), and the checks of their integers and probabilities, each failure refusal
 * {@code bad_config}, with the rules of the Python references. A kind reads its own block's other keys
 * ({@link Block}), says how many coin bytes and report bits one report takes, and nothing else.
 * Immutable and thread-safe.
 */
abstract class WholeReportSpec {
    /** The most features such a collection may have (the job holds a report's bits in 64-bit words). */
    static final int MAX_FEATURES = 62;

    final String collection;
    final List<String> features;   // feature names, in layout (bit) order
    final List<Feature> layout;    // the features (boolean, categorical), in layout order
    final int bits;                // the report's true bits (a categorical's one per value)
    final Window window;
    final int maxOrder;
    final double keep;             // the kind's probability of sending the truth (memoized: the fresh stage's)
    final String kind;             // the kind's name (its block's)
    final double permanentKeep;    // memoized (docs/client.md section 13): the permanent stage's keep; NaN if not
    final boolean token;           // reports carry the device token of their slice (docs/client.md section 5)
    final long reportsPerDay;      // the declared rate (section 3); 0 when the config declares none

    /** The spec of a config read by {@code block}, its keep checked; the window is read last, here. */
    WholeReportSpec(Block block, double keep) {
        this.collection = block.collection;
        this.features = block.features;
        this.layout = block.layout;
        this.bits = block.featureCount();
        this.maxOrder = block.maxOrder;
        this.keep = keep;
        this.kind = block.kind;
        this.permanentKeep = block.permanentKeep;
        this.window = ClientSpec.window(block.window);
        this.token = ClientSpec.token(block.spec);
        this.reportsPerDay = ClientSpec.reportsPerDay(block.spec);
    }

    /** Whether reports carry the device token. */
    public boolean token() {
        return token;
    }

    /** The declared rate: at most this many reports a UTC day of their event time; 0 when there is no limit. */
    public long reportsPerDay() {
        return reportsPerDay;
    }

    /** The collection's name. */
    public String collection() {
        return collection;
    }

    /** The feature names in layout order. */
    public List<String> featureNames() {
        return features;
    }

    /** The bytes of coins one report draws, in one request. */
    abstract int coinBytes();

    /** Whether the collection memoizes (its block holds {@code permanent_keep}: section 13). */
    boolean memoized() {
        return !Double.isNaN(permanentKeep);
    }

    /** The bytes of fresh coins one memoized report draws, in one request (section 13). */
    abstract int freshBytes();

    /** The bits of one report's layout (packed into {@code ceil(bits / 8)} bytes). */
    abstract int reportBits();

    /**
     * A whole-report client config read up to the kind's own checks, in the specification's order: its
     * keys ({@code collection}, {@code features}, {@code window} and the kind's block), the collection's
     * name, the boolean features, the block's keys, then its {@code max_order}.
     */
    static final class Block {
        final String kind;
        final String collection;
        final List<String> features;
        final List<Feature> layout;
        final Map<String, Object> values;   // the kind's block
        final int maxOrder;
        double permanentKeep = Double.NaN;   // read by the kind with its keep ({@link #keep})
        private final Object window;
        private final Map<String, Object> spec;   // the whole config (its optional token and reports_per_day)

        Block(Object config, String kind, String... keys) {
            this(config, kind, Collections.singletonList("permanent_keep"), keys);
        }

        /** As above, the block's optional keys {@code optional} (a kind's own beside {@code permanent_keep}). */
        Block(Object config, String kind, List<String> optional, String... keys) {
            Map<String, Object> spec = ClientSpec.keys(config, "config", Arrays.asList("collection", "features", "window", kind),
                    Arrays.asList("token", "reports_per_day"));
            this.spec = spec;
            this.kind = kind;
            this.collection = collection(spec.get("collection"));
            this.layout = wholeReportFeatures(spec.get("features"));
            List<String> names = new ArrayList<>();
            for (Feature f : layout) {
                names.add(f.name);
            }
            this.features = Collections.unmodifiableList(names);
            this.values = ClientSpec.keys(spec.get(kind), kind, Arrays.asList(keys), optional);
            this.window = spec.get("window");
            this.maxOrder = integer("max_order");
        }

        /** The block's {@code name}, an integer >= 1 written as one (a {@code Long}: {@code 1.0} is not one, as in the reference). */
        int integer(String name) {
            Object value = values.get(name);
            if (!(value instanceof Long) || (Long) value < 1 || (Long) value > Integer.MAX_VALUE) {
                throw ClientSpec.refuse(kind + "." + name + " must be an integer >= 1, got " + name + "=" + ClientSpec.show(value));
            }
            return (int) (long) (Long) value;
        }

        /** The block's {@code keep}: a number in ({@code above}, 1], {@code above} written {@code bound} in the refusal. */
        double keep(double above, String bound) {
            Object keep = values.get("keep");
            if (!isProbability(keep) || !(((Number) keep).doubleValue() > above)) {
                throw ClientSpec.refuse(kind + ".keep must be a number in (" + bound + ", 1], got keep=" + ClientSpec.show(keep));
            }
            if (values.containsKey("permanent_keep")) {   // section 13: the same bounds as keep
                Object pk = values.get("permanent_keep");
                if (!isProbability(pk) || !(((Number) pk).doubleValue() > above)) {
                    throw ClientSpec.refuse(kind + ".permanent_keep must be a number in (" + bound + ", 1], got permanent_keep="
                            + ClientSpec.show(pk));
                }
                permanentKeep = ((Number) pk).doubleValue();
            }
            return ((Number) keep).doubleValue();
        }

        /** The report's true bits: a boolean's one, a categorical's one per value. */
        int featureCount() {
            int bits = 0;
            for (Feature f : layout) {
                bits += f.bits();
            }
            return bits;
        }
    }

    /** The collection's name: a non-empty string of well-formed Unicode. */
    private static String collection(Object collection) {
        if (!(collection instanceof String) || ((String) collection).isEmpty() || !ClientSpec.isText((String) collection)) {
            throw ClientSpec.refuse("collection must be a non-empty string, got collection=" + ClientSpec.show(collection));
        }
        return (String) collection;
    }

    /**
     * The features in layout order: boolean ({@code {name, type}}) or categorical ({@code {name, type, values}},
     * its values checked as the per-bit config's), names unique, 1 to {@link #MAX_FEATURES} bits.
     */
    private static List<Feature> wholeReportFeatures(Object feats) {
        if (!(feats instanceof List) || ((List<?>) feats).isEmpty()) {
            throw ClientSpec.refuse("features must be a non-empty list, got features=" + ClientSpec.show(feats));
        }
        List<Feature> out = new ArrayList<>();
        List<String> names = new ArrayList<>();
        int bit = 0;
        for (Object f : (List<?>) feats) {
            String where = "features[" + names.size() + "]";
            boolean categorical = f instanceof Map && "categorical".equals(((Map<?, ?>) f).get("type"));
            Map<String, Object> feature = ClientSpec.keys(f, where, categorical ? Arrays.asList("name", "type", "values")
                    : Arrays.asList("name", "type"), Collections.<String>emptyList());
            Object name = feature.get("name");
            if (!(categorical || "boolean".equals(feature.get("type"))) || !(name instanceof String) || ((String) name).isEmpty()
                    || !ClientSpec.isText((String) name)) {
                throw ClientSpec.refuse(where + " must be a boolean or categorical feature with a name, got " + feature);
            }
            Feature made = categorical
                    ? new Feature((String) name, Feature.Kind.CATEGORICAL, ClientSpec.values(feature.get("values"), where), 0, 0, bit)
                    : new Feature((String) name, Feature.Kind.BOOLEAN, Collections.<String>emptyList(), 0, 0, bit);
            out.add(made);
            names.add((String) name);
            bit += made.bits();
        }
        if (new HashSet<>(names).size() != names.size()) {
            throw ClientSpec.refuse("feature names must be unique, got " + names);
        }
        if (bit > MAX_FEATURES) {
            throw ClientSpec.refuse("features must lay out 1 to " + MAX_FEATURES + " bits, got " + bit);
        }
        return Collections.unmodifiableList(out);
    }

    /** Whether a value is a number in [0, 1] (a JSON {@code true} is not a number). */
    static boolean isProbability(Object value) {
        double v = value instanceof Number ? ((Number) value).doubleValue() : Double.NaN;
        return v >= 0.0 && v <= 1.0;
    }
}
