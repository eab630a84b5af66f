"""The fetcher's input and output records: what the Spark fetch job hands in and gets back."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# fetch_status values of the `fetches` table (docs/design.md); exactly these strings.
FETCHED = "fetched"
NOT_MODIFIED = "not_modified"
REDIRECT = "redirect"
GONE = "gone"
ROBOTS_DENIED = "robots_denied"
HTTP_ERROR = "http_error"
TIMEOUT = "timeout"
DNS_ERROR = "dns_error"
CONNECT_ERROR = "connect_error"
TOO_LARGE = "too_large"
FILTERED_TYPE = "filtered_type"
RETRY_LATER = "retry_later"
SKIPPED_BUDGET = "skipped_budget"

FETCH_STATUSES = (
    FETCHED, NOT_MODIFIED, REDIRECT, GONE, ROBOTS_DENIED, HTTP_ERROR, TIMEOUT, DNS_ERROR,
    CONNECT_ERROR, TOO_LARGE, FILTERED_TYPE, RETRY_LATER, SKIPPED_BUDGET,
)

#: Keys of a `fetches` row as produced here (the job adds ``round_id`` and ``executor_id``).
FETCH_COLUMNS = (
    "url", "final_url", "fetch_time", "http_status", "fetch_status", "error", "content_type",
    "content_length", "payload_digest", "warc_file", "warc_offset", "warc_length", "etag",
    "last_modified", "duration_ms", "redirect_chain", "truncated", "ip",
    "warc_record_id", "warc_type", "warc_target_uri", "warc_date",
)


@dataclass(frozen=True)
class FetchItem:
    """One URL of the fetch list.

    ``host`` is the politeness key ``scheme://host:port`` (``recrawl.content.urlnorm.host_key``); an
    empty string lets the fetcher compute it. ``etag`` / ``last_modified`` are the validators of
    the previous capture (conditional GET); ``prev_payload_digest`` / ``prev_fetch_time`` let an
    unchanged payload be stored as an identical-payload-digest ``revisit`` record.
    ``prev_record_id`` / ``prev_warc_date`` / ``prev_target_uri`` name the WARC record that
    holds that payload (its ``WARC-Record-ID``, exact ``WARC-Date`` and ``WARC-Target-URI``,
    the final URI of a redirect chain): a revisit refers to it.
    """

    url: str
    host: str = ""
    priority: float = 0.0
    etag: str | None = None
    last_modified: str | None = None
    prev_payload_digest: str | None = None
    prev_fetch_time: str | None = None
    prev_record_id: str | None = None
    prev_warc_date: str | None = None
    prev_target_uri: str | None = None


@dataclass
class FetchOutcome:
    """Everything one ``Fetcher.run`` produced.

    ``rows``: one `fetches` row per input item, in input order. ``robots``: `robots` table rows
    for robots.txt files fetched in this run. ``hosts``: per-host counters and back-off state.
    ``warc_files``: closed WARC files under their final names; ``cdxj``: their CDXJ lines,
    built as the records were written (fetcher.cdxj.RecordIndex), by file.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    robots: list[dict[str, Any]] = field(default_factory=list)
    hosts: list[dict[str, Any]] = field(default_factory=list)
    warc_files: list[str] = field(default_factory=list)
    cdxj: dict[str, list[str]] = field(default_factory=dict)
    #: the run's timing: ``elapsed_ms`` and ``floor_ms``, the shortest time the hosts' delays
    #: (and the threads) allowed for the requests made (``Fetcher.run``)
    stats: dict[str, int] = field(default_factory=dict)


def empty_row(url: str, fetch_status: str, fetch_time: datetime | None, **values: Any) -> dict:
    """A `fetches` row with every column present (None / empty where nothing is known)."""
    row: dict[str, Any] = dict.fromkeys(FETCH_COLUMNS)
    row.update(url=url, fetch_status=fetch_status, fetch_time=fetch_time, redirect_chain=[],
               truncated=False)
    row.update(values)
    return row
