package ldp_marginals.client;

/**
 * One device's client for one subset-randomized-response collection (docs/client.md, section 12):
 * {@link #report} turns the device's answers into one {@link NoisyReport}, byte for byte as the
 * Python reference ({@code ldp_marginals.ldp.subset_client}) makes it. In order:
 *
 * <ol>
 *   <li>the steps every whole-report kind shares ({@link WholeReportClient}): the input checked, no coin
 *       drawn on a refusal; then {@code 4 (d + 1 + s)} bytes drawn in one request: d subset coins, the
 *       keep coin, s mask coins; the true bits are the features' in layout order (a categorical value one-hot);</li>
 *   <li>the subset, by sequential selection: position {@code i = 0..d-1} joins iff
 *       {@code decide(coin i, r / (d - i))}, r the positions still to choose, the quotient in doubles
 *       (exactly s join);</li>
 *   <li>the flip mask, uniform over the {@code 2^s - 1} non-zero patterns: bit {@code j} is
 *       {@code decide(mask coin j, 0.5)} once an earlier bit is 1, else {@code decide(mask coin j, h / (2h - 1))},
 *       {@code h = 2^(s - j - 1)} in doubles;</li>
 *   <li>the sent pattern: bit j is the true bit of the j-th chosen position (ascending), XOR the mask's
 *       bit j unless {@code decide(keep coin, keep)};</li>
 *   <li>pack the d-bit subset mask (bit i: position i chosen), then the s pattern bits in order, least
 *       significant first; {@code client} is the device token of the event's slice when the spec says {@code token}
 *       (docs/client.md, section 5), else null; {@code reports_per_day} is enforced as {@link DeviceClient}
 *       enforces it.</li>
 * </ol>
 *
 * The secret is checked ({@code bad_secret}); a memoized collection ({@code permanent_keep}, docs/client.md
 * section 13) runs the steps above on the value's permanent coins at {@code permanent_keep} and re-randomizes
 * the result with fresh coins at {@code keep} ({@link WholeReportClient}).
 */
public final class SubsetDeviceClient extends WholeReportClient<SubsetSpec, SubsetDeviceClient.Choice> {
    /** A device's client with the given coin generator ({@link Coins#system()} on a device). */
    public SubsetDeviceClient(SubsetSpec spec, DeviceSecret secret, Coins coins) {
        this(spec, secret, coins, (String) null);
    }

    /**
     * A device's client restored with its rate state: the JSON text {@link #rateState()} gave (null: none),
     * as {@link DeviceClient}'s. Refusal {@code bad_state} when the text is not one.
     */
    public SubsetDeviceClient(SubsetSpec spec, DeviceSecret secret, Coins coins, String rateState) {
        this(spec, secret, coins, parsedState(rateState));
    }

    private SubsetDeviceClient(SubsetSpec spec, DeviceSecret secret, Coins coins, Object rateState) {
        super(spec, secret, coins, rateState);
    }

    /** A client from a parsed rate state ({@link Json}), as the test vectors hold it. */
    static SubsetDeviceClient restored(SubsetSpec spec, DeviceSecret secret, Coins coins, Object rateState) {
        return new SubsetDeviceClient(spec, secret, coins, rateState);
    }

    /** A device's client drawing its coins from the operating system's secure generator. */
    public static SubsetDeviceClient create(SubsetSpec spec, DeviceSecret secret) {
        return new SubsetDeviceClient(spec, secret, Coins.system());
    }

    /** The same, restored with its rate state (the JSON text {@link #rateState()} gave; null: none). */
    public static SubsetDeviceClient create(SubsetSpec spec, DeviceSecret secret, String rateState) {
        return new SubsetDeviceClient(spec, secret, Coins.system(), rateState);
    }

    /** The subset, the flip mask, the sent pattern, packed. */
    @Override
    Choice randomize(int[] encoded, byte[] drawn, byte[] fresh, Packer out) {
        int d = encoded.length;
        int s = spec.width;
        int[] subset = new int[s];
        long mask = 0;
        int chosen = 0;
        for (int i = 0; i < d; i++) {
            if (Coins.decide(drawn, Coins.COIN_BYTES * i, (double) (s - chosen) / (d - i)) == 1) {
                subset[chosen++] = i;
                mask |= 1L << i;
            }
        }
        int kept = Coins.decide(drawn, Coins.COIN_BYTES * d, fresh == null ? spec.keep : spec.permanentKeep);
        int[] pattern = new int[s];
        boolean set = false;   // whether an earlier bit of the flip mask is 1
        for (int j = 0; j < s; j++) {
            double h = Math.scalb(1.0, s - j - 1);
            int flip = Coins.decide(drawn, Coins.COIN_BYTES * (d + 1 + j), set ? 0.5 : h / (2.0 * h - 1.0));
            set |= flip == 1;
            pattern[j] = encoded[subset[j]] ^ (kept == 1 ? 0 : flip);
        }
        int[] held = null;
        if (fresh != null) {   // section 13: the permanent pattern, re-randomized by the fresh keep and mask coins
            held = pattern;
            pattern = new int[s];
            kept = Coins.decide(fresh, 0, spec.keep);
            set = false;
            for (int j = 0; j < s; j++) {
                double h = Math.scalb(1.0, s - j - 1);
                int flip = Coins.decide(fresh, Coins.COIN_BYTES * (1 + j), set ? 0.5 : h / (2.0 * h - 1.0));
                set |= flip == 1;
                pattern[j] = held[j] ^ (kept == 1 ? 0 : flip);
            }
        }
        out.put(mask, d);
        for (int bit : pattern) {
            out.put(bit, 1);
        }
        return new Choice(subset, kept, pattern, held);
    }

    /** The chosen positions (ascending), 1 when the true pattern was sent, the sent pattern (bit j of position subset[j]). */
    static final class Choice {
        final int[] subset;
        final int kept;
        final int[] pattern;
        final int[] permanentPattern;   // memoized: the permanent pattern; else null

        Choice(int[] subset, int kept, int[] pattern, int[] permanentPattern) {
            this.subset = subset;
            this.kept = kept;
            this.pattern = pattern;
            this.permanentPattern = permanentPattern;
        }
    }
}
