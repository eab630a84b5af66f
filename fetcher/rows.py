"""The run's output rows: one `fetches` row per input item and one `hosts` row per host.

``fetch_time`` is the start of the item's first request, or, for URLs that caused no request,
when that was decided. URLs the time budget did not reach are ``skipped_budget``; a same-host
redirect chain cut by the budget is ``redirect`` with the pending hop as ``final_url`` and error
``not followed: time budget``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from fetcher import models as m
from fetcher.hosts import Host, Hosts
from fetcher.http import Exchange
from fetcher.models import FetchItem
from fetcher.scheduler import HostQueue
from fetcher.tasks import Task


class Rows:
    """The `fetches` rows of one run, by input position; each item's row is set once."""

    def __init__(self, items: list[FetchItem], hosts: Hosts, now: Callable[[], datetime]) -> None:
        self.items = items
        self.hosts = hosts
        self.now = now
        self._rows: list[dict[str, Any] | None] = [None] * len(items)

    def invalid_url(self, index: int, exc: Exception) -> None:
        self._rows[index] = m.empty_row(self.items[index].url, m.CONNECT_ERROR, self.now(),
                                        error=f"invalid url: {exc}")

    def page(self, task: Task, status: str, *, error: str | None = None,
             exchange: Exchange | None = None, **values: Any) -> None:
        """The row of ``task``'s item: its status, the last exchange's head, ``values``."""
        item = task.item
        assert item is not None
        h = self.hosts.get(task.host)
        ex = exchange
        row = m.empty_row(item.url, status, task.started_at or self.now(), error=error,
                          final_url=task.url, redirect_chain=list(task.chain),
                          ip=h.ip if h else None)
        if task.duration_ms or ex is not None:
            row["duration_ms"] = task.duration_ms
        if ex is not None and ex.status is not None:
            row.update(http_status=ex.status, content_type=ex.header("Content-Type"),
                       etag=ex.header("ETag"), last_modified=ex.header("Last-Modified"),
                       truncated=bool(ex.truncated) and status in (m.FETCHED, m.GONE,
                                                                    m.HTTP_ERROR, m.TIMEOUT))
            if ex.status == 304:
                # A 304 may omit the validators; the item's stay valid for the next request.
                row["etag"] = row["etag"] or item.etag
                row["last_modified"] = row["last_modified"] or item.last_modified
        row.update(values)
        if status == m.RETRY_LATER and h is not None:
            h.deferred_count += 1
        self._rows[task.index] = row

    def terminal(self, h: Host, task: Task) -> None:
        """``task`` will not run because its host failed or was deferred."""
        if h.failure is not None:
            self.page(task, h.failure[0], error=h.failure[1])
        else:
            self.page(task, m.RETRY_LATER, error=h.deferred)

    def budget(self, task: Task) -> None:
        """``task`` was still queued when the time budget ran out."""
        if task.hops:
            self.page(task, m.REDIRECT, final_url=task.url, redirect_chain=list(task.chain),
                      error="not followed: time budget")
        else:
            self.page(task, m.SKIPPED_BUDGET)

    def tally(self) -> tuple[int, dict[str, int]]:
        """Rows set so far and their count by fetch status (for progress; lock-free: a row is
        set once, and reading a list slot while a worker sets another is safe)."""
        by: dict[str, int] = {}
        done = 0
        for r in list(self._rows):
            if r is not None:
                done += 1
                by[r["fetch_status"]] = by.get(r["fetch_status"], 0) + 1
        return done, by

    def result(self) -> list[dict[str, Any]]:
        """All rows in input order; an item without one (its worker never got to it, e.g. a
        DNS lookup stuck past the run's end) is ``skipped_budget``, ``not reached``."""
        return [r if r is not None else m.empty_row(
            self.items[i].url, m.SKIPPED_BUDGET, self.now(), error="not reached")
            for i, r in enumerate(self._rows)]


def host_rows(hosts: Hosts, queue: Callable[[str], HostQueue], now: float,
              to_wall: Callable[[float], datetime]) -> list[dict[str, Any]]:
    """One `hosts` row per host: request counts and, if backing off, until when (wall time).

    ``queue`` gives a queue key's scheduler queue; ``now`` is in the scheduler's clock.
    """
    out = []
    for h in hosts:
        q = queue(h.queue_key)
        backing_off = q.consecutive_failures > 0 or (
            q.paused_until is not None and q.paused_until > now)
        out.append({
            "host": h.key,
            "ip": h.ip,
            "backoff_until": to_wall(q.next_allowed)
            if backing_off and q.next_allowed > now else None,
            "consecutive_failures": q.consecutive_failures,
            "requests": h.requests,
            "errors": h.errors,
            "deferred": h.deferred_count,
            # request statistics for the step's metrics and health gates (spark_jobs.fetch)
            "busy_ms": int(h.busy_s * 1000),
            "wait_ms": int(h.waited_s * 1000),
            "bytes": h.bytes,
            "violations": h.violations,
            "worst_short_ms": int(h.worst_short_s * 1000),
            "robots_unavailable": bool(h.robots is not None and h.robots.disallow_all),
        })
    return out
