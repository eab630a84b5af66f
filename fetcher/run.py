"""The Fetcher: runs one fetch list through the politeness scheduler with a pool of workers.

One ``Fetcher.run`` is one Spark task's worth of work (it knows nothing of Spark). Items are
grouped into back queues (``fetcher.scheduler``); ``threads`` workers take whichever queue is due
soonest, do exactly one request for it (or none, e.g. a robots-denied URL) and hand the queue
back with the time the response ended, so the host's delay runs from there.

Per host, in order: DNS once (``fetcher.dns``; a failure makes every URL of the host
``dns_error``, an SSRF refusal ``connect_error`` with ``ssrf: address X refused``); robots.txt
before anything else unless a fresh copy came in ``robots_cache`` (``fetcher.robots``); then the
URLs, best priority first, each ``max(min_delay_s, Crawl-delay)`` after the previous response
ended. The robots.txt request is a request like any other: the delay runs after it too.

Redirects. A redirect to the *same* host (same scheme, name and port) is followed through the
host's own queue: the next hop goes to the front of the queue and waits the host delay like
any request, so a chain of hops is never a burst. A redirect to *another* host is not
followed in this run: the URL is recorded as ``redirect`` with ``final_url`` the normalized
target, and the crawldb schedules the target under its own host's politeness and robots --
Nutch's behaviour with ``http.redirect.max=0`` for cross-host hops. More than
``max_redirects`` same-host hops give ``redirect`` with error ``too many redirects``; a target
already in the chain gives ``redirect`` with error ``loop``. robots.txt redirects are followed
(up to five, RFC 9309 2.3.1.2) also across hosts: a cross-host hop is queued on the target
host (after that host's own robots.txt) while the original host's queue is blocked.

Failure policy per queue: timeouts, connect errors, protocol errors and 5xx count as failures
and push the next request out by ``backoff_base_s * 2**(k-1)`` (k consecutive failures);
after ``host_failure_limit`` of them the host's remaining URLs are ``retry_later``
(``host failures``). 429/503 mark the URL ``retry_later`` and pause the whole queue for
``Retry-After`` (capped at ``retry_after_max_s``; exponential back-off when absent); a pause or
back-off reaching past the budget defers the rest of the host's URLs as ``retry_later``.
robots.txt 5xx / unreachable and a Crawl-delay above ``max_crawl_delay_s`` defer the host too.

An exchange we abandon (body cap, bomb, timeout, unwanted type) is closed with a TCP reset so
the server notices at its next write and its side of the exchange ends about when ours did;
a server that only notices later (one sleeping before it answers) is covered by the failure
back-off, which is at least ``backoff_base_s``.

Time budget: a request starts only if ``now + request_deadline_s <= start + time_budget_s``;
every request ends by its deadline, so a run ends by ``start + time_budget_s`` plus a little
bookkeeping. URLs not reached are ``skipped_budget`` (a same-host redirect chain cut by the
budget is ``redirect`` with the pending hop as ``final_url`` and error ``not followed: time
budget``). ``fetch_time`` is the start of the item's first request, or, for URLs that caused no
request, when that was decided.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

from fetcher import models as m
from fetcher import warc
from fetcher.capture import exchange_records
from fetcher.classify import (
    REDIRECT_CODES,
    classify,
    media_type,
    retry_after_seconds,
    type_allowed,
)
from fetcher.dns import DNSError, Resolver, SSRFGuard, SSRFRefused
from fetcher.http import Exchange, HostConnection, perform
from fetcher.models import FetchItem, FetchOutcome
from fetcher.robots import RobotsRules, from_cache, request_target
from fetcher.scheduler import Result, Scheduler
from fetcher.settings import FetchSettings
from fetcher.storage import Storage
from fetcher.urls import BadURL, host_key, normalize, origin_url, split_host_key

log = logging.getLogger(__name__)

SOFTWARE = f"recrawl-fetcher/0.1 (warcio {version('warcio')})"
ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"
# No "br": warcio 1.8.1 cannot decode brotli with the Brotli (Google) module this project pins
# (webrecorder/warcio#73: it expects brotlipy), so br captures could be neither checked nor
# parsed. A server must not use a coding we did not accept (RFC 9110 12.5.3); if one does, the
# bomb guard still decodes br to measure it.
ACCEPT_ENCODING = "gzip, deflate"
ROBOTS_MAX_REDIRECTS = 5  # RFC 9309 2.3.1.2


@dataclass
class _Task:
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
class _Host:
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


@dataclass
class _Slot:
    """What processing one task did with the queue's slot."""

    result: Result = "none"
    end: float = 0.0
    host: str | None = None  # host whose delay applies after the request
    pause_until: float | None = None
    front: list[_Task] = field(default_factory=list)
    defer: list[tuple[str, str]] = field(default_factory=list)  # (host key, error)
    fail_hosts: list[tuple[str, str, str]] = field(default_factory=list)  # (host, status, err)
    unblock: list[str] = field(default_factory=list)  # queue keys


