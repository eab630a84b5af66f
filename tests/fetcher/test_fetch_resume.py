"""Politeness across a crash: a re-run fetch must not hit a host sooner than its delay after the
killed attempt's last request, although that attempt's next-allowed times died with it.

The "killed" attempt here is a run cut short by its time budget; the re-run starts at once (a
Spark task retry is about that quick). Judged from the server's request log.
"""

from __future__ import annotations

import time

import pytest

from fetcher import Fetcher, FetchItem
from simweb import SimWeb, audit
from tests.fetcher.conftest import local_settings

MIN_DELAY, CAP = 1.0, 3.0
HOSTS = ("site0.sim.test", "robotsdelay.sim.test")  # robotsdelay: Crawl-delay 2


@pytest.fixture(scope="module")
def web():
    with SimWeb(seed=5, n_sites=1, pages_per_site=6) as w:  # started and stopped by the context manager
        yield w


def _items(web):
    return [FetchItem(u) for h in HOSTS for u in web.truth.pages(h)[:5]]


def _two_attempts(web, tmp_path, resume, robots_cache=None):
    web.clear_log()
    first = Fetcher(local_settings(min_delay_s=MIN_DELAY, max_crawl_delay_s=CAP,
                                   time_budget_s=2.5, request_deadline_s=1.0),
                    str(tmp_path), "a0").run(_items(web))
    assert any(r["fetch_status"] == "skipped_budget" for r in first.rows)  # cut short
    second = Fetcher(local_settings(min_delay_s=MIN_DELAY, max_crawl_delay_s=CAP,
                                    time_budget_s=7.0, request_deadline_s=1.0),
                     str(tmp_path), "a1", resume=resume,
                     robots_cache=robots_cache).run(_items(web))
    delays = {"robotsdelay.sim.test": 2.0}
    return first, second, audit.politeness_violations(web.request_log(), MIN_DELAY, delays)


def test_rerun_without_resume_hits_hosts_too_soon(web, tmp_path):
    """The bug the resume flag fixes: a fresh Fetcher starts every host at once."""
    _, _, violations = _two_attempts(web, tmp_path, resume=False)
    assert violations, "expected the immediate re-run to be impolite"


def test_rerun_with_resume_waits_each_hosts_delay(web, tmp_path):
    first, second, violations = _two_attempts(web, tmp_path, resume=True)
    assert violations == []
    assert any(r["fetch_status"] == "fetched" for r in second.rows)


def test_resume_uses_the_cached_crawl_delay_when_robots_is_known(web, tmp_path):
    first = Fetcher(local_settings(min_delay_s=MIN_DELAY, max_crawl_delay_s=CAP),
                    str(tmp_path), "r").run([FetchItem(web.truth.url(h, "/")) for h in HOSTS])
    cache = {r["host"]: r for r in first.robots}
    web.clear_log()
    # The cap lies beyond the run's budget: a host held for the cap (its robots.txt taken as
    # unknown) could fetch nothing. The fetcher runs on the server log's clock (time.time), so
    # the delays are read from the log exactly.
    settings = local_settings(min_delay_s=MIN_DELAY, max_crawl_delay_s=60.0, time_budget_s=20.0)
    t0 = time.time()
    items = [FetchItem(u) for h in HOSTS for u in web.truth.pages(h)[:1]]
    out = Fetcher(settings, str(tmp_path), "s", resume=True, robots_cache=cache,
                  clock=time.time).run(items)
    # known robots: each host waited its own delay, not the cap, and robots.txt was not fetched
    assert [r["fetch_status"] for r in out.rows] == ["fetched", "fetched"]
    log = web.request_log()
    assert "/robots.txt" not in {e["path"] for e in log}
    firsts = {}
    for e in log:
        firsts.setdefault(e["host"].split(":")[0], e["start"] - t0)
    assert firsts["site0.sim.test"] >= MIN_DELAY
    assert firsts["robotsdelay.sim.test"] >= 2.0
