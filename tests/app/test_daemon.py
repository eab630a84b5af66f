"""The warm driver (app/daemon.py): when it is used, what makes a daemon compatible, and real
`crawler` verbs run through it as an Airflow task runs them (subprocesses, one daemon JVM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app import daemon
from app.demo import demo_config
from recrawl.config import ConfigError, load_config

CRAWLER = [sys.executable, "-m", "app.cli"]


@pytest.mark.parametrize(("mode", "env", "master", "expected"), [
    ("auto", {"AIRFLOW_CTX_DAG_ID": "crawl_cycle"}, "local[*]", True),
    ("auto", {}, "local[*]", False),  # a person's `crawler round` is one session already
    ("auto", {"AIRFLOW_CTX_DAG_ID": "crawl_cycle"}, "spark://127.0.0.1:7077", False),  # holds executors
    ("on", {}, "spark://127.0.0.1:7077", True),
    ("on", {"CRAWLER_DRIVER_DAEMON": "1"}, "local[*]", False),  # the daemon itself runs the verb
    ("on", {"PYSPARK_GATEWAY_PORT": "4000"}, "local[*]", False),  # spark-submit started the driver
    ("off", {"AIRFLOW_CTX_DAG_ID": "crawl_cycle"}, "local[*]", False),
])
def test_when_a_verb_goes_to_the_daemon(mode, env, master, expected):
    cfg = load_config(environ={}).with_overrides({"spark.driver_daemon": mode, "spark.master": master})
    assert daemon.wanted(cfg, env) is expected


def test_a_bad_mode_or_idle_time_is_a_config_error():
    with pytest.raises(ConfigError, match="driver_daemon must be one of"):
        daemon.wanted(load_config(environ={}).with_overrides({"spark.driver_daemon": "yes"}), {})
    with pytest.raises(ConfigError, match="idle_s must be > 0"):
        daemon.wanted(load_config(environ={}).with_overrides({"spark.driver_daemon_idle_s": 0}), {})


def test_the_key_changes_with_what_the_session_reads_and_only_that():
    cfg = load_config(environ={})
    env = {"JAVA_HOME": "/usr/lib/jvm/17", "AIRFLOW_CTX_TASK_ID": "fetch", "HOME": "/root"}
    key = daemon.daemon_key(cfg, env)
    assert daemon.daemon_key(cfg, dict(env)) == key
    # per-task variables and the daemon's own settings: the same session serves them
    assert daemon.daemon_key(cfg, {**env, "AIRFLOW_CTX_TASK_ID": "parse", "HOME": "/x"}) == key
    assert daemon.daemon_key(cfg.with_overrides({"spark.driver_daemon_idle_s": 5.0}), env) == key
    assert daemon.daemon_key(cfg.with_overrides({"crawl.home": "/elsewhere"}), env) == key
    # what the JVM, the session or the executors read at start-up: another daemon
    assert daemon.daemon_key(cfg.with_overrides({"spark.shuffle_partitions": 3}), env) != key
    assert daemon.daemon_key(cfg.with_overrides({"spark.extra": {"spark.executor.memory": "1g"}}), env) != key
    assert daemon.daemon_key(cfg, {**env, "JAVA_HOME": "/usr/lib/jvm/21"}) != key
    assert daemon.daemon_key(cfg, {**env, "AWS_ACCESS_KEY_ID": "other"}) != key


def test_an_edited_source_file_changes_the_code_stamp(tmp_path):
    for name in daemon._CODE_DIRS:
        (tmp_path / name).mkdir()
    src = tmp_path / "spark_jobs" / "fetch.py"
    src.write_text("x = 1\n")
    before = daemon._code_stamp(tmp_path)
    assert daemon._code_stamp(tmp_path) == before
    (tmp_path / "spark_jobs" / "__pycache__").mkdir()
    (tmp_path / "spark_jobs" / "__pycache__" / "fetch.cpython-311.pyc").write_bytes(b"\0")
    assert daemon._code_stamp(tmp_path) == before  # compiled files are not code
    src.write_text("x = 2  # edited\n")
    assert daemon._code_stamp(tmp_path) != before


def test_a_daemon_answers_status_and_stop_and_exits_when_idle(tmp_path):
    """No verb, so no JVM: the daemon's own life cycle."""
    cfg = load_config(environ={}).with_overrides({"spark.driver_daemon_dir": str(tmp_path)})
    root = Path(__file__).parents[2]

    def start(name: str, idle_s: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "app.daemon", str(tmp_path / name), str(idle_s)],
                                cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_listening(name: str) -> None:
        deadline = time.monotonic() + 60
        while not (tmp_path / name).exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    idle = start("idle.sock", 2.0)
    wait_listening("idle.sock")
    [found] = daemon.daemons(cfg)
    assert found["pid"] == idle.pid and found["served"] == 0 and found["busy"] is None
    assert idle.wait(timeout=60) == 0  # no client for 2 s: it exits by itself
    assert not (tmp_path / "idle.sock").exists()

    told = start("told.sock", 600.0)
    wait_listening("told.sock")
    assert daemon.stop_all(cfg) == 1
    assert told.wait(timeout=60) == 0
    assert daemon.daemons(cfg) == [] and not list(tmp_path.glob("*.sock"))


