"""The wheel installs one top-level package, ``ldp_marginals``, that carries what the job needs at
run time (the Avro schemas, the dashboard's assets, the command) and no development tool (the local
cluster of ``make cluster-up`` is ``deploy/local/cluster.py``), and the installed package works
from a directory that holds no sources."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


PACKAGE_DIR = PYPROJECT["tool"]["setuptools"]["package-dir"]


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory):
    """The wheel pip builds from the sources alone (a copy of what pyproject names, as a fresh clone
    holds them: a ``build/`` folder left by an earlier build would put its stale modules in it), and
    what the build printed on stderr."""
    src, out_dir = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in {f.split("/")[0] for f in PACKAGE_DIR.values()}:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi",
                                                                                 "*.nbc"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                          "-q", "-w", str(out_dir)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    (path,) = out_dir.glob("ldp_marginals-*.whl")
    return path, out.stderr


@pytest.fixture(scope="module")
def wheel(wheel_build):
    return wheel_build[0]


def test_the_build_prints_no_warning(wheel_build):
    """``make env`` (and so ``make demo`` on a fresh clone) printed ~50 lines of setuptools' warnings
    (issue 49 item 7): the dashboard's assets folder was a package setuptools would ignore."""
    assert "Warning" not in wheel_build[1], wheel_build[1][-3000:]


def test_the_only_top_level_package_is_ldp_marginals(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"ldp_marginals"}
    packages = {"/".join(n.split("/")[:2]) for n in names if n.endswith(".py")}  # ldp_marginals/<package>
    assert packages == {f"ldp_marginals/{p}" for p in ("__init__.py", "ldp", "schemas", "transforms", "pipelines")}
    assert not any(n.startswith("ldp_marginals/pipelines/root/") for n in names)   # installed as ldp_marginals/
    dist_info = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info"))
    assert zipfile.ZipFile(wheel).read(f"{dist_info}/top_level.txt").decode().split() == ["ldp_marginals"]


def test_the_wheel_carries_schemas_assets_and_the_command(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for schema in ("noisy_report", "marginal_estimate", "extreme_estimate", "table_cell", "withheld_window",
                   "dead_letter"):
        assert f"ldp_marginals/schemas/{schema}.avsc" in names
    assert {"ldp_marginals/pipelines/dashboard/assets/page.html",
            "ldp_marginals/pipelines/dashboard/assets/app.js"} <= set(names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ldp-marginals = ldp_marginals.pipelines.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    assert PYPROJECT["project"]["scripts"]["ldp-marginals"] == "ldp_marginals.pipelines.cli:main"
    assert not any(n.startswith(("tests/", "benchmarks/", "deploy/")) for n in names)


def test_the_wheel_holds_the_package_modules_and_no_development_tool(wheel):
    """Its modules are exactly those of the package's folders; the local cluster's supervisor (it
    starts JVMs and Kafka for development) is not among them."""
    installed = {n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".py")}
    sources = set()
    for package, folder in PACKAGE_DIR.items():
        for path in (ROOT / folder).rglob("*.py"):
            if package == "ldp_marginals.pipelines" and path.relative_to(ROOT / folder).parts[0] == "root":
                continue
            sources.add("/".join([*package.split("."), *path.relative_to(ROOT / folder).parts]))
    assert installed == sources
    assert not [n for n in installed if "cluster" in n.rsplit("/", 1)[-1]]
    assert (ROOT / "deploy" / "local" / "cluster.py").is_file()


def test_the_installed_package_imports_from_outside_the_repository(wheel, tmp_path):
    target = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                          str(wheel)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    # -S: no site hooks, so the editable install of this checkout cannot answer; the dependencies come
    # from the environment's site-packages, the project only from the installed wheel
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]]))
    code = ("import ldp_marginals.pipelines.run as r, ldp_marginals.ldp as l, ldp_marginals.schemas as s\n"
            "from ldp_marginals.pipelines.dashboard.page import render\n"
            "import ldp_marginals\n"
            "print(r.__file__, l.__file__, s.__file__, ldp_marginals.read.__module__, "
            "s.load_schema('noisy_report')['name'], len(render({})) > 0)")
    run = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    *files, reader, schema, rendered = run.stdout.split()
    assert reader == "ldp_marginals.pipelines.read"
    assert all(f.startswith(str(target / "ldp_marginals")) for f in files), files
    assert schema == "ldp_marginals.NoisyReport" and rendered == "True"


def test_the_package_requires_the_one_beam_of_the_pins_and_the_jars():
    """pip installs the Beam the tests run and the deployments ship (issue 36: a range let pip resolve a
    Beam nothing was tested with), the Python SDK of the Java jars' version (the Flink job server, Kafka IO)."""
    (beam,) = [r for r in PYPROJECT["project"]["dependencies"] if r.startswith("apache-beam")]
    pinned = re.search(r"^apache-beam==(\S+)", (ROOT / "deploy/dataflow/requirements.txt").read_text(), re.M).group(1)
    jars = {re.search(r"<beam.version>(.+?)</beam.version>", pom.read_text()).group(1)
            for pom in (ROOT / "deploy/flink/jvm").glob("*/pom.xml") if "<beam.version>" in pom.read_text()}
    assert beam.split(";")[0].strip() == f"apache-beam[gcp]=={pinned}" and jars == {pinned}
