"""generate's discovery share: never-fetched URLs keep a share of a round that revisits fill."""

from __future__ import annotations

import datetime as dt

import pytest

pytestmark = pytest.mark.spark

LOGICAL = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
NOW = LOGICAL.replace(tzinfo=None)
DAY = 86400


def _row(host, i, status):
    fetched = status == "fetched"
    return {
        "url": f"http://{host}/{status}/{i:03d}", "host": f"http://{host}", "status": status,
        # revisits are shallower, so breadth-first priority alone always prefers them
        "depth": 0 if fetched else 1,
        "last_fetch_time": NOW - dt.timedelta(days=1) if fetched else None,
        "next_fetch_time": NOW - dt.timedelta(hours=1),
        "fetch_interval_s": DAY, "fetch_count": 1 if fetched else 0,
    }


def _crawl(spark, cfg, rows):
    from recrawl.store.schemas import CRAWLDB
    from recrawl.store.tables import conform, init_tables

    init_tables(spark, cfg)
    conform(spark.createDataFrame(rows, CRAWLDB), "crawldb").write.format("delta").mode(
        "append"
    ).save(cfg.table_path("crawldb"))


def _generate(spark, cfg):
    from spark_jobs import generate

    counts = generate.run(spark, cfg, "20260301", LOGICAL)
    urls = [r["url"] for r in spark.read.format("delta").load(cfg.table_path("fetch_list"))
            .where("round_id = '20260301'").collect()]
    return counts, urls


def _new(urls):
    return sorted(u for u in urls if "/unfetched/" in u)


@pytest.mark.parametrize(
    ("share", "unfetched", "want_new"),
    [
        (0.0, 20, 0),   # no reserve: 30 due revisits fill all 10 slots (the starvation case)
        (0.2, 20, 2),   # ceil(0.2 x 10) slots reserved for the frontier
        (0.5, 3, 3),    # the frontier is smaller than the reserve: revisits take the rest
        (0.2, 0, 0),    # an empty frontier costs the revisits nothing
    ],
)
def test_round_reserves_the_discovery_share(spark, cfg, share, unfetched, want_new):
    cfg = cfg.with_overrides({"generate.top_n": 10, "generate.discovery_share": share})
    rows = [_row(f"h{i % 3}.test", i, "fetched") for i in range(30)]
    rows += [_row(f"h{i % 3}.test", i, "unfetched") for i in range(unfetched)]
    _crawl(spark, cfg, rows)
    counts, urls = _generate(spark, cfg)
    assert len(urls) == 10 == counts["generated"]
    assert len(_new(urls)) == want_new == counts["discovery_reserved"]


def test_each_host_reserves_its_share_inside_its_cap(spark, cfg):
    # One host, cap 5 per round: without its own reserve, its 10 revisits would fill the cap
    # and the round-wide reserve would find no new URL of this host to take.
    cfg = cfg.with_overrides({"generate.top_n": 100, "generate.max_per_host": 5,
                              "generate.discovery_share": 0.2})
    rows = [_row("one.test", i, "fetched") for i in range(10)]
    rows += [_row("one.test", i, "unfetched") for i in range(10)]
    _crawl(spark, cfg, rows)
    _, urls = _generate(spark, cfg)
    assert len(urls) == 5
    # ceil(0.2 x 5) = 1 reserved in the host's cap; within each kind, URL order breaks ties
    assert _new(urls) == ["http://one.test/unfetched/000"]


def test_a_share_outside_zero_to_one_is_refused_before_spark_work(spark, cfg):
    cfg = cfg.with_overrides({"generate.discovery_share": 1.5})
    _crawl(spark, cfg, [_row("a.test", 0, "fetched")])
    with pytest.raises(ValueError, match="discovery share"):
        _generate(spark, cfg)
