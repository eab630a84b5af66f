#!/usr/bin/env bash
# The test command: set up (idempotent), lint, then run the test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/fetcher -k robots`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Read and unset: every other RECRAWL_* name is a crawler setting (RECRAWL_<SECTION>__<KEY>), and
# the configuration refuses one that is not, in set-up's CDS build and in the tests' CLI calls.
workers=${RECRAWL_TEST_WORKERS:-2}
unset RECRAWL_TEST_WORKERS
# Three independent environments, built side by side (on a fresh clone each is minutes of pip,
# Maven or a training session; a set-up step that is up to date returns at once):
# Airflow's own virtualenv: the DAG tests (tests/dags) call it by subprocess.
# pywb's own virtualenv: the replay tests (tests/spark_jobs/test_replay.py) run it.
logs=$(mktemp -d)
bash scripts/setup_airflow.sh >"$logs/airflow" 2>&1 & airflow_pid=$!
bash scripts/setup_pywb.sh >"$logs/pywb" 2>&1 & pywb_pid=$!
trap 'kill $airflow_pid $pywb_pid 2>/dev/null || true' EXIT
# --s3a: the s3a tests need hadoop-aws and the AWS SDK bundle; --cluster: the cluster test
# (tests/spark_jobs/test_cluster.py) ships the executors' environment archive.
bash scripts/setup.sh --s3a --cluster
for name in airflow pywb; do
  pid_var=${name}_pid
  rc=0; wait "${!pid_var}" || rc=$?
  cat "$logs/$name"
  [ "$rc" = 0 ] || { echo "test: scripts/setup_$name.sh failed (exit $rc)" >&2; exit "$rc"; }
done
trap - EXIT
rm -rf "$logs"
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
# Two worker processes by default (RECRAWL_TEST_WORKERS=0 runs in one): the cores are 90-99 %
# busy through nearly every minute of a run, JVM work mostly. A third worker was tried on
# 2026-12-05: pytest 1,228 s at 3abefc9 (1,351 s with two), then 1,398 s and 1,591 s once the
# freshness benchmark had joined the run -- no gain beyond the runs' spread, and one more Spark
# session warming up its JIT.
# --dist loadfile keeps each file on one worker, so a module's fixtures (the e2e crawl) are
# built once.
dist=()
# --no-loadscope-reorder: xdist would otherwise hand out files by their number of tests, which
# sent the two-test cluster module last, to run alone at the end; tests/conftest.py orders the
# longest modules first instead.
[ "$workers" != 0 ] && dist=(-n "$workers" --dist loadfile --no-loadscope-reorder)
# --durations: the slowest tests in every run's output, the figures CI time is managed by.
exec .venv/bin/python -m pytest -m "not slow" -p no:cacheprovider --durations=40 "${dist[@]}" "$@"
