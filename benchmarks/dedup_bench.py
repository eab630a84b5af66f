"""Near-duplicate benchmark: the Spark block join against the simhash package's SimhashIndex.

    .venv/bin/python benchmarks/dedup_bench.py [--sizes 100000,1000000] [--simhash-max 200000]
                                               [--layout 6c3] [--no-simweb]

1. Synthetic fingerprints with known truth. N random 64-bit SimHashes, 10 % of them in planted
   groups of 2-5 pages: each member is the group's base with 0-3 random bits flipped, so two
   members are 0-6 bits apart and the truth is every planted pair within distance k = 3
   (computed exactly per group). Two unrelated random fingerprints are within 3 bits with
   probability 4.4e-15, so accidental pairs are ~0.001 expected at 1M and the planted pairs
   are the whole truth. Both engines see the same data:
     spark         recrawl.content.nearjoin.near_duplicate_pairs_df (what the dedup job runs), every
                   page "new", local[*]; time from the cached input to the counted pairs.
     SimhashIndex  simhash.SimhashIndex(k=3) (4 blocks of 16 bits), built and queried for
                   every page, in a child process so its memory is its own. Sizes above
                   --simhash-max are extrapolated from two measured sizes with t = aN + bN^2
                   (build is linear, bucket scans grow with N^2 / 2^16) and marked "~".
   Memory: peak RSS of the Python driver and of the JVM (sampled every 0.2 s), peak JVM heap
   in use (sampled; mostly young-generation garbage) and the old generation's peak (MXBean:
   what survived collections); for SimhashIndex the child's peak RSS.
   Candidate pairs: comparisons the engine makes (pairs sharing a bucket, per table).
2. The whole dedup (exact by text hash, survivor order, near by SimHash <= 3 among the exact
   survivors: the job's semantics, in pure Python) on simweb's dup.sim.test pages, fetched
   over 127.0.0.1 and parsed with recrawl.content.parsing, scored against simweb's truth groups.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._sampler import PeakSampler  # noqa: E402
from recrawl.content.fingerprint import hamming, to_signed64  # noqa: E402

K = 3
PLANTED_FRACTION = 0.10


# --- data --------------------------------------------------------------------------------


def make_fingerprints(n: int, seed: int = 1) -> tuple[list[int], set[tuple[int, int]]]:
    """(unsigned fingerprints, truth pairs (i, j), i < j) with planted near-dup groups."""
    rng = random.Random(seed)
    fps: list[int] = []
    truth: set[tuple[int, int]] = set()
    planted = int(n * PLANTED_FRACTION)
    while len(fps) < planted:
        base = rng.getrandbits(64)
        size = min(rng.randint(2, 5), planted - len(fps))
        start = len(fps)
        for _ in range(size):
            x = base
            for b in rng.sample(range(64), rng.randint(0, K)):
                x ^= 1 << b
            fps.append(x)
        for i, j in itertools.combinations(range(start, start + size), 2):
            if hamming(fps[i], fps[j]) <= K:
                truth.add((i, j))
    fps.extend(rng.getrandbits(64) for _ in range(n - len(fps)))
    order = list(range(n))  # planted members scattered among the random ones
    rng.shuffle(order)
    pos = {old: new for new, old in enumerate(order)}
    shuffled = [0] * n
    for old, new in pos.items():
        shuffled[new] = fps[old]
    truth = {tuple(sorted((pos[i], pos[j]))) for i, j in truth}
    return shuffled, truth


def url_of(i: int) -> str:
    return f"p{i:08d}"  # zero-padded: string order = numeric order


def precision_recall(found: set, truth: set) -> tuple[float, float]:
    hit = len(found & truth)
    return (hit / len(found) if found else 1.0), (hit / len(truth) if truth else 1.0)


# --- engines -----------------------------------------------------------------------------


def run_spark(spark, fps: list[int], layout: str, max_bucket: int, workdir: str) -> dict:
    """Time near_duplicate_pairs_df over `fps` (all new); pairs as index tuples."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from recrawl.content.nearjoin import near_duplicate_pairs_df

    path = os.path.join(workdir, f"fps-{len(fps)}.csv")
    with open(path, "w") as fh:
        for i, x in enumerate(fps):
            fh.write(f"{url_of(i)},{to_signed64(x)}\n")
    df = (
        spark.read.schema("url string, simhash long").csv(path)
        .withColumn("is_new", F.lit(True))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    df.count()
    with PeakSampler(spark) as mem:
        t0 = time.perf_counter()
        nd = near_duplicate_pairs_df(df, K, layout, max_bucket)
        rows = nd.rows.persist(StorageLevel.MEMORY_AND_DISK)
        pairs = nd.pairs.persist(StorageLevel.MEMORY_AND_DISK)
        n_pairs = pairs.count()
        elapsed = time.perf_counter() - t0
    found = {(int(r["u1"][1:]), int(r["u2"][1:])) for r in pairs.select("u1", "u2").collect()}
    assert len(found) == n_pairs, "a pair was emitted twice"
    sizes = rows.where("NOT capped").groupBy("tbl", "key").agg(F.first("size").alias("s"))
    cand = sizes.agg(F.sum(F.col("s") * (F.col("s") - 1) / 2)).first()[0] or 0
    capped = nd.capped_buckets.count()
    for d in (pairs, rows, df):
        d.unpersist()
    return {
        "time": elapsed, "py_rss": mem.py_rss, "jvm_rss": mem.jvm_rss, "heap": mem.heap,
        "old": mem.old_peak, "cand": int(cand), "found": found, "capped": capped,
    }


def _simhash_child(fps: list[int], conn) -> None:
    """Build a SimhashIndex over fps and query every page (runs in a child process)."""
    import logging

    from simhash import Simhash, SimhashIndex

    logging.getLogger("simhash").setLevel(logging.ERROR)  # it warns on every bucket > 200
    t0 = time.perf_counter()
    objs = [(str(i), Simhash(x, f=64)) for i, x in enumerate(fps)]
    index = SimhashIndex(objs, f=64, k=K)
    t_build = time.perf_counter() - t0
    found = set()
    for i, (_, s) in enumerate(objs):
        for j in index.get_near_dups(s):
            j = int(j)
            if j != i:
                found.add((min(i, j), max(i, j)))
    elapsed = time.perf_counter() - t0
    # every query scans its bucket in each of the 4 tables: sum of |bucket|^2, minus itself
    cand = (sum(len(b) ** 2 for b in index.bucket.values()) - len(fps) * (K + 1)) // 2
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    conn.send({"time": elapsed, "build": t_build, "rss": rss, "cand": cand, "found": found})
    conn.close()


def run_simhash_index(fps: list[int]) -> dict:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_simhash_child, args=(fps, child))
    proc.start()
    child.close()
    out = parent.recv()
    proc.join()
    return out


