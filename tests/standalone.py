"""A Spark standalone cluster on 127.0.0.1 for tests: a master and workers from pyspark's own
`bin/spark-class`, each its own process group, work folder and current directory, in a bare
environment (PATH=/usr/bin:/bin, no PYSPARK_PYTHON, no PYTHONPATH) in which the project cannot
be imported -- what a worker machine has. Executors get the project's dependencies from the
environment archive and its code from the zip the driver ships (recrawl/sparkenv/cluster.py).

Used by tests/spark_jobs/test_cluster.py (the crawl and an executor kill, tables on s3a://) and
tests/dags/test_scheduler.py (Airflow's tasks submitting to the cluster).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path


def java_home() -> str:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    assert java, "java not found"
    return str(Path(os.path.realpath(java)).parent.parent)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def bare_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """What a worker machine has: Java, Spark (and whatever `extra` adds); no project, no venv."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
            "JAVA_HOME": java_home(), "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1", **(extra or {})}


def ui_json(port: int, path: str = "/json/"):
    """A JSON page of a master's, worker's or driver's web UI (no proxy: loopback only)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return json.loads(resp.read())


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a daemon and everything it started (its executors share its process group)."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def standalone_cluster(base: Path, master_port: int, master_ui: int,
                       workers: Sequence[tuple[int, int, int]], env_extra: dict[str, str] | None = None,
                       worker_memory: str = "1g") -> Iterator[dict]:
    """Start a master and one worker per (port, web UI port, cores); yield once all are alive.

    Yields {"master": "spark://127.0.0.1:PORT", "workers": [{"proc", "dir"}], "base", "env"}.
    """
    env = bare_env(base, env_extra)
    # The project must not be importable where executors start: that is what the archive and
    # the code zip are for.
    probe = subprocess.run(["python3", "-c", "import fetcher"], env=env, cwd=base,
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0 and "fetcher" in probe.stderr, probe
    spark_class = str(spark_home() / "bin" / "spark-class")
    procs: list[subprocess.Popen] = []

    def start(name: str, args: list[str], opts_var: str) -> Path:
        folder = base / name
        folder.mkdir()
        penv = dict(env, SPARK_LOG_DIR=str(folder), SPARK_DAEMON_MEMORY="256m",
                    **{opts_var: "-Dspark.master.rest.enabled=false"})
        with open(folder / "out.log", "wb") as log:
            procs.append(subprocess.Popen([spark_class, *args], cwd=folder, env=penv,
                                          stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        return folder

    master = f"spark://127.0.0.1:{master_port}"
    try:
        start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(master_port), "--webui-port", str(master_ui)],
              "SPARK_MASTER_OPTS")
        started = []
        for i, (port, ui, cores) in enumerate(workers):
            folder = start(f"worker{i}", [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port",
                str(port), "--webui-port", str(ui), "--cores", str(cores), "--memory", worker_memory,
                "--work-dir", str(base / f"worker{i}" / "work"), master], "SPARK_WORKER_OPTS")
            started.append({"proc": procs[-1], "dir": folder})
        deadline = time.monotonic() + 240
        while True:
            try:
                if ui_json(master_ui).get("aliveworkers") == len(workers):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the standalone cluster did not come up"
            assert all(p.poll() is None for p in procs), "a cluster daemon exited"
            time.sleep(1)
        yield {"master": master, "workers": started, "base": base, "env": env}
    finally:
        for proc in reversed(procs):
            stop_group(proc)
