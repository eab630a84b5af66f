"""Politeness and robots compliance, judged from the server's request log.

The crawler's own counters can lie (a bug that fires two requests also miscounts them); the
server's timestamps cannot. Semantics follow the design doc: per host, never two requests in
flight, and the next request starts no sooner than the host's delay after the previous response
was completely sent (Mercator/Nutch: delay measured from the end, not the start). Robots
decisions are checked with simweb's own matcher, independent of the crawler's Protego.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from simweb.response import parse_http_date
from simweb.truth import DEFAULT_TOKEN, Truth
from simweb.web import CONTROL_HOST

ROBOTS500 = "robots500.sim.test"


def by_host(log: Iterable[dict]) -> dict[str, list[dict]]:
    """Log entries per host (control host excluded), each list sorted by start time."""
    hosts: dict[str, list[dict]] = defaultdict(list)
    for entry in log:
        if entry.get("host") != CONTROL_HOST:
            hosts[entry.get("host", "")].append(entry)
    for entries in hosts.values():
        entries.sort(key=lambda e: e["start"])
    return dict(hosts)


def _what(e: dict) -> str:
    return f"{e['method']} {e['path']} (status {e['status']})"


def politeness_violations(
    log: Iterable[dict],
    min_delay: float,
    crawl_delays: dict[str, float] | None = None,
    tolerance: float = 0.05,
) -> list[str]:
    """Overlapping requests and too-short gaps, per host.

    Args:
        log: request records (``SimWeb.request_log()`` or the JSON-lines file).
        min_delay: the crawler's configured default delay between requests to one host.
        crawl_delays: robots Crawl-delay per host (e.g. ``truth.crawl_delays()``, capped by the
            caller at the crawler's maximum); the larger of the two applies.
        tolerance: seconds of slack for clock and scheduling jitter.
    Returns:
        One human-readable line per violation; empty when polite.
    """
    crawl_delays = crawl_delays or {}
    out: list[str] = []
    for host, entries in by_host(log).items():
        delay = max(min_delay, crawl_delays.get(host, 0.0))
        busy_until: float | None = None
        prev: dict | None = None
        for e in entries:
            if prev is not None and busy_until is not None:
                if e["start"] < busy_until:
                    out.append(
                        f"{host}: {_what(e)} started {busy_until - e['start']:.3f}s "
                        f"before {_what(prev)} finished (two requests in flight)"
                    )
                elif e["start"] - busy_until < delay - tolerance:
                    out.append(
                        f"{host}: {_what(e)} started {e['start'] - busy_until:.3f}s after "
                        f"the previous response ended; delay is {delay:g}s"
                    )
            if busy_until is None or e["end"] >= busy_until:
                busy_until, prev = e["end"], e
    return out


def politeness_floor(
    log: Iterable[dict], min_delay: float, crawl_delays: dict[str, float] | None = None
) -> float:
    """The shortest time in which a polite crawler could have made these requests: per host,
    the responses' own durations plus the delay between consecutive ones (one connection per
    host, delay counted from the end), and the slowest host sets the floor. Benchmarks print
    it beside a fetch's wall time; Retry-After waits are not included."""
    crawl_delays = crawl_delays or {}
    floor = 0.0
    for host, entries in by_host(log).items():
        delay = max(min_delay, crawl_delays.get(host, 0.0))
        busy = sum(max(0.0, x["end"] - x["start"]) for x in entries)
        floor = max(floor, busy + delay * (len(entries) - 1))
    return floor


def retry_after_violations(log: Iterable[dict], tolerance: float = 0.05) -> list[str]:
    """Requests to a host sooner than a 429/503 ``Retry-After`` allowed (whole host waits)."""
    out: list[str] = []
    for host, entries in by_host(log).items():
        not_before: float | None = None
        for e in entries:
            if not_before is not None and e["start"] < not_before - tolerance:
                out.append(
                    f"{host}: {_what(e)} started {not_before - e['start']:.3f}s before "
                    "Retry-After expired"
                )
            value = e.get("retry_after")
            if value and e["status"] in (429, 503):
                if value.strip().isdigit():
                    not_before = max(not_before or 0.0, e["end"] + int(value))
                elif (when := parse_http_date(value)) is not None:
                    not_before = max(not_before or 0.0, when.timestamp())
    return out


def robots_violations(
    log: Iterable[dict], truth: Truth, ua_token: str = DEFAULT_TOKEN
) -> list[str]:
    """Requests made before robots.txt was read, to disallowed paths, or to a host whose
    robots.txt answered 5xx. Hosts unknown to the world (e.g. 127.0.0.1) are skipped; see
    :func:`foreign_host_requests`."""
    out: list[str] = []
    known = set(truth.hosts())
    for host, entries in by_host(log).items():
        if host not in known:
            continue
        robots_end: float | None = None
        for e in entries:
            path = e["path"]
            url = path if path.startswith("http") else f"http://{host}{path}"
            if truth.is_robots_path(url):
                if robots_end is None:
                    robots_end = e["end"]
                continue
            if robots_end is None or e["start"] < robots_end:
                out.append(f"{host}: {_what(e)} before robots.txt was read")
            if host == ROBOTS500:
                out.append(f"{host}: {_what(e)} although robots.txt answered 500")
            elif truth.disallowed(url, ua_token):
                out.append(f"{host}: {_what(e)} is disallowed for {ua_token}")
    return out


def foreign_host_requests(log: Iterable[dict], truth: Truth) -> list[str]:
    """Requests for hosts that are not sim hosts: a followed SSRF-bait redirect or a bad URL."""
    known = set(truth.hosts()) | {CONTROL_HOST}
    return [
        f"{e.get('host') or '(no host)'}: {_what(e)} is not a sim host"
        for e in log
        if e.get("host") not in known
    ]