class Fetcher:
    """Fetches fetch-list items politely into WARC files and `fetches` rows.

    Args:
        settings: fetcher configuration.
        warc_dir: directory the WARC files are written to (a path or ``s3a://`` URI).
        warc_prefix: file name prefix, unique per task attempt (``<prefix>-00000.warc.gz``).
        robots_cache: previous `robots` rows by host key; fresh ones are used without a fetch.
        resume: an earlier attempt of this fetch (a killed task, a crashed or re-run step) may
            have requested these hosts moments ago, and its last request times died with it.
            Each host then waits its delay before its first request, as if one had just ended:
            ``max(min_delay_s, Crawl-delay)`` when its robots.txt came in ``robots_cache``, else
            ``max_crawl_delay_s`` (the longest delay it could have asked for).
        clock: monotonic clock for politeness and deadlines.
        wallclock: epoch clock for fetch times and WARC dates.
        storage: how ``warc_dir`` is reached (:mod:`fetcher.storage`; S3 settings).
    """

    def __init__(self, settings: FetchSettings, warc_dir: str, warc_prefix: str, *,
                 robots_cache: dict[str, dict] | None = None,
                 resume: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 wallclock: Callable[[], float] = time.time,
                 storage: Storage | None = None) -> None:
        self.settings = settings
        self.warc_dir = warc_dir
        self.storage = storage
        self.warc_prefix = warc_prefix
        self.robots_cache = robots_cache or {}
        self.resume = resume
        self.clock = clock
        self.wallclock = wallclock
        self.resolver = Resolver(settings.static_hosts, ttl_s=settings.dns_ttl_s, clock=clock)
        self.guard = SSRFGuard.from_cidrs(settings.allow_private_networks)

    # -- public ----------------------------------------------------------------------------
    def run(self, items: Iterable[FetchItem]) -> FetchOutcome:
        """Fetch ``items``; returns one row per item (input order), robots, hosts, WARC files."""
        s = self.settings
        items = list(items)
        start = self.clock()
        self._budget_end = start + s.time_budget_s
        self._sched: Scheduler[_Task] = Scheduler(
            budget_end=self._budget_end, request_deadline=s.request_deadline_s,
            backoff_base=s.backoff_base_s)
        self._cond = threading.Condition()
        self._rows: list[dict[str, Any] | None] = [None] * len(items)
        self._hosts: dict[str, _Host] = {}
        self._robots_rows: list[dict[str, Any]] = []
        self._queue_delay: dict[str, float] = {}
        self._warc = warc.WarcWriter(
            self.warc_dir, self.warc_prefix, max_bytes=s.warc_max_bytes,
            gzip_level=s.warc_gzip_level, info=self._warcinfo(), storage=self.storage)

        self._enqueue(items)
        if self.resume:
            for h in self._hosts.values():
                wait = (self._delay(h.queue_key, h.key) if h.robots is not None
                        else max(s.min_delay_s, s.max_crawl_delay_s))
                self._sched.hold(h.queue_key, start + wait)
        n_threads = max(1, min(s.threads, len(self._sched.queues()) or 1))
        workers = [threading.Thread(target=self._worker, name=f"fetch-{i}", daemon=True)
                   for i in range(n_threads)]
        for w in workers:
            w.start()
        # Every request ends by its deadline; the margin only covers a DNS lookup stuck in
        # the system resolver, whose task is then reported as not reached.
        hard_end = self._budget_end + s.request_deadline_s + 5.0
        for w in workers:
            w.join(max(0.0, hard_end - self.clock()))
        for h in self._hosts.values():
            if h.conn is not None:
                h.conn.close()

        for _, task in self._sched.drain_all():
            if task.kind == "page":
                self._budget_row(task)
        warc_files = self._warc.close()
        rows = [r if r is not None else m.empty_row(
            items[i].url, m.SKIPPED_BUDGET, self._now(), error="not reached")
            for i, r in enumerate(self._rows)]
        return FetchOutcome(rows=rows, robots=self._robots_rows, hosts=self._host_rows(),
                            warc_files=warc_files)

    # -- setting up ------------------------------------------------------------------------
    def _warcinfo(self) -> dict[str, str]:
        s = self.settings
        return {
            "software": SOFTWARE,
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
                          "warc-format/warc-1.1/",
            "isPartOf": self.warc_prefix,
            "hostname": socket.gethostname(),
            "operator": s.operator or "",
            "http-header-user-agent": s.user_agent,
            "robots": f"classic (RFC 9309, product token {s.robots_token})",
        }

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.wallclock(), UTC)

    def _to_wall(self, mono: float) -> datetime:
        return datetime.fromtimestamp(self.wallclock() + (mono - self.clock()), UTC)

    def _host(self, key: str) -> _Host:
        h = self._hosts.get(key)
        if h is None:
            scheme, name, port = split_host_key(key)
            h = self._hosts[key] = _Host(key, scheme, name, port, queue_key=key)
            cached = from_cache(self.robots_cache.get(key), self._now(),
                                self.settings.robots_ttl_s, self.settings.robots_token)
            if cached is not None:
                self._set_robots(h, cached)
        return h

    def _enqueue(self, items: list[FetchItem]) -> None:
        order = sorted(range(len(items)), key=lambda i: -items[i].priority)
        keys: dict[int, str] = {}
        for i in order:
            item = items[i]
            try:
                keys[i] = host_key(item.host or item.url)
                self._host(keys[i])
            except (BadURL, ValueError) as exc:
                self._rows[i] = m.empty_row(item.url, m.CONNECT_ERROR, self._now(),
                                            error=f"invalid url: {exc}")
        if self.settings.per_ip:
            self._resolve_all({keys[i] for i in keys})
        for i in order:
            if i not in keys:
                continue
            h = self._hosts[keys[i]]
            task = _Task("page", h.key, items[i].url, index=i, item=items[i])
            if h.failure or h.deferred:
                self._terminal_row(h, task)
            else:
                self._sched.add(h.queue_key, task)

    def _resolve_all(self, keys: set[str]) -> None:
        """Per-IP mode needs every address before queueing; look them up concurrently."""
        hosts = [self._hosts[k] for k in sorted(keys)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.settings.threads, 32))) as pool:
            list(pool.map(self._resolve, hosts))
        for h in hosts:
            if h.ip is not None:
                h.queue_key = h.ip

    def _resolve(self, h: _Host) -> bool:
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

    # -- workers ---------------------------------------------------------------------------
    def _worker(self) -> None:
        while True:
            got = self._next()
            if got is None:
                return
            key, task = got
            try:
                slot = self._process(task)
            except Exception as exc:  # a bug must not lose a row or hang the run
                log.exception("fetcher: internal error on %s", task.url)
                if task.kind == "page":
                    self._row(task, m.HTTP_ERROR, error=f"internal error: {exc!r}"[:300])
                slot = _Slot()
                if task.kind == "robots" and task.owner:
                    self._robots_done(task.owner, RobotsRules.unreachable(None), slot,
                                      "robots unreachable: internal error")
            try:
                self._finish(key, slot)
            except Exception:  # never leave a queue in flight: the run would not end
                log.exception("fetcher: internal error releasing %s", key)
                with self._cond:
                    self._sched.release(key, self.clock(), delay=self.settings.min_delay_s,
                                        result="none")
                    self._cond.notify_all()

    def _next(self) -> tuple[str, _Task] | None:
        with self._cond:
            while True:
                now = self.clock()
                got = self._sched.pop_ready(now)
                if got is not None:
                    return got
                if self._sched.finished(now):
                    self._cond.notify_all()
                    return None
                # Sleep until the soonest queue is due; if none is (or the due one may not
                # start any more), until a release notifies us.
                t = self._sched.next_ready_time()
                wait = t - now if t is not None and t > now else 1.0
                self._cond.wait(min(1.0, wait))

    def _finish(self, key: str, slot: _Slot) -> None:
        s = self.settings
        with self._cond:
            if slot.front:
                self._sched.push_front(key, slot.front)
            for hk, status, err in slot.fail_hosts:
                h = self._hosts[hk]
                for t in self._sched.drain(h.queue_key, lambda t, hk=hk: t.host == hk):
                    self._task_failed(t, status, err)
            for hk, err in slot.defer:
                self._defer_host(hk, err)
            delay = self._delay(key, slot.host)
            q = self._sched.release(key, slot.end, delay=delay, result=slot.result,
                                    pause_until=slot.pause_until)
            for qk in slot.unblock:
                self._sched.unblock(qk)
            if slot.result == "fail" and q.consecutive_failures >= s.host_failure_limit:
                self._defer_queue(key, "host failures")
            elif slot.result != "none" and not self._sched.can_start(q.next_allowed):
                if slot.pause_until is not None and q.next_allowed == slot.pause_until:
                    self._defer_queue(key, "retry-after beyond time budget")
                elif slot.result == "fail":
                    self._defer_queue(key, "host back-off beyond time budget")
            if not q.tasks and slot.host is not None:
                h = self._hosts[slot.host]
                if h.conn is not None:
                    h.conn.close()  # nothing more for this host: do not hold its socket
            self._cond.notify_all()

    def _delay(self, queue_key: str, host: str | None) -> float:
        """Delay after a request: max(min_delay, Crawl-delay); per-IP queues keep the max."""
        d = self.settings.min_delay_s
        if host is not None:
            rules = self._hosts[host].robots
            if rules is not None and rules.crawl_delay is not None:
                d = max(d, min(rules.crawl_delay, self.settings.max_crawl_delay_s))
        d = max(d, self._queue_delay.get(queue_key, 0.0))
        self._queue_delay[queue_key] = d
        return d

    def _defer_host(self, hk: str, err: str) -> None:
        h = self._hosts[hk]
        h.deferred = err
        for t in self._sched.drain(h.queue_key, lambda t, hk=hk: t.host == hk):
            self._task_failed(t, m.RETRY_LATER, err)

    def _defer_queue(self, key: str, err: str) -> None:
        for h in self._hosts.values():
            if h.queue_key == key and h.deferred is None:
                h.deferred = err
        for t in self._sched.drain(key):
            self._task_failed(t, m.RETRY_LATER, err)

    def _task_failed(self, task: _Task, status: str, err: str) -> None:
        """A queued task that will not run: its row, or its robots owner's fate."""
        if task.kind == "page":
            self._row(task, status, error=err)
        elif task.owner is not None and task.owner != task.host:
            owner = self._hosts[task.owner]
            slot = _Slot()
            self._robots_done(task.owner, RobotsRules.unreachable(None), slot,
                              f"robots unreachable: {err}")
            owner.deferred = owner.deferred or f"robots unreachable: {err}"
            for t in self._sched.drain(owner.queue_key, lambda t, k=owner.key: t.host == k):
                self._task_failed(t, m.RETRY_LATER, owner.deferred)
            for qk in slot.unblock:
                self._sched.unblock(qk)

    # -- one task --------------------------------------------------------------------------
    def _process(self, task: _Task) -> _Slot:
        h = self._hosts[task.host]
        if h.failure is None and h.deferred is None and h.ip is None:
            self._resolve(h)
        if h.failure is not None or h.deferred is not None:
            slot = _Slot()
            if h.failure is not None:
                slot.fail_hosts.append((h.key, *h.failure))
            else:
                slot.defer.append((h.key, h.deferred or "deferred"))
            if task.kind == "page":
                self._terminal_row(h, task)
            elif task.owner is not None:
                reason = (h.failure[1] if h.failure else h.deferred) or "failed"
                self._robots_done(task.owner, RobotsRules.unreachable(None), slot,
                                  f"robots unreachable: {reason}")
            return slot
        own_robots = task.kind == "robots" and task.owner == h.key
        if h.robots is None and not own_robots:
            robots_task = _Task("robots", h.key, origin_url(h.key, "/robots.txt"), owner=h.key)
            slot = self._fetch_robots(robots_task)
            slot.front.append(task)
            return slot
        if task.kind == "robots":
            return self._fetch_robots(task)
        return self._fetch_page(h, task)

    def _headers(self, h: _Host) -> dict[str, str]:
        assert h.conn is not None
        return {
            "Host": h.conn.host_header,
            "User-Agent": self.settings.user_agent,
            "Accept": ACCEPT,
            "Accept-Encoding": ACCEPT_ENCODING,
        }

    def _deadline(self) -> float:
        return min(self.clock() + self.settings.request_deadline_s, self._budget_end)

    # -- robots.txt ------------------------------------------------------------------------
    def _fetch_robots(self, task: _Task) -> _Slot:
        s = self.settings
        h = self._hosts[task.host]
        assert task.owner is not None and h.conn is not None
        ex = perform(h.conn, task.url, request_target(task.url), self._headers(h),
                     clock=self.clock, wallclock=self.wallclock, deadline=self._deadline(),
                     max_body=s.max_body_bytes, max_decoded=s.max_decompressed_bytes,
                     keep_decoded=s.robots_max_bytes)
        h.requests += 1
        slot = _Slot(result="ok", end=ex.end, host=h.key)
        if ex.status is not None:
            self._write_exchange(ex, "robots", chain=task.chain)
        if ex.status is None or ex.error_kind == "timeout":
            slot.result = "fail"
            h.errors += 1
            self._robots_done(task.owner, RobotsRules.unreachable(ex.status), slot,
                              f"robots unreachable: {ex.error}", fetched_at=ex.started_at)
            return slot
        status = ex.status
        if status in REDIRECT_CODES:
            location = ex.header("Location")
            target = None
            if location and task.hops < ROBOTS_MAX_REDIRECTS:
                try:
                    target = normalize(location, task.url)
                except BadURL:
                    target = None
            if target is not None:
                self._robots_hop(task, target, slot)
                return slot
            # RFC 9309 2.3.1.2: past five redirects robots.txt MAY be taken as unavailable.
            self._robots_done(task.owner, RobotsRules.unavailable(status), slot, None,
                              fetched_at=ex.started_at)
            return slot
        rules = RobotsRules.from_status(status, ex.kept, s.robots_token, s.robots_max_bytes)
        reason = None
        if rules.disallow_all:
            slot.result = "fail"
            h.errors += 1
            reason = "robots 5xx" if status >= 500 else f"robots {status}"
        self._robots_done(task.owner, rules, slot, reason, fetched_at=ex.started_at)
        return slot

    def _robots_hop(self, task: _Task, target: str, slot: _Slot) -> None:
        """Follow a robots.txt redirect: same host through its queue, else the target's."""
        hop = _Task("robots", "", target, owner=task.owner, hops=task.hops + 1,
                    chain=[*task.chain, task.url])
        try:
            hop.host = host_key(target)
            target_host = self._host(hop.host)
        except (BadURL, ValueError):
            assert task.owner is not None
            self._robots_done(task.owner, RobotsRules.unavailable(None), slot, None)
            return
        if hop.host == task.host:
            slot.front.append(hop)
            return
        if self.settings.per_ip and target_host.ip is None and self._resolve(target_host):
            target_host.queue_key = target_host.ip or target_host.key
        owner = self._hosts[task.owner or ""]
        with self._cond:  # another host's queue: only under the scheduler lock
            self._sched.push_front(target_host.queue_key, [hop])
            if target_host.queue_key != owner.queue_key:
                self._sched.block(owner.queue_key)
            self._cond.notify_all()

    def _robots_done(self, owner_key: str, rules: RobotsRules, slot: _Slot,
                     defer_reason: str | None, fetched_at: datetime | None = None) -> None:
        """Record the robots outcome of ``owner_key`` and release anything waiting on it."""
        owner = self._hosts[owner_key]
        self._set_robots(owner, rules)
        at = fetched_at or self._now()
        self._robots_rows.append(rules.to_row(owner.key, at, self.settings.robots_ttl_s))
        if defer_reason is None and owner.deferred is not None:
            defer_reason = owner.deferred
        if defer_reason is not None:
            slot.defer.append((owner.key, defer_reason))
        slot.unblock.append(owner.queue_key)

    def _set_robots(self, h: _Host, rules: RobotsRules) -> None:
        h.robots = rules
        delay = rules.crawl_delay
        if delay is not None and delay > self.settings.max_crawl_delay_s:
            h.deferred = f"crawl-delay {delay:g} exceeds max"

    # -- pages -----------------------------------------------------------------------------
    def _fetch_page(self, h: _Host, task: _Task) -> _Slot:
        s = self.settings
        item = task.item
        assert item is not None and h.robots is not None and h.conn is not None
        if not h.robots.allowed(task.url):
            if task.hops:
                self._row(task, m.REDIRECT, final_url=task.url,
                          error="redirect target disallowed by robots.txt")
            else:
                self._row(task, m.ROBOTS_DENIED)
            return _Slot()
        headers = self._headers(h)
        if task.hops == 0:
            if item.etag:
                headers["If-None-Match"] = item.etag
            if item.last_modified:
                headers["If-Modified-Since"] = item.last_modified

        def want_body(status: int, msg: Any) -> bool:
            return not (200 <= status < 300) or type_allowed(
                msg.get("Content-Type"), s.allowed_content_types)

        ex = perform(h.conn, task.url, request_target(task.url), headers, clock=self.clock,
                     wallclock=self.wallclock, deadline=self._deadline(),
                     max_body=s.max_body_bytes, max_decoded=s.max_decompressed_bytes,
                     want_body=want_body)
        h.requests += 1
        task.started_at = task.started_at or ex.started_at
        task.duration_ms += ex.duration_ms
        verdict = classify(ex.status, ex.error_kind, ex.error)
        slot = _Slot(result="fail" if verdict.host_failure else "ok", end=ex.end, host=h.key)
        if verdict.host_failure:
            h.errors += 1

        if verdict.fetch_status == m.REDIRECT:
            follow = self._page_redirect(task, ex)
            if follow is not None:
                self._write_exchange(ex, m.REDIRECT, chain=task.chain)
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
            row = self._redirect_row_values(task, ex)
        if ex.status is not None:
            row.update(self._write_exchange(ex, status, chain=task.chain, item=item,
                                            error=row.get("error", error)))
        # A filtered_type row keeps the digest and length of what its head-only record
        # stores (an empty payload): row and record agree.
        self._row(task, status, error=row.pop("error", error), exchange=ex, **row)
        return slot

    def _page_redirect(self, task: _Task, ex: Exchange) -> _Task | None:
        """The next same-host hop to follow, or None if the redirect ends the chain here."""
        location = ex.header("Location")
        if not location:
            return None
        try:
            target = normalize(location, task.url)
            target_host = host_key(target)
        except BadURL:
            return None
        chain = [*task.chain, task.url]
        if target in chain or target_host != task.host:
            return None
        if task.hops >= self.settings.max_redirects:
            return None
        return _Task("page", task.host, target, index=task.index, item=task.item,
                     hops=task.hops + 1, chain=chain, started_at=task.started_at,
                     duration_ms=task.duration_ms)

    def _redirect_row_values(self, task: _Task, ex: Exchange) -> dict[str, Any]:
        location = ex.header("Location")
        chain = [*task.chain, task.url]
        values: dict[str, Any] = {"redirect_chain": chain}
        if not location:
            values["error"] = "redirect without location"
            values["final_url"] = task.url
            return values
        try:
            target = normalize(location, task.url)
            target_host = host_key(target)
        except BadURL as exc:
            values["error"] = f"bad location: {exc}"[:300]
            values["final_url"] = None
            return values
        values["final_url"] = target
        if target in chain:
            values["error"] = "loop"
        elif target_host == task.host:
            values["error"] = "too many redirects"
        return values

    # -- WARC ------------------------------------------------------------------------------
    def _write_exchange(self, ex: Exchange, status: str, *, chain: list[str],
                        item: FetchItem | None = None, error: str | None = None
                        ) -> dict[str, Any]:
        """Archive ``ex`` (see ``fetcher.capture``); returns the row values pointing at it."""
        records, values = exchange_records(ex, status, chain=chain, item=item, error=error)
        loc = self._warc.write(records)[0]
        if records[0].rec_type != "request":
            values.update(warc_file=loc.path, warc_offset=loc.offset, warc_length=loc.length)
        return values

    # -- rows ------------------------------------------------------------------------------
    def _row(self, task: _Task, status: str, *, error: str | None = None,
             exchange: Exchange | None = None, **values: Any) -> None:
        item = task.item
        assert item is not None
        h = self._hosts.get(task.host)
        ex = exchange
        row = m.empty_row(item.url, status, task.started_at or self._now(), error=error,
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
                row["etag"] = row["etag"] or item.etag
                row["last_modified"] = row["last_modified"] or item.last_modified
        row.update(values)
        if status == m.RETRY_LATER and h is not None:
            h.deferred_count += 1
        self._rows[task.index] = row

    def _terminal_row(self, h: _Host, task: _Task) -> None:
        if h.failure is not None:
            self._row(task, h.failure[0], error=h.failure[1])
        else:
            self._row(task, m.RETRY_LATER, error=h.deferred)

    def _budget_row(self, task: _Task) -> None:
        if task.hops:
            self._row(task, m.REDIRECT, final_url=task.url, redirect_chain=list(task.chain),
                      error="not followed: time budget")
        else:
            self._row(task, m.SKIPPED_BUDGET)

    def _host_rows(self) -> list[dict[str, Any]]:
        now = self.clock()
        out = []
        for h in self._hosts.values():
            q = self._sched.queue(h.queue_key)
            backing_off = q.consecutive_failures > 0 or (
                q.paused_until is not None and q.paused_until > now)
            out.append({
                "host": h.key,
                "ip": h.ip,
                "backoff_until": self._to_wall(q.next_allowed)
                if backing_off and q.next_allowed > now else None,
                "consecutive_failures": q.consecutive_failures,
                "requests": h.requests,
                "errors": h.errors,
                "deferred": h.deferred_count,
            })
        return out
