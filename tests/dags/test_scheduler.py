"""The DAGs under Airflow's own scheduler: a backfill made the way the UI makes it, end to end.

One Airflow deployment for the module (tests/dags/airflow_stack.py: API server, scheduler, DAG
processor, LocalExecutor, SQLite) over a small simulated web served as the Airflow demo serves
it, with the demo's configuration file as RECRAWL_CONFIG. One scenario, in the order a data
engineer meets it, then one test per claim:

1. `POST /api/v2/backfills` for two days of `crawl_cycle` — the Backfill form's call — while the
   DAG is still paused (new DAGs start paused). Meanwhile the `inject` DAG is triggered and runs
   to completion: proof that the scheduler was working while the backfill stayed queued.
2. `PATCH /api/v2/dags/crawl_cycle {"is_paused": false}` — what the form does when its
   "Unpause crawl_cycle on trigger" box is ticked (the default). The queued backfill starts, and
   the scheduler also creates today's daily run (catchup=False: the latest day only), so a
   backfill and a scheduled round are active at once.
3. Wait for every run; `pagerank` must have run from the `crawl://crawldb` asset.
4. The same two days again, as a backfill that reprocesses completed runs: `check_round` skips
   every step and not one Delta table gets a commit.

The whole module runs twice, once per Spark master the tasks submit to (the `deployment`
fixture's parameter):

* ``local``: `local[*]`, each task's driver alone (what CI runs on every submission);
* ``cluster``: a Spark standalone cluster the fixture starts first (a master and one 2-core
  worker from pyspark's `spark-class`, in an environment that cannot import the project;
  tests/standalone.py). The configuration's `spark.master` is the cluster, as a data
  engineer's would be, so each `crawler` step is an application of that master whose executors
  get the project from the environment archive and the code zip. The crawl home stays a local
  folder, which a loopback master may use (the workers share the machine's disk). Marked slow:
  every one of the ~30 tasks then also starts an executor and unpacks the archive, about
  twice the local variant's time (docs/airflow.md); `bash scripts/test.sh -m slow
  tests/dags/test_scheduler.py` runs it. The cluster test (tests/spark_jobs/test_cluster.py)
  covers the executors in CI.

The simulated web stays at day 0 for every round: a backfill has no hook between two days to move
simweb's clock (the demo's `dags test` loop has one), and what is under test here is the
orchestration — content changes between rounds are covered by tests/spark_jobs/test_round_e2e.py.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.dags.airflow_helpers import ROOT, require_airflow
from tests.dags.airflow_stack import TERMINAL, AirflowStack, free_port
from tests.standalone import standalone_cluster, ui_json

# The timeouts only end a hung run, never a performance claim: the three rounds' ~30 tasks each
# start a JVM (and, on the cluster, an executor that unpacks the archive), 1-4 min apiece on a
# loaded 2-core machine; on the cluster the scenario outgrew a 2,400 s wait there.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(7200)]

DAYS = ("2026-11-01", "2026-11-02")
SITES, PAGES = 2, 5
TI_DONE = {"success", "skipped", "failed", "upstream_failed"}
WAIT = 5400.0  # seconds
# the standalone cluster's ports (master, its web UI, the worker and its UI)
MASTER_PORT, MASTER_UI, WORKER_PORT, WORKER_UI = 18377, 18378, 18379, 18380


@pytest.fixture(scope="module", params=["local", pytest.param("cluster", marks=pytest.mark.slow)])
def deployment(request, tmp_path_factory):
    """simweb (its own process) + the crawl configuration + a running Airflow deployment whose
    tasks submit to `local[*]` or to a standalone cluster."""
    require_airflow()
    tmp = tmp_path_factory.mktemp(f"airflow-scheduler-{request.param}")
    if request.param == "local":
        yield from _deployment(tmp, None)
        return
    (tmp / "spark").mkdir()
    with standalone_cluster(tmp / "spark", MASTER_PORT, MASTER_UI, [(WORKER_PORT, WORKER_UI, 2)]) as spark:
        yield from _deployment(tmp, spark)


def _deployment(tmp: Path, spark: dict | None):
    from app.airflow_demo import config_toml, start_simweb
    from app.daemon import stop_all
    from app.demo import demo_config
    from simweb.web import control

    web, port = start_simweb(free_port(18200, 18299), SITES, PAGES, tmp / "server-log.jsonl", tmp / "simweb.out")
    stack = cfg = None
    try:
        on_cluster = {} if spark is None else {
            "spark.master": spark["master"],
            "spark.extra": {"spark.ui.enabled": "false",
                            "spark.executor.memory": "768m", "spark.cores.max": "2"}}
        cfg = demo_config(tmp / "crawl", **{
            "fetcher.time_budget_s": 12.0, "fetcher.min_delay_s": 0.2, "generate.max_per_host": 8,
            "spark.shuffle_partitions": 2, "spark.driver_daemon_dir": str(tmp / "driver"), **on_cluster,
        })
        config = tmp / "recrawl.toml"
        config.write_text(config_toml(cfg), encoding="utf-8")
        seeds = tmp / "seeds.txt"
        seeds.write_text(control(port, "/__sim/seeds"), encoding="utf-8")
        (tmp / "airflow").mkdir()
        stack = AirflowStack(tmp / "airflow", free_port(18080, 18199), {"RECRAWL_CONFIG": str(config)})
        stack.start()
        wanted = {"crawl_cycle", "inject", "pagerank"}
        stack.wait_for("the DAG processor to load the DAGs", lambda: wanted <= {
            d["dag_id"] for d in stack.api("GET", "/api/v2/dags?limit=100")["dags"]}, WAIT)
        yield {"stack": stack, "cfg": cfg, "config": config, "seeds": seeds, "tmp": tmp,
               "cluster": spark}
    finally:
        if stack is not None:
            stack.stop()
        if cfg is not None:
            stop_all(cfg)  # the tasks' warm driver (app/daemon.py) would idle on for minutes
        web.terminate()
        web.wait(timeout=30)


def _all_done(stack: AirflowStack, dag_id: str, expected: int):
    runs = stack.dag_runs(dag_id)
    return runs if len(runs) >= expected and all(r["state"] in TERMINAL for r in runs) else None


@pytest.fixture(scope="module")
def scenario(deployment):
    stack, cfg = deployment["stack"], deployment["cfg"]
    from app.airflow_demo import round_conf
    from app.daemon import daemons

    t0 = time.monotonic()
    for dag_id in ("inject", "pagerank"):  # the UI's pause toggle
        stack.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
    # The body the UI's Backfill form posts (its defaults: missing runs only, one active run),
    # with the demo's round size as the runs' conf.
    backfill = stack.create_backfill({
        "dag_id": "crawl_cycle", "from_date": f"{DAYS[0]}T00:00:00Z", "to_date": f"{DAYS[-1]}T00:00:00Z",
        "run_backwards": False, "dag_run_conf": round_conf(cfg), "reprocess_behavior": "none",
        "max_active_runs": 1, "run_on_latest_version": True,
    })
    stack.api("POST", "/api/v2/dags/inject/dagRuns", {
        "logical_date": f"{DAYS[0]}T00:00:00Z", "conf": {"seeds": str(deployment["seeds"])}})
    inject_runs = stack.wait_for("the inject run", lambda: _all_done(stack, "inject", 1), WAIT)
    while_paused = stack.dag_runs("crawl_cycle")

    before = stack.api("GET", "/api/v2/dags/crawl_cycle")
    stack.api("PATCH", "/api/v2/dags/crawl_cycle", {"is_paused": False})
    expected = len(DAYS) + (1 if before["next_dagrun_logical_date"] else 0)
    runs = stack.wait_for("the crawl_cycle runs", lambda: _all_done(stack, "crawl_cycle", expected), WAIT)

    def pagerank_done():
        got = stack.dag_runs("pagerank")
        asset = [r for r in got if r["run_type"] == "asset_triggered"]
        return got if asset and all(r["state"] in TERMINAL for r in got) else None

    pagerank = stack.wait_for("an asset-triggered pagerank run", pagerank_done, WAIT)
    wall = time.monotonic() - t0
    tis = {}
    for dag_id, dag_runs in (("inject", inject_runs), ("crawl_cycle", runs), ("pagerank", pagerank)):
        for r in dag_runs:
            tis[(dag_id, r["dag_run_id"])] = stack.task_instances(dag_id, r["dag_run_id"])
    rerun, commits = _rerun_completed_days(stack, cfg, backfill)  # after: it re-runs the same runs
    warm = daemons(cfg)
    print(f"\nscheduler scenario: {wall:.0f}s wall (inject, {len(runs)} crawl_cycle runs, "
          f"{len(pagerank)} pagerank runs)")
    return {"backfill": backfill, "while_paused": while_paused, "inject": inject_runs,
            "next_dagrun": before["next_dagrun_logical_date"], "runs": runs, "pagerank": pagerank,
            "tis": tis, "wall_s": wall, "rerun": rerun, "commits": commits, "daemons": warm}


def _delta_commits(cfg) -> dict[str, int]:
    """Commit files in every table's _delta_log: a step that wrote anything added one."""
    from recrawl.store.schemas import TABLES

    return {t: len(list(Path(cfg.table_path(t), "_delta_log").glob("*.json"))) for t in TABLES}


