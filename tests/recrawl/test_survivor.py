"""Survivor choice among duplicates (Nutch DeduplicationJob compareOrder)."""

from __future__ import annotations

import itertools
from datetime import datetime

import pytest

from recrawl.rules.survivor import (
    DEFAULT_ORDER,
    choose_survivor,
    sort_key,
    spark_order_columns,
    split_survivor,
    validate_order,
)

T0 = datetime(2024, 1, 1)
T1 = datetime(2024, 2, 1)


def c(url, score=1.0, first_seen=T0, **kw):
    return {"url": url, "score": score, "first_seen": first_seen, **kw}


def test_higher_score_wins_over_everything_else():
    a = c("http://example.com/a-very-long-path?x=1", score=2.0, first_seen=T1)
    b = c("https://example.com/", score=1.0, first_seen=T0)
    assert choose_survivor([b, a]) is a


def test_https_then_length_then_first_seen_then_url():
    https = c("https://example.com/page")
    http = c("http://example.com/page")
    assert choose_survivor([http, https]) is https
    short = c("http://example.com/p")
    assert choose_survivor([http, short]) is short
    old = c("http://example.com/x", first_seen=T0)
    new = c("http://example.com/y", first_seen=T1)
    assert choose_survivor([new, old]) is old
    # everything equal: lexicographic URL decides
    x, y = c("http://example.com/b"), c("http://example.com/a")
    assert choose_survivor([x, y]) is y


def test_url_length_is_measured_after_percent_decoding():
    encoded = c("http://example.com/%E4%B8%AD%E6%96%87")  # 2 characters once decoded
    plain = c("http://example.com/abcd")
    assert choose_survivor([plain, encoded]) is encoded


def test_choice_is_deterministic_for_any_input_order():
    cands = [
        c("http://example.com/a", 1.0),
        c("https://example.com/a", 1.0),
        c("https://example.com/ab", 1.0),
        c("https://example.com/b", 1.0, first_seen=T1),
        c("https://example.com/c", None),
    ]
    winners = {choose_survivor(list(p))["url"] for p in itertools.permutations(cands)}
    assert winners == {"https://example.com/a"}


def test_missing_values_lose():
    scored = c("http://example.com/zzzzzzzzz", score=0.0)
    unscored = c("https://a.com/", score=None)
    assert choose_survivor([unscored, scored]) is scored
    dated = c("http://example.com/b", first_seen=T1)
    undated = c("http://example.com/a", first_seen=None)
    assert choose_survivor([undated, dated]) is dated
    assert choose_survivor([{"url": "http://b/"}, {"url": "http://a/"}])["url"] == "http://a/"


def test_times_may_be_numbers_or_iso_strings():
    a = c("http://example.com/a", first_seen="2024-03-01T00:00:00")
    b = c("http://example.com/b", first_seen="2024-02-01T00:00:00+00:00")
    assert choose_survivor([a, b]) is b
    assert (
        choose_survivor([c("http://e/x", first_seen=5.0), c("http://e/y", first_seen=3)])["url"]
        == "http://e/y"
    )


def test_fetch_time_keeps_the_latest_like_nutch():
    old = c("http://example.com/a", fetch_time=T0)
    new = c("http://example.com/b", fetch_time=T1)
    assert choose_survivor([old, new], ["fetch_time"]) is new


def test_custom_order_and_nutch_names():
    a = c("http://example.com/a", score=5.0)
    b = c("http://example.com/", score=1.0)
    assert choose_survivor([a, b], ["url_length", "score"]) is b
    assert validate_order("score,httpsOverHttp,urlLength,fetchTime") == (
        "score",
        "https",
        "url_length",
        "fetch_time",
    )
    assert validate_order(DEFAULT_ORDER) == ("score", "https", "url_length", "first_seen")


@pytest.mark.parametrize("order", [["score", "pagerank"], ["score", "score"], "score,,https"])
def test_invalid_order_is_a_clear_error(order):
    with pytest.raises(ValueError, match="survivor order"):
        validate_order(order)


def test_empty_group_is_an_error():
    with pytest.raises(ValueError):
        choose_survivor([])


def test_split_survivor_ranks_the_rest():
    cands = [c("http://e/a", 1.0), c("http://e/b", 3.0), c("http://e/c", 2.0)]
    keep, dups = split_survivor(cands)
    assert keep["url"] == "http://e/b"
    assert [d["url"] for d in dups] == ["http://e/c", "http://e/a"]


def test_sort_key_shape():
    key = sort_key(c("https://e/a", 2.0, first_seen=0.0), DEFAULT_ORDER)
    assert key == ((0, -2.0), 0, len("https://e/a"), (0, 0.0), "https://e/a")


def test_spark_order_columns():
    cols = spark_order_columns()
    assert cols[0] == ("score", True)
    assert cols[1][1] is True and "https://" in cols[1][0]
    assert cols[2] == ("length(coalesce(try_url_decode(url), url))", False)
    assert cols[3] == ("first_seen", False)
    assert cols[-1] == ("url", False)
    assert spark_order_columns("fetchTime") == [("fetch_time", True), ("url", False)]


def test_works_on_pyspark_rows():
    row_mod = pytest.importorskip("pyspark.sql")
    row = row_mod.Row
    a = row(url="http://e/a", score=1.0, first_seen=T0)
    b = row(url="https://e/a", score=1.0, first_seen=T0)
    assert choose_survivor([a, b]) is b
    assert choose_survivor([row(url="http://e/b"), row(url="http://e/a")])["url"] == "http://e/a"


@pytest.mark.spark
def test_spark_order_matches_python(spark):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = [
        ("g", "http://e.com/%E4%B8%AD", 1.0, T1),
        ("g", "http://e.com/abcd", 1.0, T0),
        ("g", "https://e.com/abcdef", 1.0, T1),
        ("g", "http://e.com/x", None, T0),
        ("h", "http://f.com/b", 2.0, None),
        ("h", "http://f.com/a", 2.0, T1),
        ("h", "http://f.com/%zz", 2.0, T0),
    ]
    df = spark.createDataFrame(rows, "grp string, url string, score double, first_seen timestamp")
    order = [
        F.expr(e).desc_nulls_last() if desc else F.expr(e).asc_nulls_last()
        for e, desc in spark_order_columns()
    ]
    w = Window.partitionBy("grp").orderBy(*order)
    got = df.withColumn("rn", F.row_number().over(w)).orderBy("grp", "rn").collect()
    for grp in ("g", "h"):
        members = [r.asDict() for r in got if r.grp == grp]
        python = sorted(members, key=lambda m: sort_key(m, DEFAULT_ORDER))
        assert [m["url"] for m in members] == [m["url"] for m in python]
