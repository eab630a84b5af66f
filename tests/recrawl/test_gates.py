"""The health gates (recrawl.rules.gates): each one over a table of counts, at the defaults."""

from __future__ import annotations

import pytest

from recrawl.config import load_config
from recrawl.rules import gates

GATES = dict(load_config(environ={}).section("gates"))
# a healthy fetch: 100 URLs on 10 hosts, a few errors, polite, as fast as the delays allow
HEALTHY = {"urls": 100, "fetched": 80, "not_modified": 10, "timeout": 3, "http_error": 2,
           "robots_denied": 5, "hosts": 10, "robots_unavailable_hosts": 1,
           "politeness_violations": 0, "task_max_ms": 600_000, "polite_floor_ms": 400_000}


@pytest.mark.parametrize("gate, change, trips", [
    ("politeness", {}, False),
    ("politeness", {"politeness_violations": 1, "politeness_worst_short_ms": 120}, True),
    ("no_pages", {}, False),
    ("no_pages", {"fetched": 0, "not_modified": 0}, True),
    ("no_pages", {"fetched": 0, "not_modified": 1}, False),  # a 304 is a fetch that worked
    ("no_pages", {"urls": 0, "fetched": 0, "not_modified": 0}, False),  # nothing was due
    ("error_share", {"timeout": 46}, False),  # 48 errors of 100: at most half
    ("error_share", {"timeout": 49}, True),   # 51 of 100
    ("error_share", {"timeout": 49, "skipped_budget": 60}, True),  # of the URLs attempted
    ("error_share", {"urls": 10, "timeout": 9, "fetched": 1}, False),  # too few to judge
    ("robots_unavailable", {"robots_unavailable_hosts": 5}, False),
    ("robots_unavailable", {"robots_unavailable_hosts": 6}, True),
    ("robots_unavailable", {"hosts": 4, "robots_unavailable_hosts": 4}, False),  # too few hosts
    ("throughput", {"polite_floor_ms": 30_001}, False),
    ("throughput", {"polite_floor_ms": 29_000}, True),  # under 5 % of 600 s
    ("throughput", {"task_max_ms": 200_000, "polite_floor_ms": 0}, False),  # a short fetch
])
def test_fetch_gate_cases(gate, change, trips):
    results = gates.check("fetch", {**HEALTHY, **change}, GATES)
    assert list(results) == ["politeness", "no_pages", "error_share", "robots_unavailable",
                             "throughput"]
    assert (results[gate] != "ok") is trips, results[gate]
    others = {g: r for g, r in results.items() if g != gate}
    assert set(others.values()) == {"ok"}
    assert gates.first_failure(results) == (gate if trips else None)


def test_failure_lines_name_the_reason():
    r = gates.check("fetch", {**HEALTHY, "timeout": 49}, GATES)["error_share"]
    assert r.startswith("error share 51% of 100 URLs") and "(http_error 2, timeout 49)" in r
    r = gates.check("fetch", {**HEALTHY, "politeness_violations": 2,
                              "politeness_worst_short_ms": 80}, GATES)["politeness"]
    assert "2 request(s)" in r and "80 ms" in r
    err = gates.GateFailed("fetch", "no_pages", "no page fetched: 0 of 3 URLs")
    assert str(err) == "health gate fetch.no_pages failed: no page fetched: 0 of 3 URLs"


def test_round_gate_and_disabled_gates():
    ok = {"fetch.fetched": 5, "parse.pages": 5}
    assert gates.check("round", ok, GATES) == {"pages_parsed": "ok"}
    assert gates.check("round", {"fetch.fetched": 5}, GATES)["pages_parsed"] == \
        "5 pages fetched, none parsed"
    # every fetch found its page unchanged (revisit records: nothing to parse): healthy
    unchanged = {"fetch.fetched": 5, "parse.responses": 0, "parse.pages": 0}
    assert gates.check("round", unchanged, GATES) == {"pages_parsed": "ok"}
    assert gates.check("round", {**unchanged, "parse.responses": 2}, GATES)["pages_parsed"] == \
        "2 pages fetched, none parsed"
    assert gates.check("parse", ok, GATES) == {}  # steps without gates
    off = {**GATES, "disabled": ("error_share", "politeness")}
    results = gates.check("fetch", {**HEALTHY, "timeout": 49, "politeness_violations": 1}, off)
    assert "error_share" not in results
    assert results["politeness"] != "ok"  # never allowed: it cannot be turned off
