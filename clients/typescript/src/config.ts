/**
 * The client config of a collection (docs/client.md, section 1): its name, features and bit layout,
 * window, per-bit channels (instantaneous, and permanent for a bit that memoizes), whether reports
 * carry the device token and the declared rate `reports_per_day`. Anything invalid is a {@link Refusal} `bad_config`, with the rules of the
 * Python reference (`ldp_marginals.ldp.client.ClientSpec.from_json`).
 */
import { COIN_BYTES, MAX_REQUEST_BYTES } from "./coins.js";
import { BAD_CONFIG, Refusal, isObject, shown, wellFormed } from "./refusal.js";

export interface Channel {
  readonly p: number;
  readonly q: number;
}

export type Feature =
  | { readonly name: string; readonly type: "boolean" }
  | { readonly name: string; readonly type: "categorical"; readonly values: readonly string[] }
  | { readonly name: string; readonly type: "numeric"; readonly low: number; readonly high: number };

export interface Window {
  readonly type: "fixed" | "sliding" | "global";
  /** A slice's length in ms: the window when fixed, the period when sliding, 0 for the global window. */
  readonly periodMs: number;
}

export interface ClientSpec {
  readonly collection: string;
  readonly features: readonly Feature[];
  /** Per feature (layout order), the index of its first bit. */
  readonly firstBit: readonly number[];
  readonly nBits: number;
  readonly window: Window;
  readonly instantaneous: readonly Channel[];
  /** Per bit, the permanent channel, or null for a bit that does not memoize. */
  readonly permanent: readonly (Channel | null)[];
  readonly token: boolean;
  /** The declared rate: at most this many reports a UTC day of their event time; null: no limit. */
  readonly reportsPerDay: number | null;
}

/** The largest `reports_per_day` (and rate-state count): a Java int, a JavaScript safe integer. */
export const MAX_REPORTS_PER_DAY = 2147483647;

export function bad(message: string): Refusal {
  return new Refusal(BAD_CONFIG, message);
}

export function keys(spec: unknown, where: string, required: readonly string[], optional: readonly string[] = []) {
  if (!isObject(spec)) throw bad(`${where} must be an object, got ${where}=${shown(spec)}`);
  const have = Object.keys(spec);
  const unknown = have.filter((k) => !required.includes(k) && !optional.includes(k));
  const missing = required.filter((k) => !Object.hasOwn(spec, k));
  if (unknown.length > 0 || missing.length > 0) {
    throw bad(`${where} must have keys ${shown(required)} (optional ${shown(optional)}), got keys=${shown(have.sort())}`);
  }
  return spec;
}

function isNumber(v: unknown): v is number {
  return typeof v === "number";
}

function probability(v: unknown, name: string): number {
  if (!isNumber(v) || !(v >= 0 && v <= 1)) throw bad(`${name} must be a number in [0, 1], got ${name}=${shown(v)}`);
  return v;
}

function channel(spec: unknown, where: string): Channel {
  const c = keys(spec, where, ["p", "q"]);
  const p = probability(c.p, `${where}.p`);
  const q = probability(c.q, `${where}.q`);
  if (!(p < q)) throw bad(`${where}: q must be in (p, 1], got p=${p}, q=${q}`);
  return { p, q };
}

export function text(v: unknown, name: string): string {
  if (typeof v !== "string" || v === "" || !wellFormed(v)) {
    throw bad(`${name} must be a non-empty string of valid Unicode, got ${name}=${shown(v)}`);
  }
  return v;
}

export function feature(spec: unknown, i: number): Feature {
  const where = `features[${i}]`;
  const type = isObject(spec) ? spec.type : undefined;
  const extra = type === "categorical" ? ["values"] : type === "numeric" ? ["low", "high"] : [];
  const f = keys(spec, where, ["name", "type", ...extra]);
  const name = text(f.name, `${where}.name`);
  if (name.includes("=")) throw bad(`${where}.name must not contain '=', got name=${shown(name)}`);
  if (type === "boolean") return { name, type };
  if (type === "categorical") {
    const values = f.values;
    if (!Array.isArray(values)) throw bad(`${where}.values must be a list, got values=${shown(values)}`);
    if (values.length < 2) throw bad(`${where}.values must list at least 2 values, got values=${shown(values)}`);
    values.forEach((v, j) => text(v, `${where}.values[${j}]`));
    if (new Set(values).size !== values.length) throw bad(`${where}.values must be distinct, got values=${shown(values)}`);
    return { name, type, values: Object.freeze([...values] as string[]) };
  }
  if (type === "numeric") {
    for (const end of ["low", "high"] as const) {
      const v = f[end];
      if (!isNumber(v) || !Number.isFinite(v)) throw bad(`${where}.${end} must be a finite number, got ${end}=${shown(v)}`);
    }
    const low = f.low as number;
    const high = f.high as number;
    if (!(low < high)) throw bad(`${where} needs low < high, got low=${low}, high=${high}`);
    return { name, type, low, high };
  }
  throw bad(`${where}.type must be one of ["boolean","categorical","numeric"], got type=${shown(type)}`);
}