def _wait_until_pagerank_settles(stack: AirflowStack) -> None:
    """Until every crawl://crawldb asset event has made its pagerank run and every pagerank and
    crawl_cycle run is over.

    The last crawl_cycle run's asset event makes the scheduler queue one more pagerank run a
    scheduler loop or two after it; that run writes scores, hosts and crawldb, which the
    re-run's "no commit" check must not count (it once did, in a run under load). The events
    are read, not waited out: an event the scheduler has not yet turned into a run has no
    `created_dagruns` (this replaced a 90 s quiet period).
    """
    def settled() -> bool:
        events = stack.api("GET", "/api/v2/assets/events?limit=1000")["asset_events"]
        pending = [e for e in events if e["uri"] == "crawl://crawldb" and not e["created_dagruns"]]
        runs = stack.dag_runs("pagerank") + stack.dag_runs("crawl_cycle")
        return not pending and all(r["state"] in TERMINAL for r in runs)

    stack.wait_for("pagerank to settle", settled, WAIT)


def _rerun_completed_days(stack: AirflowStack, cfg, backfill: dict) -> tuple[dict, tuple[dict, dict]]:
    """The same days again, as a backfill that reprocesses completed runs (the form's "All Runs").

    A re-run is told from the first run by its `queued_at` (clearing a run sets it anew), per
    logical date, not by run id: on SQLite a creation that meets the scheduler's write lock
    answers 503 and Airflow's clean-up deletes the runs it had already cleared (DagRun rows with
    the new backfill id) and the backfill, so the retried creation makes them again under the
    same run id; in between, the run is gone (CI saw a 404 for it). When a day's run is missing
    and no backfill is active any more (CI once saw the retry answered 409 by the clean-up's
    backfill, which then vanished), the form is submitted again, as its user would; a 409 to
    that (CI's next failure: a backfill was active again between the read and the post) only
    means "keep waiting".
    """
    form = {
        "dag_id": "crawl_cycle", "from_date": backfill["from_date"], "to_date": backfill["to_date"],
        "run_backwards": False, "dag_run_conf": backfill["dag_run_conf"], "reprocess_behavior": "completed",
        "max_active_runs": 1, "run_on_latest_version": True,
    }
    # A day's scheduled run can start during the re-run (CI crossed midnight UTC once: the
    # new day's round and its pagerank wrote commits the check then counted). Its commits are
    # not the re-run's: then the whole re-run is made again once everything has settled.
    for _ in range(3):
        # the first backfill (or the last re-run) marked complete, then everything settled
        stack.wait_for("no active backfill", lambda: not stack.active_backfills("crawl_cycle"), WAIT)
        _wait_until_pagerank_settles(stack)
        before = _delta_commits(cfg)
        runs = stack.dag_runs("crawl_cycle")
        others = _non_backfill_runs(runs)
        queued = {r["logical_date"]: _when(r["queued_at"]) for r in runs if r["run_type"] == "backfill"}
        stack.create_backfill(form)
        rerun = stack.wait_for("the re-run of the completed days",
                               lambda queued=queued: _rerun_done(stack, form, queued), WAIT)
        after = _delta_commits(cfg)
        if _non_backfill_runs(stack.dag_runs("crawl_cycle")) == others:
            return rerun, (before, after)
    raise AssertionError("a scheduled crawl_cycle run started during each of three re-runs")


