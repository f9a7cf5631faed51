"""Import boundaries, checked in fresh interpreters: the math core never imports Beam (nor scipy or
numba until a function needs them), and the command's subcommands other than ``run`` (and
``demo``, which runs the job) work without Beam."""
import json
import subprocess
import sys

import yaml

from tests.configs import SMALL_CONFIG

HEAVY = ("apache_beam", "scipy", "numba")


def loaded_after(code: str) -> dict:
    """Which of the heavy packages ``code`` leaves in ``sys.modules`` of a fresh interpreter."""
    probe = code + f"\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_every_module_of_the_core_imports_neither_beam_nor_scipy_nor_numba():
    code = ("import importlib, pkgutil, ldp_marginals.ldp as core\n"
            "for m in pkgutil.iter_modules(core.__path__):\n"
            "    if m.name != '_kernels':  # the numba kernels, imported on first use by _compiled\n"
            "        importlib.import_module('ldp_marginals.ldp.' + m.name)\n")
    assert loaded_after(code) == {"apache_beam": False, "scipy": False, "numba": False}


def test_the_publication_engine_and_the_report_checks_do_not_import_beam():
    """The release rule, the rows, the cap, the pane state machine and its state, and the table of
    report checks: Beam-free, so the property tests drive them directly."""
    code = ("import importlib, pkgutil, ldp_marginals.transforms.publication as engine\n"
            "for m in pkgutil.iter_modules(engine.__path__):\n"
            "    importlib.import_module('ldp_marginals.transforms.publication.' + m.name)\n"
            "import ldp_marginals.transforms.checks\n")
    assert not loaded_after(code)["apache_beam"]


def test_the_dashboard_and_the_contracts_do_not_import_beam():
    code = ("import importlib, pkgutil, ldp_marginals.pipelines.dashboard as dashboard\n"
            "for m in pkgutil.iter_modules(dashboard.__path__):\n"
            "    importlib.import_module('ldp_marginals.pipelines.dashboard.' + m.name)\n"
            "import ldp_marginals.schemas.outputs, ldp_marginals.schemas.config\n")
    assert not loaded_after(code)["apache_beam"]


def test_subcommands_other_than_run_do_not_import_beam(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(SMALL_CONFIG))
    calls = [["--help"], ["calibrate", "--help"],
             ["calibrate", "--bits", "5", "--population", "1000", "--epsilon", "1", "--json"],
             ["simulate", "--config", str(config), "--reports", "50", "--out", str(tmp_path / "r.avro")],
             ["plan", "--config", str(config), "--reports-per-window", "1000", "--json"],
             ["dashboard", "--help"], ["demo", "--help"], ["produce", "--help"]]
    for argv in calls:
        code = ("from ldp_marginals.pipelines.cli import main\n"
                f"try:\n    main({argv!r})\nexcept SystemExit as e:\n    assert e.code in (0, None), e.code\n")
        assert not loaded_after(code)["apache_beam"], argv
    assert (tmp_path / "r.avro").exists()


def test_the_probe_sees_each_package_when_it_is_imported():
    # the checks above are not vacuous: importing each package does show up
    assert all(loaded_after("import apache_beam, scipy.stats, numba").values())
    assert loaded_after("import ldp_marginals.pipelines.run")["apache_beam"]
