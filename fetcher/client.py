"""One request of the run: our headers, a deadline within the time budget, the body caps.

Politeness is not decided here -- the scheduler has already given the worker the host's slot;
this only makes the request on the host's connection and counts it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fetcher.hosts import Host
from fetcher.http import Exchange, perform
from fetcher.robots import request_target
from fetcher.settings import FetchSettings
from recrawl.rules.politeness import host_delay

# Seconds of slack in the politeness measure (clock rounding only; see Client._measure).
GAP_TOLERANCE_S = 0.001
ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"
# No "br": warcio 1.8.1 cannot decode brotli with the Brotli (Google) module this project pins
# (webrecorder/warcio#73: it expects brotlipy), so br captures could be neither checked nor
# parsed. A server must not use a coding we did not accept (RFC 9110 12.5.3); if one does, the
# bomb guard still decodes br to measure it.
ACCEPT_ENCODING = "gzip, deflate"


class Client:
    """Makes the run's requests; every one ends by its deadline, hence by the budget's end."""

    def __init__(self, settings: FetchSettings, *, clock: Callable[[], float],
                 wallclock: Callable[[], float], budget_end: float) -> None:
        self.settings = settings
        self.clock = clock
        self.wallclock = wallclock
        self.budget_end = budget_end

    def headers(self, h: Host) -> dict[str, str]:
        """The headers of every request to ``h`` (callers add conditional ones)."""
        assert h.conn is not None
        return {
            "Host": h.conn.host_header,
            "User-Agent": self.settings.user_agent,
            "Accept": ACCEPT,
            "Accept-Encoding": ACCEPT_ENCODING,
        }

    def deadline(self) -> float:
        return min(self.clock() + self.settings.request_deadline_s, self.budget_end)

    def get(self, h: Host, url: str, headers: dict[str, str], **kwargs: Any) -> Exchange:
        """GET ``url`` on ``h``'s connection (``kwargs``: ``keep_decoded``, ``want_body``)."""
        assert h.conn is not None
        s = self.settings
        ex = perform(h.conn, url, request_target(url), headers, clock=self.clock,
                     wallclock=self.wallclock, deadline=self.deadline(),
                     max_body=s.max_body_bytes, max_decoded=s.max_decompressed_bytes, **kwargs)
        h.requests += 1
        self._measure(h, ex)
        return ex

    def _measure(self, h: Host, ex: Exchange) -> None:
        """Keep the host's request statistics; a gap shorter than its delay is a violation.

        The delay runs from the previous response's end (ex.end, the time the scheduler
        releases the queue with) to this request's start, as simweb's audit judges it. The
        same monotonic clock and a worker taking the queue no earlier than end + delay make a
        shortfall impossible unless politeness is broken, so the tolerance only absorbs
        floating-point rounding.
        """
        s = self.settings
        if h.last_end is not None:
            gap = ex.start - h.last_end
            h.waited_s += max(0.0, gap)
            delay = s.min_delay_s
            if h.robots is not None:
                delay = host_delay(h.robots.crawl_delay, s.min_delay_s, s.max_crawl_delay_s) \
                    or max(s.min_delay_s, s.max_crawl_delay_s)
            short = delay - gap
            if short > GAP_TOLERANCE_S:
                h.violations += 1
                h.worst_short_s = max(h.worst_short_s, short)
        h.last_end = ex.end
        h.busy_s += max(0.0, ex.end - ex.start)
        h.bytes += len(ex.head) + len(ex.body)
