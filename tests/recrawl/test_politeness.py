"""recrawl.rules.politeness: the host delay rule and its SQL twin, on one table of cases."""

from __future__ import annotations

import duckdb
import pytest

from recrawl.rules.politeness import host_delay, host_delay_sql, pages_per_day

# (Crawl-delay, min delay, cap) -> delay (None: the host is deferred)
CASES = [
    (None, 1.0, 30.0, 1.0),
    (0.2, 1.0, 30.0, 1.0),  # a shorter Crawl-delay never shortens our minimum
    (5.0, 1.0, 30.0, 5.0),
    (30.0, 1.0, 30.0, 30.0),  # at the cap: honoured
    (30.5, 1.0, 30.0, None),  # above it: deferred, never shortened to the cap
    (3600.0, 2.0, 30.0, None),
    (0.0, 0.5, 30.0, 0.5),
]


@pytest.mark.parametrize(("crawl_delay", "min_delay", "cap", "want"), CASES)
def test_host_delay(crawl_delay, min_delay, cap, want):
    assert host_delay(crawl_delay, min_delay, cap) == want


def test_the_sql_twin_agrees_in_duckdb():
    con = duckdb.connect()
    for crawl_delay, min_delay, cap, want in CASES:
        got = con.execute(f"SELECT {host_delay_sql('c', min_delay, cap)} "
                          "FROM (SELECT CAST(? AS DOUBLE) AS c)", [crawl_delay]).fetchone()[0]
        assert got == want, (crawl_delay, min_delay, cap)


@pytest.mark.spark
def test_the_sql_twin_agrees_in_spark(spark):
    for crawl_delay, min_delay, cap, want in CASES:
        df = spark.createDataFrame([(crawl_delay,)], "c double")
        got = df.selectExpr(f"{host_delay_sql('c', min_delay, cap)} AS d").first()["d"]
        assert got == want, (crawl_delay, min_delay, cap)


def test_pages_per_day():
    assert pages_per_day(1.0) == 86400
    assert pages_per_day(10.0) == 8640
    assert pages_per_day(None) == 0
