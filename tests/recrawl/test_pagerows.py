"""One function, two paths (recrawl.content.pagerows): a page parsed from the gzip member the fetcher
just wrote (the fetch's inline parse, recrawl.content.parsepool) equals the page the parse step reads
back from the WARC at the row's offset -- on a table of cases, without Spark: plain, gzip and
chunked bodies, legacy charsets, a truncated capture, a sitemap, nofollow, binary and empty
bodies, a nesting bomb, an identical-payload revisit."""

from __future__ import annotations

import datetime as dt
import gzip
import http.client
import io
import time

import pytest

from app.demo import demo_config
from fetcher import models as m
from fetcher import warc
from fetcher.archive import write_exchange
from fetcher.http import Exchange
from fetcher.models import FetchItem
from recrawl.content.parsepool import ParsePool, parse_member
from spark_jobs.parse import parse_options, parse_rows

PAGE = ("<html lang=de><head><title>Gezeiten</title></head><body><p>"
        + "Die Gezeitentafeln der Bucht, für Segler und Fischer. " * 30
        + '<a href="/b?utm_source=x">weiter</a> <a href="http://other.test/c">andere</a>'
        + "</p></body></html>")
SITEMAP = (b'<?xml version="1.0" encoding="UTF-8"?>'
           b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
           b"<url><loc>http://a.test/s1</loc></url><url><loc>http://a.test/s2</loc></url>"
           b"</urlset>")


def _chunked(body: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 700]), body[i:i + 700])
                    for i in range(0, len(body), 700)) + b"0\r\n\r\n"


# name -> (headers, body as sent, truncated)
CASES = {
    "utf8": ({"Content-Type": "text/html; charset=utf-8"}, PAGE.encode(), None),
    "latin1-no-header": ({"Content-Type": "text/html"},
                         PAGE.replace("<head>", '<head><meta charset="iso-8859-1">')
                         .encode("latin-1"), None),
    "gzip": ({"Content-Type": "text/html", "Content-Encoding": "gzip"},
             gzip.compress(PAGE.encode()), None),
    "chunked-gzip": ({"Content-Type": "text/html", "Content-Encoding": "gzip",
                      "Transfer-Encoding": "chunked"}, _chunked(gzip.compress(PAGE.encode())),
                     None),
    "truncated": ({"Content-Type": "text/html"}, PAGE.encode()[:1500], "length"),
    "sitemap": ({"Content-Type": "application/xml"}, SITEMAP, None),
    "nofollow": ({"Content-Type": "text/html"},
                 PAGE.replace("<head>", '<head><meta name="robots" content="nofollow">').encode(),
                 None),
    "no-type": ({}, PAGE.encode(), None),
    "binary": ({"Content-Type": "text/html"}, bytes(range(256)) * 40, None),
    "empty": ({"Content-Type": "text/html"}, b"", None),
    "nesting-bomb": ({"Content-Type": "text/html"}, b"<div>" * 5000 + b"deep", None),
    "revisit": ({"Content-Type": "text/html"}, b"<html><p>same as before</p></html>", None),
}


def _exchange(name: str) -> tuple[Exchange, FetchItem]:
    headers, body, truncated = CASES[name]
    url = f"http://a.test/{name}"
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    if "Transfer-Encoding" not in headers:
        lines += f"Content-Length: {len(body)}\r\n"
    head = f"HTTP/1.1 200 OK\r\n{lines}\r\n".encode("latin-1")
    msg = http.client.parse_headers(io.BytesIO(head.split(b"\r\n", 1)[1]))
    ex = Exchange(url=url, ip="127.0.0.1", start=0.0, started_at=dt.datetime.now(dt.UTC),
                  end=0.1, request=b"GET / HTTP/1.1\r\n\r\n", status=200, headers=msg,
                  head=head, body=body, complete=truncated is None, truncated=truncated)
    item = FetchItem(url=url, host="a.test")
    if name == "revisit":  # the same payload as the previous capture
        from fetcher.classify import sha1_digest

        item = FetchItem(url=url, host="a.test", prev_payload_digest=sha1_digest(body),
                         prev_record_id="<urn:uuid:x>", prev_warc_date="2026-01-01T00:00:00Z")
    return ex, item


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """Every case written through the fetcher's WARC writer: (meta row, kept member) by name."""
    tmp = tmp_path_factory.mktemp("pagerows")
    writer = warc.WarcWriter(str(tmp), "t", max_bytes=1 << 30, gzip_level=1, info={})
    out = {}
    for name in CASES:
        ex, item = _exchange(name)
        values = write_exchange(writer, ex, m.FETCHED, chain=[], item=item, keep=True)
        member = values.pop("warc_member", None)
        out[name] = ({"round_id": "r1", "url": ex.url, "final_url": ex.url,
                      "content_type": ex.header("Content-Type"), **values}, member)
    files = writer.close()
    for meta, _ in out.values():
        meta["warc_file"] = files[0]
    return out, opts_for(tmp)


def opts_for(tmp) -> dict:
    return parse_options(demo_config(tmp / "home"))


