"""updatedb's URL shapes (trap detection): the Python rule, and its SQL form giving the same
results. (The MERGE's rules: test_crawldb_rules.py; the round: test_round_e2e.py.)"""

from __future__ import annotations

import pytest

from recrawl.rules.traps import url_shape, url_shape_sql

URLS = [
    "http://t/cal/2026/11",
    "http://t/cal/2031/02?",
    "http://t/s?id=1&b=2",
    "http://t/s?b=9&id=7&&x",
    "https://h.test:8443/a1b22/c333.html?z=1&a=&a=2&%41=3",
    "http://t/p?q=a?b=c",
    "http://t/\u0663\u0664/x?\u00e9=1&e=2",  # Arabic-Indic digits are digits for both
    "http://t/a/b",
    "http://t/",
]


def test_url_shape_collapses_calendars_and_session_ids():
    assert url_shape("http://t/cal/2026/11") == url_shape("http://t/cal/2031/02")
    assert url_shape("http://t/s?id=1&b=2") == url_shape("http://t/s?b=9&id=7")
    assert url_shape("http://t/a/b") != url_shape("http://t/a/c")


@pytest.mark.spark
def test_url_shape_sql_matches_url_shape(spark):
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(u,) for u in URLS], "url string")
    got = dict(df.select("url", F.expr(url_shape_sql("url")).alias("s")).collect())
    assert got == {u: url_shape(u) for u in URLS}
