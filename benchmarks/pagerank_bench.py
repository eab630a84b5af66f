"""PageRank on Spark DataFrames (recrawl.graph) against networkx on the same graph, and the
in-driver solve (recrawl.graph_local, what the job runs below `pagerank.in_driver_max_edges`).

    .venv/bin/python benchmarks/pagerank_bench.py [--nodes 100000 --edges 1050000 --iterations 100 --tolerance 1e-4]

The graph is deterministic from --seed: out-degrees vary, targets follow a Zipf-like popularity
(a few pages get most in-links, as on the web), ~5 % of pages have no out-links (dangling).
Both sides use damping 0.85, ranks summing to 1 (networkx's normalization) and the same stopping
rule (L1 change of the rank vector below --tolerance). Prints both run
times, the top-k overlap and the Spearman rank correlation of the two rankings.
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_050_000)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="stop when the L1 change of the rank vector is below this (both engines)")
    args = ap.parse_args()

    import networkx as nx
    from scipy.stats import spearmanr

    from recrawl.config import load_config
    from recrawl.graph import pagerank
    from recrawl.spark import get_spark

    edge_list = make_graph(args.nodes, args.edges, args.seed)
    print(f"graph: {args.nodes} nodes, {len(edge_list)} distinct edges (seed {args.seed})")

    t = time.perf_counter()
    g = nx.DiGraph()
    g.add_nodes_from(range(args.nodes))
    g.add_edges_from(edge_list)
    # networkx stops at err < N * tol: pass tol / N so both stop at the same absolute L1 change.
    nx_ranks = nx.pagerank(g, alpha=0.85, max_iter=args.iterations, tol=args.tolerance / args.nodes)
    nx_s = time.perf_counter() - t

    # A tightly converged reference (L1 change < 1e-10) to measure how far each engine stopped.
    ref = nx.pagerank(g, alpha=0.85, max_iter=2000, tol=1e-10 / args.nodes)

    cfg = load_config().with_overrides({"spark.shuffle_partitions": 8})
    spark = get_spark(cfg, "pagerank-bench")
    v = spark.createDataFrame([(i,) for i in range(args.nodes)], "id long")
    e = spark.createDataFrame(edge_list, "src long, dst long").repartition(8)
    e.cache().count()
    t = time.perf_counter()
    res = pagerank(spark, v, e, max_iterations=args.iterations, tolerance=args.tolerance)
    ours = {r.id: r.pagerank for r in res.ranks.collect()}
    spark_s = time.perf_counter() - t
    # the same call, solved in the driver: the edges collected, numpy, the ranks sent back
    t = time.perf_counter()
    res_d = pagerank(spark, v, e, max_iterations=args.iterations, tolerance=args.tolerance,
                     in_driver_max_edges=len(edge_list))
    in_driver = {r.id: r.pagerank for r in res_d.ranks.collect()}
    driver_s = time.perf_counter() - t

    a = sorted(range(args.nodes), key=lambda n: -nx_ranks[n])
    b = sorted(range(args.nodes), key=lambda n: -ours[n])
    rho = spearmanr([nx_ranks[n] for n in range(args.nodes)], [ours[n] for n in range(args.nodes)])[0]
    l1 = sum(abs(nx_ranks[n] - ours[n]) for n in range(args.nodes))
    print(f"{'engine':<28}{'seconds':>10}")
    print(f"{'networkx.pagerank (scipy)':<28}{nx_s:>10.1f}")
    print(f"{'Spark DataFrame PageRank':<28}{spark_s:>10.1f}  ({res.iterations} iterations, local[*])")
    print(f"{'in the driver (graph_local)':<28}{driver_s:>10.1f}  ({res_d.iterations} iterations, "
          f"max |difference| from the DataFrame ranks "
          f"{max(abs(ours[n] - in_driver[n]) for n in range(args.nodes)):.1e})")
    for k in (10, 100, 1000):
        print(f"top-{k} overlap: {len(set(a[:k]) & set(b[:k])) / k:.3f}")
    print(f"Spearman rank correlation: {rho:.4f}; L1 distance of the rank vectors: {l1:.2e}")
    for name, got in (("networkx", nx_ranks), ("Spark", ours)):
        err = sum(abs(ref[n] - got[n]) for n in range(args.nodes))
        print(f"L1 distance of {name} from the converged reference: {err:.2e}")


if __name__ == "__main__":
    main()
