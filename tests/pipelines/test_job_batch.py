
import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

from ldp_marginals import schemas
from ldp_marginals.ldp.cooccurrence import CooccurrenceAccumulator
from ldp_marginals.ldp.extremes import ExtremeAccumulator
from ldp_marginals.ldp.tmdh import estimate_tmdh
from ldp_marginals.pipelines.job import JobOptions, build
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.transforms.blocks import ReadReportFilesFast
from ldp_marginals.transforms.reports import ReadNoisyReportFiles


class Shards(beam.PTransform):
    """Several Create shards flattened: the runner must merge accumulators across them."""

    def __init__(self, records, n_shards=4):
        super().__init__()
        self.records = records
        self.n_shards = n_shards

    def expand(self, pbegin):
        parts = [pbegin | f"Shard{i}" >> beam.Create(self.records[i::self.n_shards]) for i in range(self.n_shards)]
        return parts | "FlattenShards" >> beam.Flatten()


def core_rows(config, pop, records):
    """Expected rows computed with ldp directly, window by window."""
    marg, withheld, extremes = [], [], []
    packed = pop.noisy
    bits = np.unpackbits(packed, axis=1, bitorder="little")[:, :config.layout.n_bits]
    for (start, end), idx in config.window.assign(pop.event_ms):
        base = {"collection": config.name, "window_start": start, "window_end": end, "dimensions": {}}
        if len(idx) < config.min_reports:   # the guard holds the whole window back
            withheld.append(dict(base, n_reports=len(idx), min_reports=config.min_reports, cause="privacy",
                                 statistic="all", reason=f"{len(idx)} reports < min_reports={config.min_reports}",
                                 pane_index=0, pane_timing="ON_TIME", final=True, rollup=False))   # batch: one pane
            continue
        est = estimate_tmdh(CooccurrenceAccumulator(config.family).add_packed(packed[idx]), config.channels)
        low, high = est.intervals(config.level)
        for i, s in enumerate(config.family):
            # a set of two values of one categorical feature is 0 by construction: never published
            if s and not any(len(set(s) & set(g)) > 1 for g in config.layout.exclusive_groups):
                marg.append((start, tuple(s), est.means[i], est.variances[i], low[i], high[i], len(idx)))
        for ext in config.report_extremes:
            cols = list(ext.bits)
            acc = ExtremeAccumulator(ext.op, (len(idx),)).add(bits[idx][:, cols].T, config.channels.p[cols][:, None],
                                                              config.channels.q[cols][:, None])
            extremes.append((start, ext.name, acc.estimate().sum(), acc.variance().sum()))
    return marg, withheld, extremes


def test_batch_estimates_equal_the_core_on_the_same_reports(small_config):
    pop = simulate_population(small_config, 3000, seed=3, span_seconds=3.01 * 3600)  # last window is small
    records = list(report_records(small_config, pop))
    marg, withheld, extremes = core_rows(small_config, pop, records)
    assert withheld, "the simulation should leave a window below min_reports"
    with BeamTestPipeline() as p:
        outs = build(p, Shards(records), None, JobOptions({"app": small_config}))
        assert_that(outs["marginals"] | beam.Map(lambda r: (r["window_start"], tuple(r["columns"]), r["estimate"],
                                                            r["variance"], r["ci_low"], r["ci_high"], r["n_reports"])),
                    equal_to(marg), label="marginals")
        # the client extremes follow the client rule (tests/transforms/test_publication_rule.py): here the
        # simulated clients send a few reports a window, and the rarest count's clients are too few
        windowed = outs["withheld"] | beam.Filter(lambda r: r["statistic"] != "client_extremes")
        assert_that(windowed, equal_to(withheld), label="withheld")
        assert_that(outs["dead_letters"], equal_to([]), label="no dead letters")
        report_ext = outs["extremes"] | beam.Filter(lambda r: r["name"] != "active_client")
        assert_that(report_ext | beam.Map(lambda r: (r["window_start"], r["name"], round(r["estimate"], 6),
                                                     round(r["variance"], 6))),
                    equal_to([(s, n, round(e, 6), round(v, 6)) for s, n, e, v in extremes]), label="extremes")