# --- simweb ------------------------------------------------------------------------------


def simweb_eval() -> dict:
    """The whole dedup (pure Python, the job's semantics) on dup.sim.test vs simweb's truth."""
    import requests

    from recrawl.content.fingerprint import near_duplicate_pairs, simhash64, text_hash
    from recrawl.content.parsing import parse_html
    from recrawl.rules.survivor import DEFAULT_ORDER, sort_key, split_survivor
    from simweb import SimWeb

    web = SimWeb(seed=42)
    web.start()
    try:
        exact_truth = web.truth.duplicate_groups()
        near_truth = web.truth.near_duplicate_groups()
        urls = web.truth.pages("dup.sim.test")
        pages = {}
        with requests.Session() as http:
            http.trust_env = False  # loopback only: no proxy from the environment
            for url in urls:
                rest = url.split("://", 1)[1]
                hostport, _, path = rest.partition("/")
                resp = http.get(
                    f"http://127.0.0.1:{web.port}/{path}", headers={"Host": hostport},
                    timeout=10, allow_redirects=False,
                )
                if resp.status_code != 200:
                    continue
                page = parse_html(resp.content, resp.headers.get("Content-Type"), url)
                if page.text:
                    pages[url] = (text_hash(page.text), simhash64(page.text))
    finally:
        web.stop()

    # exact: one survivor per text hash; near: among survivors, the best-ranked neighbour
    by_hash: dict[str, list[str]] = {}
    for u, (h, _) in pages.items():
        by_hash.setdefault(h, []).append(u)
    verdict: dict[str, tuple[str, str]] = {}
    survivors = {}
    for members in by_hash.values():
        best, rest = split_survivor([{"url": u} for u in members])
        survivors[best["url"]] = pages[best["url"]][1]
        for r in rest:
            verdict[r["url"]] = (best["url"], "exact")
    rank = {u: sort_key({"url": u}, DEFAULT_ORDER) for u in survivors}
    fps = {u: s for u, s in survivors.items() if s is not None}
    best_near: dict[str, str] = {}
    for a, b in near_duplicate_pairs(fps, K, "6c3"):
        win, lose = (a, b) if rank[a] < rank[b] else (b, a)
        if lose not in best_near or rank[win] < rank[best_near[lose]]:
            best_near[lose] = win
    for lose, win in best_near.items():
        verdict[lose] = (win, "near")

    group_of = {}
    for gid, g in enumerate(exact_truth):
        for u in g:
            group_of[u] = ("exact", gid)
    for gid, g in enumerate(near_truth):
        for u in g:
            group_of[u] = ("near", gid)
    out = {"pages": len(pages), "fetched_of": len(urls)}
    for kind, groups in (("exact", exact_truth), ("near", near_truth)):
        flagged = {u for u, (_, kd) in verdict.items() if kd == kind}
        correct = {u for u in flagged
                   if group_of.get(u) is not None and group_of.get(u) == group_of.get(verdict[u][0])
                   and group_of[u][0] == kind}
        redundant = sum(len(g) - 1 for g in groups)
        out[kind] = {
            "flagged": len(flagged),
            "precision": len(correct) / len(flagged) if flagged else 1.0,
            "recall": len(correct) / redundant if redundant else 1.0,
            "redundant": redundant,
        }
    # pairwise view: pages judged the same (same exact hash or a near pair) vs truth groups
    same_pred = set()
    for members in by_hash.values():
        same_pred.update(tuple(sorted(p)) for p in itertools.combinations(members, 2))
    same_pred.update(tuple(sorted(p)) for p in near_duplicate_pairs(fps, K, "6c3"))
    same_true = set()
    for g in exact_truth + near_truth:
        same_true.update(tuple(sorted(p)) for p in itertools.combinations(sorted(g), 2))
    out["pairs"] = precision_recall(same_pred, same_true) + (len(same_pred), len(same_true))
    out["missed"] = sorted(
        (a, b, hamming(pages[a][1], pages[b][1]) if a in pages and b in pages else None)
        for a, b in same_true - same_pred
    )
    return out


