#!/usr/bin/env bash
# Copies the JVM jars of pom.xml into a folder (default .cache/jars): Delta Lake, and with
# RECRAWL_S3A=1 (pom.xml's `s3a` profile) also hadoop-aws + the AWS SDK v2 bundle it was built
# against (~640 MB, only an s3a:// crawl home needs them). Used by scripts/setup.sh and
# docker/Dockerfile. The group filter keeps transitive artifacts that pyspark already ships
# (Spark, Hadoop's shaded client, Jackson, ...) out of the folder.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-$PWD/.cache/jars}
profile=()
[ "${RECRAWL_S3A:-0}" = 1 ] && profile=(-Ps3a)
mvn -q -B "${profile[@]}" dependency:copy-dependencies -DoutputDirectory="$OUT" -DincludeScope=runtime \
    -DincludeGroupIds=io.delta,org.apache.hadoop,software.amazon.awssdk,software.amazon.s3.analyticsaccelerator
