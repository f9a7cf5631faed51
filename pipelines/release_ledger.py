"""The release ledger on disk: ``DIR/_ledger/releases.json`` under a batch run's ``--output`` (local or
gs://, where a Dataflow or Flink deployment keeps its outputs). The rule it serves is
:mod:`ldp_marginals.transforms.publication.releases`; docs/design.md (section 7, "The release ledger")
states it and what ``--new-ledger`` gives up.

A batch run reads the ledger before it is built (:func:`earlier_releases`), so every collection's
verdict sees every earlier release; its job writes each collection's release into its staging folder
(:class:`WriteReleaseFn`); and the driver, once the job has finished and before the run is published,
adds them to the ledger (:func:`publish_ledger`, an atomic replace). A run killed between the two
leaves a ledger that records a release never published: that only withholds more, never less. A run
whose collection shares devices with another collection's release (the same reports under another
name: device tokens are scoped to a collection) is refused there, before anything is published.
"""
from __future__ import annotations

import hashlib
import json

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from ldp_marginals.schemas.outputs import LEDGER_DIR, LEDGER_FILE, MANIFEST_FILE
from ldp_marginals.transforms.manifest import write_dir, write_json_atomic
from ldp_marginals.transforms.publication.releases import (
    LEDGER_FORMAT,
    READABLE_FORMATS,
    merged,
    release_from_json,
    release_to_json,
    shared_devices,
)

NEW_LEDGER = "--new-ledger"   # the command's flag: start a new ledger (docs/design.md says what it gives up)


class SharedDevices(ValueError):
    """A run refused by the ledger: one of its collections holds the devices of another collection's
    release (:func:`publish_ledger`)."""


def ledger_path(output_dir: str) -> str:
    return FileSystems.join(output_dir, LEDGER_DIR, LEDGER_FILE)


def load_ledger(output_dir: str) -> dict:
    """``{collection: [Release]}`` of the ledger under ``output_dir`` (empty when there is none); a
    ledger that cannot be read is a ValueError naming it (never silently a new ledger). A ledger of
    format 1 is read as it was written: no digests of kept reports, no witnesses (the rule treats what
    they would decide as unknown); the next run rewrites it in the current format."""
    path = ledger_path(output_dir)
    if not FileSystems.exists(path):
        return {}
    try:
        with FileSystems.open(path) as fh:
            data = json.loads(fh.read())
        if data.get("format") not in READABLE_FORMATS:
            raise ValueError(f"format {data.get('format')!r}, this release reads formats {list(READABLE_FORMATS)}")
        return {name: [release_from_json(r, data["format"]) for r in releases]
                for name, releases in data["collections"].items()}
    except Exception as err:  # noqa: BLE001 - unreadable, not JSON, another format: one answer
        raise ValueError(f"the release ledger {path} cannot be read ({type(err).__name__}: {err}); restore it, "
                         f"or start a new ledger with {NEW_LEDGER} (docs/design.md says what that gives up)") from None


def check_no_ledger(output_dir: str) -> None:
    """A streaming run is refused where a release ledger is (its panes would be releases the ledger never
    checks against the batch runs'): checked when the run starts, as the output's manifest is."""
    path = ledger_path(output_dir)
    if FileSystems.exists(path):
        raise ValueError(f"--output {output_dir} holds a release ledger of batch runs ({path}): a streaming "
                         "run there would publish panes the ledger never checks against them; give another "
                         "--output")


def earlier_releases(output_dir: str, streaming: bool, new_ledger: bool) -> dict | None:
    """What a run into ``output_dir`` must respect: ``{collection: [Release]}`` for a batch run ({} with
    ``new_ledger``), None for a streaming run (:func:`check_no_ledger`). A batch run into an output a
    streaming run published to is refused unless ``new_ledger``: no ledger recorded that run's panes."""
    path = ledger_path(output_dir)
    if streaming:
        return None
    if new_ledger:
        return {}
    manifest = FileSystems.join(output_dir, MANIFEST_FILE)
    if FileSystems.exists(manifest) and not FileSystems.exists(path):
        try:
            with FileSystems.open(manifest) as fh:
                mode = json.loads(fh.read()).get("mode")
        except Exception:  # noqa: BLE001 - unreadable: not a streaming run's we can tell
            mode = None
        if mode == "streaming":
            raise ValueError(f"--output {output_dir} holds a streaming run's outputs, which no release ledger "
                             "recorded: a batch run there could publish what differences them; give another "
                             f"--output, or {NEW_LEDGER} to publish regardless (docs/design.md, 'The release "
                             "ledger', says what that gives up)")
    return load_ledger(output_dir)


def check_rollups(configs: dict, earlier: dict | None) -> None:
    """Rollup rows sum what the guard (and the ledger) withholds of their keys, and the ledger does not
    record them yet: a batch run of a collection with rollups into an output holding earlier releases
    of it, or of a collection whose earlier run published rollups, is refused (a backfill's rollup minus
    the earlier run's would be the backfilled reports)."""
    for name, cfg in sorted(configs.items()):
        releases = (earlier or {}).get(name, ())
        if releases and (cfg.rollups or any(r.rollups for r in releases)):
            raise ValueError(f"collection {name!r}: --output holds earlier releases of it "
                             f"{'with' if any(r.rollups for r in releases) else 'and this run declares'} rollups, "
                             "which the release ledger does not cover yet (a rollup row sums what its keys "
                             "withhold, so two runs' rollups could difference a few reports); give another "
                             f"--output, or {NEW_LEDGER} to publish regardless (docs/design.md, 'The release "
                             "ledger', says what that gives up)")


