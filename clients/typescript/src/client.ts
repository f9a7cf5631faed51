/**
 * The device client (docs/client.md, section 3): one report from a device's feature values, byte for
 * byte as the Python reference (`ldp_marginals.ldp.client.DeviceClient`) makes it.
 *
 * 1. check the input, in the specification's order, before drawing any coin (a {@link Refusal});
 * 2. draw `4 * (numeric features that do not memoize + bits)` bytes in one request; the coins encode
 *    those numeric features first (layout order), then randomize one bit each (bit order);
 * 3. encode: a boolean is its bit, a categorical value one-hot, a numeric value `x` the bit
 *    `coin < units((x - low)/(high - low))`, its coin drawn, or the device's encoding coin when the bit
 *    memoizes;
 * 4. randomize bit `i` with true bit `x`: memoized, `b = decide(permanent coin, x ? q_P : p_P)` then
 *    `y = decide(coin, b ? q_I : p_I)`; else `y = decide(coin, x ? q_I : p_I)`;
 * 5. pack bit `i` at `(bits[i >> 3] >> (i & 7)) & 1`, sort the dimensions by their keys' UTF-8 bytes and
 *    put the device token of the event's slice in `client` when the config says so.
 *
 * The declared rate (docs/client.md section 3): the client counts the reports it makes per UTC day of
 * their event time, its rate state ({@link DeviceClient.rateState}, which the app persists and passes back
 * to {@link DeviceClient.create}); with `reports_per_day: R`, a report that would be its day's `R + 1`-th is
 * refused (`rate_exceeded`) after every other check, drawing no coins.
 */
import { encodeNoisyReport, sortDimensions, type NoisyReport } from "./avro.js";
import { COIN_BYTES, SystemCoins, decide, type CoinSource } from "./coins.js";
import { MAX_REPORTS_PER_DAY, parseClientSpec, type ClientSpec, type Feature, type Window } from "./config.js";
import { deviceToken, encodingCoin, permanentCoin, secretKey, type Secret } from "./device.js";
import {
  BAD_DIMENSIONS, BAD_EVENT_TIME, BAD_STATE, BAD_VALUE, MISSING_FEATURE, OUT_OF_RANGE, RATE_EXCEEDED, Refusal,
  UNKNOWN_FEATURE, isObject, shown, wellFormed,
} from "./refusal.js";

/** The product's event-time range: [1970-01-01, 2100-01-01) in ms. */
export const MIN_EVENT_MS = 0;
export const MAX_EVENT_MS = 4_102_444_800_000;
/** Milliseconds in a UTC day: the rate counts reports per `Math.floor(eventMs / MS_PER_DAY)`. */
export const MS_PER_DAY = 86_400_000;
const LAST_DAY = Math.floor((MAX_EVENT_MS - 1) / MS_PER_DAY);

/** The rate state: reports made per UTC day (days since 1970-01-01, in decimal) of their event time. */
export type RateState = Readonly<Record<string, number>>;

/**
 * The rate state an app restores (`null`/`undefined`: none): UTC day numbers in decimal (no sign, no
 * leading zero) to integer counts in [0, 2^31 - 1]; a {@link Refusal} `bad_state` otherwise (never echoing
 * a count: it says how active a device is).
 */
function readRateState(state: unknown): Map<number, number> {
  const out = new Map<number, number>();
  if (state === null || state === undefined) return out;
  if (!isObject(state)) throw new Refusal(BAD_STATE, `the rate state must map UTC day numbers to counts, got ${kind(state)}`);
  for (const [key, count] of Object.entries(state)) {
    if (!/^(0|[1-9][0-9]{0,5})$/.test(key) || Number(key) > LAST_DAY) {
      throw new Refusal(BAD_STATE, `the rate state's keys must be UTC day numbers in [0, ${LAST_DAY}] in decimal, ` +
        `got key ${shown(key)}`);
    }
    if (typeof count !== "number" || !Number.isInteger(count) || count < 0 || count > MAX_REPORTS_PER_DAY) {
      throw new Refusal(BAD_STATE, `the rate state's counts must be integers in [0, ${MAX_REPORTS_PER_DAY}], ` +
        `got a bad count for day ${key}`);
    }
    out.set(Number(key), count);
  }
  return out;
}

