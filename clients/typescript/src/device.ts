/**
 * What a device derives from its secret (docs/client.md, sections 2 and 5): the slice-scoped device
 * token, the coins of permanent (memoized) responses and the encoding coin of a memoized numeric
 * feature, each HMAC-SHA256(secret, frame(parts)). Nothing derived is stored; the secret itself is
 * held as a WebCrypto HMAC key, so a browser can keep it non-extractable (see storage.ts).
 */
import { COIN_BYTES, frame, hmacKey, hmacSha256 } from "./coins.js";
import { BAD_SECRET, Refusal } from "./refusal.js";

export const SECRET_BYTES = 32;
export const TOKEN_BYTES = 16;
export const TOKEN = "ldp-marginals/v1/token";
export const PERMANENT = "ldp-marginals/v1/permanent";
export const ENCODING = "ldp-marginals/v1/encoding";
export const PERMANENT_REPORT = "ldp-marginals/v1/permanent-report";

/** A device secret: its 32 bytes, or a WebCrypto HMAC-SHA256 key of 256 bits made from them. */
export type Secret = Uint8Array | CryptoKey;

/**
 * The secret as a non-extractable HMAC key; a {@link Refusal} `bad_secret` for anything but 32 bytes
 * or an HMAC-SHA256 signing key of 256 bits. The bytes are not kept.
 */
export async function secretKey(secret: Secret): Promise<CryptoKey> {
  if (secret instanceof Uint8Array) {
    if (secret.length !== SECRET_BYTES) {
      throw new Refusal(BAD_SECRET, `secret must be ${SECRET_BYTES} bytes, got secret.length=${secret.length}`);
    }
    return hmacKey(secret);
  }
  if (typeof CryptoKey !== "undefined" && secret instanceof CryptoKey) {
    const alg = secret.algorithm as HmacKeyAlgorithm;
    if (alg.name === "HMAC" && alg.hash?.name === "SHA-256" && alg.length === 8 * SECRET_BYTES
        && secret.usages.includes("sign")) {
      return secret;
    }
    throw new Refusal(BAD_SECRET, `secret must be an HMAC SHA-256 signing key of ${8 * SECRET_BYTES} bits, ` +
      `got algorithm=${alg.name}, length=${String(alg.length)}, usages=${secret.usages.join(",")}`);
  }
  throw new Refusal(BAD_SECRET, `secret must be ${SECRET_BYTES} bytes or a CryptoKey, got ${typeof secret}`);
}

/** A new device secret from the platform's secure generator: a non-extractable HMAC-SHA256 key. */
export function newSecretKey(extractable = false): Promise<CryptoKey> {
  return globalThis.crypto.subtle.generateKey({ name: "HMAC", hash: "SHA-256", length: 8 * SECRET_BYTES },
    extractable, ["sign"]) as Promise<CryptoKey>;
}

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The device token of a collection and slice: base64url (no padding) of the HMAC's first 16 bytes. */
export async function deviceToken(key: CryptoKey, collection: string, sliceStartMs: number): Promise<string> {
  if (!Number.isSafeInteger(sliceStartMs) || sliceStartMs < 0) {
    throw new RangeError(`sliceStartMs must be an integer >= 0, got sliceStartMs=${String(sliceStartMs)}`);
  }
  const digest = await hmacSha256(key, frame(TOKEN, collection, String(sliceStartMs)));
  return base64url(digest.subarray(0, TOKEN_BYTES));
}

/** The coin of the permanent response of bit `bit` (within its feature) of one value of a feature. */
export async function permanentCoin(key: CryptoKey, collection: string, feature: string, value: string,
                                    bit: number): Promise<Uint8Array> {
  return (await hmacSha256(key, frame(PERMANENT, collection, feature, value, String(bit)))).slice(0, COIN_BYTES);
}

/**
 * The seed of a whole-report kind's permanent response to one value (docs/client.md section 13): the 32 bytes
 * HMAC(secret, frame("ldp-marginals/v1/permanent-report", collection, kind, value)), `value` the true bits in
 * layout order as "0"/"1" characters.
 */
export async function permanentReportSeed(key: CryptoKey, collection: string, kind: string,
                                          bits: readonly number[]): Promise<Uint8Array> {
  return hmacSha256(key, frame(PERMANENT_REPORT, collection, kind, bits.map((b) => (b ? "1" : "0")).join("")));
}

/** The coin that encodes a memoized numeric feature to its bit. */
export async function encodingCoin(key: CryptoKey, collection: string, feature: string): Promise<Uint8Array> {
  return (await hmacSha256(key, frame(ENCODING, collection, feature))).slice(0, COIN_BYTES);
}
