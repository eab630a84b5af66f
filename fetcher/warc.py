"""WARC/1.1 output: record building (warcio) and a thread-safe, rotating, crash-safe file writer.

Records are built with warcio's ``RecordBuilder`` (``warc_version='1.1'``; warcio writes 1.0
unless told). HTTP heads are written back byte for byte as captured -- warcio would otherwise
re-serialise parsed headers -- so block and payload digests are over exactly what the server
sent. The payload digest follows warcio / Heritrix: SHA-1 (base32) of the stored entity bytes
after the HTTP head, still content-encoded and, for chunked responses, transfer-framed; this is
what ``warcio check`` verifies.

Per fetch: ``response`` (or ``revisit``), then ``request`` with ``WARC-Concurrent-To`` the
response, then a ``metadata`` record (``WARC-Concurrent-To`` the response) with timing and the
redirect chain. A ``too_large`` fetch (decompression bomb) keeps only request and metadata.
``revisit`` records: profile ``server-not-modified`` for a 304 and
``identical-payload-digest`` when the payload equals the previous capture's; both name the
record holding the payload (``WARC-Refers-To``, ``-Target-URI``, ``-Date``: its id, URI and
exact WARC-Date, which the crawldb keeps per URL), so replay tools find it. A fetch whose
content type is filtered out is stored with its head only (``WARC-Truncated: unspecified``):
every exchange is in the WARC, as docs/design.md asks, without keeping bodies nobody parses.

Files: each record is its own gzip member (so any record can be read from its offset); a file
starts with a ``warcinfo`` record and is written as ``<prefix>-<seq>.warc.gz.open``, fsynced and
renamed to ``<prefix>-<seq>.warc.gz`` when closed (rename is atomic, so a crash leaves only
``.open`` files). On S3 (``s3a://``, :mod:`fetcher.storage`) the ``.open`` file is a local spool
file uploaded under the final name on close: no object exists before it is complete. A new
file begins before a write group would take a non-empty file past ``max_bytes``; the records
of one fetch are never split across files. Records are serialised and compressed in the worker
threads; only the append (and offset computation from the file position) happens under the
lock.

gzip level, measured on simweb pages (one core, best of three; "x" is the compression ratio):

    page body                 level 1            level 6            level 9
    simweb page (~3.6 KB)     0.10 ms  1.91x     0.13 ms  1.97x     0.21 ms  1.97x
    10 KB of simweb prose     0.09 ms  2.58x     0.19 ms  2.75x     0.23 ms  2.75x
    100 KB of simweb prose    0.98 ms  2.85x     6.31 ms  3.15x    10.02 ms  3.16x
    1 MB benchmark page       9.7 ms             55.4 ms            -

    end to end (benchmarks/fetch_throughput.py, 20 hosts, 1 MB pages, limit 38 requests/s):
    level 1: 29.5 pages/s, 90 % of the politeness limit, 120 MB of WARC;
    level 6: 25.6 pages/s, 79 %, 108 MB.

Level 9 buys nothing over 6. Level 6 saves 3-10 % of storage over level 1 but costs 2-6x the
CPU; with pages of 100 KB and more, a 2-core fetch task becomes compression-bound instead of
politeness-bound. The default is therefore 1; set ``warc_gzip_level = 6`` where CPU is plentiful
and storage is what costs.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from io import BytesIO

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.warcwriter import WARCWriter

from fetcher.cdxj import RecordIndex
from fetcher.storage import AtomicFile, Storage, join

PROFILE_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
PROFILE_IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
WARC_VERSION = "WARC/1.1"


class _Writer(WARCWriter):
    """warcio's writer, except that a ``metadata`` record gets no ``WARC-Payload-Digest``.

    In WARC 1.1 a payload is what a block holds inside another format (an HTTP message's
    entity); a metadata block is plain ``application/warc-fields`` with no payload. warcio
    adds the field to every record type but ``warcinfo`` and ``revisit``.
    """

    NO_PAYLOAD_DIGEST_TYPES = ("warcinfo", "revisit", "metadata")


_builder = _Writer(BytesIO(), gzip=False, warc_version=WARC_VERSION)


class _RawHead(StatusAndHeaders):
    """HTTP head that warcio writes back exactly as captured instead of re-serialising it."""

    def __init__(self, raw: bytes) -> None:
        try:
            parsed = StatusAndHeadersParser([], verify=False).parse(BytesIO(raw))
            super().__init__(parsed.statusline, parsed.headers, protocol=parsed.protocol)
        except (EOFError, ValueError):
            super().__init__("", [], protocol="")
        self.headers_buff = raw

    def compute_headers_buffer(self, header_filter=None) -> None:  # noqa: ARG002
        """Keep the captured bytes."""


def warc_date(dt: datetime) -> str:
    """WARC 1.1 date: UTC, ISO 8601, microseconds when present."""
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def new_record_id() -> str:
    """A fresh ``<urn:uuid:...>`` record id."""
    return StatusAndHeadersParser.make_warc_id()


def _headers(uri: str, date: datetime, record_id: str, extra: dict[str, str | None]) -> dict:
    h: dict[str, str] = {"WARC-Record-ID": record_id, "WARC-Date": warc_date(date)}
    h.update({k: v for k, v in extra.items() if v})
    return h


def response_record(uri: str, date: datetime, ip: str, head: bytes, body: bytes, *,
                    record_id: str, truncated: str | None = None,
                    payload_digest: str | None = None) -> ArcWarcRecord:
    """A ``response`` record of the captured head and (possibly truncated) body.

    ``payload_digest``, if the caller already hashed the body, saves warcio a SHA-1 pass.
    """
    extra = {"WARC-IP-Address": ip, "WARC-Truncated": truncated,
             "WARC-Payload-Digest": payload_digest}
    return _builder.create_warc_record(
        uri, "response", payload=BytesIO(body), length=len(body), http_headers=_RawHead(head),
        warc_headers_dict=_headers(uri, date, record_id, extra))


def request_record(uri: str, date: datetime, ip: str, raw_request: bytes, *,
                   concurrent_to: str | None = None,
                   record_id: str | None = None) -> ArcWarcRecord:
    """The ``request`` record of the bytes sent, linked to its response (if one is stored)."""
    head, sep, body = raw_request.partition(b"\r\n\r\n")
    extra = {"WARC-IP-Address": ip, "WARC-Concurrent-To": concurrent_to}
    return _builder.create_warc_record(
        uri, "request", payload=BytesIO(body), length=len(body),
        http_headers=_RawHead(head + sep),
        warc_headers_dict=_headers(uri, date, record_id or new_record_id(), extra))


def revisit_record(uri: str, date: datetime, ip: str, head: bytes, *, record_id: str,
                   profile: str, payload_digest: str | None, refers_to_uri: str | None,
                   refers_to_date: str | None, refers_to: str | None = None) -> ArcWarcRecord:
    """A ``revisit`` record: the response head only (or an empty block), pointing at the
    earlier capture.

    ``refers_to`` / ``refers_to_uri`` / ``refers_to_date`` name the record that holds the
    payload: its ``WARC-Record-ID``, ``WARC-Target-URI`` and exact ``WARC-Date`` (replay
    tools look the original up by URI and date). An identical-payload-digest revisit keeps
    the HTTP head but not the payload, which WARC 1.1 (6.7.2) marks ``WARC-Truncated:
    length``.
    """
    extra = {
        "WARC-IP-Address": ip,
        "WARC-Profile": profile,
        "WARC-Truncated": "length" if profile == PROFILE_IDENTICAL and head else None,
        "WARC-Payload-Digest": payload_digest,
        "WARC-Refers-To": refers_to,
        "WARC-Refers-To-Target-URI": refers_to_uri,
        "WARC-Refers-To-Date": _as_warc_date(refers_to_date),
    }
    return _builder.create_warc_record(
        uri, "revisit", http_headers=_RawHead(head) if head else None,
        warc_headers_dict=_headers(uri, date, record_id, extra))


def metadata_record(uri: str, date: datetime, fields: Iterable[tuple[str, str]], *,
                    concurrent_to: str) -> ArcWarcRecord:
    """A ``metadata`` record (``application/warc-fields``) about a fetch."""
    body = "".join(f"{k}: {_one_line(v)}\r\n" for k, v in fields).encode("utf-8")
    return _builder.create_warc_record(
        uri, "metadata", payload=BytesIO(body), length=len(body),
        warc_content_type="application/warc-fields",
        warc_headers_dict=_headers(uri, date, new_record_id(),
                                   {"WARC-Concurrent-To": concurrent_to}))


def _one_line(value: str) -> str:
    return " ".join(str(value).split())


def _as_warc_date(value: str | None) -> str | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return warc_date(dt)


class _GzipMember:
    """File-like sink compressing what warcio writes into one gzip member as it arrives, so
    a record is never held uncompressed in full a second time."""

    def __init__(self, level: int) -> None:
        self._comp = zlib.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        out = self._comp.compress(data)
        if out:
            self._parts.append(out)
        return len(data)

    def flush(self) -> None:
        """warcio flushes after each record; the member is finished in :meth:`finish`."""

    def finish(self) -> bytes:
        self._parts.append(self._comp.flush())
        return b"".join(self._parts)


def serialize(record: ArcWarcRecord, level: int) -> bytes:
    """One record as one gzip member."""
    sink = _GzipMember(level)
    _Writer(sink, gzip=False, warc_version=WARC_VERSION).write_record(record)
    return sink.finish()


def payload_digest(record: ArcWarcRecord) -> str | None:
    """The ``WARC-Payload-Digest`` warcio computed for a built record."""
    return record.rec_headers.get_header("WARC-Payload-Digest")


@dataclass(frozen=True)
class RecordLocation:
    """Where a record landed: final file path, offset and length of its gzip member; with
    ``write(..., keep_first=True)`` the first record's member itself (``member``), the bytes
    the file holds at ``offset`` (the fetch's inline parse reads them, recrawl.content.pagerows)."""

    path: str
    offset: int
    length: int
    member: bytes | None = field(default=None, repr=False, compare=False)


class WarcWriter:
    """Appends groups of records to rotating WARC files; safe to share between threads.

    Each file's CDXJ lines are built as its records are stored (fetcher.cdxj.RecordIndex,
    outside the lock): :meth:`index` returns them for the closed files, so the round's index
    needs no second read of its WARCs.
    """

    def __init__(self, directory: str, prefix: str, *, max_bytes: int, gzip_level: int,
                 info: dict[str, str], storage: Storage | None = None) -> None:
        self.directory = directory
        self.storage = storage or Storage()
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.gzip_level = gzip_level
        self.info = info
        self._lock = threading.Lock()
        self._fh: AtomicFile | None = None
        self._path: str | None = None
        self._size = 0
        self._seq = 0
        self._closed: list[str] = []
        self._index: RecordIndex | None = None
        self._lines: dict[str, list[str]] = {}

    def write(self, records: list[ArcWarcRecord], *,
              keep_first: bool = False) -> list[RecordLocation]:
        """Write ``records`` contiguously into one file; returns each record's location (the
        first with its gzip member when ``keep_first``)."""
        members = [serialize(r, self.gzip_level) for r in records]
        total = sum(len(m) for m in members)
        with self._lock:
            if self._fh is not None and self._size + total > self.max_bytes:
                self._close_current()
            if self._fh is None:
                self._open()
            assert self._fh is not None and self._path is not None
            locations = []
            offset = self._fh.tell()
            for i, m in enumerate(members):
                locations.append(RecordLocation(self._path, offset, len(m),
                                                m if keep_first and i == 0 else None))
                offset += len(m)
            self._fh.write(b"".join(members))
            self._size = offset
            index, lines = self._index, self._lines[self._path]
        assert index is not None
        for r, loc in zip(records, locations, strict=True):
            line = index.line(r, loc.offset, loc.length)
            if line:
                lines.append(line)  # list.append is atomic: writers of one file share the list
        return locations

    def index(self) -> dict[str, list[str]]:
        """The closed files' CDXJ lines (cdxj-indexer's own, sorted), by final path."""
        with self._lock:
            return {p: sorted(self._lines.get(p, ())) for p in self._closed}

    def close(self) -> list[str]:
        """Close the open file; returns every closed file's final path, in order."""
        with self._lock:
            self._close_current()
            return list(self._closed)

    def _open(self) -> None:
        name = f"{self.prefix}-{self._seq:05d}.warc.gz"
        self._seq += 1
        self._path = join(self.directory, name)
        self._fh = self.storage.create(self._path)
        self._index = RecordIndex(name)
        self._lines[self._path] = []
        info = _builder.create_warcinfo_record(name, self.info)
        data = serialize(info, self.gzip_level)
        self._fh.write(data)
        self._size = len(data)

    def _close_current(self) -> None:
        if self._fh is None:
            return
        assert self._path is not None
        self._fh.commit()
        self._closed.append(self._path)
        self._fh = None
        self._path = None
        self._size = 0
