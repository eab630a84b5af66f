"""A CPU-time limit on one block of Python code (the text extraction of one page).

trafilatura's cost is not a function of a page's bytes: on real pages it took 0.1-300 ms, and
portal pages with many small blocks cost the most (docs/scale.md, "Parsing real-world pages"),
so no byte or node cap bounds it. A process CPU timer does: `setitimer(ITIMER_PROF)` sends
SIGPROF after that much CPU, and the handler raises :class:`CpuLimitExceeded` in the code
running on the main thread. Signal handlers can only be set on the main thread, which is where
a Spark Python worker runs its tasks; elsewhere (a thread of the fetch core, say) the limit is
not armed and :func:`cpu_limit` runs the block unbounded (`armed` is False).

The exception derives from BaseException, not Exception, so that an extractor's own
`except Exception` does not swallow it, and the timer keeps firing every 50 ms until the block
ends, in case a bare `except:` does. A raise lands between Python bytecodes: a long C call
(one lxml parse) finishes first, which the byte cap on a page already bounds.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CpuLimitExceeded", "cpu_limit"]

_REFIRE_S = 0.05


class CpuLimitExceeded(BaseException):  # noqa: N818 - reads as a verdict, like KeyboardInterrupt
    """The block used more CPU than its limit."""


class _Guard:
    armed = False


def _raise(signum, frame):
    raise CpuLimitExceeded()


@contextmanager
def cpu_limit(seconds: float) -> Iterator[_Guard]:
    """Raise :class:`CpuLimitExceeded` inside the block once the process has used `seconds` of
    CPU in it. No limit (the block runs as is, ``armed`` False) when `seconds` <= 0, off the
    main thread, where SIGPROF is unavailable, or when another ITIMER_PROF is running (a
    profiler's: it is not ours to replace)."""
    guard = _Guard()
    if (seconds <= 0 or not hasattr(signal, "SIGPROF")
            or threading.current_thread() is not threading.main_thread()
            or signal.getitimer(signal.ITIMER_PROF) != (0.0, 0.0)):
        yield guard
        return
    previous = signal.signal(signal.SIGPROF, _raise)
    guard.armed = True
    try:
        signal.setitimer(signal.ITIMER_PROF, seconds, _REFIRE_S)
        yield guard
    finally:
        _disarm()
        # SIGPROF's default action ends the process: a signal already on its way must not
        # find it, so "no handler" becomes "ignored"
        signal.signal(signal.SIGPROF, signal.SIG_IGN if previous == signal.SIG_DFL else previous)


def _disarm() -> None:
    """Stop the timer, even when it fires (and raises) while being stopped."""
    while True:
        try:
            signal.setitimer(signal.ITIMER_PROF, 0)
            break
        except CpuLimitExceeded:
            continue
