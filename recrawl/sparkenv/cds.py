"""A class-data-sharing archive for the driver JVM (AppCDS): Spark's and Delta's classes parsed
and verified once, then mapped by every later driver.

Every `crawler` step, so every Airflow task, starts its own driver, which loads ~24,000 classes
before its first Delta query: most of a small step's CPU. JDK 13+ can dump the classes a run
loaded (`-XX:ArchiveClassesAtExit`) and map that archive in later runs
(`-XX:SharedArchiveFile`); benchmarks/jvm_start.py measures the difference side by side.

The archive belongs to one JVM build, one pyspark and one set of jars: its file name carries a
key of all three, so an upgrade makes setup build a new file rather than use a stale one.
`-Xshare:auto` makes a JVM that finds it unusable (corrupt, or a class path that does not
begin with the archive's) start as it would without, and the cds log is off so that is silent;
a class path extended at its end (the s3a jars on the driver's) still maps it.
`spark.class_data_sharing = "off"` turns it off; scripts/setup.sh builds it (`python -m
recrawl.sparkenv.cds`).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from recrawl.config import PROJECT_ROOT, Config, ConfigError, load_config

MODES = ("auto", "off")
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
# -Xshare:auto (the default, said for clarity): an unusable archive is skipped, never fatal.
QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def mode(cfg: Config) -> str:
    value = str(cfg.get("spark.class_data_sharing")).lower()
    if value not in MODES:
        raise ConfigError(f"spark.class_data_sharing must be one of {', '.join(MODES)}, got {value!r}")
    return value


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and Path(java).exists() else None


@functools.lru_cache(maxsize=4)
def _java_identity(java: str) -> str:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    return f"{java}\n{out.stderr}{out.stdout}"


def archive_dir(cfg: Config) -> Path:
    folder = Path(cfg.get("spark.cds_dir"))
    return folder if folder.is_absolute() else PROJECT_ROOT / folder


def archive_path(cfg: Config, jars: Sequence[str]) -> Path | None:
    """Where the archive for this JVM, pyspark and jars lives (None without a java)."""
    java = _java()
    if java is None:
        return None
    key = json.dumps([_java_identity(java), version("pyspark"),
                      [(Path(j).name, Path(j).stat().st_size) for j in jars]])
    return archive_dir(cfg) / f"driver-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def driver_options(cfg: Config, jars: Sequence[str]) -> str | None:
    """The driver's JVM options that map the archive; None when off or not built."""
    if mode(cfg) == "off":
        return None
    path = archive_path(cfg, jars)
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None and path.is_file() else None


def with_archive(options: str, cds: str | None) -> str:
    """`options` (the configured driver options) plus the archive's, unless they name one."""
    if not cds or "SharedArchiveFile" in options or "ArchiveClassesAtExit" in options:
        return options
    return f"{options} {cds}".strip()


