"""The TypeScript client in a browser (headless Chromium, Debian's): the built module
(clients/typescript/dist, which `make clients-ts` builds) reproduces every test vector's bytes,
refusal codes and coin decisions in a page (the whole-report kinds hadamard and subset too), and the
web snippet of docs/client-web.md (clients/typescript/examples/report.js) keeps its secret in IndexedDB
across page loads and posts reports the job's decoder reads."""
import json
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ldp_marginals.schemas import decode_message
from ldp_marginals.schemas.client_config import client_config
from ldp_marginals.schemas.config import parse_config
from tests.browser import chromium

pytestmark = pytest.mark.browser

CLIENTS = Path(__file__).resolve().parents[2] / "clients"
VECTORS = CLIENTS / "test-vectors"
# the collection as the job reads it; the page is served what `ldp-marginals client-config` writes of it
# (RAPPOR f=0.5 memoized: permanent (0.25, 0.75), instantaneous (0.5, 0.75); the device unit: the token)
COLLECTION = {"collection": "web_usage", "features": [{"name": "dark_mode", "type": "boolean"},
                                                      {"name": "os", "type": "categorical",
                                                       "values": ["mac", "win", "linux"]}],
              "channel": {"mechanism": "rappor", "f": 0.5, "p": 0.5, "q": 0.75, "memoize": True}, "max_order": 2,
              "min_reports": 10, "window": {"type": "global"},
              "privacy": {"unit": "device", "max_reports_per_device": 1}}
CONFIG = client_config(parse_config(COLLECTION))
# the page an app would have: its bundler resolves the package name, here an import map does
PAGE = ('<!doctype html><html><head><meta charset="utf-8"><script type="importmap">'
        '{"imports": {"@ldp-marginals/client": "/typescript/dist/index.js"}}</script></head><body></body></html>')


