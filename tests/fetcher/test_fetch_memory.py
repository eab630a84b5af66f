"""Bombs and oversized bodies keep a fetch task's memory bounded: peak RSS measured.

A fresh interpreter (so nothing else inflates its peak) fetches a normal page first, records
its peak RSS, then fetches simweb's 1 GiB gzip and brotli bombs, a 50 MiB body and a
close-delimited one, all at once on four threads, and records the peak again. The growth
must stay a small multiple of the caps (2 MiB on the wire, 8 MiB decoded per exchange).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from simweb import SimWeb

SCRIPT = textwrap.dedent("""
    import json, resource, sys, tempfile
    from fetcher import Fetcher, FetchItem, FetchSettings

    port = int(sys.argv[1])
    url = lambda h, p: f"http://{h}.sim.test:{port}{p}"
    s = FetchSettings(min_delay_s=0.1, static_hosts={"*.sim.test": "127.0.0.1"},
                      allow_private_networks=("127.0.0.1/32",), time_budget_s=60.0,
                      read_timeout_s=5.0, request_deadline_s=20.0, threads=4)
    peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with tempfile.TemporaryDirectory() as d:
        Fetcher(s, d, "warm").run([FetchItem(url("site0", "/"))])
        before = peak()
        items = [FetchItem(url("bomb", p)) for p in ("/gzipbomb", "/brbomb", "/huge", "/nolength")]
        out = Fetcher(s, d, "bomb").run(items)
        after = peak()
    rows = {r["url"].rsplit("/", 1)[-1]: [r["fetch_status"], r.get("truncated")] for r in out.rows}
    print(json.dumps({"before": before, "after": after, "rows": rows}))
""")


@pytest.fixture(scope="module")
def web():
    with SimWeb(seed=1, n_sites=1, pages_per_site=2) as w:  # started and stopped by the context manager
        yield w


def test_peak_rss_stays_bounded_under_bombs_and_huge_bodies(web):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(web.port)], capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    growth_mib = (res["after"] - res["before"]) / 2**20
    print(f"\npeak RSS {res['before'] / 2**20:.0f} MiB -> {res['after'] / 2**20:.0f} MiB "
          f"(+{growth_mib:.1f} MiB) for 2 GiB of bombs and 50 MiB of body; {res['rows']}")
    rows = res["rows"]
    assert rows["gzipbomb"][0] == "too_large" and rows["brbomb"][0] == "too_large"
    assert rows["huge"][1] is True  # truncated at max_body_bytes
    assert growth_mib < 64, res
