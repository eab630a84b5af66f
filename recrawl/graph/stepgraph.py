"""The whole PageRank step on Arrow columns in one process: URL graph, ranks, in-link scores,
host graph, host ranks and host components.

Below `pagerank.in_driver_max_edges` the step's solvers already ran in the driver
(recrawl.graph.local), yet the work around them stayed in Spark: the canonical edge set, the
vertex ids, the in-link scores and the host graph were joins, distincts and shuffles of the
whole link table, and at 1M URLs they, not the iterations, were the step (docs/scale.md,
"PageRank engines"). Here the same work is a few vectorized passes: URLs become integer codes
by one dictionary encoding, the distinct edges one `np.unique` over packed pairs, the
in-link scores and the host edges `np.bincount`s. spark_jobs/pagerank.py takes this path
when the link table fits (its Spark path is the reference; tests/spark_jobs/test_pagerank.py
runs both on one crawl and compares every table they write).

What each result means is the Spark path's:
- vertices are the canonical URLs of the edges left once duplicates are collapsed onto their
  survivor and self-links dropped; edges are distinct;
- a vertex's in-link score is sum(rank / out-degree) over its in-links, NULL without any;
- the host graph has an edge per (source host, target host) pair of different hosts, weighted
  by its URL edges; its vertices are the hosts on those edges, ranked by weighted PageRank,
  and a component is named by its smallest host name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from recrawl.graph.local import LocalRanks, component_roots, pagerank_arrays


@dataclass(frozen=True)
class UrlGraph:
    urls: object  # pyarrow StringArray: vertex i's URL
    src: np.ndarray  # int64 vertex indices, one per distinct edge
    dst: np.ndarray


@dataclass(frozen=True)
class HostGraph:
    hosts: list[str]  # vertex i's host, sorted (so the smallest index is the smallest name)
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray  # URL edges between the two hosts


def canonical_graph(src_url, dst_url, dup_url, dup_canonical) -> UrlGraph:
    """The distinct URL edges after mapping each end through the duplicates (`dup_url` ->
    `dup_canonical`, one row per URL) and dropping self-links; Arrow string arrays in, the
    vertices numbered 0..n-1 in order of first appearance."""
    import pyarrow as pa  # lazy: only this path needs Arrow compute
    import pyarrow.compute as pc  # lazy: as above

    text = pa.large_string()  # a 10M-URL crawl's links pass 2 GB of characters

    dups = _flat(dup_url).cast(text)
    survivors = _flat(dup_canonical).cast(text)

    def canon(col):
        col = _flat(col).cast(text)
        if len(dups) == 0:
            return col
        return pc.coalesce(pc.take(survivors, pc.index_in(col, value_set=dups)), col)

    s, d = canon(src_url), canon(dst_url)
    m = len(s)
    codes = pc.dictionary_encode(pa.concat_arrays([s, d]))
    n = len(codes.dictionary)
    idx = codes.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    si, di = idx[:m], idx[m:]
    keep = si != di
    pairs = np.unique(si[keep] * n + di[keep])  # distinct edges, packed (n^2 < 2^63 up to 3e9)
    # only URLs on an edge are vertices (one seen only on a self-link is none)
    used, si, di = _on_edges(n, pairs // n, pairs % n)
    urls = codes.dictionary.filter(pa.array(used)).cast(pa.string())
    return UrlGraph(urls, si, di)


def _on_edges(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of vertices 0..n-1, those on an edge, renumbered in their order: (mask of the kept
    ones, src, dst in the new numbers)."""
    used = np.zeros(n, dtype=bool)
    used[src] = True
    used[dst] = True
    renumber = np.cumsum(used) - 1
    return used, renumber[src], renumber[dst]


def _flat(col):
    import pyarrow as pa  # lazy: as above

    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def url_ranks(g: UrlGraph, *, damping: float, max_iterations: int, tolerance: float) -> LocalRanks:
    """PageRank of the URL graph (recrawl.graph.local.pagerank_arrays; ids are 0..n-1)."""
    return pagerank_arrays(np.arange(len(g.urls), dtype=np.int64), g.src, g.dst,
                           damping=damping, max_iterations=max_iterations, tolerance=tolerance)


def inlink_scores(g: UrlGraph, ranks: np.ndarray) -> np.ndarray:
    """sum(rank / out-degree) over each vertex's in-links; NaN for a vertex without any (the
    Spark path's NULL)."""
    n = len(g.urls)
    if n == 0:
        return np.zeros(0)
    outdeg = np.bincount(g.src, minlength=n).astype(np.float64)
    got = np.bincount(g.dst, weights=ranks[g.src] / outdeg[g.src], minlength=n)
    got[np.bincount(g.dst, minlength=n) == 0] = np.nan
    return got


def host_graph(g: UrlGraph, vertex_host, host_of: Callable[[str], str | None] | None = None
               ) -> HostGraph:
    """The host graph of `g`: `vertex_host` (an Arrow string array) is each vertex's host
    (crawldb's), null where crawldb lacks the URL; `host_of(url)` is called for those only
    (recrawl.content.urlnorm.host_key_or_none), and URLs without a host take no part."""
    import pyarrow as pa  # lazy: as above
    import pyarrow.compute as pc  # lazy: as above

    hosts = _flat(vertex_host).cast(pa.string())
    if host_of is not None and hosts.null_count:
        missing = hosts.is_null()
        found = [host_of(u) for u in g.urls.filter(missing).to_pylist()]
        hosts = pc.replace_with_mask(hosts, missing, pa.array(found, pa.string()))
    enc = pc.dictionary_encode(hosts)
    k = len(enc.dictionary)
    order = pc.sort_indices(enc.dictionary).to_numpy()  # by UTF-8 bytes, as Spark's min
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    idx = pc.fill_null(enc.indices, -1).to_numpy().astype(np.int64)
    code = np.where(idx >= 0, rank[np.maximum(idx, 0)], -1)
    hs, hd = code[g.src], code[g.dst]
    keep = (hs >= 0) & (hd >= 0) & (hs != hd)
    width = max(k, 1)
    pairs, weight = np.unique(hs[keep] * width + hd[keep], return_counts=True)
    # only hosts on a host edge are vertices; renumbering keeps the names' order
    used, hs, hd = _on_edges(k, pairs // width, pairs % width)
    names = enc.dictionary.take(pa.array(order)).to_pylist()
    return HostGraph([h for h, u in zip(names, used, strict=True) if u], hs, hd,
                     weight.astype(np.int64))


@dataclass(frozen=True)
class HostRows:
    hosts: list[str]
    host_rank: np.ndarray
    component_root: list[str]
    component_hosts: np.ndarray
    scc_root: list[str]
    scc_hosts: np.ndarray


def host_rows(h: HostGraph, *, damping: float, max_iterations: int, tolerance: float) -> HostRows:
    """Each host's weighted PageRank and its weak and strong components (root = smallest host
    name, size in hosts)."""
    n = len(h.hosts)
    ranks = pagerank_arrays(np.arange(n, dtype=np.int64), h.src, h.dst,
                            h.weight.astype(np.float64), damping=damping,
                            max_iterations=max_iterations, tolerance=tolerance).ranks

    def named(strong: bool) -> tuple[list[str], np.ndarray]:
        roots = component_roots(n, h.src, h.dst, strong=strong)
        sizes = np.bincount(roots, minlength=n)[roots] if n else np.zeros(0, dtype=np.int64)
        return [h.hosts[r] for r in roots], sizes.astype(np.int64)

    wroot, wsize = named(False)
    sroot, ssize = named(True)
    return HostRows(h.hosts, ranks, wroot, wsize, sroot, ssize)
