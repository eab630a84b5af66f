"""The driver JVM's class-data-sharing archive (recrawl/sparkenv/cds.py): when it is used, what it is
keyed by, and that a driver starts whatever the archive's state."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recrawl.config import ConfigError, load_config
from recrawl.sparkenv import cds

ROOT = Path(__file__).resolve().parents[2]


def _cfg(tmp_path, **extra):
    return load_config(environ={}).with_overrides({"spark.cds_dir": str(tmp_path / "cds"), **extra})


def _jars(tmp_path, sizes=(10, 20)):
    out = []
    for i, size in enumerate(sizes):
        p = tmp_path / f"lib-{i}.jar"
        p.write_bytes(b"x" * size)
        out.append(str(p))
    return out


def test_options_map_the_archive_only_once_it_is_built(tmp_path):
    cfg, jars = _cfg(tmp_path), _jars(tmp_path)
    assert cds.driver_options(cfg, jars) is None  # not built: the JVM starts as before
    path = cds.archive_path(cfg, jars)
    assert path.parent == tmp_path / "cds" and path.suffix == ".jsa"
    path.parent.mkdir()
    path.write_bytes(b"archive")
    options = cds.driver_options(cfg, jars)
    assert options.startswith(f"-XX:SharedArchiveFile={path} ")
    assert "-Xshare:auto" in options  # an unusable archive is skipped, never fatal
    assert cds.driver_options(_cfg(tmp_path, **{"spark.class_data_sharing": "off"}), jars) is None


def test_the_archive_is_keyed_by_the_jars(tmp_path):
    cfg = _cfg(tmp_path)
    a = cds.archive_path(cfg, _jars(tmp_path))
    assert cds.archive_path(cfg, _jars(tmp_path)) == a  # same jars, same archive
    assert cds.archive_path(cfg, _jars(tmp_path, sizes=(10, 21))) != a  # a jar changed
    assert cds.archive_path(cfg, _jars(tmp_path, sizes=(10,))) != a  # a jar less


def test_configured_driver_options_are_kept(tmp_path):
    flags = "-XX:SharedArchiveFile=/a.jsa -Xshare:auto"
    assert cds.with_archive("", flags) == flags
    assert cds.with_archive("-XX:+UseSerialGC", flags) == f"-XX:+UseSerialGC {flags}"
    assert cds.with_archive("-XX:+UseSerialGC", None) == "-XX:+UseSerialGC"
    own = "-XX:SharedArchiveFile=/mine.jsa"  # an operator's own archive wins
    assert cds.with_archive(own, flags) == own


def test_a_bad_setting_is_refused_before_a_jvm_starts(tmp_path):
    from recrawl.sparkenv.spark import check_environment

    with pytest.raises(ConfigError, match="class_data_sharing"):
        check_environment(_cfg(tmp_path, **{"spark.class_data_sharing": "always"}))


_PROBE = """
import sys
from pathlib import Path
from recrawl.config import load_config
from recrawl.sparkenv.spark import get_spark
from pyspark import SparkContext
cfg = load_config(environ={}).with_overrides({"spark.cds_dir": sys.argv[1], "spark.shuffle_partitions": 1,
    "spark.extra": {"spark.driver.extraClassPath": sys.argv[2]} if sys.argv[2] else {},
    "crawl.home": sys.argv[3], "spark.driver_jit": sys.argv[4]})
spark = get_spark(cfg, quiet=True, short_lived=True)
assert spark.sql("SELECT 41 + 1 AS x").collect()[0].x == 42
pid = SparkContext._gateway.proc.pid
maps = Path(f"/proc/{pid}/maps").read_text()
# the JVM's own view of its compiler level (recrawl/sparkenv/jit.py), not the options we passed
flags = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
quick = "-XX:TieredStopAtLevel=1" in list(flags)
parallel = "-XX:+UseParallelGC" in list(flags)
print(("mapped" if ".jsa" in maps else "not mapped") + (" quick" if quick else " full")
      + (" parallel" if parallel else ""))
spark.stop()
"""


def _probe(cds_dir: Path, home: Path, class_path: str = "", jit: str = "auto") -> str:
    out = subprocess.run([sys.executable, "-c", _PROBE, str(cds_dir), class_path, str(home), jit],
                         cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={k: v for k, v in os.environ.items() if not k.startswith("RECRAWL_")})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.spark
def test_a_driver_maps_the_built_archive_and_starts_without_a_usable_one(tmp_path):
    from recrawl.sparkenv.spark import find_jars

    cfg = load_config(environ={})
    built = cds.archive_path(cfg, find_jars(cfg))
    if not built.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{built} missing: scripts/setup.sh builds it")
        pytest.skip("no CDS archive: run `.venv/bin/python -m recrawl.sparkenv.cds`")
    # a new crawl home is a small crawl: under "auto" a short-lived driver stops at the quick compiler,
    # and the serial collector does not keep it from mapping the archive
    assert _probe(built.parent, tmp_path / "new-home") == "mapped quick"
    # a corrupt file under the archive's name: the JVM skips it (-Xshare:auto) and starts
    bad = tmp_path / "cds"
    bad.mkdir()
    (bad / built.name).write_bytes(b"not an archive" * 1000)
    assert _probe(bad, tmp_path / "new-home", jit="full") == "not mapped full parallel"
    # the full compiler on a small crawl runs the parallel collector (recrawl/sparkenv/jit.py), which maps
    # the archive as well
    assert _probe(built.parent, tmp_path / "new-home", jit="full") == "mapped full parallel"
    # a driver class path extended beyond the archive's (as the s3a jars extend it): the JVM
    # still maps it, for the classes of the archive's class path
    assert _probe(built.parent, tmp_path / "new-home", class_path=find_jars(cfg)[0]).startswith("mapped")
