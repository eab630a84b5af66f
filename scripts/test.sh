#!/usr/bin/env bash
# The test command: set up (idempotent), lint, then run the test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/fetcher -k robots`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Airflow's own virtualenv: the DAG tests (tests/dags) call it by subprocess.
bash scripts/setup_airflow.sh
.venv/bin/ruff check .
# Benchmarks and long scale runs are marked slow and stay out of the default run.
exec .venv/bin/python -m pytest -m "not slow" -p no:cacheprovider "$@"
