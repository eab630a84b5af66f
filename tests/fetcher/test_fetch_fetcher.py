"""Fetcher behaviour against tiny local servers (127.0.0.1 only)."""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime

import pytest
from warcio.archiveiterator import ArchiveIterator

from fetcher import Fetcher, FetchItem
from fetcher.classify import sha1_digest
from fetcher.models import FETCH_COLUMNS
from tests.fetcher.conftest import SimClock, local_settings, response

PAGE = b"<html><body>hello</body></html>"


def robots_then(pages, robots: bytes | None = b"User-agent: *\nDisallow: /private\n"):
    """A handler: robots.txt (404 if None), then ``pages[path] -> bytes`` or a plain page."""
    def handler(path, headers):
        if path == "/robots.txt":
            return response(404) if robots is None else response(body=robots,
                                                                 content_type="text/plain")
        out = pages.get(path) if isinstance(pages, dict) else pages(path, headers)
        return out if out is not None else response(body=PAGE)
    return handler


def run(tmp_path, items, *, clock=None, **overrides):
    kw = {"clock": clock} if clock is not None else {}
    return Fetcher(local_settings(**overrides), str(tmp_path / "warc"), "t", **kw).run(items)


def assert_waited(served, waits):
    """Request k+1 arrived at least ``waits[k]`` after response k was written (``waits``: one
    number for all). With the server on the Fetcher's clock this is exact: no tolerance."""
    pairs = list(zip(served, served[1:], strict=False))
    waits = waits if isinstance(waits, list) else [waits] * len(pairs)
    assert len(waits) == len(pairs)
    for (a, b), wait in zip(pairs, waits, strict=True):
        assert a.replied is not None and b.received >= a.replied + wait, (a, b, wait)


def record_at(path, offset):
    with open(path, "rb") as fh:
        fh.seek(offset)
        return next(iter(ArchiveIterator(fh)))


def records_of(path, rec_type):
    """Every record of ``rec_type`` in a file, content read (the stream closes with it)."""
    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == rec_type:
                rec.body = rec.content_stream().read()
                out.append(rec)
    return out


def test_rows_cover_every_item_in_order_with_all_columns(tmp_path, raw_server):
    srv = raw_server(robots_then({}))
    base = f"http://a.local.test:{srv.port}"
    items = [FetchItem(f"{base}/{i}", f"http://a.local.test:{srv.port}") for i in range(3)]
    items.append(FetchItem("mailto:x@y", ""))
    out = run(tmp_path, items, min_delay_s=0.05)
    assert [r["url"] for r in out.rows] == [i.url for i in items]
    assert all(set(r) == set(FETCH_COLUMNS) for r in out.rows)
    assert [r["fetch_status"] for r in out.rows] == ["fetched"] * 3 + ["connect_error"]
    assert out.rows[3]["error"].startswith("invalid url")
    r = out.rows[0]
    assert r["http_status"] == 200 and r["content_length"] == len(PAGE) and r["ip"] == "127.0.0.1"
    assert r["payload_digest"] == sha1_digest(PAGE)
    assert isinstance(r["fetch_time"], datetime) and r["fetch_time"].tzinfo is UTC
    rec = record_at(r["warc_file"], r["warc_offset"])
    assert rec.rec_headers.get_header("WARC-Type") == "response"
    assert rec.content_stream().read() == PAGE
    # robots.txt first, then the pages, best priority first
    assert [p for p, *_ in srv.log] == ["/robots.txt", "/0", "/1", "/2"]
    assert out.robots[0]["host"] == f"http://a.local.test:{srv.port}"
    assert out.robots[0]["http_status"] == 200
    assert out.robots[0]["expires_at"] > out.robots[0]["fetched_at"]


def test_priority_orders_a_hosts_queue(tmp_path, raw_server):
    srv = raw_server(robots_then({}))
    base = f"http://a.local.test:{srv.port}"
    items = [FetchItem(f"{base}/low", priority=0.1), FetchItem(f"{base}/high", priority=0.9)]
    run(tmp_path, items, min_delay_s=0.05)
    assert [p for p, *_ in srv.log] == ["/robots.txt", "/high", "/low"]


