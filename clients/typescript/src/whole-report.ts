/**
 * What the client configs and encoders of the kinds that randomize a whole report share (`hadamard.ts`,
 * `subset.ts`: docs/client.md, sections 11 and 12): boolean features only (at most 62, the job's 64-bit
 * words), integers written as integers, probabilities in [0, 1], and the true bits of a report. Config
 * failures are `bad_config`, with the rules of the Python references.
 */
import { checkValues, type FeatureValues } from "./client.js";
import { bad, keys, text, type Feature } from "./config.js";
import { shown } from "./refusal.js";

/** The most features a whole-report collection may have (the job keeps a report's bits in 64-bit words). */
export const MAX_WHOLE_REPORT_FEATURES = 62;

/** The boolean features of a whole-report config: a non-empty list, names unique, at most 62. */
export function booleanFeatures(feats: unknown): Feature[] {
  if (!Array.isArray(feats) || feats.length === 0) throw bad(`features must be a non-empty list, got features=${shown(feats)}`);
  const features: Feature[] = feats.map((f, i) => {
    const where = `features[${i}]`;
    const entry = keys(f, where, ["name", "type"]);
    if (entry.type !== "boolean") throw bad(`${where} must be a boolean feature, got type=${shown(entry.type)}`);
    return { name: text(entry.name, `${where}.name`), type: "boolean" };
  });
  const names = features.map((f) => f.name);
  if (new Set(names).size !== names.length) throw bad(`feature names must be unique, got ${shown(names)}`);
  if (features.length > MAX_WHOLE_REPORT_FEATURES) {
    throw bad(`features must list 1 to ${MAX_WHOLE_REPORT_FEATURES} boolean features, got ${features.length}`);
  }
  return features;
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

/** The true bits of a report of boolean features, after the per-bit client's checks of the values. */
export function booleanBits(features: readonly Feature[], values: FeatureValues): number[] {
  const given = checkValues(features, values);
  return features.map((f) => (given.get(f.name) ? 1 : 0));
}
