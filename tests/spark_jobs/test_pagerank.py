"""pagerank's host graph: URL edges collapse to weighted host edges (self-links dropped), and
the hosts get components and ranks. (The URL graph's PageRank: tests/recrawl/test_graph.py;
scores feeding generate: test_round_e2e.py.)"""

from __future__ import annotations

import pytest

from spark_jobs.pagerank import host_components, host_graph, host_ranks

pytestmark = pytest.mark.spark

P = {"damping": 0.85, "max_iterations": 50, "tolerance": 1e-9, "components_max_rounds": 20,
     "in_driver_max_edges": 0, "engine": "auto", "components_in_driver_max_edges": 0}
URLS = ["http://a.test/1", "http://a.test/2", "http://b.test/1", "http://c.test/1",
        "http://d.test/1", "http://e.test/1", "not a url"]
# a.test <-> b.test (an SCC), c.test -> a.test, d.test -> e.test; within a.test; to a bad URL
EDGES = [(0, 1), (0, 2), (1, 2), (2, 0), (3, 0), (3, 1), (4, 5), (0, 6)]


# The host graph solved by DataFrame iterations, on GraphX (auto above the in-driver
# thresholds) and in the driver (recrawl.graph.local)
@pytest.mark.parametrize(("engine", "in_driver", "ran"),
                         [("dataframe", 0, "dataframe"), ("auto", 0, "graphx"), ("auto", 1000, "driver")])
def test_url_edges_become_weighted_host_edges_with_components_and_ranks(spark, engine, in_driver, ran):
    p = {**P, "engine": engine, "in_driver_max_edges": in_driver,
         "components_in_driver_max_edges": in_driver}
    ids = spark.createDataFrame(list(zip(URLS, range(len(URLS)), strict=True)), "url string, id long")
    edges = spark.createDataFrame(EDGES, "src long, dst long")
    # crawldb knows a.test's hosts; the rest come from host_key, the bad URL from nowhere
    known = spark.createDataFrame([("http://a.test/1", "http://a.test:80")], "url string, host string")
    he = host_graph(ids, edges, known)
    got = {(r["s"], r["d"]): r["weight"] for r in he.collect()}
    a, b, c, d, e = (f"http://{h}.test:80" for h in "abcde")
    assert got == {(a, b): 2, (b, a): 1, (c, a): 2, (d, e): 1}

    rows, engine_used = host_components(spark, he, p, with_engine=True)
    assert engine_used == ran
    comps = {r["host"]: r.asDict() for r in rows.collect()}
    assert comps[a]["component_root"] == comps[c]["component_root"] == a
    assert comps[a]["component_hosts"] == 3 and comps[d]["component_hosts"] == 2
    assert comps[a]["scc_root"] == comps[b]["scc_root"] and comps[a]["scc_hosts"] == 2
    assert comps[c]["scc_hosts"] == 1

    ranks = {r["host"]: r["host_rank"] for r in host_ranks(spark, he, p).collect()}
    assert set(ranks) == {a, b, c, d, e}
    assert ranks[a] > ranks[c] and ranks[e] > ranks[d]  # linked-to hosts rank higher


# The whole step in the driver (recrawl.graph.stepgraph) against its Spark path on one crawl:
# duplicates collapsed onto their latest survivor, self-links and repeated links, a link to a
# URL crawldb lacks (its host from host_key) and one to a URL without a host.
CRAWL = {  # url -> host, as crawldb stores it
    "http://a.test/1": "http://a.test:80", "http://a.test/2": "http://a.test:80",
    "http://a.test/copy": "http://a.test:80", "http://b.test/1": "http://b.test:80",
    "http://b.test/2": "http://b.test:80", "http://c.test/1": "http://c.test:80",
    "http://d.test/1": "http://d.test:80", "http://e.test/1": "http://e.test:80",
}
LINKS = [("http://a.test/1", "http://a.test/2"), ("http://a.test/1", "http://b.test/1"),
         ("http://a.test/1", "http://b.test/1"), ("http://a.test/2", "http://a.test/2"),
         ("http://a.test/copy", "http://c.test/1"), ("http://b.test/1", "http://a.test/copy"),
         ("http://b.test/1", "http://b.test/2"), ("http://b.test/2", "http://a.test/1"),
         ("http://c.test/1", "http://a.test/1"), ("http://c.test/1", "http://f.test/new"),
         ("http://d.test/1", "http://e.test/1"), ("http://e.test/1", "not a url"),
         ("http://b.test/2", "http://b.test/1")]
