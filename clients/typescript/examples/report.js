import { DeviceClient, Refusal, storedSecretKey } from "@ldp-marginals/client";

// One report of this device's values for a collection: the client config comes from the server, the
// secret from IndexedDB (made once, non-extractable), the coins from crypto.getRandomValues. The
// collector (docs/collector.md) takes it with the app's key and a request id that its retries keep.
export async function sendReport(configUrl, collectorUrl, appKey, values, dimensions = {}) {
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
  const requestId = crypto.randomUUID(); // one per request, the same on each of its retries: counted once
  for (let attempt = 0; attempt < 6; attempt++) {
    let status = 0; // no answer (offline): retried
    try {
      const response = await fetch(collectorUrl, {
        method: "POST", body: report, headers: {
          "Content-Type": "application/octet-stream", "Authorization": `Bearer ${appKey}`, "Idempotency-Key": requestId,
        },
      });
      status = response.status;
    } catch (err) {}
    if (status === 200) return true; // Kafka holds the report
    if (status !== 0 && status !== 429 && status !== 503) return false; // refused (4xx): a retry cannot help
    await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** attempt));
  }
  return false;
}
