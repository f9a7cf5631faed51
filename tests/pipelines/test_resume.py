"""Resuming a streaming job from a savepoint: the config's state shape is checked against the one the
savepoint's job recorded, before anything is submitted; and which jobs make their file writers wait
for checkpoints (stable input). The resume itself runs on Flink in tests/cluster."""
import json

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from ldp_marginals.pipelines.run import (
    check_resumable,
    make_pipeline,
    needs_stable_input,
    run_parser,
    write_collections,
)
from ldp_marginals.schemas.config import parse_config
from ldp_marginals.schemas.outputs import STATE_SHAPE_FILE
from tests.configs import SMALL_CONFIG

SAVEPOINT = "file:///sp/savepoint-1"


def configs(**changes):
    cfg = parse_config(dict(SMALL_CONFIG, **changes))
    return {cfg.name: cfg}


def test_the_same_config_resumes(tmp_path):
    write_collections(str(tmp_path), configs())
    check_resumable(str(tmp_path), configs(), SAVEPOINT)


@pytest.mark.parametrize("changes, named", [
    (dict(max_order=3), "max_order changed: saved max_order=2; this config has max_order=3"),
    (dict(sets=[]), "extra changed"),
    (dict(extremes=SMALL_CONFIG["extremes"][:2]), "client_extremes changed"),
    (dict(window={"type": "fixed", "size_seconds": 1800}), "window changed"),
])
def test_a_config_that_changes_the_state_shape_is_refused_naming_the_change(tmp_path, changes, named):
    write_collections(str(tmp_path), configs())
    with pytest.raises(ValueError, match=r"collection 'app' cannot resume from --savepoint_path=file:///sp/savepoint-1"
                                         r": its state has another shape \(") as err:
        check_resumable(str(tmp_path), configs(**changes), SAVEPOINT)
    assert named in str(err.value)


def test_a_config_that_changes_only_the_guard_resumes(tmp_path):
    write_collections(str(tmp_path), configs())
    check_resumable(str(tmp_path), configs(min_reports=500), SAVEPOINT)


def test_an_added_collection_and_a_missing_record_are_refused(tmp_path):
    write_collections(str(tmp_path), configs())
    more = dict(configs(), **{"other": parse_config(dict(SMALL_CONFIG, collection="other"))})
    with pytest.raises(ValueError, match=r"had collections \['app'\], this config has \['app', 'other'\]"):
        check_resumable(str(tmp_path), more, SAVEPOINT)
    (tmp_path / STATE_SHAPE_FILE).unlink()
    with pytest.raises(ValueError, match=f"{STATE_SHAPE_FILE} .* is missing: resume into that job's --output"):
        check_resumable(str(tmp_path), configs(), SAVEPOINT)


def test_run_checks_before_building_and_refuses_a_savepoint_in_batch(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(dict(SMALL_CONFIG, max_order=3)))
    write_collections(str(tmp_path / "out"), configs())
    base = ["--config", str(tmp_path / "c.json"), "--output", str(tmp_path / "out")]
    with pytest.raises(ValueError, match="max_order changed"):
        make_pipeline(base + ["--streaming", "--kafka-topic", "t", f"--savepoint_path={SAVEPOINT}"])
    (tmp_path / "r.avro").write_bytes(b"")   # an input the launcher accepts (an empty file is the reader's)
    with pytest.raises(ValueError, match="without --streaming"):
        make_pipeline(base + ["--input", str(tmp_path / "r.avro"), f"--savepoint_path={SAVEPOINT}"])


@pytest.mark.parametrize("argv, beam_args, stable", [
    (["--streaming"], ["--runner=PortableRunner", "--checkpointing_interval=1000"], True),
    (["--streaming"], ["--runner=FlinkRunner", "--checkpointing_interval=500"], True),
    (["--streaming"], ["--runner=PortableRunner"], False),          # no checkpoints: Flink would refuse it
    (["--streaming"], ["--runner=DirectRunner", "--checkpointing_interval=1000"], False),   # replays nothing
    ([], ["--runner=PortableRunner", "--checkpointing_interval=1000"], False),             # batch
])
def test_writers_wait_for_checkpoints_only_when_streaming_on_flink_with_checkpoints(argv, beam_args, stable):
    args, _ = run_parser().parse_known_args(["--config", "c.json", "--output", "o"] + argv)
    assert needs_stable_input(args, PipelineOptions(beam_args)) is stable


def test_a_savepoint_of_the_earlier_state_layout_is_refused_with_what_to_do(tmp_path):
    """The previous release kept a collection's streaming state in one panes step keyed by collection;
    this one keys it by collection, key and capped key. A savepoint of the first cannot restore into
    the second: refused before submitting, saying how to move over (drain, then start afresh)."""
    write_collections(str(tmp_path), configs())
    path = tmp_path / STATE_SHAPE_FILE
    earlier = {name: {k: v for k, v in shape.items() if k != "layout"}   # what the previous release recorded
               for name, shape in json.loads(path.read_text()).items()}
    path.write_text(json.dumps(earlier))
    with pytest.raises(ValueError, match=r"collection 'app' cannot resume .*layout 1 \(one panes step per "
                                         r"collection.*layout 2 .*flink stop --drain"):
        check_resumable(str(tmp_path), configs(), SAVEPOINT)


def test_the_device_unit_and_the_report_unit_with_the_same_bound_do_not_resume_as_each_other(tmp_path):
    """The same open state (the bound M, the rank rule), but released atoms counted devices under the one and
    reports under the other: a resume across them is refused, naming the unit (issue 48)."""
    device, report = ({"unit": "device", "max_reports_per_device": 2}, {"max_reports_per_device": 2})
    for saved, want in ((device, report), (report, device)):
        write_collections(str(tmp_path), configs(privacy=saved))
        with pytest.raises(ValueError, match=r"its state has another shape \(unit changed"):
            check_resumable(str(tmp_path), configs(privacy=want), SAVEPOINT)
    write_collections(str(tmp_path), configs(privacy=report))
    check_resumable(str(tmp_path), configs(privacy=report), SAVEPOINT)
