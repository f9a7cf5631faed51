"""One table of composition rules (schemas/composition.py): the issue 48 probe walks the whole space
(unit x kind x window x batch/streaming x feature) and every refusal it meets is a rule of the table,
saying its verdict, its docs anchor and what to do instead; every rule fires on an example of its own
(a rule whose predicate is lost fails here); docs/design.md and README.md show the generated matrix."""
import re
from pathlib import Path

import pytest

from ldp_marginals.pipelines.job import JobOptions
from ldp_marginals.schemas.composition import (
    LIMIT,
    NOT_BUILT,
    RULES,
    STREAMING,
    composition_faults,
    matrix_markdown,
    replace_matrix,
)
from ldp_marginals.schemas.config import parse_config
from tests.schemas.composition_probe import FEATURES, cell_config, check_cell, probe

ROOT = Path(__file__).resolve().parents[2]
DESIGN = "docs/design.md"
RULE_OF = re.compile(r"\[(limit of the privacy math|not built): " + re.escape(DESIGN) + r", '([^']+)'; rule ([a-z-]+)\]; "
                     r"instead: (.+)$")


@pytest.fixture(scope="module")
def cells():
    return probe()


def test_the_probe_walks_the_whole_space(cells):
    assert len(cells) == 360 and len(FEATURES) == 10
    assert len({c[:5] for c in cells}) == 360


def test_every_refusal_of_the_probe_is_a_rule_of_the_table(cells):
    """On main before the table (aa13bc9) 242 of 360 cells were refused, none of them naming a rule:
    this test failed on every one."""
    by_name = {r.name: r for r in RULES}
    refused = [c for c in cells if c[5] is not None]
    not_built = 0
    for *cell, message in refused:
        m = RULE_OF.search(message)
        assert m is not None, (cell, message)
        verdict, anchor, name, instead = m.groups()
        rule = by_name[name]
        assert (rule.verdict, rule.anchor, rule.instead) == (verdict, anchor, instead), (cell, message)
        not_built += verdict == NOT_BUILT
    print(f"\nissue 48 probe: {len(refused)} of {len(cells)} cells refused, {not_built} of them not built")
    assert refused   # the probe meets refusals today; the goal test below tracks how many


# Issue 48's goal is at most 64 refused cells and none "not built"; not met yet. The probe on 340e214's
# successor aa13bc9: 242 refused, 168 not built; after the device unit for the whole-report kinds, rollups under
# the device unit and the memoized repeats' variances 243 / 168; with the kinds' conditionals, means and extremes
# over reports and their thin-row rule per atom (sliding windows, early and late panes): 159 refused, 64 not built
# (the kinds' memoization in the job, their rollups, their analyses over max_order bits); with the kinds'
# memoization in the job (kind-memoize, kind-spans lifted), the report unit with device bounds
# (device-bounds-need-device and memoize-needs-device lifted; 3 report-unit cells of two keys a device on a
# streaming global window now meet device-keys-streaming-global) and the kinds' rollups (kind-rollups lifted:
# complementary suppression per row, transforms/publication/kind_rollups.py) and the kinds' extremes over clients
# (kind-client-extremes lifted; the probe's client extreme spans 3 bits at max_order 2, so its 16 cells fell to
# kind-analyses-over-order): 100 refused, 40 not built; with the kinds' extra counted sets (kind-analyses,
# kind-analyses-over-order, kind-groups-over-order lifted, issue 48 item 1; the client extreme's 16 cells among
# them): 60 refused, none not built. A change that refuses more cells fails here; a lift lowers these numbers.
REFUSED_AT_MOST, NOT_BUILT_AT_MOST = 60, 0


def test_the_probe_refuses_no_more_than_when_last_measured(cells):
    refused = [c for c in cells if c[5] is not None]
    not_built = [c for c in refused if f"[{NOT_BUILT}:" in c[5]]
    assert len(refused) <= REFUSED_AT_MOST and len(not_built) <= NOT_BUILT_AT_MOST