def check_unit(configs: dict, earlier: dict | None) -> None:
    """A batch run of a collection into an output holding earlier releases of it under another privacy unit
    is refused: the two runs' rows differ by what the device bound dropped (a device-unit run after a
    report-unit one, or before it), which can be many reports of a few devices, and the ledger's rule
    counts one unit per collection."""
    for name, cfg in sorted(configs.items()):
        unit = cfg.unit
        others = sorted({r.unit for r in (earlier or {}).get(name, ())} - {unit})
        if others:
            raise ValueError(f"collection {name!r}: --output holds earlier releases of it under privacy.unit "
                             f"{others[0]!r}, and this run's unit is {unit!r} (the difference of the two runs' rows "
                             "is what the device bound drops: reports of a few devices); keep the unit of the "
                             f"earlier runs, give another --output, or {NEW_LEDGER} to publish regardless "
                             "(docs/design.md, 'The release ledger', says what that gives up)")


def check_dimensions(configs: dict, earlier: dict | None) -> None:
    """The ledger compares a run's slices with earlier ones key by key (a key is the digest of its
    dimension values), so it holds only while a report stays in its key. A run whose declared dimensions
    differ from an earlier release's of the same collection regroups every report into keys the ledger
    never saw, and its rows would be checked against nothing (dropping ``region``: the one key's row minus
    the earlier run's published regions is the regions the guard withheld): refused. An earlier release
    that did not record its dimensions (written before they were) is not checked."""
    for name, cfg in sorted(configs.items()):
        mine = tuple(sorted(d.name for d in cfg.dimensions))
        for release in (earlier or {}).get(name, ()):
            if release.dimensions is not None and release.dimensions != mine:
                raise ValueError(f"collection {name!r}: --output holds an earlier release of it (run "
                                 f"{release.run_id}) with dimensions {list(release.dimensions)}, and this run "
                                 f"declares {list(mine)}: the release ledger compares runs key by key, so the "
                                 "regrouped keys would be checked against nothing (their rows minus the earlier "
                                 "run's could give back keys the guard withheld); keep the dimensions, give "
                                 f"another --output, or {NEW_LEDGER} to publish regardless (docs/design.md, "
                                 "'The release ledger', says what that gives up)")


def _staged_path(staged: str, collection: str) -> str:
    return FileSystems.join(staged, LEDGER_DIR, hashlib.sha256(collection.encode()).hexdigest()[:16] + ".json")


class WriteReleaseFn(beam.DoFn):
    """``(collection, release)`` -> the release written into the run's staging folder (``output_dir``,
    the run ``run_id``), atomically."""

    def __init__(self, output_dir: str, run_id: str):
        self.staged = write_dir(output_dir, run_id, streaming=False)

    def process(self, element):
        collection, release = element
        yield write_json_atomic(_staged_path(self.staged, collection), {"collection": collection, "release": release})


def publish_ledger(output_dir: str, run_id: str, earlier: dict) -> str | None:
    """After a batch job has finished, before the run is published: the ledger ``earlier`` (the one
    the run read: {} for a new ledger) with this run's staged releases added, written in place
    atomically. Returns its path (None when the run staged no release). A ValueError, and no ledger
    written, when a collection of the run shares devices with another collection's release
    (:func:`~ldp_marginals.transforms.publication.releases.shared_devices`)."""
    staged = write_dir(output_dir, run_id, streaming=False)
    paths = FileSystems.match([FileSystems.join(staged, LEDGER_DIR, "*.json")])[0].metadata_list
    if not paths:
        return None
    ledger = {name: list(releases) for name, releases in earlier.items()}
    releases = {}
    for meta in sorted(paths, key=lambda m: m.path):
        with FileSystems.open(meta.path) as fh:
            staged_release = json.loads(fh.read())
        releases[staged_release["collection"]] = release_from_json(dict(staged_release["release"], run_id=run_id))
    shared = shared_devices(earlier, releases)
    if shared is not None:
        name, other = shared
        raise SharedDevices(f"collection {name!r} holds reports of the devices of collection {other!r}, which "
                         f"{'this run' if other in releases else 'an earlier run into --output ' + output_dir} "
                         "also published (device tokens are scoped to a collection, so these are the same reports "
                         "under another name, and the release ledger, kept per collection, would check them against "
                         f"nothing): run them as {other!r}, or into another --output, or with {NEW_LEDGER} to "
                         "publish regardless (docs/design.md, 'The release ledger', says what that gives up)")
    for name, release in sorted(releases.items()):
        ledger[name] = merged(ledger.get(name, []), release)
    return write_json_atomic(ledger_path(output_dir), {
        "format": LEDGER_FORMAT,
        "collections": {name: [release_to_json(r) for r in releases] for name, releases in sorted(ledger.items())}})
