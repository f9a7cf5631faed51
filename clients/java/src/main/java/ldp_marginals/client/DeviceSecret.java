package ldp_marginals.client;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.util.Arrays;
import javax.crypto.Mac;
import javax.crypto.SecretKey;
import javax.crypto.spec.SecretKeySpec;

/**
 * A device's secret and what the device derives from it (docs/client.md, sections 2 and 5): the
 * window-scoped device token and the coins of its permanent (memoized) responses, each
 * {@code HMAC-SHA256(secret, frame(parts))}. Nothing derived is stored: every value is recomputed.
 *
 * <p>The secret is 32 bytes from the operating system's secure generator ({@link #generate()}), made
 * once, kept on the device, never sent and never logged. On Android keep it as an HMAC-SHA256 key in
 * the Android Keystore and pass that key ({@link #of(SecretKey)}): the client only ever asks the key for
 * HMACs, so a key that cannot be exported works (docs/clients.md). {@link #toString()} shows nothing of
 * the secret. Thread-safe.
 */
public final class DeviceSecret {
    /** Bytes in a secret. */
    public static final int SECRET_BYTES = 32;
    static final String TOKEN = "ldp-marginals/v1/token";
    static final String PERMANENT = "ldp-marginals/v1/permanent";
    static final String ENCODING = "ldp-marginals/v1/encoding";
    static final String PERMANENT_REPORT = "ldp-marginals/v1/permanent-report";
    private static final String HMAC = "HmacSHA256";
    private static final int TOKEN_BYTES = 16;

    private final Mac mac;

    private DeviceSecret(SecretKey key) {
        try {
            mac = Mac.getInstance(HMAC);
            mac.init(key);
        } catch (GeneralSecurityException e) {
            throw new Refusal(Refusal.Code.BAD_SECRET, "the key cannot compute HMAC-SHA256 (" + e.getClass().getSimpleName() + ")");
        }
    }

    /** A new secret: 32 bytes from the operating system's secure generator. Store it; never log it. */
    public static byte[] generate() {
        byte[] secret = new byte[SECRET_BYTES];
        new SecureRandom().nextBytes(secret);
        return secret;
    }

    /** The secret of 32 bytes (copied); refusal {@code bad_secret} for any other length. */
    public static DeviceSecret of(byte[] secret) {
        if (secret == null || secret.length != SECRET_BYTES) {
            throw new Refusal(Refusal.Code.BAD_SECRET, "secret must be " + SECRET_BYTES + " bytes, got "
                    + (secret == null ? "null" : secret.length + " bytes"));
        }
        return new DeviceSecret(new SecretKeySpec(secret, HMAC));
    }

    /**
     * The secret held as an HMAC-SHA256 key, such as one that lives in the Android Keystore and cannot be
     * exported. A key that exposes its bytes must have 32 of them ({@code bad_secret} otherwise); one that
     * does not (hardware-backed) must have been made with 256 bits (docs/clients.md shows how).
     */
    public static DeviceSecret of(SecretKey key) {
        if (key == null || !HMAC.equalsIgnoreCase(key.getAlgorithm())) {
            throw new Refusal(Refusal.Code.BAD_SECRET, "secret must be an " + HMAC + " key, got "
                    + (key == null ? "null" : "algorithm " + key.getAlgorithm()));
        }
        byte[] encoded = key.getEncoded();
        if (encoded != null) {
            int length = encoded.length;
            Arrays.fill(encoded, (byte) 0);
            if (length != SECRET_BYTES) {
                throw new Refusal(Refusal.Code.BAD_SECRET, "secret must be " + SECRET_BYTES + " bytes, got " + length + " bytes");
            }
        }
        return new DeviceSecret(key);
    }

    /** The device token of a collection and slice: 22 characters of base64url (16 bytes, no padding). */
    String token(String collection, long sliceStartMs) {
        if (sliceStartMs < 0) {
            throw new IllegalArgumentException("sliceStartMs must be >= 0, got sliceStartMs=" + sliceStartMs);
        }
        return base64Url(hmac(TOKEN, collection, Long.toString(sliceStartMs)), TOKEN_BYTES);
    }

    /** The permanent coin of bit {@code bit} (within its feature) of a feature's value. */
    byte[] permanentCoin(String collection, String feature, String value, int bit) {
        return hmac(PERMANENT, collection, feature, value, Integer.toString(bit));
    }

    /** The coin that encodes a memoized numeric feature to its bit. */
    byte[] encodingCoin(String collection, String feature) {
        return hmac(ENCODING, collection, feature);
    }

    /**
     * The seed of a whole-report kind's permanent response to one value (docs/client.md section 13): the 32
     * bytes of HMAC(secret, frame("ldp-marginals/v1/permanent-report", collection, kind, value)), value the
     * true bits in layout order as '0'/'1' characters.
     */
    byte[] permanentReportSeed(String collection, String kind, int[] bits) {
        StringBuilder value = new StringBuilder(bits.length);
        for (int b : bits) {
            value.append(b == 1 ? '1' : '0');
        }
        return hmac(PERMANENT_REPORT, collection, kind, value.toString());
    }

    /** HMAC-SHA256 of the framed parts (the first 4 bytes are a coin). */
    private byte[] hmac(String... parts) {
        byte[] message = frame(parts);
        synchronized (mac) {
            return mac.doFinal(message);
        }
    }

    /** Each part as the length of its UTF-8 bytes (unsigned 32-bit big-endian) then the bytes. */
    static byte[] frame(String... parts) {
        byte[][] encoded = new byte[parts.length][];
        int size = 0;
        for (int i = 0; i < parts.length; i++) {
            encoded[i] = parts[i].getBytes(StandardCharsets.UTF_8);
            size += 4 + encoded[i].length;
        }
        byte[] out = new byte[size];
        int at = 0;
        for (byte[] part : encoded) {
            int n = part.length;
            out[at] = (byte) (n >>> 24);
            out[at + 1] = (byte) (n >>> 16);
            out[at + 2] = (byte) (n >>> 8);
            out[at + 3] = (byte) n;
            System.arraycopy(part, 0, out, at + 4, n);
            at += 4 + n;
        }
        return out;
    }

    private static final char[] BASE64URL =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".toCharArray();

    /** base64url without padding of the first {@code n} bytes (java.util.Base64 needs Android API 26). */
    static String base64Url(byte[] bytes, int n) {
        StringBuilder out = new StringBuilder((n * 4 + 2) / 3);
        for (int i = 0; i < n; i += 3) {
            int chunk = (bytes[i] & 0xff) << 16;
            if (i + 1 < n) {
                chunk |= (bytes[i + 1] & 0xff) << 8;
            }
            if (i + 2 < n) {
                chunk |= bytes[i + 2] & 0xff;
            }
            int chars = Math.min(4, (n - i) * 4 / 3 + 1);
            for (int k = 0; k < chars; k++) {
                out.append(BASE64URL[(chunk >>> (18 - 6 * k)) & 0x3f]);
            }
        }
        return out.toString();
    }

    @Override
    public String toString() {
        return "DeviceSecret(hidden)";
    }
}
