"""plan with channel kinds (pipelines/plan_kinds.py): a Hadamard-sampling or subset-RR collection's half-widths
are its closed-form worst case, and for a stated local promise plan names the kind with the lowest worst-case
table variance, every figure printed (the best kind is hadamard up to epsilon 2 and subset at 4 and 8 at
d = 7, k = 3)."""
import argparse

import numpy as np
import pytest
import yaml

from ldp_marginals.ldp.hadamard import HadamardEstimate, HadamardSampling
from ldp_marginals.ldp.hadamard_reports import cell_variance_per_report
from ldp_marginals.ldp.intervals import sidak_level
from ldp_marginals.ldp.mechanism_choice import candidates
from ldp_marginals.ldp.planning import half_width_of
from ldp_marginals.pipelines.plan import plan, render

FEATURES = [{"name": f"a{i}", "type": "boolean"} for i in range(7)]


def config(channel, epsilon, **extra):
    return dict({"collection": "gss", "features": FEATURES, "channel": channel, "max_order": 3,
                 "window": {"type": "fixed", "size_seconds": 86400}, "min_reports": 1000,
                 "privacy": {"model": "local", "epsilon": epsilon}}, **extra)


def run(tmp_path, spec, **options):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    args = argparse.Namespace(config=str(tmp_path / "c.yaml"), reports_per_window=options.get("n", 33144),
                              frequency=options.get("frequency", []), target_half_width=0.02,
                              target_mean_half_width=[], json=True,
                              outlook=False)   # the outlook on withholding: tests/pipelines/test_plan_outlook.py
    return plan(args)


def test_cell_figure_is_the_estimators_variance_at_theta_zero():
    mech = HadamardSampling(7, 3, 4.0)
    big_n = 10 ** 9
    est = HadamardEstimate(mech, big_n, np.r_[0.0, big_n * mech.slots * mech.probabilities],
                           np.r_[1.0, np.zeros(mech.n_coefficients)])
    for o in (1, 2, 3):
        table = est.table(tuple(range(o)))
        np.testing.assert_allclose(table.variances / big_n, cell_variance_per_report(mech, o), rtol=1e-6)


def test_a_hadamard_collections_plan(tmp_path):
    out = run(tmp_path, config({"kind": "hadamard", "epsilon": 2.0}, 2.0, groups=[["a0", "a1"]],
                               marginal_interval="simultaneous"))
    (coll,) = out["collections"]
    mech = HadamardSampling(7, 3, 2.0)
    level = sidak_level(0.95, 63)
    assert len(coll["sets"]) == 63
    for r in coll["sets"]:
        assert r["half_width"]["worst"] == pytest.approx(
            half_width_of(cell_variance_per_report(mech, len(r["columns"])) / 33144, level))
    assert [r["cell"] for r in coll["cells"]] == [["false", "false"], ["false", "true"], ["true", "false"],
                                                  ["true", "true"]]
    assert coll["cells"][0]["half_width"]["worst"] == pytest.approx(
        half_width_of(cell_variance_per_report(mech, 2) / 33144, 0.95))
    assert coll["privacy"]["local_epsilon"] == 2.0
    with pytest.raises(ValueError, match="--frequency is for per-bit channels"):
        run(tmp_path, config({"kind": "hadamard", "epsilon": 2.0}, 2.0), frequency=[0.1])


