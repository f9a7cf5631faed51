// How a device uses the client: coins from crypto.getRandomValues (one request per report, none for
// a refused report), a new secret as a non-extractable key, concurrent reports in call order, and
// refusal messages that never carry a device's feature values.
import assert from "node:assert/strict";
import { test } from "node:test";

import { DeviceClient, HmacDrbg, Refusal, deviceToken, newSecretKey, secretKey } from "../dist/index.js";

const CONFIG = {
  collection: "app_usage", window: { type: "fixed", size_seconds: 3600 }, token: true,
  features: [{ name: "dark_mode", type: "boolean" }, { name: "os", type: "categorical", values: ["mac", "win", "linux"] },
    { name: "minutes", type: "numeric", low: 0, high: 120 }],
  channels: [{ p: 0.5, q: 0.75, permanent: { p: 0.25, q: 0.75 } }, { p: 0.25, q: 0.75 }, { p: 0.25, q: 0.75 },
    { p: 0.25, q: 0.75 }, { p: 0.2, q: 0.6 }],
};
const VALUES = { dark_mode: true, os: "win", minutes: 37.5 };
const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");

test("the production client draws every coin from crypto.getRandomValues, one request per report", async (t) => {
  const requests = [];
  const original = crypto.getRandomValues.bind(crypto);
  t.mock.method(crypto, "getRandomValues", (array) => {
    requests.push(array.length);
    return original(array);
  });
  const secret = await newSecretKey();
  assert.equal(secret.extractable, false);
  await assert.rejects(crypto.subtle.exportKey("raw", secret));
  const client = await DeviceClient.create(CONFIG, secret);
  requests.length = 0; // (key generation may use it too)
  const reports = [];
  for (let i = 0; i < 64; i++) reports.push(await client.report(VALUES, 5000 + i));
  // 4 bytes for the numeric feature that does not memoize, 4 per bit
  assert.deepEqual(requests, Array(64).fill(4 * (1 + 5)));
  assert.ok(new Set(reports.map((r) => toHex(r.bits))).size > 1, "fresh coins every report");
  assert.deepEqual(new Set(reports.map((r) => r.client)), new Set([await deviceToken(secret, "app_usage", 0)]));
  await assert.rejects(client.report({ ...VALUES, os: "bsd" }, 5000), Refusal);
  assert.equal(requests.length, 64, "a refused report draws no coins");
});

test("concurrent reports draw in the order they were made", async () => {
  const seed = new Uint8Array(32).fill(7);
  const secret = new Uint8Array(32).fill(9);
  const times = Array.from({ length: 20 }, (_, i) => 1_767_225_600_000 + i * 600_000);
  const one = await DeviceClient.create(CONFIG, secret, new HmacDrbg(seed));
  const sequential = [];
  for (const t of times) sequential.push(toHex(await one.reportBytes(VALUES, t)));
  const other = await DeviceClient.create(CONFIG, secret, new HmacDrbg(seed));
  const concurrent = await Promise.all(times.map((t) => other.reportBytes(VALUES, t)));
  assert.deepEqual(concurrent.map(toHex), sequential);
  assert.ok(new Set(sequential).size > 10);
});

test("refusal messages name the feature, never its value", async () => {
  const client = await DeviceClient.create(CONFIG, new Uint8Array(32), new HmacDrbg(new Uint8Array(32)));
  for (const [values, code] of [[{ ...VALUES, os: "secret-os-name" }, "bad_value"],
    [{ ...VALUES, dark_mode: "secret-flag" }, "bad_value"], [{ ...VALUES, minutes: 123456.789 }, "out_of_range"],
    [{ ...VALUES, minutes: "98765" }, "bad_value"]]) {
    await assert.rejects(client.report(values, 0), (err) => {
      assert.equal(err.code, code);
      assert.ok(!/secret-os-name|secret-flag|123456|98765/.test(err.message), err.message);
      assert.match(err.message, /feature "(os|dark_mode|minutes)"/);
      return true;
    });
  }
});

test("secrets: 32 bytes or an HMAC-SHA256 signing key of 256 bits, else bad_secret", async () => {
  for (const bad of [new Uint8Array(16), new Uint8Array(64), "00".repeat(32), null,
    await crypto.subtle.generateKey({ name: "HMAC", hash: "SHA-256", length: 128 }, false, ["sign"]),
    await crypto.subtle.generateKey({ name: "HMAC", hash: "SHA-512", length: 256 }, false, ["sign"])]) {
    await assert.rejects(secretKey(bad), (err) => err instanceof Refusal && err.code === "bad_secret");
  }
  const key = await secretKey(new Uint8Array(32).fill(1));
  assert.equal(key.extractable, false);
});
