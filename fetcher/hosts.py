"""The hosts of one run: created on first sight, resolved and SSRF-checked once, robots state.

A host is a politeness key ``scheme://name:port``. Its queue key is the host key, or its IP
address in per-IP mode once resolved. A failed lookup or refused address is kept as the host's
``failure``, a reason to defer all its URLs as its ``deferred``; the Fetcher turns both into
rows for every URL of the host.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from fetcher import models as m
from fetcher.dns import DNSError, Resolver, SSRFGuard, SSRFRefused
from fetcher.http import HostConnection
from fetcher.robots import RobotsRules, from_cache
from fetcher.settings import FetchSettings
from fetcher.urls import split_host_key
from recrawl.rules.politeness import host_delay


@dataclass
class Host:
    """What the run knows about one politeness host."""

    key: str
    scheme: str
    name: str
    port: int
    queue_key: str
    ip: str | None = None
    failure: tuple[str, str] | None = None  # (fetch_status, error) for every URL of the host
    deferred: str | None = None  # retry_later error for every URL of the host
    robots: RobotsRules | None = None
    conn: HostConnection | None = None
    requests: int = 0
    errors: int = 0
    deferred_count: int = 0
    # What the run's requests to the host measured (fetcher.client): the last response's end,
    # seconds spent in requests, seconds waited between them, bytes received, and requests
    # that started closer than the host's delay to the previous response's end (never
    # expected: the scheduler forbids it; the fetch step's politeness gate checks this).
    last_end: float | None = None
    busy_s: float = 0.0
    waited_s: float = 0.0
    bytes: int = 0
    violations: int = 0
    worst_short_s: float = 0.0


class Hosts:
    """The run's hosts by key (insertion order), with what resolving and robots.txt found."""

    def __init__(self, settings: FetchSettings, resolver: Resolver, guard: SSRFGuard,
                 robots_cache: dict[str, dict], now: Callable[[], datetime]) -> None:
        self.settings = settings
        self.resolver = resolver
        self.guard = guard
        self.robots_cache = robots_cache
        self.now = now
        self._by_key: dict[str, Host] = {}
        # Workers add hosts (a cross-host robots.txt redirect) outside the scheduler's lock
        # while another may walk the hosts under it: adds are serialized, walks take a copy.
        self._add_lock = threading.Lock()

    def __getitem__(self, key: str) -> Host:
        return self._by_key[key]

    def get(self, key: str) -> Host | None:
        return self._by_key.get(key)

    def __iter__(self) -> Iterator[Host]:
        return iter(list(self._by_key.values()))  # a snapshot: see _add_lock

    def get_or_add(self, key: str) -> Host:
        """The host for ``key``; a new one takes a fresh robots.txt from the cache, if any."""
        h = self._by_key.get(key)
        if h is not None:
            return h
        with self._add_lock:
            h = self._by_key.get(key)  # two workers may race to add the same host
            if h is None:
                scheme, name, port = split_host_key(key)
                h = Host(key, scheme, name, port, queue_key=key)
                cached = from_cache(self.robots_cache.get(key), self.now(),
                                    self.settings.robots_ttl_s, self.settings.robots_token)
                if cached is not None:
                    self.set_robots(h, cached)
                self._by_key[key] = h  # published complete, robots included
        return h

    def set_robots(self, h: Host, rules: RobotsRules) -> None:
        """Adopt ``rules``; a Crawl-delay above ``max_crawl_delay_s`` defers the host."""
        h.robots = rules
        s = self.settings
        if host_delay(rules.crawl_delay, s.min_delay_s, s.max_crawl_delay_s) is None:
            h.deferred = f"crawl-delay {rules.crawl_delay:g} exceeds max"

    def resolve(self, h: Host) -> bool:
        """Resolve and SSRF-check ``h`` once; on failure every URL of it gets the failure."""
        if h.ip is not None:
            return True
        if h.failure is not None:
            return False
        try:
            h.ip = self.resolver.resolve_checked(h.name, self.guard)
        except DNSError as exc:
            h.failure = (m.DNS_ERROR, str(exc))
            return False
        except SSRFRefused as exc:
            h.failure = (m.CONNECT_ERROR, str(exc))
            return False
        s = self.settings
        h.conn = HostConnection(h.scheme, h.name, h.port, h.ip, self.guard,
                                connect_timeout=s.connect_timeout_s,
                                read_timeout=s.read_timeout_s)
        return True

    def resolve_all(self, keys: set[str]) -> None:
        """Per-IP mode needs every address before queueing; look them up concurrently."""
        hosts = [self._by_key[k] for k in sorted(keys)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.settings.threads, 32))) as pool:
            list(pool.map(self.resolve, hosts))
        for h in hosts:
            if h.ip is not None:
                h.queue_key = h.ip

    def close_connections(self) -> None:
        for h in self._by_key.values():
            if h.conn is not None:
                h.conn.close()
