"""A round as an Airflow day runs it -- one `crawler` process per step -- with and without the warm
driver (spark.driver_daemon, app/daemon.py), side by side in one run.

    .venv/bin/python benchmarks/warm_round.py [--sites 6 --pages 30 --rounds 4 --top-n 100]
        [--modes off,on]

Two crawls of two identical simulated webs (same seed, own servers, so each crawl's politeness is
audited alone), one with `spark.driver_daemon = "off"` (every step its own driver JVM, what a
task did before), one with "on". Round by round, the two crawls alternate, so both see the same
machine load. Printed per round and mode: the URLs generate handed out, each step's wall
seconds as its caller sees them (process start to exit), the round's total, the total
without the fetch, and the fetch's politeness floor (simweb.audit.politeness_floor over the
requests the fetch made: the slowest host's response times plus its delays, the least any
polite crawler could have spent on them). `--modes on` runs only the warm driver.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEPS = ("generate", "fetch", "parse", "dedup", "updatedb", "schedule")
MODES = ("off", "on")


def main(argv: list[str] | None = None) -> int:
    from app.airflow_demo import config_toml
    from app.daemon import stop_all
    from app.demo import demo_config
    from simweb import SimWeb
    from simweb.audit import politeness_floor, politeness_violations, robots_violations

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites", type=int, default=6)
    ap.add_argument("--pages", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--top-n", type=int, default=100, help="generate.top_n: the round's size")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="off (a driver per step), on (the warm driver) or both")
    args = ap.parse_args(argv)
    modes = tuple(m for m in MODES if m in args.modes.split(","))
    if not modes:
        ap.error("--modes: off, on or off,on")

    with tempfile.TemporaryDirectory() as tmp:
        webs = {m: SimWeb(seed=11, n_sites=args.sites, pages_per_site=args.pages) for m in modes}
        for w in webs.values():
            w.start()
        cfgs, envs = {}, {}
        try:
            for m in modes:
                cfg = demo_config(Path(tmp, m), **{
                    "generate.top_n": args.top_n, "spark.shuffle_partitions": 2,
                    "spark.driver_daemon": m, "spark.driver_daemon_dir": str(Path(tmp, "driver"))})
                Path(tmp, m).mkdir()
                Path(tmp, f"{m}.toml").write_text(config_toml(cfg))
                Path(tmp, f"{m}-seeds.txt").write_text("\n".join(webs[m].seed_urls()) + "\n")
                cfgs[m] = cfg
                envs[m] = {**{k: v for k, v in os.environ.items() if not k.startswith("RECRAWL_")},
                           "RECRAWL_CONFIG": str(Path(tmp, f"{m}.toml"))}

            def crawler(m: str, *a: str) -> tuple[float, str]:
                t0 = time.monotonic()
                out = subprocess.run([sys.executable, "-m", "app.cli", *a], env=envs[m], cwd=ROOT,
                                     capture_output=True, text=True)
                if out.returncode != 0:
                    raise SystemExit(f"crawler {' '.join(a)} ({m}) failed:\n{out.stderr[-3000:]}")
                return time.monotonic() - t0, out.stdout

            # robots Crawl-delays, capped at the crawler's maximum as the fetcher caps them
            delays = {m: {h: min(webs[m].truth.crawl_delay(h) or 0.0,
                                 cfgs[m].get("fetcher.max_crawl_delay_s"))
                          for h in webs[m].hosts()} for m in modes}
            start = dt.date(2026, 11, 1)
            for m in modes:
                t_init, _ = crawler(m, "init")
                t_inj, _ = crawler(m, "inject", str(Path(tmp, f"{m}-seeds.txt")), "--date", str(start))
                print(f"{m:3s} init {t_init:5.1f} s, inject {t_inj:5.1f} s", flush=True)
            print(f"\n{'round':>5} {'mode':>4} {'urls':>5} " + " ".join(f"{s:>8}" for s in STEPS)
                  + f" {'total':>7} {'no fetch':>8} {'floor':>6}")
            totals: dict[str, list[tuple[int, float, float]]] = {m: [] for m in modes}
            for i in range(args.rounds):
                day = str(start + dt.timedelta(days=i))
                for m in modes:
                    webs[m].set_day(i)
                    secs, urls, floor = {}, 0, 0.0
                    for step in STEPS:
                        seen = len(webs[m].request_log())
                        secs[step], out = crawler(m, step, "--date", day)
                        if step == "fetch":
                            floor = politeness_floor(webs[m].request_log()[seen:],
                                                     cfgs[m].get("fetcher.min_delay_s"),
                                                     delays[m])
                        if step == "generate":
                            found = re.search(r"generated=(\d+)", out)
                            urls = int(found.group(1)) if found else 0
                    total = sum(secs.values())
                    totals[m].append((urls, total, total - secs["fetch"]))
                    print(f"{i:5d} {m:>4} {urls:5d} " + " ".join(f"{secs[s]:8.1f}" for s in STEPS)
                          + f" {total:7.1f} {total - secs['fetch']:8.1f} {floor:6.1f}", flush=True)
            print("\nrounds after the first (warm JVM for 'on'): mean seconds per round")
            for m in modes:
                later = totals[m][1:] or totals[m]
                n = len(later)
                print(f"  {m:3s}: {sum(u for u, _, _ in later) / n:6.1f} URLs, total "
                      f"{sum(t for _, t, _ in later) / n:6.1f} s, without the fetch "
                      f"{sum(x for _, _, x in later) / n:6.1f} s")
            for m in modes:
                log = webs[m].request_log()
                pv = politeness_violations(log, cfgs[m].get("fetcher.min_delay_s"), delays[m])
                rv = robots_violations(log, webs[m].truth, "recrawlbot")
                print(f"  {m:3s}: {len(log)} requests, politeness violations {len(pv)}, robots {len(rv)}")
        finally:
            if "on" in cfgs:
                stop_all(cfgs["on"])
            for w in webs.values():
                w.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
