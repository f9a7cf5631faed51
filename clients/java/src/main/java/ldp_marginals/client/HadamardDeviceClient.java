package ldp_marginals.client;

/**
 * One device's client for one Hadamard-sampling collection (docs/client.md, section 11): {@link #report}
 * turns the device's answers into one {@link NoisyReport}, byte for byte as the Python reference
 * ({@code ldp_marginals.ldp.hadamard_client}) makes it. In order:
 *
 * <ol>
 *   <li>the steps every whole-report kind shares ({@link WholeReportClient}): the input checked, no coin
 *       drawn on a refusal; then {@code 8 * slots} bytes drawn in one request: per slot the index coin,
 *       then the parity coin; the true bits are the features' in layout order (a categorical value one-hot);</li>
 *   <li>per slot: the coefficient {@code a} (1..T, family order) is the first whose threshold
 *       {@code units(S_a)} is above the index coin's value; its true parity is the number of 1 bits of
 *       its set, mod 2; the slot sends it if {@code decide(parity coin, keep)}, else its complement;</li>
 *   <li>pack each slot as its index in {@code B} bits, least significant first, then its parity bit;
 *       {@code client} is the device token of the event's slice when the spec says {@code token}
 *       (docs/client.md, section 5), else null; {@code reports_per_day} is enforced as {@link DeviceClient}
 *       enforces it.</li>
 * </ol>
 *
 * The secret is checked ({@code bad_secret}); a memoized collection ({@code permanent_keep}, docs/client.md
 * section 13) runs the steps above on the value's permanent coins at {@code permanent_keep} and re-randomizes
 * the result with fresh coins at {@code keep} ({@link WholeReportClient}).
 */
public final class HadamardDeviceClient extends WholeReportClient<HadamardSpec, HadamardDeviceClient.Slots> {
    /** A device's client with the given coin generator ({@link Coins#system()} on a device). */
    public HadamardDeviceClient(HadamardSpec spec, DeviceSecret secret, Coins coins) {
        this(spec, secret, coins, (String) null);
    }

    /**
     * A device's client restored with its rate state: the JSON text {@link #rateState()} gave (null: none),
     * as {@link DeviceClient}'s. Refusal {@code bad_state} when the text is not one.
     */
    public HadamardDeviceClient(HadamardSpec spec, DeviceSecret secret, Coins coins, String rateState) {
        this(spec, secret, coins, parsedState(rateState));
    }

    private HadamardDeviceClient(HadamardSpec spec, DeviceSecret secret, Coins coins, Object rateState) {
        super(spec, secret, coins, rateState);
    }

    /** A client from a parsed rate state ({@link Json}), as the test vectors hold it. */
    static HadamardDeviceClient restored(HadamardSpec spec, DeviceSecret secret, Coins coins, Object rateState) {
        return new HadamardDeviceClient(spec, secret, coins, rateState);
    }

    /** A device's client drawing its coins from the operating system's secure generator. */
    public static HadamardDeviceClient create(HadamardSpec spec, DeviceSecret secret) {
        return new HadamardDeviceClient(spec, secret, Coins.system());
    }

    /** The same, restored with its rate state (the JSON text {@link #rateState()} gave; null: none). */
    public static HadamardDeviceClient create(HadamardSpec spec, DeviceSecret secret, String rateState) {
        return new HadamardDeviceClient(spec, secret, Coins.system(), rateState);
    }

    /** Per slot, the coefficient, its parity sent or complemented, packed. */
    @Override
    Slots randomize(int[] encoded, byte[] drawn, byte[] fresh, Packer out) {
        long x = 0;
        for (int i = 0; i < encoded.length; i++) {
            x |= (long) encoded[i] << i;
        }
        Slots chosen = new Slots(spec.slots, fresh != null);
        double first = fresh == null ? spec.keep : spec.permanentKeep;
        for (int s = 0; s < spec.slots; s++) {
            long u = Coins.coinValue(drawn, 2 * Coins.COIN_BYTES * s);
            int a = 0;
            while (!(u < spec.thresholds[a])) {
                a++;
            }
            int parity = Long.bitCount(x & spec.masks[a]) & 1;
            int sent = Coins.decide(drawn, 2 * Coins.COIN_BYTES * s + Coins.COIN_BYTES, first) == 1 ? parity : 1 - parity;
            if (fresh != null) {   // section 13: the permanent parity, kept at keep by the slot's fresh coin
                chosen.permanentParities[s] = sent;
                sent = Coins.decide(fresh, Coins.COIN_BYTES * s, spec.keep) == 1 ? sent : 1 - sent;
            }
            chosen.indices[s] = a + 1;
            chosen.parities[s] = sent;
            out.put(a + 1, spec.indexBits);
            out.put(sent, 1);
        }
        return chosen;
    }

    /** Per slot, the coefficient's family index (1..T) and the parity bit sent. */
    static final class Slots {
        final int[] indices;
        final int[] parities;
        final int[] permanentParities;   // memoized: per slot, the permanent parity; else null

        Slots(int slots, boolean memoized) {
            this.indices = new int[slots];
            this.parities = new int[slots];
            this.permanentParities = memoized ? new int[slots] : null;
        }
    }
}
