"""Progress of a fetch while it runs: each task's status record, and the driver's summary of them.

A fetch task runs on an executor, possibly on another machine, so its progress travels as a
small JSON record written every few seconds through the same storage as the WARCs
(``fetcher.storage``: a local folder or s3a://), one file per partition (a retried attempt
overwrites its predecessor's). The driver reads the folder while the Spark job runs
(``spark_jobs.fetch_progress``) and prints ``summarize``'s one line.

The record is built by a thread of its own, outside the scheduler's lock: the workers' timing
(politeness) is never held up by it. Reading the run's state without the lock may see a count
one request old, which a progress line can afford.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fetcher.storage import Storage

log = logging.getLogger(__name__)

# Outcome classes a progress line names, in this order (the rest are summed as "other").
OUTCOME_ORDER = ("fetched", "not_modified", "redirect", "gone", "robots_denied", "http_error",
                 "timeout", "dns_error", "connect_error", "too_large", "filtered_type",
                 "retry_later", "skipped_budget")
SLOWEST = 3  # hosts named as holding the step open


class StatusWriter:
    """Writes ``snapshot()`` to ``uri`` every ``interval_s`` seconds until stopped (then once
    more, final). A failed write is logged and skipped: progress never fails a fetch."""

    def __init__(self, storage: Storage, uri: str, interval_s: float,
                 snapshot: Callable[[], dict[str, Any]]) -> None:
        self.storage = storage
        self.uri = uri
        self.interval_s = interval_s
        self.snapshot = snapshot
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fetch-status", daemon=True)

    def start(self) -> StatusWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30.0)
        self.write(final=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.write()

    def write(self, final: bool = False) -> None:
        try:
            record = {**self.snapshot(), "final": final, "at": time.time()}
            f = self.storage.create(self.uri)
            f.write(json.dumps(record).encode())
            f.commit()
        except Exception:  # a full disk or a flaky object store must not fail the fetch
            log.warning("fetch progress: could not write %s", self.uri, exc_info=True)


def read_records(storage: Storage, folder: str) -> list[dict[str, Any]]:
    """The latest status record of every task that wrote one under ``folder``."""
    out = []
    try:
        names = storage.listdir(folder) if storage.exists(folder) else []
    except (OSError, FileNotFoundError):
        return out
    for uri in names:
        if not uri.endswith(".json"):
            continue
        try:
            with storage.open_read(uri) as f:
                out.append(json.loads(f.read()))
        except (OSError, ValueError):
            continue  # replaced while we read it: the next poll sees the new one
    return out


def aggregate(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The step's totals over the tasks' latest records; ``eta_s`` is the slowest task's."""
    total: dict[str, Any] = {"tasks": 0, "done": 0, "listed": 0, "bytes": 0, "requests": 0,
                             "hosts_active": 0, "hosts_waiting": 0, "hosts_deferred": 0,
                             "outcomes": {}, "slowest": [], "eta_s": 0.0, "final": 0}
    slowest = []
    for r in records:
        total["tasks"] += 1
        total["final"] += int(bool(r.get("final")))
        for k in ("done", "listed", "bytes", "requests", "hosts_active", "hosts_waiting",
                  "hosts_deferred"):
            total[k] += int(r.get(k, 0))
        for k, v in (r.get("outcomes") or {}).items():
            total["outcomes"][k] = total["outcomes"].get(k, 0) + int(v)
        slowest.extend(r.get("slowest") or [])
        total["eta_s"] = max(total["eta_s"], float(r.get("eta_s") or 0.0))
    total["slowest"] = sorted(slowest, key=lambda s: -s[2])[:SLOWEST]
    return total


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


def _bytes(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def summarize(label: str, total: Mapping[str, Any], listed: int, rate_now: float,
              rate_all: float, tasks: int) -> str:
    """One progress line: URLs done / listed, pages/s now and overall, bytes, hosts, outcomes,
    the hosts holding the step open and the time left."""
    done = int(total["done"])
    pct = f" ({100.0 * done / listed:.0f}%)" if listed else ""
    outcomes = total["outcomes"]
    named = [f"{k} {outcomes[k]}" for k in OUTCOME_ORDER if outcomes.get(k)]
    other = sum(v for k, v in outcomes.items() if k not in OUTCOME_ORDER)
    if other:
        named.append(f"other {other}")
    parts = [
        f"{label}: {done}/{listed} URLs{pct}",
        f"{rate_now:.1f} pages/s now, {rate_all:.1f} overall",
        _bytes(int(total["bytes"])),
        f"hosts {total['hosts_active']} active, {total['hosts_waiting']} waiting, "
        f"{total['hosts_deferred']} deferred",
        f"tasks {total['tasks']}/{tasks} reporting",
    ]
    if named:
        parts.append(", ".join(named))
    if total["slowest"]:
        parts.append("slowest: " + ", ".join(
            f"{h} ({left} left, ~{_duration(est)})" for h, left, est in total["slowest"]))
    if done < listed and total["tasks"]:  # no estimate before a task has reported
        parts.append(f"ETA {_duration(total['eta_s'])}")
    return "; ".join(parts)
