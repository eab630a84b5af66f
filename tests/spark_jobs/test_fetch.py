"""fetch resumes (every host waits its delay first) when another round fetched moments ago.

Under Airflow a backfill and the daily run interleave step by step, so one round's fetch task can
start right after another's ended; the Fetcher of the second task knows nothing of the first's
last requests. `recent_fetch` reads them from `fetches` (wall-clock fetch_time).
"""

from __future__ import annotations

import datetime as dt

import pytest

from recrawl.store.schemas import FETCHES, SIGNAL_SOURCES
from spark_jobs.fetch import recent_fetch, recent_fetch_window_s

pytestmark = pytest.mark.spark


def test_a_fetch_within_the_longest_delay_makes_the_next_one_resume(spark, cfg):
    last = dt.datetime(2026, 12, 2, 5, 0, 0, tzinfo=dt.UTC)
    row = {f.name: None for f in FETCHES.fields}
    row.update(url="http://a.sim.test/", round_id="20261101", fetch_time=last, fetch_status="fetched")
    spark.createDataFrame([row], FETCHES).write.format("delta").save(cfg.table_path("fetches"))
    window = recent_fetch_window_s(cfg)
    assert window == cfg.get("fetcher.max_crawl_delay_s") + cfg.get("fetcher.request_deadline_s")
    at = last
    assert recent_fetch(spark, cfg, at + dt.timedelta(seconds=1))
    assert recent_fetch(spark, cfg, at + dt.timedelta(seconds=window - 1))
    assert not recent_fetch(spark, cfg, at + dt.timedelta(seconds=window + 1))
    # the signals step's reads of sitemaps and feeds are requests too
    read_at = last + dt.timedelta(hours=1)
    source = {f.name: None for f in SIGNAL_SOURCES.fields}
    source.update(source_url="http://a.sim.test/sitemap.xml", host="http://a.sim.test:80",
                  kind="sitemap", fetched_at=read_at)
    spark.createDataFrame([source], SIGNAL_SOURCES).write.format("delta").save(
        cfg.table_path("signal_sources"))
    assert recent_fetch(spark, cfg, read_at + dt.timedelta(seconds=window - 1))
    assert not recent_fetch(spark, cfg, read_at + dt.timedelta(seconds=window + 1))
    assert not recent_fetch(spark, cfg.with_overrides({"signals.enabled": False}),
                            read_at + dt.timedelta(seconds=1))
