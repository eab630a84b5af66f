"""WARCs that replay: a multi-round crawl over simweb, then its WARCs read as the archives' tools
read them.

* every revisit names (WARC-Refers-To, -Target-URI, -Date) a response that exists in an
  earlier record of the crawl, with the same payload digest -- read with warcio and FastWARC;
* each round's CDXJ index has one line per response and revisit, whose offset reads it back;
* pywb (its own virtualenv) replays every page the crawl captured, revisits of both profiles
  included, through raw ``id_`` replay at the capture's timestamp, byte for byte what simweb
  served that day;
* headless Chromium loads a replayed page.
"""

from __future__ import annotations

import datetime as dt
import gzip
import http.client
import json
import os
import re
import socket
import subprocess
import time
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from app.demo import demo_config
from recrawl.rules.rounds import STEPS, parse_date, round_id_for
from tests.chromium import chromium_or_skip

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]

START = "2026-11-01"
ROUNDS = 3
UA = "replay-test"


def _get(port: int, host: str, path: str, timeout: float = 30.0) -> tuple[int, dict, bytes]:
    """GET through 127.0.0.1 with a Host header; the body with Content-Encoding undone."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": host, "User-Agent": UA,
                                           "Accept-Encoding": "gzip, deflate"})
        resp = conn.getresponse()
        body = resp.read()
        headers = {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()
    return resp.status, headers, _decode(headers.get("content-encoding"), body)


def _decode(coding: str | None, body: bytes) -> bytes:
    for c in reversed([c.strip().lower() for c in (coding or "").split(",") if c.strip()]):
        if c in ("gzip", "x-gzip"):
            body = gzip.decompress(body)
        elif c == "deflate":
            try:
                body = zlib.decompress(body)
            except zlib.error:
                body = zlib.decompress(body, -zlib.MAX_WBITS)
    return body


def _served(web, url: str) -> bytes | None:
    """What simweb serves for ``url`` now (the round's day); None when two requests disagree
    (pages that differ per request, e.g. session ids) or the answer is not a 200."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    bodies = []
    for _ in range(2):
        status, _, body = _get(web.port, parts.netloc, path or "/")
        if status != 200:
            return None
        bodies.append(body)
    return bodies[0] if bodies[0] == bodies[1] else None


@pytest.fixture(scope="module")
def crawl(spark, tmp_path_factory):
    from app.cli import run_step
    from recrawl.store.tables import init_tables, read
    from simweb import SimWeb
    from spark_jobs import inject

    home = tmp_path_factory.mktemp("replay")
    web = SimWeb(seed=11, n_sites=3, pages_per_site=8)
    web.start()
    cfg = demo_config(home, **{
        "fetcher.time_budget_s": 20.0, "fetcher.min_delay_s": 0.2,
        "generate.max_per_host": 10, "spark.shuffle_partitions": 2,
        # revisit every page each day: both revisit profiles within three rounds
        "schedule.policy": "fixed", "schedule.default_interval_days": 1.0,
    })
    init_tables(spark, cfg)
    seeds = home / "seeds.txt"
    seeds.write_text("\n".join(web.seed_urls()) + "\n")
    inject.run(spark, cfg, str(seeds), parse_date(START))
    served: dict[tuple[str, str], bytes | None] = {}
    for i in range(ROUNDS):
        logical = parse_date(START) + dt.timedelta(days=i)
        web.set_day(i)
        rid = round_id_for(cfg, logical)
        for s in STEPS:
            run_step(spark, cfg, s, rid, logical)
        # What the server serves for each captured page on this (simulated) day.
        rows = read(spark, cfg, "fetches").where(
            f"round_id = '{rid}' AND fetch_status IN ('fetched', 'not_modified') "
            "AND warc_type IS NOT NULL AND NOT truncated").collect()
        for r in rows:
            served[(rid, r["warc_target_uri"])] = _served(web, r["warc_target_uri"])
    fetches = [r.asDict() for r in read(spark, cfg, "fetches").collect()]
    yield {"cfg": cfg, "web": web, "home": home, "served": served, "fetches": fetches}
    web.stop()


def _warc_files(home: Path) -> list[Path]:
    """The fetch step's WARC files in crawl order. The signals step's reads of sitemaps and
    feeds (warc/<round>/signals/, their own CDXJ) are left out: a 304 there is written as a
    revisit that refers to no stored response (signal_sources keeps no record ids)."""
    return sorted((p for p in (home / "warc").rglob("*.warc.gz") if p.parent.name != "signals"),
                  key=lambda p: (p.parent.name, p.name))


def _records_warcio(path: Path) -> list[dict]:
    from warcio.archiveiterator import ArchiveIterator

    out = []
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        for rec in it:
            h = rec.rec_headers
            out.append({k: h.get_header(k) for k in (
                "WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Target-URI",
                "WARC-Payload-Digest", "WARC-Refers-To", "WARC-Refers-To-Date",
                "WARC-Refers-To-Target-URI", "WARC-Profile", "WARC-Truncated")}
                | {"offset": it.get_record_offset()})
    return out


def _records_fastwarc(path: Path) -> list[dict]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, record_types=WarcRecordType.any_type,
                                   parse_http=False):
            h = rec.headers
            out.append({k: h.get(k) for k in (
                "WARC-Type", "WARC-Record-ID", "WARC-Date", "WARC-Target-URI",
                "WARC-Payload-Digest", "WARC-Refers-To", "WARC-Refers-To-Date",
                "WARC-Refers-To-Target-URI", "WARC-Profile", "WARC-Truncated")}
                | {"offset": rec.stream_pos})
    return out