def test_delay_is_kept_after_the_response_end(tmp_path, raw_server, clock):
    def slow(path, h):
        time.sleep(0.2)
        return response(body=PAGE)

    srv = raw_server(robots_then(slow), clock)
    base = f"http://a.local.test:{srv.port}"
    run(tmp_path, [FetchItem(f"{base}/{i}") for i in range(3)], min_delay_s=0.3, clock=clock)
    assert [r.path for r in srv.served] == ["/robots.txt", "/0", "/1", "/2"]
    assert_waited(srv.served, 0.3)  # from each response's end, robots.txt's too
    # each page is answered 0.2 s after it arrives, so arrivals are >= 0.2 + 0.3 apart
    starts = [r.received for r in srv.served[1:]]
    assert all(b - a >= 0.5 for a, b in zip(starts, starts[1:], strict=False))


def test_conditional_get_304_is_not_modified_with_a_revisit_record(tmp_path, raw_server):
    def page(path, headers):
        if headers.get("if-none-match") == '"v1"':
            return response(304, content_type=None, headers={"ETag": '"v1"'})
        return response(body=PAGE, headers={"ETag": '"v1"'})

    srv = raw_server(robots_then(page))
    url = f"http://a.local.test:{srv.port}/p"
    digest = sha1_digest(PAGE)
    item = FetchItem(url, etag='"v1"', last_modified="Thu, 01 Jan 2026 00:00:00 GMT",
                     prev_payload_digest=digest, prev_fetch_time="2026-01-01T00:00:00Z",
                     prev_record_id="<urn:uuid:0>", prev_warc_date="2025-12-31T23:59:58.5Z")
    row = run(tmp_path, [item]).rows[0]
    assert row["fetch_status"] == "not_modified" and row["http_status"] == 304
    assert row["etag"] == '"v1"' and row["last_modified"] == "Thu, 01 Jan 2026 00:00:00 GMT"
    assert row["payload_digest"] == digest
    sent = srv.log[-1][1]
    assert sent["if-none-match"] == '"v1"'
    assert sent["if-modified-since"] == "Thu, 01 Jan 2026 00:00:00 GMT"
    rec = record_at(row["warc_file"], row["warc_offset"])
    assert rec.rec_headers.get_header("WARC-Type") == "revisit"
    assert rec.rec_headers.get_header("WARC-Profile").endswith("/server-not-modified")
    assert rec.rec_headers.get_header("WARC-Refers-To-Target-URI") == url
    # the original's exact WARC-Date and id, not the round's date
    assert rec.rec_headers.get_header("WARC-Refers-To-Date") == "2025-12-31T23:59:58.500000Z"
    assert rec.rec_headers.get_header("WARC-Refers-To") == "<urn:uuid:0>"
    # empty block (replay takes the original's head); the 304 head is in the metadata record
    assert rec.rec_headers.get_header("Content-Length") == "0"
    meta = records_of(row["warc_file"], "metadata")[-1]
    assert b"http-response-line: HTTP/1.1 304" in meta.body
    assert row["warc_type"] == "revisit" and row["warc_target_uri"] == url
    assert row["warc_record_id"] == rec.rec_headers.get_header("WARC-Record-ID")
    assert row["warc_date"] == rec.rec_headers.get_header("WARC-Date")


def test_identical_payload_is_stored_as_revisit(tmp_path, raw_server):
    srv = raw_server(robots_then({}))
    url = f"http://a.local.test:{srv.port}/same"
    item = FetchItem(url, prev_payload_digest=sha1_digest(PAGE),
                     prev_fetch_time="2026-01-01T00:00:00+00:00",
                     prev_record_id="<urn:uuid:1>", prev_warc_date="2026-01-01T06:19:04.796837Z",
                     prev_target_uri=url + "?final")
    row = run(tmp_path, [item]).rows[0]
    assert row["fetch_status"] == "fetched" and row["payload_digest"] == sha1_digest(PAGE)
    rec = record_at(row["warc_file"], row["warc_offset"])
    h = rec.rec_headers
    assert h.get_header("WARC-Type") == "revisit" and row["warc_type"] == "revisit"
    assert h.get_header("WARC-Profile").endswith("/identical-payload-digest")
    assert h.get_header("WARC-Refers-To-Date") == "2026-01-01T06:19:04.796837Z"
    assert h.get_header("WARC-Refers-To") == "<urn:uuid:1>"
    assert h.get_header("WARC-Refers-To-Target-URI") == url + "?final"
    # the HTTP head is kept, the payload is not: WARC 1.1 6.7.2
    assert h.get_header("WARC-Truncated") == "length"


