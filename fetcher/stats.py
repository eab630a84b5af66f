"""The fetch step's counts from what its runs measured: statuses, requests, politeness, timing.

One function turns a fetch's outcome into the counts the rounds table records, the metrics
export and the health gates judge (recrawl.rules.gates): the Spark step (spark_jobs.fetch) feeds it
the records its tasks staged, a test of the fetcher core alone feeds it a ``FetchOutcome``
(:func:`outcome_counts`), so both are counted by the same code.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from fetcher.models import FetchOutcome

PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


def percentile(sorted_values: list[int], p: float) -> int:
    """The smallest value with at least ``p`` of the values at or below it (0 when none): what
    Spark's percentile_approx returns, exactly, on data smaller than its accuracy."""
    if not sorted_values:
        return 0
    i = max(0, math.ceil(p * len(sorted_values) - 1e-9) - 1)
    return sorted_values[min(i, len(sorted_values) - 1)]


def request_stats(hosts: Iterable[Mapping[str, Any]],
                  tasks: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Request statistics from the runs' host records (``fetcher.rows.host_rows``; one host may
    come in several, summed) and their timing records (``Fetcher`` stats: elapsed_ms,
    floor_ms): requests, bytes, hosts and those whose robots.txt was unavailable, requests per
    host (p50, p90, p99, max), milliseconds waited on host delays, politeness violations and
    the worst shortfall, the slowest task's time and its politeness floor."""
    by_host: dict[str, dict[str, int]] = {}
    for r in hosts:
        h = by_host.setdefault(r["host"], dict.fromkeys(
            ("requests", "bytes", "wait_ms", "violations", "worst_short_ms",
             "robots_unavailable"), 0))
        for k in ("requests", "bytes", "wait_ms", "violations"):
            h[k] += int(r.get(k) or 0)
        h["worst_short_ms"] = max(h["worst_short_ms"], int(r.get("worst_short_ms") or 0))
        h["robots_unavailable"] = max(h["robots_unavailable"], int(bool(r.get("robots_unavailable"))))
    per_host = sorted(h["requests"] for h in by_host.values())
    out = {
        "hosts": len(by_host),
        "requests": sum(per_host),
        "bytes": sum(h["bytes"] for h in by_host.values()),
        "politeness_wait_ms": sum(h["wait_ms"] for h in by_host.values()),
        "politeness_violations": sum(h["violations"] for h in by_host.values()),
        "politeness_worst_short_ms": max((h["worst_short_ms"] for h in by_host.values()),
                                         default=0),
        "robots_unavailable_hosts": sum(h["robots_unavailable"] for h in by_host.values()),
        "requests_per_host_max": per_host[-1] if per_host else 0,
        "task_max_ms": 0,
        "polite_floor_ms": 0,
    }
    for t in tasks:
        out["task_max_ms"] = max(out["task_max_ms"], int(t.get("elapsed_ms") or 0))
        out["polite_floor_ms"] = max(out["polite_floor_ms"], int(t.get("floor_ms") or 0))
    for name, p in PERCENTILES:
        out[f"requests_per_host_{name}"] = percentile(per_host, p)
    return out


def step_counts(statuses: Mapping[str, int], hosts: Iterable[Mapping[str, Any]],
                tasks: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The fetch step's counts the gates judge: URLs per fetch status, ``urls`` (their sum)
    and :func:`request_stats`."""
    counts = {s: int(n) for s, n in statuses.items()}
    counts["urls"] = sum(counts.values())
    counts.update(request_stats(hosts, tasks))
    return counts


def outcome_counts(outcomes: Iterable[FetchOutcome]) -> dict[str, int]:
    """:func:`step_counts` of fetcher runs (one per task), without Spark."""
    outcomes = list(outcomes)
    statuses = Counter(r["fetch_status"] for o in outcomes for r in o.rows)
    return step_counts(statuses, (h for o in outcomes for h in o.hosts),
                       (o.stats for o in outcomes))
