/**
 * What the client configs and clients of the kinds that randomize a whole report share (`hadamard.ts`,
 * `subset.ts`: docs/client.md, sections 11 and 12). The config: its keys, boolean and categorical features
 * (a categorical one-hot, one bit per value; at most 62 bits, the job's 64-bit words), the window, the collection's name, the kind's block with its `max_order`
 * (an integer written as one) and its `keep` (a probability above the kind's bound); failures are
 * `bad_config`, with the rules of the Python references. The client: the input checked as the per-bit
 * client checks it (`bad_event_time`, `bad_dimensions`, `missing_feature`, `unknown_feature`,
 * `bad_value`), drawing no coin on a refusal; the kind's coins drawn in one request; the true bits (in
 * layout order: a boolean's bit, a categorical value one-hot, as the per-bit client encodes them); the kind's randomizer, which writes the report's bits least significant
 * first; the record, `client` the device token of the event's slice when the config says `token: true`
 * (section 5), else null. The declared rate (`reports_per_day`, section 3) is counted and enforced as the
 * per-bit client does, after the value checks and before any coin. The secret is checked
 * (`bad_secret`); a memoized collection (the kind's block holds `permanent_keep`, docs/client.md section 13)
 * derives from it the permanent coins of each value (an HmacDrbg seeded with `permanentReportSeed`), which the
 * randomizer reads in place of the drawn ones, and draws the kind's fresh coins. A kind adds its own
 * checks, its randomizer and its layout.
 */
import type { NoisyReport } from "./avro.js";
import {
  RateCounter, ReportingClient, checkValues, sliceStartOf, type FeatureValues, type RateState, type Traced,
} from "./client.js";
import { COIN_BYTES, HmacDrbg, type CoinSource } from "./coins.js";
import { bad, feature, keys, reportsPerDayOf, text, tokenOf, window, type Feature, type Window } from "./config.js";
import { deviceToken, permanentReportSeed, secretKey, type Secret } from "./device.js";
import { shown } from "./refusal.js";

/** The most features a whole-report collection may have (the job keeps a report's bits in 64-bit words). */
export const MAX_WHOLE_REPORT_FEATURES = 62;

/** What every whole-report spec holds. */
export interface WholeReportSpec {
  readonly collection: string;
  /** The boolean features, in layout (bit) order. */
  readonly features: readonly Feature[];
  readonly window: Window;
  readonly maxOrder: number;
  /** The kind's probability of sending the truth (memoized: the fresh stage's). */
  readonly keep: number;
  /** The kind's name (its block's). */
  readonly kind: string;
  /** Memoized (section 13): the permanent stage's keep; null when the collection does not memoize. */
  readonly permanentKeep: number | null;
  /** Whether reports carry the device token of their slice (section 5). */
  readonly token: boolean;
  /** The declared rate (section 3): at most this many reports a UTC day; null: no limit. */
  readonly reportsPerDay: number | null;
}

/** A whole-report config read up to the kind's own checks; `block` is the kind's block. */
export interface WholeReportBlock {
  readonly kind: string;
  readonly block: Record<string, unknown>;
  readonly collection: string;
  readonly features: Feature[];
  readonly window: Window;
  readonly maxOrder: number;
  readonly token: boolean;
  readonly reportsPerDay: number | null;
}

/**
 * Reads a whole-report config in the specification's order: its keys, the boolean features, the kind's
 * block (its keys `blockKeys`, then `early`, the kind's checks of the block's shape), the window, the
 * collection's name, `max_order`.
 */
export function readBlock(json: unknown, kind: string, blockKeys: readonly string[],
                          early?: (block: Record<string, unknown>) => void,
                          optional: readonly string[] = ["permanent_keep"]): WholeReportBlock {
  const spec = keys(json, "config", ["collection", "features", "window", kind], ["token", "reports_per_day"]);
  const features = booleanFeatures(spec.features);
  const block = keys(spec[kind], kind, blockKeys, optional);
  early?.(block);
  const win = window(spec.window);
  const collection = text(spec.collection, "collection");
  const maxOrder = integer(block.max_order, kind, "max_order");
  return { kind, block, collection, features, window: win, maxOrder, token: tokenOf(spec),
    reportsPerDay: reportsPerDayOf(spec) };
}

/** The block's `keep`: a number in (`above`, 1], `above` written `bound` in the refusal. */
export function keepOf(read: WholeReportBlock, above: number, bound: string): number {
  const keep = read.block.keep;
  if (!isProbability(keep) || !(keep > above)) {
    throw bad(`${read.kind}.keep must be a number in (${bound}, 1], got keep=${shown(keep)}`);
  }
  return keep;
}

