"""The dead-letter contract has one owner: its reasons are the schema's, its rows validate, and the
counter names round-trip through the summary."""
import re

import pytest
from apache_beam.pvalue import TaggedOutput

from ldp_marginals import schemas
from ldp_marginals.schemas import dead_letters as reasons
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import DEAD_LETTERS
from ldp_marginals.transforms import dead_letters
from ldp_marginals.transforms.checks import report_meta
from tests.configs import SMALL_CONFIG


def schema_reasons() -> set:
    doc = next(f["doc"] for f in schemas.raw_schema("dead_letter")["fields"] if f["name"] == "reason")
    listed = re.search(r"one of: ([a-z_, ]+)\.", doc)
    return {r.strip() for r in listed.group(1).split(",")}


def test_the_code_and_the_schema_list_the_same_reasons():
    assert schema_reasons() == set(reasons.REASONS)
    assert all(meaning.strip() for meaning in reasons.REASONS.values())
    with pytest.raises(TypeError):
        reasons.REASONS["new"] = "the reasons are read-only"


def test_a_dead_letter_is_tagged_as_its_output_kind_and_validates():
    record = {"collection": "app", "event_time": 1_767_225_600_000, "bits": b"\x01", "client": "tok-1",
              "dimensions": {"region": "eu", "device": "d-42"}}
    cfg = parse_config(SMALL_CONFIG)
    out = dead_letters.dead_letter("wrong_length", "1 bytes", "f.avro#7", report_meta(record, {"app": cfg}, 40))
    assert isinstance(out, TaggedOutput) and out.tag == DEAD_LETTERS == dead_letters.TAG
    assert schemas.validate("dead_letter", out.value)
    assert out.value == {"reason": "wrong_length", "detail": "1 bytes", "source": "f.avro#7", "reports": 1,
                         "collection": "app", "event_time": 1_767_225_600_000, "dimensions": {"region": "eu"},
                         "bits_length": 1, "client_length": 5, "record_length": 40, "output_row": None}
    with pytest.raises(ValueError, match=r"reason must be one of \[.*\], got reason='typo'"):
        dead_letters.dead_letter("typo", "", "")


def test_counter_names_and_totals():
    totals = {"reports.valid": 10, "dead_letter.late": 2, "dead_letter.padding_bits": 0, "dead_letter.nope": 5}
    assert reasons.counter_name("late") == "dead_letter.late"
    assert reasons.totals_by_reason(totals) == {"late": 2}
