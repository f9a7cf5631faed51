/**
 * Where a client's coins come from and how a coin becomes a decision (docs/client.md, section 2).
 *
 * A coin is 4 bytes read as an unsigned 32-bit big-endian integer `U`; a choice of probability `t`
 * fires iff `U < units(t)`, `units(t) = floor(t * 2^32 + 1/2)` in IEEE-754 doubles exactly as written.
 * Coins come from a {@link CoinSource}: {@link SystemCoins} (`crypto.getRandomValues`) on a device,
 * {@link HmacDrbg} (NIST SP 800-90A HMAC_DRBG with SHA-256, seeded) in tests and test vectors.
 * HMAC-SHA256 is WebCrypto's (`crypto.subtle`), in browsers and in Node >= 20 alike.
 */
export const COIN_BYTES = 4;
export const COIN_RANGE = 4294967296; // 2^32
/** SP 800-90A, Table 2: at most 2^19 bits per HMAC_DRBG request; also getRandomValues' limit. */
export const MAX_REQUEST_BYTES = 65536;
const MAX_REQUESTS = 2 ** 48; // SP 800-90A: HMAC_DRBG's reseed interval

const utf8 = new TextEncoder();

function subtle(): SubtleCrypto {
  const c = globalThis.crypto;
  if (!c || !c.subtle) {
    throw new Error("WebCrypto (crypto.subtle) is unavailable: a browser page must be a secure context " +
      "(https or localhost), Node must be version 20 or later");
  }
  return c.subtle;
}

/** `floor(t * 2^32 + 1/2)`: how many of the 2^32 coin values fire a choice of probability `t`. */
export function units(probability: number): number {
  if (typeof probability !== "number" || !(probability >= 0 && probability <= 1)) {
    throw new RangeError(`probability must be a number in [0, 1], got probability=${String(probability)}`);
  }
  return Math.floor(probability * COIN_RANGE + 0.5);
}

/** The unsigned 32-bit big-endian integer of a 4-byte coin. */
export function coinValue(coin: Uint8Array): number {
  if (coin.length !== COIN_BYTES) {
    throw new RangeError(`coin must have ${COIN_BYTES} bytes, got coin.length=${coin.length}`);
  }
  return new DataView(coin.buffer, coin.byteOffset, COIN_BYTES).getUint32(0, false);
}

/** 1 iff the coin's value is below `units(probability)`. */
export function decide(coin: Uint8Array, probability: number): 0 | 1 {
  return coinValue(coin) < units(probability) ? 1 : 0;
}

/** The message of a keyed derivation: each part as its UTF-8 length (uint32, big-endian) then its bytes. */
export function frame(...parts: string[]): Uint8Array {
  const encoded = parts.map((part) => {
    if (typeof part !== "string") throw new TypeError(`parts must be strings, got ${String(part)}`);
    return utf8.encode(part);
  });
  const out = new Uint8Array(encoded.reduce((n, e) => n + 4 + e.length, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const e of encoded) {
    view.setUint32(at, e.length, false);
    out.set(e, at + 4);
    at += 4 + e.length;
  }
  return out;
}

/** A WebCrypto HMAC-SHA256 key from raw bytes (not extractable unless asked). */
export function hmacKey(raw: Uint8Array, extractable = false): Promise<CryptoKey> {
  return subtle().importKey("raw", raw as Uint8Array<ArrayBuffer>, { name: "HMAC", hash: "SHA-256" }, extractable, ["sign"]);
}

/** HMAC-SHA256 of a message under a WebCrypto key. */
export async function hmacSha256(key: CryptoKey, message: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await subtle().sign("HMAC", key, message as Uint8Array<ArrayBuffer>));
}

/** A generator of coins: `generate(n)` gives `n` bytes, one request per report. */
export interface CoinSource {
  generate(n: number): Uint8Array | Promise<Uint8Array>;
}

function checkRequest(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > MAX_REQUEST_BYTES) {
    throw new RangeError(`n must be an integer in [1, ${MAX_REQUEST_BYTES}] bytes per request, got n=${String(n)}`);
  }
}

/** The platform's secure generator (`crypto.getRandomValues`): what a device uses. */
export class SystemCoins implements CoinSource {
  generate(n: number): Uint8Array {
    checkRequest(n);
    return globalThis.crypto.getRandomValues(new Uint8Array(n));
  }
}

function concat(...arrays: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(arrays.reduce((n, a) => n + a.length, 0));
  let at = 0;
  for (const a of arrays) {
    out.set(a, at);
    at += a.length;
  }
  return out;
}

/**
 * HMAC_DRBG (NIST SP 800-90A Rev. 1, 10.1.2) with SHA-256: the seeded generator of tests and test
 * vectors, instantiated with `entropy || nonce || personalization`; each `generate` is one Generate
 * call without additional input. WebCrypto is asynchronous, so requests are queued: concurrent
 * calls are served in the order they were made, each from the state the previous one left.
 */
export class HmacDrbg implements CoinSource {
  private key: Uint8Array = new Uint8Array(32);
  private value: Uint8Array = new Uint8Array(32).fill(1);
  private requests = 1;
  private queue: Promise<unknown>;

  constructor(entropy: Uint8Array, nonce: Uint8Array = new Uint8Array(0),
              personalization: Uint8Array = new Uint8Array(0)) {
    for (const [name, v] of [["entropy", entropy], ["nonce", nonce], ["personalization", personalization]] as const) {
      if (!(v instanceof Uint8Array)) throw new TypeError(`${name} must be a Uint8Array, got ${name}=${String(v)}`);
    }
    if (entropy.length < 32) {
      throw new RangeError(`entropy must have at least 32 bytes (256-bit strength), got entropy.length=${entropy.length}`);
    }
    this.queue = this.update(concat(entropy, nonce, personalization));
  }

  private async update(provided: Uint8Array): Promise<void> {
    this.key = await hmacSha256(await hmacKey(this.key), concat(this.value, Uint8Array.of(0), provided));
    let k = await hmacKey(this.key);
    this.value = await hmacSha256(k, this.value);
    if (provided.length > 0) {
      this.key = await hmacSha256(k, concat(this.value, Uint8Array.of(1), provided));
      k = await hmacKey(this.key);
      this.value = await hmacSha256(k, this.value);
    }
  }

  private async next(n: number): Promise<Uint8Array> {
    if (this.requests > MAX_REQUESTS) throw new RangeError("HMAC_DRBG needs a reseed after 2^48 requests");
    const k = await hmacKey(this.key);
    const out = new Uint8Array(Math.ceil(n / 32) * 32);
    for (let at = 0; at < n; at += 32) {
      this.value = await hmacSha256(k, this.value);
      out.set(this.value, at);
    }
    await this.update(new Uint8Array(0));
    this.requests += 1;
    return out.slice(0, n);
  }

  generate(n: number): Promise<Uint8Array> {
    checkRequest(n);
    const result = this.queue.then(() => this.next(n));
    this.queue = result.catch(() => undefined);
    return result;
  }
}