@pytest.mark.parametrize("epsilon,best", [(0.5, "hadamard"), (2.0, "hadamard"), (4.0, "subset"), (8.0, "subset")])
def test_plan_picks_the_best_kind_for_the_promise(tmp_path, epsilon, best):
    figures = {c.name: c.variance_per_report for c in candidates(7, 3, epsilon)}
    assert best == {"hadamard": "hadamard", "subset-rr": "subset"}[min(figures, key=figures.get)]
    for channel, current in (({"kind": "hadamard", "epsilon": epsilon}, "hadamard"),
                             ({"kind": "subset", "epsilon": epsilon}, "subset"),
                             ({"mechanism": "symmetric", "epsilon": epsilon / 7}, "per_bit")):
        out = run(tmp_path, config(channel, epsilon))
        m = out["collections"][0]["mechanism"]
        assert m["best"] == best and m["current"] == current
        got = {c["kind"]: c["variance_per_report"] for c in m["candidates"]}
        assert got == pytest.approx({"hadamard": figures["hadamard"], "per_bit": figures["per-bit"],
                                     "subset": figures["subset-rr"]})
        assert m["ratio"] == pytest.approx(sorted(got.values())[1] / min(got.values()))
        assert m["current_ratio"] == pytest.approx(got[current] / got[best])
        text = render(out)
        assert "Hadamard sampling" in text and "per-bit RR" in text and "subset RR (s=" in text
        assert f"channel: {{kind: {best}, epsilon: {epsilon:g}}}  <- best" in text
        assert ("uses the best kind" in text) == (current == best)
    # the kind plan recommends is one the config accepts as written
    (rec,) = [c for c in m["candidates"] if c["kind"] == best]
    assert run(tmp_path, config(rec["channel"], epsilon))["collections"][0]["mechanism"]["current"] == best


def test_no_comparison_without_a_stated_local_epsilon(tmp_path):
    spec = config({"mechanism": "symmetric", "epsilon": 0.5}, 1.0)
    del spec["privacy"]
    m = run(tmp_path, spec)["collections"][0]["mechanism"]
    assert m == {"reason": m["reason"]} and "privacy: {model: local, epsilon: E}" in m["reason"]


def test_calibrate_states_the_kind_its_promise_and_the_choice(tmp_path):
    from ldp_marginals.pipelines.calibrate import from_config, render_config
    specs = [config({"kind": "hadamard", "epsilon": 2.0}, 1.0),                      # promise below the channel
             dict(config({"mechanism": "symmetric", "epsilon": 8 / 7}, 8.0), collection="per_bit")]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(specs))
    args = argparse.Namespace(config=str(tmp_path / "c.yaml"), epsilon=1.0, eta=0.01, bits=None, population=None,
                              flip=None)
    had, bit = sorted(from_config(args), key=lambda r: r["collection"])
    assert (had["kind"], had["local_epsilon"], had["promise_kept"], had["sufficient_crowd"]) == ("hadamard", 2.0,
                                                                                                  False, None)
    assert had["mechanism"]["best"] == "hadamard" and bit["mechanism"]["best"] == "subset"
    assert bit["kind"] == "per_bit" and bit["local_epsilon"] == pytest.approx(8.0)
    text = render_config([had, bit])
    assert "NOT kept: a whole report's epsilon is 2; lower channel.epsilon" in text
    assert "sufficient DP: not for this kind" in text
    assert "this collection uses per_bit: subset would give a 161x lower variance" in text
    assert "this collection uses the best kind (hadamard)" in text


def test_a_subset_collections_plan_and_calibrate(tmp_path):
    """The half-widths are the worst case of one cell at N reports (subset_reports.cell_variance_per_report, not
    the table trace over its cells); calibrate names the kind, its width and keep, and the choice."""
    from ldp_marginals.ldp.subset_reports import cell_variance_per_report
    from ldp_marginals.ldp.subset_rr import SubsetRR
    from ldp_marginals.pipelines.calibrate import from_config, render_config
    out = run(tmp_path, config({"kind": "subset", "epsilon": 4.0}, 4.0, groups=[["a0", "a1", "a2"]]))
    (coll,) = out["collections"]
    mech = SubsetRR(7, 3, 4.0)
    assert len(coll["sets"]) == 63
    for r in coll["sets"]:
        assert r["half_width"]["worst"] == pytest.approx(
            half_width_of(cell_variance_per_report(mech, len(r["columns"])) / 33144, 0.95))
    assert len(coll["cells"]) == 8 and coll["cells"][0]["half_width"]["worst"] == pytest.approx(
        half_width_of(cell_variance_per_report(mech, 3) / 33144, 0.95))
    assert cell_variance_per_report(mech, 3) > mech.table_variance_per_report(3) / 8
    assert coll["mechanism"]["best"] == coll["mechanism"]["current"] == "subset"
    with pytest.raises(ValueError, match="uses channel kind subset"):
        run(tmp_path, config({"kind": "subset", "epsilon": 4.0}, 4.0), frequency=[0.1])
    args = argparse.Namespace(config=str(tmp_path / "c.yaml"), epsilon=None, eta=0.01, bits=None, population=None,
                              flip=None)
    (row,) = from_config(args)
    assert (row["kind"], row["local_epsilon"], row["promise_kept"]) == ("subset", 4.0, True)
    text = render_config([row])
    assert "subset randomized response over 7 bits (a subset of 6 a report" in text
    assert "this collection uses the best kind (subset)" in text


