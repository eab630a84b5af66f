"""generate fills a round that has fewer due URLs than its budget with pages not due yet, best
gain (importance x P(changed)) first, within each host's cap and above the probability floor."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from recrawl.config import ConfigError
from recrawl.rules.schedules import change_probability, change_probability_sql

pytestmark = pytest.mark.spark

LOGICAL = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
NOW = LOGICAL.replace(tzinfo=None)
DAY = 86400
# (host, name, next fetch in days from the round, change rate per day or None, age in days)
PAGES = [
    ("a", "d1", -1.0, 0.1, 2.0),      # due
    ("a", "d2", -0.5, 0.1, 2.0),      # due
    ("a", "fast", 3.0, 2.0, 1.0),     # P = 0.86
    ("a", "mid", 3.0, 0.5, 1.0),      # P = 0.39
    ("a", "none", 3.0, None, 3.0),    # prior 0.1/day: P = 0.26, but host a's cap is full
    ("a", "slow", 3.0, 0.01, 1.0),    # P = 0.01: below the floor
    ("b", "fast", 3.0, 1.0, 1.0),     # P = 0.63
    ("b", "mid", 3.0, 0.35, 1.0),     # P = 0.30
    ("b", "slow", 3.0, 0.05, 1.0),    # P = 0.05: below the floor
]


@pytest.fixture(scope="module")
def crawl(spark, tmp_path_factory):
    """One crawldb for the module: generate replaces its round's fetch list on every run."""
    from recrawl.store.schemas import CRAWLDB
    from recrawl.store.tables import conform, init_tables
    from tests.conftest import make_config

    cfg = make_config(tmp_path_factory.mktemp("fill") / "home")
    rows = [{
        "url": f"http://{h}.test/{name}", "host": f"http://{h}.test", "status": "fetched",
        "depth": 0, "last_fetch_time": NOW - dt.timedelta(days=age),
        "next_fetch_time": NOW + dt.timedelta(days=nxt), "fetch_interval_s": 5 * DAY,
        "fetch_count": 2, "change_rate": rate,
    } for h, name, nxt, rate, age in PAGES]
    init_tables(spark, cfg)
    conform(spark.createDataFrame(rows, CRAWLDB), "crawldb").write.format("delta").mode(
        "append").save(cfg.table_path("crawldb"))
    return cfg


def _generate(spark, cfg, **overrides):
    from spark_jobs import generate

    cfg = cfg.with_overrides({"generate.top_n": 6, "generate.max_per_host": 4,
                              "schedule.daily_budget": 100, "schedule.prior_mean": 0.1,
                              **overrides})
    counts = generate.run(spark, cfg, "20260301", LOGICAL)
    rows = spark.read.format("delta").load(cfg.table_path("fetch_list")).where(
        "round_id = '20260301'").collect()
    return counts, {r["url"].split("//", 1)[1].replace(".test", "") for r in rows}


def test_a_round_short_of_due_urls_is_filled_by_gain_within_host_caps(spark, crawl):
    counts, urls = _generate(spark, crawl)
    # host a: 2 due + 2 filled = its cap of 4, so a/none (P 0.26) loses to b/mid (P 0.30)
    assert urls == {"a/d1", "a/d2", "a/fast", "a/mid", "b/fast", "b/mid"}
    assert counts["filled_not_due"] == 4 and counts["generated"] == 6


def test_the_daily_budget_bounds_the_fill(spark, crawl):
    counts, urls = _generate(spark, crawl, **{"schedule.daily_budget": 3})
    assert urls == {"a/d1", "a/d2", "a/fast"}
    assert counts["filled_not_due"] == 1


def test_pages_unlikely_to_have_changed_are_never_fetched_early(spark, crawl):
    _, urls = _generate(spark, crawl, **{"generate.fill_min_change_probability": 0.5,
                                       "generate.top_n": 100})
    assert urls == {"a/d1", "a/d2", "a/fast", "b/fast"}


def test_filling_can_be_turned_off(spark, crawl):
    counts, urls = _generate(spark, crawl, **{"generate.fill_budget": False})
    assert urls == {"a/d1", "a/d2"}
    assert counts["filled_not_due"] == 0


def test_a_floor_outside_zero_one_is_refused(spark, crawl):
    with pytest.raises(ConfigError, match="fill_min_change_probability"):
        _generate(spark, crawl, **{"generate.fill_min_change_probability": 1.5})


def test_the_change_probability_sql_is_the_python_rule(spark):
    cases = [(2.0, 1.0), (0.5, 1.0), (None, 3.0), (0.0, 10.0), (0.01, 0.0), (1.0, -1.0)]
    rows = spark.createDataFrame(
        [(r, NOW - dt.timedelta(days=a)) for r, a in cases], "rate double, last timestamp")
    expr = change_probability_sql("rate", "last", f"TIMESTAMP '{NOW.isoformat(sep=' ')}'", 0.1)
    got = [r[0] for r in rows.selectExpr(expr).collect()]
    want = [change_probability(r, a, 0.1) for r, a in cases]
    assert got == pytest.approx(want, abs=1e-9)
    assert want[0] == pytest.approx(1 - math.exp(-2.0)) and want[-1] == 0.0
