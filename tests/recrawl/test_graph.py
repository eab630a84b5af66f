"""PageRank on small graphs against networkx (same damping; ranks sum to 1), for every engine:
DataFrame joins, GraphX (recrawl.graph.graphx, the real GraphX through the JVM) and the driver."""

import networkx as nx
import pytest

from recrawl.graph.pagerank import pagerank, strongly_connected_components, weakly_connected_components

pytestmark = pytest.mark.spark

ENGINES = ["dataframe", "graphx", "driver"]


def _ranks(spark, n, edge_list, **kw):
    v = spark.createDataFrame([(i,) for i in range(n)], "id long")
    e = spark.createDataFrame(edge_list or [(0, 0)], "src long, dst long")
    if not edge_list:
        e = e.limit(0)
    res = pagerank(spark, v, e, **kw)
    return {r.id: r.pagerank for r in res.ranks.collect()}, res


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "n,edges",
    [
        (5, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 2)]),  # cycles
        (5, [(0, 1), (0, 2), (1, 2), (2, 3)]),  # 3 and 4 dangling, 4 isolated
        (4, [(0, 1), (1, 2), (2, 0), (3, 0), (3, 3), (1, 3)]),  # a self-loop is dropped
    ],
)
def test_matches_networkx(spark, n, edges, engine):
    got, res = _ranks(spark, n, edges, max_iterations=30, tolerance=1e-6, engine=engine)
    assert res.engine == engine
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a, b in edges if a != b)
    want = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=500)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-9)
    for node in range(n):
        assert got[node] == pytest.approx(want[node], abs=1e-3), (node, got, want)
    assert res.iterations <= 30


@pytest.mark.parametrize("engine", ["dataframe", "graphx"])
def test_stops_at_max_iterations(spark, engine):
    got, res = _ranks(spark, 3, [(0, 1), (1, 2), (2, 0), (0, 2)], max_iterations=2, tolerance=0,
                      engine=engine)
    assert res.iterations == 2
    assert len(res.seconds) == 2 and all(t > 0 for t in res.seconds)  # timed per iteration


@pytest.mark.parametrize("engine", ENGINES)
def test_weighted_edges_match_networkx(spark, engine):
    edges = [(0, 1, 3.0), (0, 2, 1.0), (1, 2, 1.0), (2, 0, 2.0), (3, 2, 5.0)]
    v = spark.createDataFrame([(i,) for i in range(4)], "id long")
    e = spark.createDataFrame(edges, "src long, dst long, weight double")
    res = pagerank(spark, v, e, max_iterations=30, tolerance=1e-6, engine=engine)
    got = {r.id: r.pagerank for r in res.ranks.collect()}
    g = nx.DiGraph()
    g.add_weighted_edges_from(edges)
    want = nx.pagerank(g, alpha=0.85, weight="weight", tol=1e-12, max_iter=500)
    for node in range(4):
        assert got[node] == pytest.approx(want[node], abs=1e-3)


def _components(spark, fn, n, edge_list, **kw):
    from pyspark.sql import functions as F

    v = spark.createDataFrame([(i,) for i in range(n)], "id long")
    e = spark.createDataFrame(edge_list or [(0, 0)], "src long, dst long")
    if not edge_list:
        e = e.limit(0)
    res = fn(spark, v, e, **kw)
    labels = {r.id: r.component for r in res.labels.orderBy(F.col("id")).collect()}
    return labels, res


def _partition(labels):
    groups = {}
    for node, comp in labels.items():
        groups.setdefault(comp, set()).add(node)
    return sorted(sorted(g) for g in groups.values())


# Two cycles joined one way (two SCCs, one WCC), a chain (singleton SCCs), a self-loop, an
# isolated vertex, and a cycle reachable from a smaller id that is not in it (colour != root).
_PARTS = [
    (10, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5), (5, 3), (6, 7), (7, 8), (8, 8)]),
    (7, [(0, 3), (3, 4), (4, 5), (5, 3), (5, 6), (6, 1), (1, 2), (2, 6)]),
    (6, [(5, 4), (4, 3), (3, 2), (2, 1), (1, 0), (0, 5)]),
]


def _disjoint_union(parts):
    """One graph made of the parts side by side (one Spark run checks all of them)."""
    n, edges = 0, []
    for size, part in parts:
        edges += [(a + n, b + n) for a, b in part]
        n += size
    return n, edges


def _random_graph(n: int = 40, m: int = 70, seed: int = 7) -> tuple[int, list[tuple[int, int]]]:
    import random

    rng = random.Random(seed)
    return n, sorted({(rng.randrange(n), rng.randrange(n)) for _ in range(m)})


