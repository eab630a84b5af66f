"""The Airflow demo's plumbing: the TOML it hands to tasks, the params it triggers with."""

from __future__ import annotations

from app.airflow_demo import config_toml, round_conf, step_lines
from app.demo import demo_config
from recrawl.config import load_config


def test_the_config_file_reproduces_the_demo_configuration(tmp_path):
    cfg = demo_config(tmp_path / "home", **{"spark.extra": {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC"},
                                            "spark.driver_daemon_dir": str(tmp_path / "driver")})
    path = tmp_path / "recrawl.toml"
    path.write_text(config_toml(cfg), encoding="utf-8")
    loaded = load_config(path, environ={})
    assert {s: dict(v) for s, v in loaded.values.items()} == {s: dict(v) for s, v in cfg.values.items()}


def test_round_conf_names_the_dag_params_with_the_configured_values(tmp_path):
    cfg = demo_config(tmp_path, **{"generate.top_n": 7, "fetcher.time_budget_s": 12.0})
    assert round_conf(cfg) == {"top_n": 7, "max_per_host": cfg.get("generate.max_per_host"),
                               "partitions": cfg.get("generate.partitions"), "time_budget_s": 12.0}


def test_step_lines_are_picked_from_a_dags_test_log(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(
        "2026-11-29T22:52:16Z [info     ] fetch 20261101: 3/24 URLs (12%); 1.0 pages/s now "
        "[airflow.task.hooks.airflow.providers.standard.hooks.subprocess.SubprocessHook] loc=x\n"
        "2026-11-29T22:52:16Z [info     ] generate 20261101: writing the fetch list (+2s) "
        "[airflow.task.hooks.airflow.providers.standard.hooks.subprocess.SubprocessHook] loc=x\n"
        "2026-11-29T22:52:17Z [info     ] generate 20261101: generated=24, hosts=24 "
        "[airflow.task.hooks.airflow.providers.standard.hooks.subprocess.SubprocessHook] loc=x\n"
        "2026-11-29T22:52:18Z [info     ] Command exited with return code 0 [airflow.task]\n",
        encoding="utf-8",
    )
    assert step_lines(log) == ["generate 20261101: generated=24, hosts=24"]


def test_both_demos_run_pagerank_unless_told_not_to():
    """PageRank is the design's last step: the scores, host ranks and site clusters the docs
    and the report show exist only after it."""
    from app import airflow_demo, demo

    for module in (demo, airflow_demo):
        assert module.parser().parse_args([]).pagerank is True
        assert module.parser().parse_args(["--no-pagerank"]).pagerank is False
