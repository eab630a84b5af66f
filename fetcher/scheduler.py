"""Politeness scheduler: Mercator back queues ordered by a min-heap of next allowed times.

Every politeness key (``scheme://host:port``, or the IP address in per-IP mode) owns one FIFO
back queue (Heydon & Najork, "Mercator", 1999; Nutch's ``FetchItemQueues``). A queue is in the
heap only while it has work, is not in flight and is not blocked, keyed by the earliest time its
next request may start. Workers pop the queue with the smallest time once that time has come,
which gives the two politeness guarantees of docs/design.md:

* at most one request in flight per key (a popped queue is out of the heap until released);
* the next request starts no sooner than ``delay`` after the previous response *ended*
  (``release`` is called with the end time; Mercator and Nutch measure from the end too,
  Scrapy's ``DOWNLOAD_DELAY`` from the start).

Failures push the next start further out by exponential back-off, a ``Retry-After`` pauses the
whole queue, and the time budget stops queues from starting a request that could not finish:
a request starts only if ``now + request_deadline <= budget_end``.

The class is pure bookkeeping over times passed in by the caller -- no clock, no threads, no
I/O -- so its tests drive it with a fake clock; the fetcher wraps it in a condition variable.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

T = TypeVar("T")

#: What a finished slot did: ``ok`` a request that succeeded (resets the failure count),
#: ``fail`` a failed request (connect error, timeout, 5xx: counts towards back-off), ``none``
#: no request at all (e.g. robots-denied URL: the host's next allowed time is unchanged).
Result = Literal["ok", "fail", "none"]


@dataclass
class HostQueue(Generic[T]):
    """One back queue and its politeness state."""

    key: str
    tasks: deque[T] = field(default_factory=deque)
    next_allowed: float = 0.0
    in_flight: bool = False
    blocked: bool = False
    consecutive_failures: int = 0
    requests: int = 0
    last_end: float | None = None
    paused_until: float | None = None
    #: Time of this queue's live heap entry, None when it has none (lazy deletion).
    heap_time: float | None = None


class Scheduler(Generic[T]):
    """Back queues plus the heap; all times are in the caller's (monotonic) clock."""

    def __init__(
        self,
        *,
        budget_end: float,
        request_deadline: float,
        backoff_base: float = 2.0,
    ) -> None:
        self.budget_end = budget_end
        self.request_deadline = request_deadline
        self.backoff_base = backoff_base
        self._queues: dict[str, HostQueue[T]] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._in_flight = 0

    # -- adding work ---------------------------------------------------------------------
    def queue(self, key: str) -> HostQueue[T]:
        """The queue for ``key``, created empty on first use."""
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = HostQueue(key)
        return q

    def queues(self) -> list[HostQueue[T]]:
        """All queues ever created, in creation order."""
        return list(self._queues.values())

    def add(self, key: str, task: T) -> None:
        """Append ``task`` to the back of ``key``'s queue."""
        q = self.queue(key)
        q.tasks.append(task)
        self._push(q)

    def push_front(self, key: str, tasks: Iterable[T]) -> None:
        """Put ``tasks`` (in order) at the front of the queue: continuations of a slot's work."""
        q = self.queue(key)
        q.tasks.extendleft(reversed(list(tasks)))
        self._push(q)

    def hold(self, key: str, until: float) -> None:
        """No request of ``key`` starts before ``until`` (e.g. a re-run after a crash)."""
        q = self.queue(key)
        if until > q.next_allowed:
            q.next_allowed = until
            self._push(q)

    # -- taking work ---------------------------------------------------------------------
    def can_start(self, at: float) -> bool:
        """Whether a request starting at ``at`` would end within the budget."""
        return at + self.request_deadline <= self.budget_end

    def pop_ready(self, now: float) -> tuple[str, T] | None:
        """Take the next task of the queue that is due soonest, if it is due and in budget.

        The queue is then in flight until :meth:`release`: no other task of it is handed out.
        """
        top = self._top()
        if top is None or top[0] > now or not self.can_start(now):
            return None
        heapq.heappop(self._heap)
        q = self._queues[top[2]]
        q.heap_time = None
        q.in_flight = True
        self._in_flight += 1
        return q.key, q.tasks.popleft()

    def next_ready_time(self) -> float | None:
        """When the soonest queue becomes due; None if no queue can start within the budget."""
        top = self._top()
        if top is None or not self.can_start(top[0]):
            return None
        return top[0]

    @property
    def in_flight(self) -> int:
        """Number of queues currently handed out to a worker."""
        return self._in_flight

    def finished(self, now: float) -> bool:
        """True when nothing is in flight and no queue can start again within the budget."""
        if self._in_flight:
            return False
        t = self.next_ready_time()
        return t is None or not self.can_start(max(t, now))

    # -- giving the slot back --------------------------------------------------------------
    def release(
        self,
        key: str,
        end: float,
        *,
        delay: float,
        result: Result = "ok",
        pause_until: float | None = None,
    ) -> HostQueue[T]:
        """Return ``key``'s slot after a request that ended at ``end``.

        The next request may start at ``end + delay``; after a failure at
        ``end + max(delay, backoff_base * 2**(failures-1))``; never before ``pause_until``
        (Retry-After). With ``result="none"`` no request was made and the previous next
        allowed time stands.
        """
        q = self._queues[key]
        if q.in_flight:
            q.in_flight = False
            self._in_flight -= 1
        if result != "none":
            q.requests += 1
            q.last_end = end
            wait = delay
            if result == "fail":
                q.consecutive_failures += 1
                wait = max(delay, self.backoff_base * 2 ** (q.consecutive_failures - 1))
            else:
                q.consecutive_failures = 0
            q.next_allowed = end + wait
        if pause_until is not None and pause_until > q.next_allowed:
            q.next_allowed = pause_until
            q.paused_until = pause_until
        self._push(q)
        return q

    def block(self, key: str) -> None:
        """Keep ``key`` out of the heap (its robots.txt is being fetched through another host)."""
        self.queue(key).blocked = True

    def unblock(self, key: str) -> None:
        """Let ``key`` be scheduled again at its next allowed time."""
        q = self.queue(key)
        q.blocked = False
        self._push(q)

    # -- removing work -------------------------------------------------------------------
    def drain(self, key: str, pred: Callable[[T], bool] | None = None) -> list[T]:
        """Remove and return the queued tasks of ``key`` (those matching ``pred``, if given)."""
        q = self._queues.get(key)
        if q is None:
            return []
        if pred is None:
            out = list(q.tasks)
            q.tasks.clear()
        else:
            out = [t for t in q.tasks if pred(t)]
            q.tasks = deque(t for t in q.tasks if not pred(t))
        return out

    def drain_all(self) -> list[tuple[str, T]]:
        """Remove and return every queued task (end of run: what the budget did not reach)."""
        out: list[tuple[str, T]] = []
        for q in self._queues.values():
            out.extend((q.key, t) for t in q.tasks)
            q.tasks.clear()
            q.heap_time = None
        self._heap.clear()
        return out

    # -- heap internals ------------------------------------------------------------------
    @staticmethod
    def _eligible(q: HostQueue[T]) -> bool:
        return bool(q.tasks) and not q.in_flight and not q.blocked

    def _push(self, q: HostQueue[T]) -> None:
        if self._eligible(q) and q.heap_time != q.next_allowed:
            q.heap_time = q.next_allowed
            heapq.heappush(self._heap, (q.next_allowed, next(self._seq), q.key))

    def _top(self) -> tuple[float, int, str] | None:
        """The heap's smallest live entry; stale ones (lazy deletion) are discarded."""
        while self._heap:
            t, _, key = self._heap[0]
            q = self._queues[key]
            if t == q.heap_time:
                if self._eligible(q):
                    return self._heap[0]
                q.heap_time = None
            heapq.heappop(self._heap)
        return None