@pytest.mark.parametrize("reader", ["warcio", "fastwarc"])
def test_every_revisit_refers_to_an_earlier_response(crawl, reader):
    read = _records_warcio if reader == "warcio" else _records_fastwarc
    seen: dict[str, dict] = {}  # record id -> record, in crawl order
    profiles: dict[str, int] = {}
    for path in _warc_files(crawl["home"]):
        records = read(path)
        for rec in records:
            if rec["WARC-Type"] == "revisit":
                profiles[rec["WARC-Profile"].rsplit("/", 1)[-1]] = profiles.get(
                    rec["WARC-Profile"].rsplit("/", 1)[-1], 0) + 1
                orig = seen.get(rec["WARC-Refers-To"])
                assert orig is not None, (path.name, rec)
                assert orig["WARC-Type"] == "response"
                assert orig["WARC-Date"] == rec["WARC-Refers-To-Date"]
                assert orig["WARC-Target-URI"] == rec["WARC-Refers-To-Target-URI"]
                assert orig["WARC-Payload-Digest"] == rec["WARC-Payload-Digest"]
                if rec["WARC-Profile"].endswith("identical-payload-digest"):
                    assert rec["WARC-Truncated"] == "length"
            if rec["WARC-Type"] == "metadata":
                assert rec["WARC-Payload-Digest"] is None
        # records of a later file may refer to this one, not the other way round
        seen.update({r["WARC-Record-ID"]: r for r in records})
    # both profiles occur, or the test proves little
    assert profiles.get("server-not-modified", 0) > 0, profiles
    assert profiles.get("identical-payload-digest", 0) > 0, profiles


def test_rows_and_records_agree(crawl):
    by_file: dict[str, dict[int, dict]] = {}
    for r in crawl["fetches"]:
        if r["warc_file"] is None:
            continue
        if r["warc_file"] not in by_file:
            by_file[r["warc_file"]] = {x["offset"]: x for x in _records_warcio(Path(r["warc_file"]))}
        rec = by_file[r["warc_file"]][r["warc_offset"]]
        assert rec["WARC-Record-ID"] == r["warc_record_id"]
        assert rec["WARC-Type"] == r["warc_type"]
        assert rec["WARC-Target-URI"] == r["warc_target_uri"]
        assert rec["WARC-Date"] == r["warc_date"]
        assert rec["WARC-Payload-Digest"] == r["payload_digest"], r
        # the record is the url's own capture or the last hop of its redirect chain
        assert r["warc_target_uri"] in (r["url"], r["final_url"], *(r["redirect_chain"] or []))


