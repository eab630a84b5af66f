"""Which jars go where: Delta on spark.jars, the s3a ones only when the crawl uses S3."""

from __future__ import annotations

import pytest

from recrawl.config import load_config
from recrawl.sparkenv.spark import GRAPHX_JAR, EnvironmentProblem, find_jars, find_s3a_jars, uses_s3

DELTA = ["delta-spark_4.1_2.13-4.4.0.jar", "delta-storage-4.4.0.jar"]
S3A = ["hadoop-aws-3.4.2.jar", "bundle-2.29.52.jar", "analyticsaccelerator-s3-1.2.1.jar"]


def cfg_with(jars_dir, **overrides):
    values = {"spark.jars_dir": str(jars_dir)}
    values.update(overrides)
    return load_config(environ={}).with_overrides(values)


def test_s3a_jars_are_kept_off_spark_jars(tmp_path):
    for name in DELTA + S3A:
        (tmp_path / name).write_bytes(b"")
    cfg = cfg_with(tmp_path)
    graphx = [GRAPHX_JAR.name] if GRAPHX_JAR.is_file() else []  # built by scripts/build_jvm.sh
    assert sorted(p.rsplit("/", 1)[-1] for p in find_jars(cfg)) == sorted(DELTA + graphx)
    assert sorted(p.rsplit("/", 1)[-1] for p in find_s3a_jars(cfg)) == sorted(S3A)


def test_missing_s3a_jars_say_what_to_run(tmp_path):
    for name in DELTA:
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(EnvironmentProblem, match="s3a jars .* missing.*scripts/setup.sh --s3a"):
        find_s3a_jars(cfg_with(tmp_path))


@pytest.mark.parametrize(("overrides", "expected"), [
    ({}, False),
    ({"crawl.home": "/data/crawl"}, False),
    ({"crawl.home": "file:///data/crawl"}, False),
    ({"crawl.home": "s3a://bucket/crawl"}, True),
    ({"crawl.home": "S3://bucket/crawl"}, True),
    ({"spark.extra": {"spark.hadoop.fs.s3a.endpoint": "http://minio:9000"}}, True),
    ({"spark.extra": {"spark.executor.memory": "4g"}}, False),
])
def test_uses_s3(tmp_path, overrides, expected):
    assert uses_s3(cfg_with(tmp_path, **overrides)) is expected
