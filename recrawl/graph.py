"""PageRank over Spark DataFrames (power iteration with integer vertex ids).

GraphFrames' Spark 4 jars (io.graphframes:graphframes-spark4_2.13) are not served by the Maven
Central mirror this project installs from, so PageRank is written here with DataFrame joins: the
same algorithm GraphFrames runs (GraphX's Pregel power iteration), with dangling pages handled
like networkx: their rank is spread uniformly over all pages. Ranks sum to 1 (networkx's
normalization), not to N (GraphX's).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageRankResult:
    ranks: object  # DataFrame[id: long, pagerank: double]
    iterations: int
    delta: float


def pagerank(
    spark,
    vertices,
    edges,
    *,
    damping: float = 0.85,
    max_iterations: int = 20,
    tolerance: float = 1e-4,
    checkpoint_every: int = 5,
) -> PageRankResult:
    """PageRank of `vertices` (id: long) over directed `edges` (src, dst: long[, weight]).

    Stops after `max_iterations` or when the L1 change is below N * tolerance (networkx's rule).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    vertices = vertices.select(F.col("id").cast("long")).distinct().persist(StorageLevel.MEMORY_AND_DISK)
    n = vertices.count()
    if n == 0:
        return PageRankResult(vertices.withColumn("pagerank", F.lit(0.0)), 0, 0.0)
    # Edge weights (e.g. link counts between hosts) are optional; without them every distinct
    # edge weighs 1 and a page's rank is split evenly over its out-links.
    weight = F.col("weight").cast("double") if "weight" in edges.columns else F.lit(1.0)
    edges = (
        edges.select(F.col("src").cast("long"), F.col("dst").cast("long"), weight.alias("weight"))
        .where("src != dst AND weight > 0")
        .groupBy("src", "dst").agg(F.max("weight").alias("weight"))
    )
    outdeg = edges.groupBy("src").agg(F.sum("weight").alias("deg"))
    # One row per edge with its share weight/out-weight, reused by every iteration.
    weighted = (
        edges.join(outdeg, "src")
        .select("src", "dst", (F.col("weight") / F.col("deg")).alias("w"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    # Dangling pages (no out-links) are flagged once; their rank mass is spread uniformly.
    flagged = vertices.join(outdeg, vertices.id == outdeg.src, "left").select(
        "id", F.col("src").isNull().alias("dangling")
    ).persist(StorageLevel.MEMORY_AND_DISK)
    ranks = flagged.withColumn("pagerank", F.lit(1.0 / n))
    dangling_sum = flagged.where("dangling").count() / n
    delta, it = float("inf"), 0
    base = (1.0 - damping) / n
    for it in range(1, max_iterations + 1):
        contrib = (
            weighted.join(ranks.select("id", "pagerank"), weighted.src == ranks.id)
            .groupBy("dst").agg(F.sum(F.col("pagerank") * F.col("w")).alias("c"))
        )
        new = flagged.join(contrib, flagged.id == contrib.dst, "left").select(
            "id", "dangling",
            (F.lit(base + damping * dangling_sum / n)
             + damping * F.coalesce(F.col("c"), F.lit(0.0))).alias("pagerank"),
        )
        if it % checkpoint_every == 0:
            new = new.localCheckpoint(eager=True)
        else:
            new = new.persist(StorageLevel.MEMORY_AND_DISK)
        # One action per iteration: the L1 change and the next dangling mass together.
        stats = (
            new.alias("a").join(ranks.alias("b"), "id")
            .agg(
                F.sum(F.abs(F.col("a.pagerank") - F.col("b.pagerank"))).alias("delta"),
                F.sum(F.when(F.col("a.dangling"), F.col("a.pagerank")).otherwise(0.0)).alias("d"),
            )
            .first()
        )
        delta, dangling_sum = float(stats["delta"] or 0.0), float(stats["d"] or 0.0)
        ranks.unpersist()
        ranks = new
        if delta < n * tolerance:
            break
    ranks = ranks.select("id", "pagerank")
    return PageRankResult(ranks, it, float(delta))