/** The block's `permanent_keep` (section 13), with `keep`'s bounds; null when absent (not memoized). */
export function permanentKeepOf(read: WholeReportBlock, above: number, bound: string): number | null {
  if (!Object.hasOwn(read.block, "permanent_keep")) return null;
  const v = read.block.permanent_keep;
  if (!isProbability(v) || !(v > above)) {
    throw bad(`${read.kind}.permanent_keep must be a number in (${bound}, 1], got permanent_keep=${shown(v)}`);
  }
  return v;
}

/** The spec's shared part, frozen, with the kind's own fields. */
export function wholeReportSpec<K extends object>(read: WholeReportBlock, keep: number, permanentKeep: number | null,
                                                  own: K): WholeReportSpec & K {
  return Object.freeze({
    collection: read.collection, features: Object.freeze(read.features), window: Object.freeze(read.window),
    maxOrder: read.maxOrder, keep, kind: read.kind, permanentKeep, token: read.token,
    reportsPerDay: read.reportsPerDay, ...own,
  });
}

/**
 * The features of a whole-report config: a non-empty list of boolean and categorical features (a categorical
 * read as the per-bit config reads it), names unique, at most 62 bits.
 */
export function booleanFeatures(feats: unknown): Feature[] {
  if (!Array.isArray(feats) || feats.length === 0) throw bad(`features must be a non-empty list, got features=${shown(feats)}`);
  const features: Feature[] = feats.map((f, i) => {
    const where = `features[${i}]`;
    if (typeof f === "object" && f !== null && (f as { type?: unknown }).type === "categorical") return feature(f, i);
    const entry = keys(f, where, ["name", "type"]);
    if (entry.type !== "boolean") throw bad(`${where} must be a boolean or categorical feature, got type=${shown(entry.type)}`);
    return { name: text(entry.name, `${where}.name`), type: "boolean" };
  });
  const names = features.map((f) => f.name);
  if (new Set(names).size !== names.length) throw bad(`feature names must be unique, got ${shown(names)}`);
  const bits = featureBits(features);
  if (bits > MAX_WHOLE_REPORT_FEATURES) {
    throw bad(`features must lay out 1 to ${MAX_WHOLE_REPORT_FEATURES} bits, got ${bits}`);
  }
  return features;
}

/** The report's true bits: a boolean's one, a categorical's one per value. */
export function featureBits(features: readonly Feature[]): number {
  return features.reduce((n, f) => n + (f.type === "categorical" ? f.values.length : 1), 0);
}

/** `kind.name`, an integer >= `low` (JavaScript cannot tell `3.0` from `3`: both are 3, as section 11 allows). */
export function integer(v: unknown, kind: string, name: string, low = 1): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < low) {
    throw bad(`${kind}.${name} must be an integer >= ${low}, got ${name}=${shown(v)}`);
  }
  return v;
}

/** A number in [0, 1] (a JSON `true` is not a number). */
export function isProbability(v: unknown): v is number {
  return typeof v === "number" && v >= 0 && v <= 1;
}

/**
 * The true bits of a report, after the per-bit client's checks of the values: a boolean's bit, a categorical
 * value one-hot (one bit per value), in layout order, as the per-bit client encodes them.
 */
export function booleanBits(features: readonly Feature[], values: FeatureValues): number[] {
  const given = checkValues(features, values);
  return features.flatMap((f) => (f.type === "categorical" ? f.values.map((v) => (v === given.get(f.name) ? 1 : 0))
    : [given.get(f.name) ? 1 : 0]));
}

/**
 * What every kind's `create(config, secret, coins, rateState)` does: checks the spec of the client config
 * (parsed JSON, read by the kind's `parse`), then `secret` as the per-bit client checks it (the device token and
 * the permanent coins derive from it), then the rate state as the per-bit client's (`rateState`: what
 * `rateState()` gave before; absent: none), and gives the kind's client (`make`, its constructor); `coins` is
 * the platform's secure generator unless a test passes a seeded HmacDrbg. Rejects with a Refusal:
 * `bad_config`, then `bad_secret`, then `bad_state`.
 */
export async function createClient<S, C>(parse: (config: unknown) => S,
                                         make: (spec: S, key: CryptoKey, coins: CoinSource, rate: RateCounter) => C,
                                         config: unknown, secret: Secret, coins: CoinSource,
                                         rateState?: unknown): Promise<C> {
  const spec = parse(config);
  const key = await secretKey(secret);
  return make(spec, key, coins, new RateCounter(rateState));
}

/** A report's bits, written in order, each value least significant bit first. */
export class BitWriter {
  readonly bytes: Uint8Array;
  at = 0;

  constructor(bits: number) {
    this.bytes = new Uint8Array(Math.ceil(bits / 8));
  }

