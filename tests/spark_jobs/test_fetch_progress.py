"""Fetch progress without Spark: a real Fetcher over simweb writes its status record through
the WARCs' storage while it runs, and the driver's monitor (spark_jobs.fetch_progress) prints
lines from it before the fetch ends. The Spark rounds assert the same end to end
(test_round_e2e on local[*], test_cluster on the standalone cluster)."""

from __future__ import annotations

import io
import json
import re
import threading

from fetcher import Fetcher, FetchItem
from fetcher.progress import aggregate, summarize
from fetcher.storage import Storage
from simweb import SimWeb
from spark_jobs.fetch_progress import FetchMonitor
from tests.fetcher.conftest import local_settings

LINE = re.compile(r"^fetch r1: (\d+)/(\d+) URLs")


def test_progress_lines_arrive_while_the_fetch_runs(tmp_path):
    with SimWeb(seed=3, n_sites=1, pages_per_site=4) as web:
        t = web.truth
        site = next(h for h in web.hosts() if h.startswith("site"))
        # slow.sim.test answers /slow after 3 s: the fetch outlasts several progress intervals
        items = [FetchItem(u) for u in t.pages(site)] + [
            FetchItem(t.url("slow.sim.test", p)) for p in ("/", "/slow")]
        status_dir = tmp_path / "progress"
        fetcher = Fetcher(local_settings(min_delay_s=0.2), str(tmp_path / "warc"), "r1-p00000",
                          status_uri=str(status_dir / "p00000.json"), status_interval_s=0.2)
        result = {}
        run = threading.Thread(target=lambda: result.update(out=fetcher.run(items)))
        out = io.StringIO()
        monitor = FetchMonitor(Storage(), str(status_dir), "fetch r1", len(items), 1, 0.2, out)
        seen = []  # (line, whether the fetch was still running when it was printed)
        stop = threading.Event()
        run.start()
        while run.is_alive():
            stop.wait(0.25)  # the monitor's own pace; what is asserted is order, not time
            seen.append((monitor.report(), run.is_alive()))
        run.join()
        final = monitor.report()
    running = [line for line, alive in seen if alive and LINE.match(line)]
    assert running, seen
    done, listed = map(int, LINE.match(running[0]).groups())
    assert listed == len(items) and done < listed  # a line before the end, with URLs left
    assert "slow.sim.test" in " ".join(running)  # the host holding the step open is named
    assert "ETA" in running[0] and "pages/s now" in running[0]
    # the last record is final and agrees with the rows
    rows = result["out"].rows
    record = json.loads((status_dir / "p00000.json").read_text())
    assert record["final"] and record["done"] == len(rows) == len(items)
    statuses = {}
    for r in rows:
        statuses[r["fetch_status"]] = statuses.get(r["fetch_status"], 0) + 1
    assert record["outcomes"] == statuses
    assert final.startswith(f"fetch r1: {len(items)}/{len(items)} URLs (100%)")
    assert out.getvalue().count("\n") == len(seen) + 1  # plain lines: not a terminal
    # the run's request statistics for the gates: polite, and the floor below the time taken
    hosts = {h["host"]: h for h in result["out"].hosts}
    assert sum(h["violations"] for h in hosts.values()) == 0
    assert all(h["requests"] >= 1 for h in hosts.values())
    stats = result["out"].stats
    assert 0 < stats["floor_ms"] <= stats["elapsed_ms"]


def test_summary_of_several_tasks():
    records = [
        {"done": 3, "listed": 10, "bytes": 2_500_000, "requests": 5, "hosts_active": 1,
         "hosts_waiting": 2, "hosts_deferred": 0, "outcomes": {"fetched": 2, "timeout": 1},
         "slowest": [["http://a:80", 7, 14.0]], "eta_s": 14.0},
        {"done": 5, "listed": 5, "bytes": 0, "requests": 5, "hosts_active": 0,
         "hosts_waiting": 0, "hosts_deferred": 1, "outcomes": {"fetched": 4, "weird": 1},
         "slowest": [], "eta_s": 0.0, "final": True},
    ]
    total = aggregate(records)
    assert total["done"] == 8 and total["final"] == 1 and total["outcomes"]["fetched"] == 6
    line = summarize("fetch 20261101", total, 15, 1.5, 0.8, 3)
    assert line == ("fetch 20261101: 8/15 URLs (53%); 1.5 pages/s now, 0.8 overall; 2.5 MB; "
                    "hosts 1 active, 2 waiting, 1 deferred; tasks 2/3 reporting; "
                    "fetched 6, timeout 1, other 1; slowest: http://a:80 (7 left, ~14s); ETA 14s")
