"""Fetching robots.txt in a run: the request, its redirects, and releasing who waits on it.

A host's robots.txt is fetched before any of its pages unless a fresh copy came in
``robots_cache``; it is a request like any other, through the host's queue, and the host delay
runs after it too. The rules themselves (RFC 9309 over Protego, the status policy) are
``fetcher.robots``.

Redirects are followed (up to five, RFC 9309 2.3.1.2), also across hosts: a same-host hop goes
to the front of the host's queue; a cross-host hop is queued on the target host (after that
host's own robots.txt) while the original host's queue is blocked until the outcome is known.
A robots.txt that is unreachable (5xx, 429, network error, timeout) disallows everything and
defers the host for this run.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from fetcher import warc
from fetcher.archive import write_exchange
from fetcher.classify import REDIRECT_CODES
from fetcher.client import Client
from fetcher.hosts import Host, Hosts
from fetcher.robots import RobotsRules
from fetcher.settings import FetchSettings
from fetcher.tasks import Slot, Task
from fetcher.urls import BadURL, host_key, normalize, origin_url

ROBOTS_MAX_REDIRECTS = 5  # RFC 9309 2.3.1.2

#: Queue a cross-host robots hop on its target host and block the owner's queue meanwhile
#: (``hop``, ``target``, ``owner``); the caller holds the scheduler, so it takes the lock.
QueueHop = Callable[[Task, Host, Host], None]


class RobotsFetch:
    """The robots.txt flow of one run; ``rows`` collects the `robots` rows it decided."""

    def __init__(self, settings: FetchSettings, hosts: Hosts, client: Client,
                 writer: warc.WarcWriter, *, now: Callable[[], datetime],
                 queue_hop: QueueHop) -> None:
        self.settings = settings
        self.hosts = hosts
        self.client = client
        self.writer = writer
        self.now = now
        self.queue_hop = queue_hop
        self.rows: list[dict[str, Any]] = []

    @staticmethod
    def task_for(h: Host) -> Task:
        """The task fetching ``h``'s own robots.txt."""
        return Task("robots", h.key, origin_url(h.key, "/robots.txt"), owner=h.key)

    def fetch(self, task: Task) -> Slot:
        """Request one robots.txt hop of ``task.owner`` on ``task.host``."""
        s = self.settings
        h = self.hosts[task.host]
        assert task.owner is not None and h.conn is not None
        ex = self.client.get(h, task.url, self.client.headers(h), keep_decoded=s.robots_max_bytes)
        slot = Slot(result="ok", end=ex.end, host=h.key)
        if ex.status is not None:
            write_exchange(self.writer, ex, "robots", chain=task.chain)
        if ex.status is None or ex.error_kind == "timeout":
            slot.result = "fail"
            h.errors += 1
            self.done(task.owner, RobotsRules.unreachable(ex.status), slot,
                      f"robots unreachable: {ex.error}", fetched_at=ex.started_at)
            return slot
        status = ex.status
        if status in REDIRECT_CODES:
            location = ex.header("Location")
            target = None
            if location and task.hops < ROBOTS_MAX_REDIRECTS:
                try:
                    target = normalize(location, task.url, self.settings.norm_rules)
                except BadURL:
                    target = None
            if target is not None:
                self._hop(task, target, slot)
                return slot
            # RFC 9309 2.3.1.2: past five redirects robots.txt MAY be taken as unavailable.
            self.done(task.owner, RobotsRules.unavailable(status), slot, None,
                      fetched_at=ex.started_at)
            return slot
        rules = RobotsRules.from_status(status, ex.kept, s.robots_token, s.robots_max_bytes)
        reason = None
        if rules.disallow_all:
            slot.result = "fail"
            h.errors += 1
            reason = "robots 5xx" if status >= 500 else f"robots {status}"
        self.done(task.owner, rules, slot, reason, fetched_at=ex.started_at)
        return slot

    def _hop(self, task: Task, target: str, slot: Slot) -> None:
        """Follow a robots.txt redirect: same host through its queue, else the target's."""
        hop = Task("robots", "", target, owner=task.owner, hops=task.hops + 1,
                   chain=[*task.chain, task.url])
        try:
            hop.host = host_key(target)
            target_host = self.hosts.get_or_add(hop.host)
        except (BadURL, ValueError):
            assert task.owner is not None
            self.done(task.owner, RobotsRules.unavailable(None), slot, None)
            return
        if hop.host == task.host:
            slot.front.append(hop)
            return
        # Per-IP mode: the target must wait in its address's queue, so resolve it now.
        if self.settings.per_ip and target_host.ip is None and self.hosts.resolve(target_host):
            target_host.queue_key = target_host.ip or target_host.key
        self.queue_hop(hop, target_host, self.hosts[task.owner or ""])

    def done(self, owner_key: str, rules: RobotsRules, slot: Slot,
             defer_reason: str | None, fetched_at: datetime | None = None) -> None:
        """Record the robots outcome of ``owner_key`` and release anything waiting on it."""
        owner = self.hosts[owner_key]
        self.hosts.set_robots(owner, rules)
        at = fetched_at or self.now()
        self.rows.append(rules.to_row(owner.key, at, self.settings.robots_ttl_s))
        if defer_reason is None and owner.deferred is not None:
            defer_reason = owner.deferred
        if defer_reason is not None:
            slot.defer.append((owner.key, defer_reason))
        slot.unblock.append(owner.queue_key)

    def unreachable(self, owner_key: str, slot: Slot, reason: str) -> None:
        """``owner_key``'s robots.txt could not be had (``reason``): disallow all, defer."""
        self.done(owner_key, RobotsRules.unreachable(None), slot,
                  f"robots unreachable: {reason}")
