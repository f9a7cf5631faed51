// The Hadamard-sampling client (docs/client.md, section 11) against clients/test-vectors/hadamard.json,
// which the Python reference and the JVM client read too: for every positive vector the exact coins,
// true bits, coefficient indices, sent parities, packed bits and Avro bytes; for every negative vector
// the same refusal code. Then its draws against the mechanism, by chi-square at the suite's ALPHA.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";

import { HmacDrbg, HadamardDeviceClient } from "../dist/index.js";
import { ALPHA, chiSquarePValue } from "./chi2.js";
import { replayVectors } from "./whole-report.js";

replayVectors("hadamard", HadamardDeviceClient, ["indices", "parities"],
              ["permanent_parities", "permanentParities"]);

// 4 answers, 2-way coefficients at unequal weights, two slots at keep 0.8: over 8,000 reports of
// devices whose answers cycle through all 16 patterns, (coefficient, sent parity) per slot follows the
// mechanism: P(a) = its weight, P(sent = true parity | a) = keep.
test("draws follow the mechanism: coefficient by weight, parity kept with probability keep (chi-square)", async () => {
  const d = 4;
  const config = {
    collection: "h", window: { type: "global" },
    features: Array.from({ length: d }, (_, i) => ({ name: `q${i}`, type: "boolean" })),
    hadamard: { max_order: 2, slots: 2, keep: 0.8, weights: [0.16, 0.06] },
  };
  const sha256 = (text) => new Uint8Array(createHash("sha256").update(text).digest());
  const client = await HadamardDeviceClient.create(config, new Uint8Array(32), new HmacDrbg(sha256("hadamard chi-square")));
  const sets = client.spec.sets;
  const weight = sets.map((s) => config.hadamard.weights[s.length - 1]);
  const n = 8000;
  const counts = sets.map(() => [0, 0]); // per coefficient: [sent the true parity, sent its complement]
  for (let r = 0; r < n; r++) {
    const x = r % 16;
    const values = Object.fromEntries(config.features.map((f, i) => [f.name, ((x >> i) & 1) === 1]));
    const { trace } = await client.reportWithTrace(values, 0);
    trace.indices.forEach((a, s) => {
      const truth = sets[a - 1].reduce((sum, i) => sum + ((x >> i) & 1), 0) & 1;
      counts[a - 1][trace.parities[s] === truth ? 0 : 1] += 1;
    });
  }
  const slots = n * config.hadamard.slots;
  const keep = config.hadamard.keep;
  // one row of all coefficient-by-outcome cells, its total fixed: 2T - 1 degrees of freedom
  const observed = [counts.flat()];
  const expected = [weight.flatMap((w) => [slots * w * keep, slots * w * (1 - keep)])];
  const p = chiSquarePValue(observed, expected);
  assert.ok(p > ALPHA, `p = ${p}: observed ${JSON.stringify(observed)}, expected ${JSON.stringify(expected)}`);
});
