#!/usr/bin/env bash
# Sets up everything the project needs on a fresh machine, idempotently:
#   .venv             Python 3.11 virtualenv with the pinned packages (constraints.txt)
#   .cache/jars       Delta Lake jars from Maven Central (pom.xml, scripts/fetch_jars.sh), and
#                     with --s3a or RECRAWL_S3A=1 the s3a jars (hadoop-aws + the ~640 MB AWS SDK
#                     bundle) an s3a:// crawl home needs
#   jvm/target/recrawl-graphx.jar  the GraphX engine's classes (scripts/build_jvm.sh: javac against
#                     pyspark's own jars, nothing downloaded, a few seconds)
#   .cache/cds        the driver JVM's class-data-sharing archive (recrawl/sparkenv/cds.py)
#   .cache/cluster-env  only with --cluster or RECRAWL_CLUSTER=1: the executors' environment
#                     archive for a Spark cluster (scripts/pack_env.sh, docs/cluster.md)
# Re-running is cheap: each part is skipped when its inputs have not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER=${RECRAWL_CLUSTER:-0}
S3A=${RECRAWL_S3A:-0}
for arg in "$@"; do
  case $arg in
    --cluster) CLUSTER=1 ;;
    --s3a) S3A=1 ;;
    *) echo "setup: unknown option $arg (known: --cluster, --s3a)" >&2; exit 2 ;;
  esac
done
ROOT=$PWD
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' || {
  echo "setup: Python 3.11 is required (found $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 2
}
command -v java >/dev/null 2>&1 || [ -n "${JAVA_HOME:-}" ] || {
  echo "setup: Java 17 is required for Spark: apt-get install -y openjdk-17-jdk-headless" >&2
  exit 2
}
command -v mvn >/dev/null 2>&1 || {
  echo "setup: Maven is required to fetch the Delta jars: apt-get install -y maven" >&2
  exit 2
}

mkdir -p .cache
EXTRAS=${RECRAWL_EXTRAS:-dev}
stamp_py=.cache/venv.stamp
want_py=$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-16)-$EXTRAS
if [ ! -x .venv/bin/python ] || [ "$(cat $stamp_py 2>/dev/null)" != "$want_py" ]; then
  echo "setup: installing Python packages into .venv (extras: $EXTRAS)"
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip setuptools wheel
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[$EXTRAS]"
  echo "$want_py" > $stamp_py
fi

stamp_jars=.cache/jars.stamp
# The stamp covers the pom, the copy step's filter and the s3a choice: a change to any refetches.
want_jars=$(cat pom.xml scripts/fetch_jars.sh | sha1sum | cut -c1-16)-s3a$S3A
if [ ! -d .cache/jars ] || [ "$(cat $stamp_jars 2>/dev/null)" != "$want_jars" ]; then
  if [ "$S3A" = 1 ]; then
    echo "setup: fetching Delta and s3a jars from Maven Central into .cache/jars (~660 MB, once)"
  else
    echo "setup: fetching Delta jars from Maven Central into .cache/jars (~13 MB; the s3a jars: --s3a)"
  fi
  rm -rf .cache/jars
  RECRAWL_S3A=$S3A bash scripts/fetch_jars.sh "$ROOT/.cache/jars"
  echo "$want_jars" > $stamp_jars
fi
# Keyed by the Java sources and pyspark (the jars they compile against).
stamp_jvm=jvm/target/build.stamp
want_jvm=$( (find jvm/src -type f -print0 | sort -z | xargs -0 cat; cat scripts/build_jvm.sh;
             .venv/bin/python -c 'import pyspark; print(pyspark.__version__)') | sha1sum | cut -c1-16)
if [ ! -f jvm/target/recrawl-graphx.jar ] || [ "$(cat $stamp_jvm 2>/dev/null)" != "$want_jvm" ]; then
  echo "setup: compiling the GraphX engine into jvm/target/recrawl-graphx.jar"
  PYTHON=.venv/bin/python bash scripts/build_jvm.sh
  echo "$want_jvm" > $stamp_jvm
fi
if [ "$CLUSTER" = 1 ]; then
  bash scripts/pack_env.sh
fi
# The driver JVM's class-data-sharing archive (recrawl/sparkenv/cds.py; ~190 MB, a minute once): every
# later `crawler` step starts its JVM without parsing Spark's and Delta's classes again. Keyed
# by the JVM, pyspark and the jars, so it is rebuilt when one of them changes.
.venv/bin/python -m recrawl.sparkenv.cds
echo "setup: ready (.venv, $(ls .cache/jars | wc -l) jars in .cache/jars)"