def _non_backfill_runs(runs: list[dict]) -> set[str]:
    return {r["dag_run_id"] for r in runs if r["run_type"] != "backfill"}


def _rerun_done(stack: AirflowStack, form: dict, queued: dict) -> dict | None:
    """The re-run's task states per run once every re-run day is over, else None."""
    runs = {r["logical_date"]: r for r in stack.dag_runs("crawl_cycle")}
    if any(day not in runs for day in queued) and not stack.active_backfills("crawl_cycle"):
        stack.resubmit_backfill(form)  # the clean-up deleted runs and backfill: submit again
        return None
    out = {}
    for day, first in queued.items():
        run = runs.get(day)
        if run is None or run["state"] not in TERMINAL or (_when(run["queued_at"]) or first) <= first:
            return None
        tis = stack.task_instances("crawl_cycle", run["dag_run_id"], missing_ok=True)
        if not tis or any(t["state"] not in TI_DONE for t in tis):
            return None
        out[run["dag_run_id"]] = {t["task_id"]: t["state"] for t in tis}
    return out


def crawler_sql(deployment, query: str) -> list[dict]:
    """`crawler sql QUERY --format json` (DuckDB over the Delta tables, no JVM) on the test's crawl."""
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "crawler"), "sql", query, "--format", "json"],
                         env=deployment["stack"].env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def _when(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


def _backfill_runs(scenario) -> list[dict]:
    return [r for r in scenario["runs"] if r["run_type"] == "backfill"]


def test_the_backfill_ran_both_days_and_the_rounds_table_holds_them(deployment, scenario):
    runs = _backfill_runs(scenario)
    assert [r["logical_date"][:10] for r in runs] == list(DAYS)
    assert [r["state"] for r in runs] == ["success"] * len(DAYS), scenario["tis"]
    rounds = {r["round_id"]: r for r in crawler_sql(
        deployment, "SELECT round_id, CAST(logical_date AS VARCHAR) AS day, steps_done FROM rounds")}
    for day in DAYS:
        r = rounds[day.replace("-", "")]
        assert r["day"] == day
        assert set(r["steps_done"]) >= {"generate", "fetch", "parse", "dedup", "updatedb", "schedule"}
    for r in runs:  # every task ran (none skipped: neither day had been crawled)
        states = {t["task_id"]: t["state"] for t in scenario["tis"][("crawl_cycle", r["dag_run_id"])]}
        assert set(states.values()) == {"success"}, states


def test_the_tasks_ran_where_the_configuration_says(deployment, scenario):
    executors = {r["executor_id"] for r in crawler_sql(deployment, "SELECT DISTINCT executor_id FROM fetches")}
    if deployment["cluster"] is None:  # local[*]: every fetch partition ran in the task's driver
        assert executors == {"driver"}
        return
    # every fetch partition ran in an executor of the cluster, never in a task's driver
    assert executors and not executors & {"driver", "unknown", None}, executors
    # and the master saw the crawler steps as its applications
    master = ui_json(MASTER_UI)
    apps = master["completedapps"] + master["activeapps"]
    assert len(apps) >= len(DAYS) * 6, [a["name"] for a in apps]


def test_a_local_masters_tasks_share_one_warm_driver(deployment, scenario):
    # spark.driver_daemon "auto": every Spark task of a local[*] deployment was run by one warm
    # driver (app/daemon.py): inject's two, six per round, pagerank's; none on the cluster.
    warm = scenario["daemons"]
    if deployment["cluster"] is not None:
        assert warm == []
        return
    assert len(warm) == 1, warm
    rounds = len(scenario["runs"])
    assert warm[0]["served"] >= 2 + 6 * rounds + len(scenario["pagerank"]), warm


def test_backfilling_completed_days_again_changes_nothing(scenario):
    # check_round finds each round complete and exits 99 (skip), which skips every later step.
    assert len(scenario["rerun"]) == len(DAYS)
    for states in scenario["rerun"].values():
        assert set(states.values()) == {"skipped"}, states
    before, after = scenario["commits"]
    assert after == before


def test_pagerank_ran_from_the_crawldb_asset(deployment, scenario):
    asset_runs = [r for r in scenario["pagerank"] if r["run_type"] == "asset_triggered"]
    assert asset_runs and all(r["state"] == "success" for r in asset_runs)
    assert crawler_sql(deployment, "SELECT count(*) AS n FROM scores")[0]["n"] > 0


def test_a_backfill_of_a_paused_dag_waits_until_the_dag_is_unpaused(scenario):
    # While crawl_cycle was paused the scheduler ran the whole inject DAG, yet left the backfill's
    # runs queued; unpausing (the form's default) started them without creating them again.
    assert [r["state"] for r in scenario["inject"]] == ["success"]
    paused = [r for r in scenario["while_paused"] if r["run_type"] == "backfill"]
    assert [r["state"] for r in paused] == ["queued"] * len(DAYS)
    assert [r["dag_run_id"] for r in paused] == [r["dag_run_id"] for r in _backfill_runs(scenario)]


def test_the_daily_run_and_the_backfill_interleave_safely(deployment, scenario):
    runs = _overlapping_runs(scenario)
    assert [r["state"] for r in runs] == ["success"] * len(runs)
    # The two rounds were really active at once: Airflow counts a backfill's max_active_runs
    # apart from the DAG's own, so max_active_runs=1 does not serialize them.
    spans = [(_when(r["start_date"]), _when(r["end_date"])) for r in runs]
    assert any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1:])
    # Writers never overlapped: every task of every DAG holds the one crawl_tables slot.
    intervals = sorted((_when(t["start_date"]), _when(t["end_date"]), t["dag_id"], t["task_id"])
                       for tis in scenario["tis"].values() for t in tis
                       if t["start_date"] and t["state"] == "success")
    assert all(t["pool"] == "crawl_tables" for tis in scenario["tis"].values() for t in tis)
    for a, b in zip(intervals, intervals[1:], strict=False):
        assert a[1] <= b[0], (a, b)
    rounds = crawler_sql(deployment, "SELECT round_id FROM rounds")
    assert len(rounds) == len(runs)
    dupes = crawler_sql(deployment, "SELECT count(*) - count(DISTINCT url) AS n FROM crawldb")
    assert dupes[0]["n"] == 0


