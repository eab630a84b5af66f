"""The in-driver step's URL graph (recrawl.graph.stepgraph.canonical_graph), without Spark:
the same edges however the links are cut into batches, and against a plain-Python reference."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from recrawl.graph.stepgraph import canonical_graph


def _reference(links, dups):
    """The Spark path's rule in Python: each end through its duplicate verdict (one step),
    self-links dropped, distinct pairs."""
    canon = dict(dups)
    out = set()
    for s, d in links:
        if s is None or d is None:
            continue
        s, d = canon.get(s, s), canon.get(d, d)
        if s != d:
            out.add((s, d))
    return out


def _edges(g):
    urls = g.urls.to_pylist()
    return {(urls[s], urls[d]) for s, d in zip(g.src, g.dst, strict=True)}


def _batches(links, size):
    for i in range(0, len(links), size):
        part = links[i:i + size]
        yield (pa.array([s for s, _ in part], pa.string()), pa.array([d for _, d in part], pa.string()))


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_the_graph_is_the_same_whatever_the_batches(size):
    rng = random.Random(size)
    urls = [f"http://h{i % 5}.example/p{i}" for i in range(40)]
    links = [(rng.choice(urls), rng.choice(urls)) for _ in range(300)]
    links += [(urls[0], urls[0]), (urls[1], None), (None, urls[2])]  # a self-link, null ends
    # a duplicate onto a URL the links never name (it becomes a vertex), and one onto a URL
    # that is itself a duplicate (one step only, as the Spark path's join)
    dups = [(urls[3], "http://survivor.example/"), (urls[4], urls[5]), (urls[5], urls[6]),
            ("http://nowhere.example/", urls[7])]
    g = canonical_graph(_batches(links, size), pa.array([u for u, _ in dups]),
                        pa.array([c for _, c in dups]))
    assert _edges(g) == _reference(links, dups)
    assert len(set(g.urls.to_pylist())) == len(g.urls)  # every vertex once
    on_edges = {u for e in _edges(g) for u in e}
    assert set(g.urls.to_pylist()) == on_edges  # and only URLs on an edge
    assert "http://survivor.example/" in on_edges
    assert urls[3] not in on_edges and urls[4] not in on_edges


def test_no_links_and_only_self_links():
    empty = canonical_graph(iter(()), pa.array([], pa.string()), pa.array([], pa.string()))
    assert len(empty.urls) == 0 and len(empty.src) == 0
    only = canonical_graph(_batches([("http://a/", "http://a/"), ("http://b/", "http://c/")], 1),
                           pa.array(["http://c/"]), pa.array(["http://b/"]))
    assert len(only.urls) == 0 and len(only.src) == 0  # b -> c is b -> b once collapsed