def _pasted(spec: dict, line: str) -> dict:
    """``spec`` with the config line plan printed (``channel: {...}``) pasted in."""
    return dict(spec, **yaml.safe_load(line))


@pytest.mark.parametrize("privacy,dims", [
    ({"unit": "device", "max_reports_per_device": 1}, {}),                       # kinds refused the device unit
    ({"unit": "device"}, {"region": {"max_values": 10}}),
    ({}, {}),                                                                     # report unit: nothing refused
])
def test_plan_and_calibrate_recommend_only_what_the_job_accepts(tmp_path, capsys, privacy, dims):
    """Issue 48: plan recommended subset ('140x lower variance') for a device-unit config, and the job then
    refused subset with the device unit. Now the kind plan and calibrate name as best is accepted by the
    job in batch, with the config line to paste. On main (aa13bc9) the device-unit cases failed: best was
    'subset' at epsilon 4 (7 booleans, max_order 3), whose pasted config the job refused
    ('privacy.unit must be 'report' with channel kind 'subset'')."""
    from ldp_marginals.pipelines import cli
    from tests.schemas.composition_probe import check_cell
    spec = config({"mechanism": "symmetric", "epsilon": 4.0 / 7}, 4.0,
                  **({"dimensions": dims} if dims else {}))
    spec["privacy"] = dict(spec["privacy"], **privacy)
    m = run(tmp_path, spec)["collections"][0]["mechanism"]
    assert m["best"] is not None and m["best_any"] == "subset"
    best = next(c for c in m["candidates"] if c["kind"] == m["best"])
    assert check_cell(_pasted(spec, best["paste"]), False) is None
    for c in m["candidates"]:   # every candidate's verdict is the job's
        assert (check_cell(_pasted(spec, c["paste"]), False) is None) == (c["refused_batch"] is None), c["kind"]
        assert (check_cell(_pasted(spec, c["paste"]), True) is None) == (c["refused_streaming"] is None), c["kind"]
    text = render(run(tmp_path, spec))
    assert (best["paste"] in text) == (m["best"] != m["current"])
    # issue 48 item 2 (P-A): the kinds take the device unit, so subset is best and accepted for every case
    assert m["best"] == "subset" and f"    {best['paste']}" in text
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    assert cli.main(["calibrate", "--config", str(tmp_path / "c.yaml"), "--json"]) == 0
    import json
    (row,) = json.loads(capsys.readouterr().out)   # calibrate --config --json: one row per collection
    assert row["mechanism"]["best"] == m["best"] and row["mechanism"]["paste"] == m["paste"]


