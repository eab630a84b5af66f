"""pagerank: PageRank over the current link graph into `scores`, crawldb priorities and host ranks.

The graph is the latest outlinks of each page (`links` keeps only those), with self-links and
duplicate edges removed and duplicates collapsed onto their survivor. Vertices get integer ids
for the iteration (recrawl.graph.pagerank). Results: `scores` (replaced), `crawldb.score` for every
ranked URL, `crawldb.inlink_score` (Σ rank/out-degree over known in-links — the estimate
generate uses for URLs not ranked yet), and `hosts.host_rank` (PageRank of the host graph,
edges weighted by link count).
Runs on its own cadence; a round never waits for it.

When the link table fits the driver (`pagerank.in_driver_max_edges` under engine "auto", or
engine "driver") the whole step runs there on Arrow columns (recrawl.graph.stepgraph, the
same results: tests/spark_jobs/test_pagerank.py compares every table); above it the graph
work is Spark's and the solvers GraphX's.
"""

from __future__ import annotations

import datetime as dt
import logging

from recrawl.config import Config
from recrawl.content.urlnorm import host_key_or_none
from recrawl.graph import stepgraph
from recrawl.graph.pagerank import pagerank, strongly_connected_components, weakly_connected_components
from recrawl.sparkenv.joblabels import stage
from recrawl.store.arrowtables import arrow_batches, arrow_columns, overwrite_arrow, row_count
from recrawl.store.crawldb import set_scores
from recrawl.store.hostdb import set_ranks
from recrawl.store.tables import local_rows_supported, overwrite, read

log = logging.getLogger(__name__)


