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


def test_readme_python_example_runs(tmp_path):
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    # from a directory without sources: the example must use the installed names
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 2


def test_readme_names_the_commands_that_exist():
    from ldp_marginals.pipelines.cli import main
    for command in ("run", "simulate", "calibrate", "demo", "dashboard"):
        assert f"ldp-marginals {command}" in README
    assert main(["calibrate", "--bits", "4", "--population", "100000", "--epsilon", "1", "--trials", "500"]) == 0


def test_readme_lists_every_dead_letter_reason_with_its_meaning():
    from ldp_marginals.transforms.dead_letters import REASONS
    listed = dict(re.findall(r"^\| `([a-z_]+)` \| (.+) \|$", README.split("| reason | meaning |", 1)[1], re.M))
    assert listed == dict(REASONS)