def test_the_kept_member_is_what_the_warc_holds_at_the_rows_offset(captured):
    rows, _ = captured
    for name, (meta, member) in rows.items():
        if name == "revisit":
            assert member is None  # nothing to parse: no member kept
            continue
        with open(meta["warc_file"], "rb") as fh:
            fh.seek(meta["warc_offset"])
            assert fh.read(meta["warc_length"]) == member, name


@pytest.mark.parametrize("name", sorted(CASES))
def test_inline_and_warc_parse_give_equal_rows(captured, name):
    rows, opts = captured
    meta, member = rows[name]
    from_warc = list(parse_rows([meta], opts))
    if member is None:
        assert from_warc == []  # an identical-payload revisit is not parsed
        return
    assert [parse_member(meta, member, opts)] == from_warc
    assert from_warc[0]["url"] == meta["url"]


def test_the_pool_parses_in_processes_and_returns_the_same_rows(captured):
    rows, opts = captured
    pool = ParsePool(opts, "r1", workers=2)
    want = []
    for meta, member in rows.values():
        if member is not None:
            pool.submit({k: v for k, v in meta.items() if k != "round_id"}, member)
            want.extend(parse_rows([meta], opts))
    got = pool.results()
    key = lambda r: r["url"]  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key)
    assert {r["title"] for r in got if r["url"].endswith("/utf8")} == {"Gezeiten"}


def _slow_parse_member(meta, member, opts):  # a parse slower than the fetch that feeds it
    import time

    time.sleep(0.3)
    return parse_member(meta, member, opts)


def test_a_full_backlog_leaves_pages_to_the_parse_step(captured, monkeypatch):
    # one worker, a backlog of 2, parses slower than the submits: the pool takes only what its
    # backlog holds, returns exactly those rows, and counts the rest as left to the parse step
    import recrawl.content.parsepool as pp

    rows, opts = captured
    monkeypatch.setattr(pp, "parse_member", _slow_parse_member)  # forked workers inherit it
    pool = ParsePool(opts, "r1", workers=1, max_pending=2)
    metas = [meta for meta, member in rows.values() if member is not None]
    assert len(metas) >= 5
    members = {meta["url"]: member for meta, member in rows.values() if member is not None}
    for meta in metas:
        pool.submit({k: v for k, v in meta.items() if k != "round_id"}, members[meta["url"]])
    assert pool.submitted == 2 and pool.left == len(metas) - 2
    got = pool.results()
    assert sorted(r["url"] for r in got) == sorted(m["url"] for m in metas[:2])
    assert pool.pending == 0
    with pytest.raises(ValueError, match="inline_max_pending"):
        ParsePool(opts, "r1", max_pending=0)


def test_a_backlog_below_one_is_refused_by_the_driver_before_any_spark_work(tmp_path):
    # spark=None: the check comes first, so a bad key fails the step, not its fetch tasks
    from recrawl.config import ConfigError
    from spark_jobs import fetch

    cfg = demo_config(tmp_path / "home").with_overrides({"parse.inline_max_pending": 0})
    with pytest.raises(ConfigError, match="parse.inline_max_pending must be at least 1"):
        fetch.run(None, cfg, "20260301", dt.datetime(2026, 3, 1, tzinfo=dt.UTC))


def test_the_pool_workers_run_at_the_configured_lower_priority(captured):
    # they parse on the CPU the fetch leaves idle: niceness raised by `nice`, the fetch's not
    import psutil

    rows, opts = captured
    base = psutil.Process().nice()
    for nice, expected in ((19, min(19, base + 19)), (0, base)):
        pool = ParsePool(opts, "r1", workers=2, nice=nice)
        try:
            workers = [psutil.Process(pid) for pid in pool._pool._processes]
            assert len(workers) == 2
            # a worker lowers its priority in its initializer, before it takes any page; the
            # second may still be starting when the pool is back from its first submit
            end = time.monotonic() + 10.0
            while time.monotonic() < end and any(w.nice() != expected for w in workers):
                time.sleep(0.05)
            assert [w.nice() for w in workers] == [expected, expected]
            meta, member = next((m, b) for m, b in rows.values() if b is not None)
            pool.submit({k: v for k, v in meta.items() if k != "round_id"}, member)
            assert [r["url"] for r in pool.results()] == [meta["url"]]
        finally:
            pool.close()
    assert psutil.Process().nice() == base
    for bad in (-1, 20, "19", True):
        with pytest.raises(ValueError, match="parse.inline_nice must be an integer"):
            ParsePool(opts, "r1", nice=bad)


@pytest.mark.parametrize("bad", [-5, 25])
def test_a_bad_niceness_is_refused_by_the_driver(tmp_path, bad):
    from recrawl.config import ConfigError
    from spark_jobs import fetch

    cfg = demo_config(tmp_path / "home").with_overrides({"parse.inline_nice": bad})
    with pytest.raises(ConfigError, match="parse.inline_nice must be an integer from 0 to 19"):
        fetch.run(None, cfg, "20260301", dt.datetime(2026, 3, 1, tzinfo=dt.UTC))
    with pytest.raises(ConfigError, match="parse.inline_nice must be int"):  # the config's check
        demo_config(tmp_path / "home").with_overrides({"parse.inline_nice": "low"})

