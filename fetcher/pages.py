"""Fetching one page URL (or same-host redirect hop) once the host's slot and robots are ours.

robots.txt is checked first (a denied URL costs no request); the first hop of an item is
conditional on its stored validators. The response is classified (``fetcher.classify``),
archived (``fetcher.archive``) and becomes the item's row (``fetcher.rows``) -- unless it is a
same-host redirect to follow (``fetcher.redirects``), which goes back to the front of the queue.
429/503 with a usable ``Retry-After`` pause the queue instead of counting as a failure.

``on_capture`` (the fetch's inline parse, ``parse.inline``) is handed each fetched page's
``response`` record as written -- the row values the parse needs and the record's gzip
member -- after its row is set; it must only enqueue: it runs on the worker thread that holds
the host's slot, before the slot is released.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fetcher import models as m
from fetcher import warc
from fetcher.archive import write_exchange
from fetcher.classify import classify, media_type, retry_after_seconds, type_allowed
from fetcher.client import Client
from fetcher.hosts import Host
from fetcher.redirects import next_hop, redirect_row_values
from fetcher.rows import Rows
from fetcher.settings import FetchSettings
from fetcher.tasks import Slot, Task

Capture = Callable[[dict[str, Any], bytes], None]


class PageFetch:
    """Page requests of one run; rows go to ``rows``, exchanges to ``writer``, fetched
    ``response`` records to ``on_capture``."""

    def __init__(self, settings: FetchSettings, client: Client, writer: warc.WarcWriter,
                 rows: Rows, *, wallclock: Callable[[], float],
                 on_capture: Capture | None = None) -> None:
        self.settings = settings
        self.client = client
        self.writer = writer
        self.rows = rows
        self.wallclock = wallclock
        self.on_capture = on_capture

    def fetch(self, h: Host, task: Task) -> Slot:
        s = self.settings
        item = task.item
        assert item is not None and h.robots is not None and h.conn is not None
        if not h.robots.allowed(task.url):
            if task.hops:
                self.rows.page(task, m.REDIRECT, final_url=task.url,
                               error="redirect target disallowed by robots.txt")
            else:
                self.rows.page(task, m.ROBOTS_DENIED)
            return Slot()
        headers = self.client.headers(h)
        if task.hops == 0:
            if item.etag:
                headers["If-None-Match"] = item.etag
            if item.last_modified:
                headers["If-Modified-Since"] = item.last_modified

        def want_body(status: int, msg: Any) -> bool:
            return not (200 <= status < 300) or type_allowed(
                msg.get("Content-Type"), s.allowed_content_types)

        ex = self.client.get(h, task.url, headers, want_body=want_body)
        task.started_at = task.started_at or ex.started_at
        task.duration_ms += ex.duration_ms
        verdict = classify(ex.status, ex.error_kind, ex.error)
        slot = Slot(result="fail" if verdict.host_failure else "ok", end=ex.end, host=h.key)
        if verdict.host_failure:
            h.errors += 1

        if verdict.fetch_status == m.REDIRECT:
            follow = next_hop(task, ex, s.max_redirects, s.norm_rules)
            if follow is not None:
                write_exchange(self.writer, ex, m.REDIRECT, chain=task.chain)
                slot.front.append(follow)
                return slot
        status = verdict.fetch_status
        error = verdict.error
        if status == m.FETCHED and ex.status is not None and not type_allowed(
                ex.header("Content-Type"), s.allowed_content_types):
            status, error = m.FILTERED_TYPE, f"content type {media_type(ex.header('Content-Type'))}"
        elif status == m.FETCHED and ex.truncated:
            error = "truncated" if ex.truncated == "length" else (ex.error or "truncated")
        if verdict.retry_after:
            wait = retry_after_seconds(ex.header("Retry-After"), self.wallclock(),
                                       s.retry_after_max_s)
            if wait is not None:
                slot.pause_until = ex.end + wait
                slot.result = "ok"
                error = f"http {ex.status}, retry-after {wait:g}s"
            else:
                slot.result = "fail"
                h.errors += 1

        row: dict[str, Any] = {}
        if status == m.REDIRECT:
            row = redirect_row_values(task, ex, s.norm_rules)
        keep = self.on_capture is not None and status == m.FETCHED
        if ex.status is not None:
            row.update(write_exchange(self.writer, ex, status, chain=task.chain, item=item,
                                      error=row.get("error", error), keep=keep))
        member = row.pop("warc_member", None)
        # A filtered_type row keeps the digest and length of what its head-only record
        # stores (an empty payload): row and record agree.
        self.rows.page(task, status, error=row.pop("error", error), exchange=ex, **row)
        if member is not None and self.on_capture is not None:
            self.on_capture({"url": item.url, "final_url": task.url,
                             "content_type": ex.header("Content-Type"),
                             "warc_file": row["warc_file"], "warc_offset": row["warc_offset"],
                             "warc_length": row["warc_length"],
                             "payload_digest": row.get("payload_digest")}, member)
        return slot