def test_plan_compares_the_kinds_for_numeric_features_and_recommends_one_the_job_accepts(tmp_path):
    """A numeric feature (its 1-bit encoding) with its mean and a conditional: the kinds serve them
    (ldp/kind_analyses.py), so plan compares them and the kind it recommends is accepted in batch and
    streaming. Failed on main: 'the comparison takes boolean features only'."""
    spec = config({"mechanism": "symmetric", "epsilon": 0.25}, 2.0,
                  features=FEATURES + [{"name": "x", "type": "numeric", "low": 0, "high": 10}],
                  means=[{"of": "x", "given": ["a0"]}], conditionals=[{"of": ["a1"], "given": ["a2"]}])
    m = run(tmp_path, spec)["collections"][0]["mechanism"]
    assert m["reason"] is None and m["best"] == "hadamard" and m["current"] == "per_bit"
    (rec,) = [c for c in m["candidates"] if c["kind"] == "hadamard"]
    assert rec["refused_batch"] is None and rec["refused_streaming"] is None
    assert run(tmp_path, dict(spec, channel=rec["channel"]))["collections"][0]["mechanism"]["current"] == "hadamard"


@pytest.mark.parametrize("kind", ["hadamard", "subset"])
def test_plan_states_the_pool_of_extra_sets(tmp_path, kind):
    """Issue 48 item 1: a conditional over 4 bits at max_order 3 is an extra set of the kind. plan's rows hold
    its set, with the figure of the mechanism that counts it (hadamard: a pool of 63 + 5 coefficients, every
    weight diluted, so even a pair's figure grows; subset: a width of at least 4), and its comparison of the
    kinds builds each with the extra set. Failed before: the config was refused (kind-analyses-over-order)."""
    from ldp_marginals.ldp.channel_kind import channel_kind
    from ldp_marginals.ldp.subset_rr import SubsetRR
    cond = {"conditionals": [{"of": ["a0"], "given": ["a1", "a2", "a3"]}]}
    out = run(tmp_path, config({"kind": kind, "epsilon": 2.0}, 2.0, **cond))
    (coll,) = out["collections"]
    mech = (HadamardSampling(7, 3, 2.0, sets=[(0, 1, 2, 3)]) if kind == "hadamard"
            else SubsetRR(7, 3, 2.0, sets=[(0, 1, 2, 3)]))
    plain = HadamardSampling(7, 3, 2.0) if kind == "hadamard" else SubsetRR(7, 3, 2.0)
    figure = channel_kind(kind).cell_variance_per_report
    rows = {tuple(r["columns"]): r for r in coll["sets"]}
    assert len(rows) == 64 and (0, 1, 2, 3) in rows
    for cols in ((0, 1), (0, 1, 2, 3)):
        assert rows[cols]["half_width"]["worst"] == pytest.approx(half_width_of(figure(mech, len(cols)) / 33144, 0.95))
    if kind == "hadamard":   # the pool's growth
        assert figure(mech, 2) > figure(plain, 2)
    else:                    # the best width at epsilon 2 is 4 already: the same figure
        assert mech.width == plain.width == 4 and figure(mech, 2) == figure(plain, 2)
    figures = {c["kind"]: c["variance_per_report"] for c in coll["mechanism"]["candidates"]}
    assert figures[kind] == pytest.approx(mech.table_variance_per_report(3))


def test_plan_without_a_traffic_figure_still_picks_and_states_its_assumption(tmp_path, capsys):
    """Issue 49 item 7: ``plan --config C`` printed no pick (an error: it needed --reports-per-window). The
    pick does not depend on N; the half-widths are at an assumed N, stated in the first line."""
    from ldp_marginals.pipelines import cli
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config({"mechanism": "symmetric", "epsilon": 4.0 / 7}, 4.0,
                                                           min_reports=20_000)))
    assert cli.main(["plan", "--config", str(tmp_path / "c.yaml")]) == 0
    text = capsys.readouterr().out
    assert text.startswith("no --reports-per-window N or --target-half-width H given: assuming N=20,000 reports per "
                           "window and key (at least 10,000, and every collection's min_reports)")
    # the lowest variance, subset s=6, rests its marginals on 6/7 of the reports: under min_reports 20,000 at
    # N = 20,000 the outlook withholds them and picks the width that publishes
    assert "<- lowest variance the job accepts (before withholding: the pick is below)" in text
    assert "recommended: subset RR (s=7), the lowest variance whose rows publish" in text
