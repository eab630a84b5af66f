"""The crawl-home lock: one writer at a time, a clear refusal naming the holder, stale locks
reclaimed. No JVM: the lock is taken before Spark starts, so a refused writer costs ~1 s."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from recrawl.store import lock
from recrawl.store.tables import with_retry


def _write(home, **info):
    home.mkdir(parents=True, exist_ok=True)
    (home / lock.LOCK_NAME).write_text(json.dumps(info))


def test_acquire_release_and_second_writer_is_refused(tmp_path):
    with lock.crawl_lock(str(tmp_path), "round") as path:
        assert json.loads(path.read_text())["pid"] == os.getpid()
        with pytest.raises(lock.LockHeld) as err:
            lock.acquire(str(tmp_path), "maintenance")
        msg = str(err.value)
        assert "`crawler round`" in msg and f"pid {os.getpid()}" in msg and "\n" not in msg
    assert not (tmp_path / lock.LOCK_NAME).exists()


def test_stale_lock_of_a_dead_process_is_reclaimed(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _write(tmp_path, pid=dead.pid, host=socket.gethostname(), verb="fetch", since="x")
    path = lock.acquire(str(tmp_path), "fetch")
    assert json.loads(path.read_text())["pid"] == os.getpid()
    assert "stale lock" in capsys.readouterr().err
    lock.release(path)


def test_recycled_pid_is_stale(tmp_path):
    # our own pid, but a process start time that is not ours: the holder is gone
    _write(tmp_path, pid=os.getpid(), host=socket.gethostname(), verb="fetch",
           process_start=1.0)
    lock.release(lock.acquire(str(tmp_path), "fetch"))


def test_lock_of_another_host_is_never_reclaimed(tmp_path):
    _write(tmp_path, pid=1, host="elsewhere", verb="updatedb", since="2026-11-29T00:00:00")
    with pytest.raises(lock.LockHeld, match="if that process is gone, remove .*crawler.lock"):
        lock.acquire(str(tmp_path), "round")
    assert (tmp_path / lock.LOCK_NAME).exists()


def test_waiting_writer_gets_the_lock_when_released(tmp_path, monkeypatch):
    path = lock.acquire(str(tmp_path), "round")
    refused, released, got = threading.Event(), threading.Event(), []

    def pause(seconds):  # the waiter's pause between two attempts: until the lock is free
        refused.set()
        released.wait(30)

    monkeypatch.setattr(lock, "time", SimpleNamespace(monotonic=time.monotonic, time=time.time,
                                                     sleep=pause))
    waiter = threading.Thread(
        target=lambda: got.append(lock.acquire(str(tmp_path), "updatedb", wait_s=60)))
    waiter.start()
    assert refused.wait(30) and not got  # it found the lock held, and waits
    lock.release(path)
    released.set()
    waiter.join(30)
    assert got and got[0] is not None and json.loads(got[0].read_text())["verb"] == "updatedb"
    lock.release(got[0])


def test_object_store_homes_take_no_lock():
    assert lock.lock_path("s3a://bucket/crawl") is None
    assert lock.acquire("s3a://bucket/crawl", "round") is None


def test_cli_refuses_a_second_writer_in_one_line_before_starting_spark(tmp_path):
    home = tmp_path / "home"
    path = lock.acquire(str(home), "round")  # held by this (live) test process
    try:
        env = dict(os.environ, RECRAWL_CRAWL__HOME=str(home))
        # the verb as `crawler updatedb` runs it, then a look at whether Spark was started
        code = ("import sys; from app.cli import main; "
                "rc = main(['updatedb', '--date', '2026-11-01']); "
                "from pyspark import SparkContext; "
                "assert SparkContext._gateway is None, 'Spark was started'; sys.exit(rc)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=120)
        assert out.returncode == 2
        assert out.stderr.strip().count("\n") == 0, out.stderr
        assert "is in use by `crawler round`" in out.stderr
    finally:
        lock.release(path)


def test_with_retry_retries_concurrent_conflicts_and_reports_the_last():
    calls = []

    class ConcurrentAppendException(Exception):
        pass

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConcurrentAppendException("conflict")
        return "ok"

    import recrawl.store.tables as tables

    real_sleep = tables.time.sleep
    tables.time.sleep = lambda s: None
    try:
        assert with_retry(flaky) == "ok" and len(calls) == 3

        def always(exc):
            def action():
                raise exc
            return action

        with pytest.raises(ConcurrentAppendException):  # reported after the last attempt
            with_retry(always(ConcurrentAppendException("always")), attempts=2)
        with pytest.raises(ValueError):  # other errors are not retried
            with_retry(always(ValueError("x")))
    finally:
        tables.time.sleep = real_sleep


def test_a_live_jvm_keeps_the_lock_of_a_killed_driver(tmp_path):
    """The driver was killed but the JVM it started still runs: not stale."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    jvm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _write(tmp_path, pid=dead.pid, host=socket.gethostname(), verb="fetch", since="x",
               jvm_pid=jvm.pid, jvm_start=lock._start_time(jvm.pid))
        with pytest.raises(lock.LockHeld):
            lock.acquire(str(tmp_path), "round")
    finally:
        jvm.kill()
        jvm.wait()
    lock.release(lock.acquire(str(tmp_path), "round"))  # both gone: reclaimed


def test_note_jvm_records_the_jvm_in_the_held_lock(tmp_path):
    with lock.crawl_lock(str(tmp_path), "round") as path:
        lock.note_jvm(os.getpid())
        info = json.loads(path.read_text())
        assert info["jvm_pid"] == os.getpid() and info["jvm_start"]
    lock.note_jvm(os.getpid())  # no lock held: nothing happens
