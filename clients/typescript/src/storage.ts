/**
 * Keeping the device secret in a browser: a non-extractable HMAC-SHA256 CryptoKey in IndexedDB.
 * IndexedDB stores a CryptoKey as it is (structured clone), so the page's script can sign with it
 * but can never read its bytes (`exportKey` rejects): a cross-site script can make reports while it
 * runs, but cannot carry the secret away. Made once per device (per origin), shared by every
 * collection (their derivations name the collection).
 */
import { newSecretKey } from "./device.js";

const STORE = "secrets";

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function open(database: string): Promise<IDBDatabase> {
  if (typeof indexedDB === "undefined") {
    throw new Error("IndexedDB is unavailable here: keep the secret in the platform's key store and pass it to " +
      "DeviceClient.create as a CryptoKey or as its 32 bytes");
  }
  const req = indexedDB.open(database, 1);
  req.onupgradeneeded = () => req.result.createObjectStore(STORE);
  return request(req);
}

/**
 * The device's secret key, stored in IndexedDB database `database` under `name`; made on first use
 * (non-extractable) and kept. Two pages that race on first use end with the same key: the first
 * `add` wins and the other reads it back.
 */
export async function storedSecretKey(database = "ldp-marginals", name = "device-secret"): Promise<CryptoKey> {
  const db = await open(database);
  try {
    const found = await request(db.transaction(STORE, "readonly").objectStore(STORE).get(name)) as CryptoKey | undefined;
    if (found) return found;
    const made = await newSecretKey(false);
    try {
      await request(db.transaction(STORE, "readwrite").objectStore(STORE).add(made, name));
      return made;
    } catch (err) {
      if (!(err instanceof DOMException && err.name === "ConstraintError")) throw err;
      return await request(db.transaction(STORE, "readonly").objectStore(STORE).get(name)) as CryptoKey;
    }
  } finally {
    db.close();
  }
}
