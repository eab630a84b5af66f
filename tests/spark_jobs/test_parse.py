"""parse's per-partition work (`parse_rows`), without Spark: records read back from a WARC by
offset become `pages` rows with text, fingerprints and outlinks; sitemaps give their URLs;
a nofollow page gives none; an identical-payload revisit is not parsed again. (Corrupt and
missing WARCs: tests/recrawl/test_bad_input.py.)"""

from __future__ import annotations

import io

import pytest
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from spark_jobs.common import filter_rules, norm_rules
from spark_jobs.parse import parse_rows
from tests.conftest import make_config

PAGE = (b"<html><head><title>Tides</title></head><body><p>" + b"The tide tables of the bay. " * 40
        + b'<a href="/b?utm_source=x">next</a> <a href="http://other.test/c">other</a>'
          b" <a href=\"mailto:x@a.test\">mail</a></p></body></html>")
NOFOLLOW = (b'<html><head><meta name="robots" content="nofollow"></head><body><p>'
            + b"Words here. " * 40 + b'<a href="/hidden">h</a></p></body></html>')
SITEMAP = (b'<?xml version="1.0" encoding="UTF-8"?>'
           b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
           b"<url><loc>http://a.test/s1</loc></url><url><loc>http://a.test/s2</loc></url>"
           b"</urlset>")


def _write(path) -> dict[str, int]:
    """One WARC with three responses and a revisit; the offset of each record by URL."""
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="1.1")
        for url, body, ctype in (("http://a.test/a", PAGE, "text/html; charset=utf-8"),
                                 ("http://a.test/nf", NOFOLLOW, "text/html"),
                                 ("http://a.test/sitemap.xml", SITEMAP, "application/xml")):
            http = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(url, "response", payload=io.BytesIO(body),
                                                http_headers=http))
        revisit = w.create_revisit_record("http://a.test/same", "sha1:AAAA",
                                          "http://a.test/same", "20260101000000")
        w.write_record(revisit)
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        return {r.rec_headers.get_header("WARC-Target-URI"): it.get_record_offset() for r in it}


def test_records_become_pages_with_text_fingerprints_and_filtered_outlinks(tmp_path):
    cfg = make_config(tmp_path / "home")
    opts = {"max_bytes": 1 << 20, "extract_text": True, "norm_rules": norm_rules(cfg),
            "filter_rules": filter_rules(cfg), "max_outlinks": 100, "max_sitemap_urls": 100}
    warc = tmp_path / "r.warc.gz"
    offsets = _write(warc)
    rows = [{"round_id": "r1", "url": url, "final_url": None, "content_type": None,
             "warc_file": str(warc), "warc_offset": off, "payload_digest": f"d{i}"}
            for i, (url, off) in enumerate(offsets.items())]
    out = {r["url"]: r for r in parse_rows(rows, opts)}

    assert "http://a.test/same" not in out  # a revisit: the page did not change
    page = out["http://a.test/a"]
    assert page["parse_error"] is None and page["title"] == "Tides"
    assert "tide tables" in page["text"] and page["text_len"] == len(page["text"])
    assert page["content_hash"] and isinstance(page["simhash"], int)
    assert page["payload_digest"] == "d0" and page["warc_offset"] == offsets["http://a.test/a"]
    dsts = {link["dst_url"] for link in page["links"]}
    # relative links resolved and normalized (tracking parameter dropped); mailto: filtered
    assert dsts == {"http://a.test/b", "http://other.test/c"}
    assert page["outlink_count"] == 2
    # the `links` table's host keys come with the parse (no per-link Python pass in Spark)
    assert page["src_host"] == "http://a.test:80"
    assert {(link["dst_url"], link["dst_host"]) for link in page["links"]} == {
        ("http://a.test/b", "http://a.test:80"), ("http://other.test/c", "http://other.test:80")}

    nofollow = out["http://a.test/nf"]
    assert nofollow["links"] == [] and nofollow["outlink_count"] == 0 and nofollow["text_len"] > 0

    sitemap = out["http://a.test/sitemap.xml"]
    assert [(link["dst_url"], link["kind"], link["dst_host"]) for link in sitemap["links"]] == [
        ("http://a.test/s1", "sitemap", "http://a.test:80"),
        ("http://a.test/s2", "sitemap", "http://a.test:80")]


