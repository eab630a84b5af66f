"""What a non-local master gets from the session factory, without starting a JVM.

The real cluster (executors in other processes, a killed executor) is tests/spark_jobs/test_cluster.py.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from recrawl.config import load_config
from recrawl.sparkenv import cluster
from recrawl.sparkenv.spark import EnvironmentProblem


def cfg_with(**overrides):
    return load_config(environ={}).with_overrides(overrides)


@pytest.mark.parametrize(("master", "loopback"), [
    ("spark://127.0.0.1:7077", True),
    ("spark://localhost:7077", True),
    ("spark://127.0.0.1:7077,localhost:7078", True),
    ("spark://10.0.0.5:7077", False),
    ("spark://127.0.0.1:7077,10.0.0.5:7077", False),
    ("yarn", False),
    ("k8s://https://127.0.0.1:6443", False),
])
def test_loopback_masters(master, loopback):
    assert cluster.is_loopback(master) is loopback


def test_local_home_is_refused_for_a_remote_master_in_one_line(tmp_path):
    cfg = cfg_with(**{"spark.master": "spark://10.0.0.5:7077", "crawl.home": str(tmp_path)})
    with pytest.raises(EnvironmentProblem) as err:
        cluster.check_shared_home(cfg)
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path) in msg and "crawl.home_shared = true" in msg
    assert "s3a://" in msg
    # declared shared, on S3, local mode, or a loopback master: accepted
    cluster.check_shared_home(cfg.with_overrides({"crawl.home_shared": True}))
    cluster.check_shared_home(cfg.with_overrides({"crawl.home": "s3a://b/crawl"}))
    cluster.check_shared_home(cfg.with_overrides({"spark.master": "local[2]"}))
    cluster.check_shared_home(cfg.with_overrides({"spark.master": "spark://127.0.0.1:7077"}))
    with pytest.raises(EnvironmentProblem):
        cluster.check_shared_home(cfg.with_overrides({"crawl.home": f"file://{tmp_path}"}))


def test_archive_setting(tmp_path):
    master = {"spark.master": "yarn"}
    missing = tmp_path / "nope.tar.gz"
    with pytest.raises(EnvironmentProblem, match="scripts/pack_env.sh") as err:
        cluster.python_archive(cfg_with(**master, **{"spark.python_archive": str(missing)}))
    assert "\n" not in str(err.value)
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    assert cluster.python_archive(
        cfg_with(**master, **{"spark.python_archive": str(archive)})) == str(archive)
    assert cluster.python_archive(cfg_with(**master, **{"spark.python_archive": ""})) is None
    url = "hdfs:///envs/recrawl-env.tar.gz"
    assert cluster.python_archive(cfg_with(**master, **{"spark.python_archive": url})) == url


def test_cluster_settings_ship_archive_and_code(tmp_path):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    cfg = cfg_with(**{"spark.master": "spark://10.0.0.5:7077", "crawl.home": "s3a://b/c",
                      "spark.python_archive": str(archive)})
    conf, env = cluster.cluster_settings(cfg, tmp_path)
    assert conf["spark.archives"] == f"{archive}#env"
    assert conf["spark.pyspark.python"] == env["PYSPARK_PYTHON"] == "./env/bin/python"
    assert conf["spark.pyspark.driver.python"] == sys.executable
    names = zipfile.ZipFile(conf["spark.submit.pyFiles"]).namelist()
    for name in ("recrawl/sparkenv/cluster.py", "recrawl/defaults.toml", "fetcher/__init__.py",
                 "spark_jobs/fetch.py", "simweb/__init__.py"):
        assert name in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # workers with the dependencies, and the project, installed: nothing shipped
    conf, env = cluster.cluster_settings(
        cfg.with_overrides({"spark.python_archive": "", "spark.ship_code": False}), tmp_path)
    assert conf == {} and env == {}
    # local mode ships nothing
    assert cluster.cluster_settings(cfg_with(), tmp_path) == ({}, {})


def test_code_zip_is_importable_with_its_package_data(tmp_path):
    """A driver in cluster deploy mode imports recrawl from the zip: defaults.toml included."""
    zipped = cluster.code_zip(tmp_path)
    code = (f"import sys; sys.path.insert(0, {zipped!r}); import recrawl.config as c; "
            "assert c.__file__.startswith(sys.path[0]); "
            "print(c.load_config(environ={}).get('spark.master'))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "local[*]"


def test_executor_id_outside_spark_is_driver():
    assert cluster.executor_id() == "driver"
