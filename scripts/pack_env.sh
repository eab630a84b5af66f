#!/usr/bin/env bash
# Builds the Python environment Spark executors run, as one relocatable archive:
#   .cache/cluster-env/recrawl-env.tar.gz   (venv-pack of .cache/cluster-env/venv)
# For a non-local master recrawl/sparkenv/spark.py ships it as spark.archives (`<archive>#env`) and
# points spark.pyspark.python at ./env/bin/python (docs/cluster.md). The archive holds the
# project's third-party dependencies (pyproject.toml [project].dependencies, pinned by
# constraints.txt), not the project itself: recrawl/sparkenv/spark.py zips recrawl/, fetcher/,
# spark_jobs/ and simweb/ at session start and ships them with spark.submit.pyFiles, so a code
# change never needs a new archive. pyspark's jars/ (~400 MB) stays out: executors run the
# cluster's own Spark, and their Python workers import pyspark from it.
# Like venv-pack itself, the archive does not contain the interpreter: workers need Python
# 3.11 at the path `readlink -f .cache/cluster-env/venv/bin/python` prints (the same image or
# the same install on every node).
# Re-running is cheap: skipped while pyproject.toml, constraints.txt and this script are unchanged.
# Called by scripts/setup.sh when RECRAWL_CLUSTER=1 (or `setup.sh --cluster`) and by
# scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
OUT=.cache/cluster-env
ARCHIVE=$OUT/recrawl-env.tar.gz
stamp=$OUT/env.stamp
want=$(cat pyproject.toml constraints.txt scripts/pack_env.sh | sha1sum | cut -c1-16)
if [ -f "$ARCHIVE" ] && [ "$(cat $stamp 2>/dev/null)" = "$want" ]; then
  echo "pack_env: $ARCHIVE is up to date"
  exit 0
fi
t0=$(date +%s)
echo "pack_env: building the executors' environment into $ARCHIVE"
rm -rf "$OUT/venv" "$ARCHIVE" "$stamp"
mkdir -p "$OUT"
"$PY" -m venv "$OUT/venv"
"$OUT/venv/bin/python" - > "$OUT/requirements.txt" <<'PYEOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    project = tomllib.load(f)["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["cluster"]))
PYEOF
"$OUT/venv/bin/python" -m pip install -q --upgrade pip
"$OUT/venv/bin/python" -m pip install -q -c constraints.txt -r "$OUT/requirements.txt"
# Not needed by a Python worker: pyspark's jars (the cluster brings its own Spark), byte code
# caches (rebuilt on first import), the packer itself.
"$OUT/venv/bin/venv-pack" -q -p "$OUT/venv" -o "$ARCHIVE.tmp" --format tar.gz \
  --exclude 'lib/python3.11/site-packages/pyspark/jars/*' \
  --exclude '*/__pycache__/*' \
  --exclude 'lib/python3.11/site-packages/venv_pack*' \
  --exclude 'bin/venv-pack'
mv "$ARCHIVE.tmp" "$ARCHIVE"
echo "$want" > $stamp
echo "pack_env: $(du -h "$ARCHIVE" | cut -f1) in $(( $(date +%s) - t0 )) s"
