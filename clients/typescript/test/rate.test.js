// The declared rate in the TypeScript client (docs/client.md section 3, "The declared rate"), beyond the
// shared vectors: reports made concurrently are counted in the order they were asked for, the rate state
// survives JSON (what an app persists), and the object rateState() returns is a copy.
import assert from "node:assert/strict";
import { test } from "node:test";

import { DeviceClient, HmacDrbg, MS_PER_DAY, Refusal } from "../dist/index.js";

const CONFIG = {
  collection: "c", features: [{ name: "a", type: "boolean" }], window: { type: "fixed", size_seconds: 3600 },
  channels: [{ p: 0.5, q: 0.75, permanent: { p: 0.25, q: 0.75 } }], token: true, reports_per_day: 2,
};
const DAY = 20454 * MS_PER_DAY;
const secret = new Uint8Array(32);

test("concurrent reports are counted in the order they were made: the day's third is refused", async () => {
  const client = await DeviceClient.create(CONFIG, secret, new HmacDrbg(new Uint8Array(32)));
  const settled = await Promise.allSettled([0, 1, 2, 3].map((k) => client.report({ a: k % 2 === 0 }, DAY + k)));
  assert.deepEqual(settled.map((s) => s.status), ["fulfilled", "fulfilled", "rejected", "rejected"]);
  for (const s of settled.slice(2)) assert.ok(s.reason instanceof Refusal && s.reason.code === "rate_exceeded");
  assert.deepEqual(client.rateState(), { 20454: 2 });
});

test("the rate state survives JSON, and rateState() is a copy", async () => {
  const first = await DeviceClient.create(CONFIG, secret, new HmacDrbg(new Uint8Array(32)));
  await first.report({ a: true }, DAY + MS_PER_DAY - 1);
  const text = JSON.stringify(first.rateState());
  assert.equal(text, '{"20454":1}');
  const copy = first.rateState();
  copy["20454"] = 0;
  assert.deepEqual(first.rateState(), { 20454: 1 });
  const again = await DeviceClient.create(CONFIG, secret, undefined, JSON.parse(text));
  await again.report({ a: true }, DAY);
  await assert.rejects(again.report({ a: false }, DAY + 5), (err) => err instanceof Refusal && err.code === "rate_exceeded");
  await assert.rejects(DeviceClient.create(CONFIG, secret, undefined, new Map([["20454", 1]])),
    (err) => err instanceof Refusal && err.code === "bad_state");
});