def malformed_inputs(config):
    good = next(iter(report_records(config, simulate_population(config, 1, seed=1))))
    n_bytes = config.layout.n_bytes

    def bad(**changes):
        r = dict(good)
        r.update(changes)
        return r
    no_time = dict(good)
    del no_time["event_time"]
    return [
        (bad(collection="other"), "unknown_collection"),
        (bad(collection=7), "bad_field"),
        (bad(bits=b"\x00" * (n_bytes + 1)), "wrong_length"),
        (bad(bits=b"\xff" * n_bytes), "padding_bits"),  # 6 bits: bits 6 and 7 are padding
        (no_time, "bad_timestamp"),
        (bad(event_time=-5), "bad_timestamp"),
        (bad(event_time=7_000_000_000_000), "bad_timestamp"),
        (bad(event_time="yesterday"), "bad_timestamp"),
        (bad(bits="0101"), "bad_field"),
        (bad(dimensions={"version": 3}), "bad_field"),
        (bad(client=12), "bad_field"),
        (b"\x01\x02 not avro", "undecodable"),
        ("a string", "undecodable"),
        ((schemas.encode_message("noisy_report", good) + b"\x00", "kafka:t"), "undecodable"),  # trailing byte
    ], good


def test_every_malformed_kind_is_dead_lettered_and_totals_add_up(small_config):
    bad, good = malformed_inputs(small_config)
    goods = [dict(good, client=f"c{i}") for i in range(60)] + [  # dicts and Avro messages, of 65 clients
        schemas.encode_message("noisy_report", dict(good, client=f"m{i}")) for i in range(5)]
    inputs = [b for b, _ in bad] + goods
    with BeamTestPipeline() as p:
        outs = build(p, beam.Create(inputs), None, JobOptions({"app": small_config}))
        assert_that(outs["dead_letters"] | beam.Map(lambda d: d["reason"]), equal_to([r for _, r in bad]),
                    label="reasons")
        assert_that(outs["dead_letters"] | beam.Filter(lambda d: not d["detail"] or not d["source"]),
                    equal_to([]), label="every dead letter says why and where")
        counted = (outs["marginals"] | beam.Filter(lambda r: r["columns"] == [0])
                   | beam.Map(lambda r: r["n_reports"]) | beam.WindowInto(beam.window.GlobalWindows())
                   | beam.CombineGlobally(sum))
        assert_that(counted, equal_to([len(goods)]), label="counted")
    assert len(bad) + len(goods) == len(inputs)


