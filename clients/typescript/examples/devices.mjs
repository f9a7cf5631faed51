// Simulated devices in Node, for a first chart of a collection before the app ships: each device makes its
// reports with this package's client from the JSON `ldp-marginals client-config` wrote (read unchanged) and
// POSTs them to `ldp-marginals collect` as examples/report.js does (the app's key, one Idempotency-Key per
// request, kept across its retries on 429, 503 or no answer). Needs dist/ (`npm ci && npm run build`, or
// `make clients-ts`). The README's quick start runs it; tests/cluster/test_team_path.py too.
//
//   node clients/typescript/examples/devices.mjs --config team.client.json --collector http://127.0.0.1:8088 \
//     --key-file app.keys [--devices 300] [--rounds 1] [--every 60] [--dimension region=eu,us,apac] \
//     [--population devices] [--seed S] [--at MS]
//
// Device i of a population keeps its secret and its values (drawn once from the population's name: each
// boolean true at a rate of its own, a categorical's values and a numeric's range uniformly) and takes the
// i-th value of each --dimension (a device reports under one key). Each round every device sends one report,
// stamped with its clock (Date.now()); rounds are --every seconds apart. With --at MS the rounds are stamped
// MS, MS + every, ... instead and sent at once (reports of past windows). With --seed the coins are HMAC_DRBG
// seeded per device and report (reproducible); without, the OS generator's, as on a real device.
// Prints `accepted N`; exits 1 on a refusal or on a request that never got a 200.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const lib = await import(new URL("../dist/index.js", import.meta.url).href);
const { values: opt } = parseArgs({
  options: {
    config: { type: "string" }, collector: { type: "string" }, "key-file": { type: "string" },
    devices: { type: "string", default: "300" }, rounds: { type: "string", default: "1" },
    every: { type: "string", default: "60" }, dimension: { type: "string", multiple: true, default: [] },
    population: { type: "string", default: "devices" }, seed: { type: "string" }, at: { type: "string" },
  },
});
for (const name of ["config", "collector", "key-file"]) {
  if (!opt[name]) throw new Error(`--${name} is required`);
}
const config = JSON.parse(readFileSync(opt.config, "utf8"));
// the app's key: the file's first key, as the collector's --keys file holds them (`app=key` lines), or bare
const keyLine = readFileSync(opt["key-file"], "utf8").split("\n").map((l) => l.trim()).find((l) => l && !l.startsWith("#"));
if (!keyLine) throw new Error(`--key-file ${opt["key-file"]} holds no key`);
const key = keyLine.includes("=") ? keyLine.slice(keyLine.indexOf("=") + 1) : keyLine;
const Client = "hadamard" in config ? lib.HadamardDeviceClient : "subset" in config ? lib.SubsetDeviceClient
  : lib.DeviceClient;
const dimensions = opt.dimension.map((d) => {
  const [name, values] = d.split("=");
  if (!values) throw new Error(`--dimension must be NAME=V1,V2,..., got --dimension ${d}`);
  return [name, values.split(",")];
});
const digest = (...parts) => createHash("sha256").update(parts.join("|")).digest();
const uniform = (...parts) => digest(...parts).readUInt32BE(0) / 2 ** 32;

function valuesOf(i) {
  const values = {};
  for (const f of config.features) {
    const u = uniform(opt.population, i, f.name);
    if (f.type === "boolean") values[f.name] = u < 0.15 + 0.7 * uniform(opt.population, f.name);
    else if (f.type === "categorical") values[f.name] = f.values[Math.floor(u * f.values.length)];
    else values[f.name] = f.low + u * (f.high - f.low);
  }
  return values;
}

const devices = Number(opt.devices), rounds = Number(opt.rounds), every = Number(opt.every);
const clients = [];
for (let i = 0; i < devices; i++) {
  const secret = digest(opt.population, "secret", i);
  const coins = opt.seed === undefined ? undefined : new lib.HmacDrbg(digest(opt.seed, "coins", i));
  clients.push(await Client.create(config, new Uint8Array(secret), coins));
}

async function send(body) {
  const requestId = crypto.randomUUID();   // one per request, the same on each of its retries: counted once
  for (let attempt = 0; attempt < 8; attempt++) {
    if (attempt) await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
    let status = 0;   // no answer: retried
    try {
      const response = await fetch(opt.collector.replace(/\/$/, "") + "/v1/reports", {
        method: "POST", body, headers: {
          "Content-Type": "application/octet-stream", "Authorization": `Bearer ${key}`, "Idempotency-Key": requestId,
        },
      });
      status = response.status;
      if (status === 200) return;
      if (status !== 429 && status !== 503) throw new Error(`the collector refused a report: ${status} ${await response.text()}`);
    } catch (err) {
      if (err.message.startsWith("the collector refused")) throw err;
    }
  }
  throw new Error(`request ${requestId}: no 200 after its retries`);
}

let accepted = 0;
for (let r = 0; r < rounds; r++) {
  if (r && opt.at === undefined) await new Promise((resolve) => setTimeout(resolve, every * 1000));
  for (let i = 0; i < devices; i++) {
    const at = opt.at === undefined ? Date.now() : Number(opt.at) + r * every * 1000 + i;
    const dims = Object.fromEntries(dimensions.map(([name, values]) => [name, values[i % values.length]]));
    await send(await clients[i].reportBytes(valuesOf(i), at, dims));
    accepted++;
  }
}
process.stdout.write(`accepted ${accepted}\n`);