def test_identical_payload_without_a_known_original_is_stored_in_full(tmp_path, raw_server):
    srv = raw_server(robots_then({}))
    url = f"http://a.local.test:{srv.port}/same"
    item = FetchItem(url, prev_payload_digest=sha1_digest(PAGE),
                     prev_fetch_time="2026-01-01T00:00:00+00:00")
    row = run(tmp_path, [item]).rows[0]
    rec = record_at(row["warc_file"], row["warc_offset"])
    assert rec.rec_headers.get_header("WARC-Type") == "response" == row["warc_type"]


def test_fresh_robots_cache_is_used_without_fetching(tmp_path, raw_server):
    srv = raw_server(robots_then({}))
    host = f"http://a.local.test:{srv.port}"
    cache = {host: {"host": host, "fetched_at": datetime.now(UTC), "http_status": 200,
                    "rules": "User-agent: *\nDisallow: /no\n"}}
    f = Fetcher(local_settings(min_delay_s=0.05), str(tmp_path), "t", robots_cache=cache)
    out = f.run([FetchItem(f"{host}/no"), FetchItem(f"{host}/yes")])
    assert [r["fetch_status"] for r in out.rows] == ["robots_denied", "fetched"]
    assert [p for p, *_ in srv.log] == ["/yes"] and out.robots == []
    stale = {host: dict(cache[host], fetched_at=datetime(2020, 1, 1, tzinfo=UTC))}
    f = Fetcher(local_settings(), str(tmp_path), "u", robots_cache=stale)
    out = f.run([FetchItem(f"{host}/no")])
    assert srv.log[-1][0] == "/no" and srv.log[-2][0] == "/robots.txt"  # refetched
    assert len(out.robots) == 1


def test_robots_rules_use_the_normalized_path(tmp_path, raw_server):
    srv = raw_server(robots_then({}, robots=b"User-agent: *\nDisallow: /a/x\n"))
    base = f"http://a.local.test:{srv.port}"
    out = run(tmp_path, [FetchItem(f"{base}/./a/../a/x"), FetchItem(f"{base}/./b/../a/y")],
              min_delay_s=0.05)
    assert [r["fetch_status"] for r in out.rows] == ["robots_denied", "fetched"]
    assert srv.log[-1][0] == "/a/y"  # what is requested is the normalized path


def test_crawl_delay_above_max_defers_the_host(tmp_path, raw_server):
    srv = raw_server(robots_then({}, robots=b"User-agent: *\nCrawl-delay: 100\n"))
    base = f"http://a.local.test:{srv.port}"
    out = run(tmp_path, [FetchItem(f"{base}/1"), FetchItem(f"{base}/2")], max_crawl_delay_s=30)
    assert {r["fetch_status"] for r in out.rows} == {"retry_later"}
    assert out.rows[0]["error"] == "crawl-delay 100 exceeds max"
    assert [p for p, *_ in srv.log] == ["/robots.txt"]
    assert out.hosts[0]["deferred"] == 2


def test_robots_5xx_defers_the_host_and_nothing_else_is_requested(tmp_path, raw_server):
    def handler(path, headers):
        return response(500) if path == "/robots.txt" else response(body=PAGE)

    srv = raw_server(handler)
    base = f"http://a.local.test:{srv.port}"
    out = run(tmp_path, [FetchItem(f"{base}/1"), FetchItem(f"{base}/2")])
    assert [(r["fetch_status"], r["error"]) for r in out.rows] == [
        ("retry_later", "robots 5xx")] * 2
    assert [p for p, *_ in srv.log] == ["/robots.txt"]
    assert out.robots[0]["http_status"] == 500


