// Reports made from a client config exactly as `ldp-marginals client-config` wrote it, of any kind (per-bit
// `channels`, `hadamard`, `subset`), by the built TypeScript client (clients/typescript/dist):
// tests/clients/test_client_config_clients.py compares their bytes with the Python reference client's.
// Arguments: the built module's path, the client config (JSON), the devices (one a line,
// `secret-hex seed-hex event-ms values-json`); prints each report's Avro bytes in hex, one a line.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [dist, configPath, devicesPath] = process.argv.slice(2);
const lib = await import(pathToFileURL(dist).href);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const Client = "hadamard" in config ? lib.HadamardDeviceClient : "subset" in config ? lib.SubsetDeviceClient
  : lib.DeviceClient;
const fromHex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const out = [];
for (const line of readFileSync(devicesPath, "utf8").split("\n").filter((l) => l)) {
  const [secret, seed, eventMs, ...rest] = line.split(" ");
  const client = await Client.create(config, fromHex(secret), new lib.HmacDrbg(fromHex(seed)));
  out.push(toHex(await client.reportBytes(JSON.parse(rest.join(" ")), Number(eventMs), {})));
}
process.stdout.write(out.join("\n") + "\n");
