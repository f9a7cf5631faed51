/**
 * The client of a subset-randomized-response collection (`channel: {kind: subset}`, docs/client.md,
 * section 12), byte for byte as the Python reference (`ldp_marginals.ldp.subset_client`) makes its reports.
 *
 * 1-3. what every whole-report kind does (`whole-report.ts`): check the input, drawing no coin on a
 *    refusal; draw `4 (d + 1 + s)` bytes in one request: `d` subset coins, the keep coin, `s` mask coins;
 *    the true bits are the booleans in layout order;
 * 4. the subset, by sequential selection: position `i = 0..d-1` joins iff `decide(coin i, r / (d - i))`,
 *    `r` the positions still to choose, the quotient in doubles (exactly `s` join);
 * 5. the flip mask, uniform over the `2^s - 1` non-zero patterns: bit `j` is `decide(mask coin j, 0.5)`
 *    once an earlier bit is 1, else `decide(mask coin j, h / (2h - 1))` with `h = 2^(s - j - 1)`;
 * 6. the sent pattern: bit `j` is the true bit of the j-th chosen position (ascending), XOR the mask's bit
 *    `j` unless `decide(keep coin, keep)`;
 * 7. pack the `d`-bit subset mask (bit `i`: position `i` chosen), then the `s` pattern bits in order,
 *    least significant first; `client` is null.
 */
import { SystemCoins, decide, type CoinSource } from "./coins.js";
import { bad } from "./config.js";
import type { Secret } from "./device.js";
import {
  BitWriter, MAX_WHOLE_REPORT_FEATURES, WholeReportClient, createClient, featureBits, integer, keepOf,
  permanentKeepOf, readBlock, wholeReportSpec,
  type WholeReportSpec, type WholeReportTrace,
} from "./whole-report.js";

/** The most features a subset collection may have (subsets and patterns are 64-bit masks in the job). */
export const MAX_SUBSET_FEATURES = MAX_WHOLE_REPORT_FEATURES;

export interface SubsetSpec extends WholeReportSpec {
  /** `s`: how many of the bits each report carries. */
  readonly width: number;
}

/** What the subset randomizer chose in one report. */
export interface SubsetChoice {
  /** The chosen positions, ascending. */
  readonly subset: readonly number[];
  /** 1 when the true pattern was sent. */
  readonly kept: number;
  /** The sent pattern: bit `j` of position `subset[j]`. */
  readonly pattern: readonly number[];
  /** Memoized (section 13): the permanent pattern; else absent. */
  readonly permanentPattern?: readonly number[];
}

/** The intermediate values of one report (for the test vectors and for debugging a client). */
export type SubsetTrace = WholeReportTrace<SubsetChoice>;

/** The spec of a subset collection from its client config (parsed JSON); a `bad_config` {@link Refusal} otherwise. */
export function parseSubsetSpec(json: unknown): SubsetSpec {
  const read = readBlock(json, "subset", ["max_order", "width", "keep"]);
  const d = featureBits(read.features);
  const maxOrder = read.maxOrder;
  const width = integer(read.block.width, "subset", "width");
  if (!(maxOrder <= width && width <= d)) {
    throw bad(`subset.width must be in [max_order=${maxOrder}, ${d} features], got width=${width}`);
  }
  // 2^-s is exact in doubles for s <= 62
  const keep = keepOf(read, 2 ** -width, "2^-width");
  return wholeReportSpec(read, keep, permanentKeepOf(read, 2 ** -width, "2^-width"), { width });
}

/** One device's client for one subset-randomized-response collection. */
export class SubsetDeviceClient extends WholeReportClient<SubsetSpec, SubsetChoice> {
  /**
   * A client for the collection whose client config (parsed JSON) is `config`, restored with `rateState`
   * (what `rateState()` gave before; absent: none), as {@link createClient} says.
   */
  static async create(config: unknown, secret: Secret, coins: CoinSource = new SystemCoins(),
                      rateState?: unknown): Promise<SubsetDeviceClient> {
    return createClient(parseSubsetSpec, (...a) => new SubsetDeviceClient(...a), config, secret, coins, rateState);
  }

  /** Coins per report: `d` subset coins, the keep coin, `s` mask coins. */
  protected get nCoins(): number {
    return featureBits(this.spec.features) + 1 + this.spec.width;
  }

  /** Memoized: the fresh keep coin, then `s` fresh mask coins. */
  protected get nFresh(): number {
    return 1 + this.spec.width;
  }

  /** The `d`-bit subset mask, then the `s` pattern bits. */
  protected get reportBits(): number {
    return featureBits(this.spec.features) + this.spec.width;
  }

  /** Steps 4 to 7: the subset, the flip mask, the sent pattern, packed. */
  protected randomize(encoded: readonly number[], coin: (k: number) => Uint8Array,
                      fresh: ((k: number) => Uint8Array) | null, out: BitWriter): SubsetChoice {
    const d = encoded.length;
    const s = this.spec.width;
    const subset: number[] = [];
    for (let i = 0; i < d; i++) {
      if (decide(coin(i), (s - subset.length) / (d - i))) subset.push(i);
    }
    const truth = subset.map((i) => encoded[i]!);
    if (fresh === null) {
      const { kept, pattern } = subsetResponse(truth, coin(d), (j) => coin(d + 1 + j), this.spec.keep);
      return this.pack(d, subset, kept, pattern, out, null);
    }
    // section 13: the permanent pattern from the permanent coins, re-randomized by the fresh keep and mask coins
    const held = subsetResponse(truth, coin(d), (j) => coin(d + 1 + j), this.spec.permanentKeep!).pattern;
    const { kept, pattern } = subsetResponse(held, fresh(0), (j) => fresh(1 + j), this.spec.keep);
    return this.pack(d, subset, kept, pattern, out, held);
  }

  private pack(d: number, subset: number[], kept: number, pattern: number[], out: BitWriter,
               held: number[] | null): SubsetChoice {
    for (let i = 0; i < d; i++) out.put(subset.includes(i) ? 1 : 0, 1);
    for (const y of pattern) out.put(y, 1);
    return held === null ? { subset, kept, pattern } : { subset, kept, pattern, permanentPattern: held };
  }
}

/** Steps 4-5 of section 12 on `truth` (the subset's bits): the flip mask from `mask(j)`, kept iff `decide(keepCoin, keep)`. */
function subsetResponse(truth: readonly number[], keepCoin: Uint8Array, mask: (j: number) => Uint8Array,
                        keep: number): { kept: number; pattern: number[] } {
  const s = truth.length;
  const kept = decide(keepCoin, keep);
  const pattern: number[] = [];
  let set = false; // whether an earlier bit of the flip mask is 1
  for (let j = 0; j < s; j++) {
    const h = 2 ** (s - j - 1);
    const flip = decide(mask(j), set ? 0.5 : h / (2 * h - 1));
    set ||= flip === 1;
    pattern.push(truth[j]! ^ (kept ? 0 : flip));
  }
  return { kept, pattern };
}