# --- main --------------------------------------------------------------------------------


def _mb(x: float) -> str:
    return f"{x / 2**20:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--simhash-max", type=int, default=200000,
                    help="largest size SimhashIndex runs at; larger ones are extrapolated "
                    "(0: skip it)")
    ap.add_argument("--layout", default="6c3")
    ap.add_argument("--max-bucket", type=int, default=1000)
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="3g")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-simweb", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    from recrawl.config import load_config
    from recrawl.content.fingerprint import expected_candidates
    from recrawl.sparkenv.spark import get_spark

    cfg = load_config(environ={}).with_overrides({
        "spark.master": "local[*]",
        "spark.shuffle_partitions": args.shuffle_partitions,
        "spark.driver_memory": args.driver_memory,
    })
    spark = get_spark(cfg, app_name="dedup-bench")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}, "
          f"layout {args.layout}, k={K}, planted {PLANTED_FRACTION:.0%} in groups of 2-5")
    header = (f"{'pages':>9} {'engine':<18} {'time s':>8} {'py RSS MB':>9} {'JVM RSS MB':>10} "
              f"{'heap MB':>8} {'old MB':>7} {'cand pairs':>11} {'found':>7} {'truth':>7} "
              f"{'prec':>6} {'recall':>6}")
    print(header)
    print("-" * len(header))
    measured: dict[int, dict] = {}

    def simhash_at(n: int) -> dict:
        """SimhashIndex at size n (memoized), with precision and recall vs its truth."""
        if n not in measured:
            fps_n, truth_n = make_fingerprints(n, args.seed)
            r = run_simhash_index(fps_n)
            r["truth"] = len(truth_n)
            r["pr"] = precision_recall(r["found"], truth_n)
            measured[n] = r
        return measured[n]

    def simhash_line(n: int, h: dict, note: str = "") -> None:
        p, r = h["pr"]
        print(f"{n:>9} {'SimhashIndex k=3':<18} {h['time']:>8.1f} {_mb(h['rss']):>9} "
              f"{'-':>10} {'-':>8} {'-':>7} {h['cand']:>11,} {len(h['found']):>7} "
              f"{h['truth']:>7} {p:>6.3f} {r:>6.3f}{note}", flush=True)

    with tempfile.TemporaryDirectory() as work:
        for n in sizes:
            fps, truth = make_fingerprints(n, args.seed)
            s = run_spark(spark, fps, args.layout, args.max_bucket, work)
            p, r = precision_recall(s["found"], truth)
            print(f"{n:>9} {'spark ' + args.layout:<18} {s['time']:>8.1f} {_mb(s['py_rss']):>9} "
                  f"{_mb(s['jvm_rss']):>10} {_mb(s['heap']):>8} {_mb(s['old']):>7} "
                  f"{s['cand']:>11,} {len(s['found']):>7} {len(truth):>7} {p:>6.3f} {r:>6.3f}"
                  + (f"  capped buckets {s['capped']}" if s["capped"] else ""), flush=True)
            if args.simhash_max <= 0:
                pass  # SimhashIndex skipped
            elif n <= args.simhash_max:
                simhash_line(n, simhash_at(n))
            else:
                # t = a n + b n^2 through two measured sizes (build is linear; bucket scans
                # grow with n^2 / 2^16); memory is linear
                n2 = args.simhash_max
                n1 = n2 // 2
                h1, h2 = simhash_at(n1), simhash_at(n2)
                simhash_line(n1, h1, "  (measured)")
                simhash_line(n2, h2, "  (measured)")
                b = max((h2["time"] / n2 - h1["time"] / n1) / (n2 - n1), 0.0)
                a = h2["time"] / n2 - b * n2
                t = a * n + b * n * n
                rss = h1["rss"] + (h2["rss"] - h1["rss"]) * (n - n1) / (n2 - n1)
                cand = h2["cand"] * (n / n2) ** 2
                print(f"{n:>9} {'SimhashIndex k=3':<18} {'~' + format(t, '.0f'):>8} "
                      f"{'~' + _mb(rss):>9} {'-':>10} {'-':>8} {'-':>7} "
                      f"{'~' + format(int(cand), ','):>11} {'-':>7} {'-':>7} {'-':>6} {'-':>6}"
                      "  (extrapolated, not run)", flush=True)
            e = expected_candidates(n, args.layout, K)
            print(f"{'':>9} (random background alone: ~{e:,.0f} candidate pairs expected for "
                  f"{args.layout})")
    spark.stop()

    if not args.no_simweb:
        w = simweb_eval()
        print(f"\nsimweb dup.sim.test: {w['pages']} pages with text of {w['fetched_of']} URLs; "
              "whole dedup (exact by text hash + survivor order, near SimHash <= 3):")
        for kind in ("exact", "near"):
            m = w[kind]
            print(f"  {kind:<5} flagged {m['flagged']:>3} of {m['redundant']:>3} redundant URLs"
                  f"  precision {m['precision']:.3f}  recall {m['recall']:.3f}")
        p, r, npred, ntrue = w["pairs"]
        print(f"  pairs judged the same: {npred} (truth {ntrue})  precision {p:.3f}  "
              f"recall {r:.3f}")
        for a, b, dist in w["missed"]:
            print(f"    missed pair {a} {b}: SimHash distance {dist} (each is near the group's"
                  " other pages; the dedup links them through those)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
