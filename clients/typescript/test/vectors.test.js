// The TypeScript client against the shared test vectors (clients/test-vectors/*.json), which the
// Python reference and the JVM client read too: NIST's HMAC_DRBG answers, the coin rules, and for
// every positive vector the exact coins, true bits, permanent bits, packed bits, token and Avro bytes;
// for every negative vector the same refusal code.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  CODES, DeviceClient, HmacDrbg, Refusal, decide, encodeNoisyReport, frame, secretKey, units,
} from "../dist/index.js";

const load = (name) => JSON.parse(readFileSync(new URL(`../../test-vectors/${name}`, import.meta.url), "utf8"));
const COINS = load("coins.json");
const REPORTS = load("reports.json");
const REFUSALS = load("refusals.json");

const fromHex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

test("HMAC_DRBG gives NIST's known answers and the vectors' stream, one Generate per request", async () => {
  for (const item of COINS.hmac_drbg_nist) {
    const drbg = new HmacDrbg(fromHex(item.entropy), fromHex(item.nonce), fromHex(item.personalization));
    let last;
    for (const n of item.requests) last = await drbg.generate(n);
    assert.equal(toHex(last), item.last);
  }
  const ours = COINS.hmac_drbg;
  const drbg = new HmacDrbg(fromHex(ours.entropy));
  const out = [];
  for (const n of ours.requests) out.push(toHex(await drbg.generate(n)));
  assert.deepEqual(out, ours.outputs);
  // 8 bytes in one request are not two requests of 4: the state is updated after every request
  assert.notEqual(toHex(await new HmacDrbg(fromHex(ours.entropy)).generate(8)), ours.outputs[0] + ours.outputs[1]);
});

test("concurrent requests are served in the order they were made", async () => {
  const ours = COINS.hmac_drbg;
  const drbg = new HmacDrbg(fromHex(ours.entropy));
  const out = await Promise.all(ours.requests.map((n) => drbg.generate(n)));
  assert.deepEqual(out.map(toHex), ours.outputs);
});

test("units, decisions and frames follow the rule", () => {
  assert.ok(COINS.units.length >= 16);
  for (const item of COINS.units) assert.equal(units(item.probability), item.units, `units(${item.probability})`);
  for (const item of COINS.decisions) {
    assert.equal(decide(fromHex(item.coin), item.probability), item.decision, `${item.coin} at ${item.probability}`);
  }
  for (const item of COINS.frames) assert.equal(toHex(frame(...item.parts)), item.hex);
  assert.throws(() => units(1.5), /probability must be a number in \[0, 1\]/);
});

for (const kase of REPORTS.cases) {
  test(`positive vector: ${kase.name}`, async () => {
    // a case with a rate state starts from it (the app restores it) and ends with rate_state_after
    const client = await DeviceClient.create(kase.config, fromHex(kase.secret), new HmacDrbg(fromHex(kase.seed)),
      kase.rate_state);
    assert.ok(kase.reports.length >= 2);
    for (const item of kase.reports) {
      const expect = item.expect;
      const made = client.reportWithTrace(item.values, item.event_ms, item.dimensions);
      if ("refusal" in expect) {
        await assert.rejects(made, (err) => err instanceof Refusal && err.code === expect.refusal);
        continue;
      }
      const { record, trace } = await made;
      assert.deepEqual({
        coins: toHex(trace.coins), encoded: [...trace.encoded], permanent: [...trace.permanent],
        bits: toHex(record.bits), client: record.client, avro: toHex(encodeNoisyReport(record)),
      }, expect);
    }
    assert.equal("rate_state" in kase, "rate_state_after" in kase);
    if ("rate_state_after" in kase) {
      assert.deepEqual(client.rateState(), kase.rate_state_after);
      // what the app persists (as JSON) restores the same state
      const again = await DeviceClient.create(kase.config, fromHex(kase.secret), undefined,
        JSON.parse(JSON.stringify(client.rateState())));
      assert.deepEqual(again.rateState(), client.rateState());
    }
  });
}

test("a non-extractable CryptoKey secret makes the same reports as its bytes", async () => {
  const kase = REPORTS.cases.find((c) => c.config.token === true);
  const key = await secretKey(fromHex(kase.secret));
  assert.equal(key.extractable, false);
  await assert.rejects(crypto.subtle.exportKey("raw", key));
  const client = await DeviceClient.create(kase.config, key, new HmacDrbg(fromHex(kase.seed)));
  const got = [];
  for (const item of kase.reports) got.push(toHex(await client.reportBytes(item.values, item.event_ms, item.dimensions)));
  assert.deepEqual(got, kase.reports.map((item) => item.expect.avro));
});

for (const kase of REFUSALS.cases) {
  test(`negative vector: ${kase.name} -> ${kase.refusal}`, async () => {
    assert.ok(CODES.includes(kase.refusal));
    const attempt = async () => {
      const client = await DeviceClient.create(kase.config, fromHex(kase.secret), new HmacDrbg(new Uint8Array(32)),
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
