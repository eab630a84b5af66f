"""The fetcher against the project's simulated web: every hostile host, judged from the
server's own request log (politeness, robots, Retry-After) and by reading the WARC back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from fetcher import Fetcher, FetchItem
from fetcher.cdxj import index_lines
from fetcher.classify import sha1_digest
from simweb import SimWeb, audit
from simweb.hostile import ROBOTS_RULES_CASES
from tests.fetcher.conftest import local_settings

BIN = Path(sys.executable).parent
SETTINGS = dict(min_delay_s=0.2, read_timeout_s=2.0, request_deadline_s=3.0,
                time_budget_s=40.0, threads=16)

REDIRECT_PATHS = ["/chain/301/3", "/chain/302/7", "/mixed/4", "/loop/a", "/cross", "/relative",
                  "/to-private", "/to-metadata", "/to-localhost"]
# Highest priority first: /dead, /slow and /trickle each fail, so the host is deferred after
# them (three consecutive failures) and /hang is tested in the budget test instead.
SLOW_PATHS = [("/", 9), ("/dead", 8), ("/slow", 7), ("/trickle", 6), ("/hang", 5)]


@pytest.fixture(scope="module")
def web():
    with SimWeb(seed=42, n_sites=3, pages_per_site=6) as w:  # started and stopped by the context manager
        yield w


def urls_for(web: SimWeb) -> list[FetchItem]:
    items: list[FetchItem] = []
    t = web.truth
    for host in web.hosts():
        if host.startswith("site"):
            items += [FetchItem(u) for u in t.pages(host)]
        elif host == "redirects.sim.test":
            items += [FetchItem(t.url(host, p)) for p in ["/", *REDIRECT_PATHS]]
        elif host == "throttle.sim.test":
            items += [FetchItem(t.url(host, p)) for p in ("/p/1.html", "/busy")]
        elif host == "slow.sim.test":
            items += [FetchItem(t.url(host, p), priority=pr) for p, pr in SLOW_PATHS]
        elif host == "errors.sim.test":
            items += [FetchItem(u) for u in t.pages(host)]
        elif host == "robotsrules.sim.test":
            items += [FetchItem(t.url(host, p)) for p in ROBOTS_RULES_CASES]
        else:
            items += [FetchItem(u) for u in t.pages(host)[:6]]
    return items


@pytest.fixture(scope="module")
def crawl(web, tmp_path_factory):
    web.clear_log()
    items = urls_for(web)
    warc_dir = tmp_path_factory.mktemp("warc")
    out = Fetcher(local_settings(**SETTINGS), str(warc_dir), "sim").run(items)
    log = web.request_log()
    rows = {r["url"]: r for r in out.rows}
    return {"out": out, "rows": rows, "log": log, "items": items}


def row(crawl, web, host, path):
    return crawl["rows"][web.truth.url(host, path)]


def test_every_item_has_one_row_and_the_run_kept_its_budget(crawl):
    assert len(crawl["out"].rows) == len(crawl["items"])
    # everything was reached within the budget (the budget rule itself: the test below)
    assert "skipped_budget" not in {r["fetch_status"] for r in crawl["out"].rows}


def test_server_log_shows_no_politeness_violation(crawl, web):
    delays = {h: min(d, 30.0) for h, d in web.truth.crawl_delays().items()}
    assert audit.politeness_violations(crawl["log"], SETTINGS["min_delay_s"], delays) == []
    assert audit.retry_after_violations(crawl["log"]) == []


def test_server_log_shows_no_robots_violation_and_no_foreign_host(crawl, web):
    assert audit.robots_violations(crawl["log"], web.truth) == []
    assert audit.foreign_host_requests(crawl["log"], web.truth) == []
    assert all(e["ua"].startswith("recrawlbot/") for e in crawl["log"])


def test_each_robots_txt_is_fetched_once_per_host(crawl):
    robots = [e["host"] for e in crawl["log"] if e["path"] == "/robots.txt"]
    assert len(robots) == len(set(robots))


@pytest.mark.parametrize("host,path,status,error", [
    ("robots404.sim.test", "/", "fetched", None),
    ("robots500.sim.test", "/", "retry_later", "robots 5xx"),
    ("robotsslowdelay.sim.test", "/", "retry_later", "crawl-delay 120 exceeds max"),
    ("robotsdelay.sim.test", "/", "fetched", None),
    ("robotsredirect.sim.test", "/secret/1.html", "robots_denied", None),
    ("robotsredirect.sim.test", "/page/1.html", "fetched", None),
    ("errors.sim.test", "/404", "gone", None),
    ("errors.sim.test", "/410", "gone", None),
    ("errors.sim.test", "/500", "http_error", "http 500"),
    ("errors.sim.test", "/403", "http_error", "http 403"),
    ("errors.sim.test", "/wrongtype.html", "filtered_type", "content type application/pdf"),
    ("errors.sim.test", "/image.png", "filtered_type", "content type image/png"),
    ("errors.sim.test", "/plain.txt", "filtered_type", "content type text/plain"),
    ("throttle.sim.test", "/p/1.html", "retry_later", "http 429, retry-after 2s"),
    ("slow.sim.test", "/dead", "connect_error", None),
    ("slow.sim.test", "/slow", "timeout", "timeout: read"),
    ("slow.sim.test", "/trickle", "timeout", "timeout: deadline"),
    ("slow.sim.test", "/hang", "retry_later", "host failures"),
    ("bomb.sim.test", "/gzipbomb", "too_large", None),
    ("bomb.sim.test", "/brbomb", "too_large", None),
    ("bomb.sim.test", "/huge", "fetched", "truncated"),
    ("bomb.sim.test", "/nolength", "fetched", None),
])
def test_failure_modes_map_to_fetch_status(crawl, web, host, path, status, error):
    r = row(crawl, web, host, path)
    assert r["fetch_status"] == status, r
    if error is not None:
        assert r["error"] == error


def test_throttle_503_with_http_date(crawl, web):
    r = row(crawl, web, "throttle.sim.test", "/busy")
    assert r["fetch_status"] == "retry_later" and r["http_status"] == 503
    assert r["error"].startswith("http 503, retry-after")


def test_truncation_and_bombs(crawl, web):
    huge = row(crawl, web, "bomb.sim.test", "/huge")
    assert huge["truncated"] and huge["content_length"] == 2 * 1024 * 1024
    assert huge["payload_digest"] and huge["warc_offset"] is not None
    for path in ("/gzipbomb", "/brbomb"):
        r = row(crawl, web, "bomb.sim.test", path)
        assert r["warc_offset"] is None and "exceeds" in r["error"]
    trickle = row(crawl, web, "slow.sim.test", "/trickle")
    assert trickle["truncated"] and trickle["http_status"] == 200
    assert trickle["duration_ms"] <= SETTINGS["request_deadline_s"] * 1000 + 200


def test_robotsrules_decisions_match_truth(crawl, web):
    for path, ok in ROBOTS_RULES_CASES.items():
        r = row(crawl, web, "robotsrules.sim.test", path)
        assert (r["fetch_status"] != "robots_denied") is ok, (path, r["fetch_status"])


def test_redirects(crawl, web):
    t = web.truth
    u = lambda p: t.url("redirects.sim.test", p)  # noqa: E731
    r = row(crawl, web, "redirects.sim.test", "/chain/301/3")
    assert (r["fetch_status"], r["final_url"]) == ("fetched", u("/chain/301/0"))
    assert r["redirect_chain"] == [u("/chain/301/3"), u("/chain/301/2"), u("/chain/301/1")]
    r = row(crawl, web, "redirects.sim.test", "/chain/302/7")
    assert (r["fetch_status"], r["error"]) == ("redirect", "too many redirects")
    r = row(crawl, web, "redirects.sim.test", "/mixed/4")
    assert (r["fetch_status"], r["final_url"]) == ("fetched", u("/mixed/0"))
    r = row(crawl, web, "redirects.sim.test", "/loop/a")
    assert (r["fetch_status"], r["error"]) == ("redirect", "loop")
    r = row(crawl, web, "redirects.sim.test", "/relative")
    assert (r["fetch_status"], r["final_url"]) == ("fetched", u("/chain/301/0"))
    r = row(crawl, web, "redirects.sim.test", "/cross")
    assert (r["fetch_status"], r["final_url"]) == ("redirect", t.url("site0.sim.test", "/"))
    # SSRF bait is a cross-host redirect: recorded, never followed (and would be refused).
    for path, target in (("/to-private", "http://10.0.0.1/"),
                         ("/to-metadata", "http://169.254.169.254/latest/meta-data/"),
                         ("/to-localhost", f"http://127.0.0.1:{web.port}/")):
        r = row(crawl, web, "redirects.sim.test", path)
        assert (r["fetch_status"], r["final_url"]) == ("redirect", target)


def test_robots_rows(crawl, web):
    rows = {r["host"]: r for r in crawl["out"].robots}
    key = lambda h: f"http://{h}:{web.port}"  # noqa: E731
    assert rows[key("robots500.sim.test")]["http_status"] == 500
    assert rows[key("robots404.sim.test")]["http_status"] == 404
    assert rows[key("robotsdelay.sim.test")]["crawl_delay"] == 2
    assert "Disallow: /secret/" in rows[key("robotsredirect.sim.test")]["rules"]
    assert rows[key("site0.sim.test")]["sitemaps"]
    assert {r["host"] for r in crawl["out"].hosts} >= set(rows)


def test_warc_files_validate_and_rows_point_at_their_records(crawl):
    out = crawl["out"]
    assert out.warc_files and all(f.endswith(".warc.gz") for f in out.warc_files)
    for f in out.warc_files:
        chk = subprocess.run([str(BIN / "warcio"), "check", f], capture_output=True, text=True,
                             timeout=120)
        assert chk.returncode == 0, chk.stdout + chk.stderr
        idx = subprocess.run([str(BIN / "cdxj-indexer"), f], capture_output=True, text=True,
                             timeout=120)
        assert idx.returncode == 0 and idx.stdout.count("\n") > 50, idx.stderr
    n = 0
    for r in out.rows:
        if r["warc_offset"] is None:
            continue
        with open(r["warc_file"], "rb") as fh:
            fh.seek(r["warc_offset"])
            rec = next(iter(ArchiveIterator(fh)))
            body = rec.raw_stream.read()
            fh.seek(r["warc_offset"] + r["warc_length"])
            nxt = next(iter(ArchiveIterator(fh)))
        assert rec.rec_headers.get_header("WARC-Type") in ("response", "revisit")
        assert nxt.rec_headers.get_header("WARC-Type") == "request"  # lengths are exact
        target = r["final_url"] if r["fetch_status"] != "redirect" else r["redirect_chain"][-1]
        assert rec.rec_headers.get_header("WARC-Target-URI") == target == r["warc_target_uri"]
        assert rec.rec_headers.get_header("WARC-Record-ID") == r["warc_record_id"]
        assert rec.rec_headers.get_header("WARC-Date") == r["warc_date"]
        assert rec.rec_headers.get_header("WARC-Type") == r["warc_type"]
        # row and record agree, head-only filtered captures included
        assert rec.rec_headers.get_header("WARC-Payload-Digest") == r["payload_digest"]
        if r["fetch_status"] == "filtered_type":
            assert rec.rec_headers.get_header("WARC-Truncated") == "unspecified"
            continue
        if r["fetch_status"] == "fetched":
            assert sha1_digest(body) == r["payload_digest"]
        n += 1
    assert n > 40


def test_recrawl_uses_validators_robots_cache_and_revisits(crawl, web, tmp_path):
    """Second round: conditional GETs give 304s, the robots cache saves every robots.txt
    request, and an unchanged payload without validators is stored as a revisit."""
    first = [r for r in crawl["out"].rows
             if r["url"].startswith(web.base("site0.sim.test")) and r["fetch_status"] == "fetched"]
    second = [r for r in crawl["out"].rows
              if r["url"].startswith(web.base("site2.sim.test")) and r["fetch_status"] == "fetched"]
    items = [FetchItem(r["url"], etag=r["etag"], last_modified=r["last_modified"],
                       prev_payload_digest=r["payload_digest"]) for r in first]
    items += [FetchItem(r["url"], prev_payload_digest=r["payload_digest"],
                        prev_fetch_time=r["fetch_time"].isoformat(),
                        prev_record_id=r["warc_record_id"], prev_warc_date=r["warc_date"],
                        prev_target_uri=r["warc_target_uri"]) for r in second]
    cache = {r["host"]: r for r in crawl["out"].robots}
    web.clear_log()
    out = Fetcher(local_settings(**SETTINGS), str(tmp_path), "again",
                  robots_cache=cache).run(items)
    log = web.request_log()
    assert not [e for e in log if e["path"] == "/robots.txt"]
    assert out.robots == []
    assert audit.politeness_violations(log, SETTINGS["min_delay_s"]) == []
    statuses = [r["fetch_status"] for r in out.rows]
    assert statuses == ["not_modified"] * len(first) + ["fetched"] * len(second)
    for r in out.rows[len(first):]:
        with open(r["warc_file"], "rb") as fh:
            fh.seek(r["warc_offset"])
            rec = next(iter(ArchiveIterator(fh)))
        assert rec.rec_headers.get_header("WARC-Profile").endswith("identical-payload-digest")
        orig = next(f for f in second if f["url"] == r["url"])
        assert rec.rec_headers.get_header("WARC-Refers-To") == orig["warc_record_id"]
        assert rec.rec_headers.get_header("WARC-Refers-To-Date") == orig["warc_date"]
    for f in out.warc_files:
        assert subprocess.run([str(BIN / "warcio"), "check", f]).returncode == 0
    assert_index_is_cdxj_indexers(out)


def assert_index_is_cdxj_indexers(out) -> None:
    """The CDXJ lines built as the records were written are, file by file, what cdxj-indexer
    reads back from the finished file (offsets, lengths, digests, mime and status included)."""
    assert set(out.cdxj) == set(out.warc_files)
    for f in out.warc_files:
        assert out.cdxj[f] == index_lines([f]), f


def test_write_time_index_equals_cdxj_indexer_reading_the_files(crawl):
    out = crawl["out"]
    assert_index_is_cdxj_indexers(out)
    statuses = {line.split('"status": "', 1)[1][:3] for f in out.warc_files for line in out.cdxj[f]
                if '"status": "' in line}
    assert {"200", "301", "404", "503"} <= statuses  # the hostile hosts' captures are in it


def test_time_budget_is_respected_against_hostile_hosts(web, tmp_path):
    web.clear_log()
    t = web.truth
    items = [FetchItem(t.url("slow.sim.test", "/hang"), priority=1)]
    items += [FetchItem(u) for u in t.pages("site0.sim.test")]
    items += [FetchItem(t.url("slow.sim.test", p)) for p in ("/slow", "/trickle")]
    budget, deadline, delay = 4.0, 1.5, 0.5
    out = Fetcher(local_settings(min_delay_s=delay, time_budget_s=budget, read_timeout_s=1.0,
                                 request_deadline_s=deadline), str(tmp_path), "b").run(items)
    rows = {r["url"]: r for r in out.rows}
    # the hang held its request until our timeout cut it; it held nothing else up
    assert rows[t.url("slow.sim.test", "/hang")]["fetch_status"] == "timeout"
    statuses = [r["fetch_status"] for r in out.rows]
    assert "skipped_budget" in statuses and "fetched" in statuses
    log = web.request_log()
    assert audit.politeness_violations(log, delay) == []
    # Requests start only while now + deadline <= start + budget, each the delay after the
    # one before: at most 1 + (budget - deadline) / delay to one host (robots.txt included),
    # fewer than site0's 7 pages and its robots.txt.
    site0 = [e for e in log if e["host"] == "site0.sim.test"]
    most = 1 + int((budget - deadline) / delay)
    assert 0 < len(site0) <= most < 1 + len(t.pages("site0.sim.test"))
