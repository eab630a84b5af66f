"""
### inject — add seed URLs to crawldb

`init` (create the `crawl` database and every table if missing; idempotent) → `inject`
(`crawler inject <seeds>`: normalize the file's URLs and MERGE them into crawldb as unfetched,
depth 0). Injecting the same file again adds nothing. Triggered by hand with the seed file's
path (one URL per line, `#` comments allowed; relative paths are taken from the repository).

See docs/airflow.md.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Param, task
from recrawl_airflow import crawler_command, recrawl_dag, run_date


def _init(**context) -> str:
    return crawler_command(["init"])


def _inject(**context) -> str:
    return crawler_command(["inject", context["params"]["seeds"], "--date", run_date(context)])


with recrawl_dag(
    "inject",
    description="Create the tables if needed and merge a seed file into crawldb",
    doc_md=__doc__,
    schedule=None,
    params={
        "seeds": Param("seeds.txt", type="string", minLength=1, title="seeds",
                       description="Seed file: one URL per line, # comments allowed."),
    },
    tag="seeds",
) as dag:
    task.bash(task_id="init", execution_timeout=dt.timedelta(minutes=15))(_init)() >> task.bash(
        task_id="inject", execution_timeout=dt.timedelta(minutes=30)
    )(_inject)()
