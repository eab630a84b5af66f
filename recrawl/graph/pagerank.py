"""PageRank over Spark DataFrames (power iteration with integer vertex ids).

GraphFrames' Spark 4 jars (io.graphframes:graphframes-spark4_2.13) are not served by the Maven
Central mirror this project installs from, so PageRank is written here with DataFrame joins: the
same algorithm GraphFrames runs (GraphX's Pregel power iteration), with dangling pages handled
like networkx: their rank is spread uniformly over all pages. Ranks sum to 1 (networkx's
normalization), not to N (GraphX's).

Graphs of at most `in_driver_max_edges` edges are collected and solved in the driver by
recrawl.graph.local (same algorithms, same results): there the DataFrame iterations cost Spark
jobs, not arithmetic. Larger ones go to Spark GraphX (recrawl.graph.graphx: the same iteration
on GraphX's partitioned vertex and edge RDDs) or, by configuration, to these DataFrame joins:
`engine` = auto | driver | graphx | dataframe (`pagerank.engine`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from recrawl.graph import graphx as graph_graphx
from recrawl.graph.local import component_roots, pagerank_arrays

log = logging.getLogger(__name__)

ENGINES = ("auto", "driver", "graphx", "dataframe")


def choose_engine(spark, engine: str, edges, in_driver_max_edges: int) -> str:
    """The engine that solves this graph: `engine` unless "auto", which takes the driver for at
    most `in_driver_max_edges` edges (0: never) and GraphX above, or the DataFrame joins when the
    GraphX jar is not loaded (a session started without scripts/build_jvm.sh's jar)."""
    if engine not in ENGINES:
        raise ValueError(f"pagerank engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine != "auto":
        return engine
    if in_driver_max_edges and edges.count() <= in_driver_max_edges:
        return "driver"
    if graph_graphx.available(spark):
        return "graphx"
    log.warning("GraphX engine jar not loaded (bash scripts/setup.sh builds it): DataFrame joins")
    return "dataframe"


@dataclass(frozen=True)
class PageRankResult:
    ranks: object  # DataFrame[id: long, pagerank: double]
    iterations: int
    delta: float
    seconds: tuple[float, ...] = ()  # wall time of each iteration (its join, aggregate, check)
    engine: str = "dataframe"  # which engine solved it (ENGINES)


def pagerank(
    spark,
    vertices,
    edges,
    *,
    damping: float = 0.85,
    max_iterations: int = 20,
    tolerance: float = 1e-4,
    in_driver_max_edges: int = 0,
    engine: str = "auto",
) -> PageRankResult:
    """PageRank of `vertices` (id: long) over directed `edges` (src, dst: long[, weight]).

    `engine` (ENGINES): "auto" solves graphs of at most `in_driver_max_edges` edges in the
    driver and larger ones on GraphX; every engine gives the same ranks and iteration count.

    Stops after `max_iterations` or when the L1 change of the rank vector (which sums to 1) is
    below `tolerance`. networkx stops at N * tol instead, a rule that loosens as the graph grows:
    at 100k vertices and tol 1e-6 it accepts an L1 change of 0.1, after about four iterations.
    """
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

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
    engine = choose_engine(spark, engine, edges, in_driver_max_edges)
    if engine == "driver":
        return _pagerank_in_driver(spark, vertices, edges, damping, max_iterations, tolerance)
    if engine == "graphx":
        ranks, it, delta, seconds = graph_graphx.pagerank(
            spark, vertices, edges, damping=damping, max_iterations=max_iterations,
            tolerance=tolerance)
        return PageRankResult(ranks, it, delta, seconds, "graphx")
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
    seconds: list[float] = []
    while it < max_iterations:
        it += 1
        started = time.perf_counter()
        contrib = (
            weighted.join(ranks.select("id", "pagerank"), weighted.src == ranks.id)
            .groupBy("dst").agg(F.sum(F.col("pagerank") * F.col("w")).alias("c"))
        )
        new = flagged.join(contrib, flagged.id == contrib.dst, "left").select(
            "id", "dangling",
            (F.lit(base + damping * dangling_sum / n)
             + damping * F.coalesce(F.col("c"), F.lit(0.0))).alias("pagerank"),
        )
        # Cut the lineage every iteration: with persist() alone each plan embeds the previous
        # ones and the plan string Spark builds for every query grows past the driver heap.
        # Not eager: the statistics action below computes and stores it in the same job.
        new = new.localCheckpoint(eager=False)
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
        seconds.append(time.perf_counter() - started)
        log.info("pagerank iteration %d: L1 change %.3g in %.1f s", it, delta, seconds[-1])
        ranks.unpersist()
        ranks = new
        if delta < tolerance:
            break
    ranks = ranks.select("id", "pagerank")
    return PageRankResult(ranks, it, float(delta), tuple(seconds))


def _pagerank_in_driver(spark, vertices, edges, damping, max_iterations, tolerance) -> PageRankResult:
    """`pagerank` of a graph small enough to hold in the driver: recrawl.graph.local. Columns
    travel as Arrow batches both ways (pickled Rows through py4j were most of the time)."""
    import pyarrow as pa  # lazy: pyspark's Arrow path

    ids = vertices.toArrow().column("id").to_numpy()
    cols = edges.select("src", "dst", "weight").toArrow()
    vertices.unpersist()
    res = pagerank_arrays(ids, *(cols.column(c).to_numpy() for c in ("src", "dst", "weight")),
                          damping=damping, max_iterations=max_iterations, tolerance=tolerance)
    ranks = spark.createDataFrame(pa.table({"id": res.ids, "pagerank": res.ranks}))
    return PageRankResult(ranks, res.iterations, res.delta, res.seconds, "driver")


def _components_in_driver(spark, vertices, edges, *, strong: bool) -> ComponentsResult:
    """Connected components of a graph small enough to hold in the driver: recrawl.graph.local.

    Vertices (host names too) are numbered in id order in Spark, so only integer edge pairs
    reach the driver (as Arrow) and a component's smallest number is its smallest id."""
    import pyarrow as pa  # lazy: pyspark's Arrow path
    from pyspark.sql import Window  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    vids = (
        vertices.select("id").distinct()
        .withColumn("vid", F.row_number().over(Window.orderBy("id")) - 1)
        .localCheckpoint(eager=True)
    )
    n = vids.count()
    pairs = (
        edges.select("src", "dst")
        .join(vids.select(F.col("id").alias("src"), F.col("vid").alias("s")), "src")
        .join(vids.select(F.col("id").alias("dst"), F.col("vid").alias("d")), "dst")
        .select("s", "d").toArrow()
    )
    roots = component_roots(n, pairs.column("s").to_numpy(), pairs.column("d").to_numpy(),
                            strong=strong)
    found = spark.createDataFrame(pa.table({"vid": np.arange(n, dtype=np.int64), "root": roots}))
    labels = (
        found.join(vids, "vid")
        .join(vids.select(F.col("vid").alias("root"), F.col("id").alias("component")), "root")
        .select("id", "component")
    )
    return ComponentsResult(labels, 1, 0, "driver")


# --- Connected components -------------------------------------------------------------------
# GraphFrames computes these with GraphX: min-label propagation for weakly connected components
# and the forward-backward colouring algorithm (Orzan) for strongly connected ones. Both are
# written here with DataFrame joins, iterating until nothing changes; vertex ids may be any
# orderable type (host names work), labels are the smallest id of each component.


@dataclass(frozen=True)
class ComponentsResult:
    labels: object  # DataFrame[id, component]; component is NULL where not resolved in time
    iterations: int
    unresolved: int
    engine: str = "dataframe"


def _min_label_step(labels, edges):
    """One propagation step: each vertex takes the smallest label among itself and in-neighbours.

    Returns (new labels, number of vertices whose label went down)."""
    from pyspark.sql import functions as F  # lazy: pyspark

    incoming = (
        edges.join(labels.select(F.col("id").alias("src"), F.col("label").alias("l")), "src")
        .groupBy(F.col("dst").alias("id")).agg(F.min("l").alias("m"))
    )
    joined = labels.join(incoming, "id", "left")
    lower = F.col("m").isNotNull() & (F.col("m") < F.col("label"))
    new = joined.select(
        "id", F.when(lower, F.col("m")).otherwise(F.col("label")).alias("label"), lower.alias("chg")
    ).localCheckpoint(eager=True)
    changed = new.where("chg").count()  # reads the checkpoint, no second join
    return new.drop("chg"), changed


def weakly_connected_components(spark, vertices, edges, *, max_iterations: int = 100,
                                in_driver_max_edges: int = 0, engine: str = "auto") -> ComponentsResult:
    """Components of the graph with edge directions ignored (label = smallest vertex id).

    `engine` as for `pagerank`; GraphX runs its ConnectedComponents to the end."""
    from pyspark.sql import functions as F  # lazy: pyspark

    engine = choose_engine(spark, engine, edges, in_driver_max_edges)
    if engine == "driver":
        return _components_in_driver(spark, vertices, edges, strong=False)
    if engine == "graphx":
        return ComponentsResult(graph_graphx.components(spark, vertices, edges, strong=False), 1, 0,
                                "graphx")
    both = (
        edges.select("src", "dst").union(edges.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
        .where("src != dst").distinct().localCheckpoint(eager=True)
    )
    labels = vertices.select("id").distinct().withColumn("label", F.col("id")).localCheckpoint(eager=True)
    it, changed = 0, 1
    while changed and it < max_iterations:
        it += 1
        labels, changed = _min_label_step(labels, both)
    unresolved = labels.count() if changed else 0
    comp = F.lit(None) if changed else F.col("label")
    return ComponentsResult(labels.select("id", comp.alias("component")), it, unresolved)


def strongly_connected_components(
    spark, vertices, edges, *, max_rounds: int = 30, max_iterations: int = 100,
    in_driver_max_edges: int = 0, engine: str = "auto",
) -> ComponentsResult:
    """Strongly connected components by trimming and forward-backward colouring.

    Each round: vertices without in- or out-edges among the remaining ones are singleton
    components; the rest take the smallest id that reaches them (forward colouring); a colour's
    root (the vertex whose id is the colour) and everything that reaches the root inside the
    colour form one component and leave the graph. Vertices left after `max_rounds` get NULL
    (counted in `unresolved`) rather than a wrong answer. `engine` as for `pagerank`: the
    driver (scipy) and GraphX (StronglyConnectedComponents, the same algorithm) resolve every
    vertex, `max_rounds` bounds only the DataFrame joins.
    """
    from pyspark.sql import functions as F  # lazy: pyspark

    engine = choose_engine(spark, engine, edges, in_driver_max_edges)
    if engine == "driver":
        return _components_in_driver(spark, vertices, edges, strong=True)
    if engine == "graphx":
        return ComponentsResult(graph_graphx.components(spark, vertices, edges, strong=True), 1, 0,
                                "graphx")
    remaining = vertices.select("id").distinct().localCheckpoint(eager=True)
    edges = edges.select("src", "dst").where("src != dst").distinct().localCheckpoint(eager=True)
    done = None
    rounds = 0
    while rounds < max_rounds and remaining.limit(1).count():
        rounds += 1
        ids = remaining.select(F.col("id").alias("x"))
        edges = (
            edges.join(ids.withColumnRenamed("x", "src"), "src").join(ids.withColumnRenamed("x", "dst"), "dst")
            .select("src", "dst").localCheckpoint(eager=True)
        )
        # Trim: no in-edge or no out-edge left means a component of its own.
        has_out = edges.select(F.col("src").alias("id")).distinct()
        has_in = edges.select(F.col("dst").alias("id")).distinct()
        core = remaining.join(has_out, "id").join(has_in, "id")
        trimmed = remaining.join(core, "id", "left_anti").withColumn("component", F.col("id"))
        core = core.localCheckpoint(eager=True)
        core_ids = core.select(F.col("id").alias("x"))
        core_edges = (
            edges.join(core_ids.withColumnRenamed("x", "src"), "src")
            .join(core_ids.withColumnRenamed("x", "dst"), "dst").select("src", "dst")
            .localCheckpoint(eager=True)
        )
        # Forward colouring: smallest id reaching each vertex.
        colour = core.withColumn("label", F.col("id")).localCheckpoint(eager=True)
        changed, it = 1, 0
        while changed and it < max_iterations:
            it += 1
            colour, changed = _min_label_step(colour, core_edges)
        # Backward from each root inside its colour: reached = 0 (yes) / 1 (no), min-propagated
        # along reversed edges whose ends share a colour.
        c = colour.select("id", F.col("label").alias("colour"))
        same = (
            core_edges.join(c.withColumnRenamed("id", "src").withColumnRenamed("colour", "cs"), "src")
            .join(c.withColumnRenamed("id", "dst").withColumnRenamed("colour", "cd"), "dst")
            .where("cs = cd").select(F.col("dst").alias("src"), F.col("src").alias("dst"))
            .localCheckpoint(eager=True)
        )
        reach = c.select("id", F.when(F.col("id") == F.col("colour"), 0).otherwise(1).alias("label"))
        reach = reach.localCheckpoint(eager=True)
        changed, it = 1, 0
        while changed and it < max_iterations:
            it += 1
            reach, changed = _min_label_step(reach, same)
        found = (
            reach.where("label = 0").join(c, "id").select("id", F.col("colour").alias("component"))
        )
        batch = trimmed.unionByName(found).localCheckpoint(eager=True)
        done = batch if done is None else done.unionByName(batch).localCheckpoint(eager=True)
        remaining = remaining.join(batch.select("id"), "id", "left_anti").localCheckpoint(eager=True)
    left = remaining.count()
    unresolved = remaining.withColumn("component", F.lit(None).cast(vertices.schema["id"].dataType))
    labels = unresolved if done is None else done.unionByName(unresolved)
    return ComponentsResult(labels, rounds, left)
