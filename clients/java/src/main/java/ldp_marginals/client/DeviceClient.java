package ldp_marginals.client;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * One device's client for one collection: {@link #report} turns the device's feature values into one
 * {@link NoisyReport}, byte for byte as docs/client.md specifies (the Python reference client and the
 * shared test vectors in clients/test-vectors/ are the contract). In order:
 *
 * <ol>
 *   <li>check the input, refusing with the first code that applies ({@link Refusal}; no coin drawn);</li>
 *   <li>draw {@code 4 * (n + B)} bytes in one request, {@code n} the numeric features that do not
 *       memoize, {@code B} the bits: first one coin per such feature, then one per bit;</li>
 *   <li>encode each feature to its true bits (a numeric value {@code x} is 1 iff its coin is below
 *       {@code units((x - low) / (high - low))}, its coin drawn, or the device's encoding coin when its
 *       bit memoizes);</li>
 *   <li>randomize each bit: a memoized bit through its permanent channel with the permanent coin of
 *       (feature, value, bit) derived from the secret, then through its instantaneous channel with the
 *       bit's coin; any other bit through its instantaneous channel alone;</li>
 *   <li>assemble the record: bits packed with bit {@code i} at {@code (bits[i / 8] >> (i % 8)) & 1},
 *       dimensions sorted by their keys' UTF-8 bytes, the device token of the event's slice when the
 *       collection uses one.</li>
 * </ol>
 *
 * Thread-safe: reports are made one at a time.
 */
public final class DeviceClient {
    /** Event times are in [1970-01-01, 2100-01-01) UTC, in milliseconds. */
    static final long MAX_EVENT_MS = 4_102_444_800_000L;

    private final ClientSpec spec;
    private final DeviceSecret secret;
    private final Coins coins;

    /** A device's client with the given coin generator ({@link Coins#system()} on a device). */
    public DeviceClient(ClientSpec spec, DeviceSecret secret, Coins coins) {
        if (spec == null || secret == null || coins == null) {
            throw new IllegalArgumentException("spec, secret and coins must not be null");
        }
        this.spec = spec;
        this.secret = secret;
        this.coins = coins;
    }

    /** A device's client drawing its coins from the operating system's secure generator. */
    public static DeviceClient create(ClientSpec spec, DeviceSecret secret) {
        return new DeviceClient(spec, secret, Coins.system());
    }

    public ClientSpec spec() {
        return spec;
    }

    /** The report of the feature values (every feature's name to its value) at an event time (ms). */
    public NoisyReport report(Map<String, ?> values, long eventMs) {
        return report(values, eventMs, Collections.<String, String>emptyMap());
    }

    /**
     * The report of the feature values at an event time (ms since 1970 UTC), with public dimensions.
     * A boolean feature takes a {@code Boolean}, a categorical one one of its listed {@code String}s, a
     * numeric one any {@code Number} in its range.
     */
    public NoisyReport report(Map<String, ?> values, long eventMs, Map<String, ?> dimensions) {
        return trace(values, eventMs, dimensions).report;
    }

    /**
     * The same, for an event time held as a boxed number (parsed JSON, Kotlin's {@code Any}): an integer
     * type ({@code Long}, {@code Integer}, {@code Short}, {@code Byte}, {@code BigInteger}) in range, or
     * refusal {@code bad_event_time} (a {@code Double}, even 1.0, is not an integer, as in the reference).
     */
    public NoisyReport report(Map<String, ?> values, Number eventMs, Map<String, ?> dimensions) {
        return report(values, eventTime(eventMs), dimensions);
    }

