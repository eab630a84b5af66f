"""Bytes per page in WARC files: compressed on disk vs uncompressed, per record type.

    .venv/bin/python benchmarks/warc_bytes.py DIR_OR_FILES...   # e.g. <crawl.home>/warc

Feeds the storage line of the capacity plan (docs/scale.md): each record is its own gzip
member (fetcher.warc_gzip_level), so the compressed size of one record is the distance between
two record offsets.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path


def measure(paths: list[Path]) -> dict:
    from warcio.archiveiterator import ArchiveIterator

    raw, count = Counter(), Counter()
    payload = 0
    for path in paths:
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh)
            for rec in it:
                kind = rec.rec_type
                body = rec.content_stream().read()
                if kind == "response":
                    payload += len(body)
                # header block + body, as written before compression
                raw[kind] += len(rec.rec_headers.to_str()) + len(body) + (
                    len(rec.http_headers.to_str()) if rec.http_headers else 0)
                count[kind] += 1
    return {"raw": raw, "count": count, "payload": payload}


def member_sizes(path: Path) -> list[tuple[str, int]]:
    """(record type, compressed bytes) per record, from consecutive record offsets."""
    from warcio.archiveiterator import ArchiveIterator

    out = []
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        for rec in it:
            kind = rec.rec_type
            it.read_to_end(rec)
            out.append((kind, it.get_record_length()))
    return out


def main(argv: list[str]) -> int:
    paths: list[Path] = []
    for a in argv or ["crawl-home/warc"]:
        p = Path(a)
        paths += sorted(p.rglob("*.warc.gz")) if p.is_dir() else [p]
    m = measure(paths)
    comp, count = Counter(), Counter()
    for path in paths:
        for kind, size in member_sizes(path):
            comp[kind] += size
            count[kind] += 1
    total_c, total_r = sum(comp.values()), sum(m["raw"].values())
    pages = count["response"] + count["revisit"]
    print(f"{len(paths)} files, {sum(count.values())} records, {count['response']} responses, "
          f"{count['revisit']} revisits")
    for kind in sorted(count):
        print(f"  {kind:<9} {count[kind]:>7} records {comp[kind] / count[kind]:>9,.0f} B "
              f"compressed {m['raw'][kind] / count[kind]:>9,.0f} B raw")
    print(f"per fetched URL (response or revisit + its request + metadata): "
          f"{total_c / max(pages, 1):,.0f} B compressed, {total_r / max(pages, 1):,.0f} B raw, "
          f"ratio {total_r / max(total_c, 1):.2f}; mean response payload "
          f"{m['payload'] / max(count['response'], 1):,.0f} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
