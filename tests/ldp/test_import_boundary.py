import subprocess
import sys


def test_importing_ldp_does_not_import_beam():
    code = ("import sys, pkgutil, importlib, ldp\n"
            "for m in pkgutil.iter_modules(ldp.__path__): importlib.import_module('ldp.' + m.name)\n"
            "print('apache_beam' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_check_would_see_beam():
    # the probe above is not vacuous: importing Beam does show up in sys.modules
    code = "import sys, apache_beam\nprint('apache_beam' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
