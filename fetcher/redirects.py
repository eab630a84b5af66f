"""Page redirects: which hop to follow, and the row values of a redirect that ends the chain.

A redirect to the *same* host (same scheme, name and port) is followed through the host's own
queue: the next hop goes to the front of the queue and waits the host delay like any request,
so a chain of hops is never a burst. A redirect to *another* host is not followed in this run:
the URL is recorded as ``redirect`` with ``final_url`` the normalized target, and the crawldb
schedules the target under its own host's politeness and robots -- Nutch's behaviour with
``http.redirect.max=0`` for cross-host hops. More than ``max_redirects`` same-host hops give
``redirect`` with error ``too many redirects``; a target already in the chain gives
``redirect`` with error ``loop``. (robots.txt redirects: ``fetcher.robots_fetch``.)
"""

from __future__ import annotations

from typing import Any

from fetcher.http import Exchange
from fetcher.tasks import Task
from fetcher.urls import BadURL, host_key, normalize
from recrawl.content.urlnorm import DEFAULT_RULES, NormalizeRules


def next_hop(task: Task, ex: Exchange, max_redirects: int,
             rules: NormalizeRules = DEFAULT_RULES) -> Task | None:
    """The next same-host hop to follow, or None if the redirect ends the chain here; the
    target normalized with the crawl's `rules`."""
    location = ex.header("Location")
    if not location:
        return None
    try:
        target = normalize(location, task.url, rules)
        target_host = host_key(target)
    except BadURL:
        return None
    chain = [*task.chain, task.url]
    if target in chain or target_host != task.host:
        return None
    if task.hops >= max_redirects:
        return None
    return Task("page", task.host, target, index=task.index, item=task.item,
                hops=task.hops + 1, chain=chain, started_at=task.started_at,
                duration_ms=task.duration_ms)


def redirect_row_values(task: Task, ex: Exchange,
                        rules: NormalizeRules = DEFAULT_RULES) -> dict[str, Any]:
    """``final_url``, ``redirect_chain`` and why not followed, for a redirect ``next_hop``
    refused (no error: a cross-host target, left to the crawldb)."""
    location = ex.header("Location")
    chain = [*task.chain, task.url]
    values: dict[str, Any] = {"redirect_chain": chain}
    if not location:
        values["error"] = "redirect without location"
        values["final_url"] = task.url
        return values
    try:
        target = normalize(location, task.url, rules)
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
