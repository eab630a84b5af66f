"""PageRank and connected components, every engine on the same graph side by side: Spark
DataFrame joins and Spark GraphX (recrawl.graph.pagerank), the in-driver solve (recrawl.graph.local),
networkx optionally.

    .venv/bin/python benchmarks/pagerank_bench.py [--nodes 100000 --edges 1050000 --iterations 100 --tolerance 1e-4]
    .venv/bin/python benchmarks/pagerank_bench.py --nodes 1000000 --edges 3600000 --no-networkx \
        --engines graphx,driver,dataframe --components graphx,driver

The graph is deterministic from --seed: out-degrees vary, targets follow a Zipf-like popularity
(a few pages get most in-links, as on the web), ~5 % of pages have no out-links (dangling).
Every engine uses damping 0.85, ranks summing to 1 and the same stop rule (L1 change of the rank
vector below --tolerance; networkx gets tol / N, its rule being N * tol). All engines run in one
process and one Spark session (`local[*]`), one after the other, so a shared machine's load
falls on all of them alike. Per engine and part: wall seconds and CPU seconds (the Spark JVM
plus this Python process, psutil), iterations, the L1 distance of its ranks from the first
engine's and from a reference converged to L1 change 1e-12 (the in-driver solver).
"""

from __future__ import annotations

import argparse
import random
import time


def make_graph(nodes: int, edges: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    weights = [1.0 / (i + 1) ** 0.8 for i in range(nodes)]
    order = list(range(nodes))
    rng.shuffle(order)  # popularity unrelated to id
    dangling = set(rng.sample(range(nodes), nodes // 20))
    sources = [n for n in range(nodes) if n not in dangling]
    src = rng.choices(sources, k=edges)
    dst = rng.choices(order, weights=weights, k=edges)
    return sorted({(a, b) for a, b in zip(src, dst, strict=True) if a != b})


class Meter:
    """Wall and CPU seconds (the Spark JVM and this process) of one part."""

    def __init__(self, jvm_pid: int | None) -> None:
        import psutil

        self.procs = [psutil.Process()] + ([psutil.Process(jvm_pid)] if jvm_pid else [])

    def cpu(self) -> float:
        return sum(sum(p.cpu_times()[:2]) for p in self.procs)

    def __enter__(self) -> Meter:
        self.t, self.c = time.perf_counter(), self.cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu_s = time.perf_counter() - self.t, self.cpu() - self.c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_050_000)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="stop when the L1 change of the rank vector is below this (all engines)")
    ap.add_argument("--engines", default="dataframe,graphx,driver",
                    help="PageRank engines to run, in this order (recrawl.graph.pagerank.ENGINES)")
    ap.add_argument("--components", default="graphx,driver",
                    help="engines for weak + strong components ('' = none; dataframe is slow)")
    ap.add_argument("--no-networkx", dest="networkx", action="store_false")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="configuration override; spark.extra.<property>=<value> sets a Spark "
                    "property, e.g. spark.extra.spark.serializer="
                    "org.apache.spark.serializer.KryoSerializer")
    args = ap.parse_args()

    import numpy as np
    from round_cost import _overrides

    from recrawl.config import load_config
    from recrawl.graph.local import pagerank_arrays
    from recrawl.graph.pagerank import pagerank, strongly_connected_components, weakly_connected_components
    from recrawl.sparkenv.spark import get_spark

    edge_list = make_graph(args.nodes, args.edges, args.seed)
    print(f"graph: {args.nodes} nodes, {len(edge_list)} distinct edges (seed {args.seed})", flush=True)
    src = np.fromiter((a for a, _ in edge_list), dtype=np.int64, count=len(edge_list))
    dst = np.fromiter((b for _, b in edge_list), dtype=np.int64, count=len(edge_list))
    ref = pagerank_arrays(np.arange(args.nodes), src, dst, max_iterations=5000, tolerance=1e-12).ranks

    rows: list[tuple] = []
    ranks: dict[str, np.ndarray] = {}
    if args.networkx:
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(range(args.nodes))
        g.add_edges_from(edge_list)
        with Meter(None) as m:
            got = nx.pagerank(g, alpha=0.85, max_iter=args.iterations, tol=args.tolerance / args.nodes)
        ranks["networkx"] = np.array([got[i] for i in range(args.nodes)])
        rows.append(("networkx", "pagerank", m.wall, m.cpu_s, "", ranks["networkx"]))
        del g

    sets = _overrides(args.set, "--set")
    overrides = {k: v for k, v in sets.items() if not k.startswith("spark.extra.")}
    cfg = load_config()
    extra = {k[len("spark.extra."):]: str(v) for k, v in sets.items() if k.startswith("spark.extra.")}
    if extra:
        overrides["spark.extra"] = {**cfg.get("spark.extra"), **extra}
    cfg = cfg.with_overrides({**overrides, "spark.shuffle_partitions": args.partitions,
                              "spark.driver_memory": args.driver_memory})
    spark = get_spark(cfg, "pagerank-bench")
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    meter = lambda: Meter(proc.pid if proc else None)  # noqa: E731
    import pyarrow as pa

    v = spark.createDataFrame(pa.table({"id": np.arange(args.nodes)})).repartition(args.partitions)
    e = spark.createDataFrame(pa.table({"src": src, "dst": dst})).repartition(args.partitions)
    del edge_list
    v.cache().count()
    e.cache().count()
    for engine in [x for x in args.engines.split(",") if x]:
        with meter() as m:
            res = pagerank(spark, v, e, max_iterations=args.iterations, tolerance=args.tolerance,
                           engine=engine)
            got = res.ranks.toArrow()
        r = np.zeros(args.nodes)
        r[got.column("id").to_numpy()] = got.column("pagerank").to_numpy()
        ranks[engine] = r
        rows.append((engine, "pagerank", m.wall, m.cpu_s, res.iterations, r))
        print(f"{engine} pagerank {m.wall:.1f} s", flush=True)
    labels: dict[str, dict] = {}
    for engine in [x for x in args.components.split(",") if x]:
        for name, fn in (("weak", weakly_connected_components), ("strong", strongly_connected_components)):
            with meter() as m:
                res = fn(spark, v, e, engine=engine)
                got = res.labels.toArrow()
            labels[f"{engine} {name}"] = dict(zip(got.column("id").to_pylist(),
                                                  got.column("component").to_pylist(), strict=True))
            rows.append((engine, f"{name} components", m.wall, m.cpu_s, "", None))
            print(f"{engine} {name} components {m.wall:.1f} s", flush=True)

    first = next(iter(ranks.values()), None)
    print(f"\n{'engine':<12}{'part':<20}{'wall s':>9}{'CPU s':>9}{'iter':>6}"
          f"{'L1 vs first':>13}{'L1 vs conv.':>13}")
    for engine, part, wall, cpu, its, r in rows:
        l1_first = f"{np.abs(r - first).sum():.2e}" if r is not None else ""
        l1_ref = f"{np.abs(r - ref).sum():.2e}" if r is not None else ""
        print(f"{engine:<12}{part:<20}{wall:>9.1f}{cpu:>9.1f}{its!s:>6}{l1_first:>13}{l1_ref:>13}")
    for name in ("weak", "strong"):
        got = [v for k, v in labels.items() if k.endswith(name)]
        if len(got) > 1:
            print(f"{name} components equal across engines: {all(x == got[0] for x in got)} "
                  f"({len(set(got[0].values()))} components)")


if __name__ == "__main__":
    main()
