/**
 * The client of a Hadamard-sampling collection (`channel: {kind: hadamard}`, docs/client.md, section 11),
 * byte for byte as the Python reference (`ldp_marginals.ldp.hadamard_client`) makes its reports.
 *
 * 1-3. what every whole-report kind does (`whole-report.ts`): check the input, drawing no coin on a
 *    refusal; draw `8 * slots` bytes in one request: per slot the index coin, then the parity coin; the
 *    true bits are the booleans in layout order;
 * 4. per slot: the coefficient `a` (1..T, family order) is the first whose threshold `units(S_a)` is
 *    above the index coin's value, `S_a` the running sum of the coefficients' weights in doubles (the
 *    last threshold is 2^32); its true parity is the number of 1 bits of its set, mod 2; the slot
 *    sends it if `decide(parity coin, keep)`, else its complement;
 * 5. pack each slot as its index in `B = bit length of T` bits, least significant first, then its parity
 *    bit; `client` is null.
 *
 * A collection with extra sets (issue 48 item 1) adds `hadamard.sets`: the pool is then every set of
 * 1..max_order bits followed, order by order, by the extra sets' distinct subsets of more bits, and
 * `weights` holds one weight per order up to the widest set.
 */
import { SystemCoins, COIN_BYTES, COIN_RANGE, MAX_REQUEST_BYTES, coinValue, decide, units, type CoinSource } from "./coins.js";
import type { Secret } from "./device.js";
import { bad } from "./config.js";
import { shown } from "./refusal.js";
import {
  BitWriter, MAX_WHOLE_REPORT_FEATURES, WholeReportClient, createClient, featureBits, integer, isProbability, keepOf,
  permanentKeepOf, readBlock, wholeReportSpec,
  type WholeReportSpec, type WholeReportTrace,
} from "./whole-report.js";

/** The most features a Hadamard collection may have (the job keeps a report's bits in 64-bit words). */
export const MAX_HADAMARD_FEATURES = MAX_WHOLE_REPORT_FEATURES;
/** The most coefficients a pool may hold (the server's cap). */
const MAX_COEFFICIENTS = 2 ** 18;
/** The most subsets of the extra sets a client enumerates (the sum of 2^|set|). */
const MAX_POOL_WORK = 2 ** 20;

export interface HadamardSpec extends WholeReportSpec {
  readonly slots: number;
  /** Per order 1..top (maxOrder, or the widest extra set), each coefficient's probability. */
  readonly weights: readonly number[];
  /** Per coefficient (family order, index a at a - 1), the bit indices of its set. */
  readonly sets: readonly (readonly number[])[];
  /** Per coefficient, `units(S_a)`; the last is 2^32. */
  readonly thresholds: readonly number[];
  /** `B`, the bit length of the number of coefficients T. */
  readonly indexBits: number;
}

/** What the Hadamard randomizer chose in one report. */
export interface HadamardSlots {
  /** Per slot, the coefficient's family index (1..T). */
  readonly indices: readonly number[];
  /** Per slot, the parity bit sent. */
  readonly parities: readonly number[];
  /** Memoized (section 13): per slot, the permanent parity; else absent. */
  readonly permanentParities?: readonly number[];
}

/** The intermediate values of one report (for the test vectors and for debugging a client). */
export type HadamardTrace = WholeReportTrace<HadamardSlots>;

function binomial(n: number, k: number): number {
  let out = 1;
  for (let i = 1; i <= k; i++) out = (out * (n - k + i)) / i;
  return Math.round(out);
}

/** The sets of `order` of the bits `bits` (increasing), in lexicographic order of their bit indices. */
function combinationsOf(bits: readonly number[], order: number): number[][] {
  const out: number[][] = [];
  const pick = (from: number, chosen: number[]) => {
    if (chosen.length === order) {
      out.push([...chosen]);
      return;
    }
    for (let i = from; i <= bits.length - (order - chosen.length); i++) pick(i + 1, [...chosen, bits[i]!]);
  };
  pick(0, []);
  return out;
}

