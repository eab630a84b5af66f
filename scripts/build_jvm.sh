#!/usr/bin/env bash
# Builds the project's JVM classes (jvm/src/main/java: the GraphX engine of recrawl/graph/graphx.py)
# into jvm/target/recrawl-graphx.jar with the JDK's javac and jar, compiled against pyspark's own
# jars folder: Spark, GraphX and Scala are `provided` by pyspark, so nothing is downloaded (a
# Maven build would fetch its compiler plugins and Spark's poms first). A few seconds.
# recrawl/sparkenv/spark.py puts the jar on `spark.jars` (shipped to executors), scripts/spark_submit.sh
# on --jars. Used by scripts/setup.sh and docker/Dockerfile.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$PWD/.venv/bin/python}
OUT=${1:-$PWD/jvm/target/recrawl-graphx.jar}
SPARK_JARS=$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
javac -nowarn --release 17 -cp "$SPARK_JARS/*" -d "$classes" $(find jvm/src/main/java -name '*.java' | sort)
mkdir -p "$(dirname "$OUT")"
jar cf "$OUT.tmp" -C "$classes" .
mv "$OUT.tmp" "$OUT"
