"""The one Spark session factory every job uses.

Local mode by default, any master by configuration, Delta's SQL extensions and catalog on, the
Maven-fetched jars on `spark.jars`. Before the JVM starts we check Java and the jars ourselves so
a missing install gives one line saying what to run, never a Py4J stack trace.

The s3a jars (hadoop-aws and the ~640 MB AWS SDK bundle, also in `.cache/jars`) are put on the
driver's and executors' `extraClassPath` only when the configuration uses S3 (`crawl.home` is
`s3a://`/`s3://`, or `spark.extra` sets `spark.hadoop.fs.s3…`): `spark.jars` would copy them
into every session's work folder (and ship them to every executor), and a local crawl home
does not need them. On a cluster they must therefore sit at the same path on every node, as
they do in the images of docker/Dockerfile.
"""

from __future__ import annotations

import atexit
import functools
import glob
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from recrawl.config import PROJECT_ROOT, Config, ConfigError
from recrawl.sparkenv import cds, jit
from recrawl.sparkenv.cluster import check_shared_home, cluster_settings, is_local, is_loopback, python_archive
from recrawl.store.lock import note_jvm

SETUP_HINT = "run `bash scripts/setup.sh` (it creates .venv and fetches the jars with Maven)"
MIN_JAVA = 17
# True in a process that runs many verbs in one session (app/daemon.py): never a short-lived driver.
LONG_LIVED = False


class EnvironmentProblem(RuntimeError):
    """Java or jars are missing or wrong; the message says what to do."""


