"""Fixtures for the DAG tests (helpers in tests/dags/airflow_helpers.py)."""

from __future__ import annotations

import json
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.dags.airflow_helpers import AIRFLOW_BIN, DAGS, airflow_env, require_airflow


@pytest.fixture(scope="session")
def dag_report(tmp_path_factory) -> dict:
    """tests/dags/airflow_probe.py's JSON report of dags/, parsed by the Airflow venv."""
    require_airflow()
    home = tmp_path_factory.mktemp("airflow-probe")
    env = airflow_env(home, AIRFLOW_VAR_RECRAWL_CRAWLER="/opt/recrawl/bin/crawler",
                      AIRFLOW_VAR_RECRAWL_ENV=json.dumps({"RECRAWL_SPARK__MASTER": "spark://h:7077"}))
    out = subprocess.run(
        [str(AIRFLOW_BIN / "python"), str(Path(__file__).with_name("airflow_probe.py")), str(DAGS),
         sysconfig.get_paths()["purelib"]],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
