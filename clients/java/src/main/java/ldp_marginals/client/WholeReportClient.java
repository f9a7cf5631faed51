package ldp_marginals.client;

import java.util.Map;

/**
 * What the device clients of the kinds that randomize a whole report share ({@link HadamardDeviceClient},
 * {@link SubsetDeviceClient}: docs/client.md, sections 11 and 12), in order: the input checked as
 * {@link DeviceClient} checks it ({@code bad_event_time}, {@code bad_dimensions}, {@code missing_feature},
 * {@code unknown_feature}, {@code bad_value}; no coin drawn); the spec's {@link WholeReportSpec#coinBytes}
 * drawn in one request; the true bits (in layout order, a categorical value one-hot); the kind's randomizer
 * ({@link #randomize}), which writes the report's {@link WholeReportSpec#reportBits} bits, least
 * significant first; the report, its {@code client} the device token of the event's slice when the spec
 * says {@code token} (docs/client.md, section 5), else null. The declared rate ({@code reports_per_day},
 * section 3) is counted and enforced as {@link DeviceClient} does, with the same rate state.
 *
 * The secret is checked ({@code bad_secret}); a memoized collection (docs/client.md section 13) derives from it
 * the permanent coins of each value (an HMAC_DRBG seeded with {@link DeviceSecret#permanentReportSeed}), which
 * the randomizer reads in place of the drawn coins, and draws {@link WholeReportSpec#freshBytes} fresh ones.
 * Thread-safe: reports are made one at a time.
 *
 * @param <S> the kind's spec
 * @param <D> what the kind's randomizer chose, for the trace
 */
abstract class WholeReportClient<S extends WholeReportSpec, D> extends ReportingClient<S, WholeReportClient.Trace<D>> {
    WholeReportClient(S spec, DeviceSecret secret, Coins coins, Object rateState) {
        super(spec, secret, coins, rateState);
    }

    @Override
    final long reportsPerDay() {
        return spec.reportsPerDay;
    }

    /** The encoder of every whole-report kind: a boolean takes a {@code Boolean}, a categorical one of its values. */
    @Override
    final Trace<D> encode(Map<String, ?> values, long eventMs, Map<String, String> dims) {
        int[] encoded = wholeReportBits(spec.layout, spec.features, values);
        count(eventMs);   // the declared rate: after every other check, before any coin
        byte[] permanent = spec.memoized()
                ? new HmacDrbg(secret.permanentReportSeed(spec.collection, spec.kind, encoded)).generate(spec.coinBytes())
                : null;
        byte[] drawn = coins.generate(permanent == null ? spec.coinBytes() : spec.freshBytes());
        Packer packed = new Packer(spec.reportBits());
        D chosen = permanent == null ? randomize(encoded, drawn, null, packed) : randomize(encoded, permanent, drawn, packed);
        if (packed.at != spec.reportBits()) {
            throw new IllegalStateException("the randomizer wrote " + packed.at + " of " + spec.reportBits() + " bits");
        }
        String token = spec.token ? secret.token(spec.collection, spec.window.sliceOf(eventMs)) : null;
        NoisyReport report = new NoisyReport(spec.collection, eventMs, packed.bytes, dims, token);
        return new Trace<>(report, drawn, encoded, chosen, permanent);
    }

    /**
     * The kind's randomizer: from the true bits and the drawn coins ({@link Coins#COIN_BYTES} each), writes
     * the report's bits to {@code out} in layout order and returns what it chose. Memoized (section 13):
     * {@code drawn} holds the value's permanent coins, read at {@code permanentKeep}, and {@code fresh} the
     * report's fresh coins; else {@code fresh} is null.
     */
    abstract D randomize(int[] encoded, byte[] drawn, byte[] fresh, Packer out);

    /** A report's bits, written in order, each value least significant bit first. */
    static final class Packer {
        final byte[] bytes;
        int at;   // the bits written so far

        Packer(int bits) {
            this.bytes = new byte[(bits + 7) / 8];
        }

        /** Appends the low {@code n} bits of {@code value}. */
        void put(long value, int n) {
            for (int i = 0; i < n; i++, at++) {
                bytes[at / 8] |= (byte) (((value >>> i) & 1) << (at % 8));
            }
        }
    }

    /** A report and the values that made it. */
    static final class Trace<D> extends ReportingClient.Traced {
        final byte[] coins;      // the bytes drawn from the generator
        final int[] encoded;     // the true bits
        final D chosen;          // what the kind's randomizer chose
        final byte[] permanent;  // memoized: the value's permanent coins; else null

        Trace(NoisyReport report, byte[] coins, int[] encoded, D chosen, byte[] permanent) {
            super(report);
            this.coins = coins;
            this.encoded = encoded;
            this.chosen = chosen;
            this.permanent = permanent;
        }
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(collection=" + spec.collection + ")";
    }
}