def test_cross_host_robots_redirect_goes_through_the_target_hosts_queue(tmp_path, raw_server):
    other = raw_server(robots_then({"/rules-for-a.txt": response(
        body=b"User-agent: *\nDisallow: /secret\n", content_type="text/plain")}))
    target = f"http://b.local.test:{other.port}/rules-for-a.txt"
    srv = raw_server(lambda p, h: response(301, headers={"Location": target})
                     if p == "/robots.txt" else response(body=PAGE))
    base = f"http://a.local.test:{srv.port}"
    out = run(tmp_path, [FetchItem(f"{base}/secret"), FetchItem(f"{base}/open")],
              min_delay_s=0.05)
    assert [r["fetch_status"] for r in out.rows] == ["robots_denied", "fetched"]
    assert [p for p, *_ in other.log] == ["/robots.txt", "/rules-for-a.txt"]
    assert [p for p, *_ in srv.log] == ["/robots.txt", "/open"]


def test_dns_failure_and_ssrf_refusal_never_connect(tmp_path, monkeypatch):
    real = socket.create_connection

    def guard(address, *a, **kw):
        assert address[0] == "127.0.0.1", f"connection attempted to {address}"
        return real(address, *a, **kw)

    monkeypatch.setattr("urllib3.util.connection.create_connection", guard)
    hosts = {"*.local.test": "127.0.0.1", "evil.sim.test": "10.0.0.1",
             "meta.sim.test": "169.254.169.254"}
    items = [FetchItem("http://nothing.invalid/x"), FetchItem("http://evil.sim.test/x"),
             FetchItem("http://meta.sim.test/latest/"), FetchItem("http://evil.sim.test/y")]
    out = run(tmp_path, items, static_hosts=hosts)
    got = [(r["fetch_status"], r["error"]) for r in out.rows]
    assert got[0][0] == "dns_error"
    assert got[1] == ("connect_error", "ssrf: address 10.0.0.1 refused")
    assert got[2] == ("connect_error", "ssrf: address 169.254.169.254 refused")
    assert got[3] == got[1]
    assert out.warc_files == []


def test_same_host_redirects_follow_with_the_delay_and_cross_host_is_recorded(tmp_path,
                                                                            raw_server, clock):
    pages = {}
    srv = raw_server(robots_then(pages), clock)
    base = f"http://a.local.test:{srv.port}"
    pages.update({
        "/r1": response(302, headers={"Location": "/r2"}),
        "/r2": response(301, headers={"Location": f"{base}/final"}),
        "/away": response(302, headers={"Location": "http://elsewhere.local.test/x#frag"}),
        "/loop1": response(302, headers={"Location": "/loop2"}),
        "/loop2": response(302, headers={"Location": "/loop1"}),
        "/n0": response(302, headers={"Location": "/n1"}),
        "/n1": response(302, headers={"Location": "/n2"}),
        "/n2": response(302, headers={"Location": "/n3"}),
    })
    items = [FetchItem(f"{base}/r1"), FetchItem(f"{base}/away"), FetchItem(f"{base}/loop1"),
             FetchItem(f"{base}/n0")]
    out = run(tmp_path, items, min_delay_s=0.15, max_redirects=2, clock=clock)
    r1, away, loop, chain = out.rows
    assert r1["fetch_status"] == "fetched" and r1["final_url"] == f"{base}/final"
    assert r1["redirect_chain"] == [f"{base}/r1", f"{base}/r2"]
    assert away["fetch_status"] == "redirect" and away["error"] is None
    assert away["final_url"] == "http://elsewhere.local.test/x"  # normalized, not followed
    assert loop["fetch_status"] == "redirect" and loop["error"] == "loop"
    assert chain["fetch_status"] == "redirect" and chain["error"] == "too many redirects"
    assert chain["final_url"] == f"{base}/n3" and len(chain["redirect_chain"]) == 3
    assert_waited(srv.served, 0.15)  # every hop waits the delay: a chain is never a burst
    rec = record_at(r1["warc_file"], r1["warc_offset"])
    assert rec.rec_headers.get_header("WARC-Target-URI") == f"{base}/final"


