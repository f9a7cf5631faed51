import { DeviceClient, Refusal, storedSecretKey } from "@ldp-marginals/client";

// One report of this device's values for a collection: the client config comes from the server, the
// secret from IndexedDB (made once, non-extractable), the coins from crypto.getRandomValues.
export async function sendReport(configUrl, collectorUrl, values, dimensions = {}) {
  const config = await (await fetch(configUrl)).json();
  const client = await DeviceClient.create(config, await storedSecretKey());
  let report;
  try {
    report = await client.reportBytes(values, Date.now(), dimensions);
  } catch (err) {
    if (err instanceof Refusal) {
      console.warn(`ldp-marginals refused a report: ${err.code}`); // the code only: never values or bytes
      return false;
    }
    throw err;
  }
  const response = await fetch(collectorUrl, {
    method: "POST", body: report, headers: { "Content-Type": "application/octet-stream" },
  });
  return response.ok;
}
