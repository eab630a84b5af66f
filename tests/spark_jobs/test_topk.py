"""topk.first_rows (generate's cut): the first n rows in order, cut by partition offsets."""

from __future__ import annotations

import random

import pytest


def test_partition_offsets_count_the_rows_before_each_partition():
    from spark_jobs.topk import partition_offsets

    # partitions may come back in any order and some may be missing (empty)
    assert partition_offsets({2: 5, 0: 3, 5: 1}) == {0: 0, 2: 3, 5: 8}
    assert partition_offsets({}) == {}


@pytest.mark.spark
@pytest.mark.parametrize("n", [0, 1, 37, 500, 999, 1000, 5000])
def test_first_rows_equals_a_sorted_prefix(spark, n):
    from pyspark.sql import functions as F

    from spark_jobs.topk import first_rows

    rng = random.Random(n)
    # many ties in priority and host_rank: the url ends the order, as in generate
    rows = [(f"http://h{rng.randrange(20)}/{i}", float(rng.randrange(10)), rng.randrange(5))
            for i in range(1000)]
    df = spark.createDataFrame(rows, "url string, priority double, host_rank int")
    # several sorted partitions to stitch: 7, not coalesced by adaptive execution
    conf = {"spark.sql.shuffle.partitions": "7",
            "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    old = {k: spark.conf.get(k) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        got = first_rows(df, n, [F.col("priority").desc(), F.col("host_rank"), F.col("url")])
        urls = [r["url"] for r in got.collect()]
        assert got.rdd.getNumPartitions() > 1 or n == 0
    finally:
        for k, v in old.items():
            spark.conf.set(k, v)
    expected = sorted(rows, key=lambda r: (-r[1], r[2], r[0]))[:n]
    assert sorted(urls) == sorted(r[0] for r in expected)
    assert got.columns == ["url", "priority", "host_rank"]