def test_cdxj_index_per_round_has_a_line_per_capture_with_its_offset(crawl):
    home = crawl["home"]
    for rdir in sorted((home / "warc").iterdir()):
        lines = (rdir / "index.cdxj").read_text().splitlines()
        assert lines == sorted(lines)
        entries = {}
        for line in lines:
            key, ts, blob = line.split(" ", 2)
            e = json.loads(blob)
            entries[(e["filename"], int(e["offset"]))] = (key, ts, e)
        expected = set()
        for path in rdir.glob("*.warc.gz"):
            for rec in _records_warcio(path):
                if rec["WARC-Type"] in ("response", "revisit"):
                    expected.add((path.name, rec["offset"]))
                    key, ts, e = entries[(path.name, rec["offset"])]
                    assert e["url"] == rec["WARC-Target-URI"]
                    assert ts == rec["WARC-Date"][:19].replace("-", "").replace(":", "").replace(
                        "T", "")
        assert set(entries) == expected


@pytest.fixture(scope="module")
def pywb(crawl):
    from app.replay import PywbMissing, build_collection, start

    try:
        coll = build_collection(crawl["cfg"])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = start(coll, port)
    except PywbMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (scripts/test.sh sets it up)")
        pytest.skip(str(exc))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.3)
    yield {"port": port, "coll": coll}
    proc.terminate()
    proc.wait(10)


def _timestamp(warc_date: str) -> str:
    return warc_date[:19].replace("-", "").replace(":", "").replace("T", "")


def test_pywb_replays_every_capture_byte_for_byte(crawl, pywb):
    port, name = pywb["port"], pywb["coll"].name
    checked, kinds, misses, unstable = 0, {}, [], 0
    rows = [r for r in crawl["fetches"]
            if r["fetch_status"] in ("fetched", "not_modified") and r["warc_type"]
            and not r["truncated"]]
    assert rows
    for r in rows:
        expected = crawl["served"].get((r["round_id"], r["warc_target_uri"]))
        if expected is None:
            unstable += 1
            continue
        path = f"/{name}/{_timestamp(r['warc_date'])}id_/{r['warc_target_uri']}"
        status, _, body = _get(port, f"127.0.0.1:{port}", path)
        if status != 200 or body != expected:
            misses.append((r["round_id"], r["warc_type"], r["fetch_status"],
                           r["warc_target_uri"], status, len(body), len(expected)))
        checked += 1
        kind = r["warc_type"] if r["fetch_status"] == "fetched" else "not_modified"
        kinds[kind] = kinds.get(kind, 0) + 1
    assert misses == [], misses[:10]
    # pages whose latest capture is a revisit of either profile were among those replayed
    assert kinds.get("revisit", 0) > 0 and kinds.get("not_modified", 0) > 0, kinds
    assert unstable <= len(rows) // 10, (unstable, len(rows))
    assert checked > 30


