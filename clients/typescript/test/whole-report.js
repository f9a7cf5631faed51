// What every whole-report kind's client test runs against its clients/test-vectors file (which the Python
// reference and the JVM client read too): for every positive vector the exact coins, true bits, the
// kind's choices (`chosen`, the trace's keys the kind adds), the device token, packed bits and Avro bytes, and
// the refusal of a report past the declared rate; for every
// negative vector the same refusal code; and no coin drawn by a refused report, a secret not of 32 bytes
// refused as bad_secret. A kind's test file adds its chi-square test of the mechanism.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { CODES, HmacDrbg, Refusal, encodeNoisyReport } from "../dist/index.js";

export const fromHex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
export const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

/**
 * Registers the vector tests of `kind` (`hadamard.json` ...) for `Client` (its static `create`); `permanent`:
 * [the vectors' name, the trace's key] of the kind's permanent choice in memoized cases.
 */
export function replayVectors(kind, Client, chosen, permanent) {
  const vectors = JSON.parse(readFileSync(new URL(`../../test-vectors/${kind}.json`, import.meta.url), "utf8"));

  for (const kase of vectors.cases) {
    test(`${kind} positive vector: ${kase.name}`, async () => {
      const client = await Client.create(kase.config, fromHex(kase.secret), new HmacDrbg(fromHex(kase.seed)));
      assert.ok(kase.reports.length >= 2);
      for (const item of kase.reports) {
        if (item.expect.refusal !== undefined) {   // past the declared rate: refused, drawing no coin
          await assert.rejects(client.reportWithTrace(item.values, item.event_ms, item.dimensions),
            (err) => err instanceof Refusal && err.code === item.expect.refusal);
          continue;
        }
        const { record, trace } = await client.reportWithTrace(item.values, item.event_ms, item.dimensions);
        assert.deepEqual({
          coins: toHex(trace.coins), encoded: [...trace.encoded], ...Object.fromEntries(chosen.map((k) => [k, copy(trace[k])])),
          // memoized (section 13): the permanent coins and the kind's permanent choice, under the vectors' names
          ...(trace.permanent ? { permanent_coins: toHex(trace.permanent), [permanent[0]]: copy(trace[permanent[1]]) } : {}),
          ...(record.client !== null ? { client: record.client } : {}),   // the device token (section 5)
          bits: toHex(record.bits), avro: toHex(encodeNoisyReport(record)),
        }, item.expect);
      }
      // the rate state the app persists (section 3): every report made counted on its UTC day, the refused one not
      if (kase.rate_state_after !== undefined) assert.deepEqual(client.rateState(), kase.rate_state_after);
    });
  }

  for (const kase of vectors.refusals) {
    test(`${kind} negative vector: ${kase.name} -> ${kase.refusal}`, async () => {
      assert.ok(CODES.includes(kase.refusal));
      const attempt = async () => {
        const client = await Client.create(kase.config, new Uint8Array(32), new HmacDrbg(new Uint8Array(32)),
                                           kase.rate_state);
        if (kase.input !== null) await client.report(kase.input.values, kase.input.event_ms, kase.input.dimensions);
      };
      await assert.rejects(attempt, (err) => {
        assert.ok(err instanceof Refusal, String(err));
        assert.equal(err.code, kase.refusal, err.message);
        return true;
      });
    });
  }

  test(`a refused ${kind} report draws no coin, and a secret not of 32 bytes is bad_secret`, async () => {
    const kase = vectors.cases[0];
    await assert.rejects(Client.create(kase.config, new Uint8Array(31)), (err) => err.code === "bad_secret");
    const client = await Client.create(kase.config, fromHex(kase.secret), new HmacDrbg(fromHex(kase.seed)));
    const first = kase.reports[0];
    await assert.rejects(client.report(first.values, -1, first.dimensions), (err) => err.code === "bad_event_time");
    const { trace } = await client.reportWithTrace(first.values, first.event_ms, first.dimensions);
    assert.equal(toHex(trace.coins), first.expect.coins);
  });
}

const copy = (v) => (Array.isArray(v) ? [...v] : v);
