"""One real `crawl_cycle` run through Airflow over the simulated web, then the same date again.

`airflow dags test crawl_cycle 2026-11-01` (Airflow venv, throw-away metadata DB) runs every task,
each a `.venv/bin/crawler` subprocess reading RECRAWL_CONFIG; the tables are then checked from
this process's Spark session. The second run of the date must change nothing: same rows, and
not one new Delta table version.
"""

from __future__ import annotations

import json

import pytest

from tests.dags.airflow_helpers import airflow_env, require_airflow, run_airflow

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]

DATE = "2026-11-01"
ROUND = "20261101"
STEPS = ("generate", "fetch", "parse", "dedup", "updatedb", "schedule")
TABLES = ("crawldb", "fetch_list", "fetches", "pages", "links", "duplicates", "robots", "hosts",
          "scores", "rounds")


def _snapshot(spark, cfg) -> dict:
    """Every table's current Delta version and rows (order-independent)."""
    from delta.tables import DeltaTable

    from recrawl.tables import read

    snap = {}
    for t in TABLES:
        version = DeltaTable.forPath(spark, cfg.table_path(t)).history(1).select("version").first()[0]
        rows = sorted(repr(sorted(r.asDict(recursive=True).items())) for r in read(spark, cfg, t).collect())
        snap[t] = (version, rows)
    return snap


def _tail(proc) -> str:
    return (proc.stdout + proc.stderr)[-4000:]


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    require_airflow()
    from recrawl.airflow_demo import SHORT_LIVED_DRIVER, config_toml, round_conf
    from recrawl.demo import demo_config
    from recrawl.rounds import parse_date
    from recrawl.tables import init_tables
    from simweb import SimWeb
    from spark_jobs import inject

    tmp = tmp_path_factory.mktemp("airflow-run")
    web = SimWeb(seed=11, n_sites=2, pages_per_site=6)
    web.start()
    try:
        cfg = demo_config(tmp / "crawl", **{
            "fetcher.time_budget_s": 12.0, "fetcher.min_delay_s": 0.2, "generate.max_per_host": 8,
            "spark.shuffle_partitions": 2, "spark.extra": SHORT_LIVED_DRIVER,
        })
        config = tmp / "recrawl.toml"
        config.write_text(config_toml(cfg), encoding="utf-8")
        init_tables(spark, cfg)
        seeds = tmp / "seeds.txt"
        seeds.write_text("\n".join(web.seed_urls()) + "\n", encoding="utf-8")
        inject.run(spark, cfg, str(seeds), parse_date(DATE))

        env = airflow_env(tmp / "airflow", RECRAWL_CONFIG=str(config))
        migrate = run_airflow(["db", "migrate"], env, timeout=300)
        assert migrate.returncode == 0, _tail(migrate)
        cmd = ["dags", "test", "crawl_cycle", DATE, "--conf", json.dumps(round_conf(cfg))]
        first = run_airflow(cmd, env)
        assert first.returncode == 0, _tail(first)
        after_first = _snapshot(spark, cfg)
        second = run_airflow(cmd, env)
        assert second.returncode == 0, _tail(second)
        after_second = _snapshot(spark, cfg)
        yield {"cfg": cfg, "first": first, "second": second,
               "after_first": after_first, "after_second": after_second}
    finally:
        web.stop()


def _rows(spark, cfg, table, where="true"):
    from recrawl.tables import read

    return [r.asDict(recursive=True) for r in read(spark, cfg, table).where(where).collect()]


def test_the_run_executed_every_step_for_the_logical_date(spark, runs):
    cfg = runs["cfg"]
    rounds = _rows(spark, cfg, "rounds")
    assert [r["round_id"] for r in rounds] == [ROUND]
    assert set(rounds[0]["steps_done"]) == set(STEPS)
    assert str(rounds[0]["logical_date"]) == DATE
    assert rounds[0]["counts"]["generate.generated"] > 0
    generated = sorted(r["url"] for r in _rows(spark, cfg, "fetch_list", f"round_id = '{ROUND}'"))
    fetched = sorted(r["url"] for r in _rows(spark, cfg, "fetches", f"round_id = '{ROUND}'"))
    assert generated and fetched == generated
    assert _rows(spark, cfg, "pages", f"round_id = '{ROUND}'")
    assert any((r["fetch_count"] or 0) > 0 for r in _rows(spark, cfg, "crawldb"))
    out = runs["first"].stdout + runs["first"].stderr
    for step in STEPS:  # each task ran its own crawler verb for the data interval's date
        assert f"{step} --date {DATE}" in out, step


def test_running_the_same_date_again_changes_nothing(runs):
    out = runs["second"].stdout + runs["second"].stderr
    assert "already completed every step: skipping" in out
    assert f"generate --date {DATE}" not in out  # no step ran
    for table in TABLES:
        assert runs["after_second"][table] == runs["after_first"][table], table
