"""Faults laid over chosen hosts at run time: a web made to trip a health gate, then fixed.

``SimWeb.set_fault(hosts, Fault(...))`` makes those hosts misbehave until ``clear_faults()``;
the hosts themselves (their pages, links and ground truth) do not change, only what the server
answers. Each fault is one way a real site fails the crawl (recrawl.rules.gates, docs/operators.md):

* ``robots_status``: robots.txt answers this status (5xx: RFC 9309 says assume complete
  disallow, so nothing else of the host is fetched; the robots_unavailable gate);
* ``status``: every other path answers this status with a small HTML body (5xx: the
  error_share gate);
* ``delay``: every other path answers after this many seconds (server-side slowness; longer
  than the crawler's read timeout, a timeout: error_share and, through the failure back-off,
  the throughput gate).
"""

from __future__ import annotations

from dataclasses import dataclass

from simweb.host import Host
from simweb.response import Request, Response, html


@dataclass(frozen=True)
class Fault:
    """How a faulty host answers (None / 0: as it normally would)."""

    robots_status: int | None = None
    status: int | None = None
    delay: float = 0.0

    def respond(self, host: Host, req: Request) -> Response:
        """The faulty answer to ``req`` on ``host``."""
        if req.path == "/robots.txt":
            if self.robots_status is not None:
                return html(f"<h1>{self.robots_status}</h1>", self.robots_status)
            return host.respond(req)
        resp = (html(f"<h1>Error {self.status}</h1>", self.status) if self.status is not None
                else host.respond(req))
        if self.delay:
            resp.delay = max(resp.delay, self.delay)
        return resp
