"""PageRank and connected components on Spark GraphX, the engine above `in_driver_max_edges`.

PySpark has no GraphX API: the iteration is a small Java class (jvm/src/main/java/recrawl/graphx/
GraphEngine.java, compiled by scripts/build_jvm.sh against pyspark's own jars and put on
`spark.jars` by recrawl/sparkenv/spark.py, so executors get it), called here through py4j on DataFrames.
The edge set is prepared here exactly as recrawl.graph.pagerank's DataFrame engine prepares it (share =
weight / out-weight over every edge of the source, dangling = no out-edge, rank flows only
between listed vertices); the Java side runs the same power iteration, dangling rule and L1 stop
rule, so ranks and iteration counts equal the other engines' (tests/recrawl/test_graph.py).

This module is the whole engine behind `pagerank.engine = graphx`: a deployment whose Maven
repository serves GraphFrames could add a `graph_graphframes.py` with the same three functions
(docs/design-choices.md).
"""

from __future__ import annotations

ENGINE_CLASS = "recrawl.graphx.GraphEngine"


def _engine(spark):
    """The Java class through py4j, or None when its jar is not on the driver's class path."""
    from py4j.java_gateway import JavaClass  # lazy: pyspark's py4j, only with a session

    cls = spark.sparkContext._jvm.recrawl.graphx.GraphEngine
    return cls if isinstance(cls, JavaClass) else None


def available(spark) -> bool:
    """Is the GraphX engine's jar loaded (scripts/build_jvm.sh ran before the session started)?"""
    return _engine(spark) is not None


def _require(spark):
    cls = _engine(spark)
    if cls is None:
        from recrawl.sparkenv.spark import (  # lazy: recrawl.sparkenv.spark imports pyspark helpers
            SETUP_HINT,
            EnvironmentProblem,
        )

        raise EnvironmentProblem(
            f"the GraphX engine's jar (jvm/target/recrawl-graphx.jar) is not on this session's "
            f"class path: {SETUP_HINT}, then start a new session")
    return cls


def pagerank(spark, vertices, edges, *, damping: float, max_iterations: int,
             tolerance: float) -> tuple[object, int, float, tuple[float, ...]]:
    """PageRank of `vertices` (id: long, distinct) over `edges` (src, dst: long, weight: double;
    self-loops dropped, one row per pair). Returns (ranks DataFrame[id, pagerank], iterations,
    last L1 change, seconds per iteration)."""
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import DataFrame  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    cls = _require(spark)
    n = vertices.count()
    outdeg = edges.groupBy("src").agg(F.sum("weight").alias("deg"))
    flagged = vertices.join(outdeg, vertices.id == outdeg.src, "left").select(
        "id", F.col("src").isNull().alias("dangling")
    ).persist(StorageLevel.MEMORY_AND_DISK)
    dangling = flagged.where("dangling").count()
    ids = flagged.select("id")
    # GraphX would invent a vertex for an edge end that is not listed: keep only edges between
    # listed vertices (their share still counts the source's whole out-weight, as elsewhere).
    # The joins by source come last, so the edges reach GraphX partitioned by source (its
    # EdgePartition1D): each iteration ships a vertex's rank to the one edge partition holding
    # its out-links, where partitioned by target it went to up to every partition.
    shares = (
        edges.join(ids.withColumnRenamed("id", "dst"), "dst", "left_semi")
        .join(outdeg, "src")
        .join(ids.withColumnRenamed("id", "src"), "src", "left_semi")
        .select("src", "dst", (F.col("weight") / F.col("deg")).alias("share"))
    )
    res = cls.pagerank(flagged._jdf, shares._jdf, n, dangling, float(damping),
                       int(max_iterations), float(tolerance))
    ranks = DataFrame(res.ranks(), spark)
    return ranks, int(res.iterations()), float(res.delta()), tuple(float(s) for s in res.seconds())


def components(spark, vertices, edges, *, strong: bool):
    """Weakly or strongly connected components of `vertices` (id: any orderable type, host names
    included) over `edges` (src, dst): DataFrame[id, component], the component named by its
    smallest id (recrawl.graph.pagerank's rule)."""
    from pyspark.sql import DataFrame  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark
    from pyspark.sql.types import LongType  # lazy: pyspark

    cls = _require(spark)
    ids = vertices.select("id").distinct()
    if isinstance(vertices.schema["id"].dataType, LongType):
        vids = ids.withColumn("vid", F.col("id"))
    else:  # GraphX vertex ids are longs: number the names, name the components back below
        vids = ids.withColumn("vid", F.monotonically_increasing_id())
    vids = vids.localCheckpoint(eager=True)
    gedges = (
        edges.select("src", "dst").where("src != dst")
        .join(vids.select(F.col("id").alias("src"), F.col("vid").alias("s")), "src")
        .join(vids.select(F.col("id").alias("dst"), F.col("vid").alias("d")), "dst")
        .select(F.col("s").alias("src"), F.col("d").alias("dst")).distinct()
    )
    labels = DataFrame(cls.components(vids.select(F.col("vid").alias("id"))._jdf, gedges._jdf,
                                      bool(strong)), spark)
    named = labels.join(vids.withColumnRenamed("id", "name").withColumnRenamed("vid", "id"), "id")
    smallest = named.groupBy("component").agg(F.min("name").alias("root"))
    return named.join(smallest, "component").select(F.col("name").alias("id"),
                                                    F.col("root").alias("component"))
