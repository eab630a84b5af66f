"""Which signalled changes a round chases (spark_jobs/chases.py): a trusted host's changes go
first, but while the frontier holds URLs only those that buy as much fresh time as a first
fetch (recrawl.rules.signal_trust.discovery_bar)."""

from __future__ import annotations

import datetime as dt

import pytest

pytestmark = pytest.mark.spark

LOGICAL = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
NOW = LOGICAL.replace(tzinfo=None)
DAY = 86400
HOST = "http://trusted.test"


def _page(name: str, rate: float) -> dict:
    """A fetched page its trusted host's sitemap lists as changed since our copy, not due."""
    return {
        "url": f"{HOST}/{name}", "host": HOST, "status": "fetched", "depth": 0,
        "last_fetch_time": NOW - dt.timedelta(days=1),
        "next_fetch_time": NOW + dt.timedelta(days=10), "fetch_interval_s": 11 * DAY,
        "fetch_count": 1, "change_rate": rate,
        "signal_time": NOW - dt.timedelta(hours=12), "signal_precision_s": DAY // 24,
    }


def _new(i: int) -> dict:
    return {"url": f"{HOST}/new/{i}", "host": HOST, "status": "unfetched", "depth": 1,
            "next_fetch_time": NOW - dt.timedelta(hours=1), "fetch_count": 0}


def _crawl(spark, cfg, rows):
    from recrawl.store.schemas import CRAWLDB, HOSTS
    from recrawl.store.tables import conform, init_tables

    init_tables(spark, cfg)
    conform(spark.createDataFrame(rows, CRAWLDB), "crawldb").write.format("delta").mode(
        "append").save(cfg.table_path("crawldb"))
    host = [{"host": HOST, "signal_trusted": True, "signal_defer": False}]
    conform(spark.createDataFrame(host, HOSTS), "hosts").write.format("delta").mode(
        "append").save(cfg.table_path("hosts"))


@pytest.mark.parametrize("frontier", [3, 0])
def test_fast_pages_changes_wait_while_the_frontier_holds_urls(spark, cfg, frontier):
    from spark_jobs import generate

    # prior mean 0.1 a day: a first fetch buys 0.95 of the next day; the weekly page's chase
    # buys 0.93 (above min_gain, below that) and the monthly one 0.98; 4 slots: no room to fill
    cfg = cfg.with_overrides({"signals.enabled": True, "generate.top_n": 4,
                              "schedule.prior_mean": 0.1, "signals.min_gain": 0.3})
    rows = [_page("daily", 1.0), _page("weekly", 1 / 7), _page("monthly", 1 / 30)]
    rows += [_new(i) for i in range(frontier)]
    _crawl(spark, cfg, rows)
    counts = generate.run(spark, cfg, "20260301", LOGICAL)
    got = {r["url"].rsplit("/", 1)[-1] if "/new/" not in r["url"] else "new": r["reason"]
           for r in spark.read.format("delta").load(cfg.table_path("fetch_list"))
           .where("round_id = '20260301'").collect()}
    if frontier:
        # only the monthly page's change is chased; the others wait for discovery to end
        assert got == {"monthly": "signal", "new": "new"}
        assert counts["signal_held_for_discovery"] == 2
    else:
        assert got == {"daily": "signal", "weekly": "signal", "monthly": "signal"}
        assert counts["signal_held_for_discovery"] == 0
    assert counts["signal_changed"] == 3
