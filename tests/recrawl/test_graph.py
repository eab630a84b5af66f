"""PageRank on small graphs against networkx (same damping; ranks sum to 1)."""

import networkx as nx
import pytest

from recrawl.graph import pagerank

pytestmark = pytest.mark.spark


def _ranks(spark, n, edge_list, **kw):
    v = spark.createDataFrame([(i,) for i in range(n)], "id long")
    e = spark.createDataFrame(edge_list or [(0, 0)], "src long, dst long")
    if not edge_list:
        e = e.limit(0)
    res = pagerank(spark, v, e, **kw)
    return {r.id: r.pagerank for r in res.ranks.collect()}, res


@pytest.mark.parametrize(
    "n,edges",
    [
        (5, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 2)]),  # cycles
        (5, [(0, 1), (0, 2), (1, 2), (2, 3)]),  # 3 and 4 dangling, 4 isolated
        (4, [(0, 1), (1, 2), (2, 0), (3, 0), (3, 3), (1, 3)]),  # a self-loop is dropped
    ],
)
def test_matches_networkx(spark, n, edges):
    got, res = _ranks(spark, n, edges, max_iterations=30, tolerance=1e-6)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a, b in edges if a != b)
    want = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=500)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-9)
    for node in range(n):
        assert got[node] == pytest.approx(want[node], abs=1e-3), (node, got, want)
    assert res.iterations <= 30


def test_stops_at_max_iterations(spark):
    got, res = _ranks(spark, 3, [(0, 1), (1, 2), (2, 0), (0, 2)], max_iterations=2, tolerance=0)
    assert res.iterations == 2


def test_weighted_edges_match_networkx(spark):
    edges = [(0, 1, 3.0), (0, 2, 1.0), (1, 2, 1.0), (2, 0, 2.0), (3, 2, 5.0)]
    v = spark.createDataFrame([(i,) for i in range(4)], "id long")
    e = spark.createDataFrame(edges, "src long, dst long, weight double")
    got = {r.id: r.pagerank for r in pagerank(spark, v, e, max_iterations=30, tolerance=1e-6).ranks.collect()}
    g = nx.DiGraph()
    g.add_weighted_edges_from(edges)
    want = nx.pagerank(g, alpha=0.85, weight="weight", tol=1e-12, max_iter=500)
    for node in range(4):
        assert got[node] == pytest.approx(want[node], abs=1e-3)
