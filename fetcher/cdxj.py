"""The round's CDXJ index: one sorted file next to the round's WARCs, as the archives keep.

Written by the fetch step once the round's WARC files are final (``warc/<round>/index.cdxj``):
one line per ``response`` and ``revisit`` record, ``<SURT> <14-digit timestamp> {json}`` with
url, mime, status, digest, length, offset and filename (the WARC's base name), the format
pywb, OutbackCDX and cdxj-indexer share. Lines are built by cdxj-indexer itself, so they are
what ``cdxj-indexer`` would print for the same files; ``crawler replay`` hands the files to
pywb unchanged.

Two ways to the same lines: :func:`index_lines` reads finished files back (cdxj-indexer's own
reading), and :class:`RecordIndex` hands cdxj-indexer each record as the WARC writer stores it,
with the offset and length it was stored at. The fetch task keeps the second
(``fetcher.warc.WarcWriter.index``): reading a round's WARCs back cost the fetch step ~18 s in
the driver on a 96k-page round, the write-time lines cost the fetch threads ~55 us a record. A
test holds the two equal on the simulated web's hostile hosts.
"""

from __future__ import annotations

import io
import posixpath
from collections.abc import Iterable

from fetcher.storage import Storage

INDEX_NAME = "index.cdxj"
RECORDS = "response,revisit"


def index_lines(warc_files: Iterable[str], storage: Storage | None = None) -> list[str]:
    """Sorted CDXJ lines for ``warc_files`` (local paths or ``s3a://`` URIs)."""
    from cdxj_indexer.main import CDXJIndexer  # lazy: heavy (cdxj_indexer loads surt, tldextract)

    storage = storage or Storage()
    out = io.StringIO()
    for path in warc_files:
        with storage.open_read(path) as fh:
            # ``filename``: pywb resolves a record by the WARC's base name in its archive dir.
            CDXJIndexer(output=_Unclosable(out), inputs=[fh], records=RECORDS,
                        filename=posixpath.basename(path)).process_all()
    return sorted(line for line in out.getvalue().splitlines() if line)


class RecordIndex:
    """cdxj-indexer's line for each record of one WARC file as it is written (thread-safe)."""

    def __init__(self, filename: str) -> None:
        from cdxj_indexer.main import CDXJIndexer  # lazy: heavy

        self._indexer = CDXJIndexer(output=None, inputs=[], records=RECORDS, filename=filename)
        self._indexer.curr_filename = filename  # what process_one would set for this file
        self.filename = filename

    def line(self, record, offset: int, length: int) -> str | None:
        """The record's line (a ``warcio`` record, as written), or None if not indexed."""
        if not self._indexer.filter_record(record):
            return None
        out = io.StringIO()
        self._indexer.process_index_entry(_At(offset, length), record, self.filename, out)
        return out.getvalue().rstrip("\n") or None


class _At:
    """The two questions cdxj-indexer asks its record iterator: where the record starts in the
    file and how long its gzip member is."""

    def __init__(self, offset: int, length: int) -> None:
        self._offset = offset
        self._length = length

    def get_record_offset(self) -> int:
        return self._offset

    def get_record_length(self) -> int:
        return self._length


def write_index(directory: str, warc_files: Iterable[str], storage: Storage | None = None,
                known: dict[str, list[str]] | None = None) -> tuple[str, int]:
    """Write ``directory/index.cdxj`` for ``warc_files``; returns its path and line count.

    ``known``: lines already built per file (by :class:`RecordIndex`, keyed by path or base
    name); only the files not in it are read back.
    """
    storage = storage or Storage()
    known = {posixpath.basename(k): v for k, v in (known or {}).items()}
    files = sorted(warc_files)
    lines = [line for f in files for line in known.get(posixpath.basename(f), ())]
    lines += index_lines([f for f in files if posixpath.basename(f) not in known], storage)
    lines.sort()
    path = posixpath.join(directory, INDEX_NAME)
    fh = storage.create(path)
    fh.write("".join(line + "\n" for line in lines).encode("utf-8"))
    fh.commit()
    return path, len(lines)


class _Unclosable:
    """cdxj-indexer closes its output when done with one input: keep ours open."""

    def __init__(self, inner: io.StringIO) -> None:
        self._inner = inner

    def write(self, s: str) -> int:
        return self._inner.write(s)

    def flush(self) -> None:
        """Nothing to flush in memory."""

    def close(self) -> None:
        """Left open for the next input."""

    def __enter__(self) -> _Unclosable:
        return self

    def __exit__(self, *exc: object) -> None:
        """See :meth:`close`."""
