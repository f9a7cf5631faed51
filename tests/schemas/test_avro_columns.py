"""The column-by-column Avro writer against fastavro: for random rows of every output schema, each
record's bytes equal fastavro's encoding of the same row, and the container reads back (fastavro's
reader) as the rows in the file's order."""
import datetime as dt
import io

import fastavro
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldp_marginals import schemas
from ldp_marginals.schemas import raw_schema
from ldp_marginals.schemas.arrow import to_rows, to_table
from ldp_marginals.schemas.avro_columns import records, varints, write_container
from ldp_marginals.schemas.outputs import KINDS, SCHEMA_OF

LONGS = st.integers(-(2 ** 63), 2 ** 63 - 1)
TIMES = st.integers(-(2 ** 40), 2 ** 45)   # timestamps Arrow's millisecond type holds
TEXT = st.text(max_size=12)   # any Unicode, the empty string included


def value_of(avro_type):
    """A strategy of values of an output schema's field type."""
    if isinstance(avro_type, list):
        return st.none() | value_of(avro_type[1])
    if isinstance(avro_type, dict):
        if avro_type.get("logicalType") == "timestamp-millis":
            return TIMES
        if avro_type["type"] == "array":
            return st.lists(value_of(avro_type["items"]), max_size=5)
        if avro_type["type"] == "map":
            return st.dictionaries(TEXT, value_of(avro_type["values"]), max_size=4)
        return value_of(avro_type["type"])
    return {"string": TEXT, "long": LONGS, "int": st.integers(-(2 ** 31), 2 ** 31 - 1), "boolean": st.booleans(),
            "double": st.floats(allow_nan=True, allow_infinity=True)}[avro_type]


def rows_of(name):
    fields = raw_schema(name)["fields"]
    return st.lists(st.fixed_dictionaries({f["name"]: value_of(f["type"]) for f in fields}), max_size=30)


def millis(t: dt.datetime) -> int:
    """A timestamp fastavro read, back to the int milliseconds written (exactly: no float)."""
    return (t - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)


def same(a, b):
    """Rows equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_each_record_is_fastavros_encoding_and_the_file_reads_back(kind, data):
    name = SCHEMA_OF[kind]
    rows = data.draw(rows_of(name))
    table = to_table(name, rows)
    parsed = schemas.load_schema(name)
    buf, lengths = records(name, table)
    ends = np.cumsum(lengths)
    for row, end, n in zip(to_rows(table), ends.tolist(), lengths.tolist()):
        expected = io.BytesIO()
        fastavro.schemaless_writer(expected, parsed, row)
        assert buf[end - n:end].tobytes() == expected.getvalue()
    for codec in ("snappy", "deflate", "null"):
        data_bytes, order = write_container(name, table, codec)
        back = list(fastavro.reader(io.BytesIO(data_bytes), return_record_name=True))
        back = [{k: millis(v) if isinstance(v, dt.datetime) else v for k, v in r.items()} for r in back]
        assert same(back, to_rows(table.take(order)))
        assert sorted(order.tolist()) == list(range(len(rows)))


def test_the_file_depends_on_the_rows_not_their_order():
    rows = [{"collection": c, "window_start": 0, "window_end": 10, "dimensions": {"k": v}, "n_reports": 7,
             "min_reports": 5, "reason": "few", "cause": "privacy"} for c in ("a", "b") for v in ("x", "y", "z")]
    first, _ = write_container("withheld_window", to_table("withheld_window", rows))
    second, _ = write_container("withheld_window", to_table("withheld_window", rows[::-1]))
    assert first == second


def test_varints_at_the_edges_of_their_groups():
    values = [0, -1, 1, 63, -64, 64, -65, 2 ** 31, -(2 ** 63), 2 ** 63 - 1]
    buf, lengths = varints(values)
    ends = np.cumsum(lengths).tolist()
    for v, end, n in zip(values, ends, lengths.tolist()):
        expected = io.BytesIO()
        fastavro.schemaless_writer(expected, "long", v)
        assert buf[end - n:end].tobytes() == expected.getvalue()


def test_a_null_where_the_schema_has_none_is_refused():
    table = to_table("withheld_window", [{"collection": None, "window_start": 0, "window_end": 1, "dimensions": {},
                                          "n_reports": 1, "min_reports": 1, "reason": "r", "cause": "privacy"}])
    with pytest.raises(ValueError, match="a field of Avro type 'string' holds nulls"):
        records("withheld_window", table)


def test_snappy_blocks_end_with_the_crc_of_their_records(monkeypatch):
    """The Avro specification's snappy codec: each block's data is the Snappy raw compression of its
    records followed by the CRC-32 of the uncompressed records, 4 bytes big-endian (readers that
    check it, such as Java's, refuse a block whose CRC differs). Several blocks of one file."""
    import zlib

    import cramjam

    from ldp_marginals.schemas import avro_columns
    from ldp_marginals.transforms.avro_container import _Stream, read_header

    monkeypatch.setattr(avro_columns, "BLOCK_BYTES", 512)
    rows = [{"collection": f"c{i}", "window_start": i, "window_end": i + 10, "dimensions": {"k": "v" * (i % 7)},
             "n_reports": i, "min_reports": 5, "reason": "few", "cause": "privacy"} for i in range(200)]
    data, _ = write_container("withheld_window", to_table("withheld_window", rows))
    header = read_header(_Stream(io.BytesIO(data)))
    assert header.codec == "snappy"
    buf, pos, blocks, records_seen = memoryview(data), header.end, 0, 0
    while pos < len(data):
        count, pos = _long_at(buf, pos)
        size, pos = _long_at(buf, pos)
        block = bytes(buf[pos:pos + size])
        raw = bytes(cramjam.snappy.decompress_raw(block[:-4]))
        assert int.from_bytes(block[-4:], "big") == zlib.crc32(raw)
        assert bytes(buf[pos + size:pos + size + 16]) == header.sync
        pos += size + 16
        blocks, records_seen = blocks + 1, records_seen + count
    assert blocks > 1 and records_seen == len(rows)


def _long_at(buf, pos):
    """An Avro long (zigzag varint) at ``pos`` -> (value, position after it)."""
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
