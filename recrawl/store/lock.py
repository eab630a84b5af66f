"""One writer per crawl home: a lock file naming its holder, refused clearly, stale ones reclaimed.

Every `crawler` verb that writes tables (init, inject, the round steps, round, pagerank,
maintenance) takes `<crawl.home>/crawler.lock` before it starts Spark. The file holds the
holder's pid, host name, process start time, verb and when it was taken (JSON), and once Spark
is up the pid and start time of its JVM. A second writer waits up to `crawl.lock_wait_s`
seconds for it and is then refused with one line naming the holder (exit code 2). A lock left
by a process that no longer runs on this host (killed with -9, machine crash) — neither the
Python driver nor its JVM — is stale: it is reclaimed with a note on stderr. A lock taken on
another host cannot be checked and is never reclaimed automatically; the message says which
file to remove once that process is known to be gone.

Creation is atomic (O_CREAT | O_EXCL), so two writers starting at the same instant cannot both
win. Readers (`sql`, `status`, `report`) take no lock: Delta snapshots are consistent for them.
On object storage (`s3a://` homes) there is no atomic create-if-absent here, so no lock is
taken; there the Airflow pool `crawl_tables` (one slot) is what keeps writers apart.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from recrawl.config import local_path

LOCK_NAME = "crawler.lock"


class LockHeld(RuntimeError):
    """Another live process holds the crawl home's lock; the message names it."""


def lock_path(home: str) -> Path | None:
    """The lock file of a local crawl home; None for object-store homes (no lock there)."""
    root = local_path(home)
    return None if root is None else root / LOCK_NAME


def _start_time(pid: int) -> float | None:
    try:
        import psutil  # lazy: heavy (psutil)

        return psutil.Process(pid).create_time()
    except Exception:
        return None


def _alive(info: dict) -> bool:
    """Whether the holder described by `info` still runs (only decidable on this host): its
    Python process, or the JVM it started (which may outlive a killed driver for a moment)."""
    jvm = info.get("jvm_pid")
    if jvm and _pid_alive(int(jvm), info.get("jvm_start")):
        return True
    return _pid_alive(int(info.get("pid", -1)), info.get("process_start"))


def _pid_alive(pid: int, started: float | None) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now_started = _start_time(pid)
    # A recycled pid: same number, a different (later) process.
    if started is not None and now_started is not None and abs(now_started - started) > 1.0:
        return False
    return True


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # half-written or garbage: judged by its age below


def describe(info: dict) -> str:
    return (f"`crawler {info.get('verb', '?')}` (pid {info.get('pid', '?')} on host "
            f"{info.get('host', '?')}, since {info.get('since', '?')})")


def _try_create(path: Path, verb: str) -> bool:
    info = {
        "pid": os.getpid(), "host": socket.gethostname(), "verb": verb,
        "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "process_start": _start_time(os.getpid()),
    }
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        json.dump(info, fh)
        fh.flush()
        os.fsync(fh.fileno())
    return True


def acquire(home: str, verb: str, wait_s: float = 0.0) -> Path | None:
    """Take the lock or raise LockHeld; returns the lock file (None when homes cannot lock)."""
    path = lock_path(home)
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + max(0.0, wait_s)
    while True:
        if _try_create(path, verb):
            return path
        info = _read(path)
        if info is None:
            continue  # released between our create and read: try again at once
        stale = False
        if not info:
            # unreadable: a writer died between create and write, or someone's garbage
            stale = time.time() - _mtime(path) > 10.0
        elif info.get("host") == socket.gethostname() and not _alive(info):
            stale = True
        if stale:
            print(f"crawler: reclaiming a stale lock {path} left by "
                  f"{describe(info) if info else 'an unreadable lock file'}", file=sys.stderr)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        if time.monotonic() >= deadline:
            where = ("" if info.get("host") == socket.gethostname() else
                     f"; if that process is gone, remove {path}")
            raise LockHeld(
                f"crawl home {path.parent} is in use by {describe(info)}: one writer at a time — "
                f"wait for it to finish (or set crawl.lock_wait_s to wait){where}"
            )
        time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return time.time()


_held: Path | None = None


def note_jvm(pid: int) -> None:
    """Record the JVM this process started in the lock it holds (if any)."""
    if _held is None:
        return
    info = _read(_held)
    if info and info.get("pid") == os.getpid():
        info.update(jvm_pid=pid, jvm_start=_start_time(pid))
        tmp = _held.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, _held)


def release(path: Path | None) -> None:
    """Remove the lock if it is still ours."""
    if path is None:
        return
    info = _read(path)
    if info and info.get("pid") == os.getpid() and info.get("host") == socket.gethostname():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def crawl_lock(home: str, verb: str, wait_s: float = 0.0) -> Iterator[Path | None]:
    global _held
    path = acquire(home, verb, wait_s)
    _held = path
    try:
        yield path
    finally:
        _held = None
        release(path)
