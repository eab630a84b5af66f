"""Wiring shared by the recrawl DAGs: how a task finds, configures and calls the `crawler` CLI.

Every task is a thin shell around one `crawler` verb of the main virtualenv (`.venv`), run as
a subprocess (BashOperator): Airflow's own environment (`.venv-airflow`) never imports pyspark
or delta, and a person, a test and a task run exactly the same job code. Nothing here touches
the metadata DB or starts a process at DAG-parse time; Variables are read when a task runs.

Where a task's settings come from (docs/airflow.md):
  * the `crawler` executable: Airflow Variable `recrawl_crawler` (or env AIRFLOW_VAR_RECRAWL_CRAWLER),
    default `<repo>/.venv/bin/crawler`;
  * crawler configuration: the worker's environment (`RECRAWL_CONFIG`, `RECRAWL_<SECTION>__<KEY>`,
    e.g. `RECRAWL_SPARK__MASTER=spark://host:7077`) plus the JSON object in the Airflow Variable
    `recrawl_env`, exported into each task's shell (it wins over the worker's environment);
  * per-run sizes: DAG params, passed as `crawler --set section.key=value` flags (highest precedence).
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, CronTriggerTimetable, Param

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CRAWLER = str(REPO / ".venv" / "bin" / "crawler")
CRAWLER_VARIABLE = "recrawl_crawler"
ENV_VARIABLE = "recrawl_env"

# One slot (created by scripts/setup_airflow.sh): two tasks never write the Delta tables at once,
# whichever DAG they belong to. Delta's optimistic concurrency would mostly cope, but a MERGE into
# crawldb racing another one fails and retries whole Spark jobs; serializing is cheaper and simpler.
POOL = "crawl_tables"

# Emitted when a round's crawldb is final (after `schedule`); the pagerank DAG is scheduled on it.
CRAWLDB = Asset("crawl://crawldb")
SCORES = Asset("crawl://scores")

STEPS = ("signals", "generate", "fetch", "parse", "dedup", "updatedb", "schedule")
TAGS = ["recrawl"]

DEFAULT_ARGS: dict[str, Any] = {
    "owner": "recrawl",
    "retries": 2,
    "retry_delay": dt.timedelta(minutes=1),
    "retry_exponential_backoff": True,
    "max_retry_delay": dt.timedelta(minutes=10),
    "pool": POOL,
    # Relative paths in the crawler configuration (crawl.home = "crawl-home") mean the repository,
    # as in the README's commands; BashOperator would otherwise run in a fresh temporary folder.
    "cwd": str(REPO),
}

# Every recrawl DAG starts here; none catches up on missed intervals (backfill them explicitly).
START_DATE = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def recrawl_dag(dag_id: str, *, description: str, doc_md: str | None, schedule: Any,
                params: Mapping[str, Any], tag: str) -> DAG:
    """A DAG with the settings every recrawl DAG shares: one active run, the shared task defaults
    (pool, retries, working directory), no catch-up, the `recrawl` tag plus `tag`.

    `schedule` is a cron expression in UTC (a run for interval D starts at D: the round of day D
    crawls as of D), or anything Airflow takes as one (assets, None)."""
    return DAG(
        dag_id=dag_id,
        description=description,
        doc_md=doc_md,
        schedule=CronTriggerTimetable(schedule, timezone="UTC") if isinstance(schedule, str) else schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        default_args=DEFAULT_ARGS,
        params=dict(params),
        tags=[*TAGS, tag],
    )


_SETTING = re.compile(r"^[a-z_]+\.[a-z0-9_]+=.*$", re.S)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def round_params() -> dict[str, Param]:
    """The trigger-form params of a crawl round; defaults equal recrawl/defaults.toml."""
    return {
        "top_n": Param(10000, type="integer", minimum=1, title="top_n",
                       description="Most URLs in the round's fetch list (generate.top_n)."),
        "max_per_host": Param(0, type="integer", minimum=0, title="max_per_host",
                              description="Most URLs per host; 0 = time budget / host delay "
                                          "(generate.max_per_host)."),
        "partitions": Param(2, type="integer", minimum=1, maximum=4096, title="partitions",
                            description="Fetch partitions = Spark fetch tasks (generate.partitions)."),
        "time_budget_s": Param(300.0, type="number", minimum=5, maximum=6 * 3600, title="time_budget_s",
                               description="Wall-clock budget of one fetch task, seconds "
                                           "(fetcher.time_budget_s)."),
        "fetch_margin_s": Param(600.0, type="number", minimum=30, maximum=6 * 3600, title="fetch_margin_s",
                                description="Extra time the fetch task gets beyond the budget (Spark "
                                            "start, publishing; more when partitions exceed the cores). "
                                            "Past budget + margin the task fails."),
        "settings": Param([], type="array", items={"type": "string"}, title="settings",
                          description="More overrides, one 'section.key=value' per line "
                                      "(see recrawl/defaults.toml)."),
        "force": Param(False, type="boolean", title="force",
                       description="Crawl the round again even if it already completed "
                                   "(otherwise a completed round is skipped: re-runs change nothing)."),
    }


def round_settings(params: Mapping[str, Any]) -> list[str]:
    """`section.key=value` overrides for every step of a round, from the run's params."""
    sets = [
        f"generate.top_n={int(params['top_n'])}",
        f"generate.max_per_host={int(params['max_per_host'])}",
        f"generate.partitions={int(params['partitions'])}",
        f"fetcher.time_budget_s={float(params['time_budget_s'])}",
    ]
    return sets + list(params.get("settings") or [])


