"""The audit judges politeness and robots compliance from the server's log: synthetic logs for
the rules, and real clients (one rude, one polite) against the real server."""

from __future__ import annotations

import time

import pytest

from simweb import SimWeb
from simweb.audit import (
    foreign_host_requests,
    politeness_floor,
    politeness_violations,
    retry_after_violations,
    robots_violations,
)
from tests.simweb.conftest import Client


def e(host: str, path: str, start: float, end: float, status: int = 200, **kw) -> dict:
    return {
        "host": host,
        "path": path,
        "method": "GET",
        "start": start,
        "end": end,
        "status": status,
        "ua": "recrawlbot",
        "conn": 1,
        **kw,
    }


H = "site0.sim.test"


def test_polite_log_passes() -> None:
    log = [
        e(H, "/robots.txt", 0, 0.01),
        e(H, "/", 1.01, 1.02),
        e(H, "/p/1.html", 2.0, 2.5),
        e("site1.sim.test", "/robots.txt", 0.5, 0.6),
        e("control.sim.test", "/__sim/day", 2.1, 2.2),
    ]
    assert politeness_violations(log, 1.0) == []


def test_overlap_and_short_gap_are_caught() -> None:
    overlap = [e(H, "/", 0, 1.0), e(H, "/a", 0.5, 0.6)]
    assert "in flight" in politeness_violations(overlap, 0.0)[0]
    too_soon = [e(H, "/", 0, 0.1), e(H, "/a", 0.6, 0.7)]
    assert "delay is 1s" in politeness_violations(too_soon, 1.0)[0]
    within_tolerance = [e(H, "/", 0, 0.1), e(H, "/a", 1.06, 1.1)]
    assert politeness_violations(within_tolerance, 1.0) == []


def test_delay_counts_from_previous_end_not_start() -> None:
    log = [e(H, "/", 0, 1.0), e(H, "/a", 1.5, 1.6)]  # starts 1.5 s apart, but 0.5 s after end
    assert len(politeness_violations(log, 1.0)) == 1


def test_long_request_shadows_later_ones() -> None:
    log = [e(H, "/", 0, 10), e(H, "/a", 1, 2), e(H, "/b", 3, 4)]
    assert len(politeness_violations(log, 0.0)) == 2


def test_crawl_delay_raises_the_bar_for_its_host_only() -> None:
    log = [
        e(H, "/", 0, 0.1),
        e(H, "/a", 1.6, 1.7),
        e("site1.sim.test", "/", 0, 0.1),
        e("site1.sim.test", "/a", 1.6, 1.7),
    ]
    problems = politeness_violations(log, 1.0, {H: 2.0})
    assert len(problems) == 1 and problems[0].startswith(H)


def test_politeness_floor_is_the_slowest_hosts_busy_time_plus_its_delays() -> None:
    log = [
        e(H, "/robots.txt", 0, 0.1),
        e(H, "/", 5, 5.2),
        e(H, "/a", 9, 9.2),
        e("site1.sim.test", "/robots.txt", 0, 0.05),
        e("site1.sim.test", "/", 1, 1.05),
        e("control.sim.test", "/day", 0, 30),  # not a crawl host: never counts
    ]
    # site0: 0.5 s of responses + 2 gaps of 1 s; site1: 0.1 s + 1 gap of 1 s
    assert politeness_floor(log, 1.0) == pytest.approx(2.5)
    # a Crawl-delay of 3 s on site1 makes it the slowest host: 0.1 + 3
    assert politeness_floor(log, 1.0, {"site1.sim.test": 3.0}) == pytest.approx(3.1)
    assert politeness_floor([], 1.0) == 0.0


def test_retry_after_is_waited_out_for_the_whole_host() -> None:
    log = [e(H, "/", 0, 0.1, 429, retry_after="2"), e(H, "/other", 1.2, 1.3)]
    assert len(retry_after_violations(log)) == 1
    log = [e(H, "/", 0, 0.1, 429, retry_after="2"), e(H, "/", 2.2, 2.3)]
    assert retry_after_violations(log) == []


