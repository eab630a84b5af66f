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

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from recrawl.graph.local import LocalRanks, component_roots, pagerank_numbered


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


def canonical_graph(link_batches: Iterable[tuple[object, object]], dup_url, dup_canonical,
                    *, workers: int = 2) -> UrlGraph:
    """The distinct URL edges after mapping each end through the duplicates (`dup_url` ->
    `dup_canonical`, one row per URL) and dropping self-links; `link_batches` yields the links
    as (source, target) Arrow string arrays, a batch at a time, and the vertices are numbered
    0..n-1 in order of first appearance.

    The link table's text is never held whole: each batch is dictionary-encoded on its own
    (`workers` batches at a time: Arrow's kernels release the GIL) and kept as int32 indices
    into its own dictionary, then one encoding of the batches' dictionaries (and the
    duplicates' URLs) numbers every URL. Holding the whole text, and its copies (one array per
    column, then both together), was ~350 bytes of driver memory per link at 10M URLs
    (docs/scale.md); the duplicates' collapse and the edge set are integer work."""
    import pyarrow as pa  # lazy: only this path needs Arrow compute
    import pyarrow.compute as pc  # lazy: as above

    text = pa.large_string()  # a 10M-URL crawl's links pass 2 GB of characters
    parts = list(_encoded(link_batches, workers))  # (dictionary, indices, sources)
    dups, survivors = _flat(dup_url).cast(text), _flat(dup_canonical).cast(text)
    hit = pc.and_(pc.is_valid(dups), pc.is_valid(survivors))
    dups, survivors = dups.filter(hit), survivors.filter(hit)
    pieces = [d for d, _, _ in parts] + [dups, survivors]
    whole = pc.dictionary_encode(pa.chunked_array(pieces, type=text))
    # empty chunks leave no chunk behind: the codes are split by the pieces' lengths instead
    flat = np.concatenate([c.indices.to_numpy() for c in whole.chunks] or [np.zeros(0, np.int32)])
    ends = np.cumsum([len(x) for x in pieces])
    code = np.split(flat, ends[:-1])
    urls = whole.chunks[-1].dictionary if whole.num_chunks else pa.array([], text)
    n = len(urls)
    del whole, pieces
    si = np.concatenate([code[i][idx[:m]] for i, (_, idx, m) in enumerate(parts)]
                        or [np.zeros(0, np.int32)]).astype(np.int64)
    di = np.concatenate([code[i][idx[m:]] for i, (_, idx, m) in enumerate(parts)]
                        or [np.zeros(0, np.int32)]).astype(np.int64)
    del parts
    if len(dups):
        remap = np.arange(n, dtype=np.int64)
        remap[code[-2]] = code[-1]  # one step, as the Spark path's join
        si, di = remap[si], remap[di]
        del remap
    keep = si != di
    # the distinct edges, packed (n^2 < 2^63 up to 3e9 URLs): a sort and a neighbour test,
    # several times faster than np.unique's hash path on tens of millions of pairs
    pairs = si[keep] * n + di[keep]
    del si, di, keep
    pairs.sort()
    if len(pairs):
        pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))]
    # only URLs on an edge are vertices (one seen only on a self-link is none)
    used, si, di = _on_edges(n, pairs // n, pairs % n)
    urls = urls.filter(pa.array(used))
    return UrlGraph(urls.cast(pa.string()) if _fits_string(urls) else urls, si, di)


def _encoded(link_batches: Iterable[tuple[object, object]], workers: int):
    """Each batch's (dictionary, int32 indices of its sources then its targets, number of
    sources), null ends dropped, encoded on `workers` threads with at most that many batches
    in flight (so the driver holds a few batches' text, not the table's)."""
    from concurrent.futures import ThreadPoolExecutor  # lazy: this path only

    import pyarrow as pa  # lazy: as above
    import pyarrow.compute as pc  # lazy: as above

    def encode(s, d):
        s, d = _flat(s), _flat(d)
        ok = pc.and_(pc.is_valid(s), pc.is_valid(d))
        if ok.false_count:
            s, d = s.filter(ok), d.filter(ok)
        # one memo over both columns, no concatenated copy of their text
        enc = pc.dictionary_encode(pa.chunked_array([s, d], type=s.type))
        idx = np.concatenate([c.indices.to_numpy() for c in enc.chunks] or [np.zeros(0, np.int32)])
        words = enc.chunks[-1].dictionary if enc.num_chunks else pa.array([], pa.large_string())
        return words.cast(pa.large_string()), idx, len(s)

    with ThreadPoolExecutor(max(1, workers)) as pool:
        pending = []
        for s, d in link_batches:
            pending.append(pool.submit(encode, s, d))
            if len(pending) >= max(1, workers):
                yield pending.pop(0).result()
        for f in pending:
            yield f.result()


def _fits_string(arr) -> bool:
    """Whether a large_string array's characters fit a (32-bit offset) string array."""
    return arr.nbytes < 2**31 - 1


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
    """PageRank of the URL graph (recrawl.graph.local.pagerank_numbered: its edges are distinct,
    without self-links, between vertices 0..n-1)."""
    return pagerank_numbered(len(g.urls), g.src, g.dst, damping=damping,
                             max_iterations=max_iterations, tolerance=tolerance)


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
    ranks = pagerank_numbered(n, h.src, h.dst, h.weight.astype(np.float64), damping=damping,
                              max_iterations=max_iterations, tolerance=tolerance).ranks

    return HostRows(h.hosts, ranks, *named_components(h.hosts, h.src, h.dst, strong=False),
                    *named_components(h.hosts, h.src, h.dst, strong=True))


def named_components(names: list[str], src: np.ndarray, dst: np.ndarray, *, strong: bool
                     ) -> tuple[list[str], np.ndarray]:
    """Weakly or strongly connected components of vertices 0..n-1 (`names` sorted, so the
    smallest index is the smallest name): each vertex's root name and its component's size."""
    n = len(names)
    roots = component_roots(n, src, dst, strong=strong)
    sizes = np.bincount(roots, minlength=n)[roots] if n else np.zeros(0, dtype=np.int64)
    return [names[r] for r in roots], sizes.astype(np.int64)
