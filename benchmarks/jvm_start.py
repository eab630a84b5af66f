"""What a short-lived driver costs under two values of one driver setting, side by side.

    .venv/bin/python benchmarks/jvm_start.py [--pairs 3]
    .venv/bin/python benchmarks/jvm_start.py --compare spark.driver_jit=full,quick

Every `crawler` step (every Airflow task) starts a driver JVM. This runs the same `crawler`
commands as a user would, alternately with the setting at its two values (by default
`spark.class_data_sharing` off and auto: without and with the archive scripts/setup.sh builds,
recrawl/sparkenv/cds.py; `spark.driver_jit` full and quick is the compiler level, recrawl/sparkenv/jit.py), so
both sides see the same machine load, and prints the median wall
seconds and the CPU seconds of the whole process tree (the Python CLI, spark-submit and the JVM,
sampled every 0.1 s: the last tenth of a second of each process is not counted, alike on both
sides). The commands: `crawler init` on a new crawl home (the Delta DDL of every table), and
`crawler sql --engine spark` of a join over two tables of that home. With `--round SITES,PAGES`
also, on a simulated web of that size (the demo's configuration): `crawler inject` of every
page and one `crawler round` that fetches them (issue #16's "round with 100 URLs" is `--round
4,25`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
CRAWLER = [sys.executable, "-m", "app.cli"]
QUERY = ("SELECT c.status, count(*) AS n, max(h.host_rank) FROM crawl.crawldb c "
         "LEFT JOIN crawl.hosts h ON c.host = h.host GROUP BY c.status")


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of one `crawler` command."""
    t0 = time.monotonic()
    proc = subprocess.Popen(CRAWLER + args, env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root = psutil.Process(proc.pid)
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        try:
            for p in [root, *root.children(recursive=True)]:
                with p.oneshot():
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
        time.sleep(0.1)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stderr.read().decode()[-2000:]}")
    return wall, sum(cpu.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="runs per side and command")
    ap.add_argument("--compare", default="spark.class_data_sharing=off,auto",
                    metavar="KEY=A,B", help="the setting and its two values")
    ap.add_argument("--round", metavar="SITES,PAGES",
                    help="also inject and crawl one round of a simulated web this big")
    args = ap.parse_args()
    key, _, values = args.compare.partition("=")
    pair = tuple(values.split(","))
    if "." not in key or len(pair) != 2:
        raise SystemExit(f"--compare wants section.key=A,B, got {args.compare!r}")
    env_key = "RECRAWL_" + key.upper().replace(".", "__", 1)
    web = None
    if args.round:
        from simweb import SimWeb

        sites, pages = (int(x) for x in args.round.split(","))
        web = SimWeb(seed=7, n_sites=sites, pages_per_site=pages)
        web.start()
    try:
        return _compare(args, key, pair, env_key, web)
    finally:
        if web is not None:
            web.stop()


def _compare(args: argparse.Namespace, key: str, pair: tuple[str, ...], env_key: str, web) -> int:
    from app.airflow_demo import config_toml
    from app.demo import demo_config
    from recrawl.config import load_config
    from recrawl.sparkenv.cds import archive_path
    from recrawl.sparkenv.spark import find_jars

    cfg = load_config()
    archive = archive_path(cfg, find_jars(cfg))
    if archive is None or not archive.is_file():
        raise SystemExit("no CDS archive for this JVM and jars: run `.venv/bin/python -m recrawl.sparkenv.cds`")
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="jvm-start-") as tmp:
        for i in range(args.pairs):
            sides = pair if i % 2 == 0 else pair[::-1]
            for side in sides:
                home = Path(tmp) / f"{side}-{i}"
                env = dict(os.environ, RECRAWL_CRAWL__HOME=str(home), RECRAWL_SPARK__SHUFFLE_PARTITIONS="2")
                env[env_key] = side
                results.setdefault(("crawler init (new home)", side), []).append(run(["init"], env))
                results.setdefault(("crawler sql --engine spark", side), []).append(
                    run(["sql", QUERY, "--engine", "spark", "--format", "csv"], env))
                if web is None:
                    continue
                web.reset_state()
                conf = Path(tmp) / f"{side}-{i}.toml"
                conf.write_text(config_toml(demo_config(home)))
                seeds = Path(tmp) / "seeds.txt"
                urls = [u for site in web.world.sites for u in web.truth.pages(site.name)]
                seeds.write_text("\n".join(urls) + "\n")
                env = dict(env, RECRAWL_CONFIG=str(conf))
                results.setdefault((f"crawler inject ({len(urls)} URLs)", side), []).append(
                    run(["inject", str(seeds), "--date", "2026-11-01"], env))
                results.setdefault(("crawler round (one day)", side), []).append(
                    run(["round", "--date", "2026-11-01"], env))
    print(f"archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB); medians of {args.pairs} "
          f"runs per side, alternating; load average at the end {os.getloadavg()[0]:.1f}")
    print(f"{key}: {pair[0]} against {pair[1]}")
    a, b = (v[:8] for v in pair)
    print(f"{'command':<30} {'wall ' + a:>14} {'wall ' + b:>14} {'CPU ' + a:>14} {'CPU ' + b:>14}")
    for name in dict.fromkeys(n for n, _ in results):
        off, on = results[(name, pair[0])], results[(name, pair[1])]
        med = [statistics.median(x[k] for x in side) for side in (off, on) for k in (0, 1)]
        print(f"{name:<30} {med[0]:>13.1f}s {med[2]:>13.1f}s {med[1]:>13.1f}s {med[3]:>13.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
