"""WARC writer: records read back by offset, digests, rotation, crash safety, validators."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from fetcher import warc
from fetcher.classify import sha1_digest

BIN = Path(sys.executable).parent
DATE = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Odd:  spaced  value \r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")
CHUNKED = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
REQUEST = b"GET /a HTTP/1.1\r\nHost: h.test\r\nUser-Agent: recrawlbot\r\n\r\n"


def writer(tmp_path, **kw) -> warc.WarcWriter:
    args = {"max_bytes": 10**9, "gzip_level": 6, "info": {"software": "test"}}
    args.update(kw)
    return warc.WarcWriter(str(tmp_path), "t", **args)


def exchange_records(uri="http://h.test/a", head=HEAD, body=CHUNKED, truncated=None):
    rid = warc.new_record_id()
    return rid, [
        warc.response_record(uri, DATE, "127.0.0.1", head, body, record_id=rid,
                             truncated=truncated),
        warc.request_record(uri, DATE, "127.0.0.1", REQUEST, concurrent_to=rid),
        warc.metadata_record(uri, DATE, [("fetchTimeMs", "12"), ("via", "http://h.test/")],
                             concurrent_to=rid),
    ]


def read_at(path: str, offset: int):
    with open(path, "rb") as fh:
        fh.seek(offset)
        rec = next(iter(ArchiveIterator(fh)))
        return rec, rec.content_stream().read()


def test_round_trip_by_offset_with_exact_bytes_and_digests(tmp_path):
    w = writer(tmp_path)
    rid, records = exchange_records()
    locs = w.write(records)
    files = w.close()
    assert files == [str(tmp_path / "t-00000.warc.gz")] and os.path.exists(files[0])
    resp, content = read_at(files[0], locs[0].offset)
    h = resp.rec_headers
    assert h.protocol == "WARC/1.1"
    assert h.get_header("WARC-Type") == "response"
    assert h.get_header("WARC-Record-ID") == rid
    assert h.get_header("WARC-Date") == "2026-03-04T05:06:07.890123Z"
    assert h.get_header("WARC-IP-Address") == "127.0.0.1"
    # Payload digest over the stored entity (still chunk-framed), as warcio check expects.
    assert h.get_header("WARC-Payload-Digest") == sha1_digest(CHUNKED)
    assert h.get_header("WARC-Block-Digest") == sha1_digest(HEAD + CHUNKED)
    assert content == b"hello world"  # readers undo the chunking
    req, _ = read_at(files[0], locs[1].offset)
    assert req.rec_headers.get_header("WARC-Type") == "request"
    assert req.rec_headers.get_header("WARC-Concurrent-To") == rid
    meta, body = read_at(files[0], locs[2].offset)
    assert meta.rec_headers.get_header("WARC-Concurrent-To") == rid
    assert b"via: http://h.test/" in body
    # a metadata block is warc-fields, not an HTTP message: no payload, no payload digest
    assert meta.rec_headers.get_header("WARC-Payload-Digest") is None
    assert meta.rec_headers.get_header("WARC-Block-Digest") == sha1_digest(body)
    # Lengths tile the file: the next record starts where this one ends.
    assert locs[1].offset == locs[0].offset + locs[0].length


def test_raw_head_survives_byte_for_byte(tmp_path):
    w = writer(tmp_path)
    _, records = exchange_records()
    loc = w.write(records)[0]
    path = w.close()[0]
    import gzip

    with open(path, "rb") as fh:
        fh.seek(loc.offset)
        member = gzip.GzipFile(fileobj=fh).read()
    assert HEAD + CHUNKED in member


def test_warcinfo_first_and_version_1_1(tmp_path):
    w = writer(tmp_path, info={"software": "s", "operator": "crawler@example.invalid"})
    w.write(exchange_records()[1])
    path = w.close()[0]
    with open(path, "rb") as fh:
        first = next(iter(ArchiveIterator(fh)))
        assert first.rec_headers.get_header("WARC-Type") == "warcinfo"
        assert first.rec_headers.get_header("WARC-Filename") == "t-00000.warc.gz"
        assert first.rec_headers.protocol == "WARC/1.1"
        assert b"operator: crawler@example.invalid" in first.content_stream().read()


def test_revisit_records(tmp_path):
    w = writer(tmp_path)
    head304 = b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"
    nm = warc.revisit_record("http://h.test/a", DATE, "127.0.0.1", head304,
                             record_id=warc.new_record_id(),
                             profile=warc.PROFILE_NOT_MODIFIED, payload_digest=None,
                             refers_to_uri="http://h.test/a",
                             refers_to_date="2026-01-01T00:00:00+00:00")
    digest = sha1_digest(b"same")
    ident = warc.revisit_record("http://h.test/b", DATE, "127.0.0.1",
                                b"HTTP/1.1 200 OK\r\n\r\n", record_id=warc.new_record_id(),
                                profile=warc.PROFILE_IDENTICAL, payload_digest=digest,
                                refers_to_uri="http://h.test/b",
                                refers_to_date="2026-01-01T00:00:00Z")
    l1, l2 = w.write([nm]), w.write([ident])
    path = w.close()[0]
    r1, _ = read_at(path, l1[0].offset)
    assert r1.rec_headers.get_header("WARC-Type") == "revisit"
    assert r1.rec_headers.get_header("WARC-Profile") == warc.PROFILE_NOT_MODIFIED
    assert r1.rec_headers.get_header("WARC-Refers-To-Date") == "2026-01-01T00:00:00Z"
    r2, _ = read_at(path, l2[0].offset)
    assert r2.rec_headers.get_header("WARC-Profile") == warc.PROFILE_IDENTICAL
    assert r2.rec_headers.get_header("WARC-Payload-Digest") == digest
    assert r2.rec_headers.get_header("WARC-Refers-To-Target-URI") == "http://h.test/b"
    assert r2.rec_headers.get_header("WARC-Truncated") == "length"  # head kept, payload not
    assert r1.rec_headers.get_header("WARC-Truncated") is None  # a 304 has no payload to cut


def test_truncated_capture_is_marked(tmp_path):
    w = writer(tmp_path)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\n"
    loc = w.write(exchange_records(head=head, body=b"x" * 10, truncated="length")[1])[0]
    rec, _ = read_at(w.close()[0], loc.offset)
    assert rec.rec_headers.get_header("WARC-Truncated") == "length"


def test_rotation_keeps_groups_together_and_open_files_are_renamed_on_close(tmp_path):
    w = writer(tmp_path, max_bytes=3000)
    locs = [w.write(exchange_records(uri=f"http://h.test/{i}")[1]) for i in range(6)]
    names = sorted(p.name for p in tmp_path.iterdir())
    # Rotated files are final; only the file still being written has the .open suffix.
    assert [n for n in names if n.endswith(".open")] == [names[-1]]
    assert names[-1] == f"t-{len(names) - 1:05d}.warc.gz.open"
    files = w.close()
    assert len(files) >= 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(os.path.basename(f)
                                                              for f in files)
    for group in locs:
        assert len({loc.path for loc in group}) == 1  # a fetch's records share one file
    for f in files:
        assert os.path.getsize(f) <= 3000 or sum(1 for _ in ArchiveIterator(open(f, "rb"))) <= 4
        with open(f, "rb") as fh:
            assert next(iter(ArchiveIterator(fh))).rec_headers.get_header(
                "WARC-Type") == "warcinfo"


def test_concurrent_writers_produce_a_valid_file(tmp_path):
    w = writer(tmp_path)
    results: list = []

    def work(k):
        for i in range(25):
            rid, recs = exchange_records(uri=f"http://h{k}.test/{i}")
            results.append((rid, w.write(recs)[0]))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    path = w.close()[0]
    for rid, loc in results:
        rec, content = read_at(path, loc.offset)
        assert rec.rec_headers.get_header("WARC-Record-ID") == rid
        assert content == b"hello world"
    check_with_tools(path)


def check_with_tools(path: str) -> None:
    """`warcio check` and `cdxj-indexer` both accept the file."""
    chk = subprocess.run([str(BIN / "warcio"), "check", "-v", path], capture_output=True,
                         text=True, timeout=60)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    assert "digest failed" not in chk.stdout
    idx = subprocess.run([str(BIN / "cdxj-indexer"), path], capture_output=True, text=True,
                         timeout=60)
    assert idx.returncode == 0, idx.stderr
    assert idx.stdout.strip(), "cdxj-indexer produced no lines"


def test_empty_writer_creates_no_file(tmp_path):
    w = writer(tmp_path)
    assert w.close() == []
    assert list(tmp_path.iterdir()) == []


def test_index_is_built_as_written_and_write_index_reads_back_only_unknown_files(tmp_path):
    """The writer's per-file CDXJ lines equal cdxj-indexer's reading of the closed files
    (rotation, a revisit, an odd head and a head-only capture included); write_index takes the
    known lines and reads back only a file it was not given."""
    from fetcher.cdxj import index_lines, write_index

    w = writer(tmp_path, max_bytes=2500)
    for i in range(6):
        _, records = exchange_records(uri=f"http://h.test/{i}",
                                      truncated="unspecified" if i == 3 else None)
        w.write(records)
    w.write([warc.revisit_record("http://h.test/0", DATE, "127.0.0.1", b"", record_id=warc.new_record_id(),
                                 profile=warc.PROFILE_NOT_MODIFIED, payload_digest=None,
                                 refers_to_uri="http://h.test/0", refers_to_date=None)])
    files = w.close()
    index = w.index()
    assert len(files) > 2 and set(index) == set(files)
    for f in files:
        assert index[f] == index_lines([f]) and index[f], f
    assert sum(len(v) for v in index.values()) == 7  # 6 responses and the revisit, nothing else
    known = {f: index[f] for f in files[1:]}
    known[str(tmp_path / "gone.warc.gz")] = ["x 1 {}"]  # a file the round does not reference
    os.remove(files[1])  # a known file is never read back
    path, n = write_index(str(tmp_path), files, known=known)
    lines = Path(path).read_text().splitlines()
    assert n == 7 and lines == sorted(line for f in files for line in index[f])
