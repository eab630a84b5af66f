"""The round's CDXJ index: one sorted file next to the round's WARCs, as the archives keep.

Written by the fetch step once the round's WARC files are final (``warc/<round>/index.cdxj``):
one line per ``response`` and ``revisit`` record, ``<SURT> <14-digit timestamp> {json}`` with
url, mime, status, digest, length, offset and filename (the WARC's base name), the format
pywb, OutbackCDX and cdxj-indexer share. Lines are built by cdxj-indexer itself, so they are
what ``cdxj-indexer`` would print for the same files; ``crawler replay`` hands the files to
pywb unchanged.
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


def write_index(directory: str, warc_files: Iterable[str],
                storage: Storage | None = None) -> tuple[str, int]:
    """Write ``directory/index.cdxj`` for ``warc_files``; returns its path and line count."""
    storage = storage or Storage()
    lines = index_lines(sorted(warc_files), storage)
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
