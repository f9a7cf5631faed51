"""Walking an Avro object container file block by block, surviving damage.

A container is a header (magic ``Obj\\x01``, metadata with the writer schema and codec, a 16-byte
sync marker) and blocks: ``count`` (varint), ``size`` (varint), ``size`` bytes of (compressed)
records, then the sync marker again. Because every block ends with the marker, blocks are
independently readable: when a block's framing or data is damaged (a truncated file, flipped
bytes, a block that does not decompress), :func:`iter_container` reports one :class:`Damage`
for the byte range it skips and resumes at the next sync marker. A damaged header makes the whole
file one damaged range (without the marker there is nothing to resynchronize on).

The file is read forward in chunks; nothing but the current block and the search window is held.

Splits (as Beam's own Avro source reads them): a byte range ``[start, end)`` of the file owns the
blocks and damaged ranges that begin at a *boundary* in it, a boundary being the first block
(right after the header) or a position right after an intact sync marker. A split seeks to
``start``, finds the first boundary at or after it, and reads on until it reaches a boundary at or
after ``end``, which is where the next split begins; damage crossing ``end`` belongs to the split in
which it begins. So the splits of a file together yield exactly what one walk of it yields.
"""
from __future__ import annotations

import bz2
import io
import json
import lzma
import zlib
from dataclasses import dataclass

import fastavro

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
MAX_BLOCK_RECORDS = 1 << 31  # a count beyond this is damage, not data
_CHUNK = 1 << 22
_HEADER_SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "Header", "namespace": "org.apache.avro.file",
    "fields": [{"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
               {"name": "meta", "type": {"type": "map", "values": "bytes"}},
               {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}}]})


@dataclass(frozen=True)
class Header:
    schema: dict      # the writer schema, as JSON
    codec: str
    sync: bytes
    end: int          # byte offset of the first block


@dataclass(frozen=True)
class Block:
    """An intact block: ``count`` records, decompressed into ``data``; ``start``/``end`` are its
    byte range in the file (count varint to sync marker)."""

    start: int
    end: int
    count: int
    data: bytes


@dataclass(frozen=True)
class Damage:
    """A byte range ``[start, end)`` skipped; ``declared`` is the record count its first block's
    header gave (None when that count was unreadable), ``why`` a short explanation, ``lost`` the
    records lost when fewer than declared (a block whose first records decoded)."""

    start: int
    end: int
    declared: int | None
    why: str
    lost: int | None = None

    @property
    def records_lost(self) -> int | None:
        """Records known to be lost here (None when the count itself was unreadable)."""
        return self.lost if self.lost is not None else self.declared

    def detail(self) -> str:
        declared = ("the block's record count is unreadable" if self.declared is None
                    else f"the block declared {self.declared} records")
        where = f"bytes [{self.start}, {self.end})" if self.end >= 0 else f"bytes from {self.start} on"
        return f"{where} skipped: {self.why}; {declared}"


class _Stream:
    """Forward reads of a file object with absolute offsets and search for a byte pattern."""

    def __init__(self, fileobj):
        self.fh = fileobj
        self.buf = bytearray()
        self.base = 0  # file offset of buf[0]

    def seek(self, pos: int) -> None:
        """Forget what was read and go on reading at ``pos`` (a split's start)."""
        if self.base <= pos <= self.base + len(self.buf):
            self.drop_before(pos)
            return
        self.fh.seek(pos)
        self.buf = bytearray()
        self.base = pos

    def _fill(self, upto: int) -> None:
        while self.base + len(self.buf) < upto:
            chunk = self.fh.read(max(_CHUNK, upto - self.base - len(self.buf)))
            if not chunk:
                return
            self.buf += chunk

    def read(self, start: int, n: int) -> bytes:
        """Up to ``n`` bytes at ``start`` (fewer at the end of the file)."""
        self._fill(start + n)
        return bytes(self.buf[start - self.base:start - self.base + n])

    def varint(self, pos: int):
        """``(value, next_pos)`` of the zigzag varint at ``pos``, or ``(None, pos)``."""
        result = shift = 0
        while shift <= 63:
            b = self.read(pos, 1)
            if not b:
                return None, pos
            pos += 1
            result |= (b[0] & 0x7F) << shift
            if b[0] < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
        return None, pos

    def find(self, pattern: bytes, start: int) -> int:
        """The offset of ``pattern`` at or after ``start``, or -1 at the end of the file."""
        at = start
        while True:
            self._fill(at + _CHUNK)
            hit = self.buf.find(pattern, at - self.base)
            if hit >= 0:
                return self.base + hit
            end = self.base + len(self.buf)
            if end < at + _CHUNK:  # nothing more to read
                return -1
            at = max(start, end - len(pattern) + 1)

    def drop_before(self, pos: int) -> None:
        cut = pos - self.base
        if cut > _CHUNK:
            del self.buf[:cut]
            self.base = pos

    def size(self) -> int:
        while True:
            before = len(self.buf)
            self._fill(self.base + before + _CHUNK)
            if len(self.buf) == before:
                return self.base + before


HEADER_LIMIT = 1 << 20   # a header (magic, metadata with the schema, sync marker) longer than this is damage


def read_header(stream: _Stream) -> Header:
    return parse_header(stream.read(0, HEADER_LIMIT))


