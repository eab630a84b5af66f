#!/usr/bin/env bash
# The test command: set up (idempotent), lint, then run the test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/fetcher -k robots`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Airflow's own virtualenv: the DAG tests (tests/dags) call it by subprocess.
bash scripts/setup_airflow.sh
# Debian packages two tests need: chromium renders `crawler report` (tests/recrawl/test_report.py);
# docker-compose validates docker-compose.yml where the docker client lacks the compose plugin
# (tests/test_compose.py). Installed only when missing; without them those tests skip locally and
# fail under CI.
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if command -v docker >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
  command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "test: installing ${need[*]} (apt)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; } \
    >/dev/null 2>&1 || echo "test: could not install ${need[*]}; their tests will skip (fail in CI)" >&2
fi
.venv/bin/ruff check .
# Benchmarks and long scale runs are marked slow and stay out of the default run.
exec .venv/bin/python -m pytest -m "not slow" -p no:cacheprovider "$@"
