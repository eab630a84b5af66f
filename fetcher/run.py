"""The Fetcher: runs one fetch list through the politeness scheduler with a pool of workers.

One ``Fetcher.run`` is one Spark task's worth of work (it knows nothing of Spark). Items are
grouped into back queues (``fetcher.scheduler``); ``threads`` workers take whichever queue is due
soonest, do exactly one request for it (or none, e.g. a robots-denied URL) and hand the queue
back with the time the response ended, so the host's delay runs from there. This module is that
loop and what it decides about queues; the work of one task is elsewhere:

* ``fetcher.hosts`` -- the run's hosts, DNS and SSRF check once per host;
* ``fetcher.robots_fetch`` -- robots.txt requests and their (cross-host) redirects;
* ``fetcher.pages`` -- one page request; ``fetcher.redirects`` -- which redirect is followed;
* ``fetcher.client`` -- headers and deadline; ``fetcher.archive`` -- WARC output;
* ``fetcher.rows`` -- the `fetches` and `hosts` rows; ``fetcher.tasks`` -- Task and Slot.

Per host, in order: DNS once (a failure makes every URL of the host ``dns_error``, an SSRF
refusal ``connect_error`` with ``ssrf: address X refused``); robots.txt before anything else
unless a fresh copy came in ``robots_cache``; then the URLs, best priority first, each
``max(min_delay_s, Crawl-delay)`` after the previous response ended. The robots.txt request is
a request like any other: the delay runs after it too.

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
bookkeeping. URLs not reached are ``skipped_budget`` (``fetcher.rows``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from fetcher import models as m
from fetcher import warc
from fetcher.archive import warcinfo
from fetcher.client import Client
from fetcher.dns import Resolver, SSRFGuard
from fetcher.hosts import Host, Hosts
from fetcher.idle import IdleWorkers
from fetcher.models import FetchItem, FetchOutcome
from fetcher.pages import Capture, PageFetch
from fetcher.progress import SLOWEST, StatusWriter
from fetcher.robots_fetch import RobotsFetch
from fetcher.rows import Rows, host_rows
from fetcher.scheduler import Scheduler
from fetcher.settings import FetchSettings
from fetcher.storage import Storage
from fetcher.tasks import Slot, Task
from fetcher.urls import BadURL, host_key
from recrawl.rules.politeness import host_delay

log = logging.getLogger(__name__)


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
        status_uri: where a status record of the run is written every ``status_interval_s``
            seconds while it runs (:mod:`fetcher.progress`); None: no progress records.
        on_capture: called with each fetched page's ``response`` record (row values and gzip
            member, :mod:`fetcher.pages`) from the worker thread; it must only enqueue.
    """

    def __init__(self, settings: FetchSettings, warc_dir: str, warc_prefix: str, *,
                 robots_cache: dict[str, dict] | None = None,
                 resume: bool = False,
                 clock: Callable[[], float] = time.monotonic,
                 wallclock: Callable[[], float] = time.time,
                 storage: Storage | None = None,
                 status_uri: str | None = None,
                 status_interval_s: float = 5.0,
                 on_capture: Capture | None = None) -> None:
        self.settings = settings
        self.on_capture = on_capture
        self.status_uri = status_uri
        self.status_interval_s = status_interval_s
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
        self._sched: Scheduler[Task] = Scheduler(
            budget_end=self._budget_end, request_deadline=s.request_deadline_s,
            backoff_base=s.backoff_base_s)
        lock = threading.RLock()  # the scheduler's lock
        self._cond = threading.Condition(lock)
        self._idle = IdleWorkers(lock)
        self._queue_delay: dict[str, float] = {}
        self._hosts = Hosts(s, self.resolver, self.guard, self.robots_cache, self._now)
        self._rows = Rows(items, self._hosts, self._now)
        self._warc = warc.WarcWriter(
            self.warc_dir, self.warc_prefix, max_bytes=s.warc_max_bytes,
            gzip_level=s.warc_gzip_level, info=warcinfo(s, self.warc_prefix),
            storage=self.storage)
        client = Client(s, clock=self.clock, wallclock=self.wallclock,
                        budget_end=self._budget_end)
        self._robots = RobotsFetch(s, self._hosts, client, self._warc, now=self._now,
                                   queue_hop=self._queue_robots_hop)
        self._pages = PageFetch(s, client, self._warc, self._rows, wallclock=self.wallclock,
                                on_capture=self.on_capture)

        self._enqueue(items)
        if self.resume:
            for h in self._hosts:
                wait = (self._delay(h.queue_key, h.key) if h.robots is not None
                        else max(s.min_delay_s, s.max_crawl_delay_s))
                self._sched.hold(h.queue_key, start + wait)
        n_threads = max(1, min(s.threads, len(self._sched.queues()) or 1))
        self._start, self._listed = start, len(items)
        status = (StatusWriter(self.storage or Storage(), self.status_uri,
                               self.status_interval_s, self.progress).start()
                  if self.status_uri else None)
        workers = [threading.Thread(target=self._worker, name=f"fetch-{i}", daemon=True)
                   for i in range(n_threads)]
        for w in workers:
            w.start()
        # Every request ends by its deadline; the margin only covers a DNS lookup stuck in
        # the system resolver, whose task is then reported as not reached.
        hard_end = self._budget_end + s.request_deadline_s + 5.0
        for w in workers:
            w.join(max(0.0, hard_end - self.clock()))
        self._hosts.close_connections()
        if status is not None:
            status.stop()

        for _, task in self._sched.drain_all():
            if task.kind == "page":
                self._rows.budget(task)
        warc_files = self._warc.close()
        rows = self._rows.result()
        return FetchOutcome(rows=rows, robots=self._robots.rows,
                            hosts=host_rows(self._hosts, self._sched.queue, self.clock(),
                                            self._to_wall),
                            warc_files=warc_files, cdxj=self._warc.index(),
                            stats=self._timing(n_threads))

    # -- what the run measured ---------------------------------------------------------------
    def _timing(self, threads: int) -> dict[str, int]:
        """Elapsed time and the politeness floor: the shortest time in which the requests made
        could have been made, each host's requests back to back at its delay and the threads
        kept busy (the throughput gate compares the two, recrawl.rules.gates)."""
        floor, busy = 0.0, 0.0
        for h in self._hosts:
            if h.requests:
                delay = self._queue_delay.get(h.queue_key, self.settings.min_delay_s)
                floor = max(floor, h.busy_s + (h.requests - 1) * delay)
                busy += h.busy_s
        floor = max(floor, busy / max(1, threads))
        return {"elapsed_ms": int((self.clock() - self._start) * 1000),
                "floor_ms": int(floor * 1000)}

    def progress(self) -> dict:
        """The run's status record (fetcher.progress): read without the scheduler's lock, so
        the workers never wait for it; counts may be a request old."""
        now = self.clock()
        done, outcomes = self._rows.tally()
        active = waiting = deferred = 0
        holding = []
        for q in self._sched.queues():
            left = len(q.tasks)
            if q.in_flight:
                active += 1
            elif left:
                waiting += 1
            if left or q.in_flight:
                delay = self._queue_delay.get(q.key, self.settings.min_delay_s)
                est = max(0.0, q.next_allowed - now) + left * delay
                holding.append((q.key, left + int(q.in_flight), round(est, 1)))
        bytes_, requests = 0, 0
        for h in self._hosts:
            deferred += int(h.deferred is not None or h.failure is not None)
            bytes_ += h.bytes
            requests += h.requests
        holding.sort(key=lambda x: -x[2])
        return {"task": self.warc_prefix, "listed": self._listed, "done": done,
                "outcomes": outcomes, "bytes": bytes_, "requests": requests,
                "hosts_active": active, "hosts_waiting": waiting, "hosts_deferred": deferred,
                "slowest": holding[:SLOWEST], "eta_s": holding[0][2] if holding else 0.0,
                "elapsed_s": round(now - self._start, 1)}

    # -- setting up ------------------------------------------------------------------------
    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.wallclock(), UTC)

    def _to_wall(self, mono: float) -> datetime:
        return datetime.fromtimestamp(self.wallclock() + (mono - self.clock()), UTC)

    def _enqueue(self, items: list[FetchItem]) -> None:
        order = sorted(range(len(items)), key=lambda i: -items[i].priority)
        keys: dict[int, str] = {}
        for i in order:
            item = items[i]
            try:
                keys[i] = host_key(item.host or item.url)
                self._hosts.get_or_add(keys[i])
            except (BadURL, ValueError) as exc:
                self._rows.invalid_url(i, exc)
        if self.settings.per_ip:
            self._hosts.resolve_all({keys[i] for i in keys})
        for i in order:
            if i not in keys:
                continue
            h = self._hosts[keys[i]]
            task = Task("page", h.key, items[i].url, index=i, item=items[i])
            if h.failure or h.deferred:
                self._rows.terminal(h, task)
            else:
                self._sched.add(h.queue_key, task)

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
                    self._rows.page(task, m.HTTP_ERROR, error=f"internal error: {exc!r}"[:300])
                slot = Slot()
                if task.kind == "robots" and task.owner:
                    self._robots.unreachable(task.owner, slot, "internal error")
            try:
                self._finish(key, slot)
            except Exception:  # never leave a queue in flight: the run would not end
                log.exception("fetcher: internal error releasing %s", key)
                with self._cond:
                    self._sched.release(key, self.clock(), delay=self.settings.min_delay_s,
                                        result="none")
                    self._idle.changed(self._sched.next_ready_time())

    def _next(self) -> tuple[str, Task] | None:
        with self._cond:
            while True:
                now = self.clock()
                got = self._sched.pop_ready(now)
                if got is not None:
                    self._idle.took()
                    return got
                if self._sched.finished(now):
                    self._idle.wake_all()
                    return None
                # Until the soonest queue is due or a release makes one due sooner (one idle
                # worker keeps that timer, fetcher.idle); if none is due, until a release.
                self._idle.wait(now, self._sched.next_ready_time())

    def _finish(self, key: str, slot: Slot) -> None:
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
            self._idle.changed(self._sched.next_ready_time())

    def _queue_robots_hop(self, hop: Task, target: Host, owner: Host) -> None:
        """A cross-host robots.txt hop waits in the target's queue; the owner's is blocked."""
        with self._cond:  # another host's queue: only under the scheduler lock
            self._sched.push_front(target.queue_key, [hop])
            if target.queue_key != owner.queue_key:
                self._sched.block(owner.queue_key)
            self._idle.changed(self._sched.next_ready_time())

    def _delay(self, queue_key: str, host: str | None) -> float:
        """Delay after a request (recrawl.rules.politeness.host_delay); per-IP queues keep the max.
        A host whose Crawl-delay exceeds the cap is deferred before any page request: its
        robots.txt request alone is followed by the longest delay allowed."""
        s = self.settings
        d = s.min_delay_s
        if host is not None:
            rules = self._hosts[host].robots
            if rules is not None:
                d = host_delay(rules.crawl_delay, s.min_delay_s, s.max_crawl_delay_s)
                d = max(s.min_delay_s, s.max_crawl_delay_s) if d is None else d
        d = max(d, self._queue_delay.get(queue_key, 0.0))
        self._queue_delay[queue_key] = d
        return d

    def _defer_host(self, hk: str, err: str) -> None:
        h = self._hosts[hk]
        h.deferred = err
        for t in self._sched.drain(h.queue_key, lambda t, hk=hk: t.host == hk):
            self._task_failed(t, m.RETRY_LATER, err)

    def _defer_queue(self, key: str, err: str) -> None:
        for h in self._hosts:
            if h.queue_key == key and h.deferred is None:
                h.deferred = err
        for t in self._sched.drain(key):
            self._task_failed(t, m.RETRY_LATER, err)

    def _task_failed(self, task: Task, status: str, err: str) -> None:
        """A queued task that will not run: its row, or its robots owner's fate."""
        if task.kind == "page":
            self._rows.page(task, status, error=err)
        elif task.owner is not None and task.owner != task.host:
            # A cross-host robots hop: its owner is blocked on it and must be released.
            owner = self._hosts[task.owner]
            slot = Slot()
            self._robots.unreachable(task.owner, slot, err)
            owner.deferred = owner.deferred or f"robots unreachable: {err}"
            for t in self._sched.drain(owner.queue_key, lambda t, k=owner.key: t.host == k):
                self._task_failed(t, m.RETRY_LATER, owner.deferred)
            for qk in slot.unblock:
                self._sched.unblock(qk)

    # -- one task --------------------------------------------------------------------------
    def _process(self, task: Task) -> Slot:
        h = self._hosts[task.host]
        if h.failure is None and h.deferred is None and h.ip is None:
            self._hosts.resolve(h)
        if h.failure is not None or h.deferred is not None:
            slot = Slot()
            if h.failure is not None:
                slot.fail_hosts.append((h.key, *h.failure))
            else:
                slot.defer.append((h.key, h.deferred or "deferred"))
            if task.kind == "page":
                self._rows.terminal(h, task)
            elif task.owner is not None:
                reason = (h.failure[1] if h.failure else h.deferred) or "failed"
                self._robots.unreachable(task.owner, slot, reason)
            return slot
        own_robots = task.kind == "robots" and task.owner == h.key
        if h.robots is None and not own_robots:
            slot = self._robots.fetch(RobotsFetch.task_for(h))
            slot.front.append(task)
            return slot
        if task.kind == "robots":
            return self._robots.fetch(task)
        return self._pages.fetch(h, task)
