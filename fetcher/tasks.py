"""What the run's modules hand each other: a queued task and what processing it did with the slot.

A ``Task`` sits in a back queue of ``fetcher.scheduler``; a worker processes it (a page in
``fetcher.pages``, a robots.txt hop in ``fetcher.robots_fetch``) and returns a ``Slot`` that the
Fetcher applies under the scheduler lock: release the queue, push follow-up hops to its front,
fail or defer hosts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from fetcher.models import FetchItem
from fetcher.scheduler import Result


@dataclass
class Task:
    """One unit of queue work: a page URL (possibly a redirect hop) or a robots.txt hop."""

    kind: str  # "page" | "robots"
    host: str  # host key of ``url``
    url: str
    index: int = -1  # input position of the item (pages)
    item: FetchItem | None = None
    hops: int = 0
    chain: list[str] = field(default_factory=list)
    owner: str | None = None  # robots: whose robots.txt this is
    started_at: datetime | None = None  # first request of the item
    duration_ms: int = 0


@dataclass
class Slot:
    """What processing one task did with the queue's slot."""

    result: Result = "none"
    end: float = 0.0
    host: str | None = None  # host whose delay applies after the request
    pause_until: float | None = None
    front: list[Task] = field(default_factory=list)
    defer: list[tuple[str, str]] = field(default_factory=list)  # (host key, error)
    fail_hosts: list[tuple[str, str, str]] = field(default_factory=list)  # (host, status, err)
    unblock: list[str] = field(default_factory=list)  # queue keys
