"""Where a small round's time goes: wall seconds and Spark jobs per step, with the jobs named.

    .venv/bin/python benchmarks/round_cost.py [--sites 4 --pages 25 --rounds 3 --top 12]
    .venv/bin/python benchmarks/round_cost.py --variant spark.sql.codegen.wholeStage=false
    .venv/bin/python benchmarks/round_cost.py --sites-only --variant-set crawl.small_round_rows=0

With `--variant KEY=VALUE` (Spark SQL settings, repeatable) the same rounds run twice in the one
session, on two crawl homes, step by step alternately: the baseline configuration, then the
variant (set before and unset after each of its steps), so both see the same machine load; the
table then shows the two side by side. `--variant-set KEY=VALUE` gives the second crawl a
configuration of its own instead (e.g. Spark's writers for every commit); either way the two
crawls' tables are then compared URL by URL, column by column (`--sites-only` leaves out the
hostile hosts, whose timeouts make two crawls differ by timing).

Runs inject and a few rounds of the real steps (one Spark session, as `crawler round` does) over
the simulated web, the demo's configuration, and prints per step: wall seconds, Spark jobs, and
the job descriptions that cost the most time summed over the run (Delta names its internal jobs,
e.g. "Delta: Compute snapshot for version: 3"; the others are named by their call site). The
fetch step's floor is the politeness limit: the slowest host's requests x its delay.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import tempfile
import time
from collections import defaultdict


def _jobs(spark) -> list[tuple[int, str, float]]:
    """(job id, description, seconds) of every job the driver still remembers."""
    store = spark.sparkContext._jsc.sc().statusStore()
    out = []
    jobs = store.jobsList(None)  # a Scala Seq; None is a null status filter (all jobs)
    for i in range(jobs.size()):
        job = jobs.apply(i)
        desc = job.description()
        name = str(desc.get()) if desc.isDefined() else str(job.name())
        sub, done = job.submissionTime(), job.completionTime()
        secs = (done.get().getTime() - sub.get().getTime()) / 1000 if sub.isDefined() and done.isDefined() else 0.0
        out.append((int(job.jobId()), name, secs))
    return out


def _label(name: str) -> str:
    """Group job names: drop versions, round ids and paths so the same operation adds up."""
    name = re.sub(r"version: ?\d+", "version N", name)
    name = re.sub(r"(file|s3a?):/\S+", "<path>", name)
    name = re.sub(r"\d{4}-\d\d-\d\d\S*", "<date>", name)
    return name.split("\n")[0][:90]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=4)
    ap.add_argument("--pages", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--top", type=int, default=12, help="job groups to list per step")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="configuration override, e.g. spark.shuffle_partitions=2")
    ap.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE",
                    help="Spark SQL setting of a second crawl run side by side with the baseline")
    ap.add_argument("--base", action="append", default=[], metavar="KEY=VALUE",
                    help="Spark SQL setting of both runs of --variant (the common ground)")
    ap.add_argument("--variant-set", action="append", default=[], metavar="KEY=VALUE",
                    help="configuration override of the second crawl only, e.g. "
                         "crawl.small_round_rows=0 (its tables are then compared URL by URL)")
    ap.add_argument("--sites-only", action="store_true",
                    help="seed the ordinary sites only, not the hostile hosts (whose timeouts "
                         "make two crawls differ by timing, not by code)")
    args = ap.parse_args(argv)
    if args.variant or args.variant_set:
        return compare(args)

    from app.cli import run_step
    from app.demo import demo_config
    from recrawl.rules.rounds import STEPS, parse_date, round_id_for
    from recrawl.sparkenv.spark import get_spark
    from recrawl.store.tables import init_tables
    from simweb import SimWeb
    from spark_jobs import inject

    overrides = _overrides(args.set, "--set")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, SimWeb(seed=7, n_sites=args.sites,
                                                      pages_per_site=args.pages) as web:
        cfg = demo_config(tmp, **{"spark.extra": {"spark.ui.retainedJobs": "100000"}})
        if overrides:
            cfg = cfg.with_overrides(overrides, "--set")
        spark = get_spark(cfg, "round-cost")
        print(f"session start: {time.perf_counter() - t0:.1f} s")
        seen: set[int] = set()
        groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))

        def account(step: str, started: float) -> str:
            wall = time.perf_counter() - started
            new = [j for j in _jobs(spark) if j[0] not in seen]
            seen.update(j[0] for j in new)
            for _, name, secs in new:
                groups[step][_label(name)].append(secs)
            return f"{wall:6.1f} s {len(new):4d} jobs ({sum(s for _, _, s in new):5.1f} s in jobs)"

        s = time.perf_counter()
        init_tables(spark, cfg)
        seeds = f"{tmp}/seeds.txt"
        with open(seeds, "w") as f:
            f.write("\n".join(web.seed_urls()) + "\n")
        start = parse_date("2026-11-01")
        inject.run(spark, cfg, seeds, start)
        print(f"init+inject      {account('init+inject', s)}")
        for i in range(args.rounds):
            logical = start + dt.timedelta(days=i)
            web.set_day(i)
            rid = round_id_for(cfg, logical)
            r0 = time.perf_counter()
            for step in STEPS:
                s = time.perf_counter()
                counts = run_step(spark, cfg, step, rid, logical)
                extra = f" generated={counts['generated']}" if step == "generate" else ""
                print(f"round {i} {step:9s} {account(step, s)}{extra}")
            print(f"round {i} total    {time.perf_counter() - r0:6.1f} s")
        print(f"\njob groups by time summed over the run (top {args.top} per step):")
        for step, named in groups.items():
            print(f"[{step}]")
            ranked = sorted(named.items(), key=lambda kv: -sum(kv[1]))[: args.top]
            for name, secs in ranked:
                print(f"  {sum(secs):6.1f} s {len(secs):4d}x  {name}")
        spark.stop()
    return 0


def compare(args) -> int:
    """Baseline and variant, step by step alternately, on two homes over one simulated web."""
    from app.cli import run_step
    from app.demo import demo_config
    from recrawl.rules.rounds import STEPS, parse_date, round_id_for
    from recrawl.sparkenv.spark import get_spark
    from recrawl.store.tables import init_tables
    from simweb import SimWeb
    from spark_jobs import inject

    variant = dict(kv.split("=", 1) for kv in args.variant)
    overrides = _overrides(args.set, "--set")
    with tempfile.TemporaryDirectory() as tmp, SimWeb(seed=7, n_sites=args.sites,
                                                      pages_per_site=args.pages) as web:
        cfgs = []
        for name in ("base", "variant"):
            cfg = demo_config(f"{tmp}/{name}", **{"spark.extra": {"spark.ui.retainedJobs": "100000"}})
            cfgs.append(cfg.with_overrides(overrides, "--set") if overrides else cfg)
        if args.variant_set:
            cfgs[1] = cfgs[1].with_overrides(_overrides(args.variant_set, "--variant-set"),
                                             "--variant-set")
        spark = get_spark(cfgs[0], "round-cost")
        for k, v in (kv.split("=", 1) for kv in args.base):
            spark.conf.set(k, v)
        seen = {j[0] for j in _jobs(spark)}
        seeds = f"{tmp}/seeds.txt"
        urls = web.seed_urls()
        if args.sites_only:
            urls = [u for u in urls if u.split("/")[2].startswith("site")]
        with open(seeds, "w") as f:
            f.write("\n".join(urls) + "\n")
        start = parse_date("2026-11-01")

        def timed(which: int, fn) -> tuple[float, int]:
            saved = {k: spark.conf.get(k, None) for k in variant}
            if which:
                for k, v in variant.items():
                    spark.conf.set(k, v)
            try:
                t = time.perf_counter()
                fn()
                wall = time.perf_counter() - t
            finally:
                for k, v in saved.items():
                    spark.conf.unset(k) if v is None else spark.conf.set(k, v)
            new = [j for j in _jobs(spark) if j[0] not in seen]
            seen.update(j[0] for j in new)
            return wall, len(new)

        for which, cfg in enumerate(cfgs):
            timed(which, lambda cfg=cfg: (init_tables(spark, cfg), inject.run(spark, cfg, seeds, start)))
        print(f"base: {dict(kv.split('=', 1) for kv in args.base)}")
        print(f"variant: {variant}")
        print(f"{'round step':18s} {'base s':>8s} {'jobs':>5s} {'variant s':>10s} {'jobs':>5s}")
        totals = [[0.0, 0], [0.0, 0]]
        for i in range(args.rounds):
            logical = start + dt.timedelta(days=i)
            web.set_day(i)
            rid = round_id_for(cfgs[0], logical)
            for step in STEPS:
                res = [timed(w, lambda c=c, s=step, r=rid, d=logical: run_step(spark, c, s, r, d))
                       for w, c in enumerate(cfgs)]
                for t, r in zip(totals, res, strict=True):
                    t[0] += r[0]
                    t[1] += r[1]
                print(f"{i} {step:16s} {res[0][0]:8.1f} {res[0][1]:5d} {res[1][0]:10.1f} {res[1][1]:5d}")
        print(f"{'total':18s} {totals[0][0]:8.1f} {totals[0][1]:5d} {totals[1][0]:10.1f} {totals[1][1]:5d}")
        print("\ncolumns that differ between the two crawls, URL by URL (rows of one URL "
              "in one round; WARC record ids and capture times differ by nature):")
        for table, diff in compare_tables(spark, cfgs).items():
            print(f"  {table:12s} {diff}")
        spark.stop()
    return 0


def _overrides(items: list[str], flag: str) -> dict:
    """SECTION.KEY=VALUE items as configuration overrides, values read as the CLI's --set reads
    them (TOML: 0 is an int, true a bool, anything else a string)."""
    from recrawl.config import parse_value

    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"round_cost: {flag} {item!r}: expected SECTION.KEY=VALUE")
        key, raw = item.split("=", 1)
        out[key.strip()] = parse_value(raw.strip())
    return out


# Per capture and per clock: a new record id and WARC file, the wall-clock time and duration of
# each fetch, the executor that ran it, robots.txt's fetch and expiry times.
VOLATILE = {"warc_record_id", "payload_record_id", "warc_date", "payload_warc_date", "fetch_time",
            "warc_file", "warc_offset", "warc_length", "duration_ms", "executor_id",
            "updated_at", "fetched_at", "expires_at"}


def compare_tables(spark, cfgs) -> dict[str, str]:
    """Per table: row counts of both crawls and, per column, how many rows differ (keyed by
    round and URL, or URL, or host)."""
    from recrawl.store.schemas import TABLES
    from recrawl.store.tables import read

    out = {}
    for name in ("crawldb", "fetch_list", "fetches", "pages", "links", "hosts", "robots"):
        cols = [f.name for f in TABLES[name].schema.fields]
        keys = [k for k in ("round_id", "url", "src_url", "dst_url", "host") if k in cols][:3]
        rows = [{tuple(r[k] for k in keys): r.asDict(recursive=True)
                 for r in read(spark, c, name).collect()} for c in cfgs]
        diff = {}
        for key in set(rows[0]) | set(rows[1]):
            a, b = rows[0].get(key), rows[1].get(key)
            for col in cols:
                if col not in VOLATILE and (a or {}).get(col, "<absent>") != (b or {}).get(col, "<absent>"):
                    diff[col] = diff.get(col, 0) + 1
        out[name] = f"{len(rows[0])} / {len(rows[1])} rows; differing: {diff or 'none'}"
    return out


if __name__ == "__main__":
    sys.exit(main())