def _overlapping_runs(scenario) -> list[dict]:
    scheduled = [r for r in scenario["runs"] if r["run_type"] == "scheduled"]
    if scenario["next_dagrun"] is None or not scheduled:
        pytest.skip("the clock is before crawl_cycle's start_date: no daily run to overlap")
    return [*_backfill_runs(scenario), *scheduled]


def test_rounds_open_at_the_same_time_hand_out_disjoint_fetch_lists(deployment, scenario):
    runs = _overlapping_runs(scenario)
    # Rounds open at the same time (generated, crawldb not updated yet) got disjoint fetch lists.
    fetch_lists: dict[str, set[str]] = {}
    for row in crawler_sql(deployment, "SELECT round_id, url FROM fetch_list"):
        fetch_lists.setdefault(row["round_id"], set()).add(row["url"])
    open_spans = {}
    for r in runs:
        by_task = {t["task_id"]: t for t in scenario["tis"][("crawl_cycle", r["dag_run_id"])]}
        open_spans[r["logical_date"][:10].replace("-", "")] = (
            _when(by_task["generate"]["start_date"]), _when(by_task["updatedb"]["end_date"]))
    ids = sorted(open_spans)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            (a0, a1), (b0, b1) = open_spans[a], open_spans[b]
            if a0 < b1 and b0 < a1:
                # a round may have got nothing: every due URL was out in the other one
                assert not fetch_lists.get(a, set()) & fetch_lists.get(b, set()), (a, b)


