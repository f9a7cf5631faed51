// The subset-randomized-response client (docs/client.md, section 12) against clients/test-vectors/subset.json,
// which the Python reference and the JVM client read too: for every positive vector the exact coins, true
// bits, chosen positions, keep decision, sent pattern, packed bits and Avro bytes; for every negative
// vector the same refusal code. Then its draws against the mechanism, by chi-square at the suite's ALPHA.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";

import { HmacDrbg, SubsetDeviceClient } from "../dist/index.js";
import { ALPHA, chiSquarePValue } from "./chi2.js";
import { replayVectors } from "./whole-report.js";

replayVectors("subset", SubsetDeviceClient, ["subset", "kept", "pattern"],
              ["permanent_pattern", "permanentPattern"]);

// 5 answers, width 3, keep 0.3: over 8,000 reports of devices whose answers cycle through all 32 patterns,
// (subset, sent pattern XOR true pattern) follows the mechanism: the subset uniform over the C(5, 3) = 10,
// the true pattern sent with probability keep, each of the 7 others with (1 - keep) / 7.
test("subset draws follow the mechanism: a uniform subset, its pattern by k-ary randomized response (chi-square)", async () => {
  const d = 5;
  const config = {
    collection: "s", window: { type: "global" },
    features: Array.from({ length: d }, (_, i) => ({ name: `q${i}`, type: "boolean" })),
    subset: { max_order: 2, width: 3, keep: 0.3 },
  };
  const sha256 = (text) => new Uint8Array(createHash("sha256").update(text).digest());
  const client = await SubsetDeviceClient.create(config, new Uint8Array(32), new HmacDrbg(sha256("subset chi-square")));
  const { width: s, keep } = config.subset;
  const n = 8000;
  const counts = Array.from({ length: 1 << d }, () => new Array(1 << s).fill(0)); // [subset mask][sent XOR true]
  for (let r = 0; r < n; r++) {
    const x = r % (1 << d);
    const values = Object.fromEntries(config.features.map((f, i) => [f.name, ((x >> i) & 1) === 1]));
    const { trace } = await client.reportWithTrace(values, 0);
    let mask = 0;
    let flipped = 0;
    trace.subset.forEach((i, j) => {
      mask |= 1 << i;
      flipped |= (trace.pattern[j] ^ ((x >> i) & 1)) << j;
    });
    counts[mask][flipped] += 1;
  }
  const width = (mask) => [...mask.toString(2)].filter((b) => b === "1").length;
  const masks = counts.map((_, mask) => mask).filter((mask) => width(mask) === s);
  assert.equal(masks.length, 10);
  // no report outside the subsets of s bits
  assert.equal(counts.reduce((sum, row, mask) => sum + (width(mask) === s ? 0 : row.reduce((a, b) => a + b, 0)), 0), 0);
  // one row of all subset-by-flip cells, its total fixed: 80 - 1 degrees of freedom
  const observed = [masks.flatMap((mask) => counts[mask])];
  const expected = [masks.flatMap(() => counts[0].map((_, f) => (n / masks.length) * (f === 0 ? keep : (1 - keep) / ((1 << s) - 1))))];
  const p = chiSquarePValue(observed, expected);
  assert.ok(p > ALPHA, `p = ${p}: observed ${JSON.stringify(observed)}, expected ${JSON.stringify(expected)}`);
});