def parse_header(raw: bytes) -> Header:
    """The header at the start of ``raw``; ValueError (or fastavro's errors) when it is not one."""
    if raw[:4] != MAGIC:
        raise ValueError(f"not an Avro object container (starts {raw[:4]!r})")
    buf = io.BytesIO(raw)
    header = fastavro.schemaless_reader(buf, _HEADER_SCHEMA, None)
    meta = header["meta"]
    schema = json.loads(meta["avro.schema"].decode("utf-8"))
    codec = meta.get("avro.codec", b"null").decode("ascii")
    return Header(schema, codec, header["sync"], buf.tell())


def decompress(codec: str, data: bytes) -> bytes:
    """A block's records as bytes; ValueError for an unknown codec or data that do not decompress."""
    try:
        if codec == "null":
            return data
        if codec == "deflate":
            d = zlib.decompressobj(-15)
            out = d.decompress(data) + d.flush()
            if not d.eof:
                raise ValueError("deflate stream is truncated")
            return out
        if codec == "bzip2":
            return bz2.decompress(data)
        if codec == "xz":
            return lzma.decompress(data)
        from fastavro import _read_py
        reader = _read_py.BLOCK_READERS.get(codec)
        if reader is None:
            raise ValueError(f"unknown codec {codec!r}")
        length = io.BytesIO()
        fastavro.schemaless_writer(length, "long", len(data))
        return reader(_read_py.BinaryDecoder(io.BytesIO(length.getvalue() + data))).getvalue()
    except (zlib.error, OSError, EOFError, lzma.LZMAError) as err:
        raise ValueError(f"{codec} data do not decompress ({err})") from None


_BAD_SYNC = "the block does not end with the file's sync marker"


def _intact_block_at(stream: _Stream, at: int, sync: bytes) -> bool:
    """Whether an intact block starts at ``at`` (a plausible header and the file's sync marker where
    it says it ends), or the file ends exactly there. A block whose own marker is damaged is then
    skipped alone, instead of resynchronizing on the marker after the next block and losing it."""
    if not stream.read(at, 1):
        return stream.size() == at
    count, p = stream.varint(at)
    size, p = (None, p) if count is None else stream.varint(p)
    if count is None or size is None or not 0 <= count < MAX_BLOCK_RECORDS or size < 0:
        return False
    return stream.read(p + size, SYNC_SIZE) == sync


def iter_container(fileobj, header_out: list | None = None, start: int = 0, end: int | None = None):
    """:class:`Block` s and :class:`Damage` s of a container file, in file order; with ``start`` and
    ``end``, those of the split ``[start, end)`` (module docstring; ``fileobj`` must then be
    seekable). The header is appended to ``header_out`` when given (the writer schema and codec)."""
    if start < 0 or (end is not None and end <= start):
        raise ValueError(f"a split must have 0 <= start < end, got start={start}, end={end}")
    stream = _Stream(fileobj)
    try:
        header = read_header(stream)
    except Exception as err:  # noqa: BLE001 - any damage to the header loses the file
        if start == 0:   # the first split reports it; the others own nothing of a file without a marker
            yield Damage(0, stream.size(), None, f"the file header is unreadable ({type(err).__name__}: {err})")
        return
    if header_out is not None:
        header_out.append(header)
    pos = header.end
    if start > header.end:
        stream.seek(start - SYNC_SIZE)
        found = stream.find(header.sync, start - SYNC_SIZE)
        if found < 0:
            return
        pos = found + SYNC_SIZE

    def boundary(at: int) -> bool:
        return at == header.end or stream.read(at - SYNC_SIZE, SYNC_SIZE) == header.sync

    while True:
        if end is not None and pos >= end and boundary(pos):
            return
        stream.drop_before(pos - SYNC_SIZE)
        at = pos
        count, pos = stream.varint(at)
        if count is None and not stream.read(at, 1):
            return  # the end of the file, between blocks
        size, pos = (None, pos) if count is None else stream.varint(pos)
        why = None
        if count is None or size is None:
            why = "the block header is unreadable"
        elif not 0 <= count < MAX_BLOCK_RECORDS or size < 0:
            why = f"the block header is not plausible (count {count}, size {size})"
        else:
            data = stream.read(pos, size)
            sync = stream.read(pos + size, SYNC_SIZE)
            if len(data) < size or len(sync) < SYNC_SIZE:
                why = "the file ends inside the block"
            elif sync != header.sync:
                why = _BAD_SYNC
            elif count == 0:  # an empty block declares nothing; bytes in it mean its count is wrong
                if size:
                    yield Damage(at, pos + size + SYNC_SIZE, None, f"a block of 0 records holds {size} bytes")
                pos = pos + size + SYNC_SIZE
                continue
            else:
                try:
                    yield Block(at, pos + size + SYNC_SIZE, count, decompress(header.codec, data))
                except ValueError as err:
                    yield Damage(at, pos + size + SYNC_SIZE, count, str(err))
                pos = pos + size + SYNC_SIZE
                continue
        declared = count if count is not None and 0 <= count < MAX_BLOCK_RECORDS else None
        if why == _BAD_SYNC:  # the block's own marker is damaged: its declared end may still hold
            claimed = pos + size + SYNC_SIZE
            if _intact_block_at(stream, claimed, header.sync):
                yield Damage(at, claimed, declared, why)
                pos = claimed
                continue
        found = stream.find(header.sync, at + 1)
        resume = stream.size() if found < 0 else found + SYNC_SIZE
        yield Damage(at, resume, declared, why)
        if found < 0:
            return
        pos = resume
