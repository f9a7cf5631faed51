/**
 * The client of a subset-randomized-response collection (`channel: {kind: subset}`, docs/client.md,
 * section 12), byte for byte as the Python reference (`ldp_marginals.ldp.subset_client`) makes its reports.
 *
 * 1. check the input as the per-bit client does (`bad_event_time`, `bad_dimensions`, `missing_feature`,
 *    `unknown_feature`, `bad_value`), drawing no coin on a refusal;
 * 2. draw `4 (d + 1 + s)` bytes in one request: `d` subset coins, the keep coin, `s` mask coins;
 * 3. the true bits are the booleans in layout order;
 * 4. the subset, by sequential selection: position `i = 0..d-1` joins iff `decide(coin i, r / (d - i))`,
 *    `r` the positions still to choose, the quotient in doubles (exactly `s` join);
 * 5. the flip mask, uniform over the `2^s - 1` non-zero patterns: bit `j` is `decide(mask coin j, 0.5)`
 *    once an earlier bit is 1, else `decide(mask coin j, h / (2h - 1))` with `h = 2^(s - j - 1)`;
 * 6. the sent pattern: bit `j` is the true bit of the j-th chosen position (ascending), XOR the mask's bit
 *    `j` unless `decide(keep coin, keep)`;
 * 7. pack the `d`-bit subset mask (bit `i`: position `i` chosen), then the `s` pattern bits in order,
 *    least significant first; `client` is null.
 */
import type { NoisyReport } from "./avro.js";
import { ReportingClient, type FeatureValues, type Traced } from "./client.js";
import { COIN_BYTES, SystemCoins, decide, type CoinSource } from "./coins.js";
import { bad, keys, text, window, type Feature, type Window } from "./config.js";
import { secretKey, type Secret } from "./device.js";
import { shown } from "./refusal.js";
import { MAX_WHOLE_REPORT_FEATURES, booleanBits, booleanFeatures, integer, isProbability } from "./whole-report.js";

/** The most features a subset collection may have (subsets and patterns are 64-bit masks in the job). */
export const MAX_SUBSET_FEATURES = MAX_WHOLE_REPORT_FEATURES;

export interface SubsetSpec {
  readonly collection: string;
  /** The boolean features, in layout (bit) order. */
  readonly features: readonly Feature[];
  readonly window: Window;
  readonly maxOrder: number;
  /** `s`: how many of the bits each report carries. */
  readonly width: number;
  /** `p`: the probability of sending the true pattern of the subset's bits. */
  readonly keep: number;
}

/** The intermediate values of one report (for the test vectors and for debugging a client). */
export interface SubsetTrace {
  /** The bytes drawn from the generator. */
  readonly coins: Uint8Array;
  /** The true bits. */
  readonly encoded: readonly number[];
  /** The chosen positions, ascending. */
  readonly subset: readonly number[];
  /** 1 when the true pattern was sent. */
  readonly kept: number;
  /** The sent pattern: bit `j` of position `subset[j]`. */
  readonly pattern: readonly number[];
}

/** The spec of a subset collection from its client config (parsed JSON); a `bad_config` {@link Refusal} otherwise. */
export function parseSubsetSpec(json: unknown): SubsetSpec {
  const spec = keys(json, "config", ["collection", "features", "window", "subset"]);
  const features = booleanFeatures(spec.features);
  const s = keys(spec.subset, "subset", ["max_order", "width", "keep"]);
  const win = window(spec.window);
  const collection = text(spec.collection, "collection");
  const d = features.length;
  const maxOrder = integer(s.max_order, "subset", "max_order");
  const width = integer(s.width, "subset", "width");
  if (!(maxOrder <= width && width <= d)) {
    throw bad(`subset.width must be in [max_order=${maxOrder}, ${d} features], got width=${width}`);
  }
  // 2^-s is exact in doubles for s <= 62
  if (!isProbability(s.keep) || !(s.keep > 2 ** -width)) {
    throw bad(`subset.keep must be a number in (2^-width, 1], got keep=${shown(s.keep)}`);
  }
  return Object.freeze({
    collection, features: Object.freeze(features), window: Object.freeze(win), maxOrder, width, keep: s.keep,
  });
}

/** One device's client for one subset-randomized-response collection. */
export class SubsetDeviceClient extends ReportingClient<SubsetTrace> {
  readonly spec: SubsetSpec;
  private readonly coins: CoinSource;

  private constructor(spec: SubsetSpec, coins: CoinSource) {
    super();
    this.spec = spec;
    this.coins = coins;
  }

  /**
   * A client for the collection whose client config (parsed JSON) is `config`; `secret` is checked as
   * the per-bit client checks it (this kind derives nothing from it: its reports carry no token and
   * nothing memoizes); coins from `coins`, the platform's secure generator unless a test passes a seeded
   * HmacDrbg. Rejects with a Refusal: `bad_config`, then `bad_secret`.
   */
  static async create(config: unknown, secret: Secret, coins: CoinSource = new SystemCoins()):
      Promise<SubsetDeviceClient> {
    const spec = parseSubsetSpec(config);
    await secretKey(secret);
    return new SubsetDeviceClient(spec, coins);
  }

  /** Coins per report: `d` subset coins, the keep coin, `s` mask coins. */
  private get nCoins(): number {
    return this.spec.features.length + 1 + this.spec.width;
  }

  protected encode(values: FeatureValues, eventMs: number, dimensions: [string, string][]):
      Promise<Traced<SubsetTrace>> {
    const encoded = booleanBits(this.spec.features, values);
    const drawn = this.coins.generate(COIN_BYTES * this.nCoins);
    return this.randomize(encoded, eventMs, dimensions, drawn);
  }

  private async randomize(encoded: number[], eventMs: number, dimensions: [string, string][],
                          request: Uint8Array | Promise<Uint8Array>) {
    const spec = this.spec;
    const drawn = await request;
    if (!(drawn instanceof Uint8Array) || drawn.length !== COIN_BYTES * this.nCoins) {
      throw new Error("the coin source gave the wrong number of bytes");
    }
    const coin = (k: number) => drawn.subarray(COIN_BYTES * k, COIN_BYTES * (k + 1));
    const d = encoded.length;
    const s = spec.width;
    const subset: number[] = [];
    for (let i = 0; i < d; i++) {
      if (decide(coin(i), (s - subset.length) / (d - i))) subset.push(i);
    }
    const kept = decide(coin(d), spec.keep);
    const pattern: number[] = [];
    let set = false; // whether an earlier bit of the flip mask is 1
    for (let j = 0; j < s; j++) {
      const h = 2 ** (s - j - 1);
      const flip = decide(coin(d + 1 + j), set ? 0.5 : h / (2 * h - 1));
      set ||= flip === 1;
      pattern.push(encoded[subset[j]!]! ^ (kept ? 0 : flip));
    }
    const bits = new Uint8Array(Math.ceil((d + s) / 8));
    for (const i of subset) bits[i >> 3] = bits[i >> 3]! | (1 << (i & 7));
    pattern.forEach((y, j) => {
      bits[(d + j) >> 3] = bits[(d + j) >> 3]! | (y << ((d + j) & 7));
    });
    const record: NoisyReport = { collection: spec.collection, event_time: eventMs, bits, dimensions, client: null };
    return { record, trace: { coins: drawn, encoded, subset, kept, pattern } };
  }
}
