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
