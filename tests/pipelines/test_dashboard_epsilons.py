"""The dashboard's privacy panel states a device's epsilons over time as the job enforces them (named
"enforced"), the declared rate's beside (named "not enforced"), and reads an older release's
collections.json: ``epsilonsText`` of ``assets/app.js`` run under Node on collections.json entries
(the browser suite draws the whole panel; this checks the text without Chromium)."""
import json
import re
import shutil
import subprocess
from pathlib import Path


from ldp_marginals.schemas.config import parse_config
from tests.pipelines.test_month_enforced import ISSUE_CONFIG

APP = Path(__file__).resolve().parents[2] / "pipelines" / "dashboard" / "assets" / "app.js"


def _epsilons_text(entries: list) -> list:
    source = APP.read_text()
    fmt = re.search(r"^  const fmt = .*;$", source, re.M).group(0)
    body = re.search(r"^  function epsilonsText\(c\) \{\n.*?^  \}$", source, re.M | re.S).group(0)
    script = f"{fmt}\n{body}\nconsole.log(JSON.stringify({json.dumps(entries)}.map(epsilonsText)));"
    node = shutil.which("node")
    assert node, "Node is needed (make test builds the TypeScript client with it too)"
    done = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_privacy_panel_states_the_enforced_figures():
    daily = parse_config(dict(ISSUE_CONFIG, window={"type": "fixed", "size_seconds": 86400})).describe()
    report = parse_config({k: v for k, v in ISSUE_CONFIG.items() if k != "privacy"}).describe()
    older = {"unit": "device", "epsilons": {"epsilon_1": 0.1, "epsilon_infinity": None, "reports_per_day": 24,
                                            "epsilon_per_day": 2.4, "epsilon_per_month": 72.0}}
    enforced, per_report, old = _epsilons_text([daily, report, older])
    assert enforced == ("ε₁ 0.100, ε∞ ∞; enforced: day 0.100 (1 report), month 3.000 (30 reports); declared 1/day "
                        "(not enforced): day 0.100, month 3.000 (unit: device)")
    assert per_report == "ε₁ 0.100, ε∞ ∞; per report only (no device bound) (unit: report)"
    assert old == "ε₁ 0.100, ε∞ ∞; declared 24/day (not enforced): day 2.400, month 72.000 (unit: device)"
