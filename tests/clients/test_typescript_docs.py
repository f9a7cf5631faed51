"""docs/client-web.md shows tested code: its snippet is clients/typescript/examples/report.js (which
the browser test runs), and every name its API table gives is exported by the package."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "client-web.md").read_text(encoding="utf-8")
TS = ROOT / "clients" / "typescript"


def test_the_web_snippet_is_the_example_the_browser_runs():
    snippets = re.findall(r"```js\n(.*?)```", DOC, re.S)
    assert snippets == [(TS / "examples" / "report.js").read_text(encoding="utf-8")]


def test_the_api_table_names_only_exported_names():
    exported = set(re.findall(r"\b(\w+)\b", " ".join(re.findall(r"export \{(.*?)\}", (TS / "src" / "index.ts").read_text(),
                                                                    re.S))))
    table = DOC.split("The API", 1)[1].split("\n\n", 1)[1].split("\n\n", 1)[0]
    names = {m.split(".")[0].split("(")[0] for m in re.findall(r"^\| `([\w.]+)", table, re.M)}
    names |= set(re.findall(r"^\| `\w+\(.*?\)`, `(\w+)\(", table, re.M))
    names.discard("client")   # an instance's methods
    assert names and names <= exported, names - exported
    assert {"DeviceClient", "Refusal", "storedSecretKey", "newSecretKey", "HmacDrbg"} <= names
