package ldp_marginals.client;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;

/**
 * What the client configs of the kinds that randomize a whole report share ({@link HadamardSpec},
 * {@link SubsetSpec}: docs/client.md, sections 11 and 12): the collection's name, its boolean features
 * (at most {@link #MAX_FEATURES}) and the checks of their integers and probabilities, each failure
 * refusal {@code bad_config}, with the rules of the Python references.
 */
final class WholeReportConfig {
    /** The most features such a collection may have (the job holds a report's bits in 64-bit words). */
    static final int MAX_FEATURES = 62;

    private WholeReportConfig() {
    }

    /** The collection's name: a non-empty string of well-formed Unicode. */
    static String collection(Object collection) {
        if (!(collection instanceof String) || ((String) collection).isEmpty() || !ClientSpec.isText((String) collection)) {
            throw ClientSpec.refuse("collection must be a non-empty string, got collection=" + ClientSpec.show(collection));
        }
        return (String) collection;
    }

    /** The feature names in layout order: 1 to {@link #MAX_FEATURES} boolean features, names unique. */
    static List<String> booleanFeatures(Object feats) {
        if (!(feats instanceof List) || ((List<?>) feats).isEmpty()) {
            throw ClientSpec.refuse("features must be a non-empty list, got features=" + ClientSpec.show(feats));
        }
        List<String> names = new ArrayList<>();
        for (Object f : (List<?>) feats) {
            String where = "features[" + names.size() + "]";
            Map<String, Object> feature = ClientSpec.keys(f, where, Arrays.asList("name", "type"), Collections.<String>emptyList());
            Object name = feature.get("name");
            if (!"boolean".equals(feature.get("type")) || !(name instanceof String) || ((String) name).isEmpty()
                    || !ClientSpec.isText((String) name)) {
                throw ClientSpec.refuse(where + " must be a boolean feature with a name, got " + feature);
            }
            names.add((String) name);
        }
        if (new HashSet<>(names).size() != names.size()) {
            throw ClientSpec.refuse("feature names must be unique, got " + names);
        }
        if (names.size() > MAX_FEATURES) {
            throw ClientSpec.refuse("features must list 1 to " + MAX_FEATURES + " boolean features, got " + names.size());
        }
        return Collections.unmodifiableList(names);
    }

    /**
     * {@code kind.name}, an integer >= 1 written as one (a {@code Long}: {@code 1.0} is not an integer, as
     * in the reference).
     */
    static int integer(Object value, String kind, String name) {
        if (!(value instanceof Long) || (Long) value < 1 || (Long) value > Integer.MAX_VALUE) {
            throw ClientSpec.refuse(kind + "." + name + " must be an integer >= 1, got " + name + "=" + ClientSpec.show(value));
        }
        return (int) (long) (Long) value;
    }

    /** Whether a value is a number in [0, 1] (a JSON {@code true} is not a number). */
    static boolean isProbability(Object value) {
        double v = value instanceof Number ? ((Number) value).doubleValue() : Double.NaN;
        return v >= 0.0 && v <= 1.0;
    }
}