export type FeatureValues = Readonly<Record<string, unknown>> | ReadonlyMap<string, unknown>;
export type Dimensions = Readonly<Record<string, string>> | ReadonlyMap<string, string> | null | undefined;

/** The intermediate values of one report (for the test vectors and for debugging a client). */
export interface Trace {
  /** The bytes drawn from the generator. */
  readonly coins: Uint8Array;
  /** The true bits. */
  readonly encoded: readonly number[];
  /** Per bit, the permanent bit, or null where the bit does not memoize. */
  readonly permanent: readonly (number | null)[];
}

function entries(map: unknown): [unknown, unknown][] | null {
  if (map instanceof Map) return [...map.entries()];
  return isObject(map) ? Object.entries(map) : null;
}

/** The event time, checked (`bad_event_time`). */
export function checkEventTime(eventMs: unknown): number {
  if (typeof eventMs !== "number" || !Number.isInteger(eventMs) || eventMs < MIN_EVENT_MS || eventMs >= MAX_EVENT_MS) {
    throw new Refusal(BAD_EVENT_TIME, `eventMs must be an integer in [${MIN_EVENT_MS}, ${MAX_EVENT_MS}), ` +
      `got eventMs=${shown(eventMs)}`);
  }
  return eventMs;
}

/** The dimensions, checked (`bad_dimensions`) and sorted by their keys' UTF-8 bytes. */
export function checkDimensions(dimensions: unknown): [string, string][] {
  const items = dimensions === null || dimensions === undefined ? [] : entries(dimensions);
  const ok = (k: unknown, v: unknown) => typeof k === "string" && k !== "" && wellFormed(k)
    && typeof v === "string" && wellFormed(v);
  if (items === null || !items.every(([k, v]) => ok(k, v))) {
    throw new Refusal(BAD_DIMENSIONS, "dimensions must map non-empty strings to strings (valid Unicode), " +
      `got dimensions=${shown(items === null ? dimensions : Object.fromEntries(items))}`);
  }
  return sortDimensions(items as [string, string][]);
}

function kind(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
}

/**
 * Checks the values against the features (refusals in the specification's order: `missing_feature`,
 * `unknown_feature`, then per feature `bad_value`, `out_of_range`); per feature, its value as given.
 */
export function checkValues(features: readonly Feature[], values: FeatureValues): Map<unknown, unknown> {
  const items = entries(values);
  if (items === null) throw new Refusal(BAD_VALUE, `values must map feature names to values, got ${kind(values)}`);
  const given = new Map<unknown, unknown>(items);
  const names = features.map((f) => f.name);
  const missing = names.filter((n) => !given.has(n));
  if (missing.length > 0) throw new Refusal(MISSING_FEATURE, `values must give every feature, got missing=${shown(missing)}`);
  const unknown = [...given.keys()].filter((k) => typeof k !== "string" || !names.includes(k)).map(String).sort();
  if (unknown.length > 0) {
    throw new Refusal(UNKNOWN_FEATURE, `values name features the collection does not have: ${shown(unknown)}`);
  }
  for (const f of features) {
    const v = given.get(f.name);
    // a device's values are what the randomizer protects: messages give their type, never the value
    if (f.type === "boolean" && typeof v !== "boolean") {
      throw new Refusal(BAD_VALUE, `feature ${shown(f.name)} is boolean: its value must be true or false, got ${kind(v)}`);
    }
    if (f.type === "categorical" && (typeof v !== "string" || !f.values.includes(v))) {
      throw new Refusal(BAD_VALUE, `feature ${shown(f.name)} must be one of ${shown(f.values)}, got ` +
        (typeof v === "string" ? "a string not listed" : kind(v)));
    }
    if (f.type === "numeric") {
      if (typeof v !== "number") {
        throw new Refusal(BAD_VALUE, `feature ${shown(f.name)} is numeric: its value must be a number, got ${kind(v)}`);
      }
      if (!(Number.isFinite(v) && f.low <= v && v <= f.high)) {
        throw new Refusal(OUT_OF_RANGE, `feature ${shown(f.name)} must be in [${f.low}, ${f.high}], got a number outside`);
      }
    }
  }
  return given;
}

