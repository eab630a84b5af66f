"""What a non-local Spark master needs from the session factory (docs/cluster.md).

* The executors' Python environment: the archive scripts/pack_env.sh builds (venv-pack of the
  project's pinned third-party dependencies) goes out as `spark.archives` (`<archive>#env`) and
  the executors' Python workers run `./env/bin/python` inside it (`spark.pyspark.python`); the
  driver keeps its own interpreter.
* The project's own code: recrawl/, analyst/, fetcher/, spark_jobs/, app/ and simweb/ zipped from the driver's
  source at session start and shipped with `spark.submit.pyFiles`. A zip rather than a wheel in
  the archive: it is built in well under a second, so executors always run the driver's code and
  an edit never needs a new ~70 MB archive.
* A crawl home every node sees: a local folder is refused for a master whose executors may run
  on other machines, unless the operator says it is a shared mount (`crawl.home_shared`).
"""

from __future__ import annotations

import os
import sys
import zipfile
from pathlib import Path

from recrawl.config import PROJECT_ROOT, Config, local_path

ARCHIVE_HINT = "run `bash scripts/pack_env.sh` (or `RECRAWL_CLUSTER=1 bash scripts/setup.sh`)"
DEFAULT_ARCHIVE = ".cache/cluster-env/recrawl-env.tar.gz"
PACKAGES = ("recrawl", "analyst", "fetcher", "spark_jobs", "app", "simweb")
# Where executors unpack the archive (the `#env` of spark.archives) and the Python they run.
ENV_ALIAS = "env"
EXECUTOR_PYTHON = f"./{ENV_ALIAS}/bin/python"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def is_local(master: str) -> bool:
    """local, local[4], local[*], local-cluster[...] run every executor in or beside the driver
    from the driver's own files."""
    return master.startswith("local")


def is_loopback(master: str) -> bool:
    """A standalone master on 127.0.0.1/localhost: only workers on this machine can register."""
    if not master.startswith("spark://"):
        return False
    hosts = [h.strip().rsplit(":", 1)[0] for h in master[len("spark://"):].split(",")]
    return all(h in LOOPBACK_HOSTS for h in hosts)


def python_archive(cfg: Config) -> str | None:
    """The archive executors unpack as ./env, or None when their Python already has the
    dependencies (`spark.python_archive = ""`)."""
    from recrawl.sparkenv.spark import EnvironmentProblem  # lazy: cycle (recrawl.sparkenv.spark imports this module)

    value = str(cfg.get("spark.python_archive")).strip()
    if not value:
        return None
    if value == "auto":
        path = PROJECT_ROOT / DEFAULT_ARCHIVE
    elif "://" in value and not value.startswith("file:"):
        return value  # hdfs://, s3a://, https://: Spark fetches it itself
    else:
        path = Path(value.removeprefix("file://")).expanduser().resolve()
    if not path.is_file():
        raise EnvironmentProblem(
            f"spark.master {cfg.get('spark.master')} needs the executors' environment archive "
            f"{path}, which is missing: {ARCHIVE_HINT}, or set spark.python_archive = \"\" if "
            "every worker's Python already has the project's dependencies")
    return str(path)


def code_zip(directory: str | Path) -> str:
    """Zip the project's packages (sources and package data, no byte code) into `directory`."""
    root = PROJECT_ROOT
    out = Path(directory) / "recrawl-code.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for package in PACKAGES:
            for path in sorted((root / package).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    zf.write(path, path.relative_to(root).as_posix())
    return str(out)


def check_shared_home(cfg: Config) -> None:
    """Refuse a driver-local crawl home when executors may run on other machines.

    Executors write WARC files and Delta data files under crawl.home: on another machine a local
    path is that machine's private disk. A loopback standalone master counts as shared (its
    workers can only be on this machine), as does a home the operator declares shared (NFS).
    """
    from recrawl.sparkenv.spark import EnvironmentProblem  # lazy: cycle (recrawl.sparkenv.spark imports this module)

    master = str(cfg.get("spark.master"))
    home = str(cfg.get("crawl.home"))
    remote = local_path(home) is None
    if is_local(master) or remote or cfg.get("crawl.home_shared") or is_loopback(master):
        return
    raise EnvironmentProblem(
        f"crawl.home {cfg.home} is a local folder but spark.master {master} may run executors "
        "on other machines, which would write WARCs and table files to their own disks: use "
        "s3a://bucket/prefix (or hdfs://...), or set crawl.home_shared = true if this path is "
        "the same shared mount (e.g. NFS) on every node")


def cluster_settings(cfg: Config, work_dir: str | Path) -> tuple[dict[str, str], dict[str, str]]:
    """(Spark settings, driver environment variables) for a non-local master; empty for local.

    `work_dir` receives the code zip (a folder living as long as the session).
    """
    if is_local(str(cfg.get("spark.master"))):
        return {}, {}
    conf: dict[str, str] = {}
    env: dict[str, str] = {}
    if cfg.get("spark.ship_code"):
        conf["spark.submit.pyFiles"] = code_zip(work_dir)
    archive = python_archive(cfg)
    if archive:
        conf["spark.archives"] = f"{archive}#{ENV_ALIAS}"
        conf["spark.pyspark.python"] = EXECUTOR_PYTHON
        conf["spark.pyspark.driver.python"] = sys.executable
        # PySpark's driver sends its PYSPARK_PYTHON (default `python3`) with every Python task:
        # the workers must run the archive's interpreter, whatever the caller's shell exported.
        env["PYSPARK_PYTHON"] = EXECUTOR_PYTHON
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return conf, env


def executor_id() -> str:
    """The id of the Spark executor this Python worker serves ("driver" in local mode).

    PySpark's TaskContext does not expose it; the executor JVM is an ancestor of the worker
    (executor JVM -> pyspark daemon -> worker) and carries `--executor-id N` on its command line
    (standalone, YARN, Kubernetes all launch CoarseGrainedExecutorBackend that way).
    """
    env_id = os.environ.get("SPARK_EXECUTOR_ID")  # set by Kubernetes' executor pods
    if env_id:
        return env_id
    try:
        import psutil  # lazy: heavy (psutil)

        proc = psutil.Process().parent()
        for _ in range(4):
            if proc is None:
                break
            args = proc.cmdline()
            if "--executor-id" in args:
                return args[args.index("--executor-id") + 1]
            proc = proc.parent()
    except Exception:  # noqa: BLE001 - an id we cannot read must never fail a fetch task
        return "unknown"
    return "driver"
