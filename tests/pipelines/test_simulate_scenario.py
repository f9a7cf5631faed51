"""The simulator's evaluation levers (issue 40 item 5): fixed prevalences, and a change at a time in
one feature for one dimension value, with the truth file that says so."""
import json
import subprocess
import sys

import numpy as np
import pytest

from ldp_marginals.pipelines.demo import DEMO_CONFIG
from ldp_marginals.pipelines.simulate import (
    DEFAULT_START_MS, parse_change, parse_prevalence, simulate_population,
)
from ldp_marginals.schemas.config import parse_config

CFG = parse_config(DEMO_CONFIG)
HOUR = 3_600_000


def test_prevalences_are_what_was_asked():
    pop = simulate_population(CFG, 20_000, seed=3, prevalences={
        "dark_mode": 0.3, "os": {"mac": 0.5, "win": 0.3, "linux": 0.2}})
    labels = CFG.layout.labels
    col = lambda label: pop.true_bits[:, labels.index(label)]  # noqa: E731
    assert col("dark_mode").mean() == pytest.approx(0.3, abs=1e-4)          # a quantile: exact up to ties
    # categorical shares by fixed-point offsets: within 2e-3 of the ask
    for value, share in (("mac", 0.5), ("win", 0.3), ("linux", 0.2)):
        assert col(f"os={value}").mean() == pytest.approx(share, abs=2e-3)
    # the latent factor still correlates the features
    assert abs(np.corrcoef(col("dark_mode"), col("beta_search"))[0, 1]) > 0.02


def test_without_a_scenario_the_draws_are_unchanged_and_a_change_touches_only_its_reports():
    dims = [("region", [("eu", 0.5), ("us", 0.5)])]
    base = simulate_population(CFG, 8000, seed=5, dimensions=dims)
    again = simulate_population(CFG, 8000, seed=5, dimensions=dims, prevalences={})
    np.testing.assert_array_equal(base.noisy, again.noisy)
    at = DEFAULT_START_MS + 2 * HOUR
    moved = simulate_population(CFG, 8000, seed=5, dimensions=dims,
                                change=parse_change("dark_mode=0.9", at, "region=eu"))
    hit = (base.event_ms >= at) & (base.dimensions["region"] == "eu")
    np.testing.assert_array_equal(moved.noisy[~hit], base.noisy[~hit])
    np.testing.assert_array_equal(moved.true_bits[~hit], base.true_bits[~hit])
    bit = CFG.layout.bit_index("dark_mode")
    assert moved.true_bits[hit, bit].mean() == pytest.approx(0.9, abs=1e-3)
    assert base.true_bits[hit, bit].mean() < 0.7
    others = [i for i in range(CFG.layout.n_bits) if i != bit]
    np.testing.assert_array_equal(moved.true_bits[:, others], base.true_bits[:, others])


def test_bad_scenarios_are_refused_by_name():
    with pytest.raises(ValueError, match="a share must be in"):
        parse_prevalence("dark_mode=1.5")
    with pytest.raises(ValueError, match="no feature 'dark'"):
        simulate_population(CFG, 10, prevalences={"dark": 0.2})
    with pytest.raises(ValueError, match="give every value of"):
        simulate_population(CFG, 10, prevalences={"os": {"mac": 0.5, "win": 0.5}})
    with pytest.raises(ValueError, match="--change os: takes a boolean feature"):
        simulate_population(CFG, 10, change=parse_change("os=0.5", 0))
    with pytest.raises(ValueError, match="pass --dimension region"):
        simulate_population(CFG, 10, change=parse_change("dark_mode=0.5", 0, "region=eu"))


def test_the_command_writes_the_truth_of_the_scenario(tmp_path):
    import yaml
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(DEMO_CONFIG))
    out = tmp_path / "r.avro"
    at = DEFAULT_START_MS + 2 * HOUR
    cmd = [sys.executable, "-m", "ldp_marginals.pipelines.cli", "simulate", "--config", str(cfg), "--reports", "6000",
           "--out", str(out), "--seed", "2", "--dimension", "region=eu,us", "--prevalence", "dark_mode=0.2",
           "--change", "dark_mode=0.8", "--change-at", str(at), "--change-where", "region=eu"]
    subprocess.run(cmd, check=True, capture_output=True)
    truth = json.loads((tmp_path / "r.avro.truth.json").read_text())
    assert truth["scenario"] == {"prevalences": {"dark_mode": 0.2},
                                 "change": {"feature": "dark_mode", "prevalence": 0.8, "at_ms": at, "where": {"region": "eu"}}}
    ones, n = {}, {}
    for w in truth["windows"]:       # windows are hours; the change starts at one's start
        i = w["sets"].index([CFG.layout.bit_index("dark_mode")])
        key = (w["window_start"] >= at, w["dimensions"]["region"])
        ones[key] = ones.get(key, 0) + w["counts"][i]
        n[key] = n.get(key, 0) + w["n_reports"]
    share = {key: ones[key] / n[key] for key in n}
    assert share[(True, "eu")] == pytest.approx(0.8, abs=0.01)
    assert share[(False, "eu")] < 0.35 and share[(True, "us")] < 0.35
    bad = subprocess.run(cmd[:-6] + ["--change-at", str(at)], capture_output=True, text=True)
    assert bad.returncode == 2 and "--change-at and --change-where need --change" in bad.stderr
