"""Health gates: checks after the fetch step and at the end of a round that fail the step (and
so its Airflow task) with one line naming the reason.

Each gate is a pure function of the step's counts (the ones the rounds table records) and the
`[gates]` settings, returning None when healthy and the failure line otherwise; docs/operators.md
has a runbook entry per gate. The app's step runner (app/cli.run_step) records every gate's
result in the round's row and raises GateFailed for the first failure; the step is then not
done, so the next `crawler round` runs it again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Counts = Mapping[str, int]

# Fetch statuses that are errors (the site or the network failed us), for the error share.
ERROR_STATUSES = ("http_error", "timeout", "dns_error", "connect_error")


class GateFailed(RuntimeError):
    """A health gate failed a step; the message is the one line naming the reason."""

    def __init__(self, step: str, gate: str, line: str) -> None:
        super().__init__(f"health gate {step}.{gate} failed: {line}")
        self.step, self.gate, self.line = step, gate, line


def politeness(c: Counts, g: Mapping) -> str | None:
    """Never allowed: a request that started closer than its host's delay to the previous
    response's end (the fetcher measures every gap, fetcher.client)."""
    n = int(c.get("politeness_violations", 0))
    if n > 0:
        return (f"{n} request(s) started sooner than their host's delay after the previous "
                f"response (worst by {c.get('politeness_worst_short_ms', 0)} ms)")
    return None


def no_pages(c: Counts, g: Mapping) -> str | None:
    """A fetch list with URLs of which none was fetched (or found not modified)."""
    urls = int(c.get("urls", 0))
    ok = int(c.get("fetched", 0)) + int(c.get("not_modified", 0))
    if urls > 0 and ok == 0:
        return f"no page fetched: 0 of {urls} URLs fetched or not modified"
    return None


def error_share(c: Counts, g: Mapping) -> str | None:
    """Errors (http_error, timeout, dns_error, connect_error) over the URLs attempted (not
    skipped for the budget), above `gates.max_error_share`."""
    attempted = int(c.get("urls", 0)) - int(c.get("skipped_budget", 0))
    errors = sum(int(c.get(s, 0)) for s in ERROR_STATUSES)
    limit = float(g["max_error_share"])
    if attempted >= int(g["min_urls"]) and errors > limit * attempted:
        kinds = ", ".join(f"{s} {c[s]}" for s in ERROR_STATUSES if c.get(s))
        return (f"error share {errors / attempted:.0%} of {attempted} URLs ({kinds}) "
                f"above gates.max_error_share {limit:.0%}")
    return None


def robots_unavailable(c: Counts, g: Mapping) -> str | None:
    """Hosts whose robots.txt was unavailable (5xx, unreachable: nothing else fetched from
    them) over the round's hosts, above `gates.max_robots_unavailable_share`."""
    hosts = int(c.get("hosts", 0))
    bad = int(c.get("robots_unavailable_hosts", 0))
    limit = float(g["max_robots_unavailable_share"])
    if hosts >= int(g["min_hosts"]) and bad > limit * hosts:
        return (f"robots.txt unavailable on {bad} of {hosts} hosts ({bad / hosts:.0%}) "
                f"above gates.max_robots_unavailable_share {limit:.0%}")
    return None


def throughput(c: Counts, g: Mapping) -> str | None:
    """The slowest fetch task took far longer than the hosts' delays required: its time over
    its politeness floor (requests back to back at each host's delay, threads busy) below
    `gates.min_throughput_share`, judged only for tasks longer than
    `gates.throughput_min_s` (a short fetch is bound by its few hosts, not throughput)."""
    took = int(c.get("task_max_ms", 0)) / 1000
    floor = int(c.get("polite_floor_ms", 0)) / 1000
    share = float(g["min_throughput_share"])
    if took > float(g["throughput_min_s"]) and floor < share * took:
        return (f"throughput {floor / took:.0%} of the politeness limit: the slowest task took "
                f"{took:.0f} s where the hosts' delays allowed {floor:.0f} s "
                f"(below gates.min_throughput_share {share:.0%})")
    return None


def round_pages(c: Counts, g: Mapping) -> str | None:
    """End of the round: responses with a payload were fetched, yet parse kept none of them.
    An unchanged payload is stored as a revisit record with nothing to parse: a round whose
    every fetch found its page unchanged parsed nothing and is healthy (`parse.responses`
    counts the others; rounds recorded before it fall back to every fetched URL)."""
    fetched = int(c.get("parse.responses", c.get("fetch.fetched", 0)))
    parsed = int(c.get("parse.pages", 0))
    if fetched > 0 and parsed == 0:
        return f"{fetched} pages fetched, none parsed"
    return None


Gate = Callable[[Counts, Mapping], "str | None"]
# Gates per step, in the order they are checked; "round" gates run after the round's last
# step, over the whole round's counts (`<step>.<key>`).
GATES: dict[str, tuple[tuple[str, Gate], ...]] = {
    "fetch": (("politeness", politeness), ("no_pages", no_pages), ("error_share", error_share),
              ("robots_unavailable", robots_unavailable), ("throughput", throughput)),
    "round": (("pages_parsed", round_pages),),
}


def check(step: str, counts: Counts, settings: Mapping) -> dict[str, str]:
    """Every enabled gate of `step` over `counts`: gate -> "ok" or its failure line.

    `settings` is the `[gates]` section; a gate named in `disabled` is skipped (the
    politeness gate cannot be: a politeness violation is never allowed)."""
    off = set(settings.get("disabled", ())) - {"politeness"}
    out = {}
    for name, gate in GATES.get(step, ()):
        if name not in off:
            out[name] = gate(counts, settings) or "ok"
    return out


def first_failure(results: Mapping[str, str]) -> str | None:
    """The first gate in `results` that failed, or None."""
    return next((g for g, r in results.items() if r != "ok"), None)
