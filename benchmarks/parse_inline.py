"""Parse inside the fetch (`parse.inline`) against parse after fetch, side by side on one web.

    .venv/bin/python benchmarks/parse_inline.py [--sites 40 --pages 50 --delay 0.1 --threads 32]
        [--hostile] [--steps generate,fetch,parse,dedup] [--set SECTION.KEY=VALUE ...]

Every page of `--sites` simulated sites (`--pages` each; `--hostile` adds the hostile hosts'
home pages) is injected, so round 0 fetches them all. The web is served by `simweb serve` in a
process of its own, and its request log is audited at the end (gaps, overlaps, robots.txt). The
round's steps then run on two crawl homes in one Spark session, step by step alternately (the
same machine load for both): the separate path (`parse.inline = false`: the parse step reads
the WARCs) and the inline one (the default). Per step and path: wall seconds, CPU seconds of
the whole process tree (this driver, its JVM, the Python workers and the parse pools'
processes: `TreeCpu`, psutil samples; then split by process, with the JVM's GC seconds) and
the Spark job stages that cost the most wall time
(`recrawl.sparkenv.joblabels.stage` names them). Last, pages per second of the steps run
(`--steps`, default the whole round; updatedb and schedule read the same tables on both paths,
so on a loaded machine `--steps generate,fetch,parse,dedup` keeps a run under five minutes),
and the tables compared URL by URL (benchmarks/round_cost.compare_tables, plus `duplicates`).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from round_cost import _jobs, _label, _overrides, compare_tables  # noqa: E402

PATHS = ("separate", "inline")


class TreeCpu:
    """CPU seconds of this process and every descendant, sampled every `interval` s by a
    thread: per process (pid and start time) the most CPU it was seen with, summed over every
    process seen, and split by kind (:meth:`split`: the JVM, Spark's Python workers with the
    parse pools under them, the simulated web's server, this driver). A reaped child's CPU
    reaches its parent's children_* counters only if that parent waits for it, and the parse
    pools' workers and Spark's Python workers are reaped by processes that may exit first:
    reading children_* made a step's CPU go negative. What a process that lived less than
    `interval` spent is missed (none of these do)."""

    KINDS = ("jvm", "workers", "web", "driver")

    def __init__(self, web_pid: int | None = None, interval: float = 0.5) -> None:
        import threading

        self._seen: dict[tuple[int, float], float] = {}
        self._kind: dict[tuple[int, float], str] = {}
        self._web_pid = web_pid
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._run, name="tree-cpu", daemon=True)
        self._thread.start()

    def _kind_of(self, p: psutil.Process, me: psutil.Process) -> str:
        if p.pid == me.pid:
            return "driver"
        if p.pid == self._web_pid:
            return "web"
        return "jvm" if "java" in p.name() else "workers"

    def _sample(self) -> None:
        me = psutil.Process()
        for p in [me, *me.children(recursive=True)]:
            try:
                with p.oneshot():
                    key, t = (p.pid, p.create_time()), p.cpu_times()
                    kind = self._kind.get(key) or self._kind_of(p, me)
            except psutil.Error:
                continue
            with self._lock:
                self._seen[key] = max(self._seen.get(key, 0.0), t.user + t.system)
                self._kind[key] = kind

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def __call__(self) -> float:
        """CPU seconds so far (a fresh sample first)."""
        return sum(self.split().values())

    def split(self) -> dict[str, float]:
        """CPU seconds so far by kind of process (a fresh sample first)."""
        self._sample()
        out = dict.fromkeys(self.KINDS, 0.0)
        with self._lock:
            for key, secs in self._seen.items():
                out[self._kind[key]] += secs
        return out

    def close(self) -> None:
        self._stop.set()


def gc_seconds(spark) -> float:
    """The driver JVM's garbage-collection time so far, every collector (JMX)."""
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    return sum(b.getCollectionTime() for b in beans) / 1000


@contextlib.contextmanager
def served(args: argparse.Namespace, log: str) -> Iterator[tuple[int, int]]:
    """The simulated web, served by `simweb serve` in a process of its own (as a crawl's web is
    by other machines; in this process its threads would share the driver's GIL), its request
    log appended to `log`: its port and pid. Every page is rendered before the port is said (`--warm`):
    the server caches each body, and the path that fetched first used to pay all the rendering
    on the same two cores (its politeness floor, which counts response times, was 94 s against
    the second path's 57 s on the 110k round)."""
    with subprocess.Popen([sys.executable, "-m", "simweb", "serve", "--seed", "7", "--sites",
                           str(args.sites), "--pages", str(args.pages), "--port", "0",
                           "--log", log, "--warm"],
                          stdout=subprocess.PIPE, text=True,
                          cwd=Path(__file__).resolve().parent.parent) as proc:
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            found = re.search(r"127\.0\.0\.1:(\d+)", line)
            if not found:
                raise RuntimeError(f"simweb serve did not say its port: {line!r}")
            yield int(found.group(1)), proc.pid
        finally:
            proc.terminate()


def _audit(log_path: str, web, cfg) -> None:
    """Politeness and robots.txt as the server saw them, over every path's requests (the paths
    fetch one after the other: a host's first request of one comes minutes after its last of
    the other)."""
    import json

    from simweb.audit import politeness_violations, robots_violations

    with open(log_path, encoding="utf-8") as fh:
        log = [json.loads(line) for line in fh if line.strip()]
    cap = float(cfg.get("fetcher.max_crawl_delay_s"))
    delays = {h: min(d, cap) for h, d in web.truth.crawl_delays().items()}
    gaps = politeness_violations(log, float(cfg.get("fetcher.min_delay_s")), delays)
    robots = robots_violations(log, web.truth)
    print(f"server's log: {len(log)} requests, {len(gaps)} politeness (gap or overlap) and "
          f"{len(robots)} robots.txt violations" + "".join(f"\n  {v}" for v in (gaps + robots)[:5]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=40)
    ap.add_argument("--pages", type=int, default=50)
    ap.add_argument("--delay", type=float, default=0.1, help="fetcher.min_delay_s")
    ap.add_argument("--threads", type=int, default=32, help="fetcher.threads")
    ap.add_argument("--hostile", action="store_true", help="seed the hostile hosts too")
    ap.add_argument("--top", type=int, default=4, help="job stages listed per step and path")
    ap.add_argument("--steps", default="", help="comma-separated steps (default: the round's)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--paths", default=",".join(PATHS),
                    help="which paths to run, in this order within each step (default both, the "
                         "separate first; one alone skips the comparison)")
    args = ap.parse_args(argv)
    paths = list(dict.fromkeys(p.strip() for p in args.paths.split(",") if p.strip()))
    if not paths or set(paths) - set(PATHS):
        ap.error(f"--paths takes {' and/or '.join(PATHS)}, got {args.paths!r}")

    from app.cli import run_step
    from app.demo import demo_config
    from recrawl.rules.rounds import STEPS, parse_date, round_id_for
    from recrawl.sparkenv.spark import get_spark
    from recrawl.store.tables import init_tables, read
    from simweb import SimWeb
    from spark_jobs import inject

    overrides = {
        "fetcher.min_delay_s": args.delay, "fetcher.threads": args.threads,
        "fetcher.time_budget_s": 600.0, "generate.top_n": args.sites * args.pages + 1000,
        "generate.max_per_host": args.pages + 10, "crawl.max_depth": 10,
        "spark.extra": {"spark.ui.retainedJobs": "100000"},
        **_overrides(args.set, "--set"),
    }
    web = SimWeb(seed=7, n_sites=args.sites, pages_per_site=args.pages)  # its world, unserved
    with (tempfile.TemporaryDirectory() as tmp,
          served(args, f"{tmp}/requests.jsonl") as (port, web_pid)):
        cfgs = [demo_config(f"{tmp}/{name}", **overrides)
                .with_overrides({"parse.inline": name == "inline"}, name) for name in paths]
        spark = get_spark(cfgs[0], "parse-inline")
        seen = {j[0] for j in _jobs(spark)}
        tree_cpu = TreeCpu(web_pid)  # sampled from here on: Spark's processes exist now
        urls = [f"http://{h}:{port}{path}" for h in web.hosts() if h.startswith("site")
                for path in web.world.host(h).pages()]
        if args.hostile:
            urls += [f"http://{h}:{port}/" for h in web.hosts() if not h.startswith("site")]
        seeds = f"{tmp}/seeds.txt"
        Path(seeds).write_text("\n".join(urls) + "\n")
        start = parse_date("2026-11-01")
        for cfg in cfgs:
            init_tables(spark, cfg)
            inject.run(spark, cfg, seeds, start)
        seen.update(j[0] for j in _jobs(spark))
        rid = round_id_for(cfgs[0], start)
        wall = defaultdict(float)
        cpu = defaultdict(float)
        stages: dict[tuple[str, str], dict[str, float]] = {}
        split: dict[tuple[str, str], str] = {}
        counts: dict[tuple[str, str], dict] = {}
        print(f"{len(urls)} URLs injected; {args.sites} sites x {args.pages} pages, delay "
              f"{args.delay} s, {args.threads} threads per fetch task")
        print(f"{'step':10s}" + "".join(f" {p + ' wall':>14s} {'CPU':>7s}" for p in paths))
        for step in [s for s in STEPS if not args.steps or s in args.steps.split(",")]:
            line = f"{step:10s}"
            for path, cfg in zip(paths, cfgs, strict=True):
                s0, g0, t0 = tree_cpu.split(), gc_seconds(spark), time.perf_counter()
                counts[step, path] = run_step(spark, cfg, step, rid, start)
                w, s1 = time.perf_counter() - t0, tree_cpu.split()
                by_kind = {k: s1[k] - s0[k] for k in s1}
                c = sum(by_kind.values())
                split[step, path] = " ".join(f"{k} {v:.1f}" for k, v in by_kind.items()) + \
                    f"; JVM GC {gc_seconds(spark) - g0:.1f} s"
                wall[path] += w
                cpu[path] += c
                line += f" {w:14.1f} {c:7.1f}"
                new = [j for j in _jobs(spark) if j[0] not in seen]
                seen.update(j[0] for j in new)
                by: dict[str, float] = defaultdict(float)
                for _, name, secs in new:
                    by[_label(name)] += secs
                stages[step, path] = by
            print(line, flush=True)
        print(f"{'all':10s}" + "".join(f" {wall[p]:14.1f} {cpu[p]:7.1f}" for p in paths))
        for path in paths:
            pages = counts["parse", path]["pages"]
            fetch = counts["fetch", path]
            print(f"{path}: {pages} pages, {pages / wall[path]:.1f} pages/s end to end; fetch "
                  f"{fetch.get('fetched', 0)} fetched, politeness violations "
                  f"{fetch.get('politeness_violations')}, slowest task "
                  f"{fetch.get('task_max_ms', 0) / 1000:.1f} s (floor "
                  f"{fetch.get('polite_floor_ms', 0) / 1000:.1f} s), pages parsed inline "
                  f"{fetch.get('pages_inline', 0)}; parse took {counts['parse', path].get('parsed_inline', 0)} "
                  "from the fetch")
        _audit(f"{tmp}/requests.jsonl", web, cfgs[0])
        print("\nCPU seconds by process (the parse pools count under workers):")
        for (step, path), text in split.items():
            print(f"[{step} {path}] {text}")
        print(f"\nSpark job stages by wall seconds (top {args.top} per step and path):")
        for (step, path), by in stages.items():
            ranked = sorted(by.items(), key=lambda kv: -kv[1])[: args.top]
            print(f"[{step} {path}] " + "; ".join(f"{s:.1f} s {n}" for n, s in ranked))
        if len(cfgs) < 2:
            spark.stop()
            return 0
        print("\ncolumns that differ between the two paths, URL by URL:")
        for table, diff in compare_tables(spark, cfgs).items():
            print(f"  {table:12s} {diff}")
        dups = [sorted((r["url"], r["kind"], r["canonical_url"]) for r in
                       read(spark, c, "duplicates").collect()) for c in cfgs]
        print(f"  {'duplicates':12s} {len(dups[0])} / {len(dups[1])} rows; "
              f"{'equal' if dups[0] == dups[1] else 'DIFFER'}")
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
