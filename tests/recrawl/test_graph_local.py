"""recrawl.graph.local (the in-driver PageRank and components) against networkx on random
graphs; tests/recrawl/test_graph.py runs it beside the DataFrame versions."""

import random

import networkx as nx
import numpy as np
import pytest

from recrawl.graph.local import components_arrays, pagerank_arrays, pagerank_numbered


def _random_graph(rng: random.Random, n: int, m: int) -> list[tuple[int, int]]:
    return [(rng.randrange(n), rng.randrange(n)) for _ in range(m)]


@pytest.mark.parametrize("seed", range(12))
def test_pagerank_matches_networkx(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    edges = _random_graph(rng, n, rng.randint(0, 3 * n))  # self-loops, parallel edges, dangling
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((a, b) for a, b in edges if a != b)
    want = nx.pagerank(g, alpha=0.85, tol=1e-14, max_iter=2000)
    got = pagerank_arrays(range(n), [a for a, _ in edges], [b for _, b in edges],
                          max_iterations=2000, tolerance=1e-13)
    assert got.ranks.sum() == pytest.approx(1.0, abs=1e-12)
    for i, v in enumerate(got.ids):
        assert got.ranks[i] == pytest.approx(want[int(v)], abs=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_numbered_graphs_skip_the_sorts_and_rank_alike(seed):
    """pagerank_numbered (distinct edges, no self-loops, vertices 0..n-1: the in-driver step's
    graphs) against pagerank_arrays and networkx, weighted and not, with dangling vertices."""
    rng = random.Random(seed)
    n = rng.randint(2, 80)
    pairs = sorted({(a, b) for a, b in _random_graph(rng, n, rng.randint(1, 4 * n)) if a != b})
    src = np.array([a for a, _ in pairs], dtype=np.int64)
    dst = np.array([b for _, b in pairs], dtype=np.int64)
    for weight in (None, np.array([rng.randint(1, 5) for _ in pairs], dtype=np.float64)):
        got = pagerank_numbered(n, src, dst, weight, max_iterations=2000, tolerance=1e-13)
        ref = pagerank_arrays(range(n), src, dst, weight, max_iterations=2000, tolerance=1e-13)
        assert got.iterations == ref.iterations
        assert np.abs(got.ranks - ref.ranks).max() < 1e-15
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        g.add_weighted_edges_from((a, b, 1.0 if weight is None else w)
                                  for (a, b), w in zip(pairs, weight if weight is not None else src,
                                                       strict=True))
        want = nx.pagerank(g, alpha=0.85, weight="weight", tol=1e-15, max_iter=2000)
        assert np.abs(got.ranks - np.array([want[i] for i in range(n)])).max() < 1e-10
    assert pagerank_numbered(0, src[:0], dst[:0]).iterations == 0


def test_weighted_parallel_edges_keep_their_largest_weight():
    edges = [(0, 1, 3.0), (0, 1, 1.0), (0, 2, 1.0), (1, 2, 1.0), (2, 0, 2.0), (3, 2, 5.0),
             (3, 0, 0.0), (2, 2, 4.0)]  # a zero weight and a self-loop are dropped
    got = pagerank_arrays(range(4), *zip(*edges, strict=True), max_iterations=500,
                          tolerance=1e-14)
    g = nx.DiGraph()
    g.add_weighted_edges_from([(0, 1, 3.0), (0, 2, 1.0), (1, 2, 1.0), (2, 0, 2.0), (3, 2, 5.0)])
    want = nx.pagerank(g, alpha=0.85, weight="weight", tol=1e-15, max_iter=2000)
    for i in range(4):
        assert got.ranks[i] == pytest.approx(want[i], abs=1e-10)


def test_stop_rules_and_an_empty_graph():
    capped = pagerank_arrays(range(3), [0, 1, 2, 0], [1, 2, 0, 2], max_iterations=2, tolerance=0)
    assert capped.iterations == 2 and len(capped.seconds) == 2
    converged = pagerank_arrays(range(3), [0, 1, 2], [1, 2, 0], max_iterations=50, tolerance=1e-4)
    assert converged.iterations < 50 and converged.delta < 1e-4
    empty = pagerank_arrays([], [], [])
    assert empty.iterations == 0 and len(empty.ranks) == 0


def test_edges_to_unlisted_vertices_count_in_out_weight_but_carry_no_rank():
    # 0 -> 1 and 0 -> 9, 9 not a vertex: 0's rank is split in two, half of it lost as in the
    # DataFrame version's inner joins (pagerank's callers list every endpoint as a vertex)
    got = pagerank_arrays([0, 1], [0, 0], [1, 9], max_iterations=1, tolerance=0)
    # one iteration from 1/2 each; 1 is dangling (its 1/2 spread over both)
    base = 0.15 / 2 + 0.85 * 0.5 / 2
    assert got.ranks.tolist() == pytest.approx([base, base + 0.85 * 0.5 / 2])


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("strong", [False, True])
def test_components_match_networkx_with_the_smallest_id_as_label(seed, strong):
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    names = [f"h{rng.randrange(10**6):06d}.test" for _ in range(n)]  # string ids, as hosts
    names = sorted(set(names), key=lambda _: rng.random())
    edges = [(names[a], names[b]) for a, b in _random_graph(rng, len(names), rng.randint(0, 2 * n))]
    g = nx.DiGraph()
    g.add_nodes_from(names)
    g.add_edges_from((a, b) for a, b in edges if a != b)
    parts = nx.strongly_connected_components(g) if strong else nx.weakly_connected_components(g)
    want = {v: min(part) for part in parts for v in part}
    got = components_arrays(names, [a for a, _ in edges], [b for _, b in edges], strong=strong)
    assert got == want