def test_redirect_targets_are_normalized_with_the_crawls_rules(tmp_path, raw_server, clock):
    # [urlnorm] reaches inject, parse and updatedb; a redirect target must be the same URL
    # they would make of it, not the default rules' (a crawl that keeps tracking parameters
    # would otherwise record a target its crawldb never names)
    from recrawl.content.urlnorm import NormalizeRules

    pages = {}
    srv = raw_server(robots_then(pages), clock)
    base = f"http://a.local.test:{srv.port}"
    target = "http://elsewhere.local.test/x?utm_source=feed&b=1"
    pages["/away"] = response(302, headers={"Location": target})
    kept = run(tmp_path / "kept", [FetchItem(f"{base}/away")], clock=clock,
               norm_rules=NormalizeRules(strip_tracking_params=False, sort_query=False))
    assert kept.rows[0]["final_url"] == target
    default = run(tmp_path / "default", [FetchItem(f"{base}/away")], clock=clock)
    assert default.rows[0]["final_url"] == "http://elsewhere.local.test/x?b=1"


def test_retry_after_pauses_the_host_and_beyond_budget_defers_it(tmp_path, raw_server, clock):
    def handler(path, headers):
        if path == "/busy":
            return response(429, headers={"Retry-After": "1"})
        if path == "/gone-away":
            return response(503, headers={"Retry-After": "3600"})
        return response(body=PAGE)

    srv = raw_server(robots_then(handler), clock)
    base = f"http://a.local.test:{srv.port}"
    items = [FetchItem(f"{base}/busy", priority=3), FetchItem(f"{base}/after", priority=2),
             FetchItem(f"{base}/gone-away", priority=1), FetchItem(f"{base}/never")]
    out = run(tmp_path, items, min_delay_s=0.05, time_budget_s=20, clock=clock)
    st = [(r["fetch_status"], r["error"]) for r in out.rows]
    assert st[0] == ("retry_later", "http 429, retry-after 1s")
    assert st[1][0] == "fetched"
    assert st[2][0] == "retry_later" and st[2][1].startswith("http 503, retry-after 600s")
    assert st[3] == ("retry_later", "retry-after beyond time budget")
    assert [r.path for r in srv.served] == ["/robots.txt", "/busy", "/after", "/gone-away"]
    assert_waited(srv.served, [0.05, 1.0, 0.05])  # Retry-After: 1 from the 429's end
    host = out.hosts[0]
    assert host["backoff_until"] is not None and host["deferred"] == 3


def test_failures_back_off_and_the_limit_defers_the_host(tmp_path, raw_server, clock):
    srv = raw_server(robots_then(lambda p, h: response(500, body=b"oops")), clock)
    base = f"http://a.local.test:{srv.port}"
    items = [FetchItem(f"{base}/{i}") for i in range(5)]
    out = run(tmp_path, items, min_delay_s=0.05, backoff_base_s=0.2, host_failure_limit=3,
              clock=clock)
    st = [(r["fetch_status"], r["error"]) for r in out.rows]
    assert st[:3] == [("http_error", "http 500")] * 3
    assert st[3:] == [("retry_later", "host failures")] * 2
    assert [r.path for r in srv.served] == ["/robots.txt", "/0", "/1", "/2"]
    assert_waited(srv.served, [0.05, 0.2, 0.4])  # after k failures: 0.2 * 2**(k-1)
    assert out.hosts[0]["consecutive_failures"] == 3 and out.hosts[0]["errors"] == 3


def test_filtered_type_body_is_not_read_and_head_is_archived(tmp_path, raw_server):
    srv = raw_server(robots_then({"/doc.pdf": response(body=b"%PDF" * 100_000,
                                                       content_type="application/pdf")}))
    row = run(tmp_path, [FetchItem(f"http://a.local.test:{srv.port}/doc.pdf")]).rows[0]
    assert row["fetch_status"] == "filtered_type" and row["content_type"] == "application/pdf"
    # nothing of the body is stored: the row says so, with the digest its record carries
    assert row["content_length"] == 0 and row["payload_digest"] == sha1_digest(b"")
    rec = record_at(row["warc_file"], row["warc_offset"])
    assert rec.rec_headers.get_header("WARC-Truncated") == "unspecified"
    assert rec.rec_headers.get_header("WARC-Payload-Digest") == row["payload_digest"]


