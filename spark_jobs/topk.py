"""The first n rows of a DataFrame in an order, for generate's budget rule: Spark's top-k
while the rows fit in a task, a range-partitioned sort cut by partition offsets beyond."""

from __future__ import annotations


def top_rows(df, n: int, order: list, in_memory_max: int):
    """The first `n` rows of `df` in `order`, cached: Spark's top-k (TakeOrderedAndProject,
    cheapest while 2 x n rows fit in a task) up to `in_memory_max`, else `first_rows`."""
    if n <= in_memory_max:
        return df.orderBy(*order).limit(max(0, n)).cache()
    return first_rows(df, n, order)


def partition_offsets(counts: dict[int, int]) -> dict[int, int]:
    """Rows before each partition of a sorted DataFrame, from the rows in each partition."""
    out, total = {}, 0
    for pid in sorted(counts):
        out[pid] = total
        total += counts[pid]
    return out


def first_rows(df, n: int, order: list):
    """The first `n` rows of `df` in `order`, persisted, without one task holding n rows.

    `orderBy(...).limit(n)` plans Spark's TakeOrderedAndProject: every task and then a single
    final task keep up to 2n rows in memory, unspillable: at a round of 33M URLs (docs/scale.md)
    that is several GB in one task. Here the sort is Spark's range-partitioned, spilling sort;
    each sorted partition's rows are counted (one small collect: a row per partition) and each
    row's global position is its partition's offset plus its position inside the partition
    (`monotonically_increasing_id` counts rows in order within a partition), so the cut needs
    no single partition either.
    """
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    tagged = (
        df.orderBy(*order)
        .withColumn("_pid", F.spark_partition_id())
        .withColumn("_pos", F.monotonically_increasing_id() - F.shiftleft(F.col("_pid").cast("long"), 33))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    counts = {r["_pid"]: r["count"] for r in tagged.groupBy("_pid").count().collect()}
    offsets = partition_offsets(counts)
    offs = df.sparkSession.createDataFrame(
        list(offsets.items()) or [(0, 0)], "_pid int, _off long"
    )
    out = (
        tagged.join(F.broadcast(offs), "_pid")
        .where(F.col("_off") + F.col("_pos") < n)
        .drop("_pid", "_pos", "_off")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    out.count()
    tagged.unpersist()
    return out
