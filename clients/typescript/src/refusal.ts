/**
 * Refusals: the codes are the contract every client shares (docs/client.md, section 3); messages are
 * free. A refused report draws no coins.
 */
export const BAD_CONFIG = "bad_config";
export const BAD_SECRET = "bad_secret";
export const MISSING_FEATURE = "missing_feature";
export const UNKNOWN_FEATURE = "unknown_feature";
export const BAD_VALUE = "bad_value";
export const OUT_OF_RANGE = "out_of_range";
export const BAD_EVENT_TIME = "bad_event_time";
export const BAD_DIMENSIONS = "bad_dimensions";
/** A report past the collection's `reports_per_day` on its event's UTC day. */
export const RATE_EXCEEDED = "rate_exceeded";
/** A rate state the app restores that is not one (`DeviceClient.rateState()`). */
export const BAD_STATE = "bad_state";

export const CODES = [BAD_CONFIG, BAD_SECRET, MISSING_FEATURE, UNKNOWN_FEATURE, BAD_VALUE, OUT_OF_RANGE,
  BAD_EVENT_TIME, BAD_DIMENSIONS, RATE_EXCEEDED, BAD_STATE] as const;
export type RefusalCode = (typeof CODES)[number];

/** A client's refusal: `code` is one of {@link CODES}; the message names the field (never a secret). */
export class Refusal extends Error {
  readonly code: RefusalCode;

  constructor(code: RefusalCode, message: string) {
    super(`${code}: ${message}`);
    this.name = "Refusal";
    this.code = code;
  }
}

/** A value shown in a message, short (a refusal message names what was wrong, not a whole input). */
export function shown(value: unknown): string {
  let text: string;
  try {
    text = typeof value === "string" ? JSON.stringify(value) : String(JSON.stringify(value) ?? value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** A plain object (not null, not an array, not a Map). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Map);
}

/** A string that encodes to UTF-8 without loss (no unpaired surrogate). */
export function wellFormed(value: string): boolean {
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(value);
}