DUPS = [("r1", "http://a.test/copy", "http://b.test/2"),  # superseded by r2's verdict
        ("r2", "http://a.test/copy", "http://a.test/1")]


def _tables(spark, cfg) -> dict:
    def rows(name, key, *cols):
        got = spark.read.format("delta").load(cfg.table_path(name)).collect()
        return {r[key]: tuple(r[c] for c in cols) for r in got}

    return {"scores": rows("scores", "url", "pagerank"),
            "crawldb": rows("crawldb", "url", "score", "inlink_score"),
            "hosts": rows("hosts", "host", "host_rank", "component_root", "component_hosts",
                          "scc_root", "scc_hosts")}


def _close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(a - b) < 1e-12
    return a == b


@pytest.mark.parametrize("ids", ["hashed", "collide"])
def test_whole_step_in_the_driver_writes_what_the_spark_path_writes(spark, cfg, monkeypatch, ids):
    """The Spark path numbers URLs by their 64-bit hash; under `collide` the id is the URL's
    length, so URLs share ids, the check catches it and the graph is numbered by name: the
    tables are the driver path's either way."""
    import datetime as dt

    from pyspark.sql import functions as F

    from recrawl.store.tables import conform, init_tables
    from spark_jobs import pagerank

    init_tables(spark, cfg)

    def append(name, df):
        conform(df, name).write.format("delta").mode("append").save(cfg.table_path(name))

    append("crawldb", spark.createDataFrame(
        [{"url": u, "host": h, "status": "fetched", "depth": 0} for u, h in CRAWL.items()]))
    append("links", spark.createDataFrame(
        [{"src_url": s, "dst_url": d, "round_id": "r1", "kind": "a"} for s, d in LINKS]))
    append("duplicates", spark.createDataFrame(
        [{"round_id": r, "url": u, "canonical_url": c, "kind": "exact"} for r, u, c in DUPS]))
    logical = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    if ids == "collide":
        monkeypatch.setattr(pagerank, "_url_id", lambda c: F.length(c).cast("long"))
    tables = {}
    for engine in ("dataframe", "driver"):
        c = cfg.with_overrides({"pagerank.engine": engine, "pagerank.tolerance": 1e-13,
                                "pagerank.max_iterations": 200,
                                "pagerank.components_in_driver_max_edges": 0})
        counts = pagerank.run(spark, c, logical)
        assert counts.get(f"engine_{engine}") == 1
        tables[engine] = (counts, _tables(spark, c))
    (spark_counts, want), (driver_counts, got) = tables["dataframe"], tables["driver"]
    for key in ("vertices", "edges", "iterations", "largest_host_scc"):
        assert driver_counts[key] == spark_counts[key], key
    assert (spark_counts["id_collisions"] > 0) == (ids == "collide")
    # the copy is no vertex (its links moved to a.test/1); the self-link and the repeat count once
    assert "http://a.test/copy" not in got["scores"] and driver_counts["edges"] == 11
    for name, rows in want.items():
        assert set(got[name]) == set(rows), name
        for key, values in rows.items():
            assert all(_close(a, b) for a, b in zip(values, got[name][key], strict=True)), \
                (name, key, values, got[name][key])
    # a URL nothing links to keeps no in-link score; f.test's new URL has no crawldb row
    assert got["crawldb"]["http://d.test/1"][1] is None
    assert "http://f.test:80" in got["hosts"] and got["hosts"]["http://a.test:80"][4] == 3


def test_the_whole_step_takes_the_driver_up_to_its_limit_and_collects_less(monkeypatch):
    """`in_driver_max_edges` links read from a local home's files; on object storage the links
    come through Spark's collect, and at most COLLECT_MAX_EDGES are taken."""
    from spark_jobs import pagerank

    monkeypatch.setattr(pagerank, "row_count", lambda spark, cfg, name: 6_000_000)
    p = {"engine": "auto", "in_driver_max_edges": 40_000_000}
    for local, want in ((True, True), (False, False)):
        monkeypatch.setattr(pagerank, "local_rows_supported", lambda c, local=local: local)
        assert pagerank._whole_step_in_driver(None, None, p) is want, local
    assert pagerank.COLLECT_MAX_EDGES < 6_000_000
    assert not pagerank._whole_step_in_driver(None, None, {**p, "in_driver_max_edges": 0})
    assert pagerank._whole_step_in_driver(None, None, {**p, "engine": "driver"})
    assert not pagerank._whole_step_in_driver(None, None, {**p, "engine": "graphx"})