/** A report: its record, and the intermediate values that made it. */
export interface Traced<T> {
  readonly record: NoisyReport;
  readonly trace: T;
}

/**
 * What every kind of client shares ({@link DeviceClient}, `HadamardDeviceClient`): the public report
 * methods, and the first checks of the input in the specification's order (the event time, then the
 * dimensions) before the kind's encoder ({@link ReportingClient.encode}) runs.
 */
export abstract class ReportingClient<T> {
  /** The `NoisyReport` record of one report. */
  async report(values: FeatureValues, eventMs: number, dimensions?: Dimensions): Promise<NoisyReport> {
    return (await this.reportWithTrace(values, eventMs, dimensions)).record;
  }

  /** The Avro bytes of one report: what the device sends. */
  async reportBytes(values: FeatureValues, eventMs: number, dimensions?: Dimensions): Promise<Uint8Array> {
    return encodeNoisyReport(await this.report(values, eventMs, dimensions));
  }

  /**
   * A report and its trace. The input is checked and the coins requested before this returns its
   * promise, so concurrent calls draw in the order they were made.
   */
  reportWithTrace(values: FeatureValues, eventMs: number, dimensions?: Dimensions): Promise<Traced<T>> {
    try {
      const time = checkEventTime(eventMs);
      const dims = checkDimensions(dimensions);
      return this.encode(values, time, dims);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * The kind's encoder, given a checked event time and the checked, sorted dimensions: it checks the
   * values (throwing a {@link Refusal}) and requests its coins before it returns its promise.
   */
  protected abstract encode(values: FeatureValues, eventMs: number, dimensions: [string, string][]):
      Promise<Traced<T>>;
}

/**
 * A client's count of its reports per UTC day of their event time (docs/client.md section 3), every kind's:
 * restored from a rate state ({@link readRateState}), it refuses (`rate_exceeded`) a report past the declared
 * rate and gives the state back ({@link RateCounter.state}).
 */
export class RateCounter {
  private readonly reported: Map<number, number>;   // UTC day -> reports made (this collection's)

  /** The counter of a restored rate state (`null`/`undefined`: none); a {@link Refusal} `bad_state` if it is not one. */
  constructor(state: unknown) {
    this.reported = readRateState(state);
  }

  /** The rate state, `{"20454": 2, ...}` (a new object, days in order). */
  state(): RateState {
    const out: Record<string, number> = {};
    for (const day of [...this.reported.keys()].sort((a, b) => a - b)) out[String(day)] = this.reported.get(day)!;
    return out;
  }

  /** Counts a report on its event's UTC day, or refuses it (`rate_exceeded`) past `rate` (null: no limit). */
  count(eventMs: number, rate: number | null): void {
    const day = Math.floor(eventMs / MS_PER_DAY);
    const made = this.reported.get(day) ?? 0;
    if (rate !== null && made >= rate) {
      throw new Refusal(RATE_EXCEEDED, `this device has made the ${rate} reports a UTC day the collection declares ` +
        `(reports_per_day=${rate}) on day ${day}`);
    }
    this.reported.set(day, Math.min(made + 1, MAX_REPORTS_PER_DAY));   // without a rate, stops at 2^31 - 1
  }
}

/** One device's client for one collection. */
export class DeviceClient extends ReportingClient<Trace> {
  readonly spec: ClientSpec;
  private readonly key: CryptoKey;
  private readonly coins: CoinSource;
  private readonly rate: RateCounter;

  private constructor(spec: ClientSpec, key: CryptoKey, coins: CoinSource, rate: RateCounter) {
    super();
    this.spec = spec;
    this.key = key;
    this.coins = coins;
    this.rate = rate;
  }

  /**
   * The rate state: reports made per UTC day of their event time, `{"20454": 2, ...}` (a new object, days
   * in order). Persist it after each report (e.g. in IndexedDB beside the key) and pass it back to
   * {@link DeviceClient.create}: the count is the device's state.
   */
  rateState(): RateState {
    return this.rate.state();
  }

  /**
   * A client for the collection whose client config (the parsed JSON) is `config`, on a device whose
   * secret is `secret` (its 32 bytes or an HMAC-SHA256 CryptoKey of 256 bits, see storage.ts); coins
   * from `coins`, the platform's secure generator unless a test passes a seeded {@link HmacDrbg}
   * (`undefined`: the platform's); `rateState` what {@link DeviceClient.rateState} gave before, as it was
   * persisted (`null`/`undefined`: no report made yet). Rejects with a {@link Refusal}: `bad_config`, then
   * `bad_secret`, then `bad_state`.
   */
  static async create(config: unknown, secret: Secret, coins: CoinSource = new SystemCoins(),
                      rateState?: unknown): Promise<DeviceClient> {
    const spec = parseClientSpec(config);
    const key = await secretKey(secret);
    return new DeviceClient(spec, key, coins, new RateCounter(rateState));
  }

  protected encode(values: FeatureValues, eventMs: number, dimensions: [string, string][]): Promise<Traced<Trace>> {
    const unit = checkValues(this.spec.features, values);
    this.rate.count(eventMs, this.spec.reportsPerDay);
    const spec = this.spec;
    const fresh = spec.features.filter((f, k) => f.type === "numeric" && spec.permanent[spec.firstBit[k]!] === null);
    const drawn = this.coins.generate(COIN_BYTES * (fresh.length + spec.nBits));
    return this.randomize(unit, eventMs, dimensions, fresh.map((f) => f.name), drawn);
  }

  private async randomize(values: Map<unknown, unknown>, eventMs: number, dimensions: [string, string][],
                          fresh: string[], request: Uint8Array | Promise<Uint8Array>) {
    const spec = this.spec;
    const drawn = await request;
    if (!(drawn instanceof Uint8Array) || drawn.length !== COIN_BYTES * (fresh.length + spec.nBits)) {
      throw new Error("the coin source gave the wrong number of bytes");
    }
    const coin = (k: number) => drawn.subarray(COIN_BYTES * k, COIN_BYTES * (k + 1));
    // the true bits, and each bit's permanent coin (null where it does not memoize)
    const encoded: number[] = [];
    const permanentCoins: (Promise<Uint8Array> | null)[] = [];
    for (const [k, f] of spec.features.entries()) {
      const value = values.get(f.name);
      let bits: number[];
      if (f.type === "numeric") {
        const u = ((value as number) - f.low) / (f.high - f.low);
        const i = fresh.indexOf(f.name);
        const c = i >= 0 ? coin(i) : await encodingCoin(this.key, spec.collection, f.name);
        bits = [decide(c, u)];
      } else if (f.type === "boolean") {
        bits = [value ? 1 : 0];
      } else {
        bits = f.values.map((v) => (v === value ? 1 : 0));
      }
      const label = f.type === "categorical" ? (value as string) : String(bits[0]);
      bits.forEach((x, j) => {
        const memoizes = spec.permanent[spec.firstBit[k]! + j] !== null;
        encoded.push(x);
        permanentCoins.push(memoizes ? permanentCoin(this.key, spec.collection, f.name, label, j) : null);
      });
    }
    const held = await Promise.all(permanentCoins);
    const permanent: (number | null)[] = [];
    const bits = new Uint8Array(Math.ceil(spec.nBits / 8));
    for (let i = 0; i < spec.nBits; i++) {
      const x = encoded[i]!;
      const inst = spec.instantaneous[i]!;
      const perm = spec.permanent[i] ?? null;
      const pc = held[i] ?? null;
      let y: number;
      if (perm !== null && pc !== null) {
        const b = decide(pc, x ? perm.q : perm.p);
        permanent.push(b);
        y = decide(coin(fresh.length + i), b ? inst.q : inst.p);
      } else {
        permanent.push(null);
        y = decide(coin(fresh.length + i), x ? inst.q : inst.p);
      }
      bits[i >> 3] = bits[i >> 3]! | (y << (i & 7));
    }
    const client = spec.token ? await deviceToken(this.key, spec.collection, sliceStartOf(spec.window, eventMs)) : null;
    const record: NoisyReport = { collection: spec.collection, event_time: eventMs, bits, dimensions, client };
    return { record, trace: { coins: drawn, encoded, permanent } };
  }
}

/** The start (ms) of the slice an event lies in (docs/client.md section 5): 0 for the global window. */
export function sliceStartOf(window: Window, eventMs: number): number {
  return window.periodMs === 0 ? 0 : eventMs - (eventMs % window.periodMs);
}