  /** Appends the low `n` bits of a non-negative integer below 2^53. */
  put(value: number, n: number): void {
    for (let i = 0; i < n; i++, this.at++) {
      const bit = Math.floor(value / 2 ** i) % 2;
      this.bytes[this.at >> 3] = this.bytes[this.at >> 3]! | (bit << (this.at & 7));
    }
  }
}

/** The trace of a whole-report kind: the bytes drawn, the true bits, and what the kind's randomizer chose. */
export type WholeReportTrace<D> = {
  /** The bytes drawn from the generator. */
  readonly coins: Uint8Array;
  /** The true bits. */
  readonly encoded: readonly number[];
  /** Memoized (section 13): the value's permanent coins; else absent. */
  readonly permanent?: Uint8Array;
} & D;

/** One device's client for one whole-report collection: a kind adds its sizes and its randomizer. */
export abstract class WholeReportClient<S extends WholeReportSpec, D> extends ReportingClient<WholeReportTrace<D>> {
  readonly spec: S;
  private readonly coins: CoinSource;
  private readonly key: CryptoKey;
  private readonly rate: RateCounter;

  protected constructor(spec: S, key: CryptoKey, coins: CoinSource, rate: RateCounter) {
    super();
    this.spec = spec;
    this.key = key;
    this.coins = coins;
    this.rate = rate;
  }

  /**
   * The rate state: reports made per UTC day of their event time (as the per-bit client's `rateState`):
   * persist it after each report and pass it back to the kind's `create`.
   */
  rateState(): RateState {
    return this.rate.state();
  }

  /** The number of fresh coins one memoized report draws (section 13), in one request. */
  protected abstract get nFresh(): number;

  /** The number of coins (of COIN_BYTES each) one report draws, in one request. */
  protected abstract get nCoins(): number;

  /** The bits of one report's layout. */
  protected abstract get reportBits(): number;

  /**
   * The kind's randomizer: from the true bits and the report's coins (`coin(k)`, the k-th), writes the
   * report's bits to `out` in layout order and returns what it chose. Memoized (section 13): `coin` reads the
   * value's permanent coins (at `permanentKeep`) and `fresh(k)` the report's fresh ones; else `fresh` is null.
   */
  protected abstract randomize(encoded: readonly number[], coin: (k: number) => Uint8Array,
                               fresh: ((k: number) => Uint8Array) | null, out: BitWriter): D;

  protected encode(values: FeatureValues, eventMs: number, dimensions: [string, string][]):
      Promise<Traced<WholeReportTrace<D>>> {
    const encoded = booleanBits(this.spec.features, values);
    this.rate.count(eventMs, this.spec.reportsPerDay);   // after every other check, before any coin
    if (this.spec.permanentKeep === null) {
      return this.finish(encoded, eventMs, dimensions, this.coins.generate(COIN_BYTES * this.nCoins), null);
    }
    const permanent = permanentReportSeed(this.key, this.spec.collection, this.spec.kind, encoded)
      .then((seed) => new HmacDrbg(seed).generate(COIN_BYTES * this.nCoins));
    return this.finish(encoded, eventMs, dimensions, this.coins.generate(COIN_BYTES * this.nFresh), permanent);
  }

  private async finish(encoded: number[], eventMs: number, dimensions: [string, string][],
                       request: Uint8Array | Promise<Uint8Array>,
                       permanentRequest: Promise<Uint8Array> | null): Promise<Traced<WholeReportTrace<D>>> {
    const drawn = await request;
    const permanent = permanentRequest === null ? null : await permanentRequest;
    const want = COIN_BYTES * (permanent === null ? this.nCoins : this.nFresh);
    if (!(drawn instanceof Uint8Array) || drawn.length !== want) {
      throw new Error("the coin source gave the wrong number of bytes");
    }
    const reader = (bytes: Uint8Array) => (k: number) => bytes.subarray(COIN_BYTES * k, COIN_BYTES * (k + 1));
    const out = new BitWriter(this.reportBits);
    const chosen = permanent === null ? this.randomize(encoded, reader(drawn), null, out)
      : this.randomize(encoded, reader(permanent), reader(drawn), out);
    if (out.at !== this.reportBits) throw new Error(`the randomizer wrote ${out.at} of ${this.reportBits} bits`);
    const client = this.spec.token
      ? await deviceToken(this.key, this.spec.collection, sliceStartOf(this.spec.window, eventMs)) : null;
    const record: NoisyReport = {
      collection: this.spec.collection, event_time: eventMs, bits: out.bytes, dimensions, client,
    };
    const extra = permanent === null ? {} : { permanent };
    return { record, trace: { coins: drawn, encoded, ...extra, ...chosen } as WholeReportTrace<D> };
  }
}
