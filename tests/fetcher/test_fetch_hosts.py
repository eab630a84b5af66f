"""The run's host table: workers add hosts (cross-host robots.txt redirects) while another
thread walks them, and two workers may add the same host at once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from fetcher.dns import Resolver, SSRFGuard
from fetcher.hosts import Hosts
from fetcher.settings import FetchSettings


def make() -> Hosts:
    return Hosts(FetchSettings(), Resolver(lookup=lambda h: "127.0.0.1"), SSRFGuard(), {},
                 lambda: datetime.now(UTC))


def test_a_host_added_while_the_hosts_are_walked_does_not_break_the_walk():
    hosts = make()
    for i in range(3):
        hosts.get_or_add(f"http://h{i}.test:80")
    seen = []
    for h in hosts:  # a dict view would raise "dictionary changed size during iteration"
        seen.append(h.key)
        hosts.get_or_add(f"http://new-{h.key[7:]}")
    assert seen == ["http://h0.test:80", "http://h1.test:80", "http://h2.test:80"]
    assert len(list(hosts)) == 6


def test_workers_racing_to_add_one_host_get_the_same_host():
    hosts = make()
    start = threading.Barrier(8)
    got = []

    def add():
        start.wait()
        got.append(hosts.get_or_add("http://same.test:80"))

    threads = [threading.Thread(target=add) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(h) for h in got}) == 1
    assert [h.key for h in hosts] == ["http://same.test:80"]
