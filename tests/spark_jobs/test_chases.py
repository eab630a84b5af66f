"""Which signalled changes a round chases (spark_jobs/chases.py): every change a trusted host
signals that buys at least `signals.min_gain` of the next day, and of an untrusted host's only
`signals.probe_per_host` verification probes, best first."""

from __future__ import annotations

import datetime as dt

import pytest

pytestmark = pytest.mark.spark

LOGICAL = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
NOW = LOGICAL.replace(tzinfo=None)
DAY = 86400
TRUSTED, UNTRUSTED = "http://trusted.test", "http://untrusted.test"


def _page(host: str, name: str, rate: float, changed: bool = True) -> dict:
    """A fetched page, not due for ten days, its sitemap's date after (or before) our copy."""
    copy = NOW - dt.timedelta(days=1)
    return {
        "url": f"{host}/{name}", "host": host, "status": "fetched", "depth": 0,
        "last_fetch_time": copy, "next_fetch_time": NOW + dt.timedelta(days=10),
        "fetch_interval_s": 11 * DAY, "fetch_count": 1, "change_rate": rate,
        "signal_time": copy + dt.timedelta(hours=12 if changed else -48),
        "signal_precision_s": 3600,
    }


def _crawl(spark, cfg, rows):
    from recrawl.store.schemas import CRAWLDB, HOSTS
    from recrawl.store.tables import conform, init_tables

    init_tables(spark, cfg)
    conform(spark.createDataFrame(rows, CRAWLDB), "crawldb").write.format("delta").mode(
        "append").save(cfg.table_path("crawldb"))
    hosts = [{"host": TRUSTED, "signal_trusted": True, "signal_defer": False},
             {"host": UNTRUSTED, "signal_trusted": False, "signal_defer": False}]
    conform(spark.createDataFrame(hosts, HOSTS), "hosts").write.format("delta").mode(
        "append").save(cfg.table_path("hosts"))


def test_trusted_changes_worth_a_fetch_and_the_others_probes_are_chased(spark, cfg):
    from spark_jobs import generate

    # min_gain 0.3: a page changing 5 times a day buys 0.2 of the next day and is not chased;
    # the untrusted host's three changes get its one probe, the most valuable (the slowest
    # page's); no page is due and the round has room for all, so nothing else is generated
    cfg = cfg.with_overrides({"signals.enabled": True, "generate.top_n": 20,
                              "signals.min_gain": 0.3, "signals.probe_per_host": 1,
                              "generate.fill_min_change_probability": 1.0})
    rows = [_page(TRUSTED, "daily", 1.0), _page(TRUSTED, "weekly", 1 / 7),
            _page(TRUSTED, "hourly", 5.0), _page(TRUSTED, "quiet", 1 / 7, changed=False),
            _page(UNTRUSTED, "daily", 1.0), _page(UNTRUSTED, "monthly", 1 / 30),
            _page(UNTRUSTED, "weekly", 1 / 7)]
    _crawl(spark, cfg, rows)
    counts = generate.run(spark, cfg, "20260301", LOGICAL)
    got = {r["url"]: r["reason"]
           for r in spark.read.format("delta").load(cfg.table_path("fetch_list"))
           .where("round_id = '20260301'").collect()}
    assert got == {f"{TRUSTED}/daily": "signal", f"{TRUSTED}/weekly": "signal",
                   f"{UNTRUSTED}/monthly": "signal"}
    # signalled changed with a gain worth a fetch: 2 trusted, 3 untrusted
    assert counts["signal_changed"] == 5
    assert counts["signal_changed_untrusted"] == 3
