"""Damaged inputs as data: each case writes one Avro file the way a collector that went wrong would,
and knows how many reports it wrote. The cases are generated, never stored."""
from __future__ import annotations

import io
import json
from dataclasses import dataclass

import fastavro

from ldp_marginals import schemas
from ldp_marginals.pipelines.simulate import report_records, simulate_population
from ldp_marginals.transforms.avro_container import iter_container

N = 3000
SYNC_INTERVAL = 4000
OLD_SCHEMA = {"type": "record", "name": "NoisyReport", "namespace": "ldp_marginals", "fields": [
    f for f in schemas.raw_schema("noisy_report")["fields"] if f["name"] != "client"]}


def records(cfg, case: str, seed: int) -> list:
    pop = simulate_population(cfg, N, seed=seed, span_seconds=600)
    return [dict(r, dimensions={"case": case}) for r in report_records(cfg, pop)]


def container(recs, codec="deflate", schema=None) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schema or schemas.load_schema("noisy_report"), recs, codec=codec,
                    sync_interval=SYNC_INTERVAL)
    return buf.getvalue()


def blocks_of(data: bytes) -> list:
    """``(start, end, count)`` of every block of an intact file."""
    return [(b.start, b.end, b.count) for b in iter_container(io.BytesIO(data))]


@dataclass
class Case:
    name: str
    data: bytes
    written: int          # reports whose blocks begin in the file's bytes (a cut file lost the rest)
    reasons: set          # dead-letter reasons the case must produce
    exact: bool = True    # False: flipped bytes may also decode into malformed records (more reasons)


def _flip(data: bytes, at: int, n: int = 16) -> bytes:
    out = bytearray(data)
    for i in range(at, min(at + n, len(out))):
        out[i] ^= 0xFF
    return bytes(out)


def _utf8_case(cfg, name, seed, index, field):
    """Record ``index`` with bytes that are not UTF-8 in ``field``: written with a unique placeholder
    of the same length, then patched in the (uncompressed) file, so the header keeps the contract."""
    recs = records(cfg, name, seed)
    placeholder, bad = {"dimensions": (b"@@BAD@@", b"\xff\xfeBAD@@"), "collection": (b"ap#", b"ap\xc3"),
                        "client": (b"~~~", b"\xed\xa0\x80")}[field]  # a lone byte, a cut sequence, a surrogate
    if field == "dimensions":
        recs[index]["dimensions"] = {"case": placeholder.decode()}
    else:
        recs[index][field] = placeholder.decode()
    data = container(recs, codec="null")
    assert data.count(placeholder) == 1
    return Case(name, data.replace(placeholder, bad), N, {"undecodable"})


def cases(cfg) -> list:
    """Every damaged input of the suite (one file each), with how many reports it holds."""
    out = []
    for codec in ("null", "deflate"):
        data = container(records(cfg, f"truncated_{codec}", 1), codec)
        cut = int(len(data) * 0.6)
        begun = sum(count for start, _, count in blocks_of(data) if start < cut)
        out.append(Case(f"truncated_{codec}", data[:cut], begun, {"damaged_block"}))
        data = container(records(cfg, f"flipped_{codec}", 2), codec)
        start, end, _ = blocks_of(data)[len(blocks_of(data)) // 2]
        out.append(Case(f"flipped_{codec}", _flip(data, (start + end) // 2), N, {"damaged_block"}, exact=False))
    out.append(_utf8_case(cfg, "utf8_dims_first", 3, 0, "dimensions"))
    out.append(_utf8_case(cfg, "utf8_dims_2000", 4, 2000, "dimensions"))
    out.append(_utf8_case(cfg, "utf8_collection", 5, 10, "collection"))
    out.append(_utf8_case(cfg, "utf8_client", 6, 20, "client"))
    recs = records(cfg, "huge_time", 7)
    recs[100]["event_time"] = 2 ** 62
    out.append(Case("huge_time", container(recs), N, {"bad_timestamp"}))
    recs = [{k: v for k, v in r.items() if k != "client"} for r in records(cfg, "old_schema_huge_time", 8)]
    recs[5]["event_time"] = 2 ** 62
    out.append(Case("old_schema_huge_time", container(recs, schema=fastavro.parse_schema(OLD_SCHEMA)), N,
                    {"bad_timestamp"}))
    nan_schema = json.loads(json.dumps(OLD_SCHEMA).replace(
        '{"type": "long", "logicalType": "timestamp-millis"}', '"double"'))
    recs = [dict(r, event_time=float(r["event_time"])) for r in records(cfg, "nan_time", 9)]
    recs[7]["event_time"] = float("nan")
    recs = [{k: v for k, v in r.items() if k != "client"} for r in recs]
    out.append(Case("nan_time", container(recs, schema=fastavro.parse_schema(nan_schema)), N, {"bad_timestamp"}))
    data = container(records(cfg, "header", 10))
    out.append(Case("header", _flip(data, 6, 4), N, {"damaged_block"}))
    data = container(records(cfg, "last_block", 11))
    start, end, _ = blocks_of(data)[-1]
    out.append(Case("last_block", _flip(data, end - 8, 8), N, {"damaged_block"}))
    data = container(records(cfg, "zero_blocks", 12))
    sync = data[blocks_of(data)[0][1] - 16:blocks_of(data)[0][1]]
    at = blocks_of(data)[1][0]
    out.append(Case("zero_blocks", data[:at] + b"\x00\x00" + sync + data[at:] + b"\x00\x00" + sync, N, set()))
    for codec in ("bzip2", "xz"):
        out.append(Case(f"codec_{codec}", container(records(cfg, f"codec_{codec}", 13), codec), N, set()))
    # dimensions: undeclared keys (a unique device id each, a 50,000-entry map), a 5 MB value, more
    # values than max_values (counted under __other__), client tokens on a collection without
    # client extremes (dropped at the door)
    recs = [dict(r, dimensions={"case": "undeclared", "device_id": f"d{i:06d}"})
            for i, r in enumerate(records(cfg, "undeclared", 16))]
    recs[3]["dimensions"] = {"case": "undeclared", **{f"k{j}": "x" for j in range(50_000)}}
    out.append(Case("undeclared", container(recs), N, {"undeclared_dimension"}))
    recs = records(cfg, "too_long", 17)
    recs[9]["dimensions"] = {"case": "too_long", "v": "x" * 5_000_000}
    out.append(Case("too_long", container(recs), N, {"dimension_too_long"}))
    recs = [dict(r, dimensions={"case": "many_values", "v": f"v{i % 6}"}, client=f"c{i}" * (i % 90))
            for i, r in enumerate(records(cfg, "many_values", 18))]
    out.append(Case("many_values", container(recs), N, set()))
    # read while the collector appends: a block of 200 more reports is half written
    data = container(records(cfg, "growing", 14))
    extra = container(records(cfg, "growing", 15)[:200])
    start, end, count = blocks_of(extra)[0]
    out.append(Case("growing", data + extra[start:(start + end) // 2], N + count, {"damaged_block"}))
    return out