def test_robots_rules_from_the_log(web: SimWeb) -> None:
    t = web.truth
    assert "before robots.txt" in robots_violations([e(H, "/", 0, 1)], t)[0]
    # starting while robots.txt is still being sent is not "read before"
    assert robots_violations([e(H, "/robots.txt", 0, 1), e(H, "/", 0.5, 2)], t)
    assert robots_violations([e(H, "/robots.txt", 0, 1), e(H, "/p/1.html", 2, 3)], t) == []
    assert (
        "disallowed"
        in robots_violations(
            [
                e("site1.sim.test", "/robots.txt", 0, 1),
                e("site1.sim.test", "/private/3.html", 2, 3),
            ],
            t,
        )[0]
    )
    r = "robotsrules.sim.test"
    assert robots_violations([e(r, "/robots.txt", 0, 1), e(r, "/./a/../a/x", 2, 3)], t)
    assert robots_violations([e(r, "/robots.txt", 0, 1), e(r, "/a/y", 2, 3)], t) == []
    assert robots_violations([e(r, "/robots.txt", 0, 1), e(r, "/a/y", 2, 3)], t, "other")
    five = "robots500.sim.test"
    assert robots_violations([e(five, "/robots.txt", 0, 1, 500)], t) == []
    assert (
        "answered 500"
        in robots_violations([e(five, "/robots.txt", 0, 1, 500), e(five, "/", 2, 3)], t)[0]
    )
    red = "robotsredirect.sim.test"
    assert (
        robots_violations(
            [
                e(red, "/robots.txt", 0, 1, 301),
                e(red, "/real-robots.txt", 2, 3),
                e(red, "/page/1.html", 4, 5),
            ],
            t,
        )
        == []
    )
    assert robots_violations([e(red, "/robots.txt", 0, 1, 301), e(red, "/secret/1.html", 4, 5)], t)
    foreign = [e("127.0.0.1", "/", 0, 1), e(H, "/", 0, 1), e("control.sim.test", "/", 0, 1)]
    assert robots_violations(foreign[:1], t) == []
    assert len(foreign_host_requests(foreign, t)) == 1


def test_rude_client_is_caught(web: SimWeb, client: Client) -> None:
    web.clear_log()
    c = client.conn()
    for path in ("/", "/p/1.html"):  # no robots.txt, no delay
        c.request("GET", path, headers={"Host": "site2.sim.test"})
        c.getresponse().read()
    c.close()
    log = web.request_log()
    assert len(politeness_violations(log, 0.2)) == 1
    assert len(robots_violations(log, web.truth)) == 2


def test_polite_client_passes(web: SimWeb, client: Client) -> None:
    web.clear_log()
    min_delay = 0.2
    conns = {h: client.conn() for h in ("site3.sim.test", "site5.sim.test")}
    plan = {h: ["/robots.txt", "/", "/p/1.html", "/p/2.html"] for h in conns}
    for i in range(4):  # the two hosts are fetched side by side; each waits for itself
        for host, conn in conns.items():
            conn.request("GET", plan[host][i], headers={"Host": host, "User-Agent": "recrawlbot"})
            conn.getresponse().read()
        time.sleep(min_delay + 0.02)
    for conn in conns.values():
        conn.close()
    log = web.request_log()
    assert len(log) == 8 and len({x["conn"] for x in log}) == 2
    assert politeness_violations(log, min_delay) == []
    assert robots_violations(log, web.truth) == []
    assert retry_after_violations(log) == []


@pytest.mark.parametrize("delay", [0.0, 1.5])
def test_crawl_delay_from_truth_feeds_the_audit(web: SimWeb, delay: float) -> None:
    log = [e("site1.sim.test", "/robots.txt", 0, 0.1), e("site1.sim.test", "/", 0.6 + delay, 2)]
    assert bool(politeness_violations(log, 0.5, web.truth.crawl_delays())) is (delay == 0.0)