COMPONENT_GRAPHS = [_disjoint_union(_PARTS)]


@pytest.mark.parametrize("engine", ["dataframe", "graphx"])
@pytest.mark.parametrize("n,edges", COMPONENT_GRAPHS + [_random_graph()], ids=["parts", "random"])
def test_strongly_connected_components_match_networkx(spark, n, edges, engine):

    labels, res = _components(spark, strongly_connected_components, n, edges, engine=engine)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    want = sorted(sorted(c) for c in nx.strongly_connected_components(g))
    assert res.unresolved == 0
    assert _partition(labels) == want
    for node, comp in labels.items():  # a component is named by its smallest member
        assert comp == min(next(c for c in want if node in c))


def test_strongly_connected_components_round_cap_leaves_null(spark):

    # Two cycles in a chain need two colouring rounds after trimming; with one, some stay NULL.
    labels, res = _components(
        spark, strongly_connected_components, 6,
        [(0, 1), (1, 0), (1, 2), (2, 3), (3, 4), (4, 2), (5, 5)], max_rounds=1, engine="dataframe",
    )
    assert res.unresolved > 0
    assert sum(1 for c in labels.values() if c is None) == res.unresolved
    assert labels[0] == labels[1] == 0  # what was resolved is right


@pytest.mark.parametrize("engine", ["dataframe", "graphx"])
@pytest.mark.parametrize("n,edges", COMPONENT_GRAPHS)
def test_weakly_connected_components_match_networkx(spark, n, edges, engine):

    labels, res = _components(spark, weakly_connected_components, n, edges, engine=engine)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    assert res.unresolved == 0
    assert _partition(labels) == sorted(sorted(c) for c in nx.weakly_connected_components(g))


# The in-driver path (recrawl.graph.local, below `in_driver_max_edges`) against the DataFrame
# iterations on the same graphs: same iteration count, the same ranks and labels.
# Parallel edges (the largest weight counts), a self-loop, a dangling and an isolated vertex.
_WEIGHTED = [(0, 1, 3.0), (0, 1, 1.0), (0, 2, 1.0), (1, 2, 1.0), (2, 0, 2.0), (3, 2, 5.0),
             (3, 3, 1.0), (2, 4, 1.0)]


def test_in_driver_pagerank_equals_the_dataframe_iterations(spark):
    v = spark.createDataFrame([(i,) for i in range(6)], "id long")
    e = spark.createDataFrame(_WEIGHTED, "src long, dst long, weight double")
    frames = pagerank(spark, v, e, max_iterations=40, tolerance=1e-3, engine="dataframe")
    local = pagerank(spark, v, e, max_iterations=40, tolerance=1e-3, in_driver_max_edges=100)
    graphx = pagerank(spark, v, e, max_iterations=40, tolerance=1e-3, in_driver_max_edges=5)
    assert (local.engine, graphx.engine) == ("driver", "graphx")  # auto, either side of the threshold
    want = {r.id: r.pagerank for r in frames.ranks.collect()}
    for other in (local, graphx):
        assert 1 < other.iterations == frames.iterations < 40
        assert other.delta == pytest.approx(frames.delta)
        got = {r.id: r.pagerank for r in other.ranks.collect()}
        assert got.keys() == want.keys()
        for node in want:
            assert got[node] == pytest.approx(want[node], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("fn", [weakly_connected_components, strongly_connected_components])
def test_in_driver_components_equal_the_dataframe_iterations(spark, fn):
    n, edges = COMPONENT_GRAPHS[0]
    frames, _ = _components(spark, fn, n, edges, engine="dataframe")
    local, res = _components(spark, fn, n, edges, in_driver_max_edges=len(edges))
    assert local == frames and res.unresolved == 0 and res.engine == "driver"


@pytest.mark.parametrize("fn", [weakly_connected_components, strongly_connected_components])
def test_graphx_components_of_host_names(spark, fn):
    """Host graph ids are names: GraphX numbers them and names each component by its smallest
    name again, as the driver does (names sort differently from the numbers: h9 > h10)."""
    n, edges = _random_graph(30, 45, seed=3)
    name = {i: f"h{(i * 7) % n}" for i in range(n)}
    v = spark.createDataFrame([(name[i],) for i in range(n)], "id string")
    e = spark.createDataFrame([(name[a], name[b]) for a, b in edges], "src string, dst string")
    got = fn(spark, v, e, engine="graphx")
    want = fn(spark, v, e, engine="driver")
    assert got.engine == "graphx"
    assert dict(got.labels.collect()) == dict(want.labels.collect())
