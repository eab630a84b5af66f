"""A real Spark standalone cluster on 127.0.0.1: the crawl through the `crawler` CLI, then a fault.

One cluster for the module: a master and two workers (1 core each) started from pyspark's own
`bin/spark-class`, each its own process group, work folder and current directory, in a bare
environment (PATH=/usr/bin:/bin, no PYSPARK_PYTHON, no PYTHONPATH) in which `python3 -c
"import fetcher"` fails -- checked first. So every executor gets the project's dependencies from
the environment archive (scripts/pack_env.sh, `spark.archives`) and its code from the zip the
driver ships (`spark.submit.pyFiles`), as on a cluster of other machines (recrawl/sparkenv/cluster.py).
Tables and WARCs are on s3a:// (moto's S3 server, test_s3a.py's fixture).

One crawl for the module (the `cluster_crawl` fixture): `crawler init`, `inject` and two `round`s
as subprocesses, as an operator runs them, all served by one warm driver on the cluster
(`spark.driver_daemon = "on"`, app/daemon.py: one Spark application whose executors unpack the
archive once, instead of an application per verb at minutes apiece on a loaded machine), then
`pagerank` through scripts/spark_submit.sh (client mode), an application of its own. In the
second round, once the fetch's first requests reach the web, one executor that the driver's REST
API shows running a task is killed with SIGKILL; Spark runs the task again on another executor.

* ``test_crawl_on_the_cluster``: the four verbs ran in one application of the master, every
  fetch row was fetched by an executor (never "driver"),
  zero politeness and robots violations in simweb's log, every fetch row points at a readable
  WARC record in the bucket, and the same rows and statuses per URL as the same crawl in
  `local[*]` (run in this process's Spark session, on the same web, with no executor killed).
* ``test_executor_killed_mid_fetch``: the killed round still ended with zero politeness
  violations across both attempts, one fetches row per URL, the killed executor in no row, and
  every referenced WARC readable.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from io import BytesIO
from pathlib import Path

import pytest

from tests.spark_jobs.test_s3a import BUCKET, s3, spark_extra  # noqa: F401 (s3 is a fixture)
from tests.standalone import standalone_cluster, ui_json

# A Spark application on the cluster (driver JVM, two executors unpacking the archive) costs
# minutes on a loaded 2-core machine.
pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.timeout(2700)]

ROOT = Path(__file__).resolve().parents[2]
# This helper's port range (master, its web UI, workers, driver and block manager ports).
MASTER_PORT, MASTER_UI, DRIVER_UI = 17077, 17080, 17040
WORKER_PORTS, WORKER_UIS = (17091, 17092), (17081, 17082)
DATES = ("2026-11-01", "2026-11-02")
MIN_DELAY = 0.4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3):  # noqa: F811 (test_s3a's moto fixture)
    base = tmp_path_factory.mktemp("cluster")
    workers = [(port, ui, 1) for port, ui in zip(WORKER_PORTS, WORKER_UIS, strict=True)]
    with standalone_cluster(base, MASTER_PORT, MASTER_UI, workers, s3["env"]) as c:
        yield {**c, "s3": s3}


@pytest.fixture(scope="module")
def web(cluster):
    from simweb import SimWeb

    w = SimWeb(seed=7, n_sites=2, pages_per_site=6,
               log_path=str(cluster["base"] / "server-log.jsonl"))
    w.start()
    try:
        yield w
    finally:
        w.stop()


def crawl_overrides() -> dict:
    return {"generate.partitions": 2, "spark.shuffle_partitions": 2,
            "generate.max_per_host": 8, "fetcher.min_delay_s": MIN_DELAY,
            "fetcher.time_budget_s": 60.0, "parse.extract_text": False,
            "progress.interval_s": 0.5}


def cluster_config(cluster, ui_port: int | None = None) -> Path:
    """The configuration file an operator would write for this cluster (with the driver's web
    UI and REST API on `ui_port`, if given), its verbs served by one warm driver."""
    from app.airflow_demo import config_toml
    from app.demo import demo_config

    extra = dict(spark_extra(cluster["s3"]["endpoint"]))
    extra.update({"spark.ui.enabled": "false", "spark.driver.port": "17100",
                  "spark.blockManager.port": "17110", "spark.port.maxRetries": "30",
                  "spark.executor.memory": "768m", "spark.cores.max": "2",
                  # a lost executor's task is retried, not counted against the job at once
                  "spark.task.maxFailures": "4"})
    if ui_port:
        extra.update({"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)})
    cfg = demo_config(f"s3a://{BUCKET}/cluster", **crawl_overrides(), **{
        "spark.master": cluster["master"], "spark.extra": extra,
        # "auto" is off for a cluster master (an idle daemon holds its executors); "on" is the
        # operator's choice for a day of tasks, and the one stop below releases them
        "spark.driver_daemon": "on", "spark.driver_daemon_idle_s": 300.0,
        "spark.driver_daemon_dir": str(cluster["base"] / "daemons"),
        # the crawl's graphs are far below the in-driver threshold: force the GraphX engine so
        # its classes (scripts/build_jvm.sh's jar, shipped with --jars) run on the executors
        "pagerank.engine": "graphx"})
    path = cluster["base"] / "recrawl.toml"
    path.write_text(config_toml(cfg))
    return path


def crawler(cluster, *args: str, wait: bool = True):
    """`python -m app.cli` as an operator runs it: no PYSPARK_PYTHON, another directory. Every
    call writes the same configuration (the warm driver's REST API on DRIVER_UI), so one driver
    serves them all."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env.update(cluster["s3"]["env"])
    env["PYTHONPATH"] = str(ROOT)  # this checkout, not the venv's editable install
    config = cluster_config(cluster, DRIVER_UI)
    cmd = [sys.executable, "-m", "app.cli", "--config", str(config), *args]
    if not wait:  # output to a file: a pipe nobody reads would block the crawler once full
        with open(cluster["base"] / "crawler-bg.log", "wb") as log:
            return subprocess.Popen(cmd, env=env, cwd=cluster["base"], stdout=log,
                                    stderr=subprocess.STDOUT)
    out = subprocess.run(cmd, env=env, cwd=cluster["base"], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, (args, (out.stdout + out.stderr)[-5000:])
    return out.stdout


def spark_submit(cluster, *args: str) -> str:
    """scripts/spark_submit.sh in client mode; returns its output (the command it ran first)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    env.update(cluster["s3"]["env"])
    env.update({"MASTER": cluster["master"], "DEPLOY_MODE": "client", "PYTHONPATH": str(ROOT),
                "RECRAWL_CONFIG": str(cluster_config(cluster)),
                "SUBMIT_OPTS": "--conf spark.ui.enabled=false --conf spark.cores.max=2"})
    out = subprocess.run(["bash", str(ROOT / "scripts" / "spark_submit.sh"), *args], env=env,
                         cwd=cluster["base"], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, (args, (out.stdout + out.stderr)[-5000:])
    return out.stdout + out.stderr


def delta_rows(cluster, table: str) -> list[dict]:
    """A table of the bucket through delta-rs (no JVM)."""
    from deltalake import DeltaTable

    env = cluster["s3"]["env"]
    opts = {"AWS_ENDPOINT_URL": cluster["s3"]["endpoint"], "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"], "AWS_REGION": "us-east-1",
            "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    return DeltaTable(f"s3://{BUCKET}/cluster/tables/{table}",
                      storage_options=opts).to_pyarrow_table().to_pylist()


def audit(web, cfg_min_delay: float = MIN_DELAY) -> tuple[list[str], list[str]]:
    from simweb.audit import politeness_violations, robots_violations

    log = web.request_log()
    delays = {h: min(web.truth.crawl_delay(h) or 0.0, 5.0) for h in web.hosts()}
    return (politeness_violations(log, cfg_min_delay, delays),
            robots_violations(log, web.truth, "recrawlbot"))


def check_warcs(client, rows: list[dict]) -> None:
    """Every row with a WARC record points at a readable record of its URL in the bucket."""
    from warcio.archiveiterator import ArchiveIterator

    with_record = [r for r in rows if r["warc_file"]]
    assert with_record
    for r in with_record:
        assert r["warc_file"].startswith(f"s3a://{BUCKET}/cluster/warc/"), r
        key = r["warc_file"].split(f"s3a://{BUCKET}/", 1)[1]
        end = r["warc_offset"] + r["warc_length"] - 1
        raw = client.get_object(Bucket=BUCKET, Key=key,
                                Range=f"bytes={r['warc_offset']}-{end}")["Body"].read()
        rec = next(iter(ArchiveIterator(BytesIO(raw))))
        assert rec.rec_type in ("response", "revisit")
        assert rec.rec_headers.get_header("WARC-Target-URI") == r["warc_target_uri"]


def site_seeds(web) -> str:
    return "\n".join(f"{web.base(h)}/" for h in web.hosts() if h.startswith("site")) + "\n"


def local_crawl(spark, web, home: Path) -> list[tuple[str, str, str]]:
    """The same two rounds in this process's local[*] session: (round, url, status) rows."""
    from app.cli import run_step
    from app.demo import demo_config
    from recrawl.rules.rounds import STEPS, parse_date, round_id_for
    from recrawl.store.tables import init_tables, read
    from spark_jobs import inject

    cfg = demo_config(home, **crawl_overrides())
    init_tables(spark, cfg)
    seeds = home / "seeds.txt"
    seeds.write_text(site_seeds(web))
    inject.run(spark, cfg, str(seeds), parse_date(DATES[0]))
    for day, date in enumerate(DATES[:2]):
        web.set_day(day)
        logical = parse_date(date)
        for step in STEPS:
            run_step(spark, cfg, step, round_id_for(cfg, logical), logical)
    return sorted((r["round_id"], r["url"], r["fetch_status"])
                  for r in read(spark, cfg, "fetches").collect())


def _round_with_an_executor_killed(cluster, web, date: str) -> dict:
    """`crawler round` in the background; once its fetch tasks reach the web, SIGKILL one
    executor that the driver's REST API shows running a task. Returns what the kill test checks."""
    mark = len(web.request_log())
    proc = crawler(cluster, "round", "--date", date, wait=False)
    killed = requests_at_kill = None
    try:
        deadline = time.monotonic() + 1200
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            # the round's fetch tasks are requesting (generate makes no requests): kill an
            # executor that is running one of them
            if len(web.request_log()) > mark:
                try:
                    busy = _busy_executors(DRIVER_UI)
                except OSError:
                    busy = []
                processes = {}
                for w in cluster["workers"]:
                    processes.update(_executors_of(w["proc"]))
                for eid in busy:
                    if eid in processes:
                        processes[eid].send_signal(signal.SIGKILL)
                        killed, requests_at_kill = eid, len(web.request_log())
                        break
            time.sleep(0.2)
        proc.wait(timeout=1500)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = (cluster["base"] / "crawler-bg.log").read_text(errors="replace")
    assert proc.returncode == 0, out[-5000:]
    return {"killed": killed, "requests_at_kill": requests_at_kill,
            "requests_after": len(web.request_log()), "log": out}


@pytest.fixture(scope="module")
def cluster_crawl(cluster, web):
    """`crawler init`, `inject` and two `round`s on the cluster in one warm driver, an executor
    killed mid-fetch in the second (a fault costs no application of its own: each is minutes
    here), then `pagerank` through spark-submit."""
    web.reset_state()
    seeds = cluster["base"] / "seeds.txt"
    seeds.write_text(site_seeds(web))
    t0 = time.monotonic()
    try:
        crawler(cluster, "init")
        crawler(cluster, "inject", str(seeds), "--date", DATES[0])
        web.set_day(0)
        crawler(cluster, "round", "--date", DATES[0])
        web.set_day(1)
        kill = _round_with_an_executor_killed(cluster, web, DATES[1])
        master = ui_json(MASTER_UI)
        apps = [a["name"] for a in master["activeapps"] + master["completedapps"]]
    finally:
        # the warm driver holds the cluster's cores while it lives: spark-submit needs them
        crawler(cluster, "daemon", "stop")
    print(f"cluster: init, inject, two rounds (an executor killed) {time.monotonic() - t0:.0f} s",
          flush=True)
    fetches = delta_rows(cluster, "fetches")
    audited = audit(web)  # before the local crawl resets the log

    # the last step through spark-submit in client mode (docs/cluster.md, "spark-submit")
    t0 = time.monotonic()
    submitted = spark_submit(cluster, "pagerank", "--date", DATES[1])
    print(f"cluster: pagerank through spark-submit {time.monotonic() - t0:.0f} s", flush=True)
    return {"fetches": fetches, "audit": audited, "kill": kill, "submitted": submitted,
            "requests": len(web.request_log()), "apps": apps}


def test_crawl_on_the_cluster(cluster, cluster_crawl, web, spark, tmp_path):
    fetches = cluster_crawl["fetches"]
    # init, inject and both rounds: one application (the warm driver), not one per verb
    assert len(cluster_crawl["apps"]) == 1, cluster_crawl["apps"]
    # every fetch partition ran in an executor process
    executors = {r["executor_id"] for r in fetches}
    assert executors and "driver" not in executors and "unknown" not in executors
    rounds = {r["round_id"]: dict(r["counts"]) for r in delta_rows(cluster, "rounds")}
    assert sorted(rounds) == ["20261101", "20261102"]
    assert all(c["fetch.executors"] >= 1 for c in rounds.values())
    # the server's view: polite, robots obeyed (the second round's killed attempt included)
    assert cluster_crawl["audit"] == ([], [])
    check_warcs(cluster["s3"]["client"], fetches)
    assert "--deploy-mode client" in cluster_crawl["submitted"]
    assert "--archives" in cluster_crawl["submitted"]
    assert len(delta_rows(cluster, "scores")) > 0
    # PageRank and the host components ran on GraphX (pagerank.engine = graphx), not the driver
    assert re.search(r"[ ,]engine_graphx=1", cluster_crawl["submitted"])
    assert "host_components_engine_graphx=1" in cluster_crawl["submitted"]
    assert "recrawl-graphx.jar" in cluster_crawl["submitted"]  # on --jars, so executors have it

    # the same crawl in local[*], on the same web: the same rows and statuses per URL, although
    # one executor died mid-fetch in the cluster's second round
    web.reset_state()
    t0 = time.monotonic()
    local = local_crawl(spark, web, tmp_path / "local")
    print(f"local[*]: the same crawl {time.monotonic() - t0:.0f} s", flush=True)
    assert len(web.request_log()) > cluster_crawl["requests"]
    remote = sorted((r["round_id"], r["url"], r["fetch_status"]) for r in fetches)
    assert remote == local
    politeness, robots = audit(web)
    assert politeness == [] and robots == []


def test_fetch_progress_on_the_cluster(cluster_crawl):
    # The executors' status records went through s3a://; the warm driver read them while the
    # second round's fetch ran (an executor killed and its task retried meanwhile) and its
    # lines reached the `crawler round` client.
    log = cluster_crawl["kill"]["log"]
    rid = DATES[1].replace("-", "")
    fetch = log[log.index(f"fetch {rid}: fetching"):log.index(f"fetch {rid}: publishing")]
    lines = [(int(d), int(n)) for d, n in re.findall(rf"^fetch {rid}: (\d+)/(\d+) URLs", fetch, re.M)]
    assert any(0 < d < n for d, n in lines), fetch[-3000:]
    assert lines[-1][0] == lines[-1][1]  # the final tally: every task's last record


def _executors_of(worker: subprocess.Popen) -> dict:
    """executor id -> its CoarseGrainedExecutorBackend process, among the worker's children."""
    import psutil

    found = {}
    for p in psutil.Process(worker.pid).children(recursive=True):
        try:
            args = p.cmdline()
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue  # an executor of an earlier application that has exited (not yet reaped)
        if "--executor-id" in args:
            found[args[args.index("--executor-id") + 1]] = p
    return found


def _busy_executors(ui_port: int) -> list[str]:
    """Executors running a task now, from the driver's REST API (/api/v1)."""
    apps = ui_json(ui_port, "/api/v1/applications")
    if not apps:
        return []
    executors = ui_json(ui_port, f"/api/v1/applications/{apps[0]['id']}/executors")
    return [e["id"] for e in executors if e["id"] != "driver" and e["activeTasks"] > 0]


def test_executor_killed_mid_fetch(cluster, cluster_crawl):
    kill = cluster_crawl["kill"]
    assert kill["killed"] is not None, "no executor was caught fetching"
    assert kill["requests_after"] > kill["requests_at_kill"]  # the retried task fetched after the kill
    rows = [r for r in cluster_crawl["fetches"] if r["round_id"] == "20261102"]
    fetch_list = [r for r in delta_rows(cluster, "fetch_list") if r["round_id"] == "20261102"]
    urls = [r["url"] for r in rows]
    assert len(urls) == len(set(urls)) == len(fetch_list)  # one row per URL
    assert kill["killed"] not in {r["executor_id"] for r in rows}  # its task's output was discarded
    # across the killed attempt and its retry: no politeness or robots violation
    assert cluster_crawl["audit"] == ([], [])
    check_warcs(cluster["s3"]["client"], rows)
