"""
### pagerank — link-graph PageRank into `scores`, driven by data

Scheduled on the asset `crawl://crawldb`, which `crawl_cycle` emits when a round's crawldb is
final: a run starts after a round, and rounds that finish while one runs are folded into the
next run (asset events queue up), so during a backfill PageRank does not run once per day.
Generate uses scores younger than `generate.max_score_age_days` and falls back to breadth-first
priority otherwise, so a round never waits for this DAG. Emits `crawl://scores`.

Param `max_iterations` → `crawler --set pagerank.max_iterations=N pagerank`. See docs/airflow.md.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import Param, task
from recrawl_airflow import CRAWLDB, SCORES, crawler_command, recrawl_dag, run_date


def _pagerank(**context) -> str:
    n = int(context["params"]["max_iterations"])
    return crawler_command(["pagerank", "--date", run_date(context)], [f"pagerank.max_iterations={n}"])


with recrawl_dag(
    "pagerank",
    description="PageRank over the link graph after crawl rounds (asset crawl://crawldb)",
    doc_md=__doc__,
    schedule=[CRAWLDB],
    params={
        "max_iterations": Param(20, type="integer", minimum=1, maximum=200, title="max_iterations",
                                description="Power iterations at most (pagerank.max_iterations)."),
    },
    tag="rank",
) as dag:
    task.bash(task_id="pagerank", execution_timeout=dt.timedelta(hours=2), outlets=[SCORES])(_pagerank)()