def test_each_warc_file_is_opened_once_and_a_missing_one_costs_only_its_rows(tmp_path, monkeypatch):
    from fetcher.storage import Storage

    cfg = make_config(tmp_path / "home")
    opts = {"max_bytes": 1 << 20, "extract_text": True, "norm_rules": norm_rules(cfg),
            "filter_rules": filter_rules(cfg), "max_outlinks": 100, "max_sitemap_urls": 100}
    files = [tmp_path / f"r{i}.warc.gz" for i in range(3)]
    offsets = [_write(f) for f in files]
    files.append(tmp_path / "gone.warc.gz")
    offsets.append(offsets[0])
    rows = [{"round_id": "r1", "url": f"{url}?f={i}", "final_url": url, "content_type": None,
             "warc_file": str(f), "warc_offset": off, "payload_digest": f"d{i}"}
            for url in offsets[0] for i, (f, offs) in enumerate(zip(files, offsets, strict=True))
            for off in [offs[url]]]
    opened = []
    real = Storage.open_read
    monkeypatch.setattr(Storage, "open_read", lambda self, uri: opened.append(uri) or real(self, uri))

    out = {r["url"]: r for r in parse_rows(rows, opts)}

    # rows interleaved, one open per file; the missing one is tried again for each of its rows
    assert sorted(opened) == sorted([str(f) for f in files[:3]] + [str(files[3])] * len(offsets[0]))
    for i in range(3):
        page = out[f"http://a.test/a?f={i}"]
        assert page["parse_error"] is None and "tide tables" in page["text"]
        assert out[f"http://a.test/sitemap.xml?f={i}"]["outlink_count"] == 2
    for url in ("http://a.test/a", "http://a.test/nf", "http://a.test/sitemap.xml"):
        assert out[f"{url}?f=3"]["parse_error"].startswith("warc: FileNotFoundError")


@pytest.mark.spark
@pytest.mark.parametrize("cap", [10000, 0], ids=["delta-rs", "spark"])
def test_links_keep_each_pages_latest_outlinks_only(spark, tmp_path, cap):
    from recrawl.store.tables import init_tables, read, replace_round
    from spark_jobs.parse import write_latest_outlinks

    cfg = make_config(tmp_path / "home", **{"crawl.small_round_rows": cap})
    init_tables(spark, cfg)
    schema = "src_url string, dst_url string, round_id string"
    replace_round(spark.createDataFrame(
        [("http://a/", "http://x/", "r1"), ("http://a/", "http://y/", "r1"),
         ("http://b/", "http://x/", "r1")], schema), cfg, "links", "r1")
    # round r2 parsed a again (its outlinks now: z) and c (new); b was not parsed
    parsed = spark.createDataFrame([("http://a/",), ("http://c/",)], "url string")
    new = spark.createDataFrame([("http://a/", "http://z/", "r2"), ("http://c/", "http://x/", "r2")],
                                schema)
    write_latest_outlinks(spark, cfg, "r2", parsed, new)
    # a re-run of r2 changes nothing: its own round's links are replaced, not deleted twice
    write_latest_outlinks(spark, cfg, "r2", parsed, new)
    got = sorted((r.src_url, r.dst_url, r.round_id) for r in read(spark, cfg, "links").collect())
    assert got == [("http://a/", "http://z/", "r2"), ("http://b/", "http://x/", "r1"),
                   ("http://c/", "http://x/", "r2")]


def test_a_round_of_two_warc_files_is_parsed_in_tasks_of_equal_size(spark):
    # one WARC per fetch task: hashed by file name the two could share one partition (one
    # core parsing the round); by ranges of (file, offset) every partition gets a quarter,
    # each in stretches of one file
    from spark_jobs.parse import by_record_ranges

    rows = [(f"/warc/20261101-9f2c-p{t:05d}-a{t}-00000.warc.gz", off * 3000)
            for t in (0, 1) for off in range(100)]
    fetched = spark.createDataFrame(rows, "warc_file string, warc_offset long")
    parts = by_record_ranges(fetched, 4).rdd.glom().collect()
    sizes = sorted(len(p) for p in parts)
    assert sum(sizes) == 200 and sizes == [50, 50, 50, 50]
    for p in parts:
        assert len({r["warc_file"] for r in p}) == 1  # a stretch of one file
    # what hashing by file alone gives: two files, so at most two partitions do any work
    hashed = fetched.repartition(4, "warc_file").rdd.glom().collect()
    assert sum(1 for p in hashed if p) <= 2
