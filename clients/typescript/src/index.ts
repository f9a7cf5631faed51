/**
 * @ldp-marginals/client: the ldp-marginals device client for browsers and Node (ES module, WebCrypto).
 * docs/client.md specifies what it does; clients/test-vectors/ are the contract it reproduces.
 */
export { encodeNoisyReport, sortDimensions, type NoisyReport } from "./avro.js";
export {
  DeviceClient, MAX_EVENT_MS, MIN_EVENT_MS, MS_PER_DAY, type Dimensions, type FeatureValues, type RateState, type Trace,
} from "./client.js";
export {
  COIN_BYTES, HmacDrbg, MAX_REQUEST_BYTES, SystemCoins, coinValue, decide, frame, units, type CoinSource,
} from "./coins.js";
export { MAX_REPORTS_PER_DAY, parseClientSpec, type Channel, type ClientSpec, type Feature, type Window } from "./config.js";
export { SECRET_BYTES, deviceToken, encodingCoin, newSecretKey, permanentCoin, secretKey, type Secret } from "./device.js";
export {
  HadamardDeviceClient, MAX_HADAMARD_FEATURES, parseHadamardSpec, type HadamardSlots, type HadamardSpec, type HadamardTrace,
} from "./hadamard.js";
export { CODES, Refusal, type RefusalCode } from "./refusal.js";
export { storedSecretKey } from "./storage.js";
export {
  MAX_SUBSET_FEATURES, SubsetDeviceClient, parseSubsetSpec, type SubsetChoice, type SubsetSpec, type SubsetTrace,
} from "./subset.js";