/** The sets of `order` bits out of `d`, in lexicographic order of their bit indices. */
function combinations(d: number, order: number): number[][] {
  return combinationsOf(Array.from({ length: d }, (_, i) => i), order);
}

/** Lexicographic order of two sets of one size (increasing bit indices). */
function lexicographic(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

/** The block's extra sets (`sets`; absent: none), checked as the specification says. */
function extraSets(block: Record<string, unknown>, d: number, maxOrder: number): number[][] {
  if (!Object.hasOwn(block, "sets")) return [];
  const raw = block.sets;
  if (!Array.isArray(raw) || raw.length === 0) throw bad(`hadamard.sets must be a non-empty list, got sets=${shown(raw)}`);
  const out: number[][] = [];
  const seen = new Set<string>();
  for (const [i, s] of raw.entries()) {
    const ok = Array.isArray(s) && s.length > maxOrder && s.every((b: unknown, j: number) =>
      typeof b === "number" && Number.isInteger(b) && b >= 0 && b < d && (j === 0 || b > (s[j - 1] as number)));
    if (!ok) {
      throw bad(`hadamard.sets[${i}] must be a list of more than max_order=${maxOrder} increasing bit indices in ` +
                `[0, ${d}), got ${shown(s)}`);
    }
    const key = (s as number[]).join(",");
    if (seen.has(key)) throw bad(`hadamard.sets must be distinct, got sets=${shown(raw)}`);
    seen.add(key);
    out.push([...(s as number[])]);
  }
  if (out.reduce((sum, s) => sum + 2 ** s.length, 0) > MAX_POOL_WORK) {
    throw bad(`hadamard.sets hold more than ${MAX_POOL_WORK} subsets (sum of 2^|set|)`);
  }
  return out;
}

/** The spec of a Hadamard collection from its client config (parsed JSON); a `bad_config` {@link Refusal} otherwise. */
export function parseHadamardSpec(json: unknown): HadamardSpec {
  const read = readBlock(json, "hadamard", ["max_order", "slots", "keep", "weights"], (h) => {
    if (!Array.isArray(h.weights)) throw bad(`hadamard.weights must be a list, got weights=${shown(h.weights)}`);
  }, ["sets", "permanent_keep"]);
  const h = read.block;
  const d = featureBits(read.features);
  const maxOrder = read.maxOrder;
  const slots = integer(h.slots, "hadamard", "slots");
  if (maxOrder > d) throw bad(`hadamard.max_order must be <= the ${d} features, got max_order=${maxOrder}`);
  if (2 * slots * COIN_BYTES > MAX_REQUEST_BYTES) throw bad(`hadamard.slots draws too many coins, got slots=${slots}`);
  const keep = keepOf(read, 0.5, "0.5");
  const permanentKeep = permanentKeepOf(read, 0.5, "0.5");
  const extra = extraSets(h, d, maxOrder);
  const top = extra.reduce((m, s) => Math.max(m, s.length), maxOrder);
  const weights = h.weights as unknown[];
  if (weights.length !== top || !weights.every((w) => isProbability(w) && w > 0)) {
    throw bad(`hadamard.weights must hold ${top} probabilities in (0, 1], one per order, got weights=${shown(weights)}`);
  }
  const w = weights as number[];
  let total: number;
  let sets: number[][] = [];
  if (extra.length === 0) {
    const count = w.reduce((sum, _, j) => sum + binomial(d, j + 1), 0);
    if (count > MAX_COEFFICIENTS) throw bad(`hadamard: the pool holds ${count} coefficients, over ${MAX_COEFFICIENTS}`);
    total = w.reduce((sum, wj, j) => sum + binomial(d, j + 1) * wj, 0);
    for (let j = 1; j <= maxOrder; j++) sets.push(...combinations(d, j));
  } else {
    for (let j = 1; j <= maxOrder; j++) sets.push(...combinations(d, j));
    for (let j = maxOrder + 1; j <= top; j++) {
      const distinct = new Map<string, number[]>();
      for (const s of extra) if (s.length >= j) for (const sub of combinationsOf(s, j)) distinct.set(sub.join(","), sub);
      sets = sets.concat([...distinct.values()].sort(lexicographic));
    }
    if (sets.length > MAX_COEFFICIENTS) throw bad(`hadamard: the pool holds ${sets.length} coefficients, over ${MAX_COEFFICIENTS}`);
    const sizes = new Array<number>(top).fill(0);
    for (const s of sets) sizes[s.length - 1]! += 1;
    total = sizes.reduce((sum, n, j) => sum + n * w[j]!, 0);
  }
  if (!(Math.abs(total - 1) <= 1e-9)) throw bad(`hadamard.weights must sum to 1 over the coefficients, got ${total}`);
  const thresholds: number[] = [];
  let running = 0;
  for (const set of sets) {
    running += w[set.length - 1]!;
    thresholds.push(units(Math.min(running, 1)));
  }
  thresholds[thresholds.length - 1] = COIN_RANGE;
  return wholeReportSpec(read, keep, permanentKeep, {
    slots, weights: Object.freeze([...w]), sets: Object.freeze(sets), thresholds: Object.freeze(thresholds),
    indexBits: sets.length.toString(2).length,
  });
}

/** One device's client for one Hadamard-sampling collection. */
export class HadamardDeviceClient extends WholeReportClient<HadamardSpec, HadamardSlots> {
  /**
   * A client for the collection whose client config (parsed JSON) is `config`, restored with `rateState`
   * (what `rateState()` gave before; absent: none), as {@link createClient} says.
   */
  static async create(config: unknown, secret: Secret, coins: CoinSource = new SystemCoins(),
                      rateState?: unknown): Promise<HadamardDeviceClient> {
    return createClient(parseHadamardSpec, (...a) => new HadamardDeviceClient(...a), config, secret, coins, rateState);
  }

  /** Per slot, the index coin and the parity coin. */
  protected get nCoins(): number {
    return 2 * this.spec.slots;
  }

  /** Memoized: per slot, one fresh coin (keeps the permanent parity or flips it). */
  protected get nFresh(): number {
    return this.spec.slots;
  }

  /** Per slot, the index in `B` bits and the parity bit. */
  protected get reportBits(): number {
    return this.spec.slots * (this.spec.indexBits + 1);
  }

  /** Steps 4 and 5: per slot, the coefficient and its parity, sent or complemented, packed. */
  protected randomize(encoded: readonly number[], coin: (k: number) => Uint8Array,
                      fresh: ((k: number) => Uint8Array) | null, out: BitWriter): HadamardSlots {
    const spec = this.spec;
    const indices: number[] = [];
    const parities: number[] = [];
    const held: number[] = [];
    const first = fresh === null ? spec.keep : spec.permanentKeep!;
    for (let s = 0; s < spec.slots; s++) {
      const u = coinValue(coin(2 * s));
      const a = spec.thresholds.findIndex((t) => u < t) + 1;
      const parity = spec.sets[a - 1]!.reduce((sum, i) => sum + encoded[i]!, 0) & 1;
      let sent = decide(coin(2 * s + 1), first) ? parity : 1 - parity;
      if (fresh !== null) { // section 13: the permanent parity, kept at keep by the slot's fresh coin
        held.push(sent);
        sent = decide(fresh(s), spec.keep) ? sent : 1 - sent;
      }
      indices.push(a);
      parities.push(sent);
      out.put(a, spec.indexBits);
      out.put(sent, 1);
    }
    return fresh === null ? { indices, parities } : { indices, parities, permanentParities: held };
  }
}
