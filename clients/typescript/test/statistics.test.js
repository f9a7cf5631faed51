// The client's randomizer, statistically (as tests/ldp/test_client.py checks the Python reference):
// over 4,000 devices (per-device secrets, seeded coins) its transition frequencies (true bit ->
// noisy bit) follow the effective channel the job inverts, and two reports of one device agree as
// the memoized law says (a shared permanent response), not as independent reports would. Each is one
// chi-square test at the suite's false-alarm rate ALPHA = 1e-6 (tests/stats.py); seeded, so a run
// gives the same verdict every time.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { before, test } from "node:test";

import { DeviceClient, HmacDrbg } from "../dist/index.js";
import { ALPHA, chiSquarePValue } from "./chi2.js";

const RAPPOR = { p: 0.5, q: 0.75, permanent: { p: 0.25, q: 0.75 } };
const CONFIG = {
  collection: "c", window: { type: "fixed", size_seconds: 3600 }, token: true,
  features: [{ name: "a", type: "boolean" }, { name: "os", type: "categorical", values: ["x", "y", "z"] },
    { name: "m", type: "numeric", low: 0, high: 10 }, { name: "plain", type: "boolean" }],
  channels: [RAPPOR, RAPPOR, RAPPOR, { p: 0.2, q: 0.6, permanent: { p: 0.4, q: 0.95 } },
    { p: 0.1, q: 0.7, permanent: { p: 0.2, q: 0.9 } }, { p: 0.2, q: 0.6 }],
};
const N_DEVICES = 4000;
const M_BIT = 4;

const sha256 = (bytes) => new Uint8Array(createHash("sha256").update(bytes).digest());
const deviceValues = (i) => ({ a: i % 2 === 0, os: "xyz"[i % 3], m: i % 4 < 2 ? 2.5 : 10, plain: i % 5 < 2 });
const effective = (c) => (c.permanent
  ? { p: c.p + c.permanent.p * (c.q - c.p), q: c.p + c.permanent.q * (c.q - c.p) } : { p: c.p, q: c.q });

let sample; // per device: its true bits and its two reports' noisy bits

before(async () => {
  const drbg = new HmacDrbg(sha256(new TextEncoder().encode("chi-square")));
  sample = [];
  for (let i = 0; i < N_DEVICES; i++) {
    const id = new Uint8Array(4);
    new DataView(id.buffer).setUint32(0, i, false);
    const client = await DeviceClient.create(CONFIG, sha256(id), drbg);
    const reports = [];
    for (const t of [0, 1000]) reports.push(await client.reportWithTrace(deviceValues(i), t));
    const unpack = ({ record }) => Array.from({ length: 6 }, (_, b) => (record.bits[b >> 3] >> (b & 7)) & 1);
    sample.push({ i, encoded: reports[0].trace.encoded, noisy: reports.map(unpack) });
  }
});

/** [bit, u, devices]: the devices grouped by each bit's input (u = P(true bit 1); m's bit by value). */
function groups() {
  const out = [];
  for (let bit = 0; bit < 6; bit++) {
    if (bit === M_BIT) {
      for (const [v, u] of [[2.5, 0.25], [10, 1]]) out.push([bit, u, sample.filter((d) => deviceValues(d.i).m === v)]);
    } else {
      for (const x of [0, 1]) out.push([bit, x, sample.filter((d) => d.encoded[bit] === x)]);
    }
  }
  return out;
}

test("transition frequencies follow the effective channel (chi-square, ALPHA = 1e-6)", () => {
  const observed = [];
  const expected = [];
  for (const [bit, u, devices] of groups()) {
    const eff = effective(CONFIG.channels[bit]);
    const p1 = u * eff.q + (1 - u) * eff.p;
    const ones = devices.filter((d) => d.noisy[0][bit] === 1).length;
    assert.ok(devices.length > 500, `group of bit ${bit} at ${u} has ${devices.length} devices`);
    observed.push([ones, devices.length - ones]);
    expected.push([devices.length * p1, devices.length * (1 - p1)]);
  }
  const p = chiSquarePValue(observed, expected);
  assert.ok(p > ALPHA, `p = ${p}: observed ${JSON.stringify(observed)}, expected ${JSON.stringify(expected)}`);
});

test("two reports of one device agree as the memoized law says (chi-square, ALPHA = 1e-6)", () => {
  const observed = [];
  const expected = [];
  for (const [bit, u, devices] of groups()) {
    const c = CONFIG.channels[bit];
    // the latent states [weight, P(noisy 1)]: the permanent bit when the bit memoizes, else the true bit
    const states = c.permanent
      ? [[u * c.permanent.q, c.q], [u * (1 - c.permanent.q), c.p], [(1 - u) * c.permanent.p, c.q],
        [(1 - u) * (1 - c.permanent.p), c.p]]
      : [[u, c.q], [1 - u, c.p]];
    const agree = c.permanent
      ? states.reduce((s, [w, t]) => s + w * (t * t + (1 - t) * (1 - t)), 0)
      : (() => { const one = states.reduce((s, [w, t]) => s + w * t, 0); return one ** 2 + (1 - one) ** 2; })();
    const seen = devices.filter((d) => d.noisy[0][bit] === d.noisy[1][bit]).length;
    observed.push([seen, devices.length - seen]);
    expected.push([devices.length * agree, devices.length * (1 - agree)]);
  }
  const p = chiSquarePValue(observed, expected);
  assert.ok(p > ALPHA, `p = ${p}: observed ${JSON.stringify(observed)}, expected ${JSON.stringify(expected)}`);
});
