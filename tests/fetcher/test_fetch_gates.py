"""Each fetch health gate (recrawl.rules.gates) fires on a simulated web made to trip it, and passes
on the web once fixed: the real fetcher core (no Spark) over simweb, its outcome counted by
the function the Spark step counts with (fetcher.stats), judged by recrawl.rules.gates.check.

The web is six normal sites; simweb.faults breaks chosen hosts for one test. Gate thresholds
are the defaults except the throughput gate's, scaled from a 5-minute task to a seconds-long
one (see THROUGHPUT). The one Spark-level gate test is in tests/spark_jobs/test_round_e2e.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import fetcher.run
from fetcher import Fetcher, FetchItem
from fetcher.client import Client
from fetcher.stats import outcome_counts
from recrawl.config import load_config
from recrawl.rules import gates
from simweb import Fault, SimWeb, audit
from tests.fetcher.conftest import local_settings

# site1 asks for Crawl-delay: 1 (simweb.site): left out, it would make every run seconds long
SITES = [f"site{i}.sim.test" for i in (0, 2, 3, 4, 5, 6)]
SETTINGS = local_settings(min_delay_s=0.05, backoff_base_s=0.1, connect_timeout_s=1.0,
                          read_timeout_s=0.6, request_deadline_s=1.5, time_budget_s=30.0,
                          threads=8)
# The throughput gate judges tasks over 300 s at the defaults; here tasks of seconds, and a
# share a failure back-off of a few seconds falls under (a slow host within its read timeout
# keeps ~90 %: its time is in the floor).
THROUGHPUT = {"throughput_min_s": 1.0, "min_throughput_share": 0.3}
GATES = {**load_config(environ={}).section("gates"), **THROUGHPUT}
ALL = ["politeness", "no_pages", "error_share", "robots_unavailable", "throughput"]


@pytest.fixture(scope="module")
def web():
    with SimWeb(seed=11, n_sites=7, pages_per_site=4) as w:
        yield w


@pytest.fixture()
def broken(web):
    """The web; whatever faults a test sets are cleared after it."""
    yield web
    web.clear_faults()


def items(web: SimWeb) -> list[FetchItem]:
    return [FetchItem(u) for h in SITES for u in web.truth.pages(h)]


def fetch(web: SimWeb, tmp_path, settings=SETTINGS) -> tuple[dict, dict]:
    """One real fetch of the sites: (step counts, gate results)."""
    out = Fetcher(settings, str(tmp_path), "gates").run(items(web))
    counts = outcome_counts([out])
    return counts, gates.check("fetch", counts, GATES)


def only(results: dict, gate: str) -> str:
    """The line of `gate`, asserting it is the one gate that failed."""
    assert {g: r for g, r in results.items() if g != gate} == dict.fromkeys(
        [g for g in ALL if g != gate], "ok"), results
    assert results[gate] != "ok" and gates.first_failure(results) == gate
    return results[gate]


def test_the_healthy_web_passes_every_gate(web, tmp_path):
    counts, results = fetch(web, tmp_path)
    assert results == dict.fromkeys(ALL, "ok")
    assert counts["urls"] == len(items(web)) >= GATES["min_urls"]
    assert counts["hosts"] == len(SITES) >= GATES["min_hosts"]
    assert counts["fetched"] > 0 and counts["politeness_violations"] == 0
    assert counts["requests"] >= counts["fetched"] + len(SITES)  # robots.txt too


def test_no_pages_when_no_host_is_reachable(web, tmp_path):
    # the sim hosts resolve to an address the crawl may not contact: every URL connect_error
    down = replace(SETTINGS, static_hosts={"*.sim.test": "127.0.0.2"})
    counts, results = fetch(web, tmp_path, down)
    assert results["no_pages"] == f"no page fetched: 0 of {counts['urls']} URLs fetched or not modified"
    assert gates.first_failure(results) == "no_pages"


def test_error_share_on_hosts_answering_500_and_timing_out(broken, tmp_path):
    broken.set_fault(SITES[:3], Fault(status=500))
    broken.set_fault(SITES[3:5], Fault(delay=2.0))  # beyond the read timeout
    counts, results = fetch(broken, tmp_path)
    line = only(results, "error_share")
    assert counts["http_error"] >= 6 and counts["timeout"] >= 4
    assert line.startswith("error share ") and "above gates.max_error_share 50%" in line
    assert f"http_error {counts['http_error']}, timeout {counts['timeout']}" in line
    broken.clear_faults()  # fixed: the same check passes
    assert fetch(broken, tmp_path / "fixed")[1] == dict.fromkeys(ALL, "ok")


def test_robots_unavailable_on_hosts_whose_robots_txt_answers_5xx(broken, tmp_path):
    broken.set_fault(SITES[:4], Fault(robots_status=503))
    counts, results = fetch(broken, tmp_path)
    line = only(results, "robots_unavailable")
    assert line == (f"robots.txt unavailable on 4 of {len(SITES)} hosts (67%) above "
                    "gates.max_robots_unavailable_share 50%")
    assert counts["robots_unavailable_hosts"] == 4 and counts["fetched"] > 0


def test_throughput_on_a_host_slower_than_the_read_timeout(broken, tmp_path):
    # A slow host within the read timeout: its time is in the politeness floor, the gate
    # passes. Slower than the timeout: two timeouts and a failure back-off between them, time
    # the hosts' delays did not ask for: the gate fails.
    slow = replace(SETTINGS, backoff_base_s=5.0, host_failure_limit=2)
    broken.set_fault(SITES, Fault(delay=0.3))
    counts, results = fetch(broken, tmp_path / "within", slow)
    assert counts["task_max_ms"] > GATES["throughput_min_s"] * 1000  # judged, and passes
    assert results == dict.fromkeys(ALL, "ok")
    broken.clear_faults()
    broken.set_fault(SITES[:1], Fault(delay=3.0))
    counts, results = fetch(broken, tmp_path / "beyond", slow)
    line = only(results, "throughput")
    assert counts["timeout"] == 2 and counts["task_max_ms"] > 5000
    assert line.startswith("throughput ") and "of the politeness limit: the slowest task took" in line
    assert "below gates.min_throughput_share 30%" in line


def test_politeness_counts_gaps_shorter_than_the_delay_checked(web, tmp_path, monkeypatch):
    # A correct fetcher never goes closer than the delay it schedules with, so the gate is
    # tripped by measuring its real gaps (fetcher.client.Client._measure, the rows, the step's
    # counts) against a stricter delay than it scheduled with; the server's own log (simweb's
    # audit) sees the same gaps as too short for that delay.
    web.clear_log()
    counts, results = fetch(web, tmp_path / "polite")
    assert results["politeness"] == "ok" and counts["politeness_violations"] == 0
    assert audit.politeness_violations(web.request_log(), SETTINGS.min_delay_s) == []
    strict = 0.5

    def stricter(settings, **kw):
        return Client(replace(settings, min_delay_s=strict), **kw)

    monkeypatch.setattr(fetcher.run, "Client", stricter)
    web.clear_log()
    counts, results = fetch(web, tmp_path / "strict")
    line = only(results, "politeness")
    # every request after a host's first started about min_delay_s after the previous one
    assert counts["politeness_violations"] == counts["requests"] - counts["hosts"] > 0
    assert 0.3 * 1000 < counts["politeness_worst_short_ms"] <= strict * 1000
    assert line == (f"{counts['politeness_violations']} request(s) started sooner than their "
                    f"host's delay after the previous response (worst by "
                    f"{counts['politeness_worst_short_ms']} ms)")
    assert audit.politeness_violations(web.request_log(), strict)


def test_step_counts_sum_a_hosts_records_across_tasks():
    from fetcher.stats import percentile, step_counts

    hosts = [{"host": "a", "requests": 2, "violations": 1, "worst_short_ms": 5},
             {"host": "a", "requests": 3, "worst_short_ms": 9, "robots_unavailable": True},
             {"host": "b", "requests": 1}]
    c = step_counts({"fetched": 3, "timeout": 1}, hosts,
                    [{"elapsed_ms": 10, "floor_ms": 4}, {"elapsed_ms": 7, "floor_ms": 6}])
    assert c["urls"] == 4 and c["hosts"] == 2 and c["requests"] == 6
    assert (c["politeness_violations"], c["politeness_worst_short_ms"]) == (1, 9)
    assert c["robots_unavailable_hosts"] == 1 and c["requests_per_host_max"] == 5
    assert (c["task_max_ms"], c["polite_floor_ms"]) == (10, 6)
    # Spark's percentile_approx on small data: the lower value at a tie, never interpolated
    assert percentile([1, 2, 3, 4], 0.5) == 2 and percentile(list(range(1, 11)), 0.9) == 9
    assert percentile([], 0.5) == 0 and percentile([7], 0.99) == 7
