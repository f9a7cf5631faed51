package ldp_marginals.client;

import java.security.SecureRandom;

/**
 * Where a client's random coins come from (docs/client.md, section 2): {@link #generate} returns
 * {@code n} fresh bytes, one request per report. On a device: {@link #system()}, the operating system's
 * secure generator ({@link SecureRandom}); in tests: the seeded {@link HmacDrbg}.
 *
 * <p>A coin is 4 bytes read as an unsigned 32-bit big-endian integer {@code U}; a choice of probability
 * {@code t} is 1 iff {@code U < units(t)}, {@code units(t) = floor(t * 2^32 + 1/2)} in IEEE-754 doubles
 * exactly as written.
 */
public interface Coins {
    /** {@code n} random bytes (one Generate request of the seeded generator). */
    byte[] generate(int n);

    /** The operating system's secure generator: what a device uses. */
    static Coins system() {
        SecureRandom random = new SecureRandom();
        return n -> {
            byte[] out = new byte[n];
            random.nextBytes(out);
            return out;
        };
    }

    /** Bytes in one coin. */
    int COIN_BYTES = 4;

    /** {@code floor(t * 2^32 + 1/2)}: how many of the 2^32 coin values fire a choice of probability t. */
    static long units(double probability) {
        if (!(probability >= 0.0 && probability <= 1.0)) {
            throw new IllegalArgumentException("probability must be in [0, 1], got probability=" + probability);
        }
        return (long) Math.floor(probability * 4294967296.0 + 0.5);
    }

    /** The unsigned 32-bit big-endian value of the coin at {@code offset}. */
    static long coinValue(byte[] bytes, int offset) {
        return ((bytes[offset] & 0xffL) << 24) | ((bytes[offset + 1] & 0xffL) << 16)
                | ((bytes[offset + 2] & 0xffL) << 8) | (bytes[offset + 3] & 0xffL);
    }

    /** 1 iff the coin at {@code offset} is below {@code units(probability)}. */
    static int decide(byte[] bytes, int offset, double probability) {
        return coinValue(bytes, offset) < units(probability) ? 1 : 0;
    }
}
