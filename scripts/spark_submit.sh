#!/usr/bin/env bash
# Runs one `crawler` verb as a Spark application through spark-submit (docs/cluster.md):
#   MASTER=spark://host:7077 [DEPLOY_MODE=client|cluster] bash scripts/spark_submit.sh round --date 2026-11-01
# Ships the executors' environment archive (scripts/pack_env.sh) as --archives ...#env, the
# project's code as --py-files (a zip of recrawl/ fetcher/ spark_jobs/ app/ simweb/, built here), the
# Delta jars as --jars; prints the spark-submit command before running it. Extra spark-submit
# options go in SUBMIT_OPTS (e.g. "--conf spark.executor.memory=4g").
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MASTER:?set MASTER, e.g. MASTER=spark://127.0.0.1:7077}"
DEPLOY_MODE=${DEPLOY_MODE:-client}
# A master on loopback: keep the driver there too (recrawl/sparkenv/spark.py does the same).
case $MASTER in spark://127.0.0.1:*|spark://localhost:*) export SPARK_LOCAL_IP=127.0.0.1 ;; esac
PY=${PYTHON_DRIVER:-$PWD/.venv/bin/python}
ARCHIVE=${ARCHIVE:-$PWD/.cache/cluster-env/recrawl-env.tar.gz}
[ -f "$ARCHIVE" ] || { echo "spark_submit: $ARCHIVE missing: run bash scripts/pack_env.sh" >&2; exit 2; }
SPARK_HOME=${SPARK_HOME:-$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}
CODE=$("$PY" -c 'import sys; sys.path.insert(0, "."); from recrawl.sparkenv.cluster import code_zip; print(code_zip(".cache"))')
JARS=$(ls "$PWD"/.cache/jars/delta-*.jar | paste -sd, -)
# the GraphX engine's classes (scripts/build_jvm.sh; recrawl/graph/graphx.py)
GRAPHX_JAR=$PWD/jvm/target/recrawl-graphx.jar
[ -f "$GRAPHX_JAR" ] && JARS="$JARS,$GRAPHX_JAR"
# The s3a jars (when set-up fetched them) on the class paths, at the same path on every node
# (recrawl/sparkenv/spark.py explains why not --jars).
s3a=()
S3A_CP=$(ls "$PWD"/.cache/jars/{hadoop-aws,bundle,analyticsaccelerator-s3}-*.jar 2>/dev/null | paste -sd: - || true)
[ -n "$S3A_CP" ] && s3a=(--conf "spark.driver.extraClassPath=$S3A_CP" --conf "spark.executor.extraClassPath=$S3A_CP")
if [ "$DEPLOY_MODE" = cluster ]; then
  driver_python=./env/bin/python   # the driver runs in the cluster, from the archive
else
  driver_python=$PY
fi
cmd=("$SPARK_HOME/bin/spark-submit" --master "$MASTER" --deploy-mode "$DEPLOY_MODE"
     --archives "$ARCHIVE#env" --py-files "$CODE" --jars "$JARS" "${s3a[@]}"
     --conf spark.pyspark.python=./env/bin/python --conf "spark.pyspark.driver.python=$driver_python"
     ${SUBMIT_OPTS:-} scripts/submit_main.py "$@")
echo "${cmd[*]}" >&2
exec "${cmd[@]}"
