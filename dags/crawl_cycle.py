"""
### crawl_cycle — one crawl round (a generation) per logical date

`check_round` → `signals` → `generate` → `fetch` → `parse` → `dedup` → `updatedb` → `schedule`, each task
one `crawler <step> --date <data interval start>` of the main virtualenv (the CLI derives the
round id with `crawl.round_id_format`, `%Y%m%d`). Every step is idempotent for its round, so a
failed task is simply retried or cleared. `check_round` skips the whole run when the round
already completed every step: re-running a date, or backfilling over days already crawled,
changes nothing (trigger with `force` to crawl such a date again). Needs the tables and some
seeds: run the `inject` DAG (`crawler init` + `crawler inject`) once first.

* **Schedule**: daily at 00:00 UTC (`CronTriggerTimetable`): the run for day D crawls as of D.
  `catchup=False`: days missed while the scheduler was down are *not* crawled automatically;
  backfill them explicitly (UI: *Trigger → Backfill*, or `airflow backfill create`).
* **Backfill runs stuck in *queued*?** A backfill of a paused DAG waits: unpause this DAG (the
  toggle above; the Backfill form's "Unpause crawl_cycle on trigger" box does it) and the queued
  runs start. A backfill then runs alongside the daily run, step by step (see below).
* **One writer at a time**: `max_active_runs=1` (a backfill counts apart), and every task takes
  the single slot of the `crawl_tables` pool (shared with the inject, pagerank and maintenance
  DAGs), so interleaved rounds never write at once.
* **Params** (trigger form): the round's size (`top_n`, `max_per_host`, `partitions`,
  `time_budget_s`), passed as `crawler --set ...`; `settings` for any other key; `force`.
* **Timeouts**: `fetch` fails past `time_budget_s + fetch_margin_s`; other steps after an hour.
* **Emits** the asset `crawl://crawldb` when the round's crawldb is final; `pagerank` runs on it.

See docs/airflow.md.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import task
from recrawl_airflow import (
    CRAWLDB,
    STEPS,
    crawler_command,
    recrawl_dag,
    round_complete_check,
    round_params,
    round_settings,
    run_date,
    set_fetch_timeout,
)

STEP_TIMEOUT = dt.timedelta(hours=1)


def _check_round(**context) -> str:
    params = context["params"]
    return round_complete_check(run_date(context), round_settings(params), bool(params["force"]))


def _step(step: str):
    def command(**context) -> str:
        return crawler_command([step, "--date", run_date(context)], round_settings(context["params"]))

    command.__name__ = step
    command.__doc__ = f"`crawler {step} --date <round date>` with the run's settings."
    return command


with recrawl_dag(
    "crawl_cycle",
    description="One crawl round per day: signals, generate, fetch, parse, dedup, updatedb, schedule",
    doc_md=__doc__,
    schedule="0 0 * * *",
    params=round_params(),
    tag="crawl",
) as dag:
    previous = task.bash(task_id="check_round", execution_timeout=dt.timedelta(minutes=15))(_check_round)()
    for step in STEPS:
        kwargs = {"task_id": step, "execution_timeout": STEP_TIMEOUT}
        if step == "fetch":
            # The default shown in the UI; set_fetch_timeout replaces it per run.
            kwargs.update(execution_timeout=dt.timedelta(seconds=300 + 600), pre_execute=set_fetch_timeout)
        if step == "schedule":
            kwargs["outlets"] = [CRAWLDB]
        current = task.bash(**kwargs)(_step(step))()
        previous >> current
        previous = current