    /** The report with its intermediate values (tests and debugging another client). */
    synchronized Trace trace(Map<String, ?> values, long eventMs, Map<String, ?> dimensions) {
        checkEventTime(eventMs);
        Map<String, String> dims = dimensions(dimensions);
        double[] units = check(values);
        byte[] drawn = coins.generate(Coins.COIN_BYTES * spec.drawnCoins);
        int fresh = spec.drawnCoins - spec.bitCount;
        int nextFresh = 0;
        int[] encoded = new int[spec.bitCount];
        Integer[] permanent = new Integer[spec.bitCount];
        byte[] packed = new byte[(spec.bitCount + 7) / 8];
        for (int k = 0; k < spec.features.size(); k++) {
            Feature f = spec.features.get(k);
            Object value = values.get(f.name);
            int[] bits = new int[f.bits()];
            String label;
            if (f.kind == Feature.Kind.NUMERIC) {
                boolean memoizes = spec.permanent[f.firstBit] != null;
                byte[] coin = memoizes ? secret.encodingCoin(spec.collection, f.name) : drawn;
                int offset = memoizes ? 0 : Coins.COIN_BYTES * nextFresh++;
                bits[0] = Coins.decide(coin, offset, units[k]);
                label = Integer.toString(bits[0]);
            } else if (f.kind == Feature.Kind.BOOLEAN) {
                bits[0] = (Boolean) value ? 1 : 0;
                label = Integer.toString(bits[0]);
            } else {
                bits[f.values.indexOf(value)] = 1;
                label = (String) value;
            }
            for (int j = 0; j < bits.length; j++) {
                int i = f.firstBit + j;
                int x = bits[j];
                ClientSpec.Channel inst = spec.instantaneous[i];
                ClientSpec.Channel perm = spec.permanent[i];
                int held = x;
                if (perm != null) {
                    held = Coins.decide(secret.permanentCoin(spec.collection, f.name, label, j), 0, x == 1 ? perm.q : perm.p);
                    permanent[i] = held;
                }
                int y = Coins.decide(drawn, Coins.COIN_BYTES * (fresh + i), held == 1 ? inst.q : inst.p);
                encoded[i] = x;
                packed[i / 8] |= (byte) (y << (i % 8));
            }
        }
        String token = spec.token ? secret.token(spec.collection, spec.window.sliceOf(eventMs)) : null;
        NoisyReport report = new NoisyReport(spec.collection, eventMs, packed, dims, token);
        return new Trace(report, drawn, encoded, Arrays.asList(permanent));
    }

    /** A report and the values that made it. */
    static final class Trace {
        final NoisyReport report;
        final byte[] coins;             // the bytes drawn from the generator
        final int[] encoded;            // the true bits
        final List<Integer> permanent;  // per bit, the permanent bit (null where it does not memoize)

        Trace(NoisyReport report, byte[] coins, int[] encoded, List<Integer> permanent) {
            this.report = report;
            this.coins = coins;
            this.encoded = encoded;
            this.permanent = permanent;
        }
    }

    /** Refusal {@code bad_event_time} unless the event time is in [0, {@link #MAX_EVENT_MS}). */
    static void checkEventTime(long eventMs) {
        if (eventMs < 0 || eventMs >= MAX_EVENT_MS) {
            throw new Refusal(Refusal.Code.BAD_EVENT_TIME, "event time must be an integer in [0, " + MAX_EVENT_MS
                    + ") ms, got " + eventMs);
        }
    }

    static long eventTime(Number eventMs) {
        if (eventMs instanceof Long || eventMs instanceof Integer || eventMs instanceof Short || eventMs instanceof Byte) {
            return eventMs.longValue();
        }
        if (eventMs instanceof BigInteger && ((BigInteger) eventMs).bitLength() < 64) {
            return eventMs.longValue();
        }
        if (eventMs instanceof BigInteger) {
            return -1;   // out of range either way
        }
        throw new Refusal(Refusal.Code.BAD_EVENT_TIME, "event time must be an integer in [0, " + MAX_EVENT_MS
                + ") ms, got a " + (eventMs == null ? "null" : eventMs.getClass().getSimpleName()));
    }

