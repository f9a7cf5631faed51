"""What CI runs: `.ci/run` runs `make test`, which runs pytest with Hypothesis derandomized."""
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]


def test_make_test_runs_hypothesis_derandomized_and_untimed():
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "-m pytest --hypothesis-profile=ci" in recipe
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("\nmake test")
    ci, dev = settings.get_profile("ci"), settings.get_profile("dev")
    assert ci.derandomize and ci.database is None and not dev.derandomize
    assert ci.deadline is None and dev.deadline is None   # no test asserts wall-clock times


def test_the_ci_profile_tries_the_same_examples_every_run():
    runs = []
    for _ in range(2):
        seen = []

        @settings(settings.get_profile("ci"), max_examples=30)
        @given(st.integers(), st.text())
        def record(number, text):
            seen.append((number, text))
        record()
        runs.append(seen)
    assert runs[0] == runs[1] and len(set(runs[0])) > 10
