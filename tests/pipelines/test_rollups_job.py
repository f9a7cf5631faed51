"""Rollups through the batch job and ``read`` (issue 37, item 2): the job publishes a rollup over
withheld keys and withholds one that would single out a key's reports; a collection publishes its keys' rows the same with and without rollups; ``read`` selects a
rollup by its dimensions (or keys holding them where there is no rollup), and the exact key with
``exact``; ``compare`` and the dashboard never compare a rollup with a key it holds; the dashboard
selects a rollup like a key."""
import argparse
import json
from pathlib import Path

import pytest
import yaml

import ldp_marginals
from ldp_marginals.pipelines.compare import add_compare_arguments, compare
from ldp_marginals.pipelines.dashboard.view import FileCache, parse_selection, view
from ldp_marginals.pipelines.run import run
from ldp_marginals.pipelines.simulate import simulate_population, write_population
from ldp_marginals.schemas.config import parse_config

CONFIG = {"collection": "app", "features": [{"name": f"f{i}", "type": "boolean"} for i in range(3)],
          "channel": {"mechanism": "symmetric", "epsilon": 2.0}, "max_order": 1, "min_reports": 50,
          "window": {"type": "fixed", "size_seconds": 3600},
          "dimensions": {"region": {"max_values": 4}, "version": {"max_values": 8}}}
ROLLUPS = [["region"]]
# (eu, 3.0) and (eu, 4.0) are withheld, 50 together: eu's rollup holds them; (us, 2.0) is withheld alone,
# so us's rollup minus its published key would be its 10 reports: the rollup is withheld
KEYS = {("eu", "1.0"): 120, ("eu", "2.0"): 90, ("eu", "3.0"): 20, ("eu", "4.0"): 30, ("us", "1.0"): 100,
        ("us", "2.0"): 10}
ALL = "__all__"


@pytest.fixture(scope="module")
def outs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rollups")
    cfg = parse_config(CONFIG)
    for i, ((region, version), n) in enumerate(KEYS.items()):
        pop = simulate_population(cfg, n, seed=90 + i, span_seconds=3599)
        write_population(cfg, pop, str(tmp / f"in-{i}.avro"), dimensions={"region": region, "version": version})
    out = {}
    for name, spec in (("plain", CONFIG), ("rolled", dict(CONFIG, rollups=ROLLUPS))):
        (tmp / f"{name}.yaml").write_text(yaml.safe_dump(spec))
        run(["--config", str(tmp / f"{name}.yaml"), "--input", str(tmp / "in-*.avro"), "--output",
             str(tmp / name), "--progress-seconds", "0"])
        out[name] = str(tmp / name)
    return out


def keys_of(rows) -> set:
    return {tuple(sorted(r["dimensions"].items())) for r in rows}


def test_the_job_publishes_the_engines_rollups_and_the_same_key_rows(outs):
    rolled = ldp_marginals.read_rows(outs["rolled"], "marginals")
    plain = ldp_marginals.read_rows(outs["plain"], "marginals")
    assert keys_of(rolled) - keys_of(plain) == {(("region", "eu"), ("version", ALL))}   # us's is withheld
    key = lambda r: (json.dumps(r["dimensions"], sort_keys=True), r["columns"])   # noqa: E731
    assert sorted((r for r in rolled if ALL not in r["dimensions"].values()), key=key) == sorted(plain, key=key)
    (eu,) = [r for r in rolled if r["dimensions"] == {"region": "eu", "version": ALL} and r["columns"] == [0]]
    assert eu["n_reports"] == 120 + 90 + 20 + 30
    # the job's rows are the engine's, whose rollups the publication rule's checks cover
    assert ldp_marginals.read_rows(outs["rolled"], "withheld") == ldp_marginals.read_rows(outs["plain"], "withheld")