    /** The dimensions sorted by their keys' UTF-8 bytes; refusal unless non-empty strings map to strings. */
    static Map<String, String> dimensions(Map<String, ?> dimensions) {
        Map<String, String> out = new TreeMap<>(DeviceClient::compareUtf8);
        if (dimensions == null) {
            return out;
        }
        for (Map.Entry<?, ?> e : dimensions.entrySet()) {
            Object k = e.getKey();
            Object v = e.getValue();
            if (!(k instanceof String) || ((String) k).isEmpty() || !ClientSpec.isText((String) k)
                    || !(v instanceof String) || !ClientSpec.isText((String) v)) {
                throw new Refusal(Refusal.Code.BAD_DIMENSIONS, "dimensions must map non-empty strings to strings "
                        + "(well-formed Unicode), got a " + typeOf(v) + " for key " + (k instanceof String ? "\"" + k + "\"" : typeOf(k)));
            }
            out.put((String) k, (String) v);
        }
        return out;
    }

    /** Checks the values (docs/client.md, section 3, step 1); per feature, a numeric value's unit value. */
    private double[] check(Map<String, ?> values) {
        checkNames(spec.featureNames(), values);
        double[] units = new double[spec.features.size()];
        for (int k = 0; k < spec.features.size(); k++) {
            Feature f = spec.features.get(k);
            Object v = values.get(f.name);
            // the messages name the feature and what it takes, never the value given (it is private)
            if (f.kind == Feature.Kind.BOOLEAN && !(v instanceof Boolean)) {
                throw new Refusal(Refusal.Code.BAD_VALUE, "feature \"" + f.name + "\" is boolean: its value must be a Boolean, got a " + typeOf(v));
            }
            if (f.kind == Feature.Kind.CATEGORICAL && !f.values.contains(v)) {
                throw new Refusal(Refusal.Code.BAD_VALUE, "feature \"" + f.name + "\" must be one of " + f.values
                        + ", got " + (v instanceof String ? "another string" : "a " + typeOf(v)));
            }
            if (f.kind == Feature.Kind.NUMERIC) {
                if (!(v instanceof Number)) {
                    throw new Refusal(Refusal.Code.BAD_VALUE, "feature \"" + f.name + "\" is numeric: its value must be a Number, got a " + typeOf(v));
                }
                double x = ((Number) v).doubleValue();
                if (!(x >= f.low && x <= f.high)) {
                    throw new Refusal(Refusal.Code.OUT_OF_RANGE, "feature \"" + f.name + "\" must be in [" + f.low + ", " + f.high + "]");
                }
                units[k] = (x - f.low) / (f.high - f.low);
            }
        }
        return units;
    }

    /** Refusal {@code bad_value} for null values, {@code missing_feature}, then {@code unknown_feature}. */
    static void checkNames(List<String> names, Map<String, ?> values) {
        if (values == null) {
            throw new Refusal(Refusal.Code.BAD_VALUE, "values must map feature names to values, got null");
        }
        List<String> missing = new ArrayList<>();
        for (String name : names) {
            if (!values.containsKey(name)) {
                missing.add(name);
            }
        }
        if (!missing.isEmpty()) {
            throw new Refusal(Refusal.Code.MISSING_FEATURE, "values must give every feature, missing " + missing);
        }
        if (values.size() != names.size()) {
            List<String> unknown = new ArrayList<>();
            for (Object key : values.keySet()) {
                if (!names.contains(key)) {
                    unknown.add(String.valueOf(key));
                }
            }
            throw new Refusal(Refusal.Code.UNKNOWN_FEATURE, "values name features the collection does not have: " + unknown);
        }
    }

    static String typeOf(Object v) {
        return v == null ? "null" : v.getClass().getSimpleName();
    }

    /** Compares strings by their UTF-8 bytes, which is their order of code points (not of UTF-16 units). */
    static int compareUtf8(String a, String b) {
        byte[] x = a.getBytes(StandardCharsets.UTF_8);
        byte[] y = b.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < Math.min(x.length, y.length); i++) {
            int d = (x[i] & 0xff) - (y[i] & 0xff);
            if (d != 0) {
                return d;
            }
        }
        return x.length - y.length;
    }

    @Override
    public String toString() {
        return "DeviceClient(collection=" + spec.collection + ")";
    }
}