def test_headless_chromium_loads_a_replayed_page(crawl, pywb, tmp_path):
    exe = chromium_or_skip()
    # A normal page (sorted: the table's row order varies between runs), one whose served body
    # has a whole <title>: the malformed-HTML sites' pages (an unclosed <title>) are left out
    served_title = re.compile(rb"<title>(.*?)</title>", re.S)
    page = next(r for r in sorted(crawl["fetches"], key=lambda r: (r["round_id"], r["url"]))
                if r["fetch_status"] == "fetched" and r["warc_type"] == "response"
                and (r["content_type"] or "").startswith("text/html")
                and r["warc_target_uri"].rstrip("/").endswith(".html")
                and served_title.search(
                    crawl["served"].get((r["round_id"], r["warc_target_uri"])) or b""))
    url = (f"http://127.0.0.1:{pywb['port']}/{pywb['coll'].name}/"
           f"{_timestamp(page['warc_date'])}id_/{page['warc_target_uri']}")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}",
           "--dump-dom", url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    served = crawl["served"][(page["round_id"], page["warc_target_uri"])]
    # Chromium parsed the replayed page: its DOM has the title simweb served
    title = served_title.search(served).group(1).decode().strip()
    assert title and f"<title>{title}</title>" in out.stdout, out.stdout[:2000]


def test_captures_have_url_index_columns_and_prune_by_month(spark, crawl):
    from recrawl.store.tables import read

    cfg = crawl["cfg"]
    caps = [r.asDict() for r in read(spark, cfg, "captures").collect()]
    with_record = [r for r in crawl["fetches"] if r["warc_type"] and r["warc_file"]]
    assert sorted((c["warc_filename"], c["warc_record_offset"]) for c in caps) == sorted(
        (r["warc_file"], r["warc_offset"]) for r in with_record)
    by_id = {r["warc_record_id"]: r for r in with_record}
    host = urlsplit(crawl["web"].seed_urls()[0]).hostname
    for c in caps:
        f = by_id[c["warc_record_id"]]
        assert c["url"] == f["warc_target_uri"] and c["fetch_url"] == f["url"]
        parts = urlsplit(c["url"])
        assert c["url_host_name"] == parts.hostname and c["url_path"] == (parts.path or "/")
        assert c["url_surtkey"].startswith(",".join(reversed(parts.hostname.split("."))))
        assert c["url_host_registered_domain"] == "sim.test" and c["url_host_tld"] == "test"
        assert c["fetch_date"] == f["fetch_time"].date()
        assert c["content_digest"] == f["payload_digest"]
    # a fetched HTML page: declared and detected MIME, charset and language from its parse
    html = [c for c in caps if c["crawl_status"] == "fetched" and c["warc_type"] == "response"
            and c["content_mime_type"] == "text/html" and c["url_host_name"] == host]
    assert html and all(c["content_mime_detected"] == "text/html" for c in html)
    assert all(c["content_charset"] and c["content_languages"] for c in html)
    # revisits carry their original's parse
    revisits = [c for c in caps if c["warc_type"] == "revisit" and c["url_host_name"] == host]
    assert revisits and all(c["content_mime_detected"] for c in revisits)
    # the analysts' query (docs/analysts.md): all captures of a host in a month, read from
    # that month's partitions only
    month = caps[0]["fetch_date"].replace(day=1)
    nxt = (month + dt.timedelta(days=32)).replace(day=1)
    q = (f"SELECT url, fetch_time, fetch_status, warc_filename, warc_record_offset, "
         f"warc_record_length FROM delta.`{cfg.table_path('captures')}` "
         f"WHERE url_host_name = '{host}' AND fetch_date >= DATE'{month}' "
         f"AND fetch_date < DATE'{nxt}'")
    df = spark.sql(q)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "PartitionFilters: [" in plan and "fetch_date" in plan.split("PartitionFilters: [")[1]
    got = df.collect()
    assert len(got) == sum(1 for c in caps if c["url_host_name"] == host
                           and month <= c["fetch_date"] < nxt) > 0
    # ... and each record read back from its offset and length alone (one gzip member)
    import io

    from warcio.archiveiterator import ArchiveIterator

    for r in got:
        with open(r["warc_filename"], "rb") as fh:
            fh.seek(r["warc_record_offset"])
            member = fh.read(r["warc_record_length"])
        rec = next(iter(ArchiveIterator(io.BytesIO(member))))
        assert rec.rec_headers.get_header("WARC-Target-URI") == r["url"]
