"""Calling Airflow from the main test run: Airflow lives in its own virtualenv, reached by subprocess.

The DAG tests run under the main pytest (`.venv`), which has no Airflow; they call
`.venv-airflow/bin/...` with a throw-away AIRFLOW_HOME. Without `.venv-airflow` they are skipped
with the command that creates it — except in CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_BIN = ROOT / ".venv-airflow" / "bin"
DAGS = ROOT / "dags"


def require_airflow() -> None:
    """Skip (locally) or fail (in CI) when the Airflow virtualenv is missing."""
    if (AIRFLOW_BIN / "airflow").exists():
        return
    msg = ".venv-airflow is missing: run `bash scripts/setup_airflow.sh`"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg + " (CI must run the Airflow tests; scripts/test.sh sets it up)")
    pytest.skip(msg)


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for an Airflow command against an isolated AIRFLOW_HOME and the repo's dags/."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "RECRAWL_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
    })
    env.update(extra)
    return env


def run_airflow(args: list[str], env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess:
    """`airflow ARGS` with its output captured."""
    return subprocess.run([str(AIRFLOW_BIN / "airflow"), *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