@pytest.mark.parametrize("fast", [False, True], ids=["per_element", "block_reader"])
def test_unreadable_files_are_dead_lettered(small_config, tmp_path, fast):
    pop = simulate_population(small_config, 80, seed=4, span_seconds=600)  # one window
    schemas.write_avro(tmp_path / "good.avro", "noisy_report", report_records(small_config, pop))
    (tmp_path / "junk.avro").write_bytes(b"Obj\x01 this is not an avro container")
    data = (tmp_path / "good.avro").read_bytes()
    (tmp_path / "truncated.avro").write_bytes(data[: len(data) // 2])
    with BeamTestPipeline() as p:
        pattern = str(tmp_path / "*.avro")
        source = ReadReportFilesFast(pattern, {"app": small_config}) if fast else ReadNoisyReportFiles(pattern)
        outs = build(p, source, None, JobOptions({"app": small_config}))
        assert_that(outs["dead_letters"] | beam.Map(lambda d: (d["reason"], d["source"].split("/")[-1].split("#")[0])),
                    equal_to([("damaged_block", "junk.avro@0"), ("damaged_block", "truncated.avro@0")]), label="files")
        counted = (outs["marginals"] | beam.Filter(lambda r: r["columns"] == [0])
                   | beam.Map(lambda r: r["n_reports"]) | beam.WindowInto(beam.window.GlobalWindows())
                   | beam.CombineGlobally(sum))
        # all 80 good reports, plus whatever complete blocks of the truncated copy could be read
        assert_that(counted | beam.Map(lambda n: n >= 80), equal_to([True]), label="good file counted")


def job_rows(cfg, pop, *kinds):
    """The job's rows of ``kinds`` for a population's reports (one Create, batch)."""
    from tests.collect import Collected
    got = Collected()
    with BeamTestPipeline() as p:
        outs = build(p, beam.Create(list(report_records(cfg, pop))), None, JobOptions({cfg.name: cfg}))
        for kind in kinds:
            outs[kind] | got.into(kind)
    return got


def test_conditionals_equal_the_core_and_small_givens_are_withheld():
    from ldp_marginals.ldp.conditional import conditional
    from ldp_marginals.schemas.config import parse_config
    from tests.configs import SMALL_CONFIG
    cfg = parse_config(dict(SMALL_CONFIG, extremes=[], conditionals=[{"of": ["beta"], "given": ["os=mac"]},
                                                                    {"of": ["dark"], "given": ["sync"]}]))
    pop = simulate_population(cfg, 4000, seed=5, span_seconds=3600 * 0.99)  # one window
    got = job_rows(cfg, pop, "conditionals", "withheld")
    est = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_packed(pop.noisy), cfg.channels,
                        exclusive_groups=cfg.layout.exclusive_groups)
    published = {(tuple(r["of"]), tuple(r["given"])): r for r in got["conditionals"]}
    withheld = [r["reason"] for r in got["withheld"]]
    for of, given in cfg.conditionals:
        c = conditional(est, of, given, cfg.level, cfg.conditional_alpha)
        key = (tuple(cfg.layout.labels[b] for b in of), tuple(cfg.layout.labels[b] for b in given))
        if c.present:
            r = published[key]
            assert (r["estimate"], r["variance"], r["ci_low"], r["ci_high"]) == pytest.approx(
                (c.estimate, c.variance, c.ci_low, c.ci_high), rel=1e-9)
        else:
            assert any(f"P({key[0][0]} | {key[1][0]}) not published" in w for w in withheld)
    assert published  # at least one conditional is published at this size
    assert all(r["cause"] == "precision" and r["statistic"] == "conditional" for r in got["withheld"])
    # a tiny window: the condition is not shown to hold, so nothing is published, and the withheld row says why
    tiny = parse_config(dict(SMALL_CONFIG, extremes=[], min_reports=1,
                             conditionals=[{"of": ["beta"], "given": ["os=mac"]}]))
    few = simulate_population(tiny, 12, seed=6, span_seconds=60)
    got = job_rows(tiny, few, "conditionals", "withheld")
    assert got["conditionals"] == [] and any("P(beta | os=mac) not published" in r["reason"] for r in got["withheld"])


def test_means_of_numeric_features_equal_the_core_and_cover_the_truth():
    """A numeric feature publishes its mean and conditional means (not marginals of its encoded bit);
    the rows equal ldp.means on the window's counts; simultaneous marginal intervals are wider and
    labelled; a conditional mean over a tiny window is withheld with its reason."""
    from ldp_marginals.ldp.intervals import sidak_level
    from ldp_marginals.ldp.means import feature_mean
    from ldp_marginals.pipelines.simulate import true_counts
    from ldp_marginals.schemas.config import parse_config
    from tests.configs import SMALL_CONFIG
    spec = dict(SMALL_CONFIG, extremes=[], channel={"mechanism": "symmetric", "epsilon": 3.0},
                features=SMALL_CONFIG["features"] + [{"name": "minutes", "type": "numeric", "low": 0, "high": 60}],
                means=[{"of": "minutes", "by": ["os"]}], marginal_interval="simultaneous")
    cfg = parse_config(spec)
    pop = simulate_population(cfg, 6000, seed=8, span_seconds=3600 * 0.99)  # one window
    got = job_rows(cfg, pop, "means", "marginals")
    est = estimate_tmdh(CooccurrenceAccumulator(cfg.family).add_packed(pop.noisy), cfg.channels,
                        exclusive_groups=cfg.layout.exclusive_groups)
    truth = {tuple(m["given"]): m["mean"] for m in true_counts(cfg, pop)[0]["means"]}
    rows = {tuple(r["given"]): r for r in got["means"]}
    assert sorted(rows) == sorted(truth) == [(), ("os=linux",), ("os=mac",), ("os=win",)]
    for bit, given in cfg.means:
        m = feature_mean(est, bit, 0.0, 60.0, given, cfg.level)
        r = rows[tuple(cfg.layout.labels[b] for b in given)]
        assert (r["estimate"], r["variance"], r["ci_low"], r["ci_high"]) == pytest.approx(
            (m.estimate, m.variance, m.ci_low, m.ci_high), rel=1e-9)
        assert r["feature"] == "minutes" and (r["low"], r["high"]) == (0.0, 60.0) and r["n_reports"] == 6000
    # 4 intervals at 95% (seeded): a wrong estimate or variance misses more than one
    assert sum(r["ci_low"] <= truth[g] <= r["ci_high"] for g, r in rows.items()) >= 3
    # marginals: none holds the numeric bit; intervals hold jointly (Sidak over the published sets)
    marg = got["marginals"]
    assert marg and not any("minutes" in r["labels"] for r in marg)
    z = {r["interval"] for r in marg}
    assert z == {"simultaneous"}
    from scipy.stats import norm
    per_set = norm.ppf(1 - (1 - sidak_level(cfg.level, len(marg))) / 2)
    r = marg[0]
    assert (r["ci_high"] - r["ci_low"]) / 2 == pytest.approx(per_set * np.sqrt(r["variance"]), rel=1e-9)
    # a tiny window: the mean over all reports is published, the conditional means are withheld
    tiny = parse_config(dict(spec, min_reports=1, channel={"mechanism": "symmetric", "epsilon": 0.5}))
    few = simulate_population(tiny, 15, seed=6, span_seconds=60)
    got = job_rows(tiny, few, "means", "withheld")
    assert [r["given"] for r in got["means"]] == [[]]
    reasons = [r["reason"] for r in got["withheld"]]
    assert any("mean(minutes | os=mac) not published" in w for w in reasons), reasons
