"""The graph algorithms of recrawl.graph.pagerank on arrays in one process (numpy, scipy).

A crawl's first weeks have graphs of thousands of edges, and its host graph stays small for
good. There recrawl.graph.pagerank's DataFrame iterations cost Spark jobs, not arithmetic: on a 262-URL
graph each PageRank iteration took 0.5-0.75 s (docs/airflow.md), and the host graph's
components iterate the same way. Below `pagerank.in_driver_max_edges` the job collects the
edges to the driver and runs these instead, as generate keeps a small round's top-k in memory
(`generate.top_n_in_memory`). The results are the DataFrame versions' to the last bit that
float addition order allows: the same power iteration, dangling rule, stop rule and iteration
count (tests/recrawl/test_graph.py runs both on the same graphs, and networkx beside them).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LocalRanks:
    ids: np.ndarray  # the distinct vertex ids, sorted
    ranks: np.ndarray  # PageRank of each, summing to 1
    iterations: int
    delta: float
    seconds: tuple[float, ...]


def pagerank_arrays(
    vertices: Sequence[int] | np.ndarray,
    src: Sequence[int] | np.ndarray,
    dst: Sequence[int] | np.ndarray,
    weight: Sequence[float] | np.ndarray | None = None,
    *,
    damping: float = 0.85,
    max_iterations: int = 20,
    tolerance: float = 1e-4,
) -> LocalRanks:
    """recrawl.graph.pagerank.pagerank on arrays: vertex ids, and edges as parallel src/dst(/weight).

    As there: self-loops and edges of weight <= 0 are dropped and parallel edges keep their
    largest weight; a vertex's out-weight counts all its edges, its rank flows only along
    edges between listed vertices; dangling vertices spread their rank over all vertices; the
    iteration stops after `max_iterations` or when the L1 change is below `tolerance`.
    """
    ids = np.unique(np.asarray(vertices, dtype=np.int64))
    n = len(ids)
    if n == 0:
        return LocalRanks(ids, np.zeros(0), 0, 0.0, ())
    s = np.asarray(src, dtype=np.int64)
    d = np.asarray(dst, dtype=np.int64)
    w = np.ones(len(s)) if weight is None else np.asarray(weight, dtype=np.float64)
    keep = (s != d) & (w > 0)
    s, d, w = s[keep], d[keep], w[keep]
    if len(s):  # parallel edges: the largest weight (lexsort: by src, dst, then weight)
        order = np.lexsort((w, d, s))
        s, d, w = s[order], d[order], w[order]
        last = np.ones(len(s), dtype=bool)
        last[:-1] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
        s, d, w = s[last], d[last], w[last]
    # out-weight over every edge, then only edges with both ends among the vertices carry rank
    out_ids, inverse = np.unique(s, return_inverse=True)
    share = w / np.bincount(inverse, weights=w)[inverse] if len(s) else w
    si, di = np.searchsorted(ids, s), np.searchsorted(ids, d)
    inside = (si < n) & (di < n)
    inside[inside] = (ids[si[inside]] == s[inside]) & (ids[di[inside]] == d[inside])
    si, di, share = si[inside], di[inside], share[inside]
    dangling = ~np.isin(ids, out_ids)
    return _iterate(ids, si, di, share, dangling, damping, max_iterations, tolerance)


def pagerank_numbered(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray | None = None,
                      *, damping: float = 0.85, max_iterations: int = 20,
                      tolerance: float = 1e-4) -> LocalRanks:
    """`pagerank_arrays` of vertices 0..n-1 over edges already distinct, without self-loops
    and between those vertices (recrawl.graph.stepgraph's graphs): the same iteration without
    the sorts that establish that (at 36M edges they took ~50 s, the iterations ~3 s)."""
    if n == 0:
        return LocalRanks(np.zeros(0, dtype=np.int64), np.zeros(0), 0, 0.0, ())
    w = np.ones(len(src)) if weight is None else np.asarray(weight, dtype=np.float64)
    out = np.bincount(src, weights=w, minlength=n)
    share = w / out[src] if len(src) else w
    return _iterate(np.arange(n, dtype=np.int64), src, dst, share, out == 0, damping,
                    max_iterations, tolerance)


def _iterate(ids: np.ndarray, si: np.ndarray, di: np.ndarray, share: np.ndarray,
             dangling: np.ndarray, damping: float, max_iterations: int,
             tolerance: float) -> LocalRanks:
    """The power iteration over vertex indices: rank flows along (si, di) by `share`, the
    dangling vertices' rank is spread over all, until the L1 change is below `tolerance`."""
    n = len(ids)
    ranks = np.full(n, 1.0 / n)
    dangling_sum = dangling.sum() / n
    base = (1.0 - damping) / n
    delta, it, seconds = float("inf"), 0, []
    while it < max_iterations:
        it += 1
        started = time.perf_counter()
        contrib = np.bincount(di, weights=ranks[si] * share, minlength=n)
        new = base + damping * dangling_sum / n + damping * contrib
        delta = float(np.abs(new - ranks).sum())
        dangling_sum = float(new[dangling].sum())
        ranks = new
        seconds.append(time.perf_counter() - started)
        if delta < tolerance:
            break
    return LocalRanks(ids, ranks, it, delta, tuple(seconds))


def component_roots(n: int, src: np.ndarray, dst: np.ndarray, *, strong: bool) -> np.ndarray:
    """Weakly or strongly connected components of vertices 0..n-1 over the edges src -> dst:
    for each vertex the smallest vertex of its component (scipy, vectorized)."""
    from scipy.sparse import coo_matrix  # lazy: scipy is only needed on this path
    from scipy.sparse.csgraph import connected_components  # lazy: scipy, as above

    if n == 0:
        return np.zeros(0, dtype=np.int64)
    s, d = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    keep = s != d
    graph = coo_matrix((np.ones(int(keep.sum())), (s[keep], d[keep])), shape=(n, n)).tocsr()
    _, labels = connected_components(graph, directed=True,
                                     connection="strong" if strong else "weak")
    first = np.full(labels.max() + 1, n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(n))
    return first[labels]


def components_arrays(vertices: Sequence, src: Sequence, dst: Sequence, *,
                      strong: bool) -> dict:
    """Weakly or strongly connected components, each vertex labelled with the smallest id of
    its component (recrawl.graph.pagerank's rule); ids may be any orderable values (host names)."""
    ids = sorted(set(vertices))
    index = {v: i for i, v in enumerate(ids)}
    pairs = [(index[a], index[b]) for a, b in zip(src, dst, strict=True)
             if a != b and a in index and b in index]
    rows = np.fromiter((a for a, _ in pairs), dtype=np.int64, count=len(pairs))
    cols = np.fromiter((b for _, b in pairs), dtype=np.int64, count=len(pairs))
    # ids are sorted, so a component's smallest index is its smallest id
    roots = component_roots(len(ids), rows, cols, strong=strong)
    return {v: ids[roots[i]] for i, v in enumerate(ids)}