function seconds(spec: Record<string, unknown>, key: string): number {
  const v = spec[key];
  if (!isNumber(v) || !Number.isFinite(v) || !(v >= 1)) {
    throw bad(`window.${key} must be a number >= 1 second, got ${key}=${shown(v)}`);
  }
  const ms = v * 1000;
  if (Math.abs(ms - Math.round(ms)) > 1e-6) {
    throw bad(`window.${key} must be a whole number of milliseconds, got ${key}=${shown(v)}`);
  }
  return Math.round(ms);
}

/** A window (`fixed`, `sliding` or `global`); a {@link Refusal} `bad_config` otherwise. */
export function window(spec: unknown): Window {
  const type = isObject(spec) ? spec.type : undefined;
  if (type === "global") {
    keys(spec, "window", ["type"]);
    return { type, periodMs: 0 };
  }
  if (type === "fixed") {
    return { type, periodMs: seconds(keys(spec, "window", ["type", "size_seconds"]), "size_seconds") };
  }
  if (type === "sliding") {
    const w = keys(spec, "window", ["type", "size_seconds", "period_seconds"]);
    const size = seconds(w, "size_seconds");
    const period = seconds(w, "period_seconds");
    const ratio = (w.size_seconds as number) / (w.period_seconds as number);
    if (period > size || Math.abs(ratio - Math.round(ratio)) > 1e-9) {
      throw bad(`window.size_seconds must be a whole multiple of period_seconds, got ` +
        `size_seconds=${shown(w.size_seconds)}, period_seconds=${shown(w.period_seconds)}`);
    }
    return { type, periodMs: period };
  }
  throw bad(`window.type must be one of ["fixed","sliding","global"], got window=${shown(spec)}`);
}

/** The spec of a collection from its JSON object (parsed); a {@link Refusal} `bad_config` otherwise. */
export function parseClientSpec(json: unknown): ClientSpec {
  const spec = keys(json, "config", ["collection", "features", "window", "channels"], ["token", "reports_per_day"]);
  const feats = spec.features;
  if (!Array.isArray(feats) || feats.length === 0) throw bad(`features must be a non-empty list, got features=${shown(feats)}`);
  const features = feats.map(feature);
  const names = features.map((f) => f.name);
  const dupes = names.filter((n, i) => names.indexOf(n) !== i);
  if (dupes.length > 0) throw bad(`feature names must be unique, got duplicates=${shown(dupes)}`);
  const firstBit: number[] = [];
  let nBits = 0;
  for (const f of features) {
    firstBit.push(nBits);
    nBits += f.type === "categorical" ? f.values.length : 1;
  }
  const win = window(spec.window);
  const chans = spec.channels;
  if (!Array.isArray(chans)) throw bad(`channels must be a list with one entry per bit, got channels=${shown(chans)}`);
  const instantaneous: Channel[] = [];
  const permanent: (Channel | null)[] = [];
  chans.forEach((c, i) => {
    const entry = keys(c, `channels[${i}]`, ["p", "q"], ["permanent"]);
    instantaneous.push(channel({ p: entry.p, q: entry.q }, `channels[${i}]`));
    permanent.push(Object.hasOwn(entry, "permanent") ? channel(entry.permanent, `channels[${i}].permanent`) : null);
  });
  const token = tokenOf(spec);
  if (instantaneous.length !== nBits) {
    throw bad(`channels must have one entry per bit (${nBits}), got ${instantaneous.length}`);
  }
  const reportsPerDay = reportsPerDayOf(spec);
  const collection = text(spec.collection, "collection");
  const fresh = features.filter((f, k) => f.type === "numeric" && permanent[firstBit[k]!] === null).length;
  if ((fresh + nBits) * COIN_BYTES > MAX_REQUEST_BYTES) {
    throw bad(`a report may draw at most ${MAX_REQUEST_BYTES / COIN_BYTES} coins, this layout draws ${fresh + nBits}`);
  }
  return Object.freeze({ collection, features: Object.freeze(features), firstBit: Object.freeze(firstBit), nBits,
    window: Object.freeze(win), instantaneous: Object.freeze(instantaneous), permanent: Object.freeze(permanent), token,
    reportsPerDay });
}

/** A config's optional `token` (every kind's): true or false; absent, false. */
export function tokenOf(spec: Record<string, unknown>): boolean {
  const token = Object.hasOwn(spec, "token") ? spec.token : false;
  if (typeof token !== "boolean") throw bad(`token must be true or false, got token=${shown(token)}`);
  return token;
}

/** A config's optional `reports_per_day` (every kind's); null when absent (no limit). */
export function reportsPerDayOf(spec: Record<string, unknown>): number | null {
  if (!Object.hasOwn(spec, "reports_per_day")) return null;
  // an integer (JavaScript cannot tell 2.0 from 2: both are 2, as docs/client.md section 11 allows)
  const r = spec.reports_per_day;
  if (typeof r !== "number" || !Number.isInteger(r) || r < 1 || r > MAX_REPORTS_PER_DAY) {
    throw bad(`reports_per_day must be an integer in [1, ${MAX_REPORTS_PER_DAY}], got reports_per_day=${shown(r)}`);
  }
  return r;
}
