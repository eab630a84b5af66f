"""recrawl.content.nearjoin: the DataFrame block join against the pure-Python reference
(recrawl.content.fingerprint.near_duplicate_pairs). The dedup job around it: tests/spark_jobs/test_dedup.py."""

from __future__ import annotations

import random

import pytest

from recrawl.content.fingerprint import near_duplicate_pairs
from recrawl.content.nearjoin import near_duplicate_pairs_df
from tests.spark_jobs.test_dedup import flip, fp

pytestmark = pytest.mark.spark


def test_near_duplicate_pairs_df_matches_the_reference(spark):
    """The DataFrame join equals recrawl.content.fingerprint.near_duplicate_pairs when all are new."""
    r = random.Random(3)
    fps = {}
    for g in range(30):
        base = r.getrandbits(64)
        for j in range(3):
            fps[f"u{g}-{j}"] = flip(base, *r.sample(range(64), r.randint(0, 4)))
    rows = [(u, fp(x), True) for u, x in fps.items()]
    df = spark.createDataFrame(rows, "url string, simhash long, is_new boolean")
    got = near_duplicate_pairs_df(df, 3, "6c3", 1000).pairs.collect()
    assert len(got) == len({(p["u1"], p["u2"]) for p in got})  # each pair once
    assert {(p["u1"], p["u2"]) for p in got} == near_duplicate_pairs(fps, 3, "6c3")
    # stored x stored pairs are never formed
    stored = spark.createDataFrame(
        [(u, s, u.endswith("-0")) for u, s, _ in rows], "url string, simhash long, is_new boolean"
    )
    for p in near_duplicate_pairs_df(stored, 3, "4x16", 1000, prune=True).pairs.collect():
        assert p["u1"].endswith("-0") or p["u2"].endswith("-0")
