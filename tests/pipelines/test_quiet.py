"""Quiet by default (issue 49 item 7): the command prints no library warning and no library INFO log
(kafka-python's ~35 connection lines at a collector's start, Beam's, Google's version notices), and keeps its
own lines; ``-v`` (before or after the command) brings them back. Each case runs the command in a process of
its own (logging and warnings are process-wide); the collector's parts are replaced by one that logs and
warns as the libraries do, then stops, so no broker is needed."""
import json
import subprocess
import sys

import pytest

from tests.configs import SMALL_CONFIG

SCRIPT = """
import logging, sys, warnings
from ldp_marginals.pipelines import cli, collect

def build(args):
    logging.getLogger("kafka.conn").info("<BrokerConnection node_id=bootstrap-0>: connecting to 127.0.0.1:9092")
    logging.getLogger("apache_beam.runners.portability").info("Job state changed to RUNNING")
    logging.getLogger("ldp_marginals.collect").info("read back 3 requests")
    warnings.warn("pkg_resources is deprecated as an API", DeprecationWarning)
    warnings.warn("You are using a Python version (3.11) which Google will stop supporting", FutureWarning)
    logging.getLogger("kafka.conn").warning("a broker is away")
    raise ValueError("stopped by the test")

collect.build = build
sys.exit(cli.main(sys.argv[1:]))
"""


def command(tmp_path, *argv) -> str:
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CONFIG))
    out = subprocess.run([sys.executable, "-c", SCRIPT, *argv], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    return out.stdout + out.stderr


COLLECT = ["collect", "--config", "c.json", "--kafka", "127.0.0.1:9092", "--topic", "t"]


def test_quiet_by_default_the_commands_own_lines_and_warnings_kept(tmp_path):
    out = command(tmp_path, *COLLECT)
    assert "connecting to" not in out and "Job state changed" not in out
    assert "deprecated" not in out and "Google will stop" not in out
    assert "read back 3 requests" in out and "a broker is away" in out   # its own INFO, a library's WARNING
    assert "collect: error: stopped by the test" in out


@pytest.mark.parametrize("where", ["before", "after"])
def test_v_brings_them_back(tmp_path, where):
    argv = ["-v", *COLLECT] if where == "before" else [*COLLECT, "-v"]
    out = command(tmp_path, *argv)
    assert "connecting to 127.0.0.1:9092" in out and "Job state changed to RUNNING" in out
    assert "DeprecationWarning: pkg_resources is deprecated" in out and "Google will stop" in out
