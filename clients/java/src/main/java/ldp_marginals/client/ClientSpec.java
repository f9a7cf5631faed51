package ldp_marginals.client;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What a device is told about a collection: the client config of docs/client.md, section 1 (its name,
 * features, window, one channel per bit, whether reports carry the device token and the declared rate
 * {@code reports_per_day}, when the collection declares one). Read with
 * {@link #fromJson}; anything the specification does not allow is refusal {@code bad_config}.
 * Immutable and thread-safe.
 */
public final class ClientSpec {
    /** The largest {@code reports_per_day} (and rate-state count): a Java int, a JavaScript safe integer. */
    static final long MAX_REPORTS_PER_DAY = Integer.MAX_VALUE;

    /** A report may draw at most this many coins (HMAC_DRBG's largest request, 2^16 bytes). */
    static final int MAX_COINS = HmacDrbg.MAX_REQUEST_BYTES / Coins.COIN_BYTES;

    /** One bit's randomized-response channel {@code (p, q)}: {@code p = P(1 | 0)}, {@code q = P(1 | 1)}. */
    static final class Channel {
        final double p;
        final double q;

        Channel(double p, double q) {
            this.p = p;
            this.q = q;
        }
    }

    final String collection;
    final List<Feature> features;
    final Window window;
    final Channel[] instantaneous;
    final Channel[] permanent;    // null where a bit does not memoize
    final boolean token;
    final long reportsPerDay;     // the declared rate; 0 when the config declares none (no limit)
    final int bitCount;
    final int drawnCoins;         // per report: numeric features that do not memoize, then every bit

    private ClientSpec(String collection, List<Feature> features, Window window, Channel[] instantaneous,
                       Channel[] permanent, boolean token, long reportsPerDay) {
        this.collection = collection;
        this.reportsPerDay = reportsPerDay;
        this.features = features;
        this.window = window;
        this.instantaneous = instantaneous;
        this.permanent = permanent;
        this.token = token;
        this.bitCount = instantaneous.length;
        int fresh = 0;
        for (Feature f : features) {
            if (f.kind == Feature.Kind.NUMERIC && permanent[f.firstBit] == null) {
                fresh++;
            }
        }
        this.drawnCoins = fresh + bitCount;
    }

    /** The spec from the JSON text of a client config; refusal {@code bad_config} when it is not one. */
    public static ClientSpec fromJson(String json) {
        return fromObject(parsed(json));
    }

    /** The collection's name. */
    public String collection() {
        return collection;
    }

    /** Bits in a report. */
    public int bitCount() {
        return bitCount;
    }

    /** Whether reports carry the device token. */
    public boolean carriesToken() {
        return token;
    }

    /** The declared rate: at most this many reports a UTC day of their event time; 0 when there is no limit. */
    public long reportsPerDay() {
        return reportsPerDay;
    }

    /** The feature names in layout order. */
    public List<String> featureNames() {
        List<String> names = new ArrayList<>();
        for (Feature f : features) {
            names.add(f.name);
        }
        return Collections.unmodifiableList(names);
    }

    /** The spec from a parsed JSON value ({@link Json}). */
    static ClientSpec fromObject(Object config) {
        Map<String, Object> spec = keys(config, "config", Arrays.asList("collection", "features", "window", "channels"),
                Arrays.asList("token", "reports_per_day"));
        Object collection = spec.get("collection");
        if (!(collection instanceof String) || ((String) collection).isEmpty() || !isText((String) collection)) {
            throw refuse("collection must be a non-empty string, got collection=" + show(collection));
        }
        List<Feature> features = features(spec.get("features"));
        int bits = 0;
        for (Feature f : features) {
            bits += f.bits();
        }
        Object chans = spec.get("channels");
        if (!(chans instanceof List)) {
            throw refuse("channels must be a list with one entry per bit, got channels=" + show(chans));
        }
        List<?> list = (List<?>) chans;
        Channel[] instantaneous = new Channel[list.size()];
        Channel[] permanent = new Channel[list.size()];
        for (int i = 0; i < list.size(); i++) {
            String where = "channels[" + i + "]";
            Map<String, Object> c = keys(list.get(i), where, Arrays.asList("p", "q"), Arrays.asList("permanent"));
            instantaneous[i] = channel(c.get("p"), c.get("q"), where);
            if (c.containsKey("permanent")) {
                Map<String, Object> perm = keys(c.get("permanent"), where + ".permanent", Arrays.asList("p", "q"), Collections.<String>emptyList());
                permanent[i] = channel(perm.get("p"), perm.get("q"), where + ".permanent");
            }
        }
        boolean token = token(spec);
        if (list.size() != bits) {
            throw refuse("channels must have one entry per bit (" + bits + "), got " + list.size());
        }
        Window window = window(spec.get("window"));
        long rate = reportsPerDay(spec);
        ClientSpec out = new ClientSpec((String) collection, features, window, instantaneous, permanent, token, rate);
        if (out.drawnCoins > MAX_COINS) {
            throw refuse("a report may draw at most " + MAX_COINS + " coins, this layout draws " + out.drawnCoins);
        }
        return out;
    }

    /** A config's optional {@code token} (every kind's): true or false; absent, false. */
    static boolean token(Map<String, Object> spec) {
        if (!spec.containsKey("token")) {
            return false;
        }
        Object t = spec.get("token");
        if (!(t instanceof Boolean)) {
            throw refuse("token must be true or false, got token=" + show(t));
        }
        return (Boolean) t;
    }

    /** A config's optional {@code reports_per_day} (every kind's); 0 when absent (no limit). */
    static long reportsPerDay(Map<String, Object> spec) {
        if (!spec.containsKey("reports_per_day")) {
            return 0;
        }
        Object r = spec.get("reports_per_day");
        // an integer written as one (a Long: 2.0 is not, as in the reference), in [1, 2^31 - 1]
        if (!(r instanceof Long) || (Long) r < 1 || (Long) r > MAX_REPORTS_PER_DAY) {
            throw refuse("reports_per_day must be an integer in [1, " + MAX_REPORTS_PER_DAY + "], got reports_per_day=" + show(r));
        }
        return (Long) r;
    }

    private static List<Feature> features(Object feats) {
        if (!(feats instanceof List) || ((List<?>) feats).isEmpty()) {
            throw refuse("features must be a non-empty list, got features=" + show(feats));
        }
        List<Feature> out = new ArrayList<>();
        Set<String> names = new HashSet<>();
        int bit = 0;
        List<?> list = (List<?>) feats;
        for (int i = 0; i < list.size(); i++) {
            String where = "features[" + i + "]";
            Object item = list.get(i);
            Object kind = item instanceof Map ? ((Map<?, ?>) item).get("type") : null;
            List<String> extra = "categorical".equals(kind) ? Arrays.asList("values")
                    : "numeric".equals(kind) ? Arrays.asList("low", "high") : Collections.<String>emptyList();
            List<String> required = new ArrayList<>(Arrays.asList("name", "type"));
            required.addAll(extra);
            Map<String, Object> f = keys(item, where, required, Collections.<String>emptyList());
            Object name = f.get("name");
            if (!(name instanceof String) || ((String) name).isEmpty() || ((String) name).contains("=")
                    || !isText((String) name)) {
                throw refuse(where + ".name must be a non-empty string without '=', got name=" + show(name));
            }
            if (!names.add((String) name)) {
                throw refuse("feature names must be unique, got " + show(name) + " twice");
            }
            Feature feature;
            if ("boolean".equals(kind)) {
                feature = new Feature((String) name, Feature.Kind.BOOLEAN, Collections.<String>emptyList(), 0, 0, bit);
            } else if ("categorical".equals(kind)) {
                feature = new Feature((String) name, Feature.Kind.CATEGORICAL, values(f.get("values"), where), 0, 0, bit);
            } else if ("numeric".equals(kind)) {
                double low = finite(f.get("low"), where + ".low");
                double high = finite(f.get("high"), where + ".high");
                if (!(low < high)) {
                    throw refuse(where + " needs low < high, got low=" + show(f.get("low")) + ", high=" + show(f.get("high")));
                }
                feature = new Feature((String) name, Feature.Kind.NUMERIC, Collections.<String>emptyList(), low, high, bit);
            } else {
                throw refuse(where + ".type must be one of [boolean, categorical, numeric], got type=" + show(kind));
            }
            out.add(feature);
            bit += feature.bits();
        }
        return Collections.unmodifiableList(out);
    }

    static List<String> values(Object values, String where) {
        if (!(values instanceof List)) {
            throw refuse(where + ".values must be a list, got values=" + show(values));
        }
        List<?> list = (List<?>) values;
        Set<String> seen = new LinkedHashSet<>();
        for (Object v : list) {
            if (!(v instanceof String) || ((String) v).isEmpty() || !isText((String) v)) {
                throw refuse(where + ".values must be non-empty strings, got " + show(v));
            }
            seen.add((String) v);
        }
        if (list.size() < 2 || seen.size() != list.size()) {
            throw refuse(where + ".values must list at least 2 distinct values, got " + list.size()
                    + " with " + seen.size() + " distinct");
        }
        return Collections.unmodifiableList(new ArrayList<>(seen));
    }

    static Window window(Object spec) {
        Object kind = spec instanceof Map ? ((Map<?, ?>) spec).get("type") : null;
        List<String> sizes;
        if ("fixed".equals(kind)) {
            sizes = Arrays.asList("size_seconds");
        } else if ("sliding".equals(kind)) {
            sizes = Arrays.asList("size_seconds", "period_seconds");
        } else if ("global".equals(kind)) {
            sizes = Collections.<String>emptyList();
        } else {
            throw refuse("window.type must be one of [fixed, sliding, global], got window=" + show(spec));
        }
        List<String> required = new ArrayList<>(Arrays.asList("type"));
        required.addAll(sizes);
        Map<String, Object> w = keys(spec, "window", required, Collections.<String>emptyList());
        double[] seconds = new double[sizes.size()];
        for (int k = 0; k < sizes.size(); k++) {
            String key = sizes.get(k);
            Object value = w.get(key);
            double s = value instanceof Number ? ((Number) value).doubleValue() : Double.NaN;
            if (!(s >= 1.0 && s < Double.POSITIVE_INFINITY)) {
                throw refuse("window." + key + " must be a number >= 1 second, got " + key + "=" + show(value));
            }
            double ms = s * 1000;
            if (Math.abs(ms - Math.rint(ms)) > 1e-6) {
                throw refuse("window." + key + " must be a whole number of milliseconds, got " + key + "=" + show(value));
            }
            seconds[k] = s;
        }
        if ("global".equals(kind)) {
            return new Window("global", 0);
        }
        if ("sliding".equals(kind)) {
            double size = seconds[0];
            double period = seconds[1];
            if (!(period <= size)) {
                throw refuse("window.period_seconds must be in (0, size_seconds], got period_seconds=" + show(w.get("period_seconds")));
            }
            double ratio = size / period;
            if (Math.abs(ratio - Math.rint(ratio)) > 1e-9) {
                throw refuse("window.size_seconds must be a whole multiple of period_seconds, got size_seconds="
                        + show(w.get("size_seconds")) + ", period_seconds=" + show(w.get("period_seconds")));
            }
            return new Window("sliding", Math.round(period * 1000));
        }
        return new Window("fixed", Math.round(seconds[0] * 1000));
    }

    private static Channel channel(Object p, Object q, String where) {
        double pp = probability(p, where + ".p");
        double qq = probability(q, where + ".q");
        if (!(pp < qq)) {
            throw refuse(where + ": q must be in (p, 1], got p=" + show(p) + ", q=" + show(q));
        }
        return new Channel(pp, qq);
    }

    private static double probability(Object value, String where) {
        double v = value instanceof Number ? ((Number) value).doubleValue() : Double.NaN;
        if (!(v >= 0.0 && v <= 1.0)) {
            throw refuse(where + " must be a number in [0, 1], got " + show(value));
        }
        return v;
    }

    private static double finite(Object value, String where) {
        double v = value instanceof Number ? ((Number) value).doubleValue() : Double.NaN;
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            throw refuse(where + " must be a finite number, got " + show(value));
        }
        return v;
    }

    /** The JSON value of a client config's text (any kind's); refusal {@code bad_config} when it is not JSON. */
    static Object parsed(String json) {
        try {
            return Json.parse(json);
        } catch (IllegalArgumentException e) {
            throw refuse("the config is " + e.getMessage());
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> keys(Object spec, String where, List<String> required, List<String> optional) {
        if (!(spec instanceof Map)) {
            throw refuse(where + " must be an object, got " + where + "=" + show(spec));
        }
        Map<String, Object> map = (Map<String, Object>) spec;
        for (Object key : map.keySet()) {
            if (!required.contains(key) && !optional.contains(key)) {
                throw refuse(where + " must have keys " + required + " (optional " + optional + "), got key " + show(key));
            }
        }
        for (String key : required) {
            if (!map.containsKey(key)) {
                throw refuse(where + " must have keys " + required + " (optional " + optional + "), missing " + key);
            }
        }
        return map;
    }

    /** Whether a string is well-formed Unicode (no unpaired surrogate), so that its UTF-8 bytes exist. */
    static boolean isText(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isHighSurrogate(c)) {
                if (i + 1 == s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) {
                    return false;
                }
                i++;
            } else if (Character.isLowSurrogate(c)) {
                return false;
            }
        }
        return true;
    }

    static String show(Object value) {
        if (value instanceof String) {
            return "\"" + value + "\"";
        }
        if (value instanceof Object[]) {
            return Arrays.toString((Object[]) value);
        }
        return String.valueOf(value);
    }

    static Refusal refuse(String message) {
        return new Refusal(Refusal.Code.BAD_CONFIG, message);
    }
}
