"""The driver's view of a running fetch: a thread that reads the tasks' status records.

The tasks write them through the WARCs' storage (fetcher.progress), so this works the same
with executors on other machines and a crawl home on s3a://. Every `progress.interval_s`
seconds one line goes to stderr (the Airflow task log); on a terminal it is a progress bar
redrawn in place instead.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from fetcher.progress import aggregate, read_records, summarize
from fetcher.storage import Storage


class FetchMonitor:
    """Summarizes the status records under `folder` every `interval_s` until stopped."""

    def __init__(self, storage: Storage, folder: str, label: str, listed: int, tasks: int,
                 interval_s: float, out: TextIO | None = None) -> None:
        self.storage = storage
        self.folder = folder
        self.label = label
        self.listed = listed
        self.tasks = tasks
        self.interval_s = interval_s
        self.out = out or sys.stderr
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.lines = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fetch-progress", daemon=True)
        self._t0 = time.monotonic()
        self._last = (self._t0, 0)

    def __enter__(self) -> FetchMonitor:
        if self.interval_s > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30.0)
        if self.tty and self.lines:
            print(file=self.out, flush=True)  # end the bar's line

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.report()

    def report(self) -> str:
        """Read the records, print one line (or redraw the bar) and return the line."""
        total = aggregate(read_records(self.storage, self.folder))
        now = time.monotonic()
        then, done_then = self._last
        rate_now = (total["done"] - done_then) / max(1e-3, now - then)
        rate_all = total["done"] / max(1e-3, now - self._t0)
        self._last = (now, total["done"])
        line = summarize(self.label, total, self.listed, rate_now, rate_all, self.tasks)
        if self.tty:
            width = 30
            filled = int(width * total["done"] / self.listed) if self.listed else 0
            print(f"\r[{'#' * filled}{'.' * (width - filled)}] {line}"[:400], end="",
                  file=self.out, flush=True)
        else:
            print(line, file=self.out, flush=True)
        self.lines += 1
        return line