# one example per rule: (changes to the probe's per-bit base config, unit, streaming); each must be
# refused by that rule first, and the same config without the rule's feature accepted
_DAY = {"type": "fixed", "size_seconds": 86400}
_SLIDING = {"type": "sliding", "size_seconds": 86400, "period_seconds": 21600}
_HADAMARD = {"kind": "hadamard", "epsilon": 2.0}
_DIMS = {"region": {"max_values": 10}}
EXAMPLES = {
    "spans-need-device": ({"privacy": {"model": "local", "epsilon_per_day": 50.0}}, False),
    "client-extremes-sliding": ({"window": _SLIDING,
                                 "extremes": [{"name": "e", "op": "or", "bits": ["a", "b"], "over": "client"}]}, False),
    "rollups-sliding": ({"window": _SLIDING, "dimensions": _DIMS, "rollups": "all"}, False),
    "kind-sufficient-dp": ({"channel": _HADAMARD, "privacy": {"model": "sufficient", "epsilon": 3.0}}, False),
    "global-streaming-no-early-firing": ({"window": {"type": "global"}}, True),
    "device-keys-streaming-global": ({"window": {"type": "global"}, "early_firing_seconds": 60, "dimensions": _DIMS,
                                      "privacy": {"unit": "device"}}, True),
    "memoize-client-extremes": ({"channel": {"mechanism": "rappor", "f": 0.5, "p": 0.25, "q": 0.75, "memoize": True},
                                 "privacy": {"unit": "device", "max_reports_per_device": 4},
                                 "extremes": [{"name": "any", "op": "or", "bits": ["a", "b"], "over": "client"}]},
                                False),
    "kind-subset-width": ({"channel": {"kind": "subset", "epsilon": 2.0, "width": 2},
                           "conditionals": [{"of": ["a"], "given": ["b", "c"]}]}, False),
}


def _spec(changes: dict) -> dict:
    spec = cell_config("report", "per_bit", "fixed", "groups")
    spec.pop("groups")
    spec["window"] = _DAY
    spec.update(changes)
    return spec


def test_every_rule_has_an_example_and_fires_on_it_first():
    assert set(EXAMPLES) == {r.name for r in RULES}
    for rule in RULES:
        changes, streaming = EXAMPLES[rule.name]
        assert (rule.mode == STREAMING) == streaming, rule.name
        message = check_cell(_spec(changes), streaming)
        assert message is not None, rule.name
        m = RULE_OF.search(message)
        assert m is not None and m.group(3) == rule.name, (rule.name, message)
        assert rule.verdict in (LIMIT, NOT_BUILT) and rule.instead and rule.anchor


def test_the_base_of_the_examples_is_accepted_in_both_modes():
    assert check_cell(_spec({}), False) is None and check_cell(_spec({}), True) is None


def test_batch_accepts_what_only_streaming_refuses():
    for rule in RULES:
        if rule.mode == STREAMING:
            changes, _ = EXAMPLES[rule.name]
            cfg = parse_config(_spec(changes))
            JobOptions({cfg.name: cfg}, streaming=False)
            assert [r.name for r in composition_faults(cfg, streaming=True)][:1] == [rule.name]
            with pytest.raises(ValueError, match=f"rule {rule.name}\\]; instead: "):
                JobOptions({cfg.name: cfg}, streaming=True)


def test_every_anchor_is_a_section_of_the_design_doc():
    headings = {re.sub(r"^\d+\.\s*", "", re.sub(r"[`*]", "", line.lstrip("#").strip())) for line in
                (ROOT / "docs" / "design.md").read_text().splitlines() if line.startswith("#")}
    for rule in RULES:
        assert any(h.startswith(rule.anchor) for h in headings), (rule.name, rule.anchor)


@pytest.mark.parametrize("doc", ["docs/design.md", "README.md"])
def test_the_docs_show_the_generated_matrix(doc):
    text = (ROOT / doc).read_text()
    assert matrix_markdown() in text
    assert replace_matrix(text) == text   # python -m ldp_marginals.schemas.composition rewrites it
