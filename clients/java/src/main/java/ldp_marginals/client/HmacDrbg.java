package ldp_marginals.client;

import java.security.GeneralSecurityException;
import java.util.Arrays;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * HMAC_DRBG with SHA-256 (NIST SP 800-90A Rev. 1, section 10.1.2; no prediction resistance, no reseed,
 * no additional input): the seeded generator of tests and test vectors, never a device's. Instantiated
 * with {@code entropy || nonce || personalization}; each {@link #generate} is one Generate request (the
 * state is updated after every request, so {@code generate(8)} differs from two {@code generate(4)}).
 * Not thread-safe.
 */
public final class HmacDrbg implements Coins {
    /** SP 800-90A, Table 2: at most 2^19 bits per request. */
    static final int MAX_REQUEST_BYTES = 1 << 16;
    private static final long MAX_REQUESTS = 1L << 48;

    private byte[] key = new byte[32];
    private byte[] value = new byte[32];
    private long requests;

    public HmacDrbg(byte[] entropy) {
        this(entropy, new byte[0], new byte[0]);
    }

    public HmacDrbg(byte[] entropy, byte[] nonce, byte[] personalization) {
        if (entropy == null || entropy.length < 32) {
            throw new IllegalArgumentException("entropy must have at least 32 bytes (256-bit strength), got "
                    + (entropy == null ? "null" : entropy.length + " bytes"));
        }
        if (nonce == null || personalization == null) {
            throw new IllegalArgumentException("nonce and personalization must not be null (pass empty arrays)");
        }
        Arrays.fill(value, (byte) 1);
        byte[] seed = new byte[entropy.length + nonce.length + personalization.length];
        System.arraycopy(entropy, 0, seed, 0, entropy.length);
        System.arraycopy(nonce, 0, seed, entropy.length, nonce.length);
        System.arraycopy(personalization, 0, seed, entropy.length + nonce.length, personalization.length);
        update(seed);
        requests = 1;
    }

    @Override
    public byte[] generate(int n) {
        if (n < 1 || n > MAX_REQUEST_BYTES) {
            throw new IllegalArgumentException("n must be in [1, " + MAX_REQUEST_BYTES + "] bytes per request, got n=" + n);
        }
        if (requests > MAX_REQUESTS) {
            throw new IllegalStateException("HMAC_DRBG needs a reseed after 2^48 requests; instantiate a new one");
        }
        byte[] out = new byte[n];
        Mac mac = mac(key);
        for (int filled = 0; filled < n; filled += value.length) {
            value = mac.doFinal(value);
            System.arraycopy(value, 0, out, filled, Math.min(value.length, n - filled));
        }
        update(null);
        requests++;
        return out;
    }

    private void update(byte[] provided) {
        key = hmac(key, value, (byte) 0, provided);
        value = mac(key).doFinal(value);
        if (provided != null && provided.length > 0) {
            key = hmac(key, value, (byte) 1, provided);
            value = mac(key).doFinal(value);
        }
    }

    private static byte[] hmac(byte[] key, byte[] value, byte separator, byte[] provided) {
        Mac mac = mac(key);
        mac.update(value);
        mac.update(separator);
        if (provided != null) {
            mac.update(provided);
        }
        return mac.doFinal();
    }

    private static Mac mac(byte[] key) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            return mac;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is missing from this Java runtime", e);
        }
    }
}
