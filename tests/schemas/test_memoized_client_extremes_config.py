"""Extremes over clients on memoized channels (rule memoize-client-extremes, schemas/composition.py): a client's
OR/AND multiplies one unbiased term per sampled report, and reports of one value share its permanent response,
so with two or more reports a client the product is biased (tests/ldp/test_memoized_client_extremes.py
measures it); with ``reports_per_client: 1`` it has one term and is unbiased. Every kind: refused at c >= 2 or
unset (every report; under a device bound, M), accepted at c = 1. On main per-bit rappor with memoize was
accepted at any c (the team's configuration used c = 12) and the kinds refused at every c
(kind-memoize-client-extremes)."""
import pytest

from ldp_marginals.schemas.config import parse_config

RAPPOR = {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True}
CHANNELS = {"per_bit": RAPPOR,
            "hadamard": {"kind": "hadamard", "epsilon": 4.0, "memoize": True, "epsilon_1": 1.0},
            "subset": {"kind": "subset", "epsilon": 4.0, "width": 2, "memoize": True, "epsilon_1": 1.0}}


def spec(channel, c, unit="device", **changes):
    out = {"collection": "memo", "features": [{"name": n, "type": "boolean"} for n in "abc"],
           "channel": channel, "max_order": 2, "window": {"type": "fixed", "size_seconds": 86400},
           "min_reports": 20, "privacy": {"unit": unit, "max_reports_per_device": 24},
           "extremes": [{"name": "any", "op": "or", "bits": ["a", "b"], "over": "client"},
                        {"name": "all", "op": "and", "bits": ["b", "c"], "over": "client"}]}
    if c is not None:
        out["reports_per_client"] = c
    out.update(changes)
    return out


@pytest.mark.parametrize("kind", sorted(CHANNELS))
@pytest.mark.parametrize("c", [2, 24, None])
def test_memoized_client_extremes_over_more_than_one_report_a_client_are_refused(kind, c):
    """Failed on main for per_bit (accepted); the kinds were refused there by the kind-only rule."""
    with pytest.raises(ValueError, match=r"extremes \['any', 'all'\] \(over: client\) on memoized channels .*"
                                         r"rule memoize-client-extremes\]; instead: set reports_per_client: 1"):
        parse_config(spec(CHANNELS[kind], c))


@pytest.mark.parametrize("kind", sorted(CHANNELS))
@pytest.mark.parametrize("unit", ["device", "report"])
def test_memoized_client_extremes_at_one_report_a_client_are_accepted(kind, unit):
    """Failed on main for hadamard and subset (rule kind-memoize-client-extremes)."""
    cfg = parse_config(spec(CHANNELS[kind], 1, unit))
    assert cfg.client_sample == 1 and [e.name for e in cfg.client_extremes] == ["any", "all"]


def test_per_bit_extremes_over_bits_that_do_not_memoize_are_not_refused():
    """Only a bit that memoizes shares a permanent response: an extreme over fresh bits keeps any c."""
    channel = {"a": RAPPOR, "b": RAPPOR, "default": {"mechanism": "symmetric", "flip": 0.2}}
    cfg = parse_config(spec(channel, 4, extremes=[{"name": "fresh", "op": "and", "bits": ["c"], "over": "client"}]))
    assert cfg.client_sample == 4
    with pytest.raises(ValueError, match=r"extremes \['mixed'\] .*rule memoize-client-extremes"):
        parse_config(spec(channel, 4, extremes=[{"name": "mixed", "op": "or", "bits": ["b", "c"], "over": "client"}]))


def test_without_memoize_any_sample_is_accepted():
    fresh = {k: v for k, v in RAPPOR.items() if k != "memoize"}
    assert parse_config(spec(fresh, 4)).client_sample == 4