def test_read_selects_the_rollup_by_its_dimensions_and_keys_where_there_is_none(outs):
    out = outs["rolled"]
    eu = ldp_marginals.read_rows(out, "marginals", dimensions={"region": "eu"})
    assert keys_of(eu) == {(("region", "eu"), ("version", ALL))}
    # no rollup over version: every key holding it, without rollup rows
    v1 = ldp_marginals.read_rows(out, "marginals", dimensions={"version": "1.0"})
    assert keys_of(v1) == {(("region", "eu"), ("version", "1.0")), (("region", "us"), ("version", "1.0"))}
    # us's rollup is withheld: its published key is what there is
    assert keys_of(ldp_marginals.read_rows(out, "marginals", dimensions={"region": "us"})) == {
        (("region", "us"), ("version", "1.0"))}
    with pytest.raises(ValueError, match="matches no key"):
        ldp_marginals.read(out, "marginals", dimensions={"region": "us"}, exact=True)
    assert keys_of(ldp_marginals.read_rows(out, "marginals", dimensions={"region": "eu"}, exact=True)) == {
        (("region", "eu"), ("version", ALL))}
    whole = {"region": "eu", "version": "2.0"}
    assert keys_of(ldp_marginals.read_rows(out, "marginals", dimensions=whole, exact=True)) == {
        (("region", "eu"), ("version", "2.0"))}


def test_compare_refuses_a_rollup_against_a_key_it_sums(outs):
    with pytest.raises(ValueError, match="a rollup row"):
        compare(parse(["--estimates", outs["rolled"], "--dimension", f"version={ALL},1.0"]))
    # two regions' rollups pair with each other (their version is __all__ on both sides)
    out = compare(parse(["--estimates", outs["rolled"], "--dimension", "region=eu,us"]))
    assert {json.dumps(c["dimensions"], sort_keys=True) for c in out["changes"]} == {
        json.dumps({"version": "1.0"})}   # us's rollup is withheld: the keys of version 1.0 pair


def parse(argv):
    parser = argparse.ArgumentParser()
    add_compare_arguments(parser)
    return parser.parse_args(argv)


def test_the_dashboard_selects_a_rollup_and_never_compares_it_with_a_key_it_holds(outs):
    out = outs["rolled"]
    eu = {"region": "eu", "version": ALL}
    data = view(out, parse_selection({"dims": json.dumps(eu)}), FileCache(out))
    assert data["dims"] == eu and eu in data["keys"]
    assert data["marginals"] and all(r["dimensions"] == eu for r in data["marginals"])
    assert {c["versus"] for c in data["changes"]} == set()   # one window; no region rollup to compare with
    key = view(out, parse_selection({"dims": json.dumps({"region": "eu", "version": "1.0"})}), FileCache(out))
    assert {c["versus"] for c in key["changes"]} == {"region=us", "version=2.0"}


def test_a_rerun_beside_rollups_is_refused_by_the_release_ledger(outs, tmp_path):
    """The release ledger does not cover rollup rows (a rollup sums what its keys withhold, the ledger's
    withheld slices included): a batch rerun into an output holding releases of a collection with
    rollups, or of a collection that now declares them, is refused; a new output publishes."""
    tmp = tmp_path
    (tmp / "rolled.yaml").write_text(yaml.safe_dump(dict(CONFIG, rollups=ROLLUPS)))
    (tmp / "plain.yaml").write_text(yaml.safe_dump(CONFIG))
    inputs = str(Path(outs["rolled"]).parent / "in-*.avro")
    for config, output in (("rolled", outs["rolled"]), ("plain", outs["rolled"]), ("rolled", outs["plain"])):
        with pytest.raises(ValueError, match="rollups, which the release ledger does not cover"):
            run(["--config", str(tmp / f"{config}.yaml"), "--input", inputs, "--output", output,
                 "--progress-seconds", "0"])
    summary = run(["--config", str(tmp / "rolled.yaml"), "--input", inputs, "--output", str(tmp / "again"),
                   "--progress-seconds", "0"])
    assert summary["reports_counted"] == sum(KEYS.values())


def test_rollups_with_the_device_unit_are_accepted_on_fixed_windows_and_refused_on_sliding_ones():
    """Under the device unit rollups count devices (tests/pipelines/test_rollups_device.py); a sliding
    window stays refused, as under the report unit: overlapping windows would difference a rollup."""
    spec = dict(CONFIG, rollups=ROLLUPS, privacy={"unit": "device", "max_reports_per_device": 1})
    assert parse_config(spec).rollups == (("region",),)
    with pytest.raises(ValueError, match="rollups need fixed or global windows, got a sliding window"):
        parse_config(dict(spec, window={"type": "sliding", "size_seconds": 7200, "period_seconds": 3600}))