def run_date(context: Mapping[str, Any]) -> str:
    """The round's logical date (YYYY-MM-DD, UTC): the start of the run's data interval.

    Scheduled runs, backfills and `airflow dags test DAG DATE` have one (the DAGs use
    CronTriggerTimetable, so it equals the logical date). A manual or asset-triggered run
    without a logical date crawls as of the day it was started (`run_after`).
    """
    when = context.get("data_interval_start") or context.get("logical_date")
    if when is None:
        when = context["dag_run"].run_after
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d")


def _crawler_shell(args: Sequence[str], settings: Iterable[str]) -> tuple[list[str], str]:
    """Shell lines that export the configured env and check the CLI, and the quoted command."""
    from airflow.sdk import Variable  # lazy: a task's run-time need, not the DAG parse's (costs ~0 ms)

    crawler = Variable.get(CRAWLER_VARIABLE, default=DEFAULT_CRAWLER)
    env = Variable.get(ENV_VARIABLE, default={}, deserialize_json=True) or {}
    if not isinstance(env, Mapping):
        raise ValueError(f"Airflow Variable {ENV_VARIABLE} must be a JSON object of env vars")
    argv = [crawler]
    for s in settings:
        if not _SETTING.match(s):
            raise ValueError(f"setting {s!r}: expected section.key=value")
        argv += ["--set", s]
    argv += list(args)
    lines = ["set -euo pipefail"]
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"Airflow Variable {ENV_VARIABLE}: {name!r} is not an env var name")
        lines.append(f"export {name}={shlex.quote(str(value))}")
    missing = (f"crawler not found at {crawler}: run bash scripts/setup.sh "
               f"or set the Airflow Variable {CRAWLER_VARIABLE}")
    lines.append(f"[ -x {shlex.quote(crawler)} ] || {{ echo {shlex.quote(missing)} >&2; exit 1; }}")
    return lines, " ".join(shlex.quote(a) for a in argv)


def _script(lines: Sequence[str]) -> str:
    """BashOperator renders the script with Jinja: refuse values carrying Jinja markup."""
    script = "\n".join(lines)
    if any(m in script for m in ("{{", "{%", "{#")):
        raise ValueError("a parameter contains Jinja markup ({{, {% or {#); refusing to render it")
    return script


def crawler_command(args: Sequence[str], settings: Iterable[str] = ()) -> str:
    """The bash script of one task: export the configured env, then exec `crawler [--set ..] ARGS`.

    Every value is shell-quoted, so params never reach the shell as code.
    """
    lines, command = _crawler_shell(args, settings)
    return _script([*lines, f"exec {command}"])


def round_complete_check(date: str, settings: Iterable[str], force: bool) -> str:
    """Bash that exits 99 (task skipped, and so every step after it) when the round already ran.

    Re-running generate after updatedb and schedule would pick the URLs discovered by the round
    itself (they are due now), so a second run of a completed date would crawl more, not the same.
    Skipping a completed round is what makes re-runs and backfills over done days change nothing.
    The test is the CLI's own (`crawler round --check`: the resume test of `crawler round`,
    read with DuckDB on a local crawl home, no JVM): exit 0 complete, 3 not complete.
    """
    if force:
        return f"echo 'force=true: crawling the round of {date} whatever its state'"
    lines, command = _crawler_shell(["round", "--date", date, "--check"], settings)
    return _script([
        *lines,
        f"rc=0; {command} || rc=$?",
        'case "$rc" in',
        "  0) echo 'skipping: the round is complete (trigger with force=true to crawl it again)'; exit 99 ;;",
        "  3) echo 'crawling it' ;;",
        f'  *) echo "cannot tell whether the round of {date} completed (exit $rc)" >&2; exit 1 ;;',
        "esac",
    ])


def set_fetch_timeout(context: Mapping[str, Any]) -> None:
    """pre_execute hook: the fetch task's execution_timeout is the run's budget + margin.

    Airflow applies execution_timeout after pre_execute, so a per-run value (the budget is a
    param) can be set here; the static value on the task is only the default shown in the UI.
    """
    params = context["params"]
    budget, margin = float(params["time_budget_s"]), float(params["fetch_margin_s"])
    task = context["task"]
    task.execution_timeout = dt.timedelta(seconds=budget + margin)
    task.log.info("fetch execution_timeout: %.0fs = time budget %.0fs + margin %.0fs; "
                  "a fetch still running then fails", budget + margin, budget, margin)
