package ldp_marginals.client;

import java.util.Map;

/**
 * One device's client for one Hadamard-sampling collection (docs/client.md, section 11): {@link #report}
 * turns the device's boolean answers into one {@link NoisyReport}, byte for byte as the Python reference
 * ({@code ldp_marginals.ldp.hadamard_client}) makes it. In order:
 *
 * <ol>
 *   <li>check the input as {@link DeviceClient} does ({@code bad_event_time}, {@code bad_dimensions},
 *       {@code missing_feature}, {@code unknown_feature}, {@code bad_value}; no coin drawn);</li>
 *   <li>draw {@code 8 * slots} bytes in one request: per slot the index coin, then the parity coin;</li>
 *   <li>the true bits are the booleans in layout order;</li>
 *   <li>per slot: the coefficient {@code a} (1..T, family order) is the first whose threshold
 *       {@code units(S_a)} is above the index coin's value; its true parity is the number of 1 bits of
 *       its set, mod 2; the slot sends it if {@code decide(parity coin, keep)}, else its complement;</li>
 *   <li>pack each slot as its index in {@code B} bits, least significant first, then its parity bit;
 *       {@code client} is null (these collections count reports, not devices).</li>
 * </ol>
 *
 * The secret is checked ({@code bad_secret}) but nothing is derived from it: nothing memoizes, no token.
 * Thread-safe: reports are made one at a time.
 */
public final class HadamardDeviceClient extends ReportingClient<HadamardSpec, HadamardDeviceClient.Trace> {
    /** A device's client with the given coin generator ({@link Coins#system()} on a device). */
    public HadamardDeviceClient(HadamardSpec spec, DeviceSecret secret, Coins coins) {
        super(spec, secret, coins);
    }

    /** A device's client drawing its coins from the operating system's secure generator. */
    public static HadamardDeviceClient create(HadamardSpec spec, DeviceSecret secret) {
        return new HadamardDeviceClient(spec, secret, Coins.system());
    }

    /**
     * The encoder of the Hadamard kind (the {@code report} overloads and {@link #trace} call it, the
     * event time and dimensions checked): every feature takes a {@code Boolean}.
     */
    @Override
    Trace encode(Map<String, ?> values, long eventMs, Map<String, String> dims) {
        int[] encoded = booleanBits(spec.features, values);
        long x = 0;
        for (int i = 0; i < encoded.length; i++) {
            x |= (long) encoded[i] << i;
        }
        byte[] drawn = coins.generate(2 * Coins.COIN_BYTES * spec.slots);
        int slotBits = spec.indexBits + 1;
        byte[] packed = new byte[(spec.slots * slotBits + 7) / 8];
        int[] indices = new int[spec.slots];
        int[] parities = new int[spec.slots];
        for (int s = 0; s < spec.slots; s++) {
            long u = Coins.coinValue(drawn, 2 * Coins.COIN_BYTES * s);
            int a = 0;
            while (!(u < spec.thresholds[a])) {
                a++;
            }
            int parity = Long.bitCount(x & spec.masks[a]) & 1;
            int sent = Coins.decide(drawn, 2 * Coins.COIN_BYTES * s + Coins.COIN_BYTES, spec.keep) == 1 ? parity : 1 - parity;
            indices[s] = a + 1;
            parities[s] = sent;
            int at = s * slotBits;
            for (int i = 0; i < spec.indexBits; i++) {
                packed[(at + i) / 8] |= (byte) ((((a + 1) >> i) & 1) << ((at + i) % 8));
            }
            int last = at + spec.indexBits;
            packed[last / 8] |= (byte) (sent << (last % 8));
        }
        NoisyReport report = new NoisyReport(spec.collection, eventMs, packed, dims, null);
        return new Trace(report, drawn, encoded, indices, parities);
    }

    /** A report and the values that made it. */
    static final class Trace extends ReportingClient.Traced {
        final byte[] coins;      // the bytes drawn from the generator
        final int[] encoded;     // the true bits
        final int[] indices;     // per slot, the coefficient's family index (1..T)
        final int[] parities;    // per slot, the parity bit sent

        Trace(NoisyReport report, byte[] coins, int[] encoded, int[] indices, int[] parities) {
            super(report);
            this.coins = coins;
            this.encoded = encoded;
            this.indices = indices;
            this.parities = parities;
        }
    }

    @Override
    public String toString() {
        return "HadamardDeviceClient(collection=" + spec.collection + ")";
    }
}