def test_no_politeness_or_robots_violation_across_the_interleaved_rounds(deployment, scenario):
    from app.airflow_demo import audit

    n, pv, rv = audit(deployment["tmp"] / "server-log.jsonl", SITES, PAGES, deployment["cfg"])
    assert n > 0
    assert pv == [] and rv == []


def test_the_ui_lists_the_backfill_runs(deployment, scenario):
    from tests.chromium import chromium_or_skip

    exe = chromium_or_skip()
    stack = deployment["stack"]
    profile = Path(deployment["tmp"]) / "chromium-profile"
    out = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--dump-dom",
         f"{stack.base}/dags/crawl_cycle/runs"],
        capture_output=True, text=True, timeout=300)
    dom = out.stdout
    # The runs table (not the grid beside it): one row per run, with its id, state and type.
    table = dom[dom.find("<table"):]
    rows = [" ".join(re.sub(r"<[^>]+>", " ", tr).split()) for tr in re.findall(r"<tr.*?</tr>", table, re.S)]
    assert any("Dag Run ID" in r for r in rows), dom[-3000:]
    for run in _backfill_runs(scenario):
        row = next((r for r in rows if run["dag_run_id"] in r), None)
        assert row is not None, (run["dag_run_id"], rows)
        assert "Backfill" in row and "Success" in row, row
