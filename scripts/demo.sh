#!/usr/bin/env bash
# The main job: set up both virtualenvs (.venv for Spark/Delta, .venv-airflow for Airflow), serve
# the project's simulated web, inject its seeds and crawl it for several logical days through the
# Airflow `crawl_cycle` DAG (one `airflow dags test` run per day, the simulated web's day moved
# before each), then print a summary from the Delta tables and the server-side politeness audit;
# the crawl can then be browsed in pywb with `crawler replay` (printed at the end).
# Arguments go to `python -m app.airflow_demo` (e.g. --rounds 5 --sites 12; --no-pagerank skips the final PageRank).
# The quicker in-process variant without Airflow: .venv/bin/python -m app.demo
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_airflow.sh
bash scripts/setup_pywb.sh  # `crawler replay` of the demo crawl
exec .venv/bin/python -m app.airflow_demo "$@"
