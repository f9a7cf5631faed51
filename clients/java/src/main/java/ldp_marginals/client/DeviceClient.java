package ldp_marginals.client;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

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
 * <p>The declared rate (docs/client.md, section 3): the client counts the reports it makes per UTC day of
 * their event time, its <em>rate state</em> ({@link #rateState()}, JSON text that the app persists and
 * passes back when it makes the client again); when the collection declares {@code reports_per_day: R}, a
 * report that would be its day's {@code R + 1}-th is refused ({@code rate_exceeded}) after every other
 * check, drawing no coins. Keep one client per collection in the app, or restore the state.
 *
 * Thread-safe: reports are made one at a time.
 */
public final class DeviceClient extends ReportingClient<ClientSpec, DeviceClient.Trace> {
    /** A device's client with the given coin generator ({@link Coins#system()} on a device), no reports made yet. */
    public DeviceClient(ClientSpec spec, DeviceSecret secret, Coins coins) {
        this(spec, secret, coins, (String) null);
    }

    /**
     * A device's client restored with its rate state: the JSON text {@link #rateState()} gave (null: none).
     * Refusal {@code bad_state} when the text is not one.
     */
    public DeviceClient(ClientSpec spec, DeviceSecret secret, Coins coins, String rateState) {
        this(spec, secret, coins, parsedState(rateState));
    }

    private DeviceClient(ClientSpec spec, DeviceSecret secret, Coins coins, Object rateState) {
        super(spec, secret, coins, rateState);
    }

    /** A client from a parsed rate state ({@link Json}), as the test vectors hold it. */
    static DeviceClient restored(ClientSpec spec, DeviceSecret secret, Coins coins, Object rateState) {
        return new DeviceClient(spec, secret, coins, rateState);
    }

    /** A device's client drawing its coins from the operating system's secure generator. */
    public static DeviceClient create(ClientSpec spec, DeviceSecret secret) {
        return new DeviceClient(spec, secret, Coins.system());
    }

    /** The same, restored with its rate state (the JSON text {@link #rateState()} gave; null: none). */
    public static DeviceClient create(ClientSpec spec, DeviceSecret secret, String rateState) {
        return new DeviceClient(spec, secret, Coins.system(), rateState);
    }

    @Override
    long reportsPerDay() {
        return spec.reportsPerDay;
    }

    /**
     * The encoder of the per-bit kind (the {@code report} overloads and {@link #trace} call it, the event
     * time and dimensions checked): a boolean feature takes a {@code Boolean}, a categorical one one of
     * its listed {@code String}s, a numeric one any {@code Number} in its range.
     */
    @Override
    Trace encode(Map<String, ?> values, long eventMs, Map<String, String> dims) {
        double[] units = check(values);
        count(eventMs);
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
    static final class Trace extends ReportingClient.Traced {
        final byte[] coins;             // the bytes drawn from the generator
        final int[] encoded;            // the true bits
        final List<Integer> permanent;  // per bit, the permanent bit (null where it does not memoize)

        Trace(NoisyReport report, byte[] coins, int[] encoded, List<Integer> permanent) {
            super(report);
            this.coins = coins;
            this.encoded = encoded;
            this.permanent = permanent;
        }
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

    @Override
    public String toString() {
        return "DeviceClient(collection=" + spec.collection + ")";
    }
}
