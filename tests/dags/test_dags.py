"""The DAG folder as Airflow's dag-processor sees it: imports, wiring, and the commands tasks run."""

from __future__ import annotations

from pathlib import Path

import pytest

from recrawl.rules.rounds import STEPS  # the one step list: the DAG's copy must wire the same order

ROOT = Path(__file__).resolve().parents[2]


def test_dagbag_imports_every_dag_without_errors(dag_report):
    assert dag_report["import_errors"] == {}
    assert set(dag_report["dags"]) == {"crawl_cycle", "inject", "pagerank", "maintenance"}
    for dag_id, dag in dag_report["dags"].items():
        assert dag["file"] == f"{dag_id}.py"  # one DAG per file, named after it


def test_dag_files_import_nothing_heavy(dag_report):
    # pyspark & co. were importable in the probe (main venv on sys.path): none may be loaded.
    assert dag_report["heavy_modules"] == []


def test_every_dag_has_docs_tags_one_run_at_a_time_and_no_catchup(dag_report):
    for dag_id, dag in dag_report["dags"].items():
        assert dag["doc_md"], dag_id
        assert "recrawl" in dag["tags"], dag_id
        assert dag["max_active_runs"] == 1, dag_id
        assert dag["catchup"] is False, dag_id


def test_every_task_is_retried_and_bounded_and_takes_the_single_table_pool(dag_report):
    for dag_id, dag in dag_report["dags"].items():
        for task_id, t in dag["tasks"].items():
            where = f"{dag_id}.{task_id}"
            assert t["retries"] >= 1, where
            assert t["pool"] == "crawl_tables", where
            assert t["cwd"] == str(ROOT), where  # relative crawl.home = the repository's, as in the README
            assert t["execution_timeout_s"] and t["execution_timeout_s"] <= 6 * 3600, where
            assert t["operator"] == "_BashDecoratedOperator", where


def test_crawl_cycle_runs_the_steps_in_order_after_the_guard(dag_report):
    dag = dag_report["dags"]["crawl_cycle"]
    order = ["check_round", *STEPS]
    assert set(dag["tasks"]) == set(order)
    for before, after in zip(order, order[1:], strict=False):
        assert dag["tasks"][after]["upstream"] == [before]
    assert dag["tasks"]["schedule"]["downstream"] == []
    assert dag["tasks"]["schedule"]["outlets"] == ["crawl://crawldb/"]
    assert dag["timetable"] == "CronTriggerTimetable"
    assert {"top_n", "max_per_host", "partitions", "time_budget_s", "fetch_margin_s", "settings",
            "force"} <= set(dag["params"])


def test_each_step_calls_the_crawler_verb_for_the_data_interval_with_the_params(dag_report):
    tasks = dag_report["dags"]["crawl_cycle"]["tasks"]
    for step in STEPS:
        script = tasks[step]["script"]
        last = script.splitlines()[-1]
        assert last.startswith("exec /opt/recrawl/bin/crawler "), script
        assert last.endswith(f" {step} --date 2026-11-01"), script
        assert "--set generate.top_n=10000 --set generate.max_per_host=0" in last
        assert "--set fetcher.time_budget_s=300.0" in last
        # the Airflow Variable recrawl_env reaches the crawler's environment
        assert "export RECRAWL_SPARK__MASTER=spark://h:7077" in script


def test_check_round_skips_a_completed_round_with_exit_99(dag_report):
    script = dag_report["dags"]["crawl_cycle"]["tasks"]["check_round"]["script"]
    assert " round --date 2026-11-01 --check" in script  # the CLI's own resume test
    assert "exit 99" in script  # BashOperator's skip code: every later step is skipped too


def test_fetch_timeout_is_the_runs_time_budget_plus_margin(dag_report):
    assert dag_report["dags"]["crawl_cycle"]["tasks"]["fetch"]["has_pre_execute"]
    assert dag_report["fetch_timeout_for_40_plus_120"] == pytest.approx(160.0)


def test_pagerank_is_scheduled_on_the_crawldb_asset(dag_report):
    dag = dag_report["dags"]["pagerank"]
    assert dag["schedule_assets"] == ["crawl://crawldb/"]
    assert list(dag["tasks"]) == ["pagerank"]
    assert dag["tasks"]["pagerank"]["outlets"] == ["crawl://scores/"]
    assert "--set pagerank.max_iterations=20 pagerank --date 2026-11-01" in dag["tasks"]["pagerank"]["script"]


def test_inject_creates_tables_then_injects_the_seed_file(dag_report):
    dag = dag_report["dags"]["inject"]
    assert dag["tasks"]["inject"]["upstream"] == ["init"]
    assert dag["tasks"]["init"]["script"].endswith("/opt/recrawl/bin/crawler init")
    assert dag["tasks"]["inject"]["script"].endswith("crawler inject seeds.txt --date 2026-11-01")


def test_maintenance_runs_warc_retention_optimize_vacuum_with_safe_retention(dag_report):
    dag = dag_report["dags"]["maintenance"]
    assert dag["tasks"]["optimize"]["upstream"] == ["warc_retention"]
    assert dag["tasks"]["vacuum"]["upstream"] == ["optimize"]
    assert dag["params"]["retain_hours"] >= 168
    for task_id, step in (("warc_retention", "warc"), ("optimize", "optimize"), ("vacuum", "vacuum")):
        assert f"maintenance --step {step} --date 2026-11-01 --retain-hours 168.0" in dag["tasks"][task_id]["script"]
