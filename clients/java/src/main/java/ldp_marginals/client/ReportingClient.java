package ldp_marginals.client;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What every kind of device client shares ({@link DeviceClient}, {@link HadamardDeviceClient},
 * {@link SubsetDeviceClient}): the constructor's checks, the public {@code report} overloads, and the
 * first checks of the input, in the specification's order (the event time, then the dimensions) before
 * the kind's encoder ({@link #encode}) checks the values, draws its coins and makes the report.
 *
 * Thread-safe: reports are made one at a time.
 *
 * @param <S> the collection's spec
 * @param <T> the kind's trace: a report and the values that made it
 */
abstract class ReportingClient<S, T extends ReportingClient.Traced> {
    /** Event times are in [1970-01-01, 2100-01-01) UTC, in milliseconds. */
    static final long MAX_EVENT_MS = 4_102_444_800_000L;

    final S spec;
    final DeviceSecret secret;
    final Coins coins;

    ReportingClient(S spec, DeviceSecret secret, Coins coins) {
        if (spec == null || secret == null || coins == null) {
            throw new IllegalArgumentException("spec, secret and coins must not be null");
        }
        this.spec = spec;
        this.secret = secret;
        this.coins = coins;
    }

    public S spec() {
        return spec;
    }

    /** The report of the feature values (every feature's name to its value) at an event time (ms). */
    public NoisyReport report(Map<String, ?> values, long eventMs) {
        return report(values, eventMs, Collections.<String, String>emptyMap());
    }

    /**
     * The report of the feature values at an event time (ms since 1970 UTC), with public dimensions
     * (non-empty strings to strings). What each kind of feature takes: the kind's class says.
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
    final synchronized T trace(Map<String, ?> values, long eventMs, Map<String, ?> dimensions) {
        checkEventTime(eventMs);
        return encode(values, eventMs, dimensions(dimensions));
    }

    /**
     * The kind's encoder: the report of the values at a checked event time, with the checked dimensions
     * (sorted by their keys' UTF-8 bytes); it checks the values before it draws any coin.
     */
    abstract T encode(Map<String, ?> values, long eventMs, Map<String, String> dimensions);

    /** A report and the values that made it (each kind's trace adds its own). */
    static class Traced {
        final NoisyReport report;

        Traced(NoisyReport report) {
            this.report = report;
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
        Map<String, String> out = new TreeMap<>(ReportingClient::compareUtf8);
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

    /**
     * The true bits of a collection whose features are all boolean ({@code names} in layout order): the
     * checks of {@link #checkNames}, then refusal {@code bad_value} unless every value is a {@code Boolean}.
     */
    static int[] booleanBits(List<String> names, Map<String, ?> values) {
        checkNames(names, values);
        int[] bits = new int[names.size()];
        for (int i = 0; i < bits.length; i++) {
            Object v = values.get(names.get(i));
            if (!(v instanceof Boolean)) {
                throw new Refusal(Refusal.Code.BAD_VALUE, "feature \"" + names.get(i)
                        + "\" is boolean: its value must be a Boolean, got a " + typeOf(v));
            }
            bits[i] = (Boolean) v ? 1 : 0;
        }
        return bits;
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
}
