"""Run by the Airflow virtualenv's Python (never by pytest): parse dags/ and print it as JSON.

Parses the DAG folder the way the dag-processor does (BundleDagBag), then reports import errors,
which heavy modules got imported, each DAG's structure, and the bash script each task would run
for a sample context. The main virtualenv's site-packages are appended to sys.path first, so a
DAG file that imported pyspark or delta at top level would succeed — and be caught here.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

HEAVY = ("pyspark", "delta", "py4j", "recrawl", "spark_jobs", "fetcher", "simweb", "pandas", "numpy")


def _asset_uris(condition) -> list[str]:
    """URIs of the assets a DAG is scheduled on (AssetAll / AssetAny hold them in `objects`)."""
    if condition is None:
        return []
    if hasattr(condition, "uri"):
        return [condition.uri]
    return [uri for obj in condition.objects for uri in _asset_uris(obj)]


def main() -> None:
    dags_dir = Path(sys.argv[1]).resolve()
    for extra in sys.argv[2:]:
        sys.path.append(extra)
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=dags_dir, bundle_path=dags_dir, bundle_name="dags-folder")
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
    when = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    dags = {}
    for dag_id, dag in bag.dags.items():
        params = {k: dag.params[k] for k in dag.params}
        tasks = {}
        for t in dag.tasks:
            try:
                script = t.python_callable(params=dict(params), data_interval_start=when)
            except Exception as exc:  # reported, the test decides
                script = f"ERROR {type(exc).__name__}: {exc}"
            tasks[t.task_id] = {
                "upstream": sorted(t.upstream_task_ids),
                "downstream": sorted(t.downstream_task_ids),
                "retries": t.retries,
                "pool": t.pool,
                "cwd": t.cwd,
                "execution_timeout_s": t.execution_timeout.total_seconds() if t.execution_timeout else None,
                "outlets": [a.uri for a in t.outlets],
                "operator": type(t).__name__,
                "has_pre_execute": t._pre_execute_hook is not None,
                "script": script,
            }
        dags[dag_id] = {
            "tags": sorted(dag.tags),
            "max_active_runs": dag.max_active_runs,
            "catchup": dag.catchup,
            "timetable": type(dag.timetable).__name__,
            "schedule_assets": _asset_uris(getattr(dag.timetable, "asset_condition", None)),
            "doc_md": bool(dag.doc_md and dag.doc_md.strip()),
            "params": params,
            "file": Path(dag.fileloc).name,
            "tasks": tasks,
        }
    fetch_timeout = None
    if "crawl_cycle" in bag.dags:
        from recrawl_airflow import set_fetch_timeout

        task = bag.dags["crawl_cycle"].get_task("fetch")
        set_fetch_timeout({"params": {"time_budget_s": 40, "fetch_margin_s": 120}, "task": task})
        fetch_timeout = task.execution_timeout.total_seconds()
    print(json.dumps({
        "import_errors": bag.import_errors,
        "heavy_modules": heavy,
        "dags": dags,
        "fetch_timeout_for_40_plus_120": fetch_timeout,
    }, default=str))


if __name__ == "__main__":
    main()
