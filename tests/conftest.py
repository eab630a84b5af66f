"""Shared fixtures: one Spark session for the whole run (a JVM start costs ~5 s), and the
order in which modules reach pytest-xdist's workers."""

from __future__ import annotations

import pytest

from recrawl.config import load_config


def make_config(home, **overrides):
    """A Config whose crawl home is `home`, with dotted-key overrides."""
    cfg = load_config(environ={})
    values = {"crawl.home": str(home), "spark.shuffle_partitions": 2}
    values.update(overrides)
    return cfg.with_overrides(values, "test")


@pytest.fixture(scope="session")
def spark():
    from recrawl.sparkenv.spark import get_spark

    cfg = load_config(environ={}).with_overrides({"spark.shuffle_partitions": 2})
    session = get_spark(cfg, app_name="recrawl-tests")
    yield session
    session.stop()


@pytest.fixture()
def cfg(tmp_path):
    return make_config(tmp_path / "home")


# The longest modules (minutes each: real rounds, clusters, Airflow) start first. With
# `--dist loadfile --no-loadscope-reorder` (scripts/test.sh) workers take whole modules in
# collection order, so a long module collected last would run alone at the end
# (longest-processing-time-first keeps the two workers busy together). Seen in CI runs'
# `--durations` output; the rest keep their alphabetical order.
LONG_MODULES = (
    "tests/spark_jobs/test_cluster.py",
    "tests/dags/test_scheduler.py",
    "tests/spark_jobs/test_faults_crash.py",
    "tests/spark_jobs/test_round_e2e.py",
    "tests/spark_jobs/test_replay.py",
    "tests/dags/test_airflow_demo.py",
    "tests/spark_jobs/test_s3a.py",
    "tests/benchmarks/test_pipeline_freshness.py",
)


def pytest_collection_modifyitems(config, items) -> None:
    rank = {m: i for i, m in enumerate(LONG_MODULES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
