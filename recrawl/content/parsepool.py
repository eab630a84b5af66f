"""The fetch task's inline parse (`parse.inline`): pages parsed in worker processes while the
task waits on host delays.

A fetch worker thread hands each fetched page's response record (its row values and the gzip
member just appended to the WARC) to :meth:`ParsePool.submit`, which only enqueues: the
record is pickled and parsed off the fetch process, in `workers` processes forked when the
pool starts (before the fetch threads exist), so trafilatura's CPU never holds the GIL the
fetch threads need to keep the politeness clock. Each process parses with
:func:`recrawl.content.pagerows.parse_record` -- the function the parse step calls on the same bytes
read back from the WARC -- so rows are equal by construction, and runs it on its main thread,
where the extractor's CPU limit (recrawl/content/cpu_limit.py) is armed as in the parse step.

A pool that breaks (a worker killed, say) loses only the rows not yet returned: those pages
are absent from :meth:`ParsePool.results` and the parse step reads them back from the WARCs.
The same holds for a page the pool does not take: while `max_pending` pages wait for a worker
(`parse.inline_max_pending`), a fetched page is left to the parse step. The backlog's bytes are
held in the fetch task's memory, and everything still queued when the last request is done
is waited for before the task ends: a pool slower than the fetch (more pages than the window's
idle CPU can parse) would otherwise hold a whole task's pages and keep the fetch step open
long after its last request.
A worker whose parent dies (an executor killed mid-fetch takes its Python workers with it)
exits within a second instead of waiting on its queue forever.

The workers run at a lower CPU priority (`parse.inline_nice`, 19 by default): they take the CPU
the fetch leaves idle and never the fetch's own. At equal priority, on a machine the fetch keeps
busy (2 cores, ~1,000 requests a second), the pools took CPU from the fetch threads and from
everything else on the host, every response ended later, and since each host's delay runs from
the end of its previous response the whole fetch slowed (docs/scale.md, issue 42). A page the
pool has no idle CPU for waits in the bounded backlog or is left to the parse step.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from io import BytesIO
from typing import Any

from recrawl.content.pagerows import parse_record

__all__ = ["NICE", "ParsePool", "check_nice", "parse_member"]

log = logging.getLogger(__name__)

#: The workers' default niceness increment (`parse.inline_nice`): the lowest priority.
NICE = 19


def check_nice(nice: int) -> None:
    """`parse.inline_nice` must be 0-19: a worker may lower its priority, not raise it."""
    if not isinstance(nice, int) or isinstance(nice, bool) or not 0 <= nice <= 19:
        raise ValueError(f"parse.inline_nice must be an integer from 0 to 19, got {nice!r}")


def parse_member(meta: dict[str, Any], member: bytes, opts: dict[str, Any]) -> dict | None:
    """The `pages` row of the response record whose gzip member is `member` (what the WARC
    holds at `meta`'s offset)."""
    return parse_record(meta, lambda: BytesIO(member), opts)


def _ready() -> int:
    return multiprocessing.current_process().pid or 0


def _start_worker(parent: int, nice: int) -> None:
    """In a worker: lower its CPU priority by `nice`, and exit once the fetch task's process is
    gone (re-parented)."""
    if nice:
        os.nice(nice)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class ParsePool:
    """`workers` processes parsing one fetch task's pages; :meth:`submit` never blocks on a
    parse."""

    def __init__(self, opts: dict[str, Any], round_id: str, workers: int = 1,
                 max_pending: int = 1000, nice: int = NICE) -> None:
        if max_pending < 1:
            raise ValueError(f"parse.inline_max_pending must be at least 1, got {max_pending!r}")
        check_nice(nice)
        self.opts = {k: v for k, v in opts.items() if k != "s3"}
        self.round_id = round_id
        self.max_pending = max_pending
        self._pending = 0
        self._lock = threading.Lock()
        self.left = 0  # pages not taken (the backlog was full): the parse step parses them
        # fork: the children inherit the imported parser; forked now, before any fetch thread
        self._pool = ProcessPoolExecutor(max(1, workers),
                                         mp_context=multiprocessing.get_context("fork"),
                                         initializer=_start_worker,
                                         initargs=(os.getpid(), nice))
        self._pool.submit(_ready).result()  # with fork, every worker starts on the first submit
        self._futures: list[Future] = []
        self.submitted = 0

    def submit(self, meta: dict[str, Any], member: bytes) -> None:
        """Queue the page's parse (from a fetch thread)."""
        meta = {**meta, "round_id": self.round_id}
        with self._lock:
            if self._pending >= self.max_pending:
                self.left += 1
                return
            self._pending += 1
        try:
            future = self._pool.submit(parse_member, meta, member, self.opts)
        except Exception:  # a broken pool: the parse step parses the page from the WARC
            self._done(None)
            log.exception("parse pool: %s not queued", meta["url"])
            return
        future.add_done_callback(self._done)
        self._futures.append(future)
        self.submitted += 1

    def _done(self, _future: Future | None) -> None:
        with self._lock:
            self._pending -= 1

    @property
    def pending(self) -> int:
        """Pages queued and not parsed yet."""
        with self._lock:
            return self._pending

    def results(self) -> list[dict]:
        """Every parsed page's row, once all are done (the pool is then shut down)."""
        out = []
        for f in self._futures:
            try:
                row = f.result()
            except Exception:  # noqa: BLE001 - left to the parse step, which reads the WARC
                log.exception("parse pool: a page's parse failed")
                continue
            if row is not None:
                out.append(row)
        self.close()
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
