#!/usr/bin/env bash
# Airflow for a laptop, in the foreground: the scheduler, DAG processor, triggerer and API server
# (UI on http://127.0.0.1:8080, no login) of the project's AIRFLOW_HOME (var/airflow unless
# AIRFLOW_HOME is set), after setting it up (scripts/setup_airflow.sh, idempotent). Tasks inherit
# this environment: export RECRAWL_CONFIG (or RECRAWL_<SECTION>__<KEY>) first, e.g.
#   RECRAWL_CONFIG=var/demo/recrawl.toml bash scripts/airflow_scheduler.sh
# Ctrl-C stops every component. Backfills and the paused-DAG trap: docs/airflow.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_airflow.sh
export AIRFLOW_HOME=${AIRFLOW_HOME:-$PWD/var/airflow}
if [ -n "${RECRAWL_CONFIG:-}" ]; then
  RECRAWL_CONFIG=$(realpath "$RECRAWL_CONFIG")  # tasks run in the repository; keep it absolute
  export RECRAWL_CONFIG
fi
# `airflow standalone` starts each component as an `airflow ...` subprocess found on PATH.
export PATH=$PWD/.venv-airflow/bin:$PATH
exec airflow standalone
