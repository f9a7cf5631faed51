"""The README's examples are the ones that run: its config parses, its Python example runs."""
import re
import subprocess
import sys
from pathlib import Path

import yaml

from ldp_marginals.schemas.config import parse_config

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_config_example_is_valid():
    block = re.search(r"## Collection config.*?```yaml\n(.*?)```", README, re.S).group(1)
    cfg = parse_config(yaml.safe_load(block))
    assert cfg.layout.labels[:4] == ("dark_mode", "os=mac", "os=win", "os=linux")
    assert [e.over for e in cfg.extremes] == ["report", "client"]


def test_readme_python_example_runs():
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 2


def test_readme_names_the_commands_that_exist():
    from ldp_marginals.pipelines.cli import main
    for command in ("run", "simulate", "calibrate", "demo", "dashboard"):
        assert f"ldp-marginals {command}" in README
    assert main(["calibrate", "--bits", "4", "--population", "100000", "--epsilon", "1", "--trials", "500"]) == 0
