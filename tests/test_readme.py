"""The README's examples are the ones that run: its config parses, its Python example runs; and what
the docs say of the repository is checked where a machine can: its layout list against the modules,
the paths they cite, the status against the bench table."""
import os
import re
import subprocess
import sys
import tomllib
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
    from ldp_marginals.schemas.dead_letters import REASONS
    listed = dict(re.findall(r"^\| `([a-z_]+)` \| (.+) \|$", README.split("| reason | meaning |", 1)[1], re.M))
    assert listed == dict(REASONS)


ROOT = Path(__file__).resolve().parents[1]


def _layout_bullets() -> dict:
    """The README's layout list: ``{folder: [the paths its bullet names, under the folder]}``."""
    section = README.split("## Layout of the code", 1)[1].split("\n## ", 1)[0]
    bullets = {}
    for bullet in re.findall(r"^- `([\w]+)/` (.*?)(?=^- |^\S|\Z)", section, re.M | re.S):
        folder, text = bullet
        bullets[folder] = [name for name in re.findall(r"`([\w./]+)`", text) if name.endswith((".py", "/"))]
    return bullets


def test_readme_layout_names_every_module_and_only_modules_that_exist():
    """Every path the layout list names exists; every module of the package's folders (and of
    benchmarks/) is named there, or, for the math core, in its table of modules."""
    bullets = _layout_bullets()
    named = {f"{folder}/{name}".rstrip("/") for folder, names in bullets.items() for name in names}
    named |= {f"ldp/{m}.py" for m in re.findall(r"^\| `ldp\.(\w+)` \|", README, re.M)}
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == [], f"the README's layout names paths that do not exist: {missing}"
    folders = sorted(set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
                         .values()) - {"pipelines/root"}) + ["benchmarks"]
    assert set(folders) <= set(bullets), f"the layout has no bullet for {sorted(set(folders) - set(bullets))}"
    modules = {str(p.relative_to(ROOT)) for folder in folders for p in (ROOT / folder).rglob("*.py")
               if p.name != "__init__.py"}
    unnamed = sorted(modules - named)
    assert unnamed == [], f"modules the README's layout does not name: {unnamed}"


# paths that look like the repository's but are not files: kubectl's deployment/NAME
NOT_PATHS = {"deploy/ldp-marginals"}


def test_every_path_a_doc_or_a_test_cites_exists():
    """A repository path cited in the docs, the tests, the code's docstrings and comments, the
    Makefile or the deployment files names a file or folder that exists (globs and placeholders such
    as ``<kind>`` are skipped)."""
    pattern = re.compile(r"(?<![\w./-])((?:tests|ldp|schemas|transforms|pipelines|benchmarks|deploy|docs|clients|\.ci)"
                         r"/[\w./*<>{}-]*[\w*/>}])")
    skip = {".git", ".venv", ".jvm", "out", "results", "__pycache__", ".pytest_cache", ".hypothesis",
            "target", "node_modules"}   # build output and installed packages: Maven's (clients/java), npm's
    cited = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            rel = path.relative_to(ROOT)
            if path.suffix in (".py", ".md", ".yaml", ".yml", ".json", ".toml", ".js", ".ts", ".html", ".txt", ".cfg",
                               ".sh") \
                    or name in ("Makefile", "Dockerfile"):
                text = path.read_text(errors="replace")
                cited += [(str(rel), m.group(1).rstrip("./")) for m in pattern.finditer(text)]
    # build outputs (Maven's target/, npm's dist/ and node_modules/) exist only after `make clients-*`
    built = {"target", "dist", "node_modules"}
    cited = [(f, t) for f, t in cited if not any(c in t for c in "*<>{}") and t not in NOT_PATHS
             and not built & set(Path(t).parts)]
    assert len(cited) > 100   # the scan sees the citations (README alone cites dozens)
    assert [(f, t) for f, t in cited if not (ROOT / t).exists()] == []


def test_readme_status_names_the_goals_the_bench_table_marks_no():
    """The status paragraph says which goals are not met: exactly the rows of the bench table marked NO."""
    status = README.split("**Status.**", 1)[1].split("\n\n", 1)[0]
    table = README.split("<!-- bench-table -->", 1)[1].split("<!-- /bench-table -->", 1)[0]
    rows = [r for r in table.splitlines() if re.match(r"\| \d+[a-z]?\. ", r)]
    assert rows, "no bench table"
    marked = sorted(re.match(r"\| (\d+[a-z]?)\. ", r).group(1) for r in rows if r.rstrip().endswith("| NO |"))
    said = re.search(r"but goals? ([0-9a-z, ]+?(?: and [0-9a-z]+)?),? which (?:is|are) marked NO",
                     " ".join(status.split()))
    assert sorted(re.findall(r"\d+[a-z]?", said.group(1)) if said else []) == marked, (marked, status)