def test_per_ip_mode_shares_one_queue_across_hosts(tmp_path, raw_server, clock):
    srv = raw_server(robots_then({}), clock)
    items = [FetchItem(f"http://{h}.local.test:{srv.port}/{i}") for h in "abc" for i in range(2)]
    out = run(tmp_path, items, per_ip=True, min_delay_s=0.1, clock=clock)
    assert {r["fetch_status"] for r in out.rows} == {"fetched"}
    # one request at a time across the three names, each the delay after the one before
    assert_waited(sorted(srv.served, key=lambda r: r.received), 0.1)
    assert len(srv.log) == 9  # 3 robots + 6 pages, one at a time across the three names


def test_time_budget_skips_what_cannot_finish(tmp_path, raw_server):
    # Every response takes 10 s of simulated time, so the budget is spent by request count,
    # however fast or slow the machine: a request starts only if now + deadline <= 50.
    clock = SimClock()
    answer = robots_then({})

    def slow(path, headers):
        clock.advance(10.0)
        return answer(path, headers)

    srv = raw_server(slow, clock)
    base = f"http://a.local.test:{srv.port}"
    items = [FetchItem(f"{base}/{i}") for i in range(20)]
    out = run(tmp_path, items, min_delay_s=0.0, time_budget_s=50.0, request_deadline_s=15.0,
              clock=clock)
    statuses = [r["fetch_status"] for r in out.rows]
    # robots.txt at 0, pages at 10, 20 and 30; one at 40 could not end by 50
    assert statuses == ["fetched"] * 3 + ["skipped_budget"] * 17, statuses
    assert [(r.path, r.received) for r in srv.served] == [
        ("/robots.txt", 0.0), ("/0", 10.0), ("/1", 20.0), ("/2", 30.0)]
    assert all(r.replied is not None and r.replied <= 50.0 for r in srv.served)  # ended in it


@pytest.mark.parametrize("gzip_level", [1, 9])
def test_gzip_level_is_configurable(tmp_path, raw_server, gzip_level):
    srv = raw_server(robots_then({}))
    out = run(tmp_path, [FetchItem(f"http://a.local.test:{srv.port}/x")],
              warc_gzip_level=gzip_level)
    assert out.rows[0]["fetch_status"] == "fetched" and len(out.warc_files) == 1


def test_client_measures_gaps_and_counts_a_request_sooner_than_the_hosts_delay():
    # The politeness gate's evidence (recrawl.rules.gates.politeness): every gap from a response's
    # end to the host's next request, judged by the host's delay at that time. The scheduler
    # never lets a gap be short, so the measure is checked on exchanges made up here.
    from fetcher.client import Client
    from fetcher.hosts import Host
    from fetcher.http import Exchange
    from fetcher.robots import RobotsRules

    client = Client(local_settings(min_delay_s=1.0, max_crawl_delay_s=30.0), clock=time.monotonic,
                    wallclock=time.time, budget_end=1e12)
    h = Host("http://a.sim.test:80", "http", "a.sim.test", 80, "http://a.sim.test:80")

    def exchange(start: float, end: float) -> Exchange:
        return Exchange(url="http://a.sim.test/", ip="127.0.0.1", start=start,
                        started_at=datetime.now(UTC), end=end, head=b"h" * 10, body=b"b" * 90)

    client._measure(h, exchange(0.0, 0.5))  # the first request: no gap
    client._measure(h, exchange(1.5, 2.0))  # 1.0 s after: the min delay, polite
    assert h.violations == 0
    client._measure(h, exchange(2.6, 3.0))  # 0.6 s after
    assert h.violations == 1 and h.worst_short_s == pytest.approx(0.4)
    h.robots = RobotsRules(status=200, crawl_delay=2.0)  # Crawl-delay 2 now applies
    client._measure(h, exchange(4.5, 5.0))  # 1.5 s after
    assert h.violations == 2 and h.worst_short_s == pytest.approx(0.5)
    client._measure(h, exchange(7.0, 7.5))  # 2.0 s after
    assert h.violations == 2
    assert h.bytes == 500 and h.busy_s == pytest.approx(2.4)
    assert h.waited_s == pytest.approx(1.0 + 0.6 + 1.5 + 2.0)