def test_a_folder_others_can_enter_is_refused(tmp_path):
    """Whoever can connect to a daemon runs verbs as its user: the folder must be private."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    cfg = load_config(environ={}).with_overrides({"spark.driver_daemon_dir": str(shared)})
    with pytest.raises(daemon.UnsafeFolder, match="mode 0700"):
        daemon.daemon_dir(cfg)
    assert daemon.forward(["init"], cfg, "init") is None  # the verb then runs in its own driver
    assert not list(shared.iterdir())
    private = cfg.with_overrides({"spark.driver_daemon_dir": str(tmp_path / "new")})
    assert (daemon.daemon_dir(private).stat().st_mode & 0o777) == 0o700


def _env(home: Path, drv: Path, config: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECRAWL_")}
    env.update({"RECRAWL_CONFIG": str(config), "RECRAWL_CRAWL__HOME": str(home),
                "AIRFLOW_CTX_DAG_ID": "crawl_cycle", "PYTHONPATH": str(Path(__file__).parents[2])})
    return env


def _crawler(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CRAWLER, *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.spark
def test_tasks_share_one_warm_driver_and_a_killed_client_cancels_its_verb(tmp_path):
    from app.airflow_demo import config_toml
    from simweb import SimWeb
    from simweb.audit import politeness_violations, robots_violations

    drv = tmp_path / "driver"
    with SimWeb(seed=3, n_sites=2, pages_per_site=4, log_path=str(tmp_path / "server.jsonl")) as web:
        cfg = demo_config(tmp_path / "home", **{
            "spark.shuffle_partitions": 2, "spark.driver_daemon_dir": str(drv),
            "fetcher.min_delay_s": 5.0, "fetcher.time_budget_s": 120.0, "generate.partitions": 1})
        config = tmp_path / "recrawl.toml"
        config.write_text(config_toml(cfg))
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(f"{web.base(h)}/" for h in web.hosts() if h.startswith("site")) + "\n")
        env = _env(tmp_path / "home", drv, config)
        try:
            # two verbs as two Airflow tasks: one daemon runs both, their output reaches the client
            init = _crawler(env, "init")
            assert init.returncode == 0, init.stderr
            assert "tables created: crawldb" in init.stdout
            inject = _crawler(env, "inject", str(seeds), "--date", "2026-11-01")
            assert inject.returncode == 0, inject.stderr
            assert "inject: lines=2" in inject.stdout
            status = _crawler(env, "daemon", "status")
            assert status.stdout.count("pid ") == 1 and "2 verbs served, idle" in status.stdout, status.stdout
            pid = int(status.stdout.split()[1].rstrip(":"))
            assert "WARN" not in init.stderr + inject.stderr  # the JVM's output stays in the daemon's log

            # an error inside the daemon is the verb's error: one line, exit code 2
            other = _crawler({**env, "RECRAWL_CRAWL__HOME": str(tmp_path / "no-tables")},
                             "generate", "--date", "2026-11-01")
            assert other.returncode == 2 and "crawler generate: error:" in other.stderr, other.stderr

            # a client killed mid-fetch (an Airflow task on timeout): the daemon cancels the fetch
            assert _crawler(env, "generate", "--date", "2026-11-01").returncode == 0
            requests = len(web.request_log())
            proc = subprocess.Popen([*CRAWLER, "fetch", "--date", "2026-11-01"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 300
            while len(web.request_log()) < requests + 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            busy = _crawler(env, "daemon", "status")  # answered mid-verb, not after it
            assert "running `fetch --date 2026-11-01`" in busy.stdout, busy.stdout
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            log = next(drv.glob("*.log"))
            deadline = time.monotonic() + 120
            while "fetch --date 2026-11-01: rc" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.5)
            text = log.read_text()
            assert "client gone: cancelling" in text and "fetch --date 2026-11-01: rc 1" in text, text[-3000:]
            # the same daemon takes the retry, which finishes the round's fetch
            retry = _crawler(env, "fetch", "--date", "2026-11-01")
            assert retry.returncode == 0, retry.stderr
            assert "fetch 20261101: " in retry.stdout
            after = _crawler(env, "daemon", "status")
            assert f"pid {pid}:" in after.stdout, after.stdout
            # polite across the cancelled attempt and the retry (the retry resumes: every host
            # waits its delay before its first request)
            delays = {h: min(web.truth.crawl_delay(h) or 0.0, 5.0) for h in web.hosts()}
            assert politeness_violations(web.request_log(), 5.0, delays) == []
            assert robots_violations(web.request_log(), web.truth, "recrawlbot") == []
        finally:
            stopped = _crawler(env, "daemon", "stop")
        assert "stopped 1 driver daemon" in stopped.stdout
        deadline = time.monotonic() + 60
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _pid_alive(pid)
        assert not list(drv.glob("*.sock"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie until its parent (the killed client's session: none) reaps it counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
