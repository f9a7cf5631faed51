"""`pip install .` must carry what the job needs at run time: the Avro schemas and the command."""
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contains_schemas_and_the_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    wheel = next(tmp_path.glob("ldp_marginals-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for schema in ("noisy_report", "marginal_estimate", "extreme_estimate", "table_cell", "withheld_window",
                   "dead_letter"):
        assert f"schemas/{schema}.avsc" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ldp-marginals = pipelines.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    assert not any(n.startswith("tests/") for n in names)
