"""The demo crawl: several rounds over the project's simulated web through the real stack.

Starts the simulated web (simweb) on 127.0.0.1, writes a demo configuration that maps
`*.sim.test` to it, injects the seeds, runs one round per logical day (setting the simulated
web's day first, so pages change over simulated time), then prints a summary from the Delta
tables and audits the server's request log for politeness and robots violations.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
from pathlib import Path

from analyst.analytics import write_reference_rates
from app.cli import run_step
from recrawl.config import Config, load_config
from recrawl.rules.rounds import STEPS, parse_date, round_id_for
from recrawl.sparkenv.spark import get_spark


def demo_config(home: str | Path, **extra) -> Config:
    """Configuration for crawling the simulated web: static DNS, loopback allowed, small caps."""
    values = {
        "crawl.home": str(home),
        "crawl.max_depth": 4,
        "fetcher.static_hosts": {"*.sim.test": "127.0.0.1"},
        "fetcher.allow_private_networks": ["127.0.0.1/32"],
        "fetcher.min_delay_s": 0.3,
        "fetcher.max_crawl_delay_s": 5.0,
        "fetcher.time_budget_s": 60.0,
        "fetcher.request_deadline_s": 6.0,
        "fetcher.read_timeout_s": 3.0,
        "fetcher.connect_timeout_s": 2.0,
        "fetcher.retry_after_max_s": 5.0,
        "fetcher.threads": 16,
        "generate.top_n": 2000,
        "generate.max_per_host": 40,
        "generate.partitions": 2,
        "spark.shuffle_partitions": 4,
        "updatedb.trap_pattern_cap": 25,
        "schedule.daily_budget": 400,
    }
    values.update(extra)
    return load_config().with_overrides(values, "demo")


def summary(spark, cfg: Config) -> list[str]:
    """A short crawl summary from the Delta tables."""
    from pyspark.sql import functions as F  # lazy: pyspark

    from recrawl.store.tables import read  # lazy: pyspark (via recrawl.store.tables)

    lines = []
    rounds = read(spark, cfg, "rounds").orderBy("round_id").collect()
    for r in rounds:
        c = r["counts"] or {}
        lines.append(
            f"round {r['round_id']} ({r['logical_date']}): generated {c.get('generate.generated', 0)}, "
            f"fetched {c.get('fetch.fetched', 0)}, not modified {c.get('fetch.not_modified', 0)}, "
            f"pages {c.get('parse.pages', 0)}, new urls {c.get('updatedb.new_urls', 0)}"
        )
    db = read(spark, cfg, "crawldb")
    status = {r["status"]: r["n"] for r in db.groupBy("status").agg(F.count("*").alias("n")).collect()}
    lines.append(f"crawldb: {db.count()} urls; " + ", ".join(f"{k}={v}" for k, v in sorted(status.items())))
    fs = read(spark, cfg, "fetches")
    fst = {r["fetch_status"]: r["n"] for r in fs.groupBy("fetch_status").agg(F.count("*").alias("n")).collect()}
    lines.append("fetch statuses (all rounds): " + ", ".join(f"{k}={v}" for k, v in sorted(fst.items())))
    hosts = read(spark, cfg, "hosts")
    lines.append(
        f"links: {read(spark, cfg, 'links').count()}, "
        f"duplicates: {read(spark, cfg, 'duplicates').count()}, "
        f"hosts: {hosts.count()}, trap hosts: {hosts.where('trap').count()}"
    )
    return lines


def parser() -> argparse.ArgumentParser:
    """The demo's command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default="var/demo", help="crawl home for the demo (wiped first)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--start", default="2026-11-01", help="logical date of the first round")
    ap.add_argument("--sites", type=int, default=12)
    ap.add_argument("--pages", type=int, default=25)
    # PageRank is the design's last step: without it the scores table, the PageRank examples
    # of docs/analysts.md and the report's PageRank section are empty.
    ap.add_argument("--no-pagerank", dest="pagerank", action="store_false",
                    help="skip PageRank after the last round (it runs by default)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)

    from recrawl.store.tables import init_tables  # lazy: pyspark (via recrawl.store.tables)
    from simweb import SimWeb  # lazy: heavy (simweb: numpy, simhash)
    from simweb.audit import politeness_violations, robots_violations  # lazy: heavy (simweb: numpy, simhash)
    from spark_jobs import inject  # lazy: pyspark (via recrawl.store.crawldb)

    home = Path(args.home).resolve()
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    web = SimWeb(seed=42, n_sites=args.sites, pages_per_site=args.pages,
                 log_path=str(home / "server-log.jsonl"))
    port = web.start()
    print(f"simulated web: {len(web.hosts())} hosts on 127.0.0.1:{port}")
    try:
        cfg = demo_config(home)
        # simweb's true change rates beside the tables: the report's and notebook 03's
        # estimated-vs-true comparison reads them (analyst.analytics.REFERENCE_RATES)
        write_reference_rates(cfg.home, web.truth.change_rates())
        spark = get_spark(cfg, "recrawl-demo")
        init_tables(spark, cfg)
        seeds = home / "seeds.txt"
        seeds.write_text("# demo seeds\n" + "\n".join(web.seed_urls()) + "\n")
        print("inject:", inject.run(spark, cfg, str(seeds), parse_date(args.start)))
        start = parse_date(args.start)
        for i in range(args.rounds):
            logical = start + dt.timedelta(days=i)
            web.set_day(i)
            rid = round_id_for(cfg, logical)
            for step in STEPS:
                counts = run_step(spark, cfg, step, rid, logical)
                print(f"  {step} {rid}: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
        if args.pagerank and args.rounds:
            from spark_jobs import pagerank  # lazy: pyspark (via recrawl.store.crawldb)

            counts = pagerank.run(spark, cfg, logical)
            print("pagerank: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
        print()
        for line in summary(spark, cfg):
            print(line)
        log = web.request_log()
        cap = cfg.get("fetcher.max_crawl_delay_s")  # longer Crawl-delays defer the host instead
        delays = {h: min(web.truth.crawl_delay(h) or 0.0, cap) for h in web.hosts()}
        pv = politeness_violations(log, cfg.get("fetcher.min_delay_s"), delays)
        rv = robots_violations(log, web.truth, cfg.get("fetcher.robots_token"))
        print(f"server saw {len(log)} requests; politeness violations: {len(pv)}; "
              f"robots violations: {len(rv)}")
        for v in (pv + rv)[:10]:
            print("  ", v)
        print(f"tables and WARCs under {home}; try: RECRAWL_CRAWL__HOME={home} "
              f".venv/bin/crawler sql \"SELECT status, count(*) FROM crawl.crawldb GROUP BY 1\"")
        from app.replay import build_collection  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

        coll = build_collection(cfg)
        print(f"pywb collection: {coll.warcs} WARC files of {coll.rounds} rounds; browse them: "
              f"RECRAWL_CRAWL__HOME={home} .venv/bin/crawler replay")
        return 1 if pv or rv else 0
    finally:
        web.stop()


if __name__ == "__main__":
    sys.exit(main())
