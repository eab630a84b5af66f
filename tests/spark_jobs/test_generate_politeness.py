"""generate gives slots only to hosts the fetcher will fetch: a Crawl-delay above the cap
(recrawl.rules.politeness) and a server's back-off keep a host off the fetch list."""

from __future__ import annotations

import datetime as dt

import pytest

pytestmark = pytest.mark.spark

LOGICAL = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
NOW = LOGICAL.replace(tzinfo=None)
DAY = 86400
# host -> robots.txt Crawl-delay (the cap is fetcher.max_crawl_delay_s, 30 s by default)
DELAYS = {"http://fast.test:80": None, "http://slow.test:80": 20.0,
          "http://glacial.test:80": 120.0, "http://backoff.test:80": None}


def _crawl(spark, cfg, *, due: bool = True):
    from recrawl.store.schemas import CRAWLDB, HOSTS, ROBOTS
    from recrawl.store.tables import conform, init_tables

    init_tables(spark, cfg)
    next_fetch = NOW - dt.timedelta(hours=1) if due else NOW + dt.timedelta(days=3)
    pages = [{
        "url": f"{host}/p{i}", "host": host, "status": "fetched", "depth": 0,
        "last_fetch_time": NOW - dt.timedelta(days=5), "next_fetch_time": next_fetch,
        "fetch_interval_s": 7 * DAY, "fetch_count": 1, "change_rate": 0.5,
    } for host in DELAYS for i in range(3)]
    robots = [{"host": h, "fetched_at": NOW, "http_status": 200, "crawl_delay": d, "rules": ""}
              for h, d in DELAYS.items()]
    # a back-off from the server's Retry-After, compared with the wall clock
    hosts = [{"host": "http://backoff.test:80",
              "backoff_until": dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(hours=2),
              "consecutive_failures": 2}]
    for name, rows, schema in (("crawldb", pages, CRAWLDB), ("robots", robots, ROBOTS),
                               ("hosts", hosts, HOSTS)):
        conform(spark.createDataFrame(rows, schema), name).write.format("delta").mode(
            "append").save(cfg.table_path(name))


def _listed(spark, cfg) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in spark.read.format("delta").load(cfg.table_path("fetch_list")).where(
            "round_id = '20260301'").collect():
        out[r["host"]] = out.get(r["host"], 0) + 1
    return out


def test_a_host_above_the_crawl_delay_cap_gets_no_slots(spark, cfg):
    from spark_jobs import generate

    _crawl(spark, cfg)
    counts = generate.run(spark, cfg, "20260301", LOGICAL)
    listed = _listed(spark, cfg)
    # the fetcher defers glacial (120 s > 30 s): slots there would come back retry_later
    assert listed == {"http://fast.test:80": 3, "http://slow.test:80": 3}
    assert counts["skipped_crawl_delay"] == 3
    assert counts["skipped_backoff"] == 3
    # slow's Crawl-delay (under the cap) is honoured in the partition's expected time
    assert counts["max_partition_expected_s"] >= 3 * 20


def test_the_fill_skips_them_too(spark, cfg):
    # nothing due: the round is filled with pages not due yet, and still not on those hosts
    from spark_jobs import generate

    _crawl(spark, cfg, due=False)
    counts = generate.run(spark, cfg, "20260301", LOGICAL)
    listed = _listed(spark, cfg)
    assert counts["filled_not_due"] == sum(listed.values()) > 0
    assert set(listed) <= {"http://fast.test:80", "http://slow.test:80"}
