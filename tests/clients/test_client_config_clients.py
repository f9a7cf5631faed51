"""The JVM client (clients/java) and the TypeScript client (clients/typescript, in Node) read the JSON of
``ldp-marginals client-config`` unchanged, for every kind of tests/client_configs.py, and make from it the
same report bytes as the Python reference client (the same secrets, the specification's seeded coins); the
collector's screen accepts them all (tests/schemas/test_client_config.py: the Python side).

Needs the JVM client's test classes (``make clients-java``) and the TypeScript client's dist/
(``make clients-ts``); built here when missing."""
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from ldp_marginals.pipelines.admission import screen_singles
from ldp_marginals.pipelines.client_config import client_config_text
from ldp_marginals.schemas.config import parse_config
from tests.client_configs import CONFIGS, values_of
from tests.schemas.test_client_config import DEVICES, T0, reports

pytestmark = pytest.mark.clients

ROOT = Path(__file__).resolve().parents[2]
JAVA = ROOT / "clients" / "java"
TS = ROOT / "clients" / "typescript"


@pytest.fixture(scope="module")
def java_classpath() -> str:
    if not (JAVA / "target" / "test-classes" / "ldp_marginals" / "client" / "ConfigReports.class").exists():
        subprocess.run(["mvn", "--batch-mode", "-q", "-f", str(JAVA / "pom.xml"), "test-compile"], check=True)
    return os.pathsep.join([str(JAVA / "target" / "classes"), str(JAVA / "target" / "test-classes")])


@pytest.fixture(scope="module")
def ts_dist() -> str:
    if not (TS / "dist" / "index.js").exists():
        if not (TS / "node_modules").exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=TS, check=True)
        subprocess.run(["npm", "run", "--silent", "build"], cwd=TS, check=True)
    return str(TS / "dist" / "index.js")


def devices_file(tmp_path, name: str) -> str:
    """The devices of :func:`tests.schemas.test_client_config.reports`, one a line for the two programs."""
    lines = [f"{hashlib.sha256(f'secret-{i}'.encode()).hexdigest()} {hashlib.sha256(f'coins-{i}'.encode()).hexdigest()} "
             f"{T0 + 97_003 * i} {json.dumps(values_of(name, i))}" for i in range(DEVICES)]
    path = tmp_path / f"{name}.devices"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_jvm_and_typescript_clients_read_it_and_make_the_reference_bytes(name, tmp_path, java_classpath,
                                                                             ts_dist):
    collections = tmp_path / "collections.yaml"
    collections.write_text(yaml.safe_dump(list(CONFIGS.values())))
    text = client_config_text(str(collections), name)   # what the command writes
    config = tmp_path / f"{name}.client.json"
    config.write_text(text)
    devices = devices_file(tmp_path, name)
    want = [b.hex() for b in reports(json.loads(text), name)]
    java = subprocess.run(["java", "-cp", java_classpath, "ldp_marginals.client.ConfigReports", str(config), devices],
                          capture_output=True, text=True, timeout=120)
    assert java.returncode == 0, java.stderr[-2000:]
    node = subprocess.run(["node", str(Path(__file__).with_name("config_reports.mjs")), ts_dist, str(config), devices],
                          capture_output=True, text=True, timeout=120)
    assert node.returncode == 0, node.stderr[-2000:]
    assert java.stdout.split() == want
    assert node.stdout.split() == want
    configs = {n: parse_config(c) for n, c in CONFIGS.items()}
    screened = screen_singles([bytes.fromhex(h) for h in node.stdout.split()], configs)
    assert [(len(got), refused) for got, refused in screened] == [(1, [])] * DEVICES