class Handler(SimpleHTTPRequestHandler):
    """Files under clients/, the page at /, the config at /config.json; POST /collect keeps the body."""
    received: list
    posts: list

    def do_GET(self):
        if self.path in ("/", "/config.json"):
            body = (PAGE if self.path == "/" else json.dumps(CONFIG)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if self.path == "/" else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def do_POST(self):
        """As the collector: the first attempt of each request answered 503 (Kafka away), its retry 200."""
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.posts.append((self.headers["Authorization"], self.headers["Idempotency-Key"], body))
        retry = sum(p[1] == self.headers["Idempotency-Key"] for p in self.posts) > 1
        if retry:
            self.received.append(body)
        answer = b'{"accepted": 1}' if retry else b'{"error": "kafka_unavailable"}'
        self.send_response(200 if retry else 503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    if not (CLIENTS / "typescript" / "dist" / "index.js").exists():
        pytest.fail("clients/typescript/dist is missing: `make clients-ts` builds it")
    received, posts = [], []
    handler = type("SiteHandler", (Handler,), {"received": received, "posts": posts})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(CLIENTS)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received, posts   # a secure context: WebCrypto works
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page(site, tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium"), window_size="800,600") as driver:
        driver.set_script_timeout(60)
        driver.get(site[0] + "/")
        yield driver


RUN_VECTORS = """
const [reportsText, refusalsText, coinsText, hadamardText, subsetText, done] = arguments;
(async () => {
  const reports = JSON.parse(reportsText), refusals = JSON.parse(refusalsText), coins = JSON.parse(coinsText);
  const kinds = {hadamard: [JSON.parse(hadamardText), "HadamardDeviceClient"],
                 subset: [JSON.parse(subsetText), "SubsetDeviceClient"]};
  const m = await import("/typescript/dist/index.js");
  const hex = (s) => Uint8Array.from(s.match(/../g) || [], (b) => parseInt(b, 16));
  const toHex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const codeOf = (err) => (err instanceof m.Refusal ? err.code : "not a refusal: " + err);
  const made = [], states = [];
  for (const c of reports.cases) {
    const client = await m.DeviceClient.create(c.config, hex(c.secret), new m.HmacDrbg(hex(c.seed)), c.rate_state);
    for (const r of c.reports) {
      try { made.push(toHex(await client.reportBytes(r.values, r.event_ms, r.dimensions))); }
      catch (err) { made.push(codeOf(err)); }
    }
    if ("rate_state" in c) states.push(client.rateState());
  }
  const refused = [];
  for (const c of refusals.cases) {
    try {
      const client = await m.DeviceClient.create(c.config, hex(c.secret), new m.HmacDrbg(new Uint8Array(32)),
                                                 c.rate_state);
      if (c.input !== null) await client.report(c.input.values, c.input.event_ms, c.input.dimensions);
      refused.push("accepted");
    } catch (err) { refused.push(codeOf(err)); }
  }
  const whole = {};   // per whole-report kind: the Avro hex of every positive vector, the code of every refusal
  for (const [kind, [vectors, name]] of Object.entries(kinds)) {
    const made = [], refused = [];
    for (const c of vectors.cases) {
      const client = await m[name].create(c.config, hex(c.secret), new m.HmacDrbg(hex(c.seed)));
      for (const r of c.reports) {   // a report past the declared rate: its refusal code
        try { made.push(toHex(await client.reportBytes(r.values, r.event_ms, r.dimensions))); }
        catch (err) { made.push(codeOf(err)); }
      }
    }
    for (const c of vectors.refusals) {
      try {
        const client = await m[name].create(c.config, new Uint8Array(32), new m.HmacDrbg(new Uint8Array(32)),
                                            c.rate_state);
        if (c.input !== null) await client.report(c.input.values, c.input.event_ms, c.input.dimensions);
        refused.push("accepted");
      } catch (err) { refused.push(codeOf(err)); }
    }
    whole[kind] = {made, refused};
  }
  const rules = coins.units.map((u) => m.units(u.probability) === u.units)
    .concat(coins.decisions.map((d) => m.decide(hex(d.coin), d.probability) === d.decision));
  return {made, states, refused, whole, rules, agent: navigator.userAgent};
})().then(done, (err) => done({error: String(err)}));
"""


def test_the_built_module_reproduces_every_vector_in_chromium(page):
    names = ("reports.json", "refusals.json", "coins.json", "hadamard.json", "subset.json")
    texts = [(VECTORS / name).read_text(encoding="utf-8") for name in names]
    reports, refusals, coins, hadamard, subset = map(json.loads, texts)
    # as the files' text: WebDriver's JSON cannot carry the negative vectors' unpaired surrogates
    got = page.execute_async_script(RUN_VECTORS, *texts)
    assert "error" not in got, got
    assert "HeadlessChrome" in got["agent"]
    expected = [r["expect"].get("avro", r["expect"].get("refusal")) for c in reports["cases"] for r in c["reports"]]
    assert got["made"] == expected
    assert got["states"] == [c["rate_state_after"] for c in reports["cases"] if "rate_state" in c]
    assert got["refused"] == [c["refusal"] for c in refusals["cases"]]
    for kind, vectors in (("hadamard", hadamard), ("subset", subset)):
        made = [r["expect"].get("avro", r["expect"].get("refusal")) for c in vectors["cases"] for r in c["reports"]]
        assert got["whole"][kind] == {"made": made, "refused": [c["refusal"] for c in vectors["refusals"]]}, kind
    assert got["rules"] == [True] * (len(coins["units"]) + len(coins["decisions"]))


SEND = """
const [values, done] = arguments;
import("/typescript/examples/report.js")
  .then((m) => m.sendReport("/config.json", "/collect", "web-app-key", values, {app: "web"}))
  .then(done, (err) => done("error: " + err));
"""

KEY = """
const done = arguments[0];
import("/typescript/dist/index.js").then(async (m) => {
  const key = await m.storedSecretKey();
  let exported = "refused";
  try { await crypto.subtle.exportKey("raw", key); exported = "exported"; } catch (err) {}
  return {extractable: key.extractable, exported, algorithm: key.algorithm.name};
}).then(done, (err) => done({error: String(err)}));
"""


def test_the_web_snippet_keeps_one_secret_across_page_loads_and_posts_decodable_reports(site, page):
    url, received, posts = site
    before, posts_before = len(received), len(posts)
    start_ms = int(time.time() * 1000)
    tokens = []
    for _ in range(2):   # two page loads share the key stored in IndexedDB
        page.get(url + "/")
        assert page.execute_async_script(SEND, {"dark_mode": True, "os": "linux"}) is True
        report = decode_message("noisy_report", received[-1])
        assert report["collection"] == "web_usage" and report["dimensions"] == {"app": "web"}
        assert start_ms <= report["event_time"] <= int(time.time() * 1000) and len(report["bits"]) == 1
        tokens.append(report["client"])
    assert len(received) == before + 2
    # each report posted twice (a 503, then its retry) with the app's key and one request id
    ids = [p[1] for p in posts[posts_before:]]
    assert [p[0] for p in posts[posts_before:]] == ["Bearer web-app-key"] * 4
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2] and len(ids[0]) == 36
    assert len(tokens[0]) == 22 and tokens[0] == tokens[1]   # the global window: one token per device
    assert page.execute_async_script(KEY) == {"extractable": False, "exported": "refused", "algorithm": "HMAC"}
    page.get_log("browser")   # drop what came before
    assert page.execute_async_script(SEND, {"dark_mode": True, "os": "private-os-name"}) is False
    assert len(received) == before + 2                       # a refused report posts nothing
    logs = " ".join(e["message"] for e in page.get_log("browser"))
    assert "refused a report: bad_value" in logs and "private-os-name" not in logs
