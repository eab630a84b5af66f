"""
### maintenance — WARC retention, OPTIMIZE, VACUUM (weekly)

`warc_retention` → `optimize` → `vacuum`, each `crawler maintenance --step <step>`:

* `warc_retention`: `warc/<round>` folders of rounds older than `warc_retention_days` (counted
  from the run's logical date) are deleted; the `fetches`/`pages` rows pointing into them are
  first flagged (WARC pointer set to NULL = capture expired).
* `optimize`: compacts every table's small files; crawldb is Z-ordered by `host`.
* `vacuum`: removes data files older than `retain_hours` that no current version needs;
  never below 168 h (Delta's 7-day safety window; time travel reaches back that far).

Sundays 03:00 UTC, `catchup=False`; tasks share the `crawl_tables` pool with the crawl, so
maintenance never runs while a crawl step writes. See docs/airflow.md.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Param, task
from recrawl_airflow import crawler_command, recrawl_dag, run_date

TASKS = {"warc_retention": "warc", "optimize": "optimize", "vacuum": "vacuum"}


def _step(task_id: str, step: str):
    def command(**context) -> str:
        p = context["params"]
        return crawler_command([
            "maintenance", "--step", step, "--date", run_date(context),
            "--retain-hours", str(float(p["retain_hours"])),
            "--warc-retention-days", str(float(p["warc_retention_days"])),
        ])

    command.__name__ = task_id
    return command


with recrawl_dag(
    "maintenance",
    description="Weekly: WARC retention, OPTIMIZE (crawldb Z-ordered by host), VACUUM",
    doc_md=__doc__,
    schedule="0 3 * * 0",
    params={
        "retain_hours": Param(168.0, type="number", minimum=168, title="retain_hours",
                              description="VACUUM retention in hours (at least 168 = 7 days)."),
        "warc_retention_days": Param(90.0, type="number", minimum=1, title="warc_retention_days",
                                     description="Keep WARC folders of rounds younger than this."),
    },
    tag="maintenance",
) as dag:
    previous = None
    for task_id, step in TASKS.items():
        current = task.bash(task_id=task_id, execution_timeout=dt.timedelta(hours=2))(_step(task_id, step))()
        if previous is not None:
            previous >> current
        previous = current
