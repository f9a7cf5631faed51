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
 * {@link SubsetDeviceClient}): the constructor's checks, the rate state and the declared rate
 * (docs/client.md, section 3: {@link #rateState()}, {@link #count}), the public {@code report} overloads, and the
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

    /** Milliseconds in a UTC day: the rate counts reports per {@code eventMs / MS_PER_DAY}. */
    static final long MS_PER_DAY = 86_400_000L;
    /** The UTC day of the last event time a client accepts (2099-12-31). */
    static final long LAST_DAY = (MAX_EVENT_MS - 1) / MS_PER_DAY;

    final S spec;
    final DeviceSecret secret;
    final Coins coins;
    private final TreeMap<Long, Long> reported;   // UTC day -> reports made (this collection's)

    /** The client of a spec, restored from a parsed rate state ({@link Json}; null: no reports made yet). */
    ReportingClient(S spec, DeviceSecret secret, Coins coins, Object rateState) {
        if (spec == null || secret == null || coins == null) {
            throw new IllegalArgumentException("spec, secret and coins must not be null");
        }
        this.spec = spec;
        this.secret = secret;
        this.coins = coins;
        this.reported = readRateState(rateState);
    }

    /** The declared rate of the spec: at most this many reports a UTC day; 0 when there is none. */
    abstract long reportsPerDay();

    /**
     * The rate state: the reports made per UTC day of their event time, as JSON text, days (since
     * 1970-01-01) in decimal and in order, {@code {"20454":2,"20455":1}}. Persist it after each report (in
     * the app's private storage) and pass it back to the constructor: the count is the device's state.
     */
    public synchronized String rateState() {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<Long, Long> e : reported.entrySet()) {
            out.append(out.length() > 1 ? "," : "").append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        return out.append('}').toString();
    }

    /** The parsed rate state of its JSON text (null: none); refusal {@code bad_state} when it is not JSON. */
    static Object parsedState(String text) {
        if (text == null) {
            return null;
        }
        Object parsed;
        try {
            parsed = Json.parse(text);
        } catch (IllegalArgumentException e) {
            throw new Refusal(Refusal.Code.BAD_STATE, "the rate state is " + e.getMessage());
        }
        if (parsed == null) {   // the text "null": no state is a null String, not this
            throw new Refusal(Refusal.Code.BAD_STATE, "the rate state must be a JSON object, got null");
        }
        return parsed;
    }

    /** The rate state from its parsed JSON: day numbers in decimal to integer counts (docs/client.md, section 3). */
    private static TreeMap<Long, Long> readRateState(Object state) {
        TreeMap<Long, Long> out = new TreeMap<>();
        if (state == null) {
            return out;
        }
        if (!(state instanceof Map)) {
            throw new Refusal(Refusal.Code.BAD_STATE, "the rate state must map UTC day numbers to counts, got a "
                    + typeOf(state));
        }
        for (Map.Entry<?, ?> e : ((Map<?, ?>) state).entrySet()) {
            String key = String.valueOf(e.getKey());
            if (!key.matches("0|[1-9][0-9]{0,5}") || Long.parseLong(key) > LAST_DAY) {
                throw new Refusal(Refusal.Code.BAD_STATE, "the rate state's keys must be UTC day numbers in [0, "
                        + LAST_DAY + "] in decimal, got key \"" + key + "\"");
            }
            Object count = e.getValue();
            // never echo a count: it says how active the device is
            if (!(count instanceof Long) || (Long) count < 0 || (Long) count > ClientSpec.MAX_REPORTS_PER_DAY) {
                throw new Refusal(Refusal.Code.BAD_STATE, "the rate state's counts must be integers in [0, "
                        + ClientSpec.MAX_REPORTS_PER_DAY + "], got a bad count for day " + key);
            }
            out.put(Long.parseLong(key), (Long) count);
        }
        return out;
    }

    /** Counts a report on its event's UTC day, or refuses it ({@code rate_exceeded}) past the declared rate. */
    final void count(long eventMs) {
        long day = eventMs / MS_PER_DAY;
        Long held = reported.get(day);   // not getOrDefault: Android's API level 21 lacks it
        long made = held == null ? 0 : held;
        if (reportsPerDay() > 0 && made >= reportsPerDay()) {
            throw new Refusal(Refusal.Code.RATE_EXCEEDED, "this device has made the " + reportsPerDay()
                    + " reports a UTC day the collection declares (reports_per_day) on day " + day);
        }
        reported.put(day, Math.min(made + 1, ClientSpec.MAX_REPORTS_PER_DAY));   // without a rate, stops at 2^31 - 1
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
    /**
     * The true bits of a whole-report kind's report: a boolean is its bit, a categorical value one-hot (one bit
     * per value, the value's set), in layout order, as the per-bit client encodes them; {@code bad_value} otherwise.
     */
    static int[] wholeReportBits(List<Feature> layout, List<String> names, Map<String, ?> values) {
        checkNames(names, values);
        int n = 0;
        for (Feature f : layout) {
            n += f.bits();
        }
        int[] bits = new int[n];
        for (Feature f : layout) {
            Object v = values.get(f.name);
            if (f.kind == Feature.Kind.BOOLEAN) {
                if (!(v instanceof Boolean)) {
                    throw new Refusal(Refusal.Code.BAD_VALUE, "feature \"" + f.name
                            + "\" is boolean: its value must be a Boolean, got a " + typeOf(v));
                }
                bits[f.firstBit] = (Boolean) v ? 1 : 0;
            } else {
                if (!f.values.contains(v)) {
                    throw new Refusal(Refusal.Code.BAD_VALUE, "feature \"" + f.name + "\" must be one of " + f.values
                            + ", got " + (v instanceof String ? "another string" : "a " + typeOf(v)));
                }
                bits[f.firstBit + f.values.indexOf(v)] = 1;
            }
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