def build(cfg: Config, force: bool = False) -> tuple[Path, bool]:
    """Build the archive for the configured jars (a training session in a child process);
    returns its path and whether it was built now. Older archives in the folder are removed."""
    from recrawl.sparkenv.spark import find_jars  # lazy: cycle (recrawl.sparkenv.spark maps the archive)

    if mode(cfg) == "off":
        raise ConfigError("spark.class_data_sharing is off: nothing to build")
    path = archive_path(cfg, find_jars(cfg))
    if path is None:
        raise ConfigError("no java found (JAVA_HOME or PATH): cannot build the CDS archive")
    if path.is_file() and not force:
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.stem}.{os.getpid()}.part")
    env = dict(os.environ, RECRAWL_SPARK__JARS_DIR=str(Path(find_jars(cfg)[0]).parent))
    run = subprocess.run([sys.executable, "-m", "recrawl.sparkenv.cds", "--train", str(part)],
                         capture_output=True, text=True, env=env, timeout=1800)
    if run.returncode != 0 or not part.is_file():
        part.unlink(missing_ok=True)
        raise RuntimeError(f"CDS training run failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
    for old in path.parent.glob("driver-*.jsa"):
        if old != path:
            old.unlink(missing_ok=True)
    os.replace(part, path)
    return path, True


def _train(out: Path) -> None:
    """A small session touching what a crawl step loads: every table's DDL, Delta writes,
    MERGE/UPDATE/DELETE, history, aggregates, windows, joins and a Python mapPartitions.
    The JVM writes the archive when it exits, so this waits for it."""
    from pyspark import SparkContext  # lazy: pyspark

    from recrawl.sparkenv.spark import get_spark  # lazy: cycle (recrawl.sparkenv.spark maps the archive)
    from recrawl.store.tables import init_tables  # lazy: pyspark (via recrawl.store.tables)

    with tempfile.TemporaryDirectory(prefix="recrawl-cds-") as tmp:
        cfg = load_config().with_overrides({
            "crawl.home": str(Path(tmp) / "home"), "spark.shuffle_partitions": 2,
            "spark.class_data_sharing": "off", "spark.extra": {
                DRIVER_OPTIONS: f"-XX:ArchiveClassesAtExit={out} -Xlog:cds=off -Xlog:cds+dynamic=off"},
        }, "cds training")
        spark = get_spark(cfg, app_name="recrawl-cds-training", quiet=True)
        init_tables(spark, cfg)
        t = f"delta.`{Path(tmp) / 't'}`"
        for sql in (
            f"CREATE TABLE {t} USING DELTA PARTITIONED BY (p) AS SELECT id, CAST(id AS STRING) AS s,"
            " id % 3 AS p, current_timestamp() AS ts, array(id) AS a, map('k', id) AS m FROM range(200)",
            f"MERGE INTO {t} AS t USING (SELECT id, 'x' AS s, id % 3 AS p, current_timestamp() AS ts,"
            " array(id) AS a, map('k', id) AS m FROM range(100, 300)) AS s ON t.id = s.id"
            " WHEN MATCHED AND t.p = 1 THEN DELETE WHEN MATCHED THEN UPDATE SET *"
            " WHEN NOT MATCHED THEN INSERT *",
            f"UPDATE {t} SET s = upper(s) WHERE id < 10",
            f"DELETE FROM {t} WHERE id = 5",
            f"INSERT INTO {t} REPLACE WHERE p = 2 SELECT id, s, p, ts, a, m FROM {t} WHERE p = 2",
        ):
            spark.sql(sql)
        for sql in (
            f"DESCRIBE HISTORY {t}",
            f"SELECT p, count(*), max(ts), collect_list(s), percentile_approx(id, 0.5) FROM {t} GROUP BY p",
            f"SELECT id, row_number() OVER (PARTITION BY p ORDER BY id DESC) AS r, "
            f"lag(s) OVER (PARTITION BY p ORDER BY id) FROM {t}",
            f"SELECT a.id, b.s, explode(a.a) FROM {t} a JOIN {t} b ON a.id = b.id + 1 "
            f"LEFT ANTI JOIN (SELECT 7 AS id) c ON a.id = c.id",
            f"SELECT * FROM {t} VERSION AS OF 1 WHERE s LIKE '1%' AND regexp_extract(s, '(\\\\d+)', 1) != ''",
        ):
            spark.sql(sql).collect()
        df = spark.createDataFrame([(i, f"u{i}") for i in range(50)], "id long, url string")
        df.rdd.mapPartitions(lambda rows: ([r.id, r.url.upper()] for r in rows)).toDF(["id", "u"]).count()
        proc = SparkContext._gateway.proc
        spark.stop()
        proc.stdin.close()  # the JVM exits when its stdin closes, writing the archive
        proc.wait(timeout=900)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recrawl.sparkenv.cds",
                                description="build the driver JVM's class-data-sharing archive")
    p.add_argument("--force", action="store_true", help="build it again even if it exists")
    p.add_argument("--train", metavar="OUT", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.train:
        _train(Path(args.train))
        return 0
    cfg = load_config()
    if mode(cfg) == "off":
        print("cds: spark.class_data_sharing is off; nothing built")
        return 0
    t0 = time.monotonic()
    path, built = build(cfg, force=args.force)
    size = path.stat().st_size / 2**20
    print(f"cds: {'built' if built else 'up to date:'} {path} ({size:.0f} MiB"
          + (f", {time.monotonic() - t0:.0f} s)" if built else ")"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