def run(spark, cfg: Config, logical: dt.datetime) -> dict[str, int | str]:
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import Window  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    p = cfg.section("pagerank")
    # Collapse duplicates onto their survivor (latest verdict per URL).
    latest = Window.partitionBy("url").orderBy(F.col("round_id").desc())
    dup = (
        read(spark, cfg, "duplicates").withColumn("n", F.row_number().over(latest))
        .where("n = 1").select("url", "canonical_url")
    )

    if _whole_step_in_driver(spark, cfg, p):
        return _run_in_driver(spark, cfg, p, dup)
    # On Spark's path whatever the driver solves reaches it through Spark's collect
    p = {**p, "in_driver_max_edges": min(int(p["in_driver_max_edges"]), COLLECT_MAX_EDGES)}
    links = read(spark, cfg, "links").select("src_url", "dst_url")
    ids, edges, collisions = _url_graph_by_hash(links, dup)
    if collisions:
        ids, edges, collisions = _url_graph_by_name(links, dup, collisions)
    stage(spark, "PageRank of the URL graph")
    res = pagerank(
        spark, ids.select("id"), edges, damping=float(p["damping"]),
        max_iterations=int(p["max_iterations"]), tolerance=float(p["tolerance"]),
        in_driver_max_edges=int(p["in_driver_max_edges"]), engine=str(p["engine"]),
    )
    # Estimated priority for URLs not ranked as fetched pages: Σ rank / out-degree of in-links,
    # on the integer edges (every in-link's source is a ranked vertex).
    outdeg = edges.groupBy("src").agg(F.count("*").alias("deg"))
    inlink = (
        edges.join(outdeg, "src")
        .join(res.ranks.withColumnRenamed("id", "src"), "src")
        .groupBy(F.col("dst").alias("id"))
        .agg(F.sum(F.col("pagerank") / F.col("deg")).alias("inlink_score"))
    )
    ranked = (res.ranks.join(inlink, "id", "left").join(ids, "id")
              .select("url", "pagerank", "inlink_score").persist(StorageLevel.MEMORY_AND_DISK))
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    overwrite(ranked.select("url", "pagerank", F.lit(now).alias("computed_at")), cfg, "scores")
    set_scores(spark, cfg, ranked)
    host_edges = host_graph(ids, edges, read(spark, cfg, "crawldb").select("url", "host"))
    host_rank = host_ranks(spark, host_edges, p)
    stage(spark, "host graph components")
    structure, components_engine = host_components(spark, host_edges, p, with_engine=True)
    host_rows = host_rank.join(structure, "host", "full").cache()
    set_ranks(spark, cfg, host_rows)
    big_scc = host_rows.agg(F.max("scc_hosts")).first()[0] or 0
    unresolved = host_rows.where("scc_root IS NULL").count()
    host_rows.unpersist()
    n = ranked.count()
    n_edges = edges.count()
    for df in (ranked, ids, edges, host_edges):
        df.unpersist()
    per_it = sorted(res.seconds)
    return {"vertices": n, "edges": n_edges, "iterations": res.iterations,
            # the URL graph's median iteration: what one more iteration costs (docs/scale.md)
            "iteration_ms_median": int(1000 * per_it[len(per_it) // 2]) if per_it else 0,
            "largest_host_scc": int(big_scc), "hosts_scc_unresolved": unresolved,
            # URLs whose 64-bit ids collided (the graph was then numbered by name instead)
            "id_collisions": collisions,
            # which engine solved the URL graph and the host components (pagerank.engine), as
            # flags: counts are numbers (the step's metrics and the rounds table hold integers)
            f"engine_{res.engine}": 1, f"host_components_engine_{components_engine}": 1}


def _whole_step_in_driver(spark, cfg: Config, p) -> bool:
    """The whole step in the driver (recrawl.graph.stepgraph) when the URL graph's solver would
    run there anyway: `engine` "driver", or "auto" with at most `in_driver_max_edges` links (the
    distinct canonical edges are fewer). Then the edge set, the in-link scores and the host
    graph are numpy passes instead of Spark joins over the whole link table."""
    engine = str(p["engine"])
    if engine == "driver":
        return True
    limit = int(p["in_driver_max_edges"])
    if not local_rows_supported(cfg):  # the links come over through Spark's collect
        limit = min(limit, COLLECT_MAX_EDGES)
    return engine == "auto" and limit > 0 and row_count(spark, cfg, "links") <= limit


# The most links (or integer edges) the step collects to the driver through Spark (`toArrow`),
# whatever `in_driver_max_edges` says: a collect is bounded by spark.driver.maxResultSize
# (1 GB by default), ~0.6 GB of URL text at 5M links. On a local crawl home the driver reads
# the links' files itself, a batch at a time (recrawl.store.arrowtables), and takes more.
COLLECT_MAX_EDGES = 5_000_000


def _canon_pairs(links, dup, key):
    """`links` as (src, dst) `key`s, each end collapsed onto its survivor by `dup` (url,
    canonical_url), self-links dropped, one row per pair."""
    from pyspark.sql import functions as F  # lazy: pyspark

    d = dup.select(key(F.col("url")).alias("u"), key(F.col("canonical_url")).alias("c"))
    return (
        links.select(key(F.col("src_url")).alias("s"), key(F.col("dst_url")).alias("d"))
        .join(d.withColumnRenamed("u", "s").withColumnRenamed("c", "sc"), "s", "left")
        .join(d.withColumnRenamed("u", "d").withColumnRenamed("c", "dc"), "d", "left")
        .select(F.coalesce("sc", "s").alias("src"), F.coalesce("dc", "d").alias("dst"))
        .where("src != dst").distinct()
    )


def _url_id(col):
    """A URL's vertex id (a Column): its 64-bit xxhash64, Spark's own hash."""
    from pyspark.sql import functions as F  # lazy: pyspark

    return F.xxhash64(col)


def _url_graph_by_hash(links, dup):
    """(ids: url, id; edges: src, dst; 0) with a URL's id its 64-bit xxhash64, or (None, None,
    how many ids collide) when two of the graph's URLs share one (then `_url_graph_by_name`
    numbers them).

    Hashing numbers every URL where it is read, so the edge set is built, deduplicated and
    joined on integer pairs: the URL text is shuffled once, to name the vertices, instead of in
    every join of the edge set (at 10M URLs the string joins were most of the step,
    docs/scale.md). Ids are stable from run to run. A collision among n URLs has a chance of
    about n^2 / 2^65 (3e-6 at 10M, ~3 % at 1B); it is detected with a second, independent hash
    and never corrupts a rank."""
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    edges = _canon_pairs(links, dup, _url_id).persist(StorageLevel.MEMORY_AND_DISK)
    names = (
        links.select(F.col("src_url").alias("url"))
        .union(links.select("dst_url")).union(dup.select("canonical_url"))
        .select(_url_id(F.col("url")).alias("id"), "url",
                F.xxhash64("url", F.lit("check")).alias("check"))
        .groupBy("id")
        .agg(F.min("url").alias("url"), (F.min("check") != F.max("check")).alias("clash"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    clashes = names.where("clash").count()
    if clashes:
        log.warning("pagerank: %d URL ids collide under xxhash64; numbering by name", clashes)
        edges.unpersist()
        names.unpersist()
        return None, None, clashes
    vid = edges.select(F.col("src").alias("id")).union(edges.select("dst")).distinct()
    ids = vid.join(names.select("id", "url"), "id").persist(StorageLevel.MEMORY_AND_DISK)
    ids.count()
    names.unpersist()
    return ids, edges, 0


def _url_graph_by_name(links, dup, collisions: int = 0):
    """(ids, edges, collisions) as `_url_graph_by_hash`, the URLs numbered after the
    deduplication of their text pairs (`monotonically_increasing_id`): the path when ids
    collide."""
    from pyspark import StorageLevel  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    edges_url = _canon_pairs(links, dup, lambda c: c).persist(StorageLevel.MEMORY_AND_DISK)
    urls = (edges_url.select(F.col("src").alias("url"))
            .union(edges_url.select("dst")).distinct())
    ids = urls.withColumn("id", F.monotonically_increasing_id()).persist(StorageLevel.MEMORY_AND_DISK)
    edges = (
        edges_url.join(ids.withColumnRenamed("url", "src").withColumnRenamed("id", "s"), "src")
        .join(ids.withColumnRenamed("url", "dst").withColumnRenamed("id", "d"), "dst")
        .select(F.col("s").alias("src"), F.col("d").alias("dst"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    edges.count()
    edges_url.unpersist()
    return ids, edges, collisions


def _run_in_driver(spark, cfg: Config, p, dup) -> dict[str, int | str]:
    """`run` with the graph work in the driver: links, duplicates and crawldb's hosts come over
    as Arrow (links and hosts read from their files: the links a batch at a time,
    `arrow_batches`, numbered as they come), the results go back as Arrow and are written by
    their owners as in `run`."""
    import numpy as np  # lazy: as pyarrow
    import pyarrow as pa  # lazy: pyspark's Arrow path
    import pyarrow.compute as pc  # lazy: as above

    stage(spark, "URL graph to the driver")
    links = arrow_batches(spark, cfg, "links", ["src_url", "dst_url"], rows=4_000_000)
    dups = dup.toArrow()
    g = stepgraph.canonical_graph(((b.column(0), b.column(1)) for b in links),
                                  dups.column("url"), dups.column("canonical_url"))
    del links, dups
    stage(spark, "PageRank of the URL graph (driver)")
    kw = {"damping": float(p["damping"]), "max_iterations": int(p["max_iterations"]),
          "tolerance": float(p["tolerance"])}
    res = stepgraph.url_ranks(g, **kw)
    inlink = stepgraph.inlink_scores(g, res.ranks)
    now_us = int(dt.datetime.now(dt.UTC).timestamp() * 1_000_000)
    urls = g.urls.cast(pa.string())
    overwrite_arrow(spark, cfg, "scores", pa.table({
        "url": urls, "pagerank": res.ranks,
        "computed_at": pa.array(np.full(len(urls), now_us, np.int64)).cast(
            pa.timestamp("us", tz="UTC"))}))
    set_scores(spark, cfg, pa.table({
        "url": urls, "pagerank": res.ranks,
        "inlink_score": pa.array(inlink, mask=np.isnan(inlink))}),
        in_driver_rows=int(p["in_driver_max_edges"]))
    stage(spark, "host graph, ranks and components (driver)")
    known = arrow_columns(spark, cfg, "crawldb", ["url", "host"])
    at = pc.index_in(g.urls, value_set=known.column("url").combine_chunks().cast(pa.string()))
    vhost = pc.take(known.column("host").combine_chunks(), at)
    del known
    hosts = stepgraph.host_rows(stepgraph.host_graph(g, vhost, host_key_or_none), **kw)
    set_ranks(spark, cfg, spark.createDataFrame(pa.table({
        "host": pa.array(hosts.hosts, pa.string()), "host_rank": hosts.host_rank,
        "component_root": pa.array(hosts.component_root, pa.string()),
        "component_hosts": hosts.component_hosts,
        "scc_root": pa.array(hosts.scc_root, pa.string()), "scc_hosts": hosts.scc_hosts})))
    per_it = sorted(res.seconds)
    return {"vertices": len(g.urls), "edges": len(g.src), "iterations": res.iterations,
            "iteration_ms_median": int(1000 * per_it[len(per_it) // 2]) if per_it else 0,
            "largest_host_scc": int(hosts.scc_hosts.max()) if len(hosts.hosts) else 0,
            "hosts_scc_unresolved": 0, "engine_driver": 1, "host_components_engine_driver": 1}


def host_graph(ids, edges, known=None):
    """An edge per (source host, target host) pair, weighted by its link count.

    `ids` (url, id) are the URL graph's vertices and `edges` (src, dst) its edges, one per
    distinct URL pair. A vertex's host comes from `known` (url, host: crawldb, which stores
    host_key(url) for every URL it holds); only URLs it lacks (targets beyond max_depth) pay
    a Python `host_key` call, once per URL, then the hosts are joined onto the edges by id.
    """
    from pyspark.sql import functions as F  # lazy: pyspark

    host_udf = F.udf(lambda u: host_key_or_none(u), "string")  # noqa: PLW0108 - no hint inference
    if known is None:
        vhost = ids.select("id", host_udf("url").alias("host"))
    else:
        with_host = ids.join(known, "url", "left")
        vhost = with_host.where("host IS NOT NULL").select("id", "host").unionByName(
            with_host.where("host IS NULL").select("id", host_udf("url").alias("host"))
        )
    vhost = vhost.where("host IS NOT NULL")
    return (
        edges.join(vhost.select(F.col("id").alias("src"), F.col("host").alias("s")), "src")
        .join(vhost.select(F.col("id").alias("dst"), F.col("host").alias("d")), "dst")
        .where("s != d")
        .groupBy("s", "d").agg(F.count("*").alias("weight"))
        # Cut the lineage here: host PageRank and the components iterate over this graph, and
        # with the URL graph's cached plans nested inside, each iteration's plan string ran the
        # driver out of heap.
        .localCheckpoint(eager=True)
    )


def host_components(spark, host_edges, p, *, with_engine: bool = False):
    """Weakly and strongly connected components of the host graph, for analysts.

    A cluster of sites that link to each other (one SCC) is one content source in practice
    (seed 004); a component is named by its smallest host name, with its size in hosts.
    Solved in the driver (scipy, well under a second for 200k hosts) up to
    `components_in_driver_max_edges` host edges, above by `engine`'s rule (GraphX under auto).
    With `with_engine`, returns (rows, the engine that ran).
    """
    from pyspark.sql import functions as F  # lazy: pyspark

    edges = host_edges.select(F.col("s").alias("src"), F.col("d").alias("dst"))
    vertices = edges.select(F.col("src").alias("id")).union(edges.select("dst")).distinct()
    engine = str(p["engine"])
    if engine == "auto" and edges.count() <= int(p["components_in_driver_max_edges"]):
        engine = "driver"
    if engine == "driver":  # both kinds from one transfer of the host edges
        rows = _host_components_in_driver(spark, host_edges)
        return (rows, "driver") if with_engine else rows
    in_driver = int(p["in_driver_max_edges"])
    weak = weakly_connected_components(spark, vertices, edges, in_driver_max_edges=in_driver,
                                       engine=engine)
    scc = strongly_connected_components(
        spark, vertices, edges, max_rounds=int(p["components_max_rounds"]),
        in_driver_max_edges=in_driver, engine=engine,
    ).labels
    wcc = weak.labels

    def sized(labels, root: str, size: str):
        counts = labels.where("component IS NOT NULL").groupBy("component").agg(F.count("*").alias(size))
        return (
            labels.join(counts, "component", "left")
            .select(F.col("id").alias("host"), F.col("component").alias(root), size)
        )

    rows = sized(wcc, "component_root", "component_hosts").join(
        sized(scc, "scc_root", "scc_hosts"), "host", "full"
    )
    return (rows, weak.engine) if with_engine else rows


def _host_components_in_driver(spark, host_edges):
    """`host_components` in the driver: the hosts numbered in name order in Spark, their integer
    edge pairs moved to the driver once (16 bytes an edge: the 10M crawl's host edges as
    names passed spark.driver.maxResultSize), and scipy labels both kinds of component on
    that one numbering (the generic driver engine moved the pairs twice, once per kind:
    ~110 s of the 10M step)."""
    import pyarrow as pa  # lazy: pyspark's Arrow path
    from pyspark.sql import Window  # lazy: pyspark
    from pyspark.sql import functions as F  # lazy: pyspark

    edges = host_edges.select("s", "d").where("s IS NOT NULL AND d IS NOT NULL AND s != d")
    vids = (
        edges.select(F.col("s").alias("host")).union(edges.select("d")).distinct()
        .withColumn("vid", F.row_number().over(Window.orderBy("host")) - 1)
        .localCheckpoint(eager=True)
    )
    names = vids.orderBy("vid").select("host").toArrow().column("host").to_pylist()
    pairs = (
        edges.join(vids.select(F.col("host").alias("s"), F.col("vid").alias("a")), "s")
        .join(vids.select(F.col("host").alias("d"), F.col("vid").alias("b")), "d")
        .select("a", "b").toArrow()
    )
    src, dst = pairs.column("a").to_numpy(), pairs.column("b").to_numpy()
    del pairs
    wroot, wsize = stepgraph.named_components(names, src, dst, strong=False)
    sroot, ssize = stepgraph.named_components(names, src, dst, strong=True)
    return spark.createDataFrame(pa.table({
        "host": pa.array(names, pa.string()),
        "component_root": pa.array(wroot, pa.string()), "component_hosts": wsize,
        "scc_root": pa.array(sroot, pa.string()), "scc_hosts": ssize}))


def host_ranks(spark, host_edges, p):
    """PageRank of the host graph, edges weighted by link count."""
    from pyspark.sql import functions as F  # lazy: pyspark

    hosts = host_edges.select(F.col("s").alias("host")).union(host_edges.select("d")).distinct()
    hids = hosts.withColumn("id", F.monotonically_increasing_id()).cache()
    hedges = (
        host_edges.join(hids.withColumnRenamed("host", "s").withColumnRenamed("id", "src"), "s")
        .join(hids.withColumnRenamed("host", "d").withColumnRenamed("id", "dst"), "d")
        .select("src", "dst", "weight")
    )
    res = pagerank(spark, hids.select("id"), hedges, damping=float(p["damping"]),
                   max_iterations=int(p["max_iterations"]), tolerance=float(p["tolerance"]),
                   in_driver_max_edges=int(p["in_driver_max_edges"]), engine=str(p["engine"]))
    return res.ranks.join(hids, "id").select("host", F.col("pagerank").alias("host_rank"))