def java_version(java: str | None = None) -> int:
    """Major version of the `java` that Spark will start (JAVA_HOME first, then PATH)."""
    if java is None:
        home = os.environ.get("JAVA_HOME")
        java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise EnvironmentProblem(
            f"Java not found (JAVA_HOME={os.environ.get('JAVA_HOME')!r}); Spark needs Java "
            f"{MIN_JAVA} or 21: install OpenJDK 17 (apt-get install openjdk-17-jdk-headless) "
            "or set JAVA_HOME"
        )
    return _java_major(java, Path(java).stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _java_major(java: str, mtime_ns: int) -> int:  # noqa: ARG001 (mtime_ns: a replaced binary is asked again)
    """`java -version`, asked once per binary in a process: a driver daemon checks the
    environment for every verb it runs, and each probe starts a JVM (~0.1 s)."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run {java}: {exc}; set JAVA_HOME to a JDK 17") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        raise EnvironmentProblem(f"cannot read the version of {java}; set JAVA_HOME to a JDK 17")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0" style
        major = int(m.group(2))
    return major


# File name prefixes of the s3a jars pom.xml fetches (hadoop-aws, software.amazon.awssdk:bundle,
# analyticsaccelerator-s3); everything else in the jars folder goes on spark.jars.
S3A_JAR_PREFIXES = ("hadoop-aws-", "bundle-", "analyticsaccelerator-s3-")


def _jars_dir(cfg: Config) -> Path:
    jars_dir = Path(cfg.get("spark.jars_dir"))
    if not jars_dir.is_absolute():
        jars_dir = PROJECT_ROOT / jars_dir
    return jars_dir


def _is_s3a_jar(path: str) -> bool:
    return Path(path).name.startswith(S3A_JAR_PREFIXES)


# The GraphX engine's classes (scripts/build_jvm.sh, recrawl/graph/graphx.py), built by the
# set-up in the project, not fetched: on `spark.jars` like Delta's, so executors get it too.
GRAPHX_JAR = PROJECT_ROOT / "jvm" / "target" / "recrawl-graphx.jar"


def find_jars(cfg: Config) -> list[str]:
    """The jar files for spark.jars (not the s3a ones; the GraphX engine's when built); raises
    with a setup hint when Delta's are absent."""
    jars_dir = _jars_dir(cfg)
    jars = [j for j in sorted(glob.glob(str(jars_dir / "*.jar"))) if not _is_s3a_jar(j)]
    if not any(Path(j).name.startswith("delta-spark_") for j in jars):
        raise EnvironmentProblem(f"Delta Lake jars missing in {jars_dir}: {SETUP_HINT}")
    if GRAPHX_JAR.is_file():
        jars.append(str(GRAPHX_JAR))
    return jars


def uses_s3(cfg: Config) -> bool:
    """Does this configuration reach S3: an s3a:// / s3:// crawl home or s3a settings?"""
    home = str(cfg.get("crawl.home"))
    if home.partition("://")[0].lower() in ("s3a", "s3") and "://" in home:
        return True
    return any(str(k).startswith("spark.hadoop.fs.s3") for k in cfg.get("spark.extra"))


def find_s3a_jars(cfg: Config) -> list[str]:
    """hadoop-aws and the AWS SDK bundle; raises with a setup hint when they are absent."""
    jars_dir = _jars_dir(cfg)
    jars = [j for j in sorted(glob.glob(str(jars_dir / "*.jar"))) if _is_s3a_jar(j)]
    names = [Path(j).name for j in jars]
    if not any(n.startswith("hadoop-aws-") for n in names) or not any(
            n.startswith("bundle-") for n in names):
        raise EnvironmentProblem(
            f"the crawl uses S3 but the s3a jars (hadoop-aws, AWS SDK bundle) are missing in "
            f"{jars_dir}: run `bash scripts/setup.sh --s3a` (or RECRAWL_S3A=1; ~640 MB, once)")
    return jars


def submitted_master() -> str | None:
    """The master of the spark-submit that launched this driver; None when we start the JVM.

    spark-submit starts the JVM first and hands its gateway to Python (PYSPARK_GATEWAY_PORT):
    then its --master, --archives, --py-files and --jars rule, not recrawl's configuration.
    """
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    from pyspark import SparkConf, SparkContext  # lazy: pyspark

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; SparkConf() alone would not
    return SparkConf(_jvm=SparkContext._jvm).get("spark.master", None)


CODEGEN_MODES = ("auto", "on", "off")
# Whole-stage codegen and the expression factory's (internal, but a plain SQL setting):
# NO_CODEGEN evaluates expressions interpreted instead of compiling them with Janino.
_CODEGEN_OFF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def codegen_mode(cfg: Config) -> str:
    mode = str(cfg.get("spark.codegen")).lower()
    if mode not in CODEGEN_MODES:
        raise ConfigError(f"spark.codegen must be one of {', '.join(CODEGEN_MODES)}, got {mode!r}")
    if cfg.get("spark.codegen_min_mb") < 0:
        raise ConfigError(f"spark.codegen_min_mb must be >= 0, got {cfg.get('spark.codegen_min_mb')}")
    return mode


def _stored_bytes(spark, path: str) -> int | None:
    """Bytes under `path` (files of every version still on disk), None when it does not exist;
    one listing through Hadoop's FileSystem, no Spark job."""
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return int(fs.getContentSummary(hpath).getLength()) if fs.exists(hpath) else None


def set_codegen(spark, cfg: Config) -> bool:
    """Turn Spark's code generation on or off for this session (`spark.codegen`); returns on.

    A small crawl's round is ~400 queries over tables of kilobytes: compiling each query's
    generated Java (Janino) was a quarter of the driver's CPU and more than the data work
    (benchmarks/round_cost.py). "auto" compiles only once the crawldb is big enough for
    compiled code to pay back: `spark.codegen_min_mb` on disk, measured when the session starts.
    """
    mode = codegen_mode(cfg)
    if mode == "auto":
        size = _stored_bytes(spark, cfg.table_path("crawldb"))
        on = size is not None and size >= cfg.get("spark.codegen_min_mb") * 2**20
    else:
        on = mode == "on"
    for key, value in _CODEGEN_OFF.items():
        if not on:
            spark.conf.set(key, value)
        elif spark.conf.get(key, None) == value:  # ours, from an earlier configuration
            spark.conf.unset(key)
    return on


def check_environment(cfg: Config) -> list[str]:
    """Validate Java, jars and (for a non-local master) the crawl home and the executors'
    environment archive before starting a JVM; returns the jar list."""
    codegen_mode(cfg)
    cds.mode(cfg)
    jit.mode(cfg)
    submitted = submitted_master()
    if submitted:  # the JVM runs already, with spark-submit's jars
        check_shared_home(cfg.with_overrides({"spark.master": submitted}, "spark-submit"))
        return []
    check_shared_home(cfg)
    if not is_local(str(cfg.get("spark.master"))):
        python_archive(cfg)
    major = java_version()
    if major < MIN_JAVA:
        raise EnvironmentProblem(
            f"Java {major} found but Spark 4 needs Java {MIN_JAVA}+; set JAVA_HOME to a JDK 17"
        )
    return find_jars(cfg)


def quiet_spark_logs() -> None:
    """Silence PySpark's Python-side error loggers.

    PySpark logs every SQL error (with the whole Java stack trace, as one JSON line) before
    raising it; `crawler sql` reports the error itself in one line.
    """
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).disabled = True
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


def _capture_jvm_stderr():
    """Point file descriptor 2 at a log file while the JVM starts, so that the JVM (and
    everything it spawns) writes its banner and log4j output there for its whole life.

    Returns a function that restores our stderr and returns the log file's path.
    """
    fd, path = tempfile.mkstemp(prefix="recrawl-jvm-", suffix=".log")
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    atexit.register(lambda: Path(path).unlink(missing_ok=True))

    def restore() -> str:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        return path

    return restore


def get_spark(cfg: Config, app_name: str | None = None, quiet: bool = False,
              short_lived: bool = False):
    """Create (or return the running) SparkSession configured for Delta.

    `quiet` (the read-only verbs, unless --verbose): the JVM's stderr (start-up banner, log4j
    output) goes to a temporary log file instead of the terminal, and PySpark's error loggers
    are off, so that the caller's one-line messages are all a user sees. `short_lived`: the
    process is one `crawler` verb, so on a small crawl the driver stops at the quick compiler
    (`spark.driver_jit`, recrawl/sparkenv/jit.py).
    """
    jars = check_environment(cfg)
    from pyspark import SparkContext  # lazy: pyspark
    from pyspark.sql import SparkSession  # lazy: pyspark

    short_lived = short_lived and not LONG_LIVED
    running = SparkContext._active_spark_context is not None  # static settings are fixed then

    submitted = submitted_master()
    builder = SparkSession.builder.appName(app_name or cfg.get("spark.app_name"))
    if submitted:
        cfg = cfg.with_overrides({"spark.master": submitted}, "spark-submit")
    else:
        builder = builder.master(cfg.get("spark.master")).config("spark.jars", ",".join(jars))
    builder = (
        builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.shuffle.partitions", str(cfg.get("spark.shuffle_partitions")))
        # Delta's VACUUM lists a table's folders in a job of this many tasks (Spark's default
        # 10,000: minutes of empty tasks per table on a small crawl); the shuffle width is
        # the operator's parallelism knob already.
        .config("spark.sql.sources.parallelPartitionDiscovery.parallelism",
                str(cfg.get("spark.shuffle_partitions")))
        .config("spark.driver.memory", cfg.get("spark.driver_memory"))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # Small tables dominate a crawl's metadata: keep Delta's log replay cheap.
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.databricks.delta.schema.autoMerge.enabled", "false")
        # Python workers are reused across tasks; fetch tasks are long, keep them alive.
        .config("spark.python.worker.reuse", "true")
    )
    master = str(cfg.get("spark.master"))
    if is_local(master) or is_loopback(master):
        # Local mode and a loopback cluster talk to this machine only: bind the driver to
        # loopback, never to the LAN.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1")
    if is_local(master) and not submitted:
        # Python workers must run this interpreter (the project's venv), not whatever
        # `python3` is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.ui.enabled", "false")
    elif not submitted and not running:  # (under spark-submit, its --archives and --py-files did this)
        # Any other master: the executors get the environment archive and the project's code
        # (recrawl/sparkenv/cluster.py); the zip lives as long as this process.
        work = tempfile.mkdtemp(prefix="recrawl-submit-")
        atexit.register(shutil.rmtree, work, True)
        conf, env = cluster_settings(cfg, work)
        os.environ.update(env)
        for key, value in conf.items():
            builder = builder.config(key, value)
    extra = {k: str(v) for k, v in cfg.get("spark.extra").items()}
    if not submitted:  # (spark-submit started the driver already)
        options = cds.with_archive(extra.get(cds.DRIVER_OPTIONS, ""), cds.driver_options(cfg, jars))
        options = jit.with_jit(options, cfg, short_lived)
        if options:
            extra[cds.DRIVER_OPTIONS] = options
    if uses_s3(cfg):
        if not submitted:  # (spark-submit's command line puts them on its class path)
            s3a_cp = os.pathsep.join(find_s3a_jars(cfg))
            for key in ("spark.driver.extraClassPath", "spark.executor.extraClassPath"):
                extra[key] = f"{extra[key]}{os.pathsep}{s3a_cp}" if extra.get(key) else s3a_cp
        # Hadoop has no s3:// filesystem of its own: let s3:// mean s3a.
        extra.setdefault("spark.hadoop.fs.s3.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem")
    for key, value in extra.items():
        builder = builder.config(key, value)
    if quiet:
        quiet_spark_logs()
        if not running:  # a JVM to start: capture its stderr
            restore = _capture_jvm_stderr()
            try:
                spark = builder.getOrCreate()
            except BaseException:
                log = restore()
                sys.stderr.write(Path(log).read_text(errors="replace")[-4000:])
                raise
            restore()
        else:
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    set_codegen(spark, cfg)
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    if proc is not None:
        note_jvm(proc.pid)
    return spark
