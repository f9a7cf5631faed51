/**
 * The report bytes (docs/client.md, section 3): the Avro binary encoding of a `NoisyReport`
 * (schemas/noisy_report.avsc), written by hand because the specification pins every byte and a
 * general Avro library would be most of the package's size for five fields.
 */
const utf8 = new TextEncoder();

/** One report: the record the job reads. `dimensions` are sorted by their keys' UTF-8 bytes. */
export interface NoisyReport {
  readonly collection: string;
  readonly event_time: number;
  readonly bits: Uint8Array;
  readonly dimensions: ReadonlyArray<readonly [string, string]>;
  readonly client: string | null;
}

/** Orders byte strings lexicographically (unsigned), a shorter prefix first. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return a[i]! - b[i]!;
  }
  return a.length - b.length;
}

/** Dimensions in the order the report holds them: sorted by their keys' UTF-8 bytes (not UTF-16 units). */
export function sortDimensions(dimensions: Iterable<readonly [string, string]>): [string, string][] {
  return [...dimensions].map(([k, v]) => [utf8.encode(k), k, v] as const)
    .sort((a, b) => compareBytes(a[0], b[0])).map(([, k, v]) => [k, v]);
}

class Writer {
  private chunks: number[] = [];

  /** A non-negative long as Avro's zigzag varint (2n, 7 bits at a time, low first). */
  long(n: number): void {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`a long here must be an integer >= 0, got ${n}`);
    let z = 2 * n;
    while (z >= 0x80) {
      this.chunks.push((z % 0x80) | 0x80);
      z = Math.floor(z / 0x80);
    }
    this.chunks.push(z);
  }

  bytes(b: Uint8Array): void {
    this.long(b.length);
    for (const x of b) this.chunks.push(x);
  }

  string(s: string): void {
    this.bytes(utf8.encode(s));
  }

  done(): Uint8Array {
    return Uint8Array.from(this.chunks);
  }
}

/** The Avro binary encoding of a report: the bytes a device sends. */
export function encodeNoisyReport(record: NoisyReport): Uint8Array {
  const w = new Writer();
  w.string(record.collection);
  w.long(record.event_time);
  w.bytes(record.bits);
  const dims = sortDimensions(record.dimensions);
  if (dims.length > 0) {
    w.long(dims.length);
    for (const [k, v] of dims) {
      w.string(k);
      w.string(v);
    }
  }
  w.long(0);
  if (record.client === null) {
    w.long(0);
  } else {
    w.long(1);
    w.string(record.client);
  }
  return w.done();
}
