"""The Airflow demo: the simulated web crawled for several logical days by the `crawl_cycle` DAG.

What `bash scripts/demo.sh` runs once both virtualenvs exist. It serves the simulated web
(`python -m simweb serve`, a separate process, as a real site would be), writes the demo
configuration as a TOML file (`RECRAWL_CONFIG`, read by every `crawler` a task starts), runs the
`inject` DAG, then backfills `crawl_cycle` one logical day at a time with `airflow dags test
crawl_cycle <date>` — setting the simulated web's day before each run, so pages change between
rounds — and ends with a summary from the Delta tables and the server-side politeness and
robots audit. The runs are recorded in the Airflow metadata DB (AIRFLOW_HOME=var/airflow), so
the UI shows them afterwards. `python -m app.demo` is the quicker in-process variant.

Why `dags test` per day rather than a backfill: a backfill gives no hook between two days to
move the simulated web's clock; `dags test` runs one DAG run to completion in the foreground
with the same task code. Backfills under the scheduler are tested by
tests/dags/test_scheduler.py (docs/airflow.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analyst.analytics import write_reference_rates
from app.daemon import stop_all
from app.demo import demo_config, summary
from recrawl.config import PROJECT_ROOT, Config, load_config
from recrawl.sparkenv.spark import get_spark

ROOT = PROJECT_ROOT
# DAG params that size a round, and the configuration keys they set (dags/recrawl_airflow).
ROUND_PARAMS = {
    "top_n": "generate.top_n",
    "max_per_host": "generate.max_per_host",
    "partitions": "generate.partitions",
    "time_budget_s": "fetcher.time_budget_s",
}
# count lines only (`key=value`), not the progress and stage lines steps print meanwhile
STEP_LINE = re.compile(r"\]\s+((?:generate|fetch|parse|dedup|updatedb|schedule) \w+: [\w.]+=.*?)\s+\[airflow")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


def config_toml(cfg: Config) -> str:
    """The keys of `cfg` that differ from recrawl/defaults.toml, as a TOML file for RECRAWL_CONFIG."""
    defaults = load_config(environ={})
    lines = ["# Written by app.airflow_demo: the demo configuration (keys that differ from the defaults)."]
    for section, values in cfg.values.items():
        changed = {k: v for k, v in values.items() if defaults.section(section)[k] != v}
        if changed:
            lines.append(f"\n[{section}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in changed.items()]
    return "\n".join(lines) + "\n"


def round_conf(cfg: Config) -> dict[str, Any]:
    """`crawl_cycle` params (the trigger form's values) that reproduce `cfg`'s round size."""
    return {param: cfg.get(key) for param, key in ROUND_PARAMS.items()}


def start_simweb(port: int, sites: int, pages: int, log: Path, out: Path) -> tuple[subprocess.Popen, int]:
    """Serve the simulated web in a child process; returns it and the port it listens on."""
    cmd = [sys.executable, "-m", "simweb", "serve", "--port", str(port), "--seed", "42",
           "--sites", str(sites), "--pages", str(pages), "--log", str(log)]
    with open(out, "w", encoding="utf-8") as sink:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        m = re.search(r"127\.0\.0\.1:(\d+)", out.read_text(encoding="utf-8"))
        if m:
            return proc, int(m.group(1))
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"simweb did not start: {out.read_text(encoding='utf-8').strip() or 'no output'}")


def airflow_env(airflow_home: Path, config_file: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(AIRFLOW_HOME=str(airflow_home), RECRAWL_CONFIG=str(config_file))
    return env


def dags_test(dag_id: str, date: str, conf: Mapping[str, Any], env: Mapping[str, str], log: Path) -> int:
    """`airflow dags test DAG DATE --conf JSON` with its output in `log`; returns the exit code."""
    airflow = ROOT / ".venv-airflow" / "bin" / "airflow"
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.run(
            [str(airflow), "dags", "test", dag_id, date, "--conf", json.dumps(conf)],
            cwd=ROOT, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
        ).returncode


def step_lines(log: Path) -> list[str]:
    """The `crawler` count lines (e.g. `fetch 20261101: fetched=...`) in a dags-test log."""
    return STEP_LINE.findall(log.read_text(encoding="utf-8", errors="replace"))


def audit(log_file: Path, sites: int, pages: int, cfg: Config) -> tuple[int, list[str], list[str]]:
    """Server-side politeness and robots violations in simweb's request log."""
    from simweb.audit import politeness_violations, robots_violations  # lazy: heavy (simweb: numpy, simhash)
    from simweb.site import World  # lazy: heavy (simweb: numpy, simhash)
    from simweb.truth import Truth  # lazy: heavy (simweb: numpy, simhash)

    truth = Truth(World(42, sites, pages), lambda: 0)
    with open(log_file, encoding="utf-8") as f:
        log = [json.loads(line) for line in f if line.strip()]
    token = cfg.get("fetcher.robots_token")
    cap = cfg.get("fetcher.max_crawl_delay_s")
    delays = {h: min(d, cap) for h, d in truth.crawl_delays(token).items()}
    pv = politeness_violations(log, cfg.get("fetcher.min_delay_s"), delays)
    rv = robots_violations(log, truth, token)
    return len(log), pv, rv


def parser() -> argparse.ArgumentParser:
    """The demo's command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default="var/demo", help="crawl home for the demo (wiped first)")
    ap.add_argument("--rounds", type=int, default=3, help="logical days to crawl")
    ap.add_argument("--start", default="2026-11-01", help="logical date of the first round")
    ap.add_argument("--sites", type=int, default=8)
    ap.add_argument("--pages", type=int, default=20)
    ap.add_argument("--time-budget", type=float, default=30.0, help="fetch time budget per task (s)")
    ap.add_argument("--port", type=int, default=0, help="simweb port (0: any free port)")
    # PageRank is the design's last step: without it the scores table, the PageRank examples
    # of docs/analysts.md and the report's PageRank section are empty.
    ap.add_argument("--no-pagerank", dest="pagerank", action="store_false",
                    help="skip the pagerank DAG at the end (it runs by default)")
    ap.add_argument("--pagerank", action="store_true", help=argparse.SUPPRESS)  # the old opt-in
    return ap


def main(argv: list[str] | None = None) -> int:
    from simweb.web import control  # lazy: heavy (simweb: numpy, simhash)

    args = parser().parse_args(argv)
    home = (ROOT / args.home).resolve() if not Path(args.home).is_absolute() else Path(args.home)
    shutil.rmtree(home, ignore_errors=True)
    (home / "logs").mkdir(parents=True)
    airflow_home = Path(os.environ.get("AIRFLOW_HOME", ROOT / "var" / "airflow")).resolve()
    server_log = home / "server-log.jsonl"
    web, port = start_simweb(args.port, args.sites, args.pages, server_log, home / "logs" / "simweb.out")
    print(f"simulated web: seed 42, {args.sites} sites x {args.pages} pages (+ hostile hosts) "
          f"on 127.0.0.1:{port}", flush=True)
    failed: list[str] = []
    cfg = None
    try:
        # Tasks hand their verbs to one warm driver (spark.driver_daemon "auto" under Airflow,
        # app/daemon.py), kept in the demo's folder and stopped at the end.
        cfg = demo_config(home, **{"fetcher.time_budget_s": args.time_budget, "spark.shuffle_partitions": 2,
                                   "spark.driver_daemon_dir": str(home / "driver")})
        config_file = home / "recrawl.toml"
        config_file.write_text(config_toml(cfg), encoding="utf-8")
        seeds = home / "seeds.txt"
        seeds.write_text("# demo seeds\n" + control(port, "/__sim/seeds"), encoding="utf-8")
        # simweb's true change rates beside the tables (the report's estimated-vs-true section)
        write_reference_rates(cfg.home, json.loads(control(port, "/__sim/rates")))
        env = airflow_env(airflow_home, config_file)
        start = dt.date.fromisoformat(args.start)

        t0 = time.monotonic()
        rc = dags_test("inject", start.isoformat(), {"seeds": str(seeds)}, env, home / "logs" / "inject.log")
        print(f"inject DAG (crawler init, crawler inject): {'ok' if rc == 0 else 'FAILED'} "
              f"in {time.monotonic() - t0:.0f}s", flush=True)
        if rc != 0:
            failed.append("inject")
            return 1
        conf = round_conf(cfg)
        print(f"crawl_cycle params: {json.dumps(conf)}", flush=True)
        for i in range(args.rounds):
            day = (start + dt.timedelta(days=i)).isoformat()
            control(port, f"/__sim/day?set={i}")
            t0 = time.monotonic()
            log = home / "logs" / f"crawl_cycle-{day}.log"
            rc = dags_test("crawl_cycle", day, conf, env, log)
            print(f"crawl_cycle {day} (simulated day {i}): {'ok' if rc == 0 else 'FAILED'} "
                  f"in {time.monotonic() - t0:.0f}s", flush=True)
            for line in step_lines(log):
                print(f"    {line}", flush=True)
            if rc != 0:
                failed.append(f"crawl_cycle {day} (log: {log})")
                break
        if args.pagerank and not failed:
            t0 = time.monotonic()
            last = (start + dt.timedelta(days=args.rounds - 1)).isoformat()
            rc = dags_test("pagerank", last, {}, env, home / "logs" / "pagerank.log")
            print(f"pagerank DAG: {'ok' if rc == 0 else 'FAILED'} in {time.monotonic() - t0:.0f}s", flush=True)
            if rc != 0:
                failed.append("pagerank")
    finally:
        web.terminate()
        web.wait(timeout=30)
        if cfg is not None:
            stop_all(cfg)

    print()
    spark = get_spark(cfg, "recrawl-demo-summary")
    for line in summary(spark, cfg):
        print(line)
    spark.stop()
    n, pv, rv = audit(server_log, args.sites, args.pages, cfg)
    print(f"server saw {n} requests; politeness violations: {len(pv)}; robots violations: {len(rv)}")
    for v in (pv + rv)[:10]:
        print("  ", v)
    rel = os.path.relpath(home, ROOT)
    from app.replay import build_collection  # lazy: heavy (fetcher: warcio, urllib3, fsspec)

    coll = build_collection(cfg)
    print(f"pywb collection: {coll.warcs} WARC files of {coll.rounds} rounds")
    print(f"""
Tables and WARCs: {rel}/ (config {rel}/recrawl.toml, task logs {rel}/logs/). Query them:
  RECRAWL_CONFIG={rel}/recrawl.toml .venv/bin/crawler sql "SELECT status, count(*) FROM crawldb GROUP BY 1"
Browse the captures in pywb (http://127.0.0.1:8090/crawl/, the capture calendar per URL):
  RECRAWL_CONFIG={rel}/recrawl.toml .venv/bin/crawler replay
Watch and re-run in the Airflow UI (http://127.0.0.1:8080, no login; Ctrl-C stops it):
  .venv/bin/python -m simweb serve --port {port} --seed 42 --sites {args.sites} --pages {args.pages} &
  PATH=$PWD/.venv-airflow/bin:$PATH AIRFLOW_HOME={shlex.quote(os.path.relpath(airflow_home, ROOT))} \\
    RECRAWL_CONFIG={rel}/recrawl.toml airflow standalone
The crawl_cycle runs above are listed there. DAGs start paused: unpause crawl_cycle for the
scheduler to run cleared or triggered runs (it then also schedules today's round); a completed
round is skipped unless triggered with force=true. See docs/airflow.md.""")
    if failed:
        print("FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 1 if pv or rv else 0


if __name__ == "__main__":
    sys.exit(main())
