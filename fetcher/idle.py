"""How a fetch run's idle workers wait for the politeness scheduler.

Workers that find no queue due wait under the scheduler's lock. If all of them slept until the
soonest due time and every release woke them all (one condition, ``notify_all``), each request
would wake every idle thread to find one task: at 32 threads and ~500 requests a second per
task that was ~77 context switches per request, half a core of kernel time in a fetch task
that should be waiting on sockets. Instead one idle worker holds the *timer*: it sleeps until
the soonest queue is due, or until a change to the scheduler makes something due sooner; the
others are *spares* and sleep until the timer is handed on, which happens when the timer's
holder takes a task. A burst of due queues thus wakes one worker per task, in a chain.

Every wait is at most a second, so a missed wake-up would cost at most that, never a hang.
The class holds no scheduler state: the caller passes the due time it read under the lock.
"""

from __future__ import annotations

import math
import threading

__all__ = ["IdleWorkers"]

MAX_WAIT_S = 1.0


class IdleWorkers:
    """The timer and the spares, on two conditions sharing the scheduler's lock; every method
    is called with that lock held."""

    def __init__(self, lock: threading.Lock | threading.RLock) -> None:
        self._timer = threading.Condition(lock)
        self._spare = threading.Condition(lock)
        self._timed = False  # an idle worker holds the timer
        self._until = math.inf  # when it means to wake
        self._spares = 0

    def wait(self, now: float, due: float | None) -> None:
        """Wait as an idle worker that found nothing due at ``now``; ``due`` is when the soonest
        queue becomes due (None: none can start now). Returns to let the caller look again."""
        if self._timed:
            self._spares += 1
            try:
                self._spare.wait(MAX_WAIT_S)
            finally:
                self._spares -= 1
            return
        wait = min(MAX_WAIT_S, due - now) if due is not None and due > now else MAX_WAIT_S
        self._timed, self._until = True, now + wait
        try:
            self._timer.wait(wait)
        finally:
            self._timed, self._until = False, math.inf

    def took(self) -> None:
        """A worker leaves with a task: if no idle worker holds the timer, a spare takes it (it
        may also find a second queue due already)."""
        if not self._timed and self._spares:
            self._spare.notify()

    def changed(self, due: float | None) -> None:
        """The scheduler changed (a release, a queue put back or unblocked): the timer's holder
        wakes if the soonest due time ``due`` is before it means to, or if nothing is due any
        more (the run may be over)."""
        if self._timed and (due is None or due < self._until):
            self._timer.notify()

    def wake_all(self) -> None:
        """The run is over: every idle worker looks once more and leaves."""
        self._timer.notify_all()
        self._spare.notify_all()
